//! Instructions per decision, for callgrind, which counts instructions and
//! so gives the same figure on a busy machine:
//!
//! ```sh
//! cargo build --release --example go_cost
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*go_cost*timed*' \
//!     target/release/examples/go_cost unkeyed 200000
//! ```
//!
//! The scenarios: `unkeyed` (`Locker::go` on the unkeyed count), and over
//! 1,000,000 live keys `keyed` (`Locker::go`), `structured` (one ask per
//! `service::step::request`) and `batch` (batches of 100 asks per
//! `service::step::request`). The instructions callgrind reports, divided by the
//! decisions the program prints, are the cost of one decision; they leave
//! out cache misses, which is what the criterion bench measures.

use std::hint::black_box;

use locker::bench::Requests;
use locker::core::{Limit, Locker, Quota, DEFAULT_LIMIT};
use locker::service::Service;

/// A fixed instant well inside a day-long slot.
const NOW: u64 = 1_700_000_000 * 1_000_000_000 + 3_600 * 1_000_000_000;
const KEYS: usize = 1_000_000;

fn locker() -> Locker {
    let quota = Quota::new(u32::MAX, 86_400.0).expect("a valid quota");
    Locker::new(Limit::new(DEFAULT_LIMIT, quota).expect("a valid limit"), Vec::new(), 2 * KEYS)
}

/// Answers `n` messages of `requests` (every one after the first `n`
/// already seen once), returning the bytes written.
#[inline(never)]
fn timed(service: &mut Service, requests: &Requests, n: usize, unkeyed: bool) -> usize {
    let mut out = Vec::with_capacity(16 * 1024);
    let mut bytes = 0;
    if unkeyed {
        let mut locker = locker();
        let id = locker.find(None).expect("the default limit");
        for i in 0..n as u64 {
            bytes += usize::from(black_box(locker.go(black_box(NOW + i), id, None, 1)).is_ok_and(|v| v.go));
        }
        return bytes;
    }
    for i in 0..n {
        let _ = locker::service::step::request(
            service,
            NOW,
            0,
            black_box(requests.get(i % requests.len())),
            &mut (),
            &mut (),
            &mut out,
        );
        bytes += out.len();
    }
    bytes
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "unkeyed".into());
    let n: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let (requests, per) = match mode.as_str() {
        "batch" => (Requests::batches(None, KEYS, 100), 100),
        "structured" => (Requests::structured(None, KEYS), 1),
        _ => (Requests::structured(None, 1), 1),
    };
    let mut service = Service::new(locker());
    if mode != "unkeyed" {
        for i in 0..requests.len() {
            let _ = locker::service::step::request(
                &mut service,
                NOW,
                0,
                requests.get(i),
                &mut (),
                &mut (),
                &mut Vec::new(),
            );
        }
    }
    let bytes = timed(&mut service, &requests, n, mode == "unkeyed");
    println!("{mode}: {} decisions ({bytes} bytes)", n * per);
}
