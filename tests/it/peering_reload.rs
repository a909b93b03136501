//! Adding and removing a member on real lockers, by the procedures of
//! docs/peering.md ("Adding or removing a member"): config files edited,
//! SIGHUP in order, the new locker started first or the old one stopped
//! first, under load from clients on every running locker (issue 52, item
//! 2). A go counts against a slot only when its ask left and its answer
//! arrived inside it (as in `identity.rs`): no slot may hold more than the
//! limit for certain, and after the change every member of the new group
//! answers go again. Waits poll stats, bounded by `WAIT`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use locker::wire::Ask;
use locker::{Client, StatsReply};

use crate::support::{free_port, per_slot, stamping, wall_ns, workers, Daemon, Stamps, TempFile, DEADLINE};

/// 99 per 2 s slot.
const MAX: u32 = 99;
const SLOT_NS: u128 = 2_000_000_000;

/// How long a step may take on a loaded host before the test fails.
const WAIT: Duration = Duration::from_secs(30);

/// One locker of the group: its id, the endpoint its PUB socket binds, and
/// its config file.
struct Member {
    id: String,
    publish: String,
    file: TempFile,
}

impl Member {
    /// Locker `id` of the test `case` (each test's files apart).
    fn new(case: &str, id: &str) -> Member {
        let publish = format!("tcp://127.0.0.1:{}", free_port());
        Member { id: id.into(), file: TempFile::new(&format!("{case}-{id}.toml"), ""), publish }
    }

    /// Writes its config: every other locker of `group` as a peer.
    fn list(&self, group: &[&Member]) {
        let peers: Vec<String> = group.iter().filter(|m| m.id != self.id).map(|m| format!("{:?}", m.publish)).collect();
        let text = format!(
            "peer_bind = {:?}\nnode_id = {:?}\npeers = [{}]\npeer_grace = 1.0\n\
             [[limits]]\nname = 'default'\nmax_requests = {MAX}\nin_seconds = 2\n",
            self.publish,
            self.id,
            peers.join(", ")
        );
        std::fs::write(self.file.path(), text).unwrap();
    }

    fn start(&self) -> Daemon {
        Daemon::start_logged(&["--config", self.file.path()])
    }
}

fn stats(d: &Daemon) -> StatsReply {
    Client::new([d.endpoint.as_str()], DEADLINE).unwrap().stats().expect("stats")
}

/// Polls `d`'s stats until `done` says so; fails after `WAIT`.
fn wait_until(d: &Daemon, what: &str, done: impl Fn(&StatsReply) -> bool) {
    let end = Instant::now() + WAIT;
    loop {
        let s = stats(d);
        if done(&s) {
            return;
        }
        assert!(Instant::now() < end, "{what}: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Joined, hearing `peers` live peers.
fn joined(d: &Daemon, peers: usize) {
    wait_until(d, "not joined", |s| !s.joining && s.peers.iter().filter(|p| p.live).count() >= peers);
}

/// Asks `d` alone until it answers go (recorded in `stamps`); fails after
/// `WAIT`.
fn serves(d: &Daemon, stamps: &Stamps, who: &str) {
    let mut c = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    let end = Instant::now() + WAIT;
    loop {
        let asked = wall_ns();
        let r = c.ask(&Ask::new()).expect("an answer");
        if r.ok {
            return stamps.lock().unwrap().push((asked, wall_ns()));
        }
        assert!(Instant::now() < end, "{who} never answered go after the change: {:?}", stats(d));
        std::thread::sleep(Duration::from_millis(r.retry_after_ms.clamp(5, 200)));
    }
}

/// No slot certainly over the limit.
fn assert_never_over(stamps: &Arc<Stamps>, case: &str) {
    let per = per_slot(stamps, SLOT_NS);
    eprintln!("{case}: go per 2 s slot: {per:?}");
    assert!(per.values().all(|s| s.at_least <= MAX), "{case}: a slot certainly over {MAX}: {per:?}");
}

#[test]
fn adding_a_member_by_the_documented_steps_never_exceeds_the_limit() {
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|id| Member::new("add", id));
    for m in [&a, &b, &c] {
        m.list(&[&a, &b, &c]);
    }
    let trio: Vec<Daemon> = [&a, &b, &c].iter().map(|m| m.start()).collect();
    trio.iter().for_each(|l| joined(l, 2));
    let (stamps, on_go) = stamping();
    let until = Instant::now() + Duration::from_secs(12);
    let endpoints: Vec<String> = trio.iter().map(|l| l.endpoint.clone()).collect();
    let mut load = workers(&endpoints, 6, 0, until, &on_go);

    // 1. Start the new locker listing every member, itself aside.
    d.list(&[&a, &b, &c, &d]);
    let new = d.start();
    wait_until(&new, "the new locker never heard the old set", |s| s.member_set_mismatch);
    load.extend(workers(std::slice::from_ref(&new.endpoint), 2, 0, until, &on_go));
    // 2. Edit each old member's config and SIGHUP it, one after another.
    for (m, l) in [&a, &b, &c].into_iter().zip(&trio) {
        m.list(&[&a, &b, &c, &d]);
        l.signal("HUP");
        wait_until(l, "peers not reloaded", |s| s.members == Some(4));
    }
    // 3. Watch every member's stats until none reports a mismatch or a
    // settling set.
    let group: Vec<&Daemon> = trio.iter().chain([&new]).collect();
    for l in &group {
        wait_until(l, "the sets never agreed", |s| {
            !s.member_set_mismatch && !s.member_set_settling && s.members == Some(4)
        });
    }
    let goes: usize = load.into_iter().map(|w| w.join().unwrap()).sum();
    for (l, who) in group.iter().zip(["a", "b", "c", "d"]) {
        serves(l, &stamps, who);
        assert!(l.log().contains("the member set changed") || who == "d", "{who}: {}", l.log());
    }
    eprintln!("{goes} go under load");
    assert_never_over(&stamps, "adding d");
}

#[test]
fn removing_a_member_by_the_documented_steps_never_exceeds_the_limit() {
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|id| Member::new("remove", id));
    for m in [&a, &b, &c, &d] {
        m.list(&[&a, &b, &c, &d]);
    }
    let mut four: Vec<Daemon> = [&a, &b, &c, &d].iter().map(|m| m.start()).collect();
    four.iter().for_each(|l| joined(l, 3));
    let (stamps, on_go) = stamping();
    let until = Instant::now() + Duration::from_secs(12);
    let endpoints: Vec<String> = four.iter().map(|l| l.endpoint.clone()).collect();
    let load = workers(&endpoints, 8, 0, until, &on_go);

    // 1. Stop the member that leaves (its clients fail over to the others).
    let mut old = four.pop().unwrap();
    old.signal("TERM");
    assert!(old.wait_exit(DEADLINE).is_some(), "the old locker stops");
    // 2. Edit each remaining member's config and SIGHUP it.
    for (m, l) in [&a, &b, &c].into_iter().zip(&four) {
        m.list(&[&a, &b, &c]);
        l.signal("HUP");
        wait_until(l, "peers not reloaded", |s| s.members == Some(3));
    }
    // 3. Watch until none reports a mismatch or a settling set.
    for l in &four {
        wait_until(l, "the sets never agreed", |s| {
            !s.member_set_mismatch && !s.member_set_settling && s.peers.len() == 2
        });
    }
    let goes: usize = load.into_iter().map(|w| w.join().unwrap()).sum();
    for (l, who) in four.iter().zip(["a", "b", "c"]) {
        serves(l, &stamps, who);
    }
    eprintln!("{goes} go under load");
    assert_never_over(&stamps, "removing d");
}
