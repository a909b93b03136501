//! Unit tests of `semaphore`.

// The semaphore's rules with literal instants, and a property test of expiry.

use super::*;

const MS: Nanos = 1_000_000;

fn held(v: LeaseVerdict) -> bool {
    matches!(v.state, LeaseState::Held { .. })
}

#[test]
fn leases_take_capacity_until_released_or_expired() {
    let mut s = Semaphore::new(3);
    assert!(held(s.acquire(0, "a", Hold { count: 2, ttl: 100 * MS, max_wait: 0 })));
    let v = s.acquire(0, "b", Hold { count: 2, ttl: 100 * MS, max_wait: 0 });
    assert_eq!(v.state, LeaseState::Refused);
    assert_eq!(v.free, 1);
    assert_eq!(s.release(10 * MS, "a").state, LeaseState::Released);
    assert_eq!(s.release(10 * MS, "a").state, LeaseState::Unknown);
    assert!(held(s.acquire(10 * MS, "b", Hold { count: 2, ttl: 100 * MS, max_wait: 0 })));
    assert_eq!(s.next_deadline(), Some(110 * MS));
    assert_eq!(s.advance(110 * MS - 1), 0, "not a nanosecond early");
    assert_eq!(s.advance(110 * MS), 1, "exactly on time");
    assert_eq!(s.free(), 3);
    assert_eq!(s.next_deadline(), None);
}

#[test]
fn a_heartbeat_extends_a_lease() {
    let mut s = Semaphore::new(1);
    s.acquire(0, "a", Hold { count: 1, ttl: 100 * MS, max_wait: 0 });
    let v = s.heartbeat(90 * MS, "a", 100 * MS, None).unwrap();
    assert_eq!(v.state, LeaseState::Held { until: 190 * MS });
    assert_eq!(s.advance(150 * MS), 0);
    assert_eq!(s.next_deadline(), Some(190 * MS));
    assert_eq!(s.heartbeat(150 * MS, "nope", 100 * MS, None).unwrap().state, LeaseState::Unknown);
}

#[test]
fn waiters_are_served_first_come_first_served_and_big_ones_are_not_starved() {
    let mut s = Semaphore::new(3);
    s.acquire(0, "a", Hold { count: 2, ttl: 100 * MS, max_wait: 0 });
    s.acquire(0, "b", Hold { count: 1, ttl: 100 * MS, max_wait: 0 });
    assert!(matches!(
        s.acquire(1, "big", Hold { count: 3, ttl: 50 * MS, max_wait: 1_000 * MS }).state,
        LeaseState::Pending { .. }
    ));
    assert!(matches!(
        s.acquire(2, "small", Hold { count: 1, ttl: 50 * MS, max_wait: 1_000 * MS }).state,
        LeaseState::Pending { .. }
    ));
    assert_eq!(
        s.acquire(3, "eager", Hold { count: 1, ttl: 50 * MS, max_wait: 0 }).state,
        LeaseState::Refused,
        "no jumping the queue"
    );
    s.release(10 * MS, "b");
    assert_eq!(s.free(), 1, "one free, but the head needs three");
    assert!(matches!(s.heartbeat(11 * MS, "small", 50 * MS, None).unwrap().state, LeaseState::Pending { .. }));
    s.release(20 * MS, "a");
    assert_eq!(
        s.heartbeat(21 * MS, "big", 50 * MS, None).unwrap().state,
        LeaseState::Held { until: 71 * MS },
        "granted at 20 ms, beaten at 21 ms"
    );
    s.release(30 * MS, "big");
    let small = s.heartbeat(31 * MS, "small", 50 * MS, None).unwrap();
    assert_eq!(small.state, LeaseState::Held { until: 81 * MS });
}

#[test]
fn a_waiter_not_served_by_its_deadline_is_dropped_and_unblocks_the_queue() {
    let mut s = Semaphore::new(2);
    s.acquire(0, "a", Hold { count: 1, ttl: 1_000 * MS, max_wait: 0 });
    s.acquire(0, "big", Hold { count: 2, ttl: 100 * MS, max_wait: 50 * MS });
    s.acquire(1, "small", Hold { count: 1, ttl: 100 * MS, max_wait: 500 * MS });
    assert_eq!(s.next_deadline(), Some(50 * MS));
    s.advance(50 * MS);
    assert_eq!(s.heartbeat(51 * MS, "big", 100 * MS, None).unwrap().state, LeaseState::Unknown);
    assert_eq!(s.heartbeat(51 * MS, "small", 100 * MS, None).unwrap().state, LeaseState::Held { until: 151 * MS });
}

#[test]
fn a_heartbeat_with_a_count_restores_an_unknown_lease_if_it_fits() {
    let mut s = Semaphore::new(3);
    assert!(held(s.heartbeat(0, "old-1", 100 * MS, Some(2)).unwrap()));
    assert_eq!(s.heartbeat(0, "old-2", 100 * MS, Some(2)), Err(NoCapacity { free: 1 }));
    assert_eq!(
        s.acquire(0, "new", Hold { count: 2, ttl: 100 * MS, max_wait: 0 }).state,
        LeaseState::Refused,
        "restore cannot double capacity"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Acquire { count: u32, ttl_ms: u64, wait_ms: u64 },
    Heartbeat { lease: usize, ttl_ms: u64 },
    Release { lease: usize },
    Tick,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (1u32..=3, 1u64..200, 0u64..200).prop_map(|(count, ttl_ms, wait_ms)| Op::Acquire { count, ttl_ms, wait_ms }),
        (0usize..20, 1u64..200).prop_map(|(lease, ttl_ms)| Op::Heartbeat { lease, ttl_ms }),
        (0usize..20).prop_map(|lease| Op::Release { lease }),
        Just(Op::Tick),
    ]
}

proptest::proptest! {
    /// No lease outlives its ttl without a heartbeat, held counts never
    /// exceed the capacity, and the loop's next deadline is never missed.
    #[test]
    fn no_lease_outlives_its_ttl_without_a_heartbeat(
        ops in proptest::collection::vec((0u64..60, op()), 1..150),
    ) {
        let mut s = Semaphore::new(3);
        // The latest instant each lease may be held, by the test's own account.
        let mut may_hold: HashMap<String, Nanos> = HashMap::new();
        let mut ids = Vec::new();
        let mut now = 0;
        for (gap_ms, op) in ops {
            // The loop wakes at the next deadline before any later instant.
            let next = now + gap_ms * MS;
            // Bounded, so a deadline that does not clear fails instead of spinning.
            for _ in 0..100 {
                let Some(due) = s.next_deadline().filter(|&d| d <= next) else { break };
                s.advance(due.max(now));
                now = due.max(now);
                record_grants(&s, now, &ids, &mut may_hold);
                check(&s, now, &may_hold)?;
            }
            now = next;
            s.advance(now);
            match op {
                Op::Acquire { count, ttl_ms, wait_ms } => {
                    let id = format!("l{}", ids.len());
                    s.acquire(now, &id, Hold { count, ttl: ttl_ms * MS, max_wait: wait_ms * MS });
                    ids.push((id, ttl_ms * MS));
                }
                Op::Heartbeat { lease, ttl_ms } => {
                    if let Some((id, ttl)) = ids.get_mut(lease) {
                        let v = s.heartbeat(now, id, ttl_ms * MS, None).expect("no restore asked");
                        if held(v) {
                            *ttl = ttl_ms * MS;
                            may_hold.insert(id.clone(), now + *ttl);
                        }
                    }
                }
                Op::Release { lease } => {
                    if let Some((id, _)) = ids.get(lease) {
                        s.release(now, id);
                    }
                }
                Op::Tick => {}
            }
            record_grants(&s, now, &ids, &mut may_hold);
            check(&s, now, &may_hold)?;
        }
    }
}

/// Leases granted since the last look (at `now`: acquired or promoted) may
/// be held for their ttl from now.
fn record_grants(s: &Semaphore, now: Nanos, ids: &[(String, Nanos)], may_hold: &mut HashMap<String, Nanos>) {
    for (id, _, _) in s.holders() {
        let ttl = ids.iter().find(|(i, _)| i == id).map(|(_, t)| *t).expect("a lease the test made");
        may_hold.entry(id.to_owned()).or_insert(now + ttl);
    }
}

fn check(
    s: &Semaphore,
    now: Nanos,
    may_hold: &HashMap<String, Nanos>,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let mut total = 0;
    for (id, count, until) in s.holders() {
        total += count;
        proptest::prop_assert!(until > now, "{} held at {} past its expiry {}", id, now, until);
        let limit = may_hold[id];
        proptest::prop_assert!(until <= limit, "{} held until {} but its ttl ends {}", id, until, limit);
    }
    proptest::prop_assert!(total <= 3);
    Ok(())
}

/// A waiter is granted what a lease frees while it waits, however late the
/// loop wakes: capacity 1, A holds until 10 ms, B waits until 10.5 ms, and
/// the loop first runs again at 10.6 ms.
#[test]
fn a_late_wake_up_still_hands_an_expired_lease_to_its_waiter() {
    let mut s = Semaphore::new(1);
    s.acquire(0, "a", Hold { count: 1, ttl: 10 * MS, max_wait: 0 });
    let b = s.acquire(MS / 2, "b", Hold { count: 1, ttl: 10 * MS, max_wait: 10 * MS });
    assert_eq!(b.state, LeaseState::Pending { until: 10 * MS + MS / 2 });
    assert_eq!(s.advance(10 * MS + 6 * MS / 10), 1, "only a's lease ends");
    let v = s.heartbeat(10 * MS + 6 * MS / 10, "b", 10 * MS, None).unwrap();
    assert_eq!(v.state, LeaseState::Held { until: 20 * MS + 6 * MS / 10 }, "b got a's count");
    assert_eq!(v.free, 0);
}

/// A lease that expires at the very instant a wait ends is freed first.
#[test]
fn an_expiry_and_a_wait_at_the_same_instant_favour_the_waiter() {
    let mut s = Semaphore::new(1);
    s.acquire(0, "a", Hold { count: 1, ttl: 10 * MS, max_wait: 0 });
    s.acquire(0, "b", Hold { count: 1, ttl: 10 * MS, max_wait: 10 * MS });
    s.advance(10 * MS);
    assert_eq!(s.lease_counts(), (1, 0), "b holds a's count");
    assert!(s.holders().any(|(id, _, until)| id == "b" && until == 20 * MS));
}

proptest::proptest! {
    /// Driven by requests alone, with wake-ups as late as they come, the
    /// semaphore answers every request exactly as one woken at each deadline.
    #[test]
    fn late_wake_ups_answer_as_timely_ones(
        capacity in 1u32..4,
        steps in proptest::collection::vec((0u64..30, 0u8..6, 1u32..3, 1u64..40, 0u64..40), 1..60),
    ) {
        let (mut late, mut timely) = (Semaphore::new(capacity), Semaphore::new(capacity));
        let (mut now, mut minted) = (0, 0u32);
        for (advance_ms, who, count, ttl_ms, wait_ms) in steps {
            let next = now + advance_ms * MS;
            while let Some(d) = timely.next_deadline().filter(|&d| d <= next) {
                timely.advance(d);
            }
            now = next;
            late.advance(now);
            timely.advance(now);
            let count = count.min(capacity);
            // Ids are minted once each, as the locker does; heartbeats name
            // one minted before (or one never minted).
            let (a, b) = if who % 2 == 0 {
                minted += 1;
                let id = minted.to_string();
                let hold = Hold { count, ttl: ttl_ms * MS, max_wait: wait_ms * MS };
                (late.acquire(now, &id, hold), timely.acquire(now, &id, hold))
            } else {
                let id = minted.saturating_sub(u32::from(who) / 2).to_string();
                (late.heartbeat(now, &id, ttl_ms * MS, None).unwrap(), timely.heartbeat(now, &id, ttl_ms * MS, None).unwrap())
            };
            proptest::prop_assert_eq!(a, b, "at {} ms", now / MS);
        }
    }
}
