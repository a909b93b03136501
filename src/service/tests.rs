//! Issue 35: no request is decoded twice on any path. The wire's readers
//! count the maps they read (`wire::map_reads`, in tests only); answering
//! a request, holding it, waiting for the store's claims for it or giving
//! back what an undelivered reply took must read exactly the maps that one
//! decoding of it reads, an `all`'s parts and a batch's `all` entries'
//! parts included; so must a reset, whose caller the loop is asked about.
//! A parked request is decoded once more each time it is decided again.

use super::*;
use crate::core::claims::{ClaimAsk, Claimed, Grant};
use crate::core::{Limit, Quota};
use crate::wire::{Ask, BatchAsk};

const MS: Nanos = 1_000_000;
const T0: Nanos = 2_000_000_000_000 * MS;

/// The default limit of 2 per second, held up to a second, and "api" of
/// 1000 per second.
fn service() -> Service {
    let default = Limit::new(crate::core::DEFAULT_LIMIT, Quota::new(2, 1.0).unwrap()).unwrap();
    let api = Limit::new("api", Quota::new(1000, 1.0).unwrap()).unwrap();
    Service::new(Locker::new(default, vec![api], 100))
}

fn reads_in(f: impl FnOnce()) -> u64 {
    let before = wire::map_reads();
    f();
    wire::map_reads() - before
}

/// The maps one decoding of `body` reads.
fn one_decoding(body: &[u8]) -> u64 {
    reads_in(|| drop(Decoder::default().decode(body)))
}

/// `{"op": "all", "asks": [{"limit": "api", "key": "a"}, {"key": "k",
/// "note": "x"}], "hold_ms": 1000}`: a part in a go's common shape, and
/// one that is not (an unknown field), read by the other reader.
const ALL: &[u8] =
    b"\x83\xa2op\xa3all\xa4asks\x92\x82\xa5limit\xa3api\xa3key\xa1a\x82\xa3key\xa1k\xa4note\xa1x\xa7hold_ms\xcd\x03\xe8";

fn batch_with_all() -> Vec<u8> {
    let parts = [Ask::new().limit("api").key("b"), Ask::new().key("c")];
    let mut body = Vec::new();
    let entries = [BatchAsk::Go(Ask::new().limit("api").key("d")), BatchAsk::All(&parts), BatchAsk::All(&parts)];
    wire::encode_batch_entries(&entries, &mut body);
    body
}

#[test]
fn the_counter_counts_the_maps_a_decoding_reads() {
    // Guards the tests below: a counter that never counts would pass them.
    // The request's map and its second part are each tried as a go in its
    // common shape, then read by the other reader; the first part is one.
    assert_eq!(one_decoding(ALL), 5);
    let Ok(Request::All(all)) = wire::decode_request(ALL) else { panic!("not an all") };
    assert_eq!(reads_in(|| assert_eq!(all.parts().count(), 2)), 3, "reading the parts again reads them again");
    assert!(one_decoding(&batch_with_all()) >= 6, "the batch, its three entries and the parts of its alls");
}

#[test]
fn an_all_and_a_batch_holding_alls_are_read_once_when_answered_and_given_back() {
    let mut s = service();
    let mut out = Vec::new();
    for body in [ALL.to_vec(), batch_with_all()] {
        for i in 0..3 {
            let n = reads_in(|| {
                let _ = step::request(&mut s, T0 + i, 0, &body, &mut (), &mut (), &mut out);
            });
            assert_eq!(n, one_decoding(&body), "answer {i} of {body:?}: {out:?}");
        }
        let _ = step::request(&mut s, T0 + 3 * MS, 0, &body, &mut (), &mut (), &mut out);
        let mut lost = Gate { lost: Some((body.clone().into(), out.clone())), ..Gate::default() };
        let n = reads_in(|| step::flush(&mut s, T0 + 3 * MS, &mut (), &mut lost));
        assert_eq!(n, one_decoding(&body), "given back: {out:?}");
    }
}

#[test]
fn a_held_all_is_read_once_when_held_behind_another_and_once_at_each_wake() {
    let mut s = service();
    for token in 1..=2 {
        let n = reads_in(|| assert_eq!(serve(&mut s, T0, token, ALL), Answer::Now));
        assert_eq!(n, one_decoding(ALL), "go {token}");
    }
    for token in 3..=4 {
        // The third is held for a sorry, the fourth parked behind it.
        let n = reads_in(|| assert_eq!(serve(&mut s, T0 + MS, token, ALL), Answer::Held));
        assert_eq!(n, one_decoding(ALL), "held {token}");
    }
    let mut answered = Vec::new();
    let n = reads_in(|| answered.extend(ready(&mut s, T0 + 1_000 * MS)));
    assert_eq!(answered, [3, 4], "both go in the next second");
    assert_eq!(n, 2 * one_decoding(ALL), "each decided once");
}

#[test]
fn with_a_store_an_all_is_read_once_for_its_claims_and_once_when_they_are_back() {
    let mut s = service().with_store();
    for (token, body) in [(1, ALL.to_vec()), (2, batch_with_all())] {
        let n = reads_in(|| assert_eq!(serve(&mut s, T0, token, &body), Answer::Held));
        assert_eq!(n, one_decoding(&body), "waits for its claims: {body:?}");
    }
    let mut sent = Gate::default();
    step::flush(&mut s, T0, &mut (), &mut sent);
    let claims = sent.claims;
    assert!(claims.len() >= 4, "a claim for each part's limit and key: {claims:?}");
    let grant = |want| Ok(Grant { got: want, valid_us: 1_000_000, left: 100, retry_us: 0, debt: 0 });
    let answers = claims.iter().map(|c| Claimed { id: c.id, node: "n:1".into(), grant: grant(c.want) }).collect();
    step::store_answers(&mut s, T0 + MS, answers, Vec::new());
    let mut answered = Vec::new();
    let n = reads_in(|| answered.extend(ready(&mut s, T0 + MS)));
    assert_eq!(answered, [1, 2]);
    assert_eq!(n, one_decoding(ALL) + one_decoding(&batch_with_all()), "each decided once");
}

/// A loop that keeps the tokens it replies to and the claims for the
/// store, refuses every reset or none, keeping the limit and key of each
/// reset it was asked about, and may have one go reply it could not
/// deliver (`lost`).
#[derive(Default)]
struct Gate {
    refuse: bool,
    asked: Vec<(String, String)>,
    replied: Vec<Token>,
    claims: Vec<ClaimAsk>,
    lost: Option<(Box<[u8]>, Vec<u8>)>,
}

/// `body` served under `token` at `now` as the loop serves it.
fn serve(s: &mut Service, now: Nanos, token: Token, body: &[u8]) -> Answer {
    step::request(s, now, token, body, &mut (), &mut Gate::default(), &mut Vec::new())
}

/// The tokens of the parked asks a loop turn at `now` answers.
fn ready(s: &mut Service, now: Nanos) -> Vec<Token> {
    let mut sent = Gate::default();
    step::turn(s, now, &mut (), &mut sent, &mut Vec::new());
    sent.replied
}

impl Io for Gate {
    fn reply(&mut self, token: Token, _: &[u8]) {
        self.replied.push(token);
    }

    fn store(&mut self, claims: Vec<ClaimAsk>, _: Vec<crate::core::store_lease::LeaseCall>) {
        self.claims.extend(claims);
    }

    fn undelivered(&mut self) -> Undelivered {
        let lost_go: Vec<_> = self.lost.take().into_iter().collect();
        Undelivered { replies: lost_go.len() as u64, go: lost_go.len() as u64, lost_go }
    }

    fn refuses_reset(&mut self, _: Token, limit: &str, key: &str) -> Option<&'static str> {
        self.asked.push((limit.to_owned(), key.to_owned()));
        self.refuse.then_some("refused here")
    }
}

/// `{"op": "reset", "limit": "api", "key": "k"}` with the op written as
/// `str8`, which MessagePack allows though encoders write `fixstr`: a
/// check that looked for the op's usual bytes would not see a reset.
const RESET_STR8: &[u8] = b"\x83\xa2op\xd9\x05reset\xa5limit\xa3api\xa3key\xa1k";

#[test]
fn a_reset_is_read_once_and_made_only_if_the_loop_does_not_refuse_its_caller() {
    let default = Limit::new(crate::core::DEFAULT_LIMIT, Quota::new(2, 1.0).unwrap()).unwrap();
    let api = Limit::new("api", Quota::new(1, 60.0).unwrap()).unwrap().with_reset_allowed(true);
    let mut s = Service::new(Locker::new(default, vec![api], 100));
    let mut out = Vec::new();
    // {"limit": "api", "key": "k"}: a go.
    let go = b"\x82\xa5limit\xa3api\xa3key\xa1k";
    assert_eq!(step::request(&mut s, T0, 1, go, &mut (), &mut Gate::default(), &mut out), Answer::Now);
    assert!(wire::grants(&out), "the key's one permit: {out:?}");
    for (refuse, token) in [(true, 2), (false, 3)] {
        let mut gate = Gate { refuse, ..Gate::default() };
        let n = reads_in(|| {
            assert_eq!(step::request(&mut s, T0 + MS, token, RESET_STR8, &mut (), &mut gate, &mut out), Answer::Now);
        });
        assert_eq!(n, one_decoding(RESET_STR8), "read once, refused: {refuse}");
        assert_eq!(gate.asked, [("api".to_owned(), "k".to_owned())], "the loop was asked about its caller");
        assert_eq!(String::from_utf8_lossy(&out).contains("refused here"), refuse, "{out:?}");
        let _: Answer = step::request(&mut s, T0 + 2 * MS, 10 + token, go, &mut (), &mut Gate::default(), &mut out);
        assert_eq!(wire::grants(&out), !refuse, "refused: {refuse}: the count was reset only when not refused");
    }
}

#[test]
fn same_bytes_agrees_with_slice_equality_at_every_length_and_difference() {
    let base: Vec<u8> = (0..40u8).collect();
    for len in 0..=base.len() {
        let a = &base[..len];
        assert!(super::names::same_bytes(a, a), "length {len}");
        for at in 0..len {
            let mut b = a.to_vec();
            b[at] ^= 0x40;
            assert!(!super::names::same_bytes(a, &b), "length {len}, byte {at}");
        }
        if len > 0 {
            assert!(!super::names::same_bytes(a, &base[..len - 1]), "lengths {len} and {}", len - 1);
        }
    }
    assert!(super::names::same_bytes(b"let me go", b"let me go"));
    assert!(!super::names::same_bytes(b"let me go", b"let me gO"));
}
