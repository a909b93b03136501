//! A [`Snapshot`] as a Prometheus scrape, in the OpenMetrics text format
//! that `prometheus-client` writes (Prometheus reads it natively).
//!
//! Series are per limit (label `limit`) and per peer (label `peer`), never
//! per key. A fresh registry is built for each scrape: the snapshot already
//! holds absolute values, so nothing is kept between scrapes. This module
//! formats only; it reads no clock and serves nothing.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode as encode_registry;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use super::{Health, LimitSnapshot, PeerSnapshot, Snapshot};

/// The content type of what [`encode`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One label, such as `limit="api"`.
type Labels = Vec<(&'static str, String)>;

/// The scrape of `snapshot`, taken `uptime_seconds` after the daemon started.
pub fn encode(snapshot: &Snapshot, uptime_seconds: f64) -> String {
    let mut registry = Registry::with_prefix("locker");
    register_process(&mut registry, snapshot, uptime_seconds);
    register_limits(&mut registry, &snapshot.limits);
    if snapshot.node.is_some() {
        register_peers(&mut registry, &snapshot.peers);
        let correction = Gauge::<f64, AtomicU64>::default();
        correction.set(snapshot.clock_correction_seconds);
        let help =
            "How far this locker moved its clock to the middle of its peers' (its own clock is off by about that much)";
        registry.register_with_unit("clock_correction", help, Unit::Seconds, correction);
    }
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = encode_registry(&mut text, &registry);
    text
}

fn register_process(registry: &mut Registry, snapshot: &Snapshot, uptime_seconds: f64) {
    let build = vec![("version", env!("CARGO_PKG_VERSION").to_owned())];
    registry.register("build", "The locker's version", Info::new(build));
    let uptime = Gauge::<f64, AtomicU64>::default();
    uptime.set(uptime_seconds);
    registry.register_with_unit("uptime", "Time since the locker started", Unit::Seconds, uptime);
    let states = [Health::Joining, Health::Serving, Health::Refusing, Health::Stopping];
    let health = states.iter().map(|&h| (vec![("state", h.name().to_owned())], i64::from(h == snapshot.health)));
    register_gauges(
        registry,
        "health",
        "1 for the locker's state: joining, serving, refusing (the state file cannot grow) or stopping",
        health,
    );
    let keys = Gauge::<i64>::default();
    keys.set(clamp(snapshot.max_keys));
    registry.register("max_keys", "Live keys allowed across all limits", keys);
    let parked = Gauge::<i64>::default();
    parked.set(clamp(snapshot.parked));
    registry.register("parked", "Asks held now for a go instead of sorry", parked);
    let held = Counter::<u64>::default();
    held.inc_by(snapshot.held);
    registry.register("held", "Asks held for a go instead of sorry since start", held);
    let held_go = Counter::<u64>::default();
    held_go.inc_by(snapshot.held_go);
    registry.register("held_go", "Held asks answered go", held_go);
    let errors = Counter::<u64>::default();
    errors.inc_by(snapshot.unattributed_errors);
    registry.register("unattributed_errors", "Errors not attributed to a limit (unknown limit, bad bytes)", errors);
    let accepts = Counter::<u64>::default();
    accepts.inc_by(snapshot.accept_failures);
    registry.register("accept_failures", "Client connections that could not be accepted (out of open files)", accepts);
}

fn register_limits(registry: &mut Registry, limits: &[LimitSnapshot]) {
    let per = |f: fn(&LimitSnapshot) -> u64| limits.iter().map(move |l| (vec![("limit", l.name.clone())], f(l)));
    register_counters(registry, "requests", "Requests answered, per limit", per(|l| l.requests));
    register_counters(registry, "go", "Requests answered go, per limit", per(|l| l.go));
    register_counters(registry, "sorry", "Requests answered sorry, per limit", per(|l| l.sorry));
    register_counters(registry, "errors", "Requests answered with an error, per limit", per(|l| l.errors));
    register_counters(registry, "waited", "Reservations and queued lease acquires, per limit", per(|l| l.waited));
    let now = |f: fn(&LimitSnapshot) -> u64| per(f).map(|(labels, v)| (labels, clamp(v)));
    register_gauges(registry, "live_keys", "Keys with a live count or lease, per limit", now(|l| l.live_keys));
    register_gauges(registry, "leases_held", "Leases held, per semaphore limit", now(|l| l.leases_held));
    register_gauges(
        registry,
        "leases_waiting",
        "Lease acquires queued, per semaphore limit",
        now(|l| l.leases_waiting),
    );
}

fn register_peers(registry: &mut Registry, peers: &[PeerSnapshot]) {
    let live = Gauge::<i64>::default();
    live.set(peers.iter().filter(|p| p.live).count() as i64);
    registry.register("peers_live", "Peers heard from recently", live);
    let per = |f: fn(&PeerSnapshot) -> f64| peers.iter().map(move |p| (vec![("peer", p.node.clone())], f(p)));
    register_float_gauges(
        registry,
        "peer_live",
        "1 while the peer is heard from",
        None,
        per(|p| f64::from(u8::from(p.live))),
    );
    register_float_gauges(
        registry,
        "peer_last_heard",
        "Time since the peer was last heard",
        Some(Unit::Seconds),
        per(|p| p.last_heard_seconds),
    );
    register_float_gauges(
        registry,
        "peer_clock_offset",
        "How far the peer's clock is ahead of this one (measured both ways, transit cancelled)",
        Some(Unit::Seconds),
        per(|p| p.clock_offset_seconds),
    );
    let flagged = "1 while the peer's clock is off by more than the in-flight window, where skew can cost a grant";
    register_float_gauges(registry, "peer_flagged", flagged, None, per(|p| f64::from(u8::from(p.flagged))));
}

fn register_counters(registry: &mut Registry, name: &str, help: &str, rows: impl Iterator<Item = (Labels, u64)>) {
    let family = Family::<Labels, Counter<u64>>::default();
    for (labels, value) in rows {
        family.get_or_create(&labels).inc_by(value);
    }
    registry.register(name, help, family);
}

fn register_gauges(registry: &mut Registry, name: &str, help: &str, rows: impl Iterator<Item = (Labels, i64)>) {
    let family = Family::<Labels, Gauge<i64>>::default();
    for (labels, value) in rows {
        family.get_or_create(&labels).set(value);
    }
    registry.register(name, help, family);
}

fn register_float_gauges(
    registry: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    rows: impl Iterator<Item = (Labels, f64)>,
) {
    let family = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    for (labels, value) in rows {
        family.get_or_create(&labels).set(value);
    }
    match unit {
        Some(unit) => registry.register_with_unit(name, help, unit, family),
        None => registry.register(name, help, family),
    }
}

/// A count as a gauge value; no real count comes near `i64::MAX`.
fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        let api = LimitSnapshot {
            name: "api".into(),
            algorithm: "fixed-window",
            requests: 10,
            go: 5,
            sorry: 4,
            errors: 1,
            waited: 2,
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
        let text = encode(&snapshot(), 1.5);
        assert_eq!(value(&text, r#"locker_requests_total{limit="api"}"#), Some(10.0));
        assert_eq!(value(&text, r#"locker_go_total{limit="api"}"#), Some(5.0));
        assert_eq!(value(&text, r#"locker_sorry_total{limit="api"}"#), Some(4.0));
        assert_eq!(value(&text, r#"locker_errors_total{limit="api"}"#), Some(1.0));
        assert_eq!(value(&text, r#"locker_waited_total{limit="api"}"#), Some(2.0));
        assert_eq!(value(&text, r#"locker_live_keys{limit="api"}"#), Some(3.0));
        assert_eq!(value(&text, r#"locker_leases_held{limit="db"}"#), Some(4.0));
        assert_eq!(value(&text, r#"locker_leases_waiting{limit="db"}"#), Some(1.0));
    }

    #[test]
    fn the_process_shows_uptime_build_and_health() {
        let text = encode(&snapshot(), 1.5);
        assert_eq!(value(&text, "locker_uptime_seconds"), Some(1.5));
        let build = format!(r#"locker_build_info{{version="{}"}}"#, env!("CARGO_PKG_VERSION"));
        assert_eq!(value(&text, &build), Some(1.0));
        assert_eq!(value(&text, r#"locker_health{state="serving"}"#), Some(1.0));
        assert_eq!(value(&text, r#"locker_health{state="joining"}"#), Some(0.0));
        assert_eq!(value(&text, "locker_max_keys"), Some(1000.0));
        assert_eq!(value(&text, "locker_unattributed_errors_total"), Some(0.0));
        assert_eq!(value(&text, "locker_parked"), Some(0.0));
        assert_eq!(value(&text, "locker_held_go_total"), Some(0.0));
        assert!(text.contains("# TYPE locker_go counter"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn peers_appear_only_when_peered() {
        assert!(!encode(&snapshot(), 0.0).contains("locker_peer"));
        let peer = PeerSnapshot {
            node: "b".into(),
            live: true,
            last_heard_seconds: 0.25,
            clock_offset_seconds: -0.002,
            flagged: false,
        };
        let gone = PeerSnapshot { node: "c".into(), flagged: true, ..PeerSnapshot::default() };
        let peered =
            Snapshot { node: Some("a".into()), peers: vec![peer, gone], clock_correction_seconds: -0.05, ..snapshot() };
        let text = encode(&peered, 0.0);
        assert_eq!(value(&text, "locker_peers_live"), Some(1.0));
        assert_eq!(value(&text, r#"locker_peer_live{peer="b"}"#), Some(1.0));
        assert_eq!(value(&text, r#"locker_peer_live{peer="c"}"#), Some(0.0));
        assert_eq!(value(&text, r#"locker_peer_last_heard_seconds{peer="b"}"#), Some(0.25));
        assert_eq!(value(&text, r#"locker_peer_clock_offset_seconds{peer="b"}"#), Some(-0.002));
        assert_eq!(value(&text, r#"locker_peer_flagged{peer="c"}"#), Some(1.0));
        assert_eq!(value(&text, "locker_clock_correction_seconds"), Some(-0.05));
    }

    #[test]
    fn label_values_are_escaped() {
        let odd = LimitSnapshot { name: "a\"b\\c".into(), go: 1, ..LimitSnapshot::default() };
        let text = encode(&Snapshot { limits: vec![odd], ..Snapshot::default() }, 0.0);
        assert_eq!(value(&text, r#"locker_go_total{limit="a\"b\\c"}"#), Some(1.0));
    }

    #[test]
    fn a_scrape_does_not_grow_with_keys() {
        let few = encode(&snapshot(), 0.0);
        let mut many = snapshot();
        many.limits[0].live_keys = 1_000_000;
        assert!(encode(&many, 0.0).len() <= few.len() + 8);
    }
}
