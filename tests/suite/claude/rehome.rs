//! Rehoming a Claude started by hand (issue 25): the real Claude Code TUI, started from a shell in
//! a pane and adopted (see `adopt.rs`), with a turn from HTTP, is moved under cohost's own runner
//! with `POST /api/sessions/{id}/rehome`: refused (`busy`, nothing done) while a turn runs and
//! (`human_typing`) over a person's draft; when idle with an empty box the person's Claude ends,
//! and `claude --resume <id>` with cohost's hooks and an explicit permission mode shows the same
//! conversation in the same pane.
//! The session, the same id and Claude session, is hosted from then on: the next prompt from
//! HTTP completes through cohost's hooks, and no turn is stored twice — also after a daemon
//! restart, which restores it as a hosted session.

use serde_json::{Value, json};

use super::adopt::{ByHand, WAIT, adopt, assert_no_repeats, fixture, wait_instance, wait_turn_end};
use crate::support::claude_env::is_running;
use crate::support::claude_host::ClaudeFixture;
use crate::support::mock_messages::Step;

/// A model the person's Claude is started with (not Claude Code's default).
const PICKED_MODEL: &str = "claude-3-7-sonnet-20250219";

fn rehome(fx: &ClaudeFixture, id: &str) -> (u16, Value) {
    let resp = fx
        .daemon
        .post(&format!("/api/sessions/{id}/rehome"), &json!({}));
    (resp.status, resp.json())
}

fn pane_pid(fx: &ClaudeFixture, pane: &str) -> u64 {
    fx.tmux
        .run(&["display-message", "-p", "-t", pane, "#{pane_pid}"])
        .trim()
        .parse()
        .expect("pane pid")
}

/// Every line of the session's `hooks.jsonl` (what cohost's own `cohost-hook` recorded).
fn hook_lines(fx: &ClaudeFixture, id: &str) -> Vec<Value> {
    std::fs::read_to_string(fx.daemon.home().join("claude").join(id).join("hooks.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect()
}

#[test]
fn an_adopted_claude_is_rehomed_under_cohosts_runner_keeping_its_conversation() {
    let fx = fixture();
    // The person picked a model of their own: the rehomed Claude goes on with it.
    let hand = ByHand::start_with(&fx, &["--model", PICKED_MODEL]);
    let claude = hand.claude_pid(&fx).expect("claude's session file");
    let watched = wait_instance(&fx, "the watched claude in its pane", |i| {
        i["source"] == "watcher:claude-code" && i["paneId"] == hand.pane.as_str()
    });
    let key = watched["key"].as_str().unwrap().to_string();
    let claude_session = watched["threadId"].as_str().unwrap().to_string();
    let (status, adopted) = adopt(&fx, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let id = adopted["session"]["id"].as_str().unwrap().to_string();

    // A prompt from HTTP completes in the adopted Claude.
    fx.mock.push(Step::text("Adopted reply."));
    let (status, sent) = fx.send(&id, "Hello before the rehome");
    assert_eq!(status, 200, "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    assert_eq!(
        wait_turn_end(&fx, &id, &turn)["data"]["status"],
        "completed"
    );
    hand.wait_screen(&fx, "the adopted reply", |s| s.contains("Adopted reply."));
    let asked = fx.mock.main_requests().last().unwrap().body["model"].clone();
    assert_eq!(
        asked, PICKED_MODEL,
        "the person's Claude runs on their model"
    );

    // Mid-turn a rehome is refused and nothing is done: the turn goes on, Claude runs.
    fx.mock
        .push(Step::text("Once upon a time there was a very long story\n").then_hang());
    let (status, sent) = fx.send(&id, "Write a long story");
    assert_eq!(status, 200, "{sent}");
    let long = sent["turnId"].as_str().unwrap().to_string();
    hand.wait_screen(&fx, "the streamed text", |s| s.contains("Once upon a time"));
    let (status, refused) = rehome(&fx, &id);
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "busy", "{refused:#}");
    assert!(is_running(claude), "a refused rehome leaves claude running");
    assert_eq!(fx.view(&id)["control"], "adopted");
    let interrupted = fx
        .daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(interrupted["interrupted"], true, "{interrupted}");
    assert_eq!(
        wait_turn_end(&fx, &id, &long)["data"]["status"],
        "interrupted"
    );
    hand.wait_ready(&fx);

    // Over a person's draft a rehome is refused and nothing is done: the draft stays, Claude runs.
    hand.keys(&fx, &["-l", "a draft of a person"]);
    hand.wait_screen(&fx, "the person's draft", |s| {
        s.contains("a draft of a person")
    });
    let (status, refused) = rehome(&fx, &id);
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "human_typing", "{refused:#}");
    assert!(is_running(claude), "a refused rehome leaves claude running");
    let screen = hand.screen(&fx);
    assert!(screen.contains("a draft of a person"), "{screen}");
    let view = fx.view(&id);
    assert_eq!(view["control"], "adopted", "{view:#}");
    assert_eq!(pane_pid(&fx, &hand.pane), u64::from(hand.shell));
    // The person clears their own box.
    hand.keys(&fx, &["Escape", "Escape"]);
    hand.wait_screen(&fx, "the cleared box", |s| {
        !s.contains("a draft of a person")
    });
    hand.wait_ready(&fx);

    // Idle with an empty box: rehomed. The same session and Claude session, hosted, same pane.
    let (status, rehomed) = rehome(&fx, &id);
    assert_eq!(status, 200, "{rehomed:#}");
    let view = &rehomed["session"];
    assert_eq!(view["id"], id.as_str(), "{view:#}");
    assert_eq!(view["control"], "hosted", "{view:#}");
    assert!(view.get("adopted").is_none(), "{view:#}");
    assert_eq!(view["threadId"], claude_session.as_str(), "{view:#}");
    assert_eq!(view["paneId"], hand.pane.as_str(), "{view:#}");
    assert!(!is_running(claude), "the person's claude ended");
    let rehomed_event = fx.wait_event(&id, "session.rehomed", |e| e["type"] == "session.rehomed");
    assert_eq!(rehomed_event["data"]["threadId"], claude_session.as_str());
    let pane = fx.wait_event(&id, "the runner's pane", |e| {
        e["type"] == "session.pane" && e["data"]["runnerPid"] != hand.shell
    });
    assert_eq!(pane["data"]["paneId"], hand.pane.as_str(), "{pane}");
    assert_eq!(
        pane_pid(&fx, &hand.pane),
        pane["data"]["runnerPid"].as_u64().unwrap(),
        "the pane runs cohost's runner"
    );
    // The resumed Claude shows the conversation, started by cohost's hooks (`resume`) in an
    // explicit permission mode.
    hand.wait_screen(&fx, "the resumed conversation", |s| {
        s.contains("Hello before the rehome") && s.contains("Adopted reply.")
    });
    let resumed = fx
        .daemon
        .wait_for("the resumed SessionStart hook", WAIT, |_| {
            hook_lines(&fx, &id).into_iter().find(|line| {
                line["event"] == "SessionStart" && line["payload"]["source"] == "resume"
            })
        });
    assert_eq!(
        resumed["payload"]["session_id"],
        claude_session.as_str(),
        "{resumed:#}"
    );

    // The next prompt from HTTP completes through the hosted runtime: its hooks say so.
    fx.mock.push(Step::text("Hosted reply after the rehome."));
    let (status, sent) = fx.send(&id, "After the rehome");
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let next = sent["turnId"].as_str().unwrap().to_string();
    let done = wait_turn_end(&fx, &id, &next);
    assert_eq!(done["data"]["status"], "completed", "{done:#}");
    let last = fx.mock.main_requests().last().unwrap().clone();
    assert!(
        last.last_user_text().contains("After the rehome"),
        "{}",
        last.last_user_text()
    );
    assert_eq!(
        last.body["model"], PICKED_MODEL,
        "the rehomed Claude goes on with the person's model"
    );
    let hooks = hook_lines(&fx, &id);
    for event in ["UserPromptSubmit", "Stop"] {
        assert!(
            hooks.iter().any(|line| line["event"] == event
                && line["payload"]["session_id"] == claude_session.as_str()),
            "no {event} hook: {hooks:#?}"
        );
    }
    let mode = fx.wait_event(&id, "the permission mode its hooks report", |e| {
        e["type"] == "session.permission_mode"
    });
    assert_eq!(mode["data"]["mode"], "default", "{mode}");
    hand.wait_screen(&fx, "the hosted reply in the pane", |s| {
        s.contains("Hosted reply after the rehome.")
    });
    let view = fx.view(&id);
    assert_eq!(view["threadId"], claude_session.as_str(), "{view:#}");
    assert_eq!(view["control"], "hosted", "{view:#}");
    let events = fx.events(&id);
    assert_no_repeats(&events);
    let prompts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "userMessage")
        .filter_map(|e| e["data"]["item"]["text"].as_str())
        .collect();
    for prompt in ["Hello before the rehome", "After the rehome"] {
        assert_eq!(
            prompts.iter().filter(|p| **p == prompt).count(),
            1,
            "{prompt}: {prompts:?}"
        );
    }

    // After a daemon restart the session is restored as a hosted one: its next prompt
    // completes in the same conversation, and nothing is stored twice.
    let mut fx = fx;
    fx.daemon.restart();
    let view = fx.view(&id);
    assert_eq!(view["control"], "hosted", "{view:#}");
    assert_eq!(view["state"], "live", "{view:#}");
    fx.mock.push(Step::text("Reply after the restart."));
    let (status, sent) = fx.send(&id, "After the restart");
    assert_eq!(status, 200, "{sent}");
    let after = sent["turnId"].as_str().unwrap().to_string();
    let done = wait_turn_end(&fx, &id, &after);
    assert_eq!(done["data"]["status"], "completed", "{done:#}");
    assert_eq!(fx.view(&id)["threadId"], claude_session.as_str());
    assert_no_repeats(&fx.events(&id));
}
