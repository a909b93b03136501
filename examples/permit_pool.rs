//! How many permits one client process consumes per second through a
//! `PermitPool`, against a running locker.
//!
//! ```sh
//! locker serve --bind 'tcp://127.0.0.1:7777' --max-requests 100000000 --in-seconds 1 &
//! cargo run --release --example permit_pool -- tcp://127.0.0.1:7777 3 10000
//! ```
//!
//! Arguments: ENDPOINT [SECONDS (default 3)] [BATCH (default 10000)].
//! Prints permits/s, sorry count and the permits per round trip.

use std::time::{Duration, Instant};

use locker::{Client, PermitPool};

fn main() {
    let mut args = std::env::args().skip(1);
    let endpoint = args.next().unwrap_or_else(|| "tcp://127.0.0.1:7777".to_owned());
    let seconds: f64 = args.next().map_or(3.0, |s| s.parse().expect("SECONDS must be a number"));
    let batch: u64 = args.next().map_or(10_000, |s| s.parse().expect("BATCH must be a whole number"));
    let client = Client::new([endpoint], Duration::from_secs(1)).expect("an endpoint");
    let mut pool = PermitPool::new(client, None, Some("permit-pool"), batch);
    let (mut go, mut sorry) = (0u64, 0u64);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        // Check the clock once per thousand permits: the loop is the point.
        for _ in 0..1000 {
            match pool.take() {
                Ok(true) => go += 1,
                Ok(false) => sorry += 1,
                Err(e) => {
                    eprintln!("permit_pool: {e}");
                    std::process::exit(2);
                }
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let trips = pool.round_trips();
    println!(
        "permits/s {:.0}  go {go}  sorry {sorry}  round trips {trips}  permits per round trip {:.0}",
        go as f64 / elapsed,
        go as f64 / trips.max(1) as f64
    );
}
