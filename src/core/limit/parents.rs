//! Limits under parents (org > team > user): the rules the `parent` names
//! of a set of limits must keep, checked once over the whole set, so that
//! every chain of parents names limits that exist, ends, and is at most
//! [`MAX_LEVELS`] deep.
//!
//! This only checks names. Taking an ask's cost from every level of its
//! chain, all or nothing, is the table's (`Locker::all`); finding the key
//! of each level is the service's.

use super::{Algorithm, Limit, DEFAULT_LIMIT};

/// The most levels one chain may hold: the limit asked and 7 above it. An
/// ask of the deepest limit is decided as an `all` of its chain, whose
/// parts are bounded too (`MAX_PARTS`, 16): two such chains still fit in
/// one `all`.
pub const MAX_LEVELS: usize = 8;

/// Why a limit's `parent` cannot be: each message follows the limit's
/// name (`limit "user": parent "tem" is not defined ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParentError {
    #[error("parent {0:?} is not defined: a parent is another limit of the same config")]
    Unknown(String),
    #[error("parent {parent:?} closes a cycle: {path}")]
    Cycle { parent: String, path: String },
    #[error("parents go more than {MAX_LEVELS} levels deep: {path} (a limit and at most 7 above it)")]
    TooDeep { path: String },
    #[error("a semaphore takes no parent: its leases are held and released, not spent")]
    SemaphoreChild,
    #[error("parent {0:?} is a semaphore: only the counting kinds may be parents")]
    SemaphoreParent(String),
    #[error("the default limit takes no parent: the plain form asks it, and names no keys for parents")]
    Default,
}

/// Checks the parents of `limits`, every limit of a config (the default
/// among them): the first limit, in their order, whose `parent` breaks a
/// rule, by its index, with the rule.
///
/// ```
/// use locker::core::limit::parents;
/// use locker::core::{Limit, Quota};
///
/// let limit = |name: &str, parent: &str| Limit::new(name, Quota::new(5, 1.0).unwrap()).unwrap().with_parent(Some(parent));
/// let (user, team) = (limit("user", "team"), limit("team", "user"));
/// let (at, e) = parents::check(&[&user, &team]).unwrap_err();
/// assert_eq!(at, 0);
/// assert_eq!(e.to_string(), "parent \"team\" closes a cycle: user > team > user");
/// ```
pub fn check(limits: &[&Limit]) -> Result<(), (usize, ParentError)> {
    let by_name: std::collections::HashMap<&str, usize> =
        limits.iter().enumerate().map(|(i, l)| (l.name(), i)).collect();
    for (i, limit) in limits.iter().enumerate() {
        if let Some(parent) = limit.parent() {
            check_one(limits, &by_name, i, parent).map_err(|e| (i, e))?;
        }
    }
    Ok(())
}

/// Checks limit `i`'s own parent, `parent`, and walks its chain up to
/// where it ends (a limit without a parent, or one whose own parent is
/// unknown: that limit is checked in its turn).
fn check_one(
    limits: &[&Limit],
    by_name: &std::collections::HashMap<&str, usize>,
    i: usize,
    parent: &str,
) -> Result<(), ParentError> {
    let semaphore = |l: &Limit| l.algorithm() == Algorithm::Semaphore;
    if limits[i].name() == DEFAULT_LIMIT {
        return Err(ParentError::Default);
    }
    if semaphore(limits[i]) {
        return Err(ParentError::SemaphoreChild);
    }
    let Some(&first) = by_name.get(parent) else { return Err(ParentError::Unknown(parent.to_owned())) };
    if semaphore(limits[first]) {
        return Err(ParentError::SemaphoreParent(parent.to_owned()));
    }
    let mut path = vec![i];
    let mut at = Some(first);
    while let Some(next) = at {
        let names = |path: &[usize], last: usize| {
            let mut names: Vec<&str> = path.iter().map(|&j| limits[j].name()).collect();
            names.push(limits[last].name());
            names.join(" > ")
        };
        if path.contains(&next) {
            return Err(ParentError::Cycle { parent: parent.to_owned(), path: names(&path, next) });
        }
        if path.len() == MAX_LEVELS {
            return Err(ParentError::TooDeep { path: names(&path, next) });
        }
        path.push(next);
        at = limits[next].parent().and_then(|p| by_name.get(p).copied());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Quota;

    fn limit(name: &str, parent: Option<&str>) -> Limit {
        Limit::new(name, Quota::new(5, 1.0).unwrap()).unwrap().with_parent(parent)
    }

    fn checked(limits: &[Limit]) -> Result<(), (usize, String)> {
        let refs: Vec<&Limit> = limits.iter().collect();
        check(&refs).map_err(|(i, e)| (i, e.to_string()))
    }

    #[test]
    fn a_chain_of_known_counting_limits_is_kept() {
        let limits = [limit("user", Some("team")), limit("team", Some("org")), limit("org", None), limit("api", None)];
        assert_eq!(checked(&limits), Ok(()));
    }

    #[test]
    fn an_unknown_parent_a_cycle_and_a_self_parent_are_refused_at_the_limit_that_names_them() {
        let unknown = [limit("org", None), limit("user", Some("tem"))];
        assert_eq!(checked(&unknown).unwrap_err().0, 1);
        assert!(checked(&unknown).unwrap_err().1.contains("\"tem\" is not defined"));
        let cycle = [limit("org", None), limit("a", Some("b")), limit("b", Some("c")), limit("c", Some("a"))];
        assert_eq!(checked(&cycle), Err((1, "parent \"b\" closes a cycle: a > b > c > a".to_owned())));
        let itself = [limit("me", Some("me"))];
        assert_eq!(checked(&itself), Err((0, "parent \"me\" closes a cycle: me > me".to_owned())));
    }

    #[test]
    fn eight_levels_are_allowed_and_nine_are_not() {
        let chain = |n: usize| -> Vec<Limit> {
            (0..n).map(|i| limit(&format!("l{i}"), (i + 1 < n).then(|| format!("l{}", i + 1)).as_deref())).collect()
        };
        assert_eq!(checked(&chain(MAX_LEVELS)), Ok(()));
        let (at, e) = checked(&chain(MAX_LEVELS + 1)).unwrap_err();
        assert_eq!(at, 0);
        assert_eq!(
            e,
            "parents go more than 8 levels deep: l0 > l1 > l2 > l3 > l4 > l5 > l6 > l7 > l8 (a limit and at most 7 above it)"
        );
    }

    #[test]
    fn semaphores_and_the_default_limit_stay_out_of_chains() {
        let q = Quota::new(5, 1.0).unwrap();
        let db = Limit::with_algorithm("db", q, Algorithm::Semaphore).unwrap();
        assert!(checked(&[limit("user", Some("db")), db.clone()]).unwrap_err().1.contains("\"db\" is a semaphore"));
        let child = db.with_parent(Some("org"));
        assert!(checked(&[child, limit("org", None)]).unwrap_err().1.starts_with("a semaphore takes no parent"));
        let default = [limit(DEFAULT_LIMIT, Some("org")), limit("org", None)];
        assert!(checked(&default).unwrap_err().1.starts_with("the default limit takes no parent"));
        assert_eq!(checked(&[limit("user", Some(DEFAULT_LIMIT)), limit(DEFAULT_LIMIT, None)]), Ok(()));
    }
}
