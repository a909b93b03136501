//! The hot path allocates nothing: once warmed up, answering a plain or a
//! structured request, a batch or an `all`, or an ask of a limit under
//! parents, through `service::step::request` makes no heap allocation.
//! A counting global allocator (for this test binary only) counts the
//! allocations made on the current thread while each request is answered.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use locker::core::{Limit, Locker, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::state::{Header, Keep, Record, StateLog};
use locker::wire::{self, Ask, BatchAsk, Parents};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed straight to the system allocator; the only
// addition is a thread-local counter, which itself never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_in(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

const NOW: u64 = 1_700_000_000_000_000_000;

/// The key of the limit above `user`.
static TEAM: [(&str, &str); 1] = [("team", "t")];

fn service() -> Service {
    let quota = Quota::new(3, 1.0).unwrap();
    let api = Limit::new("api", Quota::new(1000, 1.0).unwrap()).unwrap();
    let team = Limit::new("team", Quota::new(1000, 1.0).unwrap()).unwrap();
    let user = Limit::new("user", Quota::new(1000, 1.0).unwrap()).unwrap().with_parent(Some("team"));
    Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, quota).unwrap(), vec![api, team, user], 1000))
}

fn structured(ask: Ask) -> Vec<u8> {
    let mut body = Vec::new();
    wire::encode(&ask.to_map(), &mut body);
    body
}

fn batch(asks: &[Ask]) -> Vec<u8> {
    let mut body = Vec::new();
    wire::encode_batch(asks, &mut body);
    body
}

fn all(parts: &[Ask]) -> Vec<u8> {
    let mut body = Vec::new();
    wire::encode_all(parts, None, None, &mut body);
    body
}

fn batch_of(entries: &[BatchAsk]) -> Vec<u8> {
    let mut body = Vec::new();
    wire::encode_batch_entries(entries, &mut body);
    body
}

#[test]
fn answering_a_warmed_up_request_allocates_nothing() {
    let mut service = service();
    let mut out = Vec::with_capacity(256);
    let requests: Vec<(&str, Vec<u8>)> = vec![
        ("plain, default limit", b"let me go".to_vec()),
        ("plain, named limit", b"api".to_vec()),
        ("structured, unkeyed", structured(Ask::new())),
        ("structured, keyed", structured(Ask::new().limit("api").key("user-7"))),
        ("a batch of asks", batch(&[Ask::new().limit("api").key("user-8"), Ask::new().key("user-9"), Ask::new()])),
        ("an all", all(&[Ask::new().limit("api").key("user-10"), Ask::new().key("user-11")])),
        (
            "a batch holding an all",
            batch_of(&[
                BatchAsk::Go(Ask::new().limit("api").key("user-12")),
                BatchAsk::All(&[Ask::new().limit("api").key("user-13"), Ask::new().key("user-14")]),
                BatchAsk::Go(Ask::new().key("user-15")),
            ]),
        ),
        ("structured, under parents", structured(Ask::new().limit("user").key("user-16").parents(Parents::new(&TEAM)))),
        (
            "an all with a part under parents",
            all(&[Ask::new().limit("user").key("user-17").parents(Parents::new(&TEAM)), Ask::new()]),
        ),
        ("structured, cost 2", structured(Ask::new().limit("api").key("user-7").cost(2))),
    ];
    // Warm up: the first requests grow the reply buffer and the key table.
    for (_, body) in &requests {
        let _ = locker::service::step::request(&mut service, NOW, 0, body, &mut (), &mut (), &mut out);
    }
    for (name, body) in &requests {
        // Repeat past the default limit's quota so that sorry is covered too.
        for i in 0..5 {
            let n = allocations_in(|| {
                let _ = locker::service::step::request(&mut service, NOW + i, 0, body, &mut (), &mut (), &mut out);
            });
            assert_eq!(n, 0, "{name}, request {i}: {n} allocations, reply {out:?}");
        }
    }
    assert!(out.starts_with(&[0x85, 0xa2, b'o', b'k']), "the last reply is a go map: {out:?}");
}

/// Appends each record to the log, as the daemon's keeper does.
struct ToLog {
    log: StateLog,
    recorded: usize,
}

impl Keep for ToLog {
    fn run(&self) -> Option<u32> {
        Some(0)
    }

    fn keep(&mut self, record: &Record) {
        self.log.append(record).unwrap();
        self.recorded += 1;
    }
}

#[test]
fn recording_a_warmed_up_grant_in_the_state_log_allocates_nothing() {
    let dir = std::env::temp_dir().join(format!("locker-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let header = Header { limits: 1, written: NOW };
    let log = StateLog::create(&dir.join("s.log"), header, [], false).unwrap();
    let mut keep = ToLog { log, recorded: 0 };
    let mut service = service();
    let mut out = Vec::with_capacity(256);
    let requests = [b"api".to_vec(), structured(Ask::new().limit("api").key("user-7"))];
    for round in 0..6 {
        for body in &requests {
            let n = allocations_in(|| {
                let _ =
                    locker::service::step::request(&mut service, NOW + round, 0, body, &mut keep, &mut (), &mut out);
            });
            // The first round warms up the key table and the journal's buffer.
            assert!(round == 0 || n == 0, "round {round}: {n} allocations");
        }
    }
    assert_eq!(keep.recorded, 12, "every grant was recorded");
    drop(keep);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the test above: a counter that never counts would pass it.
    assert!(allocations_in(|| drop(std::hint::black_box(vec![1u8; 64]))) >= 1);
}
