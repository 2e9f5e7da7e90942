//! Unit tests of the [`Normalizer`](super::Normalizer) on literal captures of both releases.

use super::*;
use crate::protocol::{InputKind, Item, ItemEvent};
use serde_json::{Value, json};

fn hook(event: &str, payload: Value) -> Value {
    hook_at(event, payload, 1)
}

/// [`hook`], the hook run at `received_at` (ms).
fn hook_at(event: &str, payload: Value, received_at: u64) -> Value {
    json!({"receivedAt": received_at, "event": event, "payload": payload})
}

fn stored(out: &[Output]) -> Vec<&'static str> {
    out.iter()
        .filter_map(|o| match o {
            Output::Store(kind) => Some(kind.type_name()),
            _ => None,
        })
        .collect()
}

// Payload shapes are literal as Claude Code 2.1.197 and 2.1.332 write them (docs/peers.md).

#[test]
fn a_plain_turn_from_hooks_and_transcript() {
    let mut n = Normalizer::new();
    let start = n.hook(&hook("SessionStart", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"})), 0);
    assert!(start.contains(&Output::Bound {
        claude_session_id: "s1".into(),
        transcript_path: Some("/t/s1.jsonl".into())
    }));
    n.expect_injected("Say hello");
    let submit = n.hook(&hook("UserPromptSubmit", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","prompt_id":"p1","hook_event_name":"UserPromptSubmit","prompt":"Say hello"})), 10);
    assert_eq!(stored(&submit), ["turn.started", "item.completed"]);
    assert!(
        matches!(&submit[0], Output::Store(EventKind::TurnStarted(t)) if t.source == TurnSource::Api)
    );
    let stop = n.hook(&hook("Stop", json!({"session_id":"s1","prompt_id":"p1","hook_event_name":"Stop","last_assistant_message":"Hello"})), 20);
    assert!(stored(&stop).is_empty(), "the end waits for the transcript");
    // The transcript lands later: the user line (a duplicate by id), the reply, the end.
    let user = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"role":"user","content":"Say hello"},"uuid":"u1"}));
    let Output::Store(EventKind::ItemCompleted(ItemEvent {
        item: Item::UserMessage { id, .. },
        ..
    })) = &user[0]
    else {
        panic!("{user:?}")
    };
    assert_eq!(id, &prompt_item_id("p1", "Say hello"));
    let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"id":"msg_1","model":"claude-opus-4-8","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}}));
    assert_eq!(stored(&reply), ["item.completed", "usage"]);
    let end =
        n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":5859}));
    assert_eq!(stored(&end), ["turn.completed"]);
    assert!(n.tick(10_000).is_empty(), "ended once");
}

#[test]
fn pasted_content_is_unwrapped() {
    // Literal from Claude Code 2.1.332 (a 4-line paste; hook, transcript and request alike).
    let wrapped = "\n\n<pasted_content id=\"d893\">\nFirst line\n  second \"q\" $HOME\n\nlast line\n</pasted_content id=\"d893\">\n";
    assert_eq!(
        unwrap_pasted(wrapped),
        "First line\n  second \"q\" $HOME\n\nlast line"
    );
    assert_eq!(unwrap_pasted("plain text"), "plain text");
    // Typed text around a paste keeps its place; a mismatched or unclosed tag stays as is.
    assert_eq!(
        unwrap_pasted(
            "Look:\n\n<pasted_content id=\"a1\">\nx\ny\n</pasted_content id=\"a1\">\nThanks"
        ),
        "Look:x\nyThanks"
    );
    let odd = "<pasted_content id=\"a1\">\nx\n</pasted_content id=\"b2\">";
    assert_eq!(unwrap_pasted(odd), odd);
    let open = "say <pasted_content id=\"";
    assert_eq!(unwrap_pasted(open), open);

    // The hook's prompt and the transcript's line both store the plain text, under one id,
    // and an injected paste is still recognised as the API's.
    let mut n = Normalizer::new();
    let plain = "First line\n  second \"q\" $HOME\n\nlast line";
    n.expect_injected(plain);
    let submit = n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":wrapped}),
        ),
        0,
    );
    assert!(
        submit.iter().any(
            |o| matches!(o, Output::Store(EventKind::TurnStarted(t)) if t.source == TurnSource::Api)
        ),
        "{submit:?}"
    );
    assert!(submit.contains(&Output::PromptSubmitted {
        turn_id: "p1".into(),
        text: plain.into()
    }));
    let user = n.transcript_line(
        &json!({"type":"user","promptId":"p1","message":{"role":"user","content":wrapped}}),
    );
    let Output::Store(EventKind::ItemCompleted(ItemEvent {
        item: Item::UserMessage { id, text },
        ..
    })) = &user[0]
    else {
        panic!("{user:?}")
    };
    assert_eq!(text, plain);
    assert_eq!(id, &prompt_item_id("p1", plain));
}

/// The turns, user messages and replies a run of outputs stores, once each (the core drops
/// repeated ids), and the prompts reported queued.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    started: Vec<(String, TurnSource)>,
    completed: Vec<(String, TurnStatus)>,
    users: Vec<(String, String)>,
    replies: Vec<(String, String)>,
    queued: Vec<String>,
    submitted: Vec<(String, String)>,
}

fn seen(out: &[Output]) -> Seen {
    let mut seen = Seen::default();
    let mut ids = HashSet::new();
    for output in out {
        match output {
            Output::Store(kind) => {
                if let Some(key) = crate::core::sessions::dedupe_key(kind)
                    && !ids.insert(key)
                {
                    continue;
                }
                match kind {
                    EventKind::TurnStarted(t) => seen.started.push((t.turn_id.clone(), t.source)),
                    EventKind::TurnCompleted(t) => {
                        seen.completed.push((t.turn_id.clone(), t.status))
                    }
                    EventKind::ItemCompleted(ItemEvent {
                        turn_id,
                        item: Item::UserMessage { text, .. },
                    }) => seen.users.push((turn_id.clone(), text.clone())),
                    EventKind::ItemCompleted(ItemEvent {
                        turn_id,
                        item: Item::AgentMessage { text, .. },
                    }) => seen.replies.push((turn_id.clone(), text.clone())),
                    _ => {}
                }
            }
            Output::PromptQueued { text } => seen.queued.push(text.clone()),
            Output::PromptSubmitted { turn_id, text } => {
                seen.submitted.push((turn_id.clone(), text.clone()))
            }
            _ => {}
        }
    }
    seen
}

enum In {
    Hook(Value),
    Line(Value),
    /// A reading of the session file's `status`.
    Status(&'static str),
}

fn feed(n: &mut Normalizer, inputs: Vec<In>) -> Vec<Output> {
    let mut out = Vec::new();
    for (i, input) in inputs.into_iter().enumerate() {
        out.extend(match input {
            In::Hook(line) => n.hook(&line, i as u64),
            In::Line(line) => n.transcript_line(&line),
            In::Status(status) => n.session_status(status),
        });
    }
    out
}

fn ups(prompt_id: &str, text: &str) -> In {
    In::Hook(hook(
        "UserPromptSubmit",
        json!({"session_id":"s1","prompt_id":prompt_id,"permission_mode":"default","prompt":text}),
    ))
}

fn stop(prompt_id: &str, last: &str) -> In {
    In::Hook(hook(
        "Stop",
        json!({"session_id":"s1","prompt_id":prompt_id,"last_assistant_message":last}),
    ))
}

fn user_line(prompt_id: &str, text: &str, source: &str) -> In {
    In::Line(
        json!({"type":"user","promptId":prompt_id,"promptSource":source,"message":{"role":"user","content":text}}),
    )
}

fn reply_line(uuid: &str, text: &str) -> In {
    In::Line(
        json!({"type":"assistant","uuid":uuid,"message":{"content":[{"type":"text","text":text}],"stop_reason":"end_turn"}}),
    )
}

fn line(value: Value) -> In {
    In::Line(value)
}

fn end_line() -> In {
    line(json!({"type":"system","subtype":"turn_duration","durationMs":5}))
}

// The orders below are the arrival orders recorded on the real CLIs (a SLOW turn with one or
// two prompts pasted and sent while it streamed).

#[test]
fn a_prompt_queued_mid_turn_on_2_1_332_runs_as_its_own_turn() {
    let mut n = Normalizer::new();
    n.expect_injected("SLOW answer please");
    n.expect_injected("And then this");
    let out = feed(
        &mut n,
        vec![
            user_line("p1", "SLOW answer please", "typed"),
            ups("p1", "SLOW answer please"),
            // Fired at enqueue time, naming the running turn.
            ups("p1", "And then this"),
            line(json!({"type":"queue-operation","operation":"enqueue","content":"And then this"})),
            reply_line("a1", "Long answer."),
            stop("p1", "Long answer."),
            end_line(),
            line(json!({"type":"queue-operation","operation":"dequeue"})),
            user_line("q2", "And then this", "queued"),
            reply_line("a2", "Short reply."),
            stop("q2", "Short reply."),
            end_line(),
        ],
    );
    let seen = seen(&out);
    assert_eq!(seen.queued, ["And then this"]);
    assert_eq!(
        seen.started,
        [
            ("p1".into(), TurnSource::Api),
            ("q2".into(), TurnSource::Api)
        ]
    );
    assert_eq!(
        seen.completed,
        [
            ("p1".into(), TurnStatus::Completed),
            ("q2".into(), TurnStatus::Completed)
        ]
    );
    assert_eq!(
        seen.users,
        [
            ("p1".into(), "SLOW answer please".into()),
            ("q2".into(), "And then this".into())
        ]
    );
    assert_eq!(
        seen.replies,
        [
            ("p1".into(), "Long answer.".into()),
            ("q2".into(), "Short reply.".into())
        ]
    );
    assert_eq!(seen.submitted, [("p1".into(), "SLOW answer please".into())]);
}

/// The order a CI run read them in (Claude Code 2.1.332 under load): the queued turn ran to
/// its `Stop` before cohost read its transcript, and the session file's idle between the two
/// turns came after both `Stop`s. Each turn still ends once, completed: the second `Stop`
/// does not push the first turn's pending end aside (it did: the idle then ended the first
/// turn `interrupted`, and the first turn's `turn_duration` ended the second).
#[test]
fn a_queued_turns_stop_read_before_the_turn_before_it_ended_leaves_that_end_alone() {
    let mut n = Normalizer::new();
    n.expect_injected("Write a long answer");
    n.expect_injected("And then this");
    let out = feed(
        &mut n,
        vec![
            ups("p1", "Write a long answer"),
            In::Status("busy"),
            ups("p1", "And then this"),
            user_line("p1", "Write a long answer", "typed"),
            line(json!({"type":"queue-operation","operation":"enqueue","content":"And then this"})),
            In::Status("busy"),
            stop("p1", "word1 word2"),
            reply_line("a1", "word1 word2"),
            stop("q2", "Second answer."),
            In::Status("idle"),
            line(json!({"type":"queue-operation","operation":"dequeue"})),
            line(json!({"type":"system","subtype":"turn_duration","durationMs":6400})),
            user_line("q2", "And then this", "queued"),
            reply_line("a2", "Second answer."),
            line(json!({"type":"system","subtype":"turn_duration","durationMs":40})),
            In::Status("idle"),
        ],
    );
    let seen = seen(&out);
    assert_eq!(
        seen.completed,
        [
            ("p1".into(), TurnStatus::Completed),
            ("q2".into(), TurnStatus::Completed)
        ]
    );
    let durations: Vec<(String, Option<u64>)> = out
        .iter()
        .filter_map(|o| match o {
            Output::Store(EventKind::TurnCompleted(t)) => Some((t.turn_id.clone(), t.duration_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(
        durations,
        [("p1".into(), Some(6400)), ("q2".into(), Some(40))]
    );
    assert_eq!(
        seen.replies,
        [
            ("p1".into(), "word1 word2".into()),
            ("q2".into(), "Second answer.".into())
        ]
    );
}

#[test]
fn two_prompts_queued_on_2_1_332_are_one_turn() {
    let mut n = Normalizer::new();
    let out = feed(
        &mut n,
        vec![
            user_line("p1", "SLOW answer please", "typed"),
            ups("p1", "SLOW answer please"),
            ups("p1", "And then this"),
            ups("p1", "Queued prompt B"),
            reply_line("a1", "Long answer."),
            stop("p1", "Long answer."),
            end_line(),
            user_line("qa", "And then this", "queued"),
            user_line("qb", "Queued prompt B", "queued"),
            reply_line("a2", "Short reply."),
            // The one Stop names the batch's last prompt.
            stop("qb", "Short reply."),
            end_line(),
        ],
    );
    let seen = seen(&out);
    assert_eq!(seen.queued, ["And then this", "Queued prompt B"]);
    let turns: Vec<&str> = seen.started.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(turns, ["p1", "qa"]);
    assert_eq!(
        seen.completed,
        [
            ("p1".into(), TurnStatus::Completed),
            ("qa".into(), TurnStatus::Completed)
        ]
    );
    assert_eq!(
        seen.users[1..],
        [
            ("qa".into(), "And then this".into()),
            ("qa".into(), "Queued prompt B".into())
        ]
    );
    assert_eq!(seen.replies[1], ("qa".into(), "Short reply.".into()));
    assert_eq!(n.turn(), None, "nothing left running");
}

#[test]
fn queued_prompts_on_2_1_197_start_their_turn_at_dequeue() {
    // One queued prompt: no hook at enqueue; the transcript line, then its hook.
    let mut n = Normalizer::new();
    let out = feed(
        &mut n,
        vec![
            user_line("p1", "SLOW answer please", "typed"),
            ups("p1", "SLOW answer please"),
            reply_line("a1", "Long answer."),
            stop("p1", "Long answer."),
            end_line(),
            user_line("q2", "And then this", "queued"),
            ups("q2", "And then this"),
            reply_line("a2", "Short reply."),
            stop("q2", "Short reply."),
            end_line(),
        ],
    );
    let seen1 = seen(&out);
    assert!(seen1.queued.is_empty());
    let turns: Vec<&str> = seen1.started.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(turns, ["p1", "q2"]);
    assert_eq!(seen1.completed.len(), 2);
    assert_eq!(seen1.submitted[1], ("q2".into(), "And then this".into()));

    // Two: one turn; the first hook names an id no transcript line carries.
    let mut n = Normalizer::new();
    let out = feed(
        &mut n,
        vec![
            user_line("p1", "SLOW answer please", "typed"),
            ups("p1", "SLOW answer please"),
            reply_line("a1", "Long answer."),
            stop("p1", "Long answer."),
            end_line(),
            user_line("e5", "And then this", "queued"),
            ups("3f", "And then this"),
            user_line("e5", "Queued prompt B", "queued"),
            ups("e5", "Queued prompt B"),
            reply_line("a2", "Short reply."),
            stop("e5", "Short reply."),
            end_line(),
        ],
    );
    let seen2 = seen(&out);
    let turns: Vec<&str> = seen2.started.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(turns, ["p1", "e5"], "{seen2:?}");
    assert_eq!(
        seen2.completed,
        [
            ("p1".into(), TurnStatus::Completed),
            ("e5".into(), TurnStatus::Completed)
        ]
    );
    assert_eq!(
        seen2.users[1..],
        [
            ("e5".into(), "And then this".into()),
            ("e5".into(), "Queued prompt B".into())
        ]
    );
    assert_eq!(n.turn(), None, "nothing left running");
}

#[test]
fn a_stop_without_transcript_ends_after_the_grace() {
    let mut n = Normalizer::new();
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":"x"}),
        ),
        0,
    );
    n.hook(
        &hook("Stop", json!({"session_id":"s1","prompt_id":"p1"})),
        100,
    );
    assert!(n.tick(100 + STOP_GRACE_MS - 1).is_empty());
    assert_eq!(stored(&n.tick(100 + STOP_GRACE_MS)), ["turn.completed"]);
}

/// Claude's idle prompt (1.5 s or more after its `Stop`) read while the turn's end still waits
/// for the transcript: it is stored after the turn's end, never before (CI, 2.1.332 under load).
#[test]
fn an_idle_prompt_read_before_its_turn_ended_follows_the_end() {
    let notification = |turn: &str| {
        In::Hook(hook(
            "Notification",
            json!({"session_id":"s1","prompt_id":turn,"hook_event_name":"Notification","message":"Claude is waiting for your input","notification_type":"idle_prompt"}),
        ))
    };
    // Released by the transcript's end of turn.
    let mut n = Normalizer::new();
    let out = feed(
        &mut n,
        vec![
            ups("p1", "Make a file"),
            user_line("p1", "Make a file", "typed"),
            stop("p1", "Created it."),
            notification("p1"),
            reply_line("a1", "Created it."),
            end_line(),
        ],
    );
    let order = stored(&out);
    let end = order.iter().position(|t| *t == "turn.completed").unwrap();
    let idle = order
        .iter()
        .position(|t| *t == "session.attention")
        .unwrap();
    assert!(end < idle, "{order:?}");
    // Released by the grace period.
    let mut n = Normalizer::new();
    let out = feed(
        &mut n,
        vec![ups("p1", "x"), stop("p1", "y"), notification("p1")],
    );
    assert!(!stored(&out).contains(&"session.attention"), "{out:?}");
    assert_eq!(
        stored(&n.tick(1 + STOP_GRACE_MS)),
        ["turn.completed", "session.attention"]
    );
    // A notification of a turn that already ended goes out at once.
    let out = feed(&mut n, vec![notification("p1")]);
    assert_eq!(stored(&out), ["session.attention"]);
}

#[test]
fn tools_from_hooks_and_transcript_share_ids() {
    let mut n = Normalizer::new();
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":"run"}),
        ),
        0,
    );
    let pre = n.hook(&hook("PreToolUse", json!({"session_id":"s1","prompt_id":"p1","tool_name":"Bash","tool_input":{"command":"echo hi"},"tool_use_id":"toolu_1"})), 1);
    let post = n.hook(&hook("PostToolUse", json!({"session_id":"s1","prompt_id":"p1","tool_name":"Bash","tool_input":{"command":"echo hi"},"tool_response":{"stdout":"hi","stderr":""},"tool_use_id":"toolu_1","duration_ms":86})), 2);
    let id_of = |out: &[Output]| match &out[0] {
        Output::Store(EventKind::ItemStarted(e)) | Output::Store(EventKind::ItemCompleted(e)) => {
            e.id().to_string()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(id_of(&pre), "p1:toolu_1");
    assert_eq!(id_of(&post), "p1:toolu_1");
    n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":"run"}}));
    let use_line = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hi"}}]}}));
    assert_eq!(id_of(&use_line), "p1:toolu_1");
    let result = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"hi","is_error":false}]}}));
    assert_eq!(id_of(&result), "p1:toolu_1");
}

#[test]
fn permission_request_becomes_an_approval() {
    let mut n = Normalizer::new();
    let out = n.hook(&json!({"receivedAt":1,"event":"PermissionRequest","requestId":"r1","payload":{"session_id":"s1","prompt_id":"p1","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"touch made.txt","description":"Create file"}}}), 0);
    let Some(Output::Store(EventKind::ApprovalRequested(a))) = out
        .iter()
        .find(|o| matches!(o, Output::Store(EventKind::ApprovalRequested(_))))
    else {
        panic!("{out:?}")
    };
    assert_eq!(a.approval_id, "ap:s1:r1");
    assert_eq!(a.command.as_deref(), Some("touch made.txt"));
    assert!(out.contains(&Output::Status(AgentStatus::Waiting)));
}

#[test]
fn ask_user_question_and_exit_plan_mode_become_input_requests() {
    let mut n = Normalizer::new();
    let out = n.hook(&json!({"receivedAt":1,"event":"PermissionRequest","requestId":"r2","payload":{"session_id":"s1","prompt_id":"p1","hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"Which color?","header":"Color","options":[{"label":"Red","description":"warm"},{"label":"Blue","description":"cold"}],"multiSelect":true}]}}}), 0);
    let Some(Output::Store(EventKind::InputRequested(q))) = out
        .iter()
        .find(|o| matches!(o, Output::Store(EventKind::InputRequested(_))))
    else {
        panic!("{out:?}")
    };
    assert_eq!(q.request_id, "in:s1:r2:question");
    assert_eq!(q.questions[0].id, "Which color?");
    assert!(q.questions[0].multi_select && q.questions[0].is_other);
    assert_eq!(q.questions[0].options[1].label, "Blue");
    assert!(
        !out.iter()
            .any(|o| matches!(o, Output::Store(EventKind::ApprovalRequested(_))))
    );
    // 2.1.332 sends no plan in the input; 2.1.197 does.
    for (input, plan) in [(json!({}), None), (json!({"plan": "# A"}), Some("# A"))] {
        let out = n.hook(&json!({"receivedAt":2,"event":"PermissionRequest","requestId":"r3","payload":{"session_id":"s1","prompt_id":"p1","hook_event_name":"PermissionRequest","tool_name":"ExitPlanMode","tool_input":input}}), 0);
        let Some(Output::Store(EventKind::InputRequested(p))) = out
            .iter()
            .find(|o| matches!(o, Output::Store(EventKind::InputRequested(_))))
        else {
            panic!("{out:?}")
        };
        assert_eq!(p.kind, InputKind::Plan);
        assert_eq!(p.plan.as_deref(), plan);
        assert_eq!(p.decisions, ["approve", "reject"]);
    }
}

#[test]
fn interrupts_from_the_transcript_marker_and_the_session_file() {
    let mut n = Normalizer::new();
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":"long"}),
        ),
        0,
    );
    n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":"long"}}));
    let marker = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":[{"type":"text","text":"[Request interrupted by user]"}]}}));
    assert_eq!(stored(&marker), ["turn.completed"]);
    // Before the first token there is no marker: the session file going idle ends the turn.
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p2","prompt":"again"}),
        ),
        10,
    );
    assert!(n.session_status("busy").is_empty());
    let idle = n.session_status("idle");
    // (A turn the file never showed busy is not ended by idle: see the queued test below.)
    assert!(
        matches!(&idle[0], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "p2" && t.status == TurnStatus::Interrupted)
    );
}

#[test]
fn an_aborted_partial_reply_is_not_an_answer() {
    for partial in [
        // 2.1.197
        json!({"type":"assistant","uuid":"a1","message":{"id":"6c1e…","model":"<synthetic>","content":[{"type":"text","text":"word0 word1"}],"stop_reason":"stop_sequence","usage":{"input_tokens":0,"output_tokens":0}}}),
        // 2.1.332 (a literal capture)
        json!({"parentUuid":"6eda","message":{"id":"msg_ae01365aeb57","type":"message","role":"assistant","model":"claude-mock","content":[{"type":"text","text":"word0 word1"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"type":"assistant","uuid":"e9f88735","isAbortedMidStream":true}),
    ] {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":"SLOW"}),
            ),
            0,
        );
        assert!(stored(&n.transcript_line(&partial)).is_empty(), "{partial}");
        let marker = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"interruptedMessageId":"msg_ae01365aeb57"}));
        assert_eq!(stored(&marker), ["turn.completed"]);
    }
}

#[test]
fn a_reply_flushed_before_the_first_prompt_line_keeps_its_turn() {
    let mut n = Normalizer::new();
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":"hi"}),
        ),
        0,
    );
    // Seen in a real first turn: the batch put the assistant line before the user line.
    let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"content":[{"type":"text","text":"Hello"}]}}));
    let Output::Store(EventKind::ItemCompleted(e)) = &reply[0] else {
        panic!("{reply:?}")
    };
    assert_eq!(e.turn_id, "p1");
    assert_eq!(e.id(), "p1:a1:0");
}

#[test]
fn a_turn_end_flushed_before_its_reply_waits_for_it() {
    let mut n = Normalizer::new();
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":"hi"}),
        ),
        0,
    );
    n.hook(
        &hook(
            "Stop",
            json!({"session_id":"s1","prompt_id":"p1","last_assistant_message":"Hello."}),
        ),
        10,
    );
    // Seen in a real first turn: one flush wrote `turn_duration` above the reply.
    let end =
        n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":150}));
    assert!(stored(&end).is_empty(), "{end:?}");
    n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":"hi"}}));
    let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}}));
    assert_eq!(
        stored(&reply),
        ["item.completed", "usage", "turn.completed"]
    );
    assert!(
        matches!(&reply[2], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "p1" && t.duration_ms == Some(150))
    );
    assert!(n.tick(100_000).is_empty(), "ended once");
}

#[test]
fn a_forks_copied_history_does_not_end_the_running_turn() {
    let mut n = Normalizer::new();
    n.expect_injected("fork prompt");
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"f1","prompt_id":"pf","prompt":"fork prompt"}),
        ),
        0,
    );
    n.hook(
        &hook(
            "Stop",
            json!({"session_id":"f1","prompt_id":"pf","last_assistant_message":"Fork reply."}),
        ),
        10,
    );
    // The fork's transcript starts with the parent's turn, ids and all.
    let copied = [
        n.transcript_line(&json!({"type":"user","promptId":"pp","message":{"content":"parent prompt"}})),
        n.transcript_line(&json!({"type":"assistant","uuid":"a0","message":{"content":[{"type":"text","text":"Parent reply."}]}})),
        n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":100})),
    ]
    .concat();
    assert_eq!(
        stored(&copied),
        [
            "turn.started",
            "item.completed",
            "item.completed",
            "turn.completed"
        ]
    );
    assert!(matches!(&copied[3], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "pp"));
    assert_eq!(n.turn(), Some("pf"), "the fork's turn still runs");
    n.transcript_line(&json!({"type":"user","promptId":"pf","message":{"content":"fork prompt"}}));
    let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"content":[{"type":"text","text":"Fork reply."}]}}));
    let end =
        n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":90}));
    assert!(matches!(&reply[0], Output::Store(EventKind::ItemCompleted(e)) if e.turn_id == "pf"));
    assert!(
        matches!(&end[0], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "pf" && t.status == TurnStatus::Completed)
    );
}

#[test]
fn a_later_turns_end_flushed_above_its_prompt_line_ends_that_turn() {
    let mut n = Normalizer::new();
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":"one"}),
        ),
        0,
    );
    n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":"one"}}));
    n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":5}));
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p2","prompt":"two"}),
        ),
        10,
    );
    n.hook(
        &hook(
            "Stop",
            json!({"session_id":"s1","prompt_id":"p2","last_assistant_message":"Two."}),
        ),
        20,
    );
    assert!(
        stored(
            &n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":7}))
        )
        .is_empty()
    );
    n.transcript_line(&json!({"type":"user","promptId":"p2","message":{"content":"two"}}));
    let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a2","message":{"content":[{"type":"text","text":"Two."}]}}));
    assert_eq!(stored(&reply), ["item.completed", "turn.completed"]);
    assert!(
        matches!(&reply[1], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "p2" && t.duration_ms == Some(7))
    );
}

#[test]
fn inherited_lines_are_passed_over() {
    let mut n = Normalizer::new();
    n.inherit(["u0".to_string(), "a0".to_string()]);
    assert!(n.transcript_line(&json!({"type":"user","uuid":"u0","promptId":"pp","message":{"content":"parent prompt"}})).is_empty());
    assert!(n.transcript_line(&json!({"type":"assistant","uuid":"a0","message":{"content":[{"type":"text","text":"Parent reply."}]}})).is_empty());
    assert_eq!(
        stored(&n.transcript_line(
            &json!({"type":"user","uuid":"u1","promptId":"pf","message":{"content":"fork prompt"}})
        )),
        ["turn.started", "item.completed"]
    );
}

#[test]
fn idle_between_a_turn_and_its_queued_successor_interrupts_nothing() {
    let mut n = Normalizer::new();
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":"one"}),
        ),
        0,
    );
    assert!(n.session_status("busy").is_empty());
    n.hook(
        &hook("Stop", json!({"session_id":"s1","prompt_id":"p1"})),
        10,
    );
    n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":5}));
    // The queued prompt starts the next turn before the file's brief idle is read.
    n.hook(
        &hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p2","prompt":"two"}),
        ),
        20,
    );
    assert!(
        n.session_status("idle").is_empty(),
        "p2 was never seen busy"
    );
    assert_eq!(n.turn(), Some("p2"));
}

/// The same brief idle with the times Claude Code writes (`statusUpdatedAt`, the hooks'
/// `receivedAt`): it began before the queued prompt's hook ran, so it still ends nothing; an
/// idle that began after that hook ends the new turn though no reading saw it busy.
#[test]
fn an_idle_ends_the_turn_whose_prompt_came_before_it_and_no_other() {
    let mut n = Normalizer::new();
    n.hook(
        &hook_at(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p1","prompt":"one"}),
            1_000,
        ),
        0,
    );
    assert!(n.session_status_since("busy", Some(1_012)).is_empty());
    n.hook(
        &hook_at("Stop", json!({"session_id":"s1","prompt_id":"p1"}), 1_500),
        10,
    );
    n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":5}));
    n.hook(
        &hook_at(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":"p2","prompt":"two"}),
            1_600,
        ),
        20,
    );
    assert!(
        n.session_status_since("idle", Some(1_560)).is_empty(),
        "the idle between p1 and p2 began before p2's prompt"
    );
    assert_eq!(n.turn(), Some("p2"));
    // p2's busy spell is missed; the idle that ends it began after its prompt.
    let idle = n.session_status_since("idle", Some(1_700));
    assert!(
        matches!(&idle[0], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "p2" && t.status == TurnStatus::Interrupted),
        "{idle:?}"
    );
    assert_eq!(n.turn(), None);
}

#[test]
fn a_new_session_id_rebinds() {
    let mut n = Normalizer::new();
    n.hook(
        &hook(
            "SessionStart",
            json!({"session_id":"old","transcript_path":"/t/old.jsonl"}),
        ),
        0,
    );
    let out = n.hook(&hook("UserPromptSubmit", json!({"session_id":"new","transcript_path":"/t/new.jsonl","prompt_id":"p","prompt":"x"})), 1);
    assert!(out.contains(&Output::Bound {
        claude_session_id: "new".into(),
        transcript_path: Some("/t/new.jsonl".into())
    }));
    assert!(out.contains(&Output::Transcript("/t/new.jsonl".into())));
}

#[test]
fn a_prompt_delivered_into_a_running_turn_is_reported_by_its_text() {
    let mut normalizer = Normalizer::default();
    // Literal, claude-code-observed.md (`attachment/queued_command`, 2.1.197): a prompt typed
    // while a tool ran, delivered into the running turn.
    let line: Value = serde_json::from_str(r#"{"parentUuid": "7e9dd641-ea8b-4f3c-a0d7-734c474c5483", "isSidechain": false, "attachment": {"type": "queued_command", "prompt": "Injected during tool", "commandMode": "prompt", "origin": {"kind": "human"}, "timestamp": "2026-11-29T13:06:20.875Z"}, "type": "attachment", "uuid": "8645b7a7-d606-4890-abb7-2261e9fee55e", "timestamp": "2026-11-29T13:06:20.875Z", "userType": "external", "entrypoint": "cli", "cwd": "$PROBE/ws_s03_injection", "sessionId": "95e1d598-2527-4ab5-a6dc-71e482c0617c", "version": "2.1.197", "gitBranch": "HEAD"}"#).unwrap();
    assert_eq!(
        normalizer.transcript_line(&line),
        vec![Output::PromptDelivered {
            text: "Injected during tool".into()
        }]
    );
}

/// A prompt that opens a turn while another is open with no end on its way (no `Stop`, not a
/// word of the transcript: an Escape before the first token whose idle reading was missed)
/// ends that turn, `interrupted` once the grace is over, without saying the agent is
/// interrupted while the new turn runs. A `Stop` that lands after the next prompt's hook (each
/// hook runs as a process of its own), or the transcript's `turn_duration`, says it completed.
#[test]
fn a_prompt_that_opens_a_turn_ends_the_open_one_unless_a_late_stop_says_how() {
    // Prompt `p1`, then `p2` opening a turn while `p1`'s is open, then `rest`.
    let after_next_prompt = |rest: Vec<In>| {
        let mut n = Normalizer::new();
        let mut inputs = vec![ups("p1", "Say hello"), ups("p2", "Next")];
        inputs.extend(rest);
        let out = feed(&mut n, inputs);
        (n, out)
    };
    let (mut n, out) = after_next_prompt(vec![]);
    let opened = seen(&out);
    assert_eq!(
        opened.started,
        [
            ("p1".into(), TurnSource::Terminal),
            ("p2".into(), TurnSource::Terminal)
        ]
    );
    assert!(opened.completed.is_empty(), "{out:?}");
    let later = n.tick(STOP_GRACE_MS + 10);
    assert_eq!(
        seen(&later).completed,
        [("p1".into(), TurnStatus::Interrupted)]
    );
    assert!(
        !later.iter().any(|o| matches!(o, Output::Status(_))),
        "{later:?}"
    );
    assert_eq!(n.turn(), Some("p2"));

    let transcript = || {
        vec![
            user_line("p1", "Say hello", "typed"),
            reply_line("a1", "Hello"),
            end_line(),
        ]
    };
    // Its `Stop` lands after the next prompt's hook, then its transcript.
    let mut late_stop = vec![stop("p1", "Hello")];
    late_stop.extend(transcript());
    let (n, out) = after_next_prompt(late_stop);
    let ended = seen(&out);
    assert_eq!(ended.completed, [("p1".into(), TurnStatus::Completed)]);
    assert_eq!(ended.replies, [("p1".into(), "Hello".into())]);
    assert_eq!(n.turn(), Some("p2"));

    // No `Stop` at all, and the transcript says the turn completed.
    let (mut n, out) = after_next_prompt(transcript());
    assert_eq!(seen(&out).completed, [("p1".into(), TurnStatus::Completed)]);
    assert!(n.tick(STOP_GRACE_MS + 10).is_empty(), "ended once");
}
