//! The memory each live key costs, for every counting kind: builds a
//! locker, asks once for each of 1,000,000 distinct keys (the load
//! `benches/compare.sh` uses), and prints the heap bytes the locker holds
//! per key, counted by a global allocator that tracks the bytes in use.
//! Then, for the rolling window, the same keys asked `BUSY` times each at
//! distinct instants, so every key keeps a list of grants: its worst case
//! in exact mode.
//!
//! ```sh
//! cargo run --release --example key_memory            # 1,000,000 keys
//! cargo run --release --example key_memory -- 50000   # any other count
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use locker::bench::key_name;
use locker::core::{Algorithm, Limit, Locker, Quota, DEFAULT_LIMIT};

struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed straight to the system allocator; the only
// addition is an atomic count of the bytes in use.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        IN_USE.fetch_add(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        IN_USE.fetch_add(new_size, Ordering::Relaxed);
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Asks per key in the busy rolling-window run: an exact window's most.
const BUSY: u32 = 64;

fn main() {
    let keys: usize = std::env::args().nth(1).map_or(1_000_000, |n| n.parse().expect("a key count"));
    let mut name = String::new();
    key_name(keys - 1, &mut name);
    println!("live keys        {keys} (like {name:?}, {} bytes each)", name.len());
    println!("{:<40} {:>14} {:>14}", "kind", "heap bytes", "per live key");
    let day = |n| Quota::new(n, 86_400.0).unwrap();
    let kinds = [
        ("fixed window", day(u32::MAX), Algorithm::FixedWindow, 1),
        ("token bucket", day(1_000_000_000), Algorithm::token_bucket(1_000_000_000).unwrap(), 1),
        ("rolling window, sub-slots", day(1_000_000_000), Algorithm::RollingWindow, 1),
        ("rolling window, exact, 1 grant", day(BUSY), Algorithm::RollingWindow, 1),
        ("rolling window, exact, 64 grants", day(BUSY), Algorithm::RollingWindow, BUSY),
    ];
    for (kind, quota, algorithm, asks) in kinds {
        let held = held_per_key(keys, quota, algorithm, asks);
        println!("{kind:<40} {held:>14} {:>14.1}", held as f64 / keys as f64);
    }
    println!("huge pages       {}", huge_pages());
}

/// The heap bytes a locker of one limit holds after `asks` asks for each of
/// `keys` keys, each ask a nanosecond after the last.
fn held_per_key(keys: usize, quota: Quota, algorithm: Algorithm, asks: u32) -> usize {
    let limit = Limit::with_algorithm(DEFAULT_LIMIT, quota, algorithm).unwrap();
    let before = IN_USE.load(Ordering::Relaxed);
    let mut locker = Locker::new(limit, Vec::new(), keys + 1);
    let id = locker.find(None).unwrap();
    let now = 1_700_000_000 * 1_000_000_000;
    let mut name = String::new();
    for round in 0..asks {
        for i in 0..keys {
            name.clear();
            key_name(i, &mut name);
            assert!(locker.go(now + u64::from(round), id, Some(&name), 1).unwrap().go);
        }
    }
    let held = IN_USE.load(Ordering::Relaxed) - before;
    assert_eq!(locker.figures().live_keys(), keys);
    held
}

/// What the kernel reports of this process's anonymous huge pages, on Linux.
fn huge_pages() -> String {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("AnonHugePages")).map(|l| l.split_whitespace().skip(1).collect())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
