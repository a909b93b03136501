//! Just enough HTTP/1.x for a Prometheus scrape and a health probe.
//!
//! `GET /metrics` answers the latest snapshot's exposition, `GET /health`
//! 200 while serving and 503 otherwise; `HEAD` works for both. Everything
//! else gets a short error and the connection closes: every answer carries
//! `Connection: close`, so there is no keep-alive to track.
//!
//! Connections are served one at a time, each under a deadline of
//! [`DEADLINE`] for reading its head and writing the answer, and a head may
//! be at most [`MAX_HEAD_BYTES`]: a slow or hostile client costs the next
//! scrape a couple of seconds at worst and never touches the serving loop,
//! which only ever hands snapshots over (see the module above).
//!
//! At the open-files limit, where the serving socket refuses clients and
//! `locker stats` cannot connect, this is the operator's way in: a
//! descriptor is held in reserve, given up to accept a scrape or a probe
//! the listener could not, and taken back after.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tracing::debug;

use super::exposition::{self, ScrapeFormat};
use super::{Health, Mailbox};

/// The longest request head read: a scrape's is a few hundred bytes.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// How long one connection may take, from accept to the last byte written.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Metrics,
    Health,
}

/// A request understood well enough to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpRequest {
    pub route: Route,
    /// `HEAD`: the answer's headers without its body.
    pub head_only: bool,
    /// The metrics' format: OpenMetrics when the `Accept` header names it,
    /// the classic text format otherwise.
    pub format: ScrapeFormat,
}

/// Why a request gets an error answer instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a request line of HTTP/1.x, or a head larger than allowed.
    BadRequest,
    /// A method other than GET or HEAD.
    MethodNotAllowed,
    /// A path other than /metrics or /health.
    NotFound,
}

/// An answer, before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub head_only: bool,
}

impl HttpResponse {
    fn text(status: u16, body: &str) -> HttpResponse {
        HttpResponse { status, content_type: "text/plain; charset=utf-8", body: body.to_owned(), head_only: false }
    }

    /// The bytes on the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        if self.status == 405 {
            out.push_str("Allow: GET, HEAD\r\n");
        }
        out.push_str("\r\n");
        if !self.head_only {
            out.push_str(&self.body);
        }
        out.into_bytes()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Reads a request head (up to the blank line) of at most
/// [`MAX_HEAD_BYTES`]. `Ok(None)` means the head was too large or the
/// client closed before finishing it.
pub fn read_head(r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head_end(&head) {
            head.truncate(end);
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD_BYTES {
            return Ok(None);
        }
    }
}

/// Where the head ends, after its blank line (CRLF or, leniently, LF).
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    [crlf, lf].into_iter().flatten().min().filter(|&end| end <= MAX_HEAD_BYTES)
}

/// Reads the request line of `head`: `METHOD PATH HTTP/1.x`.
pub fn parse(head: &[u8]) -> Result<HttpRequest, Refusal> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = std::str::from_utf8(line).map_err(|_| Refusal::BadRequest)?.trim_end_matches('\r');
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::BadRequest);
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(Refusal::BadRequest);
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Err(Refusal::MethodNotAllowed),
    };
    // A scraper may add parameters; none change the answer.
    let route = match target.split('?').next() {
        Some("/metrics") => Route::Metrics,
        Some("/health") => Route::Health,
        _ => return Err(Refusal::NotFound),
    };
    Ok(HttpRequest { route, head_only, format: format_accepted(head) })
}

/// OpenMetrics when an `Accept` header of `head` names it (as Prometheus
/// does when it may), the classic text format otherwise.
fn format_accepted(head: &[u8]) -> ScrapeFormat {
    let text = String::from_utf8_lossy(head);
    let open_metrics = text.lines().skip(1).any(|line| {
        let Some((name, value)) = line.split_once(':') else { return false };
        name.trim().eq_ignore_ascii_case("accept") && value.contains("application/openmetrics-text")
    });
    if open_metrics {
        ScrapeFormat::OpenMetrics
    } else {
        ScrapeFormat::Text
    }
}

/// The answer to `request`, from the latest snapshot in `mailbox`.
pub fn answer(request: Result<HttpRequest, Refusal>, mailbox: &Mailbox, uptime_seconds: f64) -> HttpResponse {
    let request = match request {
        Ok(r) => r,
        Err(Refusal::BadRequest) => return HttpResponse::text(400, "bad request\n"),
        Err(Refusal::MethodNotAllowed) => return HttpResponse::text(405, "only GET and HEAD\n"),
        Err(Refusal::NotFound) => return HttpResponse::text(404, "try /metrics or /health\n"),
    };
    let snapshot = mailbox.latest();
    let mut response = match request.route {
        Route::Metrics => HttpResponse {
            status: 200,
            content_type: request.format.content_type(),
            body: exposition::encode(&snapshot, uptime_seconds, request.format),
            head_only: false,
        },
        Route::Health => {
            let status = if snapshot.health == Health::Serving { 200 } else { 503 };
            // While a store node fails, or the member sets differ, the
            // second line says which and why.
            let store = snapshot.store.as_ref().and_then(|s| s.down.as_deref());
            let why = store.or(snapshot.member_set_why.as_deref()).map(|d| format!("{d}\n"));
            HttpResponse::text(status, &format!("{}\n{}", snapshot.health.name(), why.unwrap_or_default()))
        }
    };
    response.head_only = request.head_only;
    response
}

/// Accepts and answers connections one at a time, until the process exits.
pub fn serve(listener: &TcpListener, mailbox: &Mailbox, started: Instant) {
    let mut reserve = hold_reserve();
    loop {
        match listener.accept() {
            Ok((stream, _)) => answer_one(stream, mailbox, started),
            Err(e) if out_of_files(&e) && reserve.is_some() => {
                // Another thread may take the freed descriptor first; then
                // this accept fails too, and the next try comes later.
                drop(reserve.take());
                let accepted = listener.accept();
                reserve = hold_reserve();
                match accepted {
                    Ok((stream, _)) => answer_one(stream, mailbox, started),
                    Err(e) => pause_after(&e),
                }
            }
            Err(e) => pause_after(&e),
        }
    }
}

/// A descriptor (on /dev/null) held to be given up at the open-files limit.
fn hold_reserve() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

/// Whether `e` says no descriptor was left, for the process or the system.
fn out_of_files(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

fn answer_one(stream: TcpStream, mailbox: &Mailbox, started: Instant) {
    if let Err(e) = handle(stream, mailbox, started) {
        debug!(error = %e, "metrics connection dropped");
    }
}

fn pause_after(e: &io::Error) {
    debug!(error = %e, "metrics accept failed");
    // Out of file descriptors with no reserve, say: do not spin on it.
    std::thread::sleep(Duration::from_millis(50));
}

/// Reads one request from `stream` and writes its answer, within [`DEADLINE`].
fn handle(stream: TcpStream, mailbox: &Mailbox, started: Instant) -> io::Result<()> {
    let mut conn = Deadlined { stream, deadline: Instant::now() + DEADLINE };
    let request = match read_head(&mut conn)? {
        Some(head) => parse(&head),
        None => Err(Refusal::BadRequest),
    };
    let response = answer(request, mailbox, started.elapsed().as_secs_f64());
    conn.stream.set_write_timeout(Some(conn.remaining()?))?;
    conn.stream.write_all(&response.to_bytes())?;
    conn.stream.flush()
}

/// A stream whose reads all end by one deadline, however slowly the client
/// trickles bytes in.
struct Deadlined {
    stream: TcpStream,
    deadline: Instant,
}

impl Deadlined {
    fn remaining(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "metrics client too slow"));
        }
        Ok(left)
    }
}

impl Read for Deadlined {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.remaining()?))?;
        self.stream.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::daemon::metrics::Snapshot;

    fn answer_to(raw: &[u8], mailbox: &Mailbox) -> HttpResponse {
        let request = match read_head(&mut Cursor::new(raw)).unwrap() {
            Some(head) => parse(&head),
            None => Err(Refusal::BadRequest),
        };
        answer(request, mailbox, 0.0)
    }

    fn serving() -> Mailbox {
        let mailbox = Mailbox::default();
        mailbox.offer(Snapshot { health: Health::Serving, ..Snapshot::default() });
        mailbox
    }

    #[test]
    fn request_lines_name_the_route() {
        let get = |route| Ok(HttpRequest { route, head_only: false, format: ScrapeFormat::Text });
        assert_eq!(parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), get(Route::Metrics));
        assert_eq!(parse(b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n"), get(Route::Metrics));
        assert_eq!(parse(b"GET /health HTTP/1.1\n\n"), get(Route::Health));
        let head = HttpRequest { route: Route::Health, head_only: true, format: ScrapeFormat::Text };
        assert_eq!(parse(b"HEAD /health HTTP/1.1\r\n\r\n"), Ok(head));
    }

    #[test]
    fn openmetrics_only_when_the_scraper_accepts_it() {
        // What Prometheus 2.x sends when it may have OpenMetrics.
        let prometheus = b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n";
        assert_eq!(parse(prometheus).unwrap().format, ScrapeFormat::OpenMetrics);
        assert_eq!(parse(b"GET /metrics HTTP/1.1\r\naccept: text/plain\r\n\r\n").unwrap().format, ScrapeFormat::Text);
        let mailbox = serving();
        let om = answer_to(prometheus, &mailbox);
        assert_eq!(om.content_type, ScrapeFormat::OpenMetrics.content_type());
        assert!(om.body.ends_with("# EOF\n"));
        let plain = answer_to(b"GET /metrics HTTP/1.1\r\n\r\n", &mailbox);
        assert_eq!(plain.content_type, ScrapeFormat::Text.content_type());
        assert!(!plain.body.contains("# EOF"));
    }

    #[test]
    fn bad_request_lines_are_refused() {
        assert_eq!(parse(b"GET /metrics\r\n\r\n"), Err(Refusal::BadRequest));
        assert_eq!(parse(b"GET  /metrics HTTP/1.1\r\n\r\n"), Err(Refusal::BadRequest));
        assert_eq!(parse(b"GET /metrics HTTP/2\r\n\r\n"), Err(Refusal::BadRequest));
        assert_eq!(parse(b"GET metrics HTTP/1.1\r\n\r\n"), Err(Refusal::BadRequest));
        assert_eq!(parse(b"\xff\xfe / HTTP/1.1\r\n\r\n"), Err(Refusal::BadRequest));
        assert_eq!(parse(b""), Err(Refusal::BadRequest));
        assert_eq!(parse(b"POST /metrics HTTP/1.1\r\n\r\n"), Err(Refusal::MethodNotAllowed));
        assert_eq!(parse(b"GET /metricsx HTTP/1.1\r\n\r\n"), Err(Refusal::NotFound));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), Err(Refusal::NotFound));
    }

    #[test]
    fn unknown_paths_get_404_and_other_methods_405() {
        let mailbox = serving();
        assert_eq!(answer_to(b"GET /nope HTTP/1.1\r\n\r\n", &mailbox).status, 404);
        let put = answer_to(b"PUT /metrics HTTP/1.1\r\n\r\n", &mailbox);
        assert_eq!(put.status, 405);
        assert!(String::from_utf8(put.to_bytes()).unwrap().contains("Allow: GET, HEAD\r\n"));
    }

    #[test]
    fn an_oversize_or_unfinished_head_is_a_bad_request() {
        let mailbox = serving();
        let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD_BYTES + 100, b'a');
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(read_head(&mut Cursor::new(&big)).unwrap(), None);
        assert_eq!(answer_to(&big, &mailbox).status, 400);
        assert_eq!(answer_to(b"GET /metrics HTTP/1.1\r\n", &mailbox).status, 400);
    }

    #[test]
    fn health_is_200_only_while_serving() {
        let mailbox = Mailbox::default();
        let probe = b"GET /health HTTP/1.1\r\n\r\n";
        assert_eq!(answer_to(probe, &mailbox).status, 503, "joining");
        mailbox.offer(Snapshot { health: Health::Serving, ..Snapshot::default() });
        assert_eq!(answer_to(probe, &mailbox).status, 200);
        mailbox.offer(Snapshot { health: Health::Stopping, ..Snapshot::default() });
        let stopping = answer_to(probe, &mailbox);
        assert_eq!((stopping.status, stopping.body.as_str()), (503, "stopping\n"));
        let why = "peers name another member set than this locker (4 members): tcp://c:1 counts 3";
        mailbox.offer(Snapshot {
            health: Health::MemberSetMismatch,
            member_set_why: Some(why.into()),
            ..Snapshot::default()
        });
        let mismatch = answer_to(probe, &mailbox);
        assert_eq!((mismatch.status, mismatch.body), (503, format!("member-set-mismatch\n{why}\n")));
        let why = "this locker's member set changed: it grants from no share until every peer has stated the new one";
        mailbox.offer(Snapshot {
            health: Health::MemberSetSettling,
            member_set_why: Some(why.into()),
            ..Snapshot::default()
        });
        let settling = answer_to(probe, &mailbox);
        assert_eq!((settling.status, settling.body), (503, format!("member-set-settling\n{why}\n")));
    }

    #[test]
    fn a_head_request_has_the_length_but_no_body() {
        let response = answer_to(b"HEAD /metrics HTTP/1.1\r\n\r\n", &serving());
        let text = String::from_utf8(response.to_bytes()).unwrap();
        assert!(text.contains(&format!("Content-Length: {}\r\n", response.body.len())), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
        assert!(response.body.contains("locker_uptime_seconds"));
    }

    /// One scrape over a real loopback socket, end to end.
    #[test]
    fn a_scrape_over_tcp_gets_the_exposition() {
        let server = crate::daemon::metrics::MetricsServer::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr();
        server.spawn(serving(), Instant::now()).unwrap();
        let get = |raw: &[u8]| {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            stream.write_all(raw).unwrap();
            let mut text = String::new();
            stream.read_to_string(&mut text).unwrap();
            text
        };
        let metrics = get(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
        assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
        assert!(metrics.contains(ScrapeFormat::Text.content_type()), "{metrics}");
        assert!(metrics.contains("\nlocker_health{state=\"serving\"} 1\n"), "{metrics}");
        assert!(get(b"GET /health HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(get(b"GET /x HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 Not Found\r\n"));
    }

    /// A client that connects and says nothing is cut off at the deadline,
    /// and the next scrape is answered.
    #[test]
    fn a_silent_client_does_not_stall_the_next_scrape() {
        let server = crate::daemon::metrics::MetricsServer::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr();
        server.spawn(serving(), Instant::now()).unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(DEADLINE * 5)).unwrap();
        stream.write_all(b"GET /health HTTP/1.1\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    }
}
