//! The everyday commands that need no daemon: shell completions and the man page.

use std::process::Command;
use std::time::Duration;

use crate::support::*;

fn cohost_ok(args: &[&str]) -> String {
    let output = run_with_timeout(Command::new(BIN).args(args), Duration::from_secs(15));
    assert!(
        output.status.success(),
        "cohost {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn completions_are_generated_for_bash_zsh_and_fish() {
    let dir = temp_dir("cohost-completions-");
    for (shell, marker) in [
        ("bash", "complete -F _cohost"),
        ("zsh", "#compdef cohost"),
        ("fish", "complete -c cohost"),
    ] {
        let script = cohost_ok(&["completions", shell]);
        assert!(script.contains(marker), "{shell}: no {marker:?}");
        // Every subcommand is offered, the everyday ones and `serve`'s options included.
        for word in ["serve", "sessions", "config", "completions", "stale-after"] {
            assert!(script.contains(word), "{shell}: {word} is not completed");
        }
        std::fs::write(dir.path().join(shell), &script).unwrap();
    }
    // The bash script parses (bash is always there; zsh and fish may not be installed).
    let output = run_with_timeout(
        Command::new("bash").arg("-n").arg(dir.path().join("bash")),
        Duration::from_secs(15),
    );
    assert!(
        output.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = run_with_timeout(
        Command::new("bash").arg("-c").arg(format!(
            "source {} && complete -p cohost",
            dir.path().join("bash").display()
        )),
        Duration::from_secs(15),
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("_cohost"),
        "the bash completion is not registered: {output:?}"
    );
}

#[test]
fn the_man_page_renders_every_command() {
    let page = cohost_ok(&["man"]);
    assert!(page.contains(".TH cohost 1"), "{page}");
    for word in ["serve", "sessions", "completions", "config"] {
        assert!(page.contains(word), "the man page lacks {word}");
    }
    // groff reads it (where groff is installed: man-db's formatter).
    if std::path::Path::new("/usr/bin/groff").exists() {
        let dir = temp_dir("cohost-man-");
        let path = dir.path().join("cohost.1");
        std::fs::write(&path, &page).unwrap();
        let output = run_with_timeout(
            Command::new("groff")
                .args(["-man", "-Tutf8", "-ww", "-z"])
                .arg(&path),
            Duration::from_secs(15),
        );
        assert!(
            output.status.success() && output.stderr.is_empty(),
            "groff: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
