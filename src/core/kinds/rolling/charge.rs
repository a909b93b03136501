//! Permits charged to a rolling window after they were used (`op:
//! charge`): recorded as grants at the charge instant, whatever room is
//! left, so a window may count more than max_requests; asks get sorry until
//! enough grants leave it, and `fit` already says exactly when.
//!
//! Behind a reservation queued for the key, the grant is recorded at the
//! reservation's instant (grants are kept in the order their callers go),
//! which only makes the debt last as long as that. Peered, the grant is
//! charged to this locker's rights: it grants nothing more until its own
//! grants leave the window or a peer gives it rights; the counts it
//! repairs tell peers of the grants, whose rights are untouched. No
//! clock: the caller brings `now`.

use super::RollingWindow;
use crate::core::ask::{Charged, Verdict};
use crate::core::room::{Leeway, NoRoom};
use crate::core::time::Nanos;

impl RollingWindow {
    /// Records `cost` permits of `key` going at `now`, past max_requests if
    /// need be, on `terms`. Call `advance` first.
    pub fn charge(&mut self, now: Nanos, key: Option<&str>, cost: u32, terms: Leeway) -> Result<Charged, NoRoom> {
        let (span, share) = (self.span, terms.share);
        let rights = share.conserved().then(|| share.rolling_rights(self.quota, span.window_of(now)));
        let log = self.log_entry(key, terms.room)?;
        log.prune(now, span);
        let at = now.max(log.last);
        log.add_own(at, cost, span, share.conserved());
        let (remaining, debt) = match rights {
            Some(initial) => {
                (log.free(now, span, initial, share.resumes).0, log.owed(now, span, initial, share.resumes))
            }
            None => {
                let counted = u32::try_from(log.peak(at, span)).unwrap_or(u32::MAX);
                (log.fit(now, span, 1).room_now, counted.saturating_sub(span.max))
            }
        };
        let reset_after = log.empty_at(span).saturating_sub(now);
        let verdict = Verdict { wait: at - now, ..Verdict::go(span.max, remaining, reset_after, cost) };
        Ok(Charged { verdict, debt })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ask::Want;
    use crate::core::limit::Quota;
    use crate::core::room::KeyRoom;

    const MS: Nanos = 1_000_000;

    #[test]
    fn a_charge_past_max_counts_until_its_grants_leave_the_window() {
        // 4 per second, exact.
        let mut r = RollingWindow::new(Quota::new(4, 1.0).unwrap());
        let t = 10_000 * MS;
        assert!(r.take(t, Some("k"), Want::now(2), KeyRoom::Free).unwrap().go);
        let c = r.charge(t + 100 * MS, Some("k"), 5, Leeway::ALONE).unwrap();
        assert_eq!((c.verdict.go, c.verdict.granted, c.verdict.remaining, c.debt), (true, 5, 0, 3));
        assert_eq!(c.verdict.reset_after, 1_000 * MS);
        // 7 counted: the 2 leave at t + 1 s, which leaves 5, still over
        // 4; the 5 leave at t + 1.1 s.
        let v = r.take(t + 200 * MS, Some("k"), Want::now(1), KeyRoom::Free).unwrap();
        assert!(!v.go);
        assert_eq!(v.retry_after, 900 * MS);
        assert!(!r.take(t + 1_100 * MS - 1, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go);
        assert!(r.take(t + 1_100 * MS, Some("k"), Want::now(4), KeyRoom::Free).unwrap().go);
    }
}
