//! The README's command table runs as written against a locker serving
//! `examples/limits.toml`: every example, in order, in one shell (so the
//! lease id that `lease acquire` prints reaches `heartbeat` and `release`).
//! And the quick start's locker serves those limits, its default one
//! answering go once a second, as the README says.

use std::path::Path;
use std::process::Command;

use crate::support::{locker_bin, Daemon};

/// The example of each row of the README's "Command line" table, as the
/// shell reads it (`\|` in the table is a `|`).
fn examples(readme: &str) -> Vec<String> {
    let table = &readme[readme.find("## Command line").expect("a Command line section")..];
    table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter(|l| l.starts_with("| `locker") || l.starts_with("| ..."))
        .filter_map(|l| {
            let example = l.split(" | ").nth(1)?;
            let code = example.split('`').nth(1)?;
            Some(code.replace("\\|", "|"))
        })
        .collect()
}

#[test]
fn every_command_in_the_readme_runs_against_the_example_limits() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let examples = examples(&readme);
    assert!(examples.len() >= 12, "{examples:?}");
    let config = root.join("examples/limits.toml");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let dir = std::env::temp_dir().join(format!("locker-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(root.join("examples"), dir.join("examples")).unwrap();
    // `locker` is the binary under test, pointed at the test's locker; the
    // placeholder `curl ...` is the caller's request.
    let mut script = format!(
        "set -e\nlocker() {{\n  case \"$1\" in\n    ask|lease|stats|bench) \"{bin}\" \"$@\" --connect {ep} ;;\n    serve) return 0 ;;\n    *) \"{bin}\" \"$@\" ;;\n  esac\n}}\n",
        bin = locker_bin(),
        ep = d.endpoint,
    );
    for example in &examples {
        let example = example.replace("curl ...", "echo requested").replace("--connect tcp://127.0.0.1:7777 ", "");
        script.push_str(&format!("echo '>>> {}'\n{example}\n", example.replace('\'', "")));
    }
    script.push_str("echo done\n");
    let out = Command::new("bash").arg("-c").arg(&script).current_dir(&dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.ends_with("done\n"), "{stdout}\n{stderr}");
    assert!(stdout.contains("go 20"), "the batch example takes the bucket's burst: {stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The quick start's first command, as the README gives it.
fn quick_start_serve(readme: &str) -> Vec<String> {
    let start = &readme[readme.find("## Quick start").expect("a Quick start section")..];
    let line = start.lines().find(|l| l.starts_with("cargo run --release -- serve")).expect("the serve command");
    let command = line.split('#').next().unwrap();
    command.split_whitespace().skip_while(|w| *w != "serve").skip(1).map(str::to_owned).collect()
}

#[test]
fn the_quick_start_locker_serves_the_example_limits_and_one_go_per_second_by_default() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let args = quick_start_serve(&readme);
    assert_eq!(args, ["--config", "examples/limits.toml"], "the quick start serves the examples' limits (#40)");
    let config = root.join(&args[1]);
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let ask = |limit: &str| {
        let out = Command::new(locker_bin()).args(["ask", "--connect", &d.endpoint, "--limit", limit]).output();
        let out = out.unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for limit in ["api", "api-patient", "smooth", "search"] {
        assert_eq!(ask(limit).0, Some(0), "{limit}: {}", ask(limit).1);
    }
    crate::support::wait_for_room(1_000_000_000, std::time::Duration::from_millis(300));
    assert_eq!(ask("default").0, Some(0), "go");
    assert_eq!(ask("default").0, Some(1), "sorry: one go per second");
}
