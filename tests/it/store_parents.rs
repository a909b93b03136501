//! Limits under parents on a real Redis: a child's ask takes its cost
//! from every level in the store, so an org's limit holds across its
//! users and across the lockers that serve them, and a refused ask takes
//! from no level.

use std::time::Duration;

use locker::wire::Parents;
use locker::Ask;

use crate::store::{two_lockers_on, Redis};
use crate::support::wait_for_room;

static IN_O: [(&str, &str); 1] = [("org", "o")];

#[test]
fn an_orgs_limit_holds_in_the_store_across_its_users_and_lockers() {
    let redis = Redis::start(false);
    let limits = "[[limits]]\nname = \"org\"\nmax_requests = 5\nin_seconds = 3600\n\
                  [[limits]]\nname = \"user\"\nmax_requests = 4\nin_seconds = 3600\nparent = \"org\"\n";
    // Far from an hour's end, so the slot does not change.
    wait_for_room(3_600_000_000_000, Duration::from_secs(10));
    let (_lockers, mut clients, _config) = two_lockers_on(&redis, limits);
    let ask = |user: &'static str| Ask::new().limit("user").key(user).parents(Parents::new(&IN_O));
    // User a takes its 4 on locker 0 and is refused its fifth; user b,
    // asking on both lockers in turn, gets what is left of the org's 5:
    // one (on whichever locker's hand holds it, when one claimed ahead).
    let a = (0..5).filter(|_| clients[0].ask(&ask("a")).unwrap().ok).count();
    let b = (0..6).filter(|i| clients[i % 2].ask(&ask("b")).unwrap().ok).count();
    assert_eq!((a, b), (4, 1), "a user's 4, then what is left of the org's 5");
    assert_eq!(redis.cli(&["HGET", "locker:{3:org:o}:f", "n"]).trim(), "5", "the org counted once, in the store");
    for client in &mut clients {
        let org = client.ask(&Ask::new().limit("org").key("o")).unwrap();
        assert!(!org.ok, "the org is spent on every locker: {org:?}");
    }
}
