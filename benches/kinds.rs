//! Every counting kind's decision with 1,000,000 live keys, side by side in
//! one run, and `governor`'s keyed GCRA (the token bucket Rust users reach
//! for) on the same keys in the same order: each key asked once before
//! timing, then asked again in a scattered order, quotas so large that
//! every ask goes. The machine is shared and noisy: compare the figures as
//! ratios within one run, not with another run's.
//!
//! ```sh
//! cargo bench --bench kinds
//! ```

use std::hint::black_box;
use std::num::NonZeroU32;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use governor::clock::FakeRelativeClock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::{DashMapStateStore, HashMapStateStore};
use governor::state::StateStore;
use governor::{Quota as GovernorQuota, RateLimiter};
use locker::bench::key_name;
use locker::core::{Algorithm, Limit, Locker, PermitAsk, Quota, DEFAULT_LIMIT};

const KEYS: usize = 1_000_000;
/// A fixed instant well inside a day-long slot.
const NOW: u64 = 1_700_000_000 * 1_000_000_000 + 3_600 * 1_000_000_000;

/// A locker whose one limit of `algorithm` never says sorry in a bench.
fn locker(algorithm: Algorithm) -> Locker {
    let quota = Quota::new(1_000_000_000, 86_400.0).unwrap();
    Locker::new(Limit::with_algorithm(DEFAULT_LIMIT, quota, algorithm).unwrap(), Vec::new(), 2 * KEYS)
}

/// The key names in the order they are added, and in a scattered order (a
/// multiplicative step that visits every index once).
fn keys() -> (Vec<String>, Vec<String>) {
    const STEP: usize = 7_368_787; // a prime, so coprime with KEYS
    let name = |i| {
        let mut name = String::new();
        key_name(i, &mut name);
        name
    };
    ((0..KEYS).map(name).collect(), (0..KEYS).map(|i| name(i * STEP % KEYS)).collect())
}

fn kinds(c: &mut Criterion) {
    let (added, scattered) = keys();
    let burst = NonZeroU32::new(1_000_000_000).unwrap();
    let mut group = c.benchmark_group("decide/1M live keys");
    for (kind, algorithm) in [
        ("fixed window", Algorithm::FixedWindow),
        ("token bucket", Algorithm::token_bucket(1_000_000_000).unwrap()),
        ("rolling window", Algorithm::RollingWindow),
    ] {
        let mut locker = locker(algorithm);
        let id = locker.find(None).unwrap();
        for k in &added {
            assert!(locker.ask(NOW, &PermitAsk::new(id).key(k)).unwrap().go);
        }
        assert_eq!(locker.figures().live_keys(), KEYS);
        let mut i = 0;
        group.bench_function(kind, |b| {
            b.iter(|| {
                i = if i + 1 == KEYS { 0 } else { i + 1 };
                black_box(locker.ask(NOW, &PermitAsk::new(id).key(&scattered[i])).unwrap())
            })
        });
    }
    // governor's clock is a fake one, set once: the figure is its map and
    // its GCRA, as the locker's is, with no clock read.
    let quota = GovernorQuota::per_second(burst);
    let clock = FakeRelativeClock::default();
    type Limiter<S> = RateLimiter<String, S, FakeRelativeClock, NoOpMiddleware<Nanos>>;
    let dashmap: Limiter<DashMapStateStore<String>> = RateLimiter::new(quota, Default::default(), clock.clone());
    let hashmap: Limiter<HashMapStateStore<String>> = RateLimiter::new(quota, Default::default(), clock);
    bench_governor(&mut group, "governor (DashMap)", &dashmap, &added, &scattered);
    bench_governor(&mut group, "governor (HashMap)", &hashmap, &added, &scattered);
    group.finish();
}

/// `limiter`'s check with every key of `added` held, asked in `scattered` order.
fn bench_governor<S: StateStore<Key = String>>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    limiter: &RateLimiter<String, S, FakeRelativeClock, NoOpMiddleware<Nanos>>,
    added: &[String],
    scattered: &[String],
) {
    for k in added {
        assert!(limiter.check_key(k).is_ok());
    }
    let mut i = 0;
    group.bench_function(name, |b| {
        b.iter(|| {
            i = if i + 1 == KEYS { 0 } else { i + 1 };
            black_box(limiter.check_key(&scattered[i]).is_ok())
        })
    });
}

criterion_group!(benches, kinds);
criterion_main!(benches);
