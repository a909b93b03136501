//! Instructions per decision on the unkeyed path, `Locker::go`, for
//! callgrind (which counts instructions, so a busy machine does not move
//! the figure):
//!
//! ```sh
//! cargo build --release --example go_cost
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*go_cost*asks*' \
//!     target/release/examples/go_cost 200000
//! ```
//!
//! The instructions callgrind reports, divided by the number of asks, are
//! the cost of one decision.

use std::hint::black_box;

use locker::core::{Limit, Locker, Quota, DEFAULT_LIMIT};

/// A fixed instant well inside a day-long slot.
const NOW: u64 = 1_700_000_000 * 1_000_000_000 + 3_600 * 1_000_000_000;

#[inline(never)]
fn asks(locker: &mut Locker, n: u64) -> u64 {
    let id = locker.find(None).expect("the default limit");
    let mut go = 0;
    for i in 0..n {
        go += u64::from(black_box(locker.go(black_box(NOW + i), id, None, 1)).is_ok_and(|v| v.go));
    }
    go
}

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let quota = Quota::new(u32::MAX, 86_400.0).expect("a valid quota");
    let mut locker = Locker::new(Limit::new(DEFAULT_LIMIT, quota).expect("a valid limit"), Vec::new(), 10);
    println!("{} go of {n}", asks(&mut locker, n));
}
