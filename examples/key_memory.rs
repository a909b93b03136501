//! The memory each live key costs: builds a locker, asks for 1,000,000
//! distinct keys (the load `benches/compare.sh` uses), and prints the heap
//! bytes the locker holds per key, counted by a global allocator that tracks
//! the bytes in use.
//!
//! ```sh
//! cargo run --release --example key_memory            # 1,000,000 keys
//! cargo run --release --example key_memory -- 50000   # any other count
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use locker::bench::key_name;
use locker::core::{Limit, Locker, Quota, DEFAULT_LIMIT};

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

fn main() {
    let keys: usize = std::env::args().nth(1).map_or(1_000_000, |n| n.parse().expect("a key count"));
    let quota = Quota::new(u32::MAX, 86_400.0).unwrap();
    let mut locker = Locker::new(Limit::new(DEFAULT_LIMIT, quota).unwrap(), Vec::new(), keys + 1);
    let id = locker.find(None).unwrap();
    let now = 1_700_000_000 * 1_000_000_000;
    let mut name = String::new();
    let before = IN_USE.load(Ordering::Relaxed);
    for i in 0..keys {
        name.clear();
        key_name(i, &mut name);
        locker.go(now, id, Some(&name), 1).unwrap();
    }
    let held = IN_USE.load(Ordering::Relaxed) - before;
    assert_eq!(locker.live_keys(), keys);
    println!("live keys        {keys} (like {name:?}, {} bytes each)", name.len());
    println!("heap held        {held} bytes");
    println!("per live key     {:.1} bytes", held as f64 / keys as f64);
    println!("huge pages       {}", huge_pages());
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
