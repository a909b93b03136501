//! The cost of one decision in the core, with 1,000,000 live keys: every key
//! asked once before timing, so each timed ask finds its key among a million
//! others, in an order unrelated to the one they were added in. Also the
//! unkeyed count, and the whole protocol seam (`Service::respond`: decode,
//! decide, encode) for both request forms.
//!
//! ```sh
//! cargo bench --bench decide
//! ```

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use locker::bench::{key_name, Requests};
use locker::core::{Limit, Locker, PermitAsk, Quota, DEFAULT_LIMIT};
use locker::service::Service;

const KEYS: usize = 1_000_000;
/// A fixed instant well inside a day-long slot.
const NOW: u64 = 1_700_000_000 * 1_000_000_000 + 3_600 * 1_000_000_000;

/// A locker whose default limit never runs out during a bench and whose slot
/// outlasts it, so every key stays live.
fn locker() -> Locker {
    let quota = Quota::new(u32::MAX, 86_400.0).unwrap();
    Locker::new(Limit::new(DEFAULT_LIMIT, quota).unwrap(), Vec::new(), 2 * KEYS)
}

/// The key names, in a scattered order (a multiplicative step that visits
/// every index once), so that asking them in sequence walks the map randomly.
fn scattered_keys() -> Vec<String> {
    const STEP: usize = 7_368_787; // a prime, so coprime with KEYS
    let mut name = String::new();
    (0..KEYS)
        .map(|i| {
            name.clear();
            key_name(i * STEP % KEYS, &mut name);
            name.clone()
        })
        .collect()
}

fn decide(c: &mut Criterion) {
    let mut locker = locker();
    let id = locker.find(None).unwrap();
    let keys = scattered_keys();
    let mut name = String::new();
    for i in 0..KEYS {
        name.clear();
        key_name(i, &mut name);
        locker.ask(NOW, &PermitAsk::new(id).key(&name)).unwrap();
    }
    assert_eq!(locker.live_keys(), KEYS);
    let mut i = 0;
    c.bench_function("decide/1M live keys", |b| {
        b.iter(|| {
            i = if i + 1 == KEYS { 0 } else { i + 1 };
            black_box(locker.ask(NOW, &PermitAsk::new(id).key(&keys[i])).unwrap())
        })
    });
    assert_eq!(locker.live_keys(), KEYS, "every key stayed live");
    let unkeyed = PermitAsk::new(id);
    c.bench_function("decide/unkeyed", |b| b.iter(|| black_box(locker.ask(NOW, black_box(&unkeyed)).unwrap())));
    drop(locker);

    // Keys longer than the table stores inline (a UUID, say) take the
    // general map: this is their cost.
    let mut locker = self::locker();
    let long: Vec<String> = keys.iter().map(|k| format!("{k}-00000000-0000-0000-0000")).collect();
    for key in &long {
        locker.ask(NOW, &PermitAsk::new(id).key(key)).unwrap();
    }
    c.bench_function("decide/1M live keys of 36 bytes", |b| {
        b.iter(|| {
            i = if i + 1 == KEYS { 0 } else { i + 1 };
            black_box(locker.ask(NOW, &PermitAsk::new(id).key(&long[i])).unwrap())
        })
    });
}

fn respond(c: &mut Criterion) {
    let mut service = Service::new(locker());
    let mut out = Vec::with_capacity(256);
    let requests = Requests::structured(None, KEYS);
    for i in 0..KEYS {
        service.respond(NOW, requests.get(i), &mut out);
    }
    assert_eq!(service.locker().live_keys(), KEYS);
    c.bench_function("respond/plain", |b| b.iter(|| service.respond(NOW, black_box(b"let me go"), &mut out)));
    // In key order: the keys' places in the table are random anyway, and the
    // daemon finds each request's bytes warm in the cache, as here.
    let mut i = 0;
    c.bench_function("respond/structured, 1M live keys", |b| {
        b.iter(|| {
            i = if i + 1 == KEYS { 0 } else { i + 1 };
            service.respond(NOW, black_box(requests.get(i)), &mut out)
        })
    });
}

criterion_group!(benches, decide, respond);
criterion_main!(benches);
