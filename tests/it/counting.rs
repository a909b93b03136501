//! What stats count and what an ask may ask, on the seam (issue 36, item
//! 7): a peek counts apart from go (on a store too), a hold beyond the
//! documented 60,000 ms is refused rather than cut short, and peer
//! messages refused for being sent under this locker's own node id are
//! counted where stats show them.

use locker::core::claims::{Claimed, Grant};
use locker::core::{Limit, Locker, NodeKey, Peering, PeeringSettings, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::Ask;

use crate::support::{seam_ask, seam_stats, store_calls};

const MS: u64 = 1_000_000;
/// The start of a 1 s slot.
const T0: u64 = 1_700_000_000_000 * MS;

fn lone(max: u32) -> Service {
    Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(max, 1.0).unwrap()).unwrap(), vec![], 1000))
}

fn peered(id: &str, incarnation: u64) -> Service {
    let locker = Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(10, 1.0).unwrap()).unwrap(), vec![], 1000);
    let me = NodeKey { id: id.into(), incarnation };
    let settings = PeeringSettings::new(me, vec!["tcp://peer-0".into()], 500 * MS, 1000 * MS);
    Service::peered(locker, Peering::new(settings, T0), T0)
}

/// A peek (`cost` 0) took nothing, so it is neither go nor sorry: it used
/// to count as a go in stats and `locker_go_total`.
#[test]
fn a_peek_counts_as_a_request_and_a_peek_never_as_go_or_sorry() {
    let mut s = lone(1);
    assert!(seam_ask(&mut s, T0, &Ask::new().cost(0)).unwrap().ok, "a peek of a free limit says go");
    assert!(seam_ask(&mut s, T0, &Ask::new()).unwrap().ok);
    assert!(!seam_ask(&mut s, T0, &Ask::new().cost(0)).unwrap().ok, "a peek of a full limit says sorry");
    let l = &seam_stats(&mut s, T0).limits[0];
    assert_eq!((l.requests, l.go, l.sorry, l.peeks), (3, 1, 0, 2), "{l:?}");
}

/// `hold_ms` is documented as at most 60,000; above it the ask was
/// accepted and its hold silently cut to 60 s.
#[test]
fn a_hold_above_60_000_ms_is_refused_with_the_bound() {
    let mut s = lone(1);
    let err = seam_ask(&mut s, T0, &Ask::new().hold_ms(60_001)).unwrap_err();
    assert!(err.contains("hold_ms 60001 is above the longest a request may be held, 60000"), "{err}");
    assert!(seam_ask(&mut s, T0, &Ask::new().hold_ms(60_000)).unwrap().ok, "the bound itself is allowed");
    let l = &seam_stats(&mut s, T0).limits[0];
    assert_eq!((l.go, l.errors), (1, 1), "{l:?}");
}

/// A peer that only ever sent messages under this locker's own node id was
/// refused (and counted in its `rejected`), but never became a peer entry,
/// so stats showed no refusal anywhere.
#[test]
fn peer_messages_sent_under_ones_own_node_id_are_counted_in_stats() {
    let mut a = peered("a", T0);
    let mut forged = peered("a", T0 + 1);
    let msgs = crate::support::published(&mut forged, T0);
    assert!(!msgs.is_empty(), "a peered service publishes a heartbeat at start");
    for m in &msgs {
        assert!(locker::service::step::peer(&mut a, T0, 0, m), "the message is understood, and refused");
    }
    let stats = seam_stats(&mut a, T0);
    assert!(stats.peers.is_empty(), "never a peer entry: {stats:?}");
    assert_eq!(stats.peer_rejected, msgs.len() as u64, "{stats:?}");
}

/// On a store, an ask is decided from the store's claims and counted
/// outside the table: a peek there was a go too.
#[test]
fn a_peek_on_a_store_counts_apart_from_go() {
    let limit = Limit::new(DEFAULT_LIMIT, Quota::new(100, 1.0).unwrap()).unwrap();
    let mut s = Service::new(Locker::new(limit, vec![], 1000)).with_store();
    let held = crate::support::serve(&mut s, T0, 1, b"let me go").0;
    assert_eq!(held, locker::service::Answer::Held, "nothing on hand: the ask waits for a claim");
    let claims = store_calls(&mut s, T0).claims;
    let grant = Grant { got: 10, valid_us: 1_000_000, left: 90, retry_us: 0, debt: 0 };
    let answers = claims.iter().map(|c| Claimed { id: c.id, node: "n:1".into(), grant: Ok(grant) }).collect();
    locker::service::step::store_answers(&mut s, T0 + MS, answers, Vec::new());
    assert_eq!(crate::support::ready(&mut s, T0 + MS).iter().map(|r| r.0).collect::<Vec<_>>(), [1]);
    assert!(seam_ask(&mut s, T0 + 2 * MS, &Ask::new().cost(0)).unwrap().ok, "a peek from the hand");
    let l = &seam_stats(&mut s, T0 + 2 * MS).limits[0];
    assert_eq!((l.requests, l.go, l.peeks), (2, 1, 1), "{l:?}");
}
