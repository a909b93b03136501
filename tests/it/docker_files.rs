//! The Dockerfile and docker-compose.yml are right as far as a machine
//! without Docker can tell (#40): every file they copy or mount is in a
//! fresh clone (and not left out of the build context), the image's config
//! passes `locker check-config` and serves the README's limits, and the
//! HEALTHCHECK command answers 0 against a locker started as the image
//! starts it, with the image's own config and with the compose file's.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{free_port, locker_bin, Daemon, DEADLINE};

fn read(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
}

/// The JSON array after `word` on a line of `text` (`ENTRYPOINT [...]`,
/// `CMD [...]`, `command: [...]`).
fn array_after(text: &str, word: &str) -> Vec<String> {
    let line = text.lines().find(|l| l.contains(word) && l.contains('[')).unwrap_or_else(|| panic!("{word}"));
    let list = &line[line.find('[').unwrap()..=line.rfind(']').unwrap()];
    serde_json::from_str(list).unwrap_or_else(|e| panic!("{list}: {e}"))
}

/// The host side of each `- ./PATH:/IN/CONTAINER` volume of the compose file.
fn mounts(compose: &str) -> Vec<String> {
    let list = compose.lines().map(str::trim).filter_map(|l| l.strip_prefix("- ./"));
    list.filter_map(|m| m.split(':').next().map(str::to_owned)).collect()
}

/// The limit names of a config file.
fn limit_names(text: &str) -> Vec<String> {
    let table: toml::Table = toml::from_str(text).unwrap();
    let limits = table["limits"].as_array().unwrap();
    limits.iter().map(|l| l["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn the_docker_files_name_files_a_fresh_clone_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = read("Dockerfile");
    let ignored: Vec<String> =
        read(".dockerignore").lines().map(|l| l.trim().trim_end_matches('/').to_owned()).collect();
    let copies = dockerfile.lines().filter(|l| l.starts_with("COPY ") && !l.contains("--from="));
    let sources: Vec<&str> = copies
        .flat_map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().split_last().unwrap().1.to_vec())
        .collect();
    assert!(sources.contains(&"contrib/locker.toml"), "{sources:?}");
    for source in sources {
        assert!(root.join(source).exists(), "COPY {source}: not in the checkout");
        let top = source.split('/').next().unwrap();
        assert!(!ignored.iter().any(|i| i == top || i == source), "COPY {source}: left out by .dockerignore");
    }
    let compose = read("docker-compose.yml");
    let mounted = mounts(&compose);
    assert_eq!(mounted, ["examples/limits.toml"], "the example config is mounted");
    for path in &mounted {
        assert!(root.join(path).exists(), "mounted {path}: not in the checkout");
    }
    for port in ["7777:7777", "9090:9090"] {
        assert!(compose.contains(port), "compose publishes {port}");
    }
    assert!(dockerfile.contains("EXPOSE 7777 9090"), "the image exposes both");
}

#[test]
fn the_images_config_passes_check_config_and_serves_the_readmes_limits() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let image = root.join("contrib/locker.toml");
    let out = Command::new(locker_bin()).arg("check-config").arg(&image).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let served = limit_names(&read("contrib/locker.toml"));
    for name in limit_names(&read("examples/limits.toml")) {
        assert!(served.contains(&name), "the image's config lacks the README's limit {name:?}: {served:?}");
    }
}

/// `serve` as the image runs it (ENTRYPOINT, then `extra`), with `config`
/// for the file mounted at /etc/locker/locker.toml and the addresses moved
/// to free loopback ports; then the HEALTHCHECK command against it.
fn healthcheck_with(config: &str, extra: &[String]) -> std::process::ExitStatus {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = read("Dockerfile");
    let entry = array_after(&dockerfile, "ENTRYPOINT");
    assert_eq!(entry[..2], ["/usr/local/bin/locker", "serve"]);
    let health = array_after(&dockerfile, "CMD [");
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut args: Vec<String> = entry[2..].iter().chain(extra).cloned().collect();
    for (i, arg) in args.clone().iter().enumerate() {
        match arg.as_str() {
            "/etc/locker/locker.toml" => args[i] = root.join(config).to_str().unwrap().to_owned(),
            "--bind" => args[i + 1] = "tcp://127.0.0.1:*".to_owned(),
            "--metrics-bind" => args[i + 1] = metrics.clone(),
            _ => {}
        }
    }
    let (bind, metrics_bind) =
        (vec!["--bind".to_owned(), "tcp://127.0.0.1:*".to_owned()], ["--metrics-bind", &metrics]);
    if !extra.iter().any(|a| a == "--bind") {
        args.extend(bind);
        args.extend(metrics_bind.map(str::to_owned));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _d = Daemon::start_with(&[], &args);
    let health: Vec<String> = health.iter().map(|a| a.replace("127.0.0.1:9090", &metrics)).collect();
    // Joining until the loop's first snapshot: asked again, as Docker asks
    // every interval, until it answers serving or the deadline passes.
    let end = Instant::now() + DEADLINE;
    loop {
        let status = Command::new(locker_bin()).args(&health[1..]).stdout(Stdio::null()).status().unwrap();
        if status.success() || Instant::now() > end {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_healthcheck_answers_0_with_the_images_config_and_with_the_compose_files() {
    let dockerfile = read("Dockerfile");
    let health = array_after(&dockerfile, "CMD [");
    assert_eq!(health[..2], ["/usr/local/bin/locker", "health"], "{health:?}");
    let port = |addr: &str| addr.rsplit(':').next().unwrap().to_owned();
    let image: toml::Table = toml::from_str(&read("contrib/locker.toml")).unwrap();
    let asked = health.iter().find(|a| a.contains(":9090")).expect("the health check asks port 9090");
    assert_eq!(port(image["metrics_bind"].as_str().unwrap()), port(asked), "the image's config serves it");
    assert!(healthcheck_with("contrib/locker.toml", &[]).success(), "healthy on the image's own config");
    let command = array_after(&read("docker-compose.yml"), "command:");
    let metrics_flag = command.iter().position(|a| a == "--metrics-bind").expect("compose sets --metrics-bind");
    assert_eq!(port(&command[metrics_flag + 1]), port(asked), "compose serves the port the health check asks");
    assert!(healthcheck_with("examples/limits.toml", &command).success(), "healthy with the compose file's config");
}
