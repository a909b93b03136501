//! A kept form moved by a step of the wall clock between two runs, to the
//! nanosecond: an earlier run's saved grants count in the slots of this
//! run's clock that their real instants fall in.
//!
//! Slots are numbered by the wall clock, so a step that is not a whole
//! number of slots puts this run's slot boundaries at other real instants
//! than the earlier run's. Rounding the step to whole slots would move a
//! saved count into a slot its grants never went in (and out of the one
//! they did, which then grants them again). So nothing is rounded. A
//! fixed window's count is put in every slot of this run's clock that its
//! grants may have gone in (between their slot's start and the record's
//! last write); and while the earlier run's slot has not ended, in every
//! slot of this run's clock that the rest of it overlaps too, so that the
//! restart grants nothing more in the slot those grants went in, by either
//! clock. A rolling window's count goes in the sub-slot holding its
//! sub-slot's last instant (it then counts no shorter than it did), and a
//! bucket's and a lease's instants move by the step: neither has slots to
//! keep. Pure: it takes the step and the instants, and reads no clock.

use crate::core::kinds::rolling::RollingWindow;
use crate::core::kinds::semaphore::kept::HeldLease;
use crate::core::kinds::Kept;
use crate::core::share::exchange::KeptExchange;
use crate::core::{Algorithm, Nanos, Quota};

/// Moves `t` by `step` nanoseconds.
fn moved(t: Nanos, step: i64) -> Nanos {
    t.saturating_add_signed(step)
}

/// When a saved count was written, on its writer's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The record's last write.
    pub at: Nanos,
    /// When the writer granted it itself (rather than carrying it over
    /// from a run before it), the instant this run starts, on the
    /// writer's clock: the rest of the writer's slot from then on is held
    /// too. `None` for a count carried over, which holds only where its
    /// grants went.
    pub own_until: Option<Nanos>,
}

/// `kept`, `written` by a run whose wall clock read `step` nanoseconds
/// less than this run's at the same real instant, for a limit of kind
/// `algorithm` with `quota`, on this run's clock: one kept form, or two
/// when a fixed window's count must hold in two slots of this run's clock
/// (each then holds the whole count: which grant went where is not kept).
pub fn retimed(kept: Kept, algorithm: Algorithm, quota: Quota, written: Written, step: i64) -> (Kept, Option<Kept>) {
    match (algorithm, kept) {
        (Algorithm::FixedWindow, Kept::Window { slot, count }) => {
            let (first, last) = fixed_span(quota, slot, written);
            let (from, to) = (quota.slot_of(moved(first, step)), quota.slot_of(moved(last, step)));
            (Kept::Window { slot: from, count }, (to != from).then_some(Kept::Window { slot: to, count }))
        }
        (Algorithm::RollingWindow, Kept::Window { slot, count }) => {
            let unit = RollingWindow::sub_slot_ns(quota);
            let last = slot.saturating_add(1).saturating_mul(unit).saturating_sub(1);
            (Kept::Window { slot: moved(last, step) / unit, count }, None)
        }
        (_, Kept::Bucket { tat, period, count }) => {
            let period = period.saturating_add_signed(period_shift(quota, written, step));
            (Kept::Bucket { tat: moved(tat, step), period, count }, None)
        }
        // A bucket's share moves as its count does.
        (Algorithm::TokenBucket { .. }, Kept::Exchange(e)) => {
            let period = e.period.saturating_add_signed(period_shift(quota, written, step));
            (Kept::Exchange(KeptExchange { tat: moved(e.tat, step), period, ..e }), None)
        }
        // What a window's exchange gave goes to every slot its count would
        // (the gifts left in the same instants as the grants), and what it
        // got is dropped, since which slot it may be used in is not known:
        // a restart then owns less, never more. A rolling window's windows
        // are numbered as a fixed window's slots.
        (_, Kept::Exchange(e)) => {
            let gave = |k| match k {
                Kept::Window { slot, count } => Kept::Exchange(KeptExchange { period: slot, gave: count, got: 0, ..e }),
                k => k,
            };
            let count = Kept::Window { slot: e.period, count: e.gave };
            let (first, second) = retimed(count, Algorithm::FixedWindow, quota, written, step);
            (gave(first), second.map(gave))
        }
        (_, Kept::Lease(held)) => (Kept::Lease(HeldLease { until: moved(held.until, step), ..held }), None),
        (_, kept) => (kept, None),
    }
}

/// How many periods later the instant a record was `written` falls on
/// this run's clock.
fn period_shift(quota: Quota, written: Written, step: i64) -> i64 {
    quota.slot_of(moved(written.at, step)) as i64 - quota.slot_of(written.at) as i64
}

/// The instants, on the writer's clock, a fixed window's saved count in
/// `slot` must hold over: where its grants went, from the slot's start to
/// the record's last write within it (a reservation, written before its
/// slot, at the slot's start, where its caller was told to go); and the
/// whole slot when the writer granted it and the slot had not ended when
/// this run started.
fn fixed_span(quota: Quota, slot: u64, written: Written) -> (Nanos, Nanos) {
    let first = quota.slot_start(slot);
    let end = quota.slot_end(slot).saturating_sub(1).max(first);
    match written.own_until {
        Some(start) if start <= end => (first, end),
        _ => (first, written.at.clamp(first, end)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Nanos = 1_000_000_000;

    fn window(slot: u64) -> Kept {
        Kept::Window { slot, count: 100 }
    }

    /// Carried over, or granted by a run whose slot ended before this run started.
    fn at(at: Nanos) -> Written {
        Written { at, own_until: None }
    }

    #[test]
    fn a_step_of_part_of_a_slot_puts_a_fixed_windows_count_where_its_grants_went() {
        let q = Quota::new(100, 10.0).unwrap();
        let fixed = |slot, written, step: i64| retimed(window(slot), Algorithm::FixedWindow, q, at(written), step);
        // Granted up to 6.5 s into slot 1 ([10 s, 16.5 s]); 4 s ahead that is
        // [14 s, 20.5 s]: slots 1 and 2 of the new clock (rounding kept it in 1).
        assert_eq!(fixed(1, 16_500_000_000, 4 * SEC as i64), (window(1), Some(window(2))));
        // 4 s back, [6 s, 12.5 s]: slots 0 and 1.
        assert_eq!(fixed(1, 16_500_000_000, -4 * SEC as i64), (window(0), Some(window(1))));
        // Granted up to 1.5 s in, 4 s back: [6 s, 7.5 s], slot 0 alone (rounding kept it in 1).
        assert_eq!(fixed(1, 11_500_000_000, -4 * SEC as i64), (window(0), None));
        // A whole hour moves it by 360 slots, as before.
        assert_eq!(fixed(1, 16_500_000_000, 3_600 * SEC as i64), (window(361), None));
        // A reservation in slot 3, written in slot 1: its caller goes at 30 s, 34 s on the new clock.
        assert_eq!(fixed(3, 16_500_000_000, 4 * SEC as i64), (window(3), None));
        assert_eq!(fixed(3, 16_500_000_000, -4 * SEC as i64), (window(2), None));
        // One nanosecond is not rounded away.
        assert_eq!(fixed(1, 19_999_999_999, 1), (window(1), Some(window(2))));
        assert_eq!(fixed(1, 16_500_000_000, 0), (window(1), None), "no step, no move");
    }

    #[test]
    fn a_count_its_writer_granted_in_a_slot_not_yet_ended_holds_over_the_rest_of_that_slot() {
        let q = Quota::new(100, 10.0).unwrap();
        let own = |written, start| Written { at: written, own_until: Some(start) };
        let fixed = |written, step: i64| retimed(window(1), Algorithm::FixedWindow, q, written, step);
        // Granted 1.5 s into slot 1, restarted at 1.7 s 4 s back: the grants
        // went in [6 s, 7.5 s] (slot 0), the slot's rest is [7.7 s, 16 s) (slots 0 and 1).
        let back = -4 * SEC as i64;
        assert_eq!(fixed(own(11_500_000_000, 11_700_000_000), back), (window(0), Some(window(1))));
        assert_eq!(fixed(at(11_500_000_000), back), (window(0), None), "carried over: where they went only");
        // Restarted after the slot ended: where they went only.
        assert_eq!(fixed(own(11_500_000_000, 20_000_000_000), back), (window(0), None));
    }

    #[test]
    fn a_rolling_windows_count_moves_to_the_sub_slot_of_its_last_instant_and_instants_move_exactly() {
        // Sub-slots of 156.25 ms.
        let q = Quota::new(3, 10.0).unwrap();
        let rolling = |slot, step| retimed(window(slot), Algorithm::RollingWindow, q, at(0), step).0;
        assert_eq!(rolling(64, 100_000_000), window(65), "[10 s, 10.156 s) + 0.1 s ends in sub-slot 65");
        assert_eq!(rolling(64, -100_000_000), window(64), "its last instant, 10.056 s, still in 64");
        assert_eq!(rolling(64, -200_000_000), window(63));
        let lease = Kept::Lease(HeldLease { count: 1, ttl: SEC, until: 2 * SEC });
        let moved = Kept::Lease(HeldLease { count: 1, ttl: SEC, until: 2 * SEC + 7 });
        assert_eq!(retimed(lease, Algorithm::Semaphore, q, at(SEC), 7), (moved, None), "to the nanosecond");
        let bucket = |tat, period| Kept::Bucket { tat, period, count: 2 };
        let b = Algorithm::TokenBucket { burst: std::num::NonZeroU32::new(3).unwrap() };
        assert_eq!(retimed(bucket(19 * SEC, 1), b, q, at(16 * SEC), 4 * SEC as i64), (bucket(23 * SEC, 2), None));
        assert_eq!(retimed(bucket(19 * SEC, 1), b, q, at(12 * SEC), 4 * SEC as i64), (bucket(23 * SEC, 1), None));
    }
}
