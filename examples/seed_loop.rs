//! The seed's client loop in Rust: ask a locker every 100 ms and print the
//! time and the answer, as the seed's `run_client.py` did.
//!
//! ```sh
//! cargo run --release -- serve --max-requests 5 --in-seconds 0.8 &
//! cargo run --example seed_loop -- tcp://localhost:7777 100
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use locker::Client;

fn main() {
    let mut args = std::env::args().skip(1);
    let endpoint = args.next().unwrap_or_else(|| "tcp://localhost:7777".to_owned());
    let count: u32 = args.next().map_or(100, |n| n.parse().expect("COUNT must be a whole number"));
    let mut client = Client::new([endpoint], Duration::from_secs(1)).expect("an endpoint");
    for _ in 0..count {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let answer = match client.plain(b"let me go") {
            Ok(true) => "go".to_owned(),
            Ok(false) => "sorry".to_owned(),
            Err(e) => format!("error: {e}"),
        };
        println!("{now:.6} {answer}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
