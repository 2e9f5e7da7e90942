//! The hub's page (`serve --hub`) in a real Chromium, against a real nats-server and two
//! machine daemons: machines as the first-level grouping of the hosted sessions and of All
//! agents, each with its link; another machine's hosted codex session opened, its events shown
//! and a turn prompted from the page streamed back, its queue and lease read through the hub (a
//! task queued from the page listed waiting under beta's lease); a stopped machine shown down
//! with when it was last heard from, its agents still listed with their last known state;
//! another machine's Claude permission prompt shown in the panel and answered from the page, and
//! the panel saying that machine is down once it stops (issue 26).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::suite::nats::hub::{
    DOWN_AFTER_SECS, claude_asking_and_a_hub, hub, link, wait_caught_up,
};
use crate::suite::nats::{CATCH_UP, post, publishing};
use crate::support::browser::{Browser, UI_TIMEOUT};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;
use crate::support::nats::NatsServer;
use crate::support::*;

/// The hub's page, connected.
fn page(hub: &TestDaemon) -> Browser {
    let b = Browser::start();
    b.set_viewport(1440, 900);
    b.goto(&format!(
        "http://127.0.0.1:{}/#token={}",
        hub.port(),
        hub.token()
    ));
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    b
}

/// A list's machines in order: `{machine, link, heard, items}`, `items` the entries under
/// each (`css`: what an entry is).
fn machines(b: &Browser, list: &str, entry: &str) -> Value {
    b.exec(
        "const [list, entry] = arguments;
         const out = [];
         for (const node of document.querySelectorAll(list + ' .machine, ' + list + ' ' + entry)) {
           if (node.classList.contains('machine')) {
             const heard = node.querySelector('.heard');
             out.push({ machine: node.dataset.machine, link: node.dataset.link, heard: heard ? heard.textContent : null, items: [] });
           } else if (out.length) {
             out[out.length - 1].items.push(node.dataset.key || node.querySelector('strong').textContent);
           }
         }
         return out;",
        vec![json!(list), json!(entry)],
    )
}

fn machine<'a>(groups: &'a Value, name: &str) -> Option<&'a Value> {
    groups.as_array()?.iter().find(|m| m["machine"] == name)
}

// See: issue 26 (the hub's read surfaces).
#[test]
fn the_hub_page_groups_machines_follows_another_machines_session_and_shows_a_stopped_one_down() {
    let nats = NatsServer::start();
    let url = nats.url();
    // alpha: an agent reported over its API, in its tmux session `work`.
    let (_tmux_a, mut alpha) = publishing(&nats, "alpha");
    post(&alpha, 1);
    // beta: a hosted codex session (the mock model) that takes the hub's commands.
    let beta =
        CodexFixture::start_with_args(&["--nats", &url, "--machine", "beta", "--nats-commands"]);
    beta.mock.push(Step::text("Hello from beta."));
    let id = beta.create(json!({ "approvalPolicy": "never" }));
    beta.send(&id, "Say hello");
    beta.wait_turns_completed(&id, 1);
    let (_tmux_h, hub) = hub(&nats);
    let remote = format!("beta/{id}");
    wait_caught_up(&hub, &alpha, "alpha");
    wait_caught_up(&hub, &beta.daemon, "beta");

    // Hosted sessions: this machine, then alpha and beta, each with its link; beta's session
    // under beta.
    let b = page(&hub);
    let key = format!("s:{remote}");
    let groups = b.wait_for(
        "the machines grouping the hosted sessions",
        UI_TIMEOUT,
        || {
            let groups = machines(&b, "#sessions", "button.entry");
            machine(&groups, "beta")
                .is_some_and(|m| m["items"] == json!([key]))
                .then_some(groups)
        },
    );
    eprintln!("hosted sessions: {groups}");
    let names: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["machine"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hub", "alpha", "beta"], "{groups}");
    assert_eq!(machine(&groups, "hub").unwrap()["link"], "self", "{groups}");
    assert_eq!(machine(&groups, "alpha").unwrap()["link"], "up", "{groups}");
    assert_eq!(machine(&groups, "alpha").unwrap()["items"], json!([]));
    assert_eq!(machine(&groups, "beta").unwrap()["link"], "up", "{groups}");

    // beta's session opened at the hub: its events, then a turn prompted from the page runs on
    // beta and streams back.
    b.click(&format!("#sessions button[data-key=\"{key}\"]"));
    b.wait_text("#entries", "Hello from beta.", UI_TIMEOUT);
    b.wait_text("#followText", "live", UI_TIMEOUT);
    beta.mock.push(Step::text("Second answer from beta."));
    b.type_into("#prompt", "Again, from the hub's page");
    b.click("#sendNow");
    b.wait_text("#entries", "Second answer from beta.", CATCH_UP);
    let turns = beta.wait_turns_completed(&id, 2);
    assert_eq!(turns.len(), 2, "{turns:?}");
    let prompts: Vec<Value> = beta
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "turn.started")
        .collect();
    assert_eq!(
        prompts.len(),
        2,
        "the page's prompt ran once on beta: {prompts:?}"
    );
    // The queue and lease of another machine's session, read from beta through the hub, shown
    // like a local session's; a task may be queued for it.
    b.wait_text("#leaseLine", "the queue", UI_TIMEOUT);
    b.type_into("#prompt", "not sent");
    assert!(b.is_enabled("#sendNow"));
    assert!(b.is_enabled("#queueTask"));
    b.clear("#prompt");
    // A person takes over on beta: the page reads it through the hub; a task queued from the
    // page is delivered to beta, waits there under that lease and is listed in the queue.
    let lease = format!("/api/sessions/{id}/lease");
    beta.daemon
        .post(&lease, &json!({ "action": "takeover", "by": "tester" }))
        .assert_ok();
    b.wait_text("#leaseLine", "a person", UI_TIMEOUT);
    b.type_into("#prompt", "Queued from the hub's page");
    b.click("#queueTask");
    b.wait_text("#pending", "Queued from the hub's page", UI_TIMEOUT);
    b.wait_text("#pending", "a person has control", UI_TIMEOUT);
    let dropped = beta
        .daemon
        .post(&lease, &json!({ "action": "release", "dropQueued": true }))
        .assert_ok();
    assert_eq!(
        dropped["dropped"].as_array().map(Vec::len),
        Some(1),
        "{dropped}"
    );
    b.wait_text("#leaseLine", "the queue", UI_TIMEOUT);

    // All agents: grouped by machine, alpha's reported agent under alpha.
    b.click("#showAgents");
    b.wait_text("#agentsTitle", "every machine", UI_TIMEOUT);
    let agents = b.wait_for("alpha's agent under alpha", UI_TIMEOUT, || {
        let agents = machines(&b, "#agents", ".tmux .top");
        machine(&agents, "alpha")
            .is_some_and(|m| m["items"] == json!(["work"]))
            .then_some(agents)
    });
    eprintln!("all agents: {agents}");
    assert!(machine(&agents, "beta").is_some(), "{agents}");

    // alpha stopped: shown down at the hub within its bound, with when it was last heard
    // from, its agent still listed with its last known state (never as idle).
    let up = link(&hub, "alpha").unwrap();
    assert_eq!(up["link"], "up", "{up}");
    alpha.stop();
    let stopped = Instant::now();
    let bound = Duration::from_secs(DOWN_AFTER_SECS);
    let down = b.wait_for("alpha down on the page", bound * 4, || {
        let agents = machines(&b, "#agents", ".tmux .top");
        machine(&agents, "alpha")
            .filter(|m| m["link"] == "down")
            .cloned()
    });
    let took = stopped.elapsed();
    eprintln!("alpha down on the page after {took:?} (bound {bound:?}): {down}");
    // Its last heartbeat may be up to a second before the stop; the page looks every second.
    assert!(took <= bound + Duration::from_secs(3), "{took:?}");
    assert!(
        down["heard"]
            .as_str()
            .is_some_and(|h| h.starts_with("last heard ")),
        "{down}"
    );
    assert_eq!(down["items"], json!(["work"]), "{down}");
    let row = b.exec(
        "return Array.from(document.querySelectorAll('#agents .tmux')).filter((g) => g.querySelector('.badge.bad') && g.textContent.includes('alpha down')).map((g) => g.querySelector('.agentrow .badge').textContent);",
        vec![],
    );
    assert_eq!(row, json!(["waiting for you (last known)"]), "{row}");
    // The hosted sessions' grouping says it too.
    b.click("#showHosted");
    let hosted = b.wait_for("alpha down in the hosted sessions", UI_TIMEOUT, || {
        let groups = machines(&b, "#sessions", "button.entry");
        machine(&groups, "alpha")
            .filter(|m| m["link"] == "down")
            .cloned()
    });
    assert!(hosted["heard"].as_str().is_some(), "{hosted}");
    b.assert_no_problems();
}

// See: issue 26 (another machine's approvals and requests at the hub).
#[test]
fn the_hub_page_shows_another_machines_approval_answers_it_there_and_says_when_it_is_down() {
    let nats = NatsServer::start();
    let (alpha, id, (_tmux_h, hub)) = claude_asking_and_a_hub(&nats);
    let remote = format!("alpha/{id}");

    // alpha's session opened at the hub; the permission Claude asks there shows in the panel,
    // its buttons enabled, and the page's answer runs once on alpha.
    let b = page(&hub);
    let entry = format!("#sessions button[data-key=\"s:{remote}\"]");
    b.wait_visible(&entry, CATCH_UP);
    b.click(&entry);
    let (status, sent) = alpha.send(&id, "Make a file");
    assert_eq!(status, 200, "{sent}");
    let requested = alpha.wait_event(&id, "approval.requested", |e| {
        e["type"] == "approval.requested"
    });
    let approval = requested["data"]["approvalId"].as_str().unwrap();
    b.wait_text("#requests", "touch approved.txt", CATCH_UP);
    let accept = format!("#requests button[data-key=\"a:{approval}:accept\"]");
    assert!(
        b.is_enabled(&accept),
        "the approval's buttons answer at the hub"
    );
    b.click(&accept);
    alpha.wait_turns_completed(&id, 1);
    let resolved: Vec<Value> = alpha
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "approval.resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["data"]["decision"], "accept", "{resolved:?}");
    assert_eq!(resolved[0]["data"]["by"], "web", "{resolved:?}");
    assert!(alpha.work.join("approved.txt").exists());
    b.wait_for(
        "the answered approval gone from the panel",
        UI_TIMEOUT,
        || (!b.exists("#requests .request")).then_some(()),
    );
    b.assert_no_problems();

    // alpha stopped: once it is down, the panel says so, naming it, with no button to press.
    let mut alpha = alpha;
    alpha.daemon.stop();
    let bound = Duration::from_secs(DOWN_AFTER_SECS);
    b.wait_text("#requests", "`alpha` is down", bound * 4 + UI_TIMEOUT);
    assert!(!b.exists("#requests button"), "{}", b.text("#requests"));
}
