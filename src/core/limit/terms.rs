//! A limit built from the terms an ask carries (`--runtime-limits`): the
//! fields of a `[[limits]]` table that say how it counts, checked by the
//! same rules and in the same words as the config's limits are.
//!
//! Only builds and compares limits; the table that creates them on first
//! use is `core::locker::runtime`.

use super::{Algorithm, Limit, LimitError, Quota};

/// Why terms sent with an ask do not make a limit: the config's own
/// message for the same table, after the limit's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TermsError {
    #[error("limit {name:?}: {source}")]
    Limit { name: String, source: LimitError },
    #[error("limit {0:?}: burst is only for algorithm = \"token-bucket\"")]
    BurstWithoutBucket(String),
    #[error(
        "limit {name:?}: unknown algorithm {got:?} (terms take fixed-window, token-bucket or rolling-window; a semaphore is configured)"
    )]
    Algorithm { name: String, got: String },
    #[error("limit {name:?}: {field} must be at most {}, got {got}", u32::MAX)]
    TooLarge { name: String, field: &'static str, got: u64 },
}

impl Limit {
    /// The limit `name` of `max_requests` per `in_seconds`, counted by
    /// `algorithm` ("fixed-window", "token-bucket" with `burst`, default
    /// max_requests, or "rolling-window"), as a `[[limits]]` table of those
    /// fields would build it. A semaphore is not among them: its leases
    /// outlive any one ask, so only the operator defines one.
    ///
    /// ```
    /// use locker::core::Limit;
    ///
    /// let limit = Limit::from_terms("tenant-7", "token-bucket", 10, 1.0, Some(20)).unwrap();
    /// assert_eq!(limit.capacity(), 20);
    /// let e = Limit::from_terms("tenant-7", "fixed-window", 0, 1.0, None).unwrap_err();
    /// assert_eq!(e.to_string(), "limit \"tenant-7\": max_requests must be at least 1");
    /// ```
    pub fn from_terms(
        name: &str,
        algorithm: &str,
        max_requests: u64,
        in_seconds: f64,
        burst: Option<u64>,
    ) -> Result<Limit, TermsError> {
        let err = |source| TermsError::Limit { name: name.to_owned(), source };
        let narrow = |field, got: u64| {
            u32::try_from(got).map_err(|_| TermsError::TooLarge { name: name.to_owned(), field, got })
        };
        let max = narrow("max_requests", max_requests)?;
        let algorithm = match (algorithm, burst) {
            ("token-bucket", burst) => Algorithm::token_bucket(narrow("burst", burst.unwrap_or(max_requests))?),
            (_, Some(_)) => return Err(TermsError::BurstWithoutBucket(name.to_owned())),
            ("fixed-window", None) => Ok(Algorithm::FixedWindow),
            ("rolling-window", None) => Ok(Algorithm::RollingWindow),
            (got, None) => return Err(TermsError::Algorithm { name: name.to_owned(), got: got.to_owned() }),
        };
        Limit::with_algorithm(name, Quota::new(max, in_seconds).map_err(err)?, algorithm.map_err(err)?).map_err(err)
    }

    /// The terms `from_terms` builds this limit from again: its
    /// algorithm's name, max_requests, in_seconds and a bucket's burst.
    pub fn terms(&self) -> (&'static str, u64, f64, Option<u64>) {
        let burst = match self.algorithm() {
            Algorithm::TokenBucket { burst } => Some(u64::from(burst.get())),
            _ => None,
        };
        (self.algorithm().name(), u64::from(self.quota().max_requests()), self.in_seconds(), burst)
    }

    /// Whether `other` counts as this limit does: the same kind, count,
    /// slot length (without a rolling window's margin) and burst, and
    /// neither counts by calendar periods. Terms sent with an ask say no
    /// more than these (they name no period).
    pub fn counts_as(&self, other: &Limit) -> bool {
        let slot = |l: &Limit| l.quota().slot_ns() - l.margin();
        self.algorithm() == other.algorithm()
            && self.quota().max_requests() == other.quota().max_requests()
            && slot(self) == slot(other)
            && self.quota().calendar() == other.quota().calendar()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_checked_as_a_config_table_is() {
        let bad = |alg, max, secs, burst| Limit::from_terms("t", alg, max, secs, burst).unwrap_err().to_string();
        assert_eq!(
            bad("fixed-window", 1, 0.0, None),
            "limit \"t\": in_seconds must be a number from 0.001 to 86400, got 0"
        );
        assert_eq!(bad("fixed-window", 1, 1.0, Some(3)), "limit \"t\": burst is only for algorithm = \"token-bucket\"");
        assert_eq!(bad("token-bucket", 1, 1.0, Some(0)), "limit \"t\": burst must be at least 1");
        assert!(bad("semaphore", 1, 1.0, None).contains("unknown algorithm \"semaphore\""));
        assert!(bad("fixed-window", 1 << 32, 1.0, None).contains("max_requests must be at most 4294967295"));
        assert!(bad("token-bucket", 1, 86_400.0, Some(1_000_000)).contains("365 days"));
        let t = Limit::from_terms("bad name", "fixed-window", 1, 1.0, None).unwrap_err().to_string();
        assert!(t.contains("a limit name must be"), "{t}");
    }

    #[test]
    fn a_bucket_bursts_to_max_requests_unless_told_and_kinds_compare_by_their_terms() {
        let b = Limit::from_terms("t", "token-bucket", 10, 1.0, None).unwrap();
        assert_eq!(b.capacity(), 10);
        let w = |max, secs| Limit::from_terms("t", "fixed-window", max, secs, None).unwrap();
        assert!(w(5, 0.8).counts_as(&w(5, 0.8)));
        assert!(!w(5, 0.8).counts_as(&w(6, 0.8)) && !w(5, 0.8).counts_as(&w(5, 1.0)) && !w(10, 1.0).counts_as(&b));
        let (alg, max, secs, burst) = b.terms();
        assert_eq!(Limit::from_terms("t", alg, max, secs, burst).unwrap().digest(), b.digest());
        let margined = Limit::from_terms("t", "rolling-window", 5, 1.0, None).unwrap().with_margin(20.0).unwrap();
        assert!(margined.counts_as(&Limit::from_terms("t", "rolling-window", 5, 1.0, None).unwrap()));
    }
}
