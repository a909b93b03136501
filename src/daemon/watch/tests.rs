use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::*;
use crate::core::{Limit, Locker, PeerEvent, Quota, DEFAULT_LIMIT};
use crate::service::{step, Io, Token};
use crate::sim::{self, Boot};

const MS: Nanos = NANOS_PER_MS;
const T0: Nanos = 1_700_000_000_000 * MS;
const BOOT0: Nanos = 86_400_000 * MS;

fn others(boot: Nanos, wall: Nanos) -> Others {
    Others { boot, wall }
}

#[test]
fn real_time_the_monotonic_clock_did_not_see_is_measured() {
    let mut u = Unseen::default();
    assert_eq!(u.since_last(T0, others(BOOT0, T0), || T0).any, 0, "the first check has nothing to compare");
    // The monotonic clock moved 10 ms while boot time and the wall clock
    // moved 3 s: 2.99 s passed that it did not see.
    let mono = T0 + 10 * MS;
    let unseen = u.since_last(mono, others(BOOT0 + 3000 * MS, T0 + 3000 * MS), || mono);
    assert_eq!(unseen, Gap { boot: 2990 * MS, any: 2990 * MS });
    // The next check compares with this one only.
    let mono = mono + 100 * MS;
    assert_eq!(u.since_last(mono, others(BOOT0 + 3100 * MS, T0 + 3100 * MS), || mono).any, 0);
}

#[test]
fn a_suspend_the_boot_clock_counts_is_a_pause_whatever_the_wall_clock_says() {
    let mut u = Unseen::default();
    u.since_last(T0, others(BOOT0, T0), || T0);
    let mono = T0 + 5 * MS;
    assert_eq!(u.since_last(mono, others(BOOT0 + 2005 * MS, T0 + 5 * MS), || mono).any, 2000 * MS);
}

#[test]
fn a_wall_clock_stepped_back_is_no_pause_and_one_stepped_ahead_is() {
    let mut u = Unseen::default();
    u.since_last(T0, others(BOOT0, T0), || T0);
    let mono = T0 + 100 * MS;
    let back = u.since_last(mono, others(BOOT0 + 100 * MS, T0 - 3_600_000 * MS), || mono);
    assert_eq!(back, Gap::default(), "stepped an hour back");
    let mono = mono + 100 * MS;
    let ahead = u.since_last(mono, others(BOOT0 + 200 * MS, T0 - 3_600_000 * MS + 100 * MS + 5000 * MS), || mono);
    assert_eq!(ahead, Gap { boot: 0, any: 5000 * MS }, "stepped 5 s ahead: seen by the wall clock only");
}

#[test]
fn a_thread_preempted_between_two_readings_is_no_pause() {
    let mut u = Unseen::default();
    u.since_last(T0, others(BOOT0, T0), || T0);
    // Read the loop's clock, then lost the processor for 800 ms before
    // reading the others: the reading after them saw those 800 ms.
    let before = T0 + MS;
    let later = before + 800 * MS;
    assert_eq!(u.since_last(before, others(BOOT0 + 801 * MS, T0 + 801 * MS), || later).any, 0);
    // And preempted just before the last check read the others: this
    // check compares with the reading taken before that preemption.
    let before = later + 800 * MS;
    assert_eq!(u.since_last(before, others(BOOT0 + 801 * MS + 800 * MS, T0 + 1601 * MS), || before).any, 0);
}

#[test]
fn small_differences_are_not_read_again() {
    let mut u = Unseen::default();
    u.since_last(T0, others(BOOT0, T0), || unreachable!());
    let mono = T0 + 100 * MS;
    let unseen = u.since_last(mono, others(BOOT0 + 100 * MS + 1000, T0 + 100 * MS), || unreachable!());
    assert_eq!(unseen, Gap::default());
}

/// A loop clock a test moves: its monotonic reading, boot time and wall
/// clock each set apart.
#[derive(Clone, Default)]
struct FakeClock(Arc<[AtomicU64; 3]>);

impl FakeClock {
    fn at(mono: Nanos, boot: Nanos, wall: Nanos) -> FakeClock {
        let c = FakeClock::default();
        c.set(mono, boot, wall);
        c
    }

    fn set(&self, mono: Nanos, boot: Nanos, wall: Nanos) {
        [mono, boot, wall].iter().zip(self.0.iter()).for_each(|(v, a)| a.store(*v, Ordering::Relaxed));
    }
}

impl LoopClock for FakeClock {
    fn now(&self) -> Nanos {
        self.0[0].load(Ordering::Relaxed)
    }

    fn others(&self) -> Option<Others> {
        Some(Others { boot: self.0[1].load(Ordering::Relaxed), wall: self.0[2].load(Ordering::Relaxed) })
    }
}

#[derive(Default)]
struct Events(Vec<PeerEvent>);

impl Io for Events {
    fn reply(&mut self, _: Token, _: &[u8]) {}

    fn event(&mut self, event: PeerEvent) {
        self.0.push(event);
    }
}

/// A peered service of two members that has joined at `now` (no grace:
/// a rejoin ends at once too, having told it rejoined).
fn joined(now: Nanos) -> Service {
    let limit = Limit::new(DEFAULT_LIMIT, Quota::new(100, 1.0).unwrap()).unwrap();
    let mut service = sim::peered(Locker::new(limit, vec![], 100), &Boot { node: 0, now, nodes: 2 }, 0);
    let mut events = Events::default();
    step::turn(&mut service, now, &mut (), &mut events, &mut Vec::new());
    assert!(!service.peering().unwrap().is_joining(), "joined: {:?}", events.0);
    service
}

fn rejoined(service: &mut Service, now: Nanos) -> bool {
    let mut events = Events::default();
    step::turn(service, now, &mut (), &mut events, &mut Vec::new());
    events.0.iter().any(|e| matches!(e, PeerEvent::Rejoining { .. }))
}

#[test]
fn a_pause_only_the_boot_and_wall_clocks_saw_is_a_pause_at_the_next_cross_check() {
    let clock = FakeClock::at(T0, BOOT0, T0);
    let mut watch = Watch::new(Box::new(clock.clone()), true);
    let mut service = joined(T0);
    assert_eq!(watch.checked(&mut service), T0);
    // A VM paused 3 s: its monotonic clock moved 1 ms, the host's 3 s.
    clock.set(T0 + MS, BOOT0 + 3000 * MS, T0 + 3000 * MS);
    let now = watch.now(&mut service);
    assert!(!rejoined(&mut service, now), "a request's reading compares the monotonic clock alone");
    let now = watch.checked(&mut service);
    assert_eq!(now, T0 + 3000 * MS, "the loop's clock caught up with what it did not see");
    assert!(rejoined(&mut service, now), "the cross-check took it as a pause past the peer-dead time");
    clock.set(T0 + 2 * MS, BOOT0 + 3001 * MS, T0 + 3001 * MS);
    assert_eq!(watch.now(&mut service), T0 + 3001 * MS, "and stays ahead");
}

#[test]
fn a_wall_clock_stepped_back_between_cross_checks_is_not_a_pause() {
    let clock = FakeClock::at(T0, BOOT0, T0);
    let mut watch = Watch::new(Box::new(clock.clone()), true);
    let mut service = joined(T0);
    watch.checked(&mut service);
    clock.set(T0 + 100 * MS, BOOT0 + 100 * MS, T0 - 3_600_000 * MS);
    let now = watch.checked(&mut service);
    assert_eq!(now, T0 + 100 * MS, "the loop's clock did not follow the step");
    assert!(!rejoined(&mut service, now));
}

#[test]
fn a_lone_locker_follows_what_the_boot_clock_saw_but_not_a_wall_clock_step() {
    let clock = FakeClock::at(T0, BOOT0, T0);
    let mut watch = Watch::new(Box::new(clock.clone()), false);
    let limit = Limit::new(DEFAULT_LIMIT, Quota::new(5, 0.8).unwrap()).unwrap();
    let mut service = Service::new(Locker::new(limit, vec![], 1000));
    assert_eq!(watch.checked(&mut service), T0);
    // The wall clock stepped 5 s ahead: no real time passed unseen, or none
    // that a lone locker must follow; its slot is not cut short.
    clock.set(T0 + MS, BOOT0 + MS, T0 + 5000 * MS);
    assert_eq!(watch.checked(&mut service), T0 + MS, "a wall step alone moves no slot");
    // A host suspended 3 s: the boot-time clock saw it, and it is followed.
    clock.set(T0 + 2 * MS, BOOT0 + 3002 * MS, T0 + 8002 * MS);
    assert_eq!(watch.checked(&mut service), T0 + 3002 * MS, "real time that passed is followed");
}
