use std::time::Duration;

use crate::support::{req, round_trip, Daemon};

#[test]
fn prints_the_real_endpoint_and_serves_it() {
    let d = Daemon::start(&[]);
    assert!(d.endpoint.starts_with("tcp://127.0.0.1:"), "{}", d.endpoint);
    assert!(!d.endpoint.ends_with(":*"), "the real port, not the wildcard: {}", d.endpoint);
    let ctx = zmq::Context::new();
    assert_eq!(round_trip(&req(&ctx, &d.endpoint), b"let me go"), b"go");
}

#[test]
fn sigterm_and_sigint_stop_it_within_a_second_with_status_zero() {
    for signal in ["TERM", "INT"] {
        let mut d = Daemon::start(&[]);
        d.signal(signal);
        let status =
            d.wait_exit(Duration::from_secs(1)).unwrap_or_else(|| panic!("still running 1 s after SIG{signal}"));
        assert_eq!(status.code(), Some(0), "SIG{signal}");
    }
}
