//! Every reply arrives, or is counted: a DEALER client with thousands of
//! asks outstanding gets every reply (at a stop, and when a held burst is
//! released at a slot start), although its queue in the locker holds only
//! 1,000; a client that went away has its replies counted as undelivered,
//! go apart, and its go given back; a client that never reads is
//! disconnected. Real sockets: what is tested is the serving socket's
//! queues.

use std::time::{Duration, Instant};

use locker::{Ask, Client, StatsReply};

use crate::support::{wait_for_room, Daemon, Served, DEADLINE};

/// A DEALER that speaks as a REQ socket does (an empty delimiter before
/// each body) and queues any number of replies.
fn dealer(ctx: &zmq::Context, endpoint: &str) -> zmq::Socket {
    let s = ctx.socket(zmq::DEALER).unwrap();
    s.set_rcvhwm(0).unwrap();
    s.set_sndhwm(0).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(DEADLINE.as_millis() as i32).unwrap();
    s.connect(endpoint).unwrap();
    s
}

fn send_asks(s: &zmq::Socket, n: usize) {
    for _ in 0..n {
        s.send(&b""[..], zmq::SNDMORE).unwrap();
        s.send(&b"let me go"[..], 0).unwrap();
    }
}

/// Reads `n` replies (or fewer, if they stop coming); the bodies.
fn read_replies(s: &zmq::Socket, n: usize) -> Vec<Vec<u8>> {
    let mut replies = Vec::with_capacity(n);
    while replies.len() < n {
        let Ok(parts) = s.recv_multipart(0) else { break };
        replies.push(parts.last().cloned().unwrap_or_default());
    }
    replies
}

fn stats(endpoint: &str) -> StatsReply {
    Client::new([endpoint], DEADLINE).unwrap().stats().unwrap()
}

/// Waits until the locker holds `parked` asks.
fn wait_parked(endpoint: &str, parked: u64) {
    let deadline = Instant::now() + DEADLINE;
    while stats(endpoint).parked < parked {
        assert!(Instant::now() < deadline, "never held {parked} asks");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_dealer_with_six_thousand_held_asks_gets_every_reply_at_a_stop() {
    let args = ["--max-requests", "1", "--in-seconds", "60", "--hold-ms", "60000", "--max-parked", "10000"];
    let mut d = Daemon::start(&args);
    let ctx = zmq::Context::new();
    let s = dealer(&ctx, &d.endpoint);
    send_asks(&s, 6000);
    wait_parked(&d.endpoint, 5999);
    d.signal("TERM");
    let replies = read_replies(&s, 6000);
    assert!(d.wait_exit(DEADLINE).expect("exits after SIGTERM").success());
    assert_eq!(replies.len(), 6000, "every ask answered");
    assert_eq!(replies.iter().filter(|r| *r == b"go").count(), 1, "one permit in the slot, the rest sorry");
}

#[test]
fn a_held_burst_released_at_a_slot_start_reaches_its_caller_and_no_go_is_lost() {
    let args = ["--max-requests", "5000", "--in-seconds", "1", "--hold-ms", "2000", "--max-parked", "10000"];
    let d = Served::start(&args);
    let mut client = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    assert!(client.ask(&Ask::new().cost(5000)).unwrap().ok, "the slot spent at once");
    let ctx = zmq::Context::new();
    let s = dealer(&ctx, &d.endpoint);
    send_asks(&s, 5000);
    let replies = read_replies(&s, 5000);
    assert_eq!(replies.len(), 5000, "every ask answered");
    let go = replies.iter().filter(|r| *r == b"go").count() as u64;
    let after = client.stats().unwrap();
    assert_eq!((after.undelivered, after.undelivered_go), (0, 0), "{after:?}");
    assert_eq!(after.limits[0].go, 1 + go, "every go granted reached its caller: {after:?}");
    assert!(go > 0, "the held asks went when the next slot began");
}

#[test]
fn replies_to_a_client_that_went_away_are_counted_as_undelivered() {
    let (_d, _client, after) = a_client_goes_away_with_three_held_asks();
    assert_eq!(after.undelivered, 3, "{after:?}");
    assert_eq!(after.undelivered_go, 1, "one of them had the next slot's permit: {after:?}");
}

/// The replies lost to a client that went away are logged too, as a
/// running process logs them: at `warn`, at most one line a second.
#[test]
fn replies_to_a_client_that_went_away_are_logged() {
    let d = Daemon::start_logged(&GONE_CLIENT_ARGS);
    let (_client, after) = three_held_asks_then_gone(&d.endpoint);
    assert_eq!(after.undelivered, 3, "{after:?}");
    let deadline = Instant::now() + DEADLINE;
    while !d.log().contains("replies not delivered since the last such line") {
        assert!(Instant::now() < deadline, "no line says the replies were lost: {}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// 1 per 3 s, asks held for up to 3 s.
const GONE_CLIENT_ARGS: [&str; 6] = ["--max-requests", "1", "--in-seconds", "3", "--hold-ms", "3000"];

/// A locker of 1 per 3 s holding asks for up to 3 s, a client that took
/// the slot's permit, and a DEALER whose three held asks are answered at
/// the next slot, after it has gone: the stats once all three are counted.
fn a_client_goes_away_with_three_held_asks() -> (Served, Client, StatsReply) {
    let d = Served::start(&GONE_CLIENT_ARGS);
    let (client, after) = three_held_asks_then_gone(&d.endpoint);
    (d, client, after)
}

/// At the locker at `endpoint` (`GONE_CLIENT_ARGS`): a client takes the
/// slot's permit, and a DEALER sends three asks, which are held, and goes
/// away; the client, and the stats once all three are counted.
fn three_held_asks_then_gone(endpoint: &str) -> (Client, StatsReply) {
    // The asks and the client's leaving fall in one slot: the held asks
    // are answered only when the next begins, after the client has gone.
    wait_for_room(3_000_000_000, Duration::from_millis(1500));
    let mut client = Client::new([endpoint], DEADLINE).unwrap();
    assert!(client.ask(&Ask::new()).unwrap().ok);
    let ctx = zmq::Context::new();
    let s = dealer(&ctx, endpoint);
    send_asks(&s, 3);
    wait_parked(endpoint, 3);
    drop(s);
    let deadline = Instant::now() + DEADLINE;
    let mut after = stats(endpoint);
    while after.undelivered < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        after = stats(endpoint);
    }
    (client, after)
}

/// A held ask's go that could not be delivered is given back: the next
/// ask of that slot goes with it, and the slot still grants no more than
/// its limit (issues 36 and 38).
#[test]
fn a_go_that_could_not_be_delivered_is_given_back() {
    let (d, mut client, after) = a_client_goes_away_with_three_held_asks();
    assert_eq!((after.undelivered, after.undelivered_go), (3, 1), "{after:?}");
    // The next slot's permit went to nobody: it is back, once.
    let now_or_never = Ask::new().hold_ms(0);
    let next: Vec<bool> = (0..2).map(|_| client.ask(&now_or_never).unwrap().ok).collect();
    assert_eq!(next, [true, false], "{:?}", stats(&d.endpoint));
}

/// A client that sends and never reads: once its backlog in the locker
/// passes the bound it is disconnected (its monitor sees it), and every go
/// the locker could not deliver to it, answered at once, is given back:
/// the limit's remaining count is its maximum less the go that left
/// (issue 36).
#[test]
fn a_client_that_never_reads_is_disconnected_and_its_undelivered_go_given_back() {
    const MAX: u64 = 10_000_000;
    let max = MAX.to_string();
    let args = ["--max-requests", &max, "--in-seconds", "600", "--max-parked", "1"];
    let d = Served::start(&args);
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::DEALER).unwrap();
    s.set_rcvhwm(1).unwrap();
    s.set_rcvbuf(4096).unwrap();
    s.set_sndhwm(0).unwrap();
    s.set_linger(0).unwrap();
    s.monitor("inproc://never-reads", zmq::SocketEvent::DISCONNECTED as i32).unwrap();
    let monitor = ctx.socket(zmq::PAIR).unwrap();
    monitor.set_rcvtimeo(DEADLINE.as_millis() as i32).unwrap();
    monitor.connect("inproc://never-reads").unwrap();
    s.connect(&d.endpoint).unwrap();
    // Structured asks, whose replies are larger than a plain go: what the
    // kernel's socket buffers hold runs out sooner. Sent in rounds until
    // the locker gives up on the client (300,000 are enough here; a host
    // with larger socket buffers takes more rounds), at most 2,000,000.
    // The client learns of it once it reads again (TCP tells a reader,
    // not a socket left alone).
    let deadline = Instant::now() + DEADLINE;
    let mut sent = 0;
    while stats(&d.endpoint).undelivered == 0 {
        assert!(Instant::now() < deadline, "the locker never gave up: {:?}", stats(&d.endpoint));
        if sent < 2_000_000 {
            for _ in 0..100_000 {
                s.send(&b""[..], zmq::SNDMORE).unwrap();
                s.send(&b"\x81\xa3key\xa1k"[..], 0).unwrap();
            }
            sent += 100_000;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    loop {
        while s.recv_multipart(zmq::DONTWAIT).is_ok() {}
        if let Ok(event) = monitor.recv_multipart(zmq::DONTWAIT) {
            let event = u16::from_le_bytes([event[0][0], event[0][1]]);
            assert_eq!(event, zmq::SocketEvent::DISCONNECTED as u16);
            break;
        }
        assert!(Instant::now() < deadline, "the client was not disconnected: {:?}", stats(&d.endpoint));
        let mut items = [s.as_poll_item(zmq::POLLIN), monitor.as_poll_item(zmq::POLLIN)];
        zmq::poll(&mut items, 100).unwrap();
    }
    drop(s);
    let mut client = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    let peek = Ask::new().key("k").cost(0);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let before = client.stats().unwrap();
        let remaining = u64::from(client.ask(&peek).unwrap().remaining);
        let after = client.stats().unwrap();
        let spent = after.limits[0].go - after.undelivered_go;
        let settled = before.limits[0].go == after.limits[0].go && before.undelivered_go == after.undelivered_go;
        if settled && remaining == MAX - spent && after.undelivered_go > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "go not given back: remaining {remaining}, {after:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
