use std::time::{Duration, Instant};

use locker::{Ask, Client};

use crate::support::{run_locker, Daemon};

#[test]
fn the_client_keeps_working_when_the_locker_it_used_is_killed() {
    let first = Daemon::start(&["--max-requests", "1000"]);
    let second = Daemon::start(&["--max-requests", "1000"]);
    let timeout = Duration::from_millis(600);
    let mut client = Client::new([first.endpoint.clone(), second.endpoint.clone()], timeout).unwrap();
    assert!(client.ask(&Ask::new()).unwrap().ok);
    assert_eq!(client.current_endpoint(), Some(first.endpoint.as_str()));
    first.signal("KILL");
    let started = Instant::now();
    assert!(client.ask(&Ask::new()).unwrap().ok, "the second locker answers");
    assert!(started.elapsed() < timeout + Duration::from_millis(200), "took {:?}", started.elapsed());
    assert_eq!(client.current_endpoint(), Some(second.endpoint.as_str()));
    // The locker that answered last is asked first: no time lost on the dead one.
    let started = Instant::now();
    assert!(client.ask(&Ask::new()).unwrap().ok);
    assert!(started.elapsed() < Duration::from_millis(200), "took {:?}", started.elapsed());
    drop(first);
}

#[test]
fn ask_with_a_dead_locker_first_answers_from_the_next_within_its_timeout() {
    let dead = Daemon::start(&[]);
    let live = Daemon::start(&[]);
    let dead_endpoint = dead.endpoint.clone();
    dead.signal("KILL");
    let started = Instant::now();
    let out = run_locker(&["ask", "--connect", &dead_endpoint, "--connect", &live.endpoint, "--timeout", "800ms"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    drop(live);
    let out = run_locker(&["ask", "--connect", &dead_endpoint, "--timeout", "300ms"]);
    assert_eq!(out.status.code(), Some(2), "no locker: an error, not a hang");
}
