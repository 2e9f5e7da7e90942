//! The hub's other read surfaces (issue 26): MCP (`list_sessions`, `get_session`,
//! `tracker_state`, `events` forward and backwards) through the official MCP SDK, and the CLI
//! (`cohost state`, `cohost status [--tmux|--json]`, `cohost next`) show the other machines,
//! their agents and hosted sessions (qualified ids, their machine), and a stopped machine down.

use std::time::Instant;

use super::hub::{DOWN_AFTER_SECS, hub, link, wait_caught_up};
use super::*;
use crate::suite::mcp::{Transport, ok, run_client};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;

#[test]
fn mcp_and_the_cli_at_a_hub_show_every_machine_and_a_stopped_one_down() {
    let nats = NatsServer::start();
    let url = nats.url();
    // alpha: an agent reported over its API, waiting for the human.
    let (_tmux_a, mut alpha) = publishing(&nats, "alpha");
    post(&alpha, 1);
    // beta: a hosted codex session with one turn.
    let beta = CodexFixture::start_with_args(&["--nats", &url, "--machine", "beta"]);
    beta.mock.push(Step::text("Hello from beta."));
    let id = beta.create(json!({ "approvalPolicy": "never" }));
    beta.send(&id, "Say hello");
    beta.wait_turns_completed(&id, 1);
    let (_tmux_h, hub) = hub(&nats);
    let remote = format!("beta/{id}");
    wait_caught_up(&hub, &alpha, "alpha");
    wait_caught_up(&hub, &beta.daemon, "beta");
    hub.wait_for("beta's session in the hub's list", CATCH_UP, |h| {
        let list = h.get("/api/sessions").assert_ok();
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == remote.as_str() && s["turns"] == 1)
            .cloned()
    });
    let own = beta.events(&id);

    // MCP at the hub: the sessions, the tracker and beta's session's events, beta's seqs.
    let plan = json!([
        { "tool": "list_sessions", "arguments": {} },
        { "tool": "get_session", "arguments": { "session_id": remote } },
        { "tool": "tracker_state", "arguments": {} },
        { "tool": "events", "arguments": { "session_id": remote, "after": 0, "limit": 1000 } },
        { "tool": "events", "arguments": { "session_id": remote, "last": 2 } },
        { "tool": "get_session", "arguments": { "session_id": "beta/cs_nope" } },
    ]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let list = ok(run.one(0));
    let listed: Vec<&Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["id"] == remote.as_str())
        .collect();
    assert_eq!(listed.len(), 1, "{list:#}");
    assert_eq!(listed[0]["machine"], "beta", "{list:#}");
    assert_eq!(listed[0]["machineLink"], "up", "{list:#}");
    let one = ok(run.one(1));
    assert_eq!(one["session"]["id"], remote.as_str(), "{one:#}");
    assert_eq!(one["session"]["runtime"], "codex", "{one:#}");
    let tracker = ok(run.one(2));
    let work = tracker["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "alpha/work")
        .unwrap_or_else(|| panic!("alpha's session in tracker_state: {tracker:#}"));
    assert_eq!(work["machine"], "alpha", "{work}");
    assert_eq!(work["agents"][0]["agent"], "codex", "{work}");
    let machines: Vec<&str> = tracker["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["machine"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ["alpha", "beta"], "{tracker:#}");
    let events = ok(run.one(3));
    assert_eq!(events["machine"], "beta", "{events:#}");
    assert_eq!(events["link"], "up", "{events:#}");
    assert_eq!(
        events["events"].as_array().unwrap(),
        &own,
        "beta's events, as beta logged them"
    );
    assert_eq!(events["next"], own.last().unwrap()["seq"], "{events:#}");
    let window = ok(run.one(4));
    assert_eq!(
        window["events"].as_array().unwrap(),
        &own[own.len() - 2..],
        "{window:#}"
    );
    assert_eq!(window["hasOlder"], true, "{window:#}");
    assert_eq!(
        window["olderBefore"],
        own[own.len() - 2]["seq"],
        "{window:#}"
    );
    let missing = run.one(5);
    assert_eq!(missing["isError"], true, "{missing:#}");
    assert!(
        missing["text"]
            .as_str()
            .unwrap()
            .contains("session_not_found"),
        "{missing:#}"
    );

    // The CLI at the hub: the machines and their agents; what needs the human elsewhere (alpha's
    // wait, beta's finished turn) named where it is.
    let state = hub.cli_ok(&["state"]);
    eprintln!("cohost state at the hub:\n{state}");
    assert!(state.contains("MACHINE"), "{state}");
    let alpha_line = state
        .lines()
        .find(|l| l.starts_with("alpha "))
        .unwrap_or_else(|| panic!("{state}"));
    assert!(alpha_line.contains(" up "), "{state}");
    assert!(
        state.lines().any(|l| l.starts_with("alpha/work ")),
        "{state}"
    );
    let status = hub.cli_ok(&["status"]);
    assert_eq!(
        status.trim(),
        "0 running, 1 waiting for you, 1 finished unseen",
        "{status}"
    );
    let status: Value = serde_json::from_str(&hub.cli_ok(&["status", "--json"])).unwrap();
    assert_eq!(status["machines"][0]["machine"], "alpha", "{status}");
    let next = hub.cli_ok(&["next"]);
    assert_eq!(
        next.trim(),
        "nothing here needs you; on other machines: alpha/work (codex waiting), beta/work (codex done)",
        "{next}"
    );

    // alpha stopped: down within the bound on every surface, with its last known state.
    alpha.stop();
    let stopped = Instant::now();
    let bound = Duration::from_secs(DOWN_AFTER_SECS);
    hub.wait_for("alpha down at the hub", bound * 4, |h| {
        link(h, "alpha").filter(|l| l["link"] == "down")
    });
    eprintln!("alpha down after {:?}", stopped.elapsed());
    let tmux = hub.cli_ok(&["status", "--tmux"]);
    // beta's finished turn still counts; alpha's wait does not, alpha is named down.
    assert_eq!(
        tmux.trim(),
        "#[fg=colour6]✓1#[default] #[fg=colour1]⚠alpha down#[default]",
        "{tmux}"
    );
    let status = hub.cli_ok(&["status"]);
    assert!(
        status.starts_with("0 running, 0 waiting for you"),
        "{status}"
    );
    assert!(status.contains("alpha is down: last heard "), "{status}");
    let state = hub.cli_ok(&["state"]);
    eprintln!("cohost state with alpha down:\n{state}");
    let alpha_line = state
        .lines()
        .find(|l| l.starts_with("alpha "))
        .unwrap_or_else(|| panic!("{state}"));
    assert!(
        alpha_line.contains(" down ") && alpha_line.contains("last heard "),
        "{state}"
    );
    let work_line = state
        .lines()
        .find(|l| l.starts_with("alpha/work (down)"))
        .unwrap_or_else(|| panic!("alpha's last known session, marked down: {state}"));
    assert!(
        work_line.contains("waiting"),
        "its last known state: {state}"
    );
    let next = hub.cli_ok(&["next"]);
    assert_eq!(
        next.trim(),
        "nothing here needs you; on other machines: beta/work (codex done)\n\
         alpha is down: its agents' last known states are not shown here",
        "{next}"
    );
    let plan = json!([{ "tool": "tracker_state", "arguments": {} }]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let tracker = ok(run.one(0));
    let work = tracker["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "alpha/work")
        .unwrap_or_else(|| panic!("alpha's last known session in tracker_state: {tracker:#}"));
    assert_eq!(work["machineLink"], "down", "{work}");
    assert_eq!(work["agents"][0]["status"], "waiting", "{work}");
}
