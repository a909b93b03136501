use std::time::{Duration, Instant};

use locker::{Ask, Client, ClientError};

use crate::support::{run_locker, Served};

#[test]
fn the_client_fails_over_from_a_dead_endpoint_and_then_prefers_the_live_one() {
    let mut dead = Served::start(&[]);
    dead.stop();
    let live = Served::start(&["--max-requests", "100"]);
    let mut c = Client::new([dead.endpoint.as_str(), live.endpoint.as_str()], Duration::from_secs(2)).unwrap();
    assert!(c.ask(&Ask::new()).unwrap().ok);
    assert_eq!(c.current_endpoint(), Some(live.endpoint.as_str()));
    assert!(c.ask(&Ask::new()).unwrap().ok);
    let stats = c.stats().unwrap();
    assert_eq!(stats.limits[0].requests, 2, "each ask was counted once");
}

#[test]
fn a_silent_locker_gets_each_request_at_most_once_and_is_then_passed_over() {
    // A socket that takes requests and never answers: it shows exactly what
    // reached the silent endpoint.
    let ctx = zmq::Context::new();
    let silent = ctx.socket(zmq::ROUTER).unwrap();
    silent.set_linger(0).unwrap();
    silent.bind("tcp://127.0.0.1:*").unwrap();
    let silent_ep = silent.get_last_endpoint().unwrap().unwrap();
    let live = Served::start(&["--max-requests", "100"]);
    let mut c = Client::new([silent_ep.as_str(), live.endpoint.as_str()], Duration::from_millis(600)).unwrap();
    for _ in 0..3 {
        assert!(c.ask(&Ask::new()).unwrap().ok);
    }
    let mut received = 0;
    while silent.poll(zmq::POLLIN, 100).unwrap() > 0 {
        silent.recv_multipart(0).unwrap();
        received += 1;
    }
    assert_eq!(received, 1, "only the first ask tried the silent endpoint");
    assert_eq!(c.stats().unwrap().limits[0].go, 3);
}

#[test]
fn the_client_returns_an_error_when_no_locker_answers() {
    let mut a = Served::start(&[]);
    let mut b = Served::start(&[]);
    let endpoints = [a.endpoint.clone(), b.endpoint.clone()];
    for d in [&mut a, &mut b] {
        d.stop();
    }
    let mut c = Client::new(endpoints, Duration::from_millis(300)).unwrap();
    let start = Instant::now();
    match c.ask(&Ask::new()) {
        Err(ClientError::NoAnswer { .. }) => {}
        other => panic!("expected NoAnswer, got {other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5), "the call must not hang");
}

#[test]
fn the_client_keeps_working_when_the_locker_it_used_is_killed() {
    let mut first = Served::start(&["--max-requests", "1000"]);
    let second = Served::start(&["--max-requests", "1000"]);
    let timeout = Duration::from_millis(600);
    let mut client = Client::new([first.endpoint.clone(), second.endpoint.clone()], timeout).unwrap();
    assert!(client.ask(&Ask::new()).unwrap().ok);
    assert_eq!(client.current_endpoint(), Some(first.endpoint.as_str()));
    first.stop();
    let started = Instant::now();
    assert!(client.ask(&Ask::new()).unwrap().ok, "the second locker answers");
    // Within the deadline, whatever the machine's load: the dead locker's
    // share of it, then the second locker's answer.
    assert!(started.elapsed() < timeout * 2, "took {:?}", started.elapsed());
    assert_eq!(client.current_endpoint(), Some(second.endpoint.as_str()));
    // The locker that answered last is asked first: no time lost on the
    // dead one (its share of the deadline is half of it).
    let started = Instant::now();
    assert!(client.ask(&Ask::new()).unwrap().ok);
    assert_eq!(client.current_endpoint(), Some(second.endpoint.as_str()));
    assert!(started.elapsed() < timeout / 2, "took {:?}", started.elapsed());
    drop(first);
}

#[test]
fn ask_with_a_dead_locker_first_answers_from_the_next_within_its_timeout() {
    let mut dead = Served::start(&[]);
    let live = Served::start(&[]);
    let dead_endpoint = dead.endpoint.clone();
    dead.stop();
    let started = Instant::now();
    let out = run_locker(&["ask", "--connect", &dead_endpoint, "--connect", &live.endpoint, "--timeout", "800ms"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    drop(live);
    let out = run_locker(&["ask", "--connect", &dead_endpoint, "--timeout", "300ms"]);
    assert_eq!(out.status.code(), Some(2), "no locker: an error, not a hang");
}
