//! The locker's counter embedded in a program, with no daemon and no socket:
//! the core takes `now` as an argument, so the program supplies its own clock.
//!
//! ```sh
//! cargo run --example embedded
//! ```

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use locker::core::{Limit, Locker, PermitAsk, Quota, DEFAULT_LIMIT};

fn main() {
    // The seed's example: 5 requests per 0.8 s.
    let quota = Quota::new(5, 0.8).expect("a valid quota");
    let mut locker = Locker::new(Limit::new(DEFAULT_LIMIT, quota).expect("a valid name"), vec![], 1000);
    // One permit of the default limit, unkeyed, now or never: built once,
    // asked every time.
    let ask = PermitAsk::new(locker.find(None).expect("the default limit exists"));

    // Anchor the wall clock once and measure with the monotonic clock, as the
    // daemon does, so slots stay aligned to the Unix epoch.
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
    let start = Instant::now();
    let now = || wall + start.elapsed().as_nanos() as u64;

    for i in 0..20 {
        let v = locker.ask(now(), &ask).expect("cost 1 is always valid");
        if v.go {
            println!("{i:2} go     ({} left in this slot)", v.remaining);
        } else {
            println!("{i:2} sorry  (retry in {:.1} ms)", v.retry_after as f64 / 1e6);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
