//! A [`Snapshot`] as a Prometheus scrape, in either text format: the
//! classic one (`text/plain; version=0.0.4`, what `promtool check metrics`
//! and every scraper reads) unless the scraper asks for OpenMetrics in its
//! `Accept` header (see `http`).
//!
//! Series are per limit (label `limit`), per peer (label `peer`) and per
//! rate-limit domain (labels `domain` and `code`), never per key, in a
//! stable order: the families as listed here, limits in the config's
//! order, peers in the configured order, domains by name. The lease series
//! appear only for semaphores. This module formats only; it reads no clock and
//! serves nothing.

use std::fmt::Write;

use super::{Health, LimitSnapshot, PeerSnapshot, Snapshot};
use crate::core::LimitStats;
use crate::rls::counts::DomainCalls;

/// Which text format a scrape is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScrapeFormat {
    /// Prometheus's classic text format, version 0.0.4.
    #[default]
    Text,
    /// OpenMetrics 1.0.0.
    OpenMetrics,
}

impl ScrapeFormat {
    /// The content type of a scrape in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            ScrapeFormat::Text => "text/plain; version=0.0.4; charset=utf-8",
            ScrapeFormat::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

/// One metric family: its name (with its unit's suffix, without a
/// counter's `_total`), what it means, and its samples.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    unit: Option<&'static str>,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    fn new(name: &'static str, kind: Kind, help: &'static str) -> Family {
        Family { name, help, kind, unit: None, samples: Vec::new() }
    }

    fn seconds(self) -> Family {
        Family { unit: Some("seconds"), ..self }
    }

    fn one(mut self, value: f64) -> Family {
        self.samples.push((Vec::new(), value));
        self
    }

    /// A sample of several labels.
    fn labelled(mut self, labels: Vec<(&'static str, String)>, value: f64) -> Family {
        self.samples.push((labels, value));
        self
    }

    fn each<T>(mut self, label: &'static str, rows: &[T], f: impl Fn(&T) -> (String, f64)) -> Family {
        self.samples.extend(rows.iter().map(|r| {
            let (name, value) = f(r);
            (vec![(label, name)], value)
        }));
        self
    }
}

/// The scrape of `snapshot` in `format`, taken `uptime_seconds` after the
/// daemon started.
pub fn encode(snapshot: &Snapshot, uptime_seconds: f64, format: ScrapeFormat) -> String {
    let mut families = process(snapshot, uptime_seconds);
    families.extend(store(snapshot));
    families.extend(limits(&snapshot.limits));
    families.extend(rls(&snapshot.rls));
    if snapshot.node.is_some() {
        families.extend(peers(&snapshot.peers, snapshot.clock_correction_seconds));
    }
    let mut text = String::new();
    // A family without samples (the lease series without a semaphore) is left out.
    for family in families.iter().filter(|f| !f.samples.is_empty()) {
        write_family(&mut text, family, format);
    }
    if format == ScrapeFormat::OpenMetrics {
        text.push_str("# EOF\n");
    }
    text
}

fn write_family(text: &mut String, f: &Family, format: ScrapeFormat) {
    let sample = match f.kind {
        Kind::Counter => format!("locker_{}_total", f.name),
        Kind::Gauge => format!("locker_{}", f.name),
    };
    // The classic format names the family by its samples' name; OpenMetrics
    // by the name without `_total`, with a unit line.
    let (family, kind) = match (format, f.kind) {
        (ScrapeFormat::Text, Kind::Counter) => (sample.clone(), "counter"),
        (ScrapeFormat::OpenMetrics, Kind::Counter) => (format!("locker_{}", f.name), "counter"),
        (_, Kind::Gauge) => (sample.clone(), "gauge"),
    };
    // Writing into a String cannot fail.
    let _ = writeln!(text, "# HELP {family} {}", f.help);
    let _ = writeln!(text, "# TYPE {family} {kind}");
    if let (ScrapeFormat::OpenMetrics, Some(unit)) = (format, f.unit) {
        let _ = writeln!(text, "# UNIT {family} {unit}");
    }
    for (labels, value) in &f.samples {
        if labels.is_empty() {
            let _ = writeln!(text, "{sample} {value}");
            continue;
        }
        let labels: Vec<String> = labels.iter().map(|(name, v)| format!("{name}=\"{}\"", escape(v))).collect();
        let _ = writeln!(text, "{sample}{{{}}} {value}", labels.join(","));
    }
}

/// A label value as both formats quote it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The store's families, only when the counts live in one.
fn store(snapshot: &Snapshot) -> Vec<Family> {
    let Some(s) = &snapshot.store else { return Vec::new() };
    let n = |v: u64| v as f64;
    vec![
        Family::new("store_up", Kind::Gauge, "1 while every node of the store answers, 0 while one fails")
            .one(f64::from(u8::from(s.up))),
        Family::new("store_node_up", Kind::Gauge, "1 while the store's node answers, 0 while it fails").each(
            "node",
            &s.nodes,
            |(node, up)| (node.clone(), f64::from(u8::from(*up))),
        ),
        Family::new("store_claims", Kind::Counter, "Claims sent to the store").one(n(s.claims)),
        Family::new("store_claimed_permits", Kind::Counter, "Permits the store's claims brought").one(n(s.claimed)),
        Family::new("store_claim_failures", Kind::Counter, "Claims the store could not answer").one(n(s.failed)),
    ]
}

fn process(snapshot: &Snapshot, uptime_seconds: f64) -> Vec<Family> {
    let version = [env!("CARGO_PKG_VERSION")];
    let states = [
        Health::Joining,
        Health::Serving,
        Health::Refusing,
        Health::StoreDown,
        Health::MemberSetMismatch,
        Health::MemberSetSettling,
        Health::Unleased,
        Health::Stopping,
    ];
    let n = |v: u64| v as f64;
    vec![
        Family::new("build_info", Kind::Gauge, "The locker's version, as a label; always 1").each(
            "version",
            &version,
            |v| (v.to_string(), 1.0),
        ),
        Family::new("uptime_seconds", Kind::Gauge, "Time since the locker started").seconds().one(uptime_seconds),
        Family::new(
            "health",
            Kind::Gauge,
            "1 for the locker's state: joining, serving, refusing (the state file cannot grow), store-down, member-set-mismatch, member-set-settling, unleased or stopping",
        )
        .each("state", &states, |&h| (h.name().to_owned(), f64::from(u8::from(h == snapshot.health)))),
        Family::new("max_keys", Kind::Gauge, "Live keys allowed across all limits").one(n(snapshot.max_keys)),
        Family::new("runtime_limits", Kind::Gauge, "Limits created from the terms asks sent, live now")
            .one(n(snapshot.runtime_limits)),
        Family::new("runtime_limits_max", Kind::Gauge, "Limits asks may create from their terms (--runtime-limits)")
            .one(n(snapshot.runtime_limits_max)),
        Family::new("parked", Kind::Gauge, "Asks held now for a go instead of sorry").one(n(snapshot.parked)),
        Family::new("held", Kind::Counter, "Asks held for a go instead of sorry since start").one(n(snapshot.held)),
        Family::new("held_go", Kind::Counter, "Held asks answered go").one(n(snapshot.held_go)),
        Family::new(
            "undelivered",
            Kind::Counter,
            "Replies that could not be delivered (the client went away or would not read)",
        )
        .one(n(snapshot.undelivered)),
        Family::new("undelivered_go", Kind::Counter, "Undelivered replies that were go")
            .one(n(snapshot.undelivered_go)),
        Family::new(
            "unattributed_errors",
            Kind::Counter,
            "Errors not attributed to a limit (unknown limit, bad bytes)",
        )
        .one(n(snapshot.unattributed_errors)),
        Family::new(
            "accept_failures",
            Kind::Counter,
            "Client connections that could not be accepted (out of open files)",
        )
        .one(n(snapshot.accept_failures)),
    ]
}

/// A per-limit counter family: its name, its help, and the counter.
type LimitCounter = (&'static str, &'static str, fn(&LimitStats) -> u64);

/// Each limit's counters since start, as the `stats` reply has them.
const LIMIT_COUNTERS: [LimitCounter; 8] = [
    ("requests", "Requests answered, per limit", |c| c.requests),
    ("go", "Requests answered go, per limit", |c| c.go),
    ("sorry", "Requests answered sorry, per limit", |c| c.sorry),
    ("errors", "Requests answered with an error, per limit", |c| c.errors),
    ("waited", "Reservations and queued lease acquires, per limit", |c| c.waited),
    ("peeks", "Peeks (cost 0) answered, per limit: neither go nor sorry", |c| c.peeks),
    ("charged", "Permits charged after the fact (op charge), per limit, past the limit or not", |c| c.charged),
    ("shadow_sorry", "Sorries answered go because the ask or its limit was in shadow, per limit", |c| c.shadow_sorry),
];

fn limits(limits: &[LimitSnapshot]) -> Vec<Family> {
    let per = |f: fn(&LimitSnapshot) -> u64| move |l: &LimitSnapshot| (l.name.clone(), f(l) as f64);
    let semaphores: Vec<&LimitSnapshot> = limits.iter().filter(|l| l.algorithm == "semaphore").collect();
    let per_semaphore = |f: fn(&LimitSnapshot) -> u64| move |l: &&LimitSnapshot| (l.name.clone(), f(l) as f64);
    let counters = LIMIT_COUNTERS.iter().map(|&(name, help, count)| {
        Family::new(name, Kind::Counter, help).each("limit", limits, move |l| (l.name.clone(), count(&l.counts) as f64))
    });
    counters
        .chain([
            Family::new("live_keys", Kind::Gauge, "Keys with a live count or lease, per limit").each(
                "limit",
                limits,
                per(|l| l.live_keys),
            ),
            Family::new("leases_held", Kind::Gauge, "Leases held, per semaphore limit").each(
                "limit",
                &semaphores,
                per_semaphore(|l| l.leases_held),
            ),
            Family::new("leases_waiting", Kind::Gauge, "Lease acquires queued, per semaphore limit").each(
                "limit",
                &semaphores,
                per_semaphore(|l| l.leases_waiting),
            ),
        ])
        .collect()
}

/// Envoy's rate-limit service's calls, per configured domain (the others
/// under one label) and outcome: a family only while it serves.
fn rls(domains: &[(String, DomainCalls)]) -> Option<Family> {
    if domains.is_empty() {
        return None;
    }
    let help = "Envoy rate-limit calls, per domain (the unconfigured under one) and code: ok, over_limit or error";
    let mut family = Family::new("rls_requests", Kind::Counter, help);
    for (domain, t) in domains {
        for (code, n) in [("ok", t.ok), ("over_limit", t.over_limit), ("error", t.error)] {
            family = family.labelled(vec![("domain", domain.clone()), ("code", code.to_owned())], n as f64);
        }
    }
    Some(family)
}

fn peers(peers: &[PeerSnapshot], correction_seconds: f64) -> Vec<Family> {
    let flag = |b: bool| f64::from(u8::from(b));
    vec![
        Family::new("peers_live", Kind::Gauge, "Peers heard from recently")
            .one(peers.iter().filter(|p| p.live).count() as f64),
        Family::new("peer_live", Kind::Gauge, "1 while the peer is heard from")
            .each("peer", peers, |p| (p.node.clone(), flag(p.live))),
        Family::new("peer_last_heard_seconds", Kind::Gauge, "Time since the peer was last heard").seconds().each(
            "peer",
            peers,
            |p| (p.node.clone(), p.last_heard_seconds),
        ),
        Family::new(
            "peer_clock_offset_seconds",
            Kind::Gauge,
            "How far the peer's clock is ahead of this one (measured both ways, transit cancelled)",
        )
        .seconds()
        .each("peer", peers, |p| (p.node.clone(), p.clock_offset_seconds)),
        Family::new(
            "peer_flagged",
            Kind::Gauge,
            "1 while the peer's clock is off by more than the in-flight window, where skew can cost a grant",
        )
        .each("peer", peers, |p| (p.node.clone(), flag(p.flagged))),
        Family::new(
            "peer_set_mismatch",
            Kind::Gauge,
            "1 while the peer names another member set than this locker: no grant from shares until they agree",
        )
        .each("peer", peers, |p| (p.node.clone(), flag(p.set_mismatch))),
        Family::new(
            "clock_correction_seconds",
            Kind::Gauge,
            "How far this locker moved its clock to the middle of its peers' (its own clock is off by about that much)",
        )
        .seconds()
        .one(correction_seconds),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        let api = LimitSnapshot {
            name: "api".into(),
            algorithm: "fixed-window",
            counts: LimitStats {
                requests: 10,
                go: 5,
                sorry: 4,
                errors: 1,
                waited: 2,
                peeks: 0,
                charged: 0,
                shadow_sorry: 3,
            },
            live_keys: 3,
            ..LimitSnapshot::default()
        };
        let db = LimitSnapshot {
            name: "db".into(),
            algorithm: "semaphore",
            leases_held: 4,
            leases_waiting: 1,
            live_keys: 4,
            ..LimitSnapshot::default()
        };
        Snapshot { health: Health::Serving, limits: vec![api, db], max_keys: 1000, ..Snapshot::default() }
    }

    /// The value of the one series called exactly `series`, checking on the
    /// way that every sample line is `name{labels} number`.
    fn value(text: &str, series: &str) -> Option<f64> {
        let mut found = None;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, number) = line.rsplit_once(' ').expect("a sample line has a name and a value");
            let number: f64 = number.parse().expect("a sample's value is a number");
            if name == series {
                assert!(found.is_none(), "{series} appears twice");
                found = Some(number);
            }
        }
        found
    }

    #[test]
    fn limits_become_series_labelled_by_limit() {
        let text = encode(&snapshot(), 1.5, ScrapeFormat::OpenMetrics);
        assert_eq!(value(&text, r#"locker_requests_total{limit="api"}"#), Some(10.0));
        assert_eq!(value(&text, r#"locker_go_total{limit="api"}"#), Some(5.0));
        assert_eq!(value(&text, r#"locker_sorry_total{limit="api"}"#), Some(4.0));
        assert_eq!(value(&text, r#"locker_errors_total{limit="api"}"#), Some(1.0));
        assert_eq!(value(&text, r#"locker_waited_total{limit="api"}"#), Some(2.0));
        assert_eq!(value(&text, r#"locker_shadow_sorry_total{limit="api"}"#), Some(3.0));
        assert_eq!(value(&text, r#"locker_live_keys{limit="api"}"#), Some(3.0));
        assert_eq!(value(&text, r#"locker_leases_held{limit="db"}"#), Some(4.0));
        assert_eq!(value(&text, r#"locker_leases_waiting{limit="db"}"#), Some(1.0));
    }

    #[test]
    fn the_process_shows_uptime_build_and_health() {
        let text = encode(&snapshot(), 1.5, ScrapeFormat::OpenMetrics);
        assert_eq!(value(&text, "locker_uptime_seconds"), Some(1.5));
        let build = format!(r#"locker_build_info{{version="{}"}}"#, env!("CARGO_PKG_VERSION"));
        assert_eq!(value(&text, &build), Some(1.0));
        assert_eq!(value(&text, r#"locker_health{state="serving"}"#), Some(1.0));
        assert_eq!(value(&text, r#"locker_health{state="joining"}"#), Some(0.0));
        assert_eq!(value(&text, "locker_max_keys"), Some(1000.0));
        assert_eq!(value(&text, "locker_runtime_limits"), Some(0.0));
        assert_eq!(value(&text, "locker_runtime_limits_max"), Some(0.0));
        assert_eq!(value(&text, "locker_unattributed_errors_total"), Some(0.0));
        assert_eq!(value(&text, "locker_parked"), Some(0.0));
        assert_eq!(value(&text, "locker_held_go_total"), Some(0.0));
        assert!(text.contains("# TYPE locker_go counter"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn peers_appear_only_when_peered() {
        assert!(!encode(&snapshot(), 0.0, ScrapeFormat::Text).contains("locker_peer"));
        let peer = PeerSnapshot {
            node: "b".into(),
            live: true,
            last_heard_seconds: 0.25,
            clock_offset_seconds: -0.002,
            flagged: false,
            set_mismatch: false,
        };
        let gone = PeerSnapshot { node: "c".into(), flagged: true, set_mismatch: true, ..PeerSnapshot::default() };
        let peered =
            Snapshot { node: Some("a".into()), peers: vec![peer, gone], clock_correction_seconds: -0.05, ..snapshot() };
        let text = encode(&peered, 0.0, ScrapeFormat::Text);
        assert_eq!(value(&text, "locker_peers_live"), Some(1.0));
        assert_eq!(value(&text, r#"locker_peer_live{peer="b"}"#), Some(1.0));
        assert_eq!(value(&text, r#"locker_peer_live{peer="c"}"#), Some(0.0));
        assert_eq!(value(&text, r#"locker_peer_last_heard_seconds{peer="b"}"#), Some(0.25));
        assert_eq!(value(&text, r#"locker_peer_clock_offset_seconds{peer="b"}"#), Some(-0.002));
        assert_eq!(value(&text, r#"locker_peer_flagged{peer="c"}"#), Some(1.0));
        assert_eq!(value(&text, r#"locker_peer_set_mismatch{peer="b"}"#), Some(0.0));
        assert_eq!(value(&text, r#"locker_peer_set_mismatch{peer="c"}"#), Some(1.0));
        assert_eq!(value(&text, "locker_clock_correction_seconds"), Some(-0.05));
    }

    #[test]
    fn rls_calls_are_series_per_domain_and_code_only_while_it_serves() {
        assert!(!encode(&snapshot(), 0.0, ScrapeFormat::Text).contains("locker_rls"));
        let a = DomainCalls { ok: 3, over_limit: 2, error: 1 };
        let serving = Snapshot { rls: vec![("a\"b".into(), a)], ..snapshot() };
        let text = encode(&serving, 0.0, ScrapeFormat::Text);
        assert_eq!(value(&text, r#"locker_rls_requests_total{domain="a\"b",code="ok"}"#), Some(3.0));
        assert_eq!(value(&text, r#"locker_rls_requests_total{domain="a\"b",code="over_limit"}"#), Some(2.0));
        assert_eq!(value(&text, r#"locker_rls_requests_total{domain="a\"b",code="error"}"#), Some(1.0));
    }

    #[test]
    fn the_classic_format_names_families_by_their_samples_and_has_no_eof() {
        let text = encode(&snapshot(), 1.5, ScrapeFormat::Text);
        assert!(text.contains("# HELP locker_go_total Requests answered go, per limit\n"), "{text}");
        assert!(text.contains("# TYPE locker_go_total counter\n"), "{text}");
        assert!(text.contains("# TYPE locker_build_info gauge\n"), "{text}");
        assert!(!text.contains("# UNIT") && !text.contains("# EOF"), "{text}");
        assert_eq!(value(&text, r#"locker_go_total{limit="api"}"#), Some(5.0));
        let om = encode(&snapshot(), 1.5, ScrapeFormat::OpenMetrics);
        assert!(om.contains("# UNIT locker_uptime_seconds seconds\n"), "{om}");
    }

    #[test]
    fn lease_series_are_only_for_semaphores_and_the_order_is_the_configs() {
        let text = encode(&snapshot(), 0.0, ScrapeFormat::Text);
        assert_eq!(value(&text, r#"locker_leases_held{limit="api"}"#), None, "api is no semaphore");
        assert_eq!(value(&text, r#"locker_leases_held{limit="db"}"#), Some(4.0));
        assert_eq!(text, encode(&snapshot(), 0.0, ScrapeFormat::Text), "the same snapshot, the same bytes");
        let api = text.find(r#"locker_go_total{limit="api"}"#).unwrap();
        assert!(api < text.find(r#"locker_go_total{limit="db"}"#).unwrap(), "limits in the config's order");
    }

    #[test]
    fn label_values_are_escaped() {
        let counts = LimitStats { go: 1, ..LimitStats::default() };
        let odd = LimitSnapshot { name: "a\"b\\c".into(), counts, ..LimitSnapshot::default() };
        let text = encode(&Snapshot { limits: vec![odd], ..Snapshot::default() }, 0.0, ScrapeFormat::Text);
        assert_eq!(value(&text, r#"locker_go_total{limit="a\"b\\c"}"#), Some(1.0));
    }

    #[test]
    fn a_scrape_does_not_grow_with_keys() {
        let few = encode(&snapshot(), 0.0, ScrapeFormat::Text);
        let mut many = snapshot();
        many.limits[0].live_keys = 1_000_000;
        assert!(encode(&many, 0.0, ScrapeFormat::Text).len() <= few.len() + 8);
    }
}
