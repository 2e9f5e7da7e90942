//! The tmux hooks cohost installs: installed on start, removed on clean exit, and what they do
//! (session list refresh, focus from a real tmux client).

use std::path::Path;
use std::time::Duration;

use crate::support::*;

/// The focus hook, then the hooks that refresh the session list.
const FOCUS_HOOK: &str = "client-session-changed";
const REFRESH_HOOKS: [&str; 3] = ["session-created", "session-closed", "session-renamed"];

#[test]
fn hooks_are_installed_on_start_and_removed_on_clean_exit() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    // A hook of the user's own, which cohost must leave alone.
    tmux.run(&[
        "set-hook",
        "-g",
        "client-session-changed[7]",
        "display-message mine",
    ]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    let home = daemon.home().to_string_lossy().into_owned();

    let ours = |tmux: &TmuxServer| -> Vec<String> {
        tmux.installed_hooks()
            .into_iter()
            .filter(|l| l.contains("cohost"))
            .collect()
    };
    let installed = ours(&tmux);
    let line_of = |hook: &str| -> String {
        installed
            .iter()
            .find(|l| l.starts_with(&format!("{hook}[")))
            .unwrap_or_else(|| panic!("no {hook} hook in {installed:#?}"))
            .clone()
    };
    for hook in std::iter::once(FOCUS_HOOK).chain(REFRESH_HOOKS) {
        let line = line_of(hook);
        assert!(
            line.contains(&home),
            "the hook names this daemon's home: {line}"
        );
        // It reaches the daemon through the home's socket, never a TCP address.
        assert!(
            !line.contains(&format!(":{}", daemon.port())) && !line.contains("COHOST_LISTEN"),
            "the hook names no TCP address: {line}"
        );
    }
    assert!(
        line_of(FOCUS_HOOK).contains("focus --source tmux"),
        "{}",
        line_of(FOCUS_HOOK)
    );
    for hook in REFRESH_HOOKS {
        assert!(line_of(hook).contains("tmux-refresh"), "{}", line_of(hook));
    }

    daemon.stop();
    assert!(
        ours(&tmux).is_empty(),
        "hooks left after a clean exit: {:#?}",
        ours(&tmux)
    );
    assert!(
        tmux.global_hooks()
            .contains("client-session-changed[7] display-message mine"),
        "the user's hook must survive:\n{}",
        tmux.global_hooks()
    );

    // A restart installs them again (same index: same home).
    daemon.start_again();
    let again = ours(&tmux);
    assert_eq!(again.len(), installed.len(), "{again:#?}");
    let index = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    };
    assert_eq!(index(&again), index(&installed));
}

#[test]
fn session_changes_reach_the_state_through_the_hooks() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let names = |d: &TestDaemon| -> Vec<String> {
        d.state()["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&daemon), ["s1"]);
    let dir = make_dir(&tmux.dir().join("p/new"));
    tmux.new_session("new", Path::new(&dir));
    // The session-created hook refreshes the list well before the 5 s safety-net poll.
    daemon.wait_for(
        "the new session in /api/state",
        Duration::from_secs(4),
        |d| (names(d) == ["new", "s1"]).then_some(()),
    );
    let new = daemon.session("new");
    assert_eq!(new["dir"], dir.as_str());
    assert!(new["id"].as_str().unwrap().starts_with('$'), "{new}");
    assert_eq!(new["windows"], 1);
    assert_eq!(new["attached"], false);

    tmux.run(&["rename-session", "-t", "=new", "renamed"]);
    daemon.wait_for("the renamed session", Duration::from_secs(4), |d| {
        (names(d) == ["renamed", "s1"]).then_some(())
    });
    tmux.kill_session("renamed");
    daemon.wait_for("the closed session to go", Duration::from_secs(4), |d| {
        (names(d) == ["s1"]).then_some(())
    });
    let refresh = daemon.post("/api/tmux/refresh", &json!({})).assert_ok();
    assert_eq!(refresh, json!({"tmuxRunning": true, "sessions": 1}));
}

#[test]
fn switching_a_real_tmux_client_marks_the_session_seen() {
    let (inner, _) = tmux_with_sessions(&["s1", "s2"]);
    let daemon = TestDaemon::start(&inner, &[]);
    daemon.report_status("s1", "claude", "done");
    daemon.report_status("s2", "codex", "done");
    daemon.report_status("s2", "busy", "running");
    assert_eq!(daemon.session("s1")["unseen"], true);
    assert_eq!(daemon.session("s2")["unseen"], true);

    // A real client: `tmux attach` running inside a pane of a second, detached tmux server.
    let outer = TmuxServer::new();
    let attach = format!(
        "unset TMUX TMUX_PANE; exec tmux -S '{}' attach -t =s1",
        inner.socket().display()
    );
    outer.run(&[
        "new-session",
        "-d",
        "-s",
        "outer",
        "-x",
        "120",
        "-y",
        "40",
        &attach,
    ]);
    let client = wait_until("a client attached to s1", Duration::from_secs(10), || {
        let clients = inner.command(&["list-clients", "-F", "#{client_name}\t#{session_name}"]);
        let text = String::from_utf8_lossy(&clients.stdout).into_owned();
        text.lines()
            .find_map(|l| l.strip_suffix("\ts1").map(str::to_string))
    });
    // Attaching focuses s1 (client-attached hook).
    daemon.wait_for("s1 to be seen after attach", Duration::from_secs(5), |d| {
        (d.session("s1")["unseen"] == false && d.state()["focusedSession"] == "s1").then_some(())
    });
    assert_eq!(
        daemon.session("s2")["unseen"],
        true,
        "attaching to s1 does not touch s2"
    );

    inner.run(&["switch-client", "-c", &client, "-t", "=s2"]);
    daemon.wait_for(
        "s2 to be seen after the switch",
        Duration::from_secs(5),
        |d| {
            (d.session("s2")["unseen"] == false && d.state()["focusedSession"] == "s2")
                .then_some(())
        },
    );
    assert_eq!(daemon.instance("s2", "busy").unwrap()["status"], "running");
    let focused: Vec<Value> = daemon
        .events_after(0)
        .into_iter()
        .filter(|e| e["type"] == "session.focused")
        .collect();
    assert!(
        focused.iter().all(|e| e["data"]["source"] == "tmux"),
        "{focused:#?}"
    );
    assert_eq!(focused.last().unwrap()["session"], "s2");
    assert!(focused.iter().any(|e| e["session"] == "s1"));
}

// See: issue 15, defect 5 — "tmux hooks stay installed after a kill -9 until a clean exit".
#[test]
fn r15_a_killed_predecessors_hooks_are_removed_at_start() {
    let (first, _) = tmux_with_sessions(&["s1"]);
    let (second, _) = tmux_with_sessions(&["s2"]);
    let mut daemon = TestDaemon::start(&first, &[]);
    let ours = |tmux: &TmuxServer| -> Vec<String> {
        tmux.installed_hooks()
            .into_iter()
            .filter(|l| l.contains("cohost"))
            .collect()
    };
    assert_eq!(ours(&first).len(), 4, "{:#?}", ours(&first));
    daemon.kill9();
    assert_eq!(ours(&first).len(), 4, "kill -9 leaves them");
    // The next daemon of this home runs on another tmux server: the first one's hooks go.
    daemon.set_tmux_socket(Some(second.socket()));
    daemon.start_again();
    assert!(ours(&first).is_empty(), "left behind: {:#?}", ours(&first));
    assert_eq!(ours(&second).len(), 4, "{:#?}", ours(&second));
    assert!(
        daemon
            .stderr_text()
            .contains("removed the tmux hooks a killed predecessor left"),
        "{}",
        daemon.stderr_tail(20)
    );
    // On the same server, after another kill -9, the new daemon's four hooks replace the old
    // ones (they name the home, whose socket leads to whichever daemon serves it).
    daemon.kill9();
    daemon.start_again();
    let home = daemon.home().display().to_string();
    let hooks = ours(&second);
    assert_eq!(hooks.len(), 4, "{hooks:#?}");
    assert!(hooks.iter().all(|h| h.contains(&home)), "{hooks:#?}");
}
