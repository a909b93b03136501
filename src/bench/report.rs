//! What a run measured: counts per outcome and a latency histogram per
//! client, merged into one report that prints for a person (one `name value`
//! line per figure, easy to pick out with awk) or as JSON.
//!
//! This module only adds up and formats; it sends nothing.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::wire::{self, ReplyKind};

/// The slowest latency the histogram tells apart: anything slower is
/// recorded as this (a run's timeout is far below it).
const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// One client's counts and latencies. Go, sorry and errors count
/// decisions (each ask of a batch), `messages` the round trips.
#[derive(Debug, Clone)]
pub struct Measurements {
    pub messages: u64,
    pub go: u64,
    pub sorry: u64,
    pub errors: u64,
    /// Bytes of all replies counted.
    pub reply_bytes: u64,
    /// Round-trip times in nanoseconds, from send to reply.
    pub latency: Histogram<u64>,
}

impl Default for Measurements {
    fn default() -> Self {
        let latency = Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("static bounds are valid");
        Measurements { messages: 0, go: 0, sorry: 0, errors: 0, reply_bytes: 0, latency }
    }
}

impl Measurements {
    /// Counts one reply of `bytes` bytes and its round-trip time.
    pub fn record(&mut self, outcome: ReplyKind, bytes: usize, latency: Duration) {
        self.count(outcome);
        self.round_trip(bytes, latency);
    }

    /// Counts the reply to a batch, each of its asks' replies, and its round-trip time.
    pub fn record_batch(&mut self, reply: &[u8], latency: Duration) {
        wire::classify_batch_reply(reply, |outcome| self.count(outcome));
        self.round_trip(reply.len(), latency);
    }

    fn count(&mut self, outcome: ReplyKind) {
        match outcome {
            ReplyKind::Go => self.go += 1,
            ReplyKind::Sorry => self.sorry += 1,
            ReplyKind::Error => self.errors += 1,
        }
    }

    fn round_trip(&mut self, bytes: usize, latency: Duration) {
        self.messages += 1;
        self.reply_bytes += bytes as u64;
        self.latency.saturating_record(latency.as_nanos().min(u128::from(MAX_LATENCY_NS)) as u64);
    }

    /// Decisions counted: every reply, or every ask's reply in a batch.
    pub fn decisions(&self) -> u64 {
        self.go + self.sorry + self.errors
    }

    /// Adds another client's tally to this one.
    pub fn merge(&mut self, other: &Measurements) {
        self.messages += other.messages;
        self.go += other.go;
        self.sorry += other.sorry;
        self.errors += other.errors;
        self.reply_bytes += other.reply_bytes;
        self.latency.add(&other.latency).expect("histograms with the same bounds add up");
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub endpoint: String,
    pub clients: usize,
    pub pipeline: usize,
    pub form: &'static str,
    pub keys: usize,
    /// Asks per message; 0 when each message is one ask.
    pub batch: usize,
    /// The measured time, from the start of the timed phase to the last reply.
    pub seconds: f64,
    /// Messages answered (a batch is one).
    pub requests: u64,
    pub requests_per_second: f64,
    /// Asks answered: `requests`, or every ask of every batch.
    pub decisions: u64,
    pub decisions_per_second: f64,
    pub go: u64,
    pub sorry: u64,
    pub errors: u64,
    /// The mean size of a reply message.
    pub reply_bytes: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Report {
    /// Starts the report of a run of this shape; add the tallies, then finish.
    pub fn builder(endpoint: &str, clients: usize, pipeline: usize, form: &'static str, keys: usize) -> ReportBuilder {
        let report = Report {
            endpoint: endpoint.to_owned(),
            clients,
            pipeline,
            form,
            keys,
            batch: 0,
            seconds: 0.0,
            requests: 0,
            requests_per_second: 0.0,
            decisions: 0,
            decisions_per_second: 0.0,
            go: 0,
            sorry: 0,
            errors: 0,
            reply_bytes: 0.0,
            p50_us: 0.0,
            p99_us: 0.0,
            p999_us: 0.0,
            max_us: 0.0,
        };
        ReportBuilder { report, total: Measurements::default() }
    }
}

/// Collects the clients' tallies into a `Report`.
#[derive(Debug)]
pub struct ReportBuilder {
    report: Report,
    total: Measurements,
}

impl ReportBuilder {
    /// Records that each message was a batch of `per` asks.
    pub fn batch(mut self, per: usize) -> ReportBuilder {
        self.report.batch = per;
        self
    }

    /// Adds one client's tally.
    pub fn add(&mut self, tally: &Measurements) {
        self.total.merge(tally);
    }

    /// The report for a measured time of `elapsed`.
    pub fn finish(self, elapsed: Duration) -> Report {
        let t = &self.total;
        let us = |q: f64| t.latency.value_at_quantile(q) as f64 / 1000.0;
        let seconds = elapsed.as_secs_f64();
        let per_second = |n: u64| if seconds > 0.0 { n as f64 / seconds } else { 0.0 };
        Report {
            seconds,
            requests: t.messages,
            requests_per_second: per_second(t.messages),
            decisions: t.decisions(),
            decisions_per_second: per_second(t.decisions()),
            go: t.go,
            sorry: t.sorry,
            errors: t.errors,
            reply_bytes: if t.messages > 0 { t.reply_bytes as f64 / t.messages as f64 } else { 0.0 },
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: t.latency.max() as f64 / 1000.0,
            ..self.report
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = if self.keys == 0 { "no key".to_owned() } else { format!("{} keys", self.keys) };
        let batch = if self.batch == 0 { String::new() } else { format!(", batches of {}", self.batch) };
        writeln!(f, "target      {}", self.endpoint)?;
        writeln!(
            f,
            "load        {} clients x {} in flight, {} form, {keys}{batch}",
            self.clients, self.pipeline, self.form
        )?;
        writeln!(f, "requests    {} in {:.3} s", self.requests, self.seconds)?;
        writeln!(f, "requests/s  {:.0}", self.requests_per_second)?;
        writeln!(f, "decisions   {}", self.decisions)?;
        writeln!(f, "decisions/s {:.0}", self.decisions_per_second)?;
        writeln!(f, "go          {}", self.go)?;
        writeln!(f, "sorry       {}", self.sorry)?;
        writeln!(f, "errors      {}", self.errors)?;
        writeln!(f, "reply_bytes {:.1}", self.reply_bytes)?;
        write!(
            f,
            "latency_us  p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
            self.p50_us, self.p99_us, self.p999_us, self.max_us
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_counts_one_message_and_each_decision() {
        let mut t = Measurements::default();
        let mut reply = Vec::new();
        wire::begin_batch_reply(2, &mut reply);
        wire::encode(&wire::ErrorReply { error: "no".into() }, &mut reply);
        reply.extend_from_slice(
            b"\x85\xa2ok\xc3\xa5limit\x01\xa9remaining\x00\xaeretry_after_ms\x00\xaereset_after_ms\x00",
        );
        t.record_batch(&reply, Duration::from_micros(10));
        assert_eq!((t.messages, t.decisions(), t.go, t.errors), (1, 2, 1, 1));
        let mut b = Report::builder("tcp://127.0.0.1:1", 1, 1, "structured", 0).batch(2);
        b.add(&t);
        let r = b.finish(Duration::from_secs(1));
        assert_eq!((r.requests, r.decisions, r.batch), (1, 2, 2));
        assert!(r.to_string().contains("decisions/s 2\n"), "{r}");
    }

    #[test]
    fn tallies_merge_into_rates_and_quantiles() {
        let mut a = Measurements::default();
        let mut b = Measurements::default();
        for i in 1..=99 {
            a.record(ReplyKind::Go, 2, Duration::from_micros(i));
        }
        b.record(ReplyKind::Sorry, 5, Duration::from_millis(5));
        b.record(ReplyKind::Error, 30, Duration::from_millis(5));
        let mut builder = Report::builder("tcp://127.0.0.1:1", 2, 1, "plain", 0);
        builder.add(&a);
        builder.add(&b);
        let r = builder.finish(Duration::from_secs(2));
        assert_eq!((r.requests, r.go, r.sorry, r.errors), (101, 99, 1, 1));
        assert_eq!(r.requests_per_second, 50.5);
        assert_eq!(r.reply_bytes, (99.0 * 2.0 + 5.0 + 30.0) / 101.0);
        assert!((50.9..=51.1).contains(&r.p50_us), "the 51st of 101: {}", r.p50_us);
        assert!(r.p999_us >= 4990.0, "{}", r.p999_us);
        assert_eq!((r.decisions, r.decisions_per_second), (101, 50.5));
        let text = r.to_string();
        assert!(text.contains("requests/s  50\n") || text.contains("requests/s  51\n"), "{text}");
    }
}
