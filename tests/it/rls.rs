//! Envoy's rate-limit service in the locker's settings: the rules of an
//! envoyproxy/ratelimit config become limits served with the limits file's,
//! and `rls_bind` and `rls_config` go together. The gRPC API itself is
//! asked by a client generated from Envoy's protos, in `tests/rls` (Python,
//! run by `.ci/run`).

use locker::config::{ignored_settings, ConfigError, FileConfig, Flags, ServeConfig};

const MESSAGING: &str = "domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
";

/// A new directory, unique to this call, holding `text` as its rules.
fn dir_with(text: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("locker-rls-serve-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("rules.yaml"), text).unwrap();
    dir
}

fn flags(dir: &std::path::Path) -> Flags {
    Flags { rls_bind: Some("127.0.0.1:0".into()), rls_config: Some(dir.into()), ..Flags::default() }
}

#[test]
fn the_rules_limits_are_served_with_the_files() {
    let dir = dir_with(MESSAGING);
    let file: FileConfig = toml::from_str("[[limits]]\nname='api'\nmax_requests=5\nin_seconds=1\n").unwrap();
    let config = ServeConfig::resolve(flags(&dir), file).unwrap();
    let names: Vec<&str> = config.limits.iter().map(|l| l.name()).collect();
    assert_eq!(names, ["api", "messaging.message_type_marketing.to_number", "messaging.to_number"]);
    assert!(config.rls.as_ref().unwrap().table.has_domain("messaging"));
    // A limits file that already names one of them is refused.
    let clash: FileConfig =
        toml::from_str("[[limits]]\nname='messaging.to_number'\nmax_requests=5\nin_seconds=1\n").unwrap();
    let e = ServeConfig::resolve(flags(&dir), clash).unwrap_err();
    assert!(matches!(&e, ConfigError::Duplicate(n) if n == "messaging.to_number"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_bind_needs_a_config_and_the_config_a_bind() {
    let bind_only = Flags { rls_bind: Some("127.0.0.1:0".into()), ..Flags::default() };
    let e = ServeConfig::resolve(bind_only, FileConfig::default()).unwrap_err();
    assert!(matches!(e, ConfigError::RlsWithoutConfig), "{e}");
    let config_only = Flags { rls_config: Some("rules".into()), ..Flags::default() };
    let ignored = ignored_settings(&config_only, &FileConfig::default());
    assert_eq!(ignored.iter().map(|i| i.setting).collect::<Vec<_>>(), ["rls_config"]);
    let bad = Flags { rls_bind: Some("no port".into()), rls_config: Some("rules".into()), ..Flags::default() };
    assert!(ServeConfig::resolve(bad, FileConfig::default()).unwrap_err().to_string().contains("rls_bind"));
}

#[test]
fn headers_and_runtime_limits_reach_the_rls_settings() {
    let dir = dir_with(&format!("{MESSAGING}# headers and runtime limits\n"));
    let file: FileConfig = toml::from_str("rls_headers = 'ietf'\nruntime_limits = 3\n").unwrap();
    let rls = ServeConfig::resolve(flags(&dir), file).unwrap().rls.unwrap();
    assert_eq!((rls.headers, rls.runtime_limits), (Some(locker::rls::HeaderStyle::Ietf), true));
    let plain = ServeConfig::resolve(flags(&dir), FileConfig::default()).unwrap().rls.unwrap();
    assert_eq!((plain.headers, plain.runtime_limits), (None, false));
    let bad: Result<FileConfig, _> = toml::from_str("rls_headers = 'draft'\n");
    assert!(bad.is_err());
    let headers_only: FileConfig = toml::from_str("rls_headers = 'draft-03'\n").unwrap();
    let ignored = ignored_settings(&Flags::default(), &headers_only);
    assert_eq!(ignored.iter().map(|i| i.setting).collect::<Vec<_>>(), ["rls_headers"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tls_files_are_read_at_start_and_go_together() {
    let dir = dir_with(&format!("{MESSAGING}# tls\n"));
    let pem = dir.join("server.pem");
    std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n").unwrap();
    let with = |cert: Option<&std::path::Path>, key: Option<&std::path::Path>, ca: Option<&std::path::Path>| Flags {
        rls_tls_cert: cert.map(Into::into),
        rls_tls_key: key.map(Into::into),
        rls_tls_client_ca: ca.map(Into::into),
        ..flags(&dir)
    };
    let resolve = |f: Flags| ServeConfig::resolve(f, FileConfig::default());
    let tls = resolve(with(Some(&pem), Some(&pem), Some(&pem))).unwrap().rls.unwrap().tls.unwrap();
    assert!(tls.client_ca_pem.is_some() && tls.cert_pem.starts_with(b"-----BEGIN"));
    assert!(resolve(with(None, None, None)).unwrap().rls.unwrap().tls.is_none());
    let e = resolve(with(Some(&pem), None, None)).unwrap_err().to_string();
    assert!(e.contains("rls_tls_key is needed with rls_tls_cert"), "{e}");
    let e = resolve(with(None, None, Some(&pem))).unwrap_err().to_string();
    assert!(e.contains("rls_tls_cert is needed"), "{e}");
    let rules = dir.join("rules.yaml");
    let e = resolve(with(Some(&pem), Some(&rules), None)).unwrap_err().to_string();
    assert!(e.contains("rls_tls_key") && e.contains("not a PEM file"), "{e}");
    let e = resolve(with(Some(&dir.join("absent.pem")), Some(&pem), None)).unwrap_err().to_string();
    assert!(e.contains("rls_tls_cert") && e.contains("absent.pem"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
