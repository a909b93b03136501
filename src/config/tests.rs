//! Unit tests of `config`.

use super::*;

fn parse(text: &str) -> FileConfig {
    toml::from_str(text).unwrap()
}

#[test]
fn defaults_are_the_seeds() {
    let c = ServeConfig::resolve(Flags::default(), FileConfig::default()).unwrap();
    assert_eq!(c.bind, "tcp://127.0.0.1:7777", "loopback unless told otherwise");
    assert_eq!(c.default.quota(), Quota::new(1, 1.0).unwrap());
    assert!(c.limits.is_empty());
}

#[test]
fn flags_win_over_the_file() {
    let file = parse(
        "bind = 'tcp://127.0.0.1:1'\n[[limits]]\nname = 'default'\nmax_requests = 3\nin_seconds = 2.0\n\
         [[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 0.8\n",
    );
    let flags = Flags { max_requests: Some(7), ..Flags::default() };
    let c = ServeConfig::resolve(flags, file).unwrap();
    assert_eq!(c.bind, "tcp://127.0.0.1:1");
    assert_eq!(c.default.quota(), Quota::new(7, 2.0).unwrap());
    assert_eq!(c.limits.len(), 1);
    assert_eq!(c.limits[0].name(), "api");
}

#[test]
fn bad_files_are_clear_errors() {
    let dup = parse(
        "[[limits]]\nname='a'\nmax_requests=1\nin_seconds=1\n[[limits]]\nname='a'\nmax_requests=1\nin_seconds=1\n",
    );
    assert!(matches!(ServeConfig::resolve(Flags::default(), dup), Err(ConfigError::Duplicate(_))));
    let zero = parse("[[limits]]\nname='a'\nmax_requests=0\nin_seconds=1\n");
    let e = ServeConfig::resolve(Flags::default(), zero).unwrap_err();
    assert_eq!(e.to_string(), "limit \"a\": max_requests must be at least 1");
    assert!(toml::from_str::<FileConfig>("nonsense = 1").is_err());
}

#[test]
fn file_errors_say_the_line_column_and_limit() {
    let e = FileConfig::parse("[[limits]]\nmax_requests = 1\nin_seconds = 1\n").unwrap_err();
    assert!(e.starts_with("line 1, column 1: limit number 1: missing field `name`"), "{e}");
    let e = FileConfig::parse("max_keys = 1\nnonsense = 2\n").unwrap_err();
    assert!(e.starts_with("line 2, column 1: unknown field `nonsense`"), "{e}");
    let e = FileConfig::parse("max_keys = 'x'\n").unwrap_err();
    assert!(e.starts_with("line 1, column 12: "), "{e}");
}

#[test]
fn bind_endpoints_resolve_host_names_and_refuse_large_ports() {
    assert_eq!(bind_endpoint("tcp://localhost:7777").unwrap(), "tcp://127.0.0.1:7777");
    assert_eq!(bind_endpoint("tcp://localhost:*").unwrap(), "tcp://127.0.0.1:*");
    assert_eq!(bind_endpoint("tcp://lo:7777").unwrap(), "tcp://127.0.0.1:7777", "an interface, by its address");
    for kept in ["tcp://*:7777", "tcp://10.0.0.5:1", "tcp://[::1]:1", "ipc:///tmp/x", "inproc://a"] {
        assert_eq!(bind_endpoint(kept).unwrap(), kept);
    }
    let e = bind_endpoint("tcp://127.0.0.1:70000").unwrap_err();
    assert_eq!(e.to_string(), "cannot bind tcp://127.0.0.1:70000: port 70000 is above 65535");
    let flags = Flags { bind: Some("tcp://*:65536".into()), ..Flags::default() };
    assert!(matches!(ServeConfig::resolve(flags, FileConfig::default()), Err(ConfigError::Bind { .. })));
}

#[test]
fn peering_settings_without_peer_bind_are_reported_as_ignored() {
    let flags = Flags { node_id: Some("a".into()), ..Flags::default() };
    let names = |i: Vec<Ignored>| i.into_iter().map(|i| i.setting).collect::<Vec<_>>();
    assert_eq!(names(ignored_settings(&flags, &parse("peer_grace = 0.5\n"))), ["node_id", "peer_grace"]);
    let fsync = Flags { state_fsync: Some(1.0), state_discard: Some(true), ..Flags::default() };
    assert_eq!(names(ignored_settings(&fsync, &FileConfig::default())), ["state_fsync", "state_discard"]);
    let kept = Flags { state: Some("s.log".into()), ..fsync };
    assert!(ignored_settings(&kept, &FileConfig::default()).is_empty());
    let peered = Flags { peer_bind: Some("tcp://*:1".into()), ..flags.clone() };
    assert!(ignored_settings(&peered, &FileConfig::default()).is_empty());
    assert!(ignored_settings(&Flags::default(), &FileConfig::default()).is_empty());
}

#[test]
fn one_file_mixes_the_three_kinds() {
    let file = parse(
        "[[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 0.8\n\
         [[limits]]\nname = 'smooth'\nalgorithm = 'token-bucket'\nmax_requests = 10\nin_seconds = 1\nburst = 20\n\
         [[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = 4\nin_seconds = 30\n",
    );
    let c = ServeConfig::resolve(Flags::default(), file).unwrap();
    let kinds: Vec<_> = c.limits.iter().map(|l| (l.name(), l.algorithm().name(), l.capacity())).collect();
    assert_eq!(kinds, [("api", "fixed-window", 5), ("smooth", "token-bucket", 20), ("db", "semaphore", 4)]);
    let burst_on_window = parse("[[limits]]\nname='w'\nmax_requests=1\nin_seconds=1\nburst=3\n");
    let e = ServeConfig::resolve(Flags::default(), burst_on_window).unwrap_err();
    assert!(matches!(e, ConfigError::BurstWithoutBucket(_)), "{e}");
    assert!(toml::from_str::<FileConfig>("[[limits]]\nname='x'\nmax_requests=1\nin_seconds=1\nalgorithm='leaky'\n")
        .is_err());
}

#[test]
fn a_limit_may_roll_and_takes_no_burst() {
    let file = parse("[[limits]]\nname='r'\nalgorithm='rolling-window'\nmax_requests=5\nin_seconds=0.8\n");
    let c = ServeConfig::resolve(Flags::default(), file).unwrap();
    assert_eq!((c.limits[0].algorithm().name(), c.limits[0].capacity()), ("rolling-window", 5));
    let flags = Flags { algorithm: Some("rolling-window".parse().unwrap()), burst: Some(3), ..Flags::default() };
    let e = ServeConfig::resolve(flags, FileConfig::default()).unwrap_err();
    assert!(matches!(e, ConfigError::BurstWithoutBucket(_)), "{e}");
}

#[test]
fn a_rolling_window_counts_over_its_margin_too() {
    let file = parse("[[limits]]\nname='r'\nalgorithm='rolling-window'\nmax_requests=5\nin_seconds=0.8\nmargin_ms=5\n");
    let c = ServeConfig::resolve(Flags::default(), file).unwrap();
    let r = &c.limits[0];
    assert_eq!((r.quota().slot_ns(), r.margin(), r.in_seconds()), (805_000_000, 5_000_000, 0.8));
    let flags = Flags { algorithm: Some("rolling-window".parse().unwrap()), margin_ms: Some(2.5), ..Flags::default() };
    let c = ServeConfig::resolve(flags, FileConfig::default()).unwrap();
    assert_eq!(c.default.margin(), 2_500_000, "--margin-ms for the default limit");
    let resolved = |text: &str| {
        let mut file = FileConfig::parse(text).unwrap();
        file.path = Some("limits.toml".into());
        ServeConfig::resolve(Flags::default(), file).unwrap_err().to_string()
    };
    let on_window = "[[limits]]\nname = 'a'\nmax_requests = 1\nin_seconds = 1\nmargin_ms = 3\n";
    assert_eq!(
        resolved(on_window),
        "limits.toml, line 5: limit \"a\": margin_ms is only for algorithm = \"rolling-window\""
    );
    let too_long =
        "[[limits]]\nname = 'a'\nalgorithm = 'rolling-window'\nmax_requests = 1\nin_seconds = 0.01\nmargin_ms = 11\n";
    assert!(resolved(too_long).ends_with("margin_ms must be a number from 0 to the window's length (10 ms), got 11"));
    let negative =
        "[[limits]]\nname = 'a'\nalgorithm = 'rolling-window'\nmax_requests = 1\nin_seconds = 1\nmargin_ms = -1\n";
    assert!(resolved(negative).contains("got -1"), "{}", resolved(negative));
}

#[test]
fn flags_can_make_the_default_limit_a_token_bucket() {
    let flags = Flags { algorithm: Some(AlgorithmName::TokenBucket), burst: Some(7), ..Flags::default() };
    let c = ServeConfig::resolve(flags, FileConfig::default()).unwrap();
    assert_eq!(c.default.capacity(), 7);
    assert_eq!(c.default.algorithm().name(), "token-bucket");
}

#[test]
fn peering_comes_from_the_file_or_the_flags() {
    let file = parse(
        "peer_bind = 'tcp://*:7778'\npeers = ['tcp://b:7778', 'tcp://c:7778']\nnode_id = 'a'\npeer_grace = 0.5\n",
    );
    let c = ServeConfig::resolve(Flags::default(), file).unwrap().peering.unwrap();
    assert_eq!(c.bind, "tcp://*:7778");
    let endpoints: Vec<_> = c.peers.iter().map(|p| p.endpoint.as_str()).collect();
    assert_eq!(endpoints, ["tcp://b:7778", "tcp://c:7778"]);
    assert_eq!(c.node_id, NodeId::Given("a".into()));
    assert_eq!(c.grace, std::time::Duration::from_millis(500));
    let flags = Flags { peers: Some(vec!["tcp://d:1".into()]), node_id: Some("x".into()), ..Flags::default() };
    let file = parse("peer_bind = 'tcp://*:7778'\npeers = ['tcp://b:7778']\n");
    let c = ServeConfig::resolve(flags, file).unwrap().peering.unwrap();
    assert_eq!((c.peers[0].endpoint.as_str(), c.node_id.configured()), ("tcp://d:1", Some("x")));
}

#[test]
fn a_peer_may_name_its_public_key_when_curve_is_on() {
    let key = KeyPair::generate().unwrap().public;
    let spec = format!("tcp://b:7778={}", key.to_z85());
    assert_eq!(PeerSpec::parse(&spec).unwrap(), PeerSpec { id: None, endpoint: "tcp://b:7778".into(), key: Some(key) });
    let missing = PeerSpec::parse("tcp://b:7778=/nonexistent.pub").unwrap_err().to_string();
    assert_eq!(missing, "CURVE: --peer: \"/nonexistent.pub\" is no file, nor a CURVE key in Z85 (40 characters)");
    let flags = Flags { peer_bind: Some("tcp://*:1".into()), peers: Some(vec![spec]), ..Flags::default() };
    let plain = ServeConfig::resolve(flags, FileConfig::default());
    assert!(matches!(plain, Err(ConfigError::PeerKeyWithoutSecret(e)) if e == "tcp://b:7778"));
}

#[test]
fn curve_keys_come_from_the_file_or_the_flags() {
    let dir = std::env::temp_dir().join(format!("locker-config-curve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (server, alice) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
    std::fs::write(dir.join("server.key"), format!("{}\n", server.secret.to_z85())).unwrap();
    std::fs::write(dir.join("clients"), format!("# alice\n{}\n", alice.public)).unwrap();
    let file = parse(&format!(
        "curve_secret_key = '{}'\ncurve_clients = '{}'\n",
        dir.join("server.key").display(),
        dir.join("clients").display()
    ));
    let curve = ServeConfig::resolve(Flags::default(), file).unwrap().curve.unwrap();
    assert_eq!(curve.keys, server);
    assert_eq!(curve.clients, Some(Allowlist::of([alice.public])));
    let open = Flags { curve_secret_key: Some(dir.join("server.key")), ..Flags::default() };
    assert_eq!(ServeConfig::resolve(open, FileConfig::default()).unwrap().curve.unwrap().clients, None);
    let no_secret = Flags { curve_clients: Some(dir.join("clients")), ..Flags::default() };
    let e = ServeConfig::resolve(no_secret, FileConfig::default()).unwrap_err();
    assert!(matches!(e, ConfigError::ClientsWithoutSecret), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_lease_secret_comes_from_the_file_or_the_flags_and_is_long() {
    let dir = std::env::temp_dir().join(format!("locker-config-lease-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("long"), [7u8; 32]).unwrap();
    std::fs::write(dir.join("short"), [7u8; 31]).unwrap();
    let file = parse(&format!("lease_secret = '{}'\n", dir.join("long").display()));
    assert!(ServeConfig::resolve(Flags::default(), file).unwrap().lease_secret.is_some());
    let short = Flags { lease_secret: Some(dir.join("short")), ..Flags::default() };
    let e = ServeConfig::resolve(short, FileConfig::default()).unwrap_err();
    assert!(e.to_string().contains("at least 32 bytes"), "{e}");
    assert!(ServeConfig::resolve(Flags::default(), FileConfig::default()).unwrap().lease_secret.is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn peering_settings_are_checked() {
    assert!(ServeConfig::resolve(Flags::default(), FileConfig::default()).unwrap().peering.is_none());
    let no_bind = Flags { peers: Some(vec!["tcp://b:1".into()]), ..Flags::default() };
    assert!(matches!(ServeConfig::resolve(no_bind, FileConfig::default()), Err(ConfigError::PeersWithoutBind)));
    let bind = || Flags { peer_bind: Some("tcp://*:1".into()), ..Flags::default() };
    let bad_id = Flags { node_id: Some("a b".into()), ..bind() };
    assert!(matches!(ServeConfig::resolve(bad_id, FileConfig::default()), Err(ConfigError::BadNodeId(_))));
    let bad_grace = Flags { peer_grace: Some(-1.0), ..bind() };
    assert!(matches!(ServeConfig::resolve(bad_grace, FileConfig::default()), Err(ConfigError::BadGrace(_))));
}

/// The default id is the same for every run of one locker (#52): made
/// from the host and the PUB port, never the process.
#[test]
fn the_default_node_id_is_the_host_and_the_peer_port_the_same_at_every_start() {
    let bind = |endpoint: &str| Flags { peer_bind: Some(endpoint.into()), ..Flags::default() };
    let id = || ServeConfig::resolve(bind("tcp://*:7778"), FileConfig::default()).unwrap().peering.unwrap().node_id;
    let NodeId::Derived(made) = id() else { panic!("derived: {:?}", id()) };
    assert!(made.ends_with("-7778"), "{made}");
    assert!(!made.contains(&std::process::id().to_string()), "{made}");
    assert_eq!(id(), id());
    let ipc = ServeConfig::resolve(bind("ipc:///tmp/a.sock"), FileConfig::default()).unwrap().peering.unwrap();
    assert!(ipc.node_id.configured().is_some_and(|id| id.ends_with("-/tmp/a.sock")), "{:?}", ipc.node_id);
}

#[test]
fn the_node_id_is_derived_from_a_fixed_address_only() {
    assert_eq!(node_id::derived(Some("h"), "tcp://10.0.0.1:7778").as_deref(), Some("h-7778"));
    assert_eq!(node_id::derived(Some("h"), "tcp://[::1]:7778").as_deref(), Some("h-7778"));
    assert_eq!(node_id::derived(Some("h"), "ipc:///run/l.sock").as_deref(), Some("h-/run/l.sock"));
    for ephemeral in ["tcp://*:*", "tcp://127.0.0.1:*", "tcp://127.0.0.1:0", "ipc://*", "tcp://h"] {
        assert_eq!(node_id::derived(Some("h"), ephemeral), None, "{ephemeral}");
    }
    assert_eq!(node_id::derived(None, "tcp://*:7778"), None, "without a host name every host would be alike");
    assert_eq!(node_id::derived(Some(&"h".repeat(60)), "tcp://*:7778"), None, "too long for an id");
}

#[test]
fn without_a_fixed_port_a_peered_locker_needs_a_node_id_or_a_state_file() {
    let ephemeral = || Flags { peer_bind: Some("tcp://127.0.0.1:*".into()), ..Flags::default() };
    let e = ServeConfig::resolve(ephemeral(), FileConfig::default()).unwrap_err();
    assert!(matches!(e, ConfigError::NoStableNodeId(_)), "{e}");
    assert!(e.to_string().contains("pass --node-id"), "{e}");
    let given = Flags { node_id: Some("a".into()), ..ephemeral() };
    let c = ServeConfig::resolve(given, FileConfig::default()).unwrap().peering.unwrap();
    assert_eq!(c.node_id, NodeId::Given("a".into()));
    let kept = Flags { state: Some("/tmp/locker.state".into()), ..ephemeral() };
    assert_eq!(ServeConfig::resolve(kept, FileConfig::default()).unwrap().peering.unwrap().node_id, NodeId::Kept);
    let mut file = FileConfig::parse("peer_bind = 'tcp://127.0.0.1:*'\n").unwrap();
    file.path = Some("locker.toml".into());
    let e = ServeConfig::resolve(Flags::default(), file).unwrap_err();
    assert!(e.to_string().contains("line 1") && e.to_string().contains("--node-id"), "{e}");
}

#[test]
fn a_kept_node_id_wins_over_a_derived_one_and_a_given_one_over_both() {
    let (given, derived) = (NodeId::Given("a".into()), NodeId::Derived("h-7778".into()));
    assert_eq!(given.choose(Some("old")), "a");
    assert_eq!(derived.choose(Some("old")), "old", "the id the last run went by, wherever it came from");
    assert_eq!(derived.choose(None), "h-7778");
    assert_eq!(derived.choose(Some("not an id")), "h-7778");
    assert_eq!(NodeId::Kept.choose(Some("old")), "old");
    let fresh = NodeId::Kept.choose(None);
    assert!(node_id::valid(&fresh), "{fresh}");
}

/// Errors about what a file means name the file, the line of the key at
/// fault and the limit, as syntax errors name theirs (#40).
#[test]
fn meaning_errors_name_the_file_the_line_and_the_limit() {
    let resolved = |text: &str| {
        let mut file = FileConfig::parse(text).unwrap();
        file.path = Some("limits.toml".into());
        ServeConfig::resolve(Flags::default(), file).unwrap_err().to_string()
    };
    let twice = "[[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 0.8\n\n[[limits]]\nname = 'api'\nmax_requests = 1\nin_seconds = 1\n";
    assert_eq!(resolved(twice), "limits.toml, line 7, name: limit \"api\" is defined twice");
    let zero = "# a comment\n[[limits]]\nname = 'a'\nmax_requests = 0\nin_seconds = 1\n";
    assert_eq!(resolved(zero), "limits.toml, line 4: limit \"a\": max_requests must be at least 1");
    let burst = "[[limits]]\nname = 'a'\nmax_requests = 1\nin_seconds = 1\nburst = 3\n";
    assert!(resolved(burst).starts_with("limits.toml, line 5: limit \"a\": burst is only for"), "{}", resolved(burst));
}

#[test]
fn a_fixed_window_may_count_per_calendar_period_in_a_time_zone() {
    let file = parse(
        "[[limits]]\nname = 'plan'\nmax_requests = 10000\nperiod = 'month'\ntime_zone = 'Europe/Berlin'\n\
         [[limits]]\nname = 'daily'\nmax_requests = 5\nperiod = 'day'\n\
         [[limits]]\nname = 'default'\nmax_requests = 7\nperiod = 'week'\ntime_zone = 'america/new_york'\n",
    );
    let c = ServeConfig::resolve(Flags::default(), file).unwrap();
    let calendar = |l: &Limit| l.quota().calendar().map(|c| (c.period(), c.zone_name()));
    assert_eq!(calendar(&c.limits[0]), Some((Period::Month, "Europe/Berlin")));
    assert_eq!(calendar(&c.limits[1]), Some((Period::Day, "UTC")), "UTC unless told");
    assert_eq!(calendar(&c.default), Some((Period::Week, "America/New_York")), "the database's spelling");
    assert_eq!(c.default.quota().max_requests(), 7);
}

#[test]
fn calendar_settings_that_cannot_be_are_refused_at_their_line() {
    let resolved = |text: &str| {
        let mut file = FileConfig::parse(text).unwrap();
        file.path = Some("limits.toml".into());
        ServeConfig::resolve(Flags::default(), file).unwrap_err().to_string()
    };
    let head = "[[limits]]\nname = 'a'\nmax_requests = 1\n";
    assert_eq!(
        resolved(&format!("{head}period = 'month'\ntime_zone = 'Mars/Olympus_Mons'\n")),
        "limits.toml, line 5: limit \"a\": time_zone \"Mars/Olympus_Mons\" is not a time zone of the IANA database \
         (write it as Area/City, e.g. \"Europe/Berlin\")"
    );
    assert_eq!(
        resolved(&format!("{head}in_seconds = 60\nperiod = 'month'\n")),
        "limits.toml, line 5: limit \"a\": period and in_seconds are both set: a window counts per calendar period \
         or per in_seconds, not both"
    );
    assert_eq!(
        resolved(&format!("{head}period = 'year'\n")),
        "limits.toml, line 4: limit \"a\": period must be \"day\", \"week\" or \"month\", got \"year\""
    );
    assert_eq!(
        resolved(&format!("{head}algorithm = 'token-bucket'\nperiod = 'day'\n")),
        "limits.toml, line 5: limit \"a\": period is only for algorithm = \"fixed-window\""
    );
    assert_eq!(
        resolved(&format!("{head}in_seconds = 1\ntime_zone = 'UTC'\n")),
        "limits.toml, line 5: limit \"a\": time_zone is only for a limit with a period"
    );
    assert_eq!(
        resolved(&format!("max_keys = 1\n\n{head}")),
        "limits.toml, line 3: limit \"a\": in_seconds or period is needed (a slot length, or a calendar period)"
    );
}

/// The TOML reader's Rust wording is put in the file's own words.
#[test]
fn syntax_errors_speak_of_the_file_not_of_rust_types() {
    let negative = FileConfig::parse("[[limits]]\nname = 'a'\nmax_requests = -5\nin_seconds = 1\n").unwrap_err();
    assert!(
        negative.contains("line 3") && negative.contains("whole number") && !negative.contains("u32"),
        "{negative}"
    );
    let single = FileConfig::parse("[limits]\nname = 'a'\nmax_requests = 5\nin_seconds = 1\n").unwrap_err();
    assert!(single.contains("[[limits]], not [limits]") && !single.contains("sequence"), "{single}");
}

#[test]
fn a_store_is_read_checked_and_refused_beside_what_it_replaces() {
    let store = |text: &str| ServeConfig::resolve(Flags::default(), parse(text));
    let c = store("store = 'redis-cluster://10.0.0.1:6379, 10.0.0.2:6379'\n").unwrap().store.unwrap();
    let nodes = vec!["redis://10.0.0.1:6379".to_owned(), "redis://10.0.0.2:6379".to_owned()];
    assert_eq!((c.spec, c.timeout.as_millis()), (StoreSpec::Cluster(nodes), 200));
    for bad in ["store = 'redis://nohost'", "store = 'redis://h:0'", "store = 'redis-cluster://'", "store = 'mem://'"] {
        assert!(matches!(store(bad), Err(ConfigError::BadStore { .. })), "{bad}");
    }
    let e = store("store = 'redis://h:1'\nstore_timeout_ms = 0\n").unwrap_err();
    assert_eq!(e.to_string(), "store_timeout_ms must be from 1 to 60000, got 0");
    let peered = store("store = 'redis://h:1'\npeer_bind = 'tcp://127.0.0.1:7000'\n").unwrap_err();
    assert!(matches!(peered, ConfigError::StoreWithPeering), "{peered}");
}

#[test]
fn on_a_store_each_limit_fails_as_it_says_and_a_semaphore_always_fails_closed() {
    let file = parse(
        "store = 'redis://h:1'\nstore_failure = 'open'\n\
         [[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 1\nstore_failure = 'closed'\n\
         [[limits]]\nname = 'search'\nmax_requests = 5\nin_seconds = 1\n\
         [[limits]]\nname = 'db'\nmax_requests = 2\nin_seconds = 1\nalgorithm = 'semaphore'\n",
    );
    let c = ServeConfig::resolve(Flags::default(), file).unwrap();
    let open: Vec<_> = c.limits.iter().map(|l| (l.name(), l.fails_open())).collect();
    assert_eq!(open, [("api", false), ("search", true), ("db", false)], "a limit's own word wins; leases never open");
    assert!(c.default.fails_open(), "the default limit takes the file's policy");
    let file = parse(
        "store = 'redis://h:1'\n[[limits]]\nname = 'db'\nmax_requests = 2\nin_seconds = 1\n\
         algorithm = 'semaphore'\nstore_failure = 'open'\n",
    );
    let e = ServeConfig::resolve(Flags::default(), file).unwrap_err();
    assert!(matches!(&e, ConfigError::SemaphoreFailsOpen(name) if name == "db"), "{e}");
}

/// The error of `text` as a file named `limits.toml`, resolved with `flags`.
fn error_of(text: &str, flags: Flags) -> String {
    let mut file = FileConfig::parse(text).unwrap();
    file.path = Some("limits.toml".into());
    ServeConfig::resolve(flags, file).unwrap_err().to_string()
}

/// Every setting of a file that can be wrong is named with the file and
/// its line: top level and per limit (#40).
#[test]
fn every_setting_in_error_names_the_file_its_line_and_its_key() {
    let cases = [
        ("max_keys = 0\n", "line 1: max_keys must be at least 1"),
        ("\nmax_message_size = 8\n", "line 2: max_message_size must be"),
        ("bind = 'tcp://127.0.0.1:70000'\n", "line 1, bind: cannot bind"),
        ("peer_bind = 'tcp://nowhere.invalid:1'\n", "line 1, peer_bind: cannot bind"),
        ("peers = ['tcp://127.0.0.1:2']\n", "line 1: peers are set but peer_bind is not"),
        ("state = 's.log'\nstate_fsync = 0.0\n", "line 2: state_fsync must be"),
        ("curve_clients = 'c'\n", "line 1: curve_clients is set but"),
        ("curve_secret_key = '/nonexistent/server.key'\n", "line 1, curve_secret_key: CURVE"),
        ("lease_secret = '/nonexistent/lease.secret'\n", "line 1, lease_secret: cannot read"),
        ("metrics_bind = 'no-port'\n", "line 1: metrics_bind \"no-port\""),
        ("store = 'mem://'\n", "line 1: store \"mem://\""),
    ];
    for (text, want) in cases {
        let got = error_of(text, Flags::default());
        assert!(got.starts_with(&format!("limits.toml, {want}")), "{text:?}: {got}");
    }
}

/// So is a setting wrong beside another (peering, a store, a limit's kind)
/// or within a limit (#40).
#[test]
fn a_setting_in_error_beside_another_or_in_a_limit_names_the_file_its_line_and_its_key() {
    let peer = "peer_bind = 'tcp://127.0.0.1:1'\n";
    let store = "store = 'redis://h:1'\n";
    let semaphore = "[[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = 1\nin_seconds = 1\n";
    let store_semaphore = format!("{store}{semaphore}");
    // (what the file starts with, the setting in error, the error after the file's name)
    let cases = [
        (peer, "node_id = 'a b'\n", "line 2, node_id: a node id must be"),
        (peer, "peer_grace = 99.0\n", "line 2: peer_grace must be"),
        (peer, "peers = ['tcp://127.0.0.1:2=nokey']\n", "line 2, peers: CURVE"),
        (store, "store_timeout_ms = 0\n", "line 2: store_timeout_ms must be"),
        (store, "store_replicas = 99\n", "line 2: store_replicas must be"),
        (store, peer, "line 1: store and peer_bind are both set"),
        (store, "state = 's.log'\n", "line 1: store and state are both set"),
        (
            store_semaphore.as_str(),
            "store_failure = 'open'\n",
            "line 7: limit \"db\" is a semaphore with store_failure",
        ),
        (semaphore, "hold_ms = 5\n", "line 6: limit \"db\": hold_ms is for the counting kinds"),
        ("[[limits]]\n", "name = 'a'\nmax_requests = 1\nin_seconds = 0\n", "line 4: limit \"a\": in_seconds"),
        ("[[limits]]\n", "name = 'a b'\nmax_requests = 1\nin_seconds = 1\n", "line 2, name: limit \"a b\""),
    ];
    for (start, setting, want) in cases {
        let text = format!("{start}{setting}");
        let got = error_of(&text, Flags::default());
        assert!(got.starts_with(&format!("limits.toml, {want}")), "{text:?}: {got}");
    }
}

/// A setting a flag gave is not where the file wrote it: its error names
/// no line of the file.
#[test]
fn a_setting_from_a_flag_is_not_located_in_the_file() {
    let got = error_of("max_keys = 5\n", Flags { max_keys: Some(0), ..Flags::default() });
    assert_eq!(got, "max_keys must be at least 1");
}

/// A value of the wrong type names its key, not only its line and column.
#[test]
fn a_value_of_the_wrong_type_names_its_key() {
    let e = FileConfig::parse("max_keys = 1\npeer_grace = 'x'\n").unwrap_err();
    assert!(e.starts_with("line 2, column 14: peer_grace: found a string"), "{e}");
}

/// `allow_reset` is a limit's, checked like the others with its file and
/// line; `admin_keys` needs CURVE (issue 38).
#[test]
fn allow_reset_and_admin_keys_are_checked_with_their_lines() {
    let semaphore = "[[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = 1\nin_seconds = 1\n";
    let got = error_of(&format!("{semaphore}allow_reset = true\n"), Flags::default());
    assert!(got.starts_with("limits.toml, line 6: limit \"db\": allow_reset is for the counting"), "{got}");
    let got = error_of("admin_keys = ['x']\n", Flags::default());
    assert!(got.starts_with("limits.toml, line 1: admin_keys is set but curve_secret_key is not"), "{got}");
    let text = "[[limits]]\nname = 'login'\nmax_requests = 3\nin_seconds = 60\nallow_reset = true\n\
                [[limits]]\nname = 'api'\nmax_requests = 3\nin_seconds = 60\n\
                [[limits]]\nname = 'default'\nmax_requests = 1\nin_seconds = 1\nallow_reset = true\n";
    let config = ServeConfig::resolve(Flags::default(), FileConfig::parse(text).unwrap()).unwrap();
    let allows: Vec<(&str, bool)> = config.limits.iter().map(|l| (l.name(), l.allows_reset())).collect();
    assert_eq!(allows, [("login", true), ("api", false)]);
    assert!(config.default.allows_reset(), "the default limit's table says it too");
}

/// `shadow` is a limit's, the default limit's too, and a semaphore's is
/// refused with its file and line.
#[test]
fn shadow_is_read_per_limit_and_refused_on_a_semaphore() {
    let semaphore = "[[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = 1\nin_seconds = 1\n";
    let got = error_of(&format!("{semaphore}shadow = true\n"), Flags::default());
    assert!(got.starts_with("limits.toml, line 6: limit \"db\": shadow is for the counting kinds"), "{got}");
    let text = "[[limits]]\nname = 'new-api'\nmax_requests = 3\nin_seconds = 60\nshadow = true\n\
                [[limits]]\nname = 'api'\nmax_requests = 3\nin_seconds = 60\nshadow = false\n\
                [[limits]]\nname = 'default'\nmax_requests = 1\nin_seconds = 1\nshadow = true\n";
    let config = ServeConfig::resolve(Flags::default(), FileConfig::parse(text).unwrap()).unwrap();
    let shadows: Vec<(&str, bool)> = config.limits.iter().map(|l| (l.name(), l.is_shadow())).collect();
    assert_eq!(shadows, [("new-api", true), ("api", false)]);
    assert!(config.default.is_shadow(), "the default limit's table says it too");
}

#[test]
fn runtime_limits_are_none_unless_set_and_go_with_state_peers_and_a_store() {
    assert_eq!(ServeConfig::resolve(Flags::default(), FileConfig::default()).unwrap().runtime_limits, 0);
    let c = ServeConfig::resolve(Flags::default(), parse("runtime_limits = 50\n")).unwrap();
    assert_eq!(c.runtime_limits, 50);
    let flags = Flags { runtime_limits: Some(7), ..Flags::default() };
    assert_eq!(ServeConfig::resolve(flags, parse("runtime_limits = 50\n")).unwrap().runtime_limits, 7);
    let kept = parse("runtime_limits = 5\nstate = '/nonexistent/state.log'\n");
    assert_eq!(ServeConfig::resolve(Flags::default(), kept).unwrap().runtime_limits, 5, "the state file keeps them");
    let peered = parse("runtime_limits = 5\npeer_bind = 'tcp://127.0.0.1:7778'\n");
    assert_eq!(ServeConfig::resolve(Flags::default(), peered).unwrap().runtime_limits, 5, "peers share them");
    let text = "runtime_limits = 5\nstore = 'redis://127.0.0.1:6379'\n";
    assert_eq!(ServeConfig::resolve(Flags::default(), parse(text)).unwrap().runtime_limits, 5);
}

#[test]
fn a_peer_may_name_its_node_id() {
    let spec = PeerSpec::parse("b@tcp://h:7778").unwrap();
    assert_eq!(
        (spec.id.as_deref(), spec.endpoint.as_str(), spec.name()),
        (Some("b"), "tcp://h:7778", "b@tcp://h:7778".into())
    );
    let plain = PeerSpec::parse("tcp://h:7778").unwrap();
    assert_eq!((plain.id.as_deref(), plain.name()), (None, "tcp://h:7778".to_owned()));
    let bad = PeerSpec::parse("@tcp://h:7778").unwrap_err().to_string();
    assert!(bad.contains("a node id must be 1 to 64 printable characters"), "{bad}");
    let twice = parse("peer_bind = 'tcp://*:7778'\nnode_id = 'a'\npeers = ['b@tcp://h:1', 'b@tcp://i:1']\n");
    let e = ServeConfig::resolve(Flags::default(), twice).unwrap_err().to_string();
    assert!(e.contains("node id \"b\" is named twice"), "{e}");
    let mine = parse("peer_bind = 'tcp://*:7778'\nnode_id = 'a'\npeers = ['a@tcp://h:1']\n");
    let e = ServeConfig::resolve(Flags::default(), mine).unwrap_err().to_string();
    assert!(e.contains("node id \"a\" is named twice"), "{e}");
}

/// A limit's `parent` is checked over the whole file, at the line of the
/// `parent` at fault: one that names no limit, closes a cycle, makes a
/// chain deeper than 8 levels, or puts a semaphore in a chain.
#[test]
fn parents_are_checked_with_the_line_of_the_parent_at_fault() {
    let limit = |name: &str, parent: Option<&str>| {
        let parent = parent.map(|p| format!("parent = '{p}'\n")).unwrap_or_default();
        format!("[[limits]]\nname = '{name}'\nmax_requests = 4\nin_seconds = 1\n{parent}")
    };
    let unknown = [limit("team", None), limit("user", Some("tem"))].concat();
    assert_eq!(
        error_of(&unknown, Flags::default()),
        "limits.toml, line 9: limit \"user\": parent \"tem\" is not defined: a parent is another limit of the same config"
    );
    let cycle = [limit("org", None), limit("a", Some("b")), limit("b", Some("c")), limit("c", Some("a"))].concat();
    assert_eq!(
        error_of(&cycle, Flags::default()),
        "limits.toml, line 9: limit \"a\": parent \"b\" closes a cycle: a > b > c > a"
    );
    let chain = |levels: usize| -> String {
        let name = |i: usize| format!("l{i}");
        (0..levels).map(|i| limit(&name(i), (i + 1 < levels).then(|| name(i + 1)).as_deref())).collect()
    };
    let deep = error_of(&chain(9), Flags::default());
    assert_eq!(
        deep,
        "limits.toml, line 5, parent: limit \"l0\": parents go more than 8 levels deep: \
         l0 > l1 > l2 > l3 > l4 > l5 > l6 > l7 > l8 (a limit and at most 7 above it)"
    );
    let eight = ServeConfig::resolve(Flags::default(), FileConfig::parse(&chain(8)).unwrap()).unwrap();
    let parents: Vec<Option<&str>> = eight.limits.iter().map(|l| l.parent()).collect();
    assert_eq!(parents[..2], [Some("l1"), Some("l2")]);
    assert_eq!(parents[7], None);
    let semaphore = format!("{}algorithm = 'semaphore'\n{}", limit("db", None), limit("user", Some("db")));
    let got = error_of(&semaphore, Flags::default());
    assert!(got.starts_with("limits.toml, line 10: limit \"user\": parent \"db\" is a semaphore"), "{got}");
    let default = [limit("org", None), limit("default", Some("org"))].concat();
    let got = error_of(&default, Flags::default());
    assert!(
        got.starts_with("limits.toml, line 9, parent: limit \"default\": the default limit takes no parent"),
        "{got}"
    );
}
