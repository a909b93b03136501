//! The cost of one decision in the core, with 1,000,000 live keys: every key
//! asked once before timing, so each timed ask finds its key among a million
//! others, in an order unrelated to the one they were added in. Also the
//! unkeyed count, and the whole protocol seam (`service::step::request`: decode,
//! decide, encode) for both request forms; and the same decisions a hundred
//! at a time, as a batched ask is answered (slots prefetched, then decided).
//!
//! ```sh
//! cargo bench --bench decide
//! ```

use std::hash::BuildHasher;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use locker::bench::{key_name, Requests};
use locker::core::{Limit, Locker, PermitAsk, Quota, DEFAULT_LIMIT};
use locker::service::Service;

const KEYS: usize = 1_000_000;
/// Asks per batch in the batched benchmarks.
const BATCH: usize = 100;
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
    assert_eq!(locker.figures().live_keys(), KEYS);
    let mut i = 0;
    c.bench_function("decide/1M live keys", |b| {
        b.iter(|| {
            i = if i + 1 == KEYS { 0 } else { i + 1 };
            black_box(locker.ask(NOW, &PermitAsk::new(id).key(&keys[i])).unwrap())
        })
    });
    // The same decisions a hundred at a time, as a batch is answered: every
    // key's slot prefetched first, then each ask decided. Reported per
    // batch, with criterion's decisions per second beside it.
    let mut group = c.benchmark_group("decide");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("1M live keys, batches of 100", |b| {
        b.iter(|| {
            i = if i + 2 * BATCH > KEYS { 0 } else { i + BATCH };
            let asks = keys[i..i + BATCH].iter().map(|k| PermitAsk::new(id).key(k));
            for ask in asks.clone() {
                locker.prefetch(&ask);
            }
            for ask in asks {
                black_box(locker.ask(NOW, &ask).unwrap());
            }
        })
    });
    // The same without the prefetch, to show what overlapping misses buys.
    group.bench_function("1M live keys, batches of 100, no prefetch", |b| {
        b.iter(|| {
            i = if i + 2 * BATCH > KEYS { 0 } else { i + BATCH };
            for k in &keys[i..i + BATCH] {
                black_box(locker.ask(NOW, &PermitAsk::new(id).key(k)).unwrap());
            }
        })
    });
    group.finish();
    assert_eq!(locker.figures().live_keys(), KEYS, "every key stayed live");
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
        let _ = locker::service::step::request(&mut service, NOW, 0, requests.get(i), &mut (), &mut (), &mut out);
    }
    assert_eq!(service.locker().figures().live_keys(), KEYS);
    c.bench_function("respond/plain", |b| {
        b.iter(|| {
            locker::service::step::request(&mut service, NOW, 0, black_box(b"let me go"), &mut (), &mut (), &mut out)
        })
    });
    // In key order: the keys' places in the table are random anyway, and the
    // daemon finds each request's bytes warm in the cache, as here.
    let mut i = 0;
    c.bench_function("respond/structured, 1M live keys", |b| {
        b.iter(|| {
            i = if i + 1 == KEYS { 0 } else { i + 1 };
            locker::service::step::request(&mut service, NOW, 0, black_box(requests.get(i)), &mut (), &mut (), &mut out)
        })
    });
}

/// A batch of 100 asks through the seam, as `locker bench --batch 100
/// --keys 1000000` sends them: the in-process limit of what a real locker
/// can answer, with nothing of the transport's cost.
fn respond_batch(c: &mut Criterion) {
    let mut service = Service::new(locker());
    let mut out = Vec::with_capacity(16 * 1024);
    let requests = Requests::batches(None, KEYS, BATCH);
    for i in 0..requests.len() {
        let _ = locker::service::step::request(&mut service, NOW, 0, requests.get(i), &mut (), &mut (), &mut out);
    }
    assert_eq!(service.locker().figures().live_keys(), KEYS);
    let mut group = c.benchmark_group("respond");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut i = 0;
    group.bench_function("batches of 100, 1M live keys", |b| {
        b.iter(|| {
            i = if i + 1 == requests.len() { 0 } else { i + 1 };
            locker::service::step::request(&mut service, NOW, 0, black_box(requests.get(i)), &mut (), &mut (), &mut out)
        })
    });
    group.finish();
}

/// What the machine asks of any decision over a million keys, with none of
/// the locker's logic: hash the key's name, then read and write one random
/// place of 32 bytes in a 64 MiB table (the key table's size for a million
/// keys, with the same advice for huge pages). `decide/1M live keys` over
/// this is what the locker adds to the memory's own cost; measured in the
/// same run, the ratio holds on a busy machine too.
fn floor(c: &mut Criterion) {
    let keys = scattered_keys();
    let mut table = huge_table(2 * KEYS.next_power_of_two());
    let hasher = foldhash::quality::RandomState::default();
    let mask = table.len() - 1;
    let mut i = 0;
    c.bench_function("floor/hash and one random place in 64 MiB", |b| {
        b.iter(|| {
            i = if i + 1 == KEYS { 0 } else { i + 1 };
            let at = &mut table[hasher.hash_one(&keys[i]) as usize & mask];
            at[0] += 1;
            black_box(at[0])
        })
    });
    // The same reads, each waiting for the one before (its place depends
    // on what the last read found): the memory's latency for one miss that
    // nothing overlaps, as a lone ask's lookup is in the daemon.
    let mut last = 0u64;
    c.bench_function("floor/one random place in 64 MiB, after the one before", |b| {
        b.iter(|| {
            i = if i + 1 == KEYS { 0 } else { i + 1 };
            let at = &mut table[(hasher.hash_one(&keys[i]) ^ last) as usize & mask];
            at[0] += 1;
            last = at[0] & 1;
            black_box(last)
        })
    });
    let mut group = c.benchmark_group("floor");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("batches of 100, prefetched", |b| {
        let mut places = [0usize; BATCH];
        b.iter(|| {
            i = if i + 2 * BATCH > KEYS { 0 } else { i + BATCH };
            for (place, key) in places.iter_mut().zip(&keys[i..i + BATCH]) {
                *place = hasher.hash_one(key) as usize & mask;
                prefetch(&table[*place]);
            }
            for &place in &places {
                table[place][0] += 1;
            }
            black_box(&table[places[0]]);
        })
    });
    group.finish();
}

/// `len` zeroed 32-byte places, advised to huge pages before first touch.
fn huge_table(len: usize) -> Vec<[u64; 4]> {
    const HUGE: usize = 2 << 20;
    let mut table: Vec<[u64; 4]> = Vec::with_capacity(len);
    let start = table.as_ptr() as usize;
    let aligned = start.next_multiple_of(HUGE);
    #[cfg(target_os = "linux")]
    // SAFETY: the range lies within the vector's own allocation; the advice
    // changes how it is backed, never its contents.
    unsafe {
        libc::madvise(aligned as *mut libc::c_void, (start + len * 32 - aligned) / HUGE * HUGE, libc::MADV_HUGEPAGE);
    }
    table.resize(len, [0; 4]);
    table
}

fn prefetch<T>(place: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((place as *const T).cast::<i8>());
    }
}

criterion_group!(benches, floor, decide, respond, respond_batch);
criterion_main!(benches);
