//! The cockpit's lists, in a real Chromium against the real daemon and real codex sessions
//! (issue 23, items 9 and 11): hosted sessions named alike in every list, distinct when they
//! share a directory, opened from All agents and marked seen there; a deep link to a session
//! the daemon does not have; Markdown shown as plain text in the previews; one state badge per
//! task; why a turn cut by a daemon restart ended; `~` in the form's Directory field.
//! (Named `cockpit_…` so the newest half of the matrix, which runs `suite::web::cockpit`,
//! runs it too.)

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestDaemon;
use crate::support::browser::{Browser, UI_TIMEOUT};
use crate::support::claude_host::ClaudeFixture;
use crate::support::codex_host::CodexFixture;
use crate::support::mock_messages::Step as ClaudeStep;
use crate::support::mock_responses::Step;

/// Long enough for a codex turn on a loaded machine.
const TURN: Duration = Duration::from_secs(90);

/// Markdown with every kind of markup a preview must not show.
const MARKDOWN: &str = "## Result\n\nThe **build** is `green`, see [the docs](https://example.com/docs).\n\n\
- first point\n- second point\n";
/// What a preview shows of it.
const PLAIN: &str = "Result The build is green, see the docs. first point second point";

fn page(daemon: &TestDaemon, session: Option<&str>) -> Browser {
    let b = Browser::start();
    b.set_viewport(1440, 900);
    let mut url = format!(
        "http://127.0.0.1:{}/#token={}",
        daemon.port(),
        daemon.token()
    );
    if let Some(session) = session {
        url.push_str("&session=");
        url.push_str(session);
    }
    b.goto(&url);
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    b
}

/// The hosted rows of All agents: `{session, name, status, unseen}` each.
fn hosted_rows(b: &Browser) -> Value {
    b.exec(
        "return Array.from(document.querySelectorAll('#agents .agentrow.hosted')).map((r) => ({
           session: r.dataset.session,
           name: r.querySelector('strong').textContent,
           status: r.querySelector('.badge').textContent,
           unseen: !!r.querySelector('.dot'),
         }));",
        vec![],
    )
}

fn row_of<'a>(rows: &'a Value, session: &str) -> Option<&'a Value> {
    rows.as_array()?.iter().find(|r| r["session"] == session)
}

// See: issue 23, items 9 and 11.
#[test]
fn sessions_sharing_a_directory_have_distinct_names_in_every_list_and_open_and_clear_from_all_agents()
 {
    let fx = CodexFixture::start();
    let first = fx.create(json!({ "approvalPolicy": "never" }));
    let second = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock.push(Step::text(MARKDOWN));
    fx.send(&first, "Report");
    fx.wait_turns_completed(&first, 1);
    fx.mock.push(Step::text("Second **done**."));
    fx.send(&second, "Report too");
    fx.wait_turns_completed(&second, 1);

    // The daemon names them: the directory, then the directory numbered.
    let base = fx.work.file_name().unwrap().to_str().unwrap().to_string();
    let numbered = format!("{base} (2)");
    assert_eq!(fx.view(&first)["name"], base.as_str());
    assert_eq!(fx.view(&second)["name"], numbered.as_str());

    let b = page(&fx.daemon, None);
    b.wait_text("#sessions", &numbered, UI_TIMEOUT);
    let names = b.exec(
        "return Array.from(document.querySelectorAll('#sessions .sid')).map((e) => e.textContent).sort();",
        vec![],
    );
    assert_eq!(names, json!([base, numbered]));
    // The previews are plain text: the words, not the markup.
    let previews = b.exec(
        "return Array.from(document.querySelectorAll('#sessions .preview')).map((e) => e.textContent).sort();",
        vec![],
    );
    assert_eq!(previews, json!([PLAIN, "Second done."]), "{previews}");

    // All agents: both under their names, finished and not seen yet.
    b.click("#showAgents");
    let rows = b.wait_for("both hosted rows, by name, unseen", UI_TIMEOUT, || {
        let rows = hosted_rows(&b);
        let ready = [(&first, &base), (&second, &numbered)]
            .iter()
            .all(|(id, name)| {
                row_of(&rows, id).is_some_and(|r| r["name"] == name.as_str() && r["unseen"] == true)
            });
        ready.then_some(rows)
    });
    assert_eq!(row_of(&rows, &second).unwrap()["status"], "done", "{rows}");
    // The tracker says the same name to every client.
    let state = fx.daemon.get("/api/state").assert_ok();
    let names: Vec<&str> = state["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["agents"].as_array().unwrap())
        .filter(|a| a["source"] == "hosted")
        .filter_map(|a| a["threadName"].as_str())
        .collect();
    assert!(
        names.contains(&base.as_str()) && names.contains(&numbered.as_str()),
        "{state}"
    );

    // A click on the row (not on its button) opens the session; that marks it seen.
    b.click(&format!(
        "#agents .agentrow[data-session='{second}'] strong"
    ));
    b.wait_visible("#sessionView", UI_TIMEOUT);
    b.wait_text("#sessionTitle", &numbered, UI_TIMEOUT);
    b.wait_text("#entries", "Second done.", UI_TIMEOUT);
    b.click("#showAgents");
    b.wait_for("the opened session seen and idle", UI_TIMEOUT, || {
        let rows = hosted_rows(&b);
        let opened = row_of(&rows, &second)?;
        let other = row_of(&rows, &first)?;
        (opened["unseen"] == false && opened["status"] == "idle" && other["unseen"] == true)
            .then_some(())
    });
    // The tracker agrees, for every client.
    let state = fx.daemon.get("/api/state").assert_ok();
    let work = state["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "work")
        .unwrap_or_else(|| panic!("{state}"));
    assert_eq!(work["unseen"], true, "{state}");
    let thread = fx.view(&second)["threadId"].as_str().unwrap().to_string();
    let opened = work["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["threadId"] == thread.as_str())
        .unwrap_or_else(|| panic!("{state}"));
    assert_eq!(opened["status"], "idle", "{state}");
    assert_eq!(opened["unseen"], false, "{state}");

    // The queue: one state badge per task, the waiting reason in words, Recent in plain text.
    b.click(&format!("#agents .agentrow[data-session='{first}'] button"));
    b.wait_text("#sessionTitle", &base, UI_TIMEOUT);
    b.click("#takeover");
    b.wait_text("#leaseLine", "a person", UI_TIMEOUT);
    let queued = fx.daemon.post(
        &format!("/api/sessions/{first}/tasks"),
        &json!({ "text": "Later" }),
    );
    assert_eq!(queued.status, 202, "{}", queued.body);
    b.wait_text("#pending", "a person has control", UI_TIMEOUT);
    let badges = b.exec(
        "return Array.from(document.querySelectorAll('#pending li .badge')).map((e) => e.textContent);",
        vec![],
    );
    let states: Vec<&str> = badges
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|t| ["waiting", "queued"].iter().any(|s| t.contains(s)))
        .collect();
    assert_eq!(states, ["waiting"], "{badges}");
    let recent = b.text("#recent");
    assert!(recent.contains(PLAIN), "{recent}");
    for markup in ["**", "##", "`", "](", "- first"] {
        assert!(!recent.contains(markup), "{markup:?} in {recent}");
    }
    b.assert_no_problems();
}

// See: issue 23, item 9.
#[test]
fn a_claude_session_in_all_agents_shows_by_name_opens_on_a_click_and_is_seen_there() {
    let fx = ClaudeFixture::start();
    let id = fx.create(json!({}));
    fx.mock.push(ClaudeStep::text("Claude **finished**."));
    let (status, sent) = fx.send(&id, "Report");
    assert_eq!(status, 200, "{sent}");
    fx.wait_turns_completed(&id, 1);
    let name = fx.work.file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(fx.view(&id)["name"], name.as_str());

    let b = page(&fx.daemon, None);
    b.wait_text("#sessions", "Claude finished.", UI_TIMEOUT);
    b.click("#showAgents");
    b.wait_for("the claude row, by name, done and unseen", TURN, || {
        let rows = hosted_rows(&b);
        let row = row_of(&rows, &id)?;
        (row["name"] == name.as_str() && row["status"] == "done" && row["unseen"] == true)
            .then_some(())
    });
    b.click(&format!("#agents .agentrow[data-session='{id}'] strong"));
    b.wait_visible("#sessionView", UI_TIMEOUT);
    b.wait_text("#entries", "Claude finished.", UI_TIMEOUT);
    b.click("#showAgents");
    b.wait_for("the claude row seen and idle", UI_TIMEOUT, || {
        let rows = hosted_rows(&b);
        let row = row_of(&rows, &id)?;
        (row["unseen"] == false && row["status"] == "idle").then_some(())
    });
    // The next turn's end is news again, and seen at once while the page shows the session.
    b.click(&format!("#agents .agentrow[data-session='{id}'] button"));
    b.wait_visible("#sessionView", UI_TIMEOUT);
    fx.mock.push(ClaudeStep::text("Claude again."));
    let (status, sent) = fx.send(&id, "Again");
    assert_eq!(status, 200, "{sent}");
    fx.wait_turns_completed(&id, 2);
    b.wait_text("#entries", "Claude again.", TURN);
    let thread = fx.view(&id)["threadId"].as_str().unwrap().to_string();
    fx.daemon
        .wait_for("the second turn's end seen", UI_TIMEOUT, |d| {
            let state = d.get("/api/state").assert_ok();
            let instance = state["sessions"]
                .as_array()?
                .iter()
                .flat_map(|s| s["agents"].as_array().cloned().unwrap_or_default())
                .find(|a| a["threadId"] == thread.as_str())?;
            (instance["status"] == "idle" && instance["unseen"] == false).then_some(())
        });
    b.assert_no_problems();
}

// See: issue 23, item 9.
#[test]
fn a_deep_link_to_a_session_the_daemon_does_not_have_says_so_and_the_page_stays_usable() {
    let daemon = TestDaemon::start_with(None, &[]);
    let b = page(&daemon, Some("cs_0123456789abcdef"));
    b.wait_text(
        "#errors",
        "Session cs_0123456789abcdef is not on this daemon",
        UI_TIMEOUT,
    );
    // The page is on the list, usable: the form opens, nothing waits on the missing session.
    b.wait_visible("#nosessions", UI_TIMEOUT);
    assert!(b.exists("#sessionView[hidden]"));
    b.click("#newToggle");
    b.wait_visible("#newCwd", UI_TIMEOUT);
    b.click("#errors button");
    b.wait_for("the banner dismissed", UI_TIMEOUT, || {
        (!b.exists("#missingSession")).then_some(())
    });
    // A reload does not bring it back: the missing session is forgotten.
    b.reload();
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    assert!(!b.exists("#missingSession"), "{}", b.text("#errors"));
    b.assert_no_problems();
}

// See: issue 23, item 11.
#[test]
fn a_turn_cut_by_a_daemon_restart_says_why_in_the_transcript() {
    let mut fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock.push(
        Step::text("one two three four five six seven eight nine ten")
            .delay(Duration::from_millis(150))
            .then_hang(),
    );
    fx.send(&id, "Count slowly");
    fx.wait_event(&id, "the turn to start", |e| e["type"] == "turn.started");
    fx.daemon.kill9();
    fx.daemon.start_again_on_the_same_port();
    let reason = "the daemon stopped during the turn";
    let cut = fx.wait_event(&id, "the cut turn's end", |e| e["type"] == "turn.completed");
    assert_eq!(cut["data"]["status"], "interrupted", "{cut}");
    assert_eq!(cut["data"]["error"], reason, "{cut}");
    assert_eq!(cut["data"]["lost"], true, "{cut}");
    let b = page(&fx.daemon, Some(&id));
    b.wait_text(
        "#entries",
        &format!("Turn interrupted: {reason}"),
        UI_TIMEOUT,
    );
    b.assert_no_problems();
}

// See: issue 23, item 11.
#[test]
fn the_forms_directory_takes_a_tilde_as_a_shell_would() {
    // The daemon's home is the work directory's parent: `~/<work>` names the work directory.
    let parent = tempfile::tempdir().unwrap();
    let fx = CodexFixture::start_with_env(&[], "", &[("HOME", parent.path().to_str().unwrap())]);
    let project = parent.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    let b = page(&fx.daemon, None);
    b.click("#newToggle");
    b.wait_for("codex's policies offered", UI_TIMEOUT, || {
        b.exists("#newMode option[value='never']").then_some(())
    });
    b.exec(
        "const s = document.getElementById('newMode'); s.value = 'never'; s.dispatchEvent(new Event('change'));",
        vec![],
    );
    // A user that does not exist is a clear error, naming it.
    b.type_into("#newCwd", "~no-such-user-here/x");
    b.click("#newStart");
    b.wait_text("#errors", "no user `no-such-user-here`", UI_TIMEOUT);
    // A relative path stays a clear error too.
    b.clear("#newCwd");
    b.type_into("#newCwd", "proj");
    b.click("#newStart");
    b.wait_text("#errors", "must be an absolute path", UI_TIMEOUT);
    // `~/proj` is the home's `proj`.
    b.clear("#newCwd");
    b.type_into("#newCwd", "~/proj");
    b.click("#newStart");
    b.wait_visible("#sessionView", TURN);
    let sessions = fx.daemon.get("/api/sessions").assert_ok();
    assert_eq!(
        sessions["sessions"][0]["cwd"],
        project.to_str().unwrap(),
        "{sessions}"
    );
    assert_eq!(sessions["sessions"][0]["name"], "proj", "{sessions}");
    let problems: Vec<String> = b
        .problems()
        .into_iter()
        .filter(|p| !p.contains("400"))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}
