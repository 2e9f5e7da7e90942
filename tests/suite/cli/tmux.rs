//! tmux: `cohost status --tmux` (the status-line segment) and `cohost next` (the jump key),
//! against a daemon with agents in each state and a real tmux client attached in a pty.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// Agents in every state: `run` running in a, `ask` waiting in b, `fin` done (unseen) in c,
/// `rest` idle in d.
fn daemon_with_agents() -> (TmuxServer, TestDaemon) {
    let (tmux, _) = tmux_with_sessions(&["a", "b", "c", "d"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("a", "run", "running");
    daemon.report_status("b", "ask", "waiting");
    daemon.report_status("c", "fin", "done");
    daemon.report_status("d", "rest", "idle");
    assert_eq!(daemon.instance("c", "fin").unwrap()["unseen"], true);
    (tmux, daemon)
}

#[test]
fn status_tmux_counts_running_waiting_and_unseen_in_one_segment() {
    let (_tmux, daemon) = daemon_with_agents();
    assert_eq!(
        daemon.cli_ok(&["status", "--tmux"]).trim_end(),
        "#[fg=colour3,bold]!1#[default] #[fg=colour6]✓1#[default] #[fg=colour2]●1#[default]"
    );
    let counts: Value = serde_json::from_str(&daemon.cli_ok(&["status", "--json"])).unwrap();
    assert_eq!(
        (&counts["running"], &counts["waiting"], &counts["unseen"]),
        (&json!(1), &json!(1), &json!(1))
    );
    assert_eq!(
        daemon.cli_ok(&["status"]).trim(),
        "1 running, 1 waiting for you, 1 finished unseen"
    );
    // Fast enough to run every few seconds from status-right: one request.
    let started = std::time::Instant::now();
    for _ in 0..5 {
        daemon.cli_ok(&["status", "--tmux"]);
    }
    let each = started.elapsed() / 5;
    assert!(
        each < Duration::from_millis(500),
        "status --tmux took {each:?}"
    );

    // Nothing going on: an empty segment. The daemon down: the segment says so (exit 0).
    daemon.report_status("a", "run", "idle");
    daemon.report_status("b", "ask", "idle");
    daemon.post("/api/focus", &json!({ "session": "c" }));
    assert_eq!(daemon.cli_ok(&["status", "--tmux"]).trim_end(), "");
    let mut daemon = daemon;
    daemon.stop();
    assert_eq!(
        daemon.cli_ok(&["status", "--tmux"]).trim_end(),
        "#[fg=colour1]cohost down#[default]"
    );
}

/// A tmux client attached to `session` in a pty (`script`), detached and killed on drop.
struct AttachedClient(Child);

impl AttachedClient {
    fn attach(tmux: &TmuxServer, session: &str) -> AttachedClient {
        let child = Command::new("script")
            .args(["-qfc"])
            .arg(format!(
                "tmux -S {} attach-session -t ={session}",
                tmux.socket().display()
            ))
            .arg("/dev/null")
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .env("TERM", "xterm-256color")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run script(1) to attach a tmux client in a pty");
        let client = AttachedClient(child);
        wait_until("the client to attach", Duration::from_secs(10), || {
            (client_sessions(tmux) == [session.to_string()]).then_some(())
        });
        client
    }
}

impl Drop for AttachedClient {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn client_sessions(tmux: &TmuxServer) -> Vec<String> {
    let output = tmux.command(&["list-clients", "-F", "#{client_session}"]);
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn next_switches_a_real_tmux_client_to_each_agent_that_needs_the_human() {
    let (tmux, daemon) = daemon_with_agents();
    let _client = AttachedClient::attach(&tmux, "a");

    // Waiting first: b.
    assert_eq!(daemon.cli_ok(&["next"]).trim(), "b (ask waiting)");
    assert_eq!(client_sessions(&tmux), ["b"]);
    // Then the finished, unseen one: c, which becomes seen.
    assert_eq!(daemon.cli_ok(&["next"]).trim(), "c (fin done)");
    assert_eq!(client_sessions(&tmux), ["c"]);
    daemon.wait_for("fin to be seen", Duration::from_secs(5), |d| {
        (d.instance("c", "fin")?["unseen"] == false).then_some(())
    });
    // Around again: only b still needs the human.
    assert_eq!(daemon.cli_ok(&["next"]).trim(), "b (ask waiting)");
    assert_eq!(client_sessions(&tmux), ["b"]);
    // Nothing unseen is left: the client stays.
    assert_eq!(
        daemon.cli_ok(&["next", "--unseen"]).trim(),
        "nothing needs you"
    );
    assert_eq!(client_sessions(&tmux), ["b"]);

    // A client named as a key binding names it (`#{client_name}`).
    daemon.report_status("d", "rest", "waiting");
    let name = tmux.run(&["list-clients", "-F", "#{client_name}"]);
    assert_eq!(
        daemon
            .cli_ok(&["next", "--waiting", "--client", name.trim()])
            .trim(),
        "d (rest waiting)"
    );
    assert_eq!(client_sessions(&tmux), ["d"]);

    // No such client: a clear error, nothing switched.
    let output = daemon.cli(&["next", "--client", "/dev/pts/nope"]);
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        error.contains("tmux could not switch /dev/pts/nope"),
        "{error}"
    );
    assert_eq!(client_sessions(&tmux), ["d"]);
}
