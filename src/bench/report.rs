//! What a run measured: counts per outcome and a latency histogram per
//! client, merged into one report that prints for a person (one `name value`
//! line per figure, easy to pick out with awk) or as JSON.
//!
//! This module only adds up and formats; it sends nothing.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::wire::ReplyKind;

/// The slowest latency the histogram tells apart: anything slower is
/// recorded as this (a run's timeout is far below it).
const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// One client's counts and latencies.
#[derive(Debug, Clone)]
pub struct Tally {
    pub go: u64,
    pub sorry: u64,
    pub errors: u64,
    /// Bytes of all replies counted.
    pub reply_bytes: u64,
    /// Round-trip times in nanoseconds, from send to reply.
    pub latency: Histogram<u64>,
}

impl Default for Tally {
    fn default() -> Self {
        let latency = Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("static bounds are valid");
        Tally { go: 0, sorry: 0, errors: 0, reply_bytes: 0, latency }
    }
}

impl Tally {
    /// Counts one reply of `bytes` bytes and its round-trip time.
    pub fn record(&mut self, outcome: ReplyKind, bytes: usize, latency: Duration) {
        self.reply_bytes += bytes as u64;
        match outcome {
            ReplyKind::Go => self.go += 1,
            ReplyKind::Sorry => self.sorry += 1,
            ReplyKind::Error => self.errors += 1,
        }
        self.latency.saturating_record(latency.as_nanos().min(u128::from(MAX_LATENCY_NS)) as u64);
    }

    /// Replies counted.
    pub fn replies(&self) -> u64 {
        self.go + self.sorry + self.errors
    }

    /// Adds another client's tally to this one.
    pub fn merge(&mut self, other: &Tally) {
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
    /// The measured time, from the start of the timed phase to the last reply.
    pub seconds: f64,
    pub requests: u64,
    pub requests_per_second: f64,
    pub go: u64,
    pub sorry: u64,
    pub errors: u64,
    /// The mean size of a reply.
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
            seconds: 0.0,
            requests: 0,
            requests_per_second: 0.0,
            go: 0,
            sorry: 0,
            errors: 0,
            reply_bytes: 0.0,
            p50_us: 0.0,
            p99_us: 0.0,
            p999_us: 0.0,
            max_us: 0.0,
        };
        ReportBuilder { report, total: Tally::default() }
    }
}

/// Collects the clients' tallies into a `Report`.
#[derive(Debug)]
pub struct ReportBuilder {
    report: Report,
    total: Tally,
}

impl ReportBuilder {
    /// Adds one client's tally.
    pub fn add(&mut self, tally: &Tally) {
        self.total.merge(tally);
    }

    /// The report for a measured time of `elapsed`.
    pub fn finish(self, elapsed: Duration) -> Report {
        let t = &self.total;
        let us = |q: f64| t.latency.value_at_quantile(q) as f64 / 1000.0;
        let seconds = elapsed.as_secs_f64();
        Report {
            seconds,
            requests: t.replies(),
            requests_per_second: if seconds > 0.0 { t.replies() as f64 / seconds } else { 0.0 },
            go: t.go,
            sorry: t.sorry,
            errors: t.errors,
            reply_bytes: if t.replies() > 0 { t.reply_bytes as f64 / t.replies() as f64 } else { 0.0 },
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
        writeln!(f, "target      {}", self.endpoint)?;
        writeln!(f, "load        {} clients x {} in flight, {} form, {keys}", self.clients, self.pipeline, self.form)?;
        writeln!(f, "requests    {} in {:.3} s", self.requests, self.seconds)?;
        writeln!(f, "requests/s  {:.0}", self.requests_per_second)?;
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
    fn tallies_merge_into_rates_and_quantiles() {
        let mut a = Tally::default();
        let mut b = Tally::default();
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
        let text = r.to_string();
        assert!(text.contains("requests/s  50\n") || text.contains("requests/s  51\n"), "{text}");
    }
}
