//! The README's command table runs as written against the quick start's
//! locker: every example, in order, in one shell (so the lease id that
//! `lease acquire` prints reaches `heartbeat` and `release`).

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
fn every_command_in_the_readme_runs_against_the_quick_start_locker() {
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
