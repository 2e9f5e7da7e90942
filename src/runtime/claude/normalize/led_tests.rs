//! The [`Normalizer`](super::Normalizer) led by the transcript (an adopted Claude, no hooks), on
//! literal lines of Claude Code 2.1.197 and 2.1.332 (docs/peers.md): prompts open and confirm
//! turns, `turn_duration` ends them, the session file's `idle` ends one only after a grace.

use super::*;
use serde_json::{Value, json};

fn led() -> Normalizer {
    let mut n = Normalizer::resume(Some("s1".into()), Some("/t/s1.jsonl".into()), None);
    n.lead_by_transcript();
    n
}

fn prompt(id: &str, text: &str) -> Value {
    json!({"type":"user","promptId":id,"message":{"role":"user","content":text},"uuid":format!("u-{id}"),"promptSource":"typed","origin":{"kind":"human"}})
}

fn reply(uuid: &str, text: &str) -> Value {
    json!({"type":"assistant","uuid":uuid,"message":{"id":format!("msg_{uuid}"),"model":"claude-opus-4-8","content":[{"type":"text","text":text}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}})
}

fn turn_duration() -> Value {
    json!({"type":"system","subtype":"turn_duration","durationMs":900})
}

fn ends(out: &[Output]) -> Vec<(String, TurnStatus)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Store(EventKind::TurnCompleted(t)) => Some((t.turn_id.clone(), t.status)),
            _ => None,
        })
        .collect()
}

fn stored(out: &[Output]) -> Vec<&'static str> {
    out.iter()
        .filter_map(|o| match o {
            Output::Store(kind) => Some(kind.type_name()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_prompt_line_opens_and_confirms_the_turn_and_turn_duration_ends_it() {
    let mut n = led();
    n.expect_injected("Say hello");
    let out = n.transcript_line(&prompt("p1", "Say hello"));
    assert_eq!(stored(&out), ["turn.started", "item.completed"]);
    assert!(
        matches!(&out[0], Output::Store(EventKind::TurnStarted(t)) if t.source == TurnSource::Api)
    );
    assert!(out.contains(&Output::PromptSubmitted {
        turn_id: "p1".into(),
        text: "Say hello".into()
    }));
    assert!(out.contains(&Output::Status(AgentStatus::Running)));
    assert_eq!(n.turn(), Some("p1"));
    assert_eq!(
        stored(&n.transcript_line(&reply("a1", "Hello"))),
        ["item.completed", "usage"]
    );
    let end = n.transcript_line(&turn_duration());
    assert_eq!(ends(&end), [("p1".to_string(), TurnStatus::Completed)]);
    assert!(end.contains(&Output::Status(AgentStatus::Done)));
}

#[test]
fn idle_read_before_turn_duration_waits_for_it() {
    let mut n = led();
    n.tick(1_000);
    n.transcript_line(&prompt("p1", "Say hello"));
    assert_eq!(
        n.session_status("busy"),
        [Output::Status(AgentStatus::Running)]
    );
    n.transcript_line(&reply("a1", "Hello"));
    // Claude writes `idle` before the transcript's last batch is flushed.
    assert!(ends(&n.session_status("idle")).is_empty(), "held");
    assert!(ends(&n.tick(1_500)).is_empty(), "within the grace");
    let end = n.transcript_line(&turn_duration());
    assert_eq!(ends(&end), [("p1".to_string(), TurnStatus::Completed)]);
    assert!(ends(&n.tick(60_000)).is_empty(), "ended once");
}

#[test]
fn idle_without_a_word_of_the_transcript_ends_the_turn_interrupted_after_the_grace() {
    // An Escape before the first token: the prompt line stays an orphan, no marker follows.
    let mut n = led();
    n.tick(1_000);
    n.transcript_line(&prompt("p1", "Hang please"));
    n.session_status("busy");
    n.session_status("idle");
    assert!(ends(&n.tick(1_000 + IDLE_GRACE_MS - 1)).is_empty());
    assert_eq!(
        ends(&n.tick(1_000 + IDLE_GRACE_MS)),
        [("p1".to_string(), TurnStatus::Interrupted)]
    );
}

#[test]
fn the_interrupt_marker_ends_the_turn_interrupted_at_once() {
    let mut n = led();
    n.transcript_line(&prompt("p1", "Write a long story"));
    n.session_status("busy");
    // 2.1.197's partial reply (model `<synthetic>`), then the marker.
    let partial = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"role":"assistant","model":"<synthetic>","stop_reason":"stop_sequence","content":[{"type":"text","text":"Once upon a time"}]}}));
    assert!(stored(&partial).is_empty(), "{partial:?}");
    let marker = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"uuid":"u2"}));
    assert_eq!(ends(&marker), [("p1".to_string(), TurnStatus::Interrupted)]);
    assert!(ends(&n.session_status("idle")).is_empty());
    assert!(ends(&n.tick(u64::MAX / 2)).is_empty());
}

#[test]
fn a_reply_flushed_above_its_prompt_joins_the_prompts_turn() {
    let mut n = led();
    // A first turn's batch: the tool call before the prompt line (watchers-observed.md).
    let early = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"id":"msg_1","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hi"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":2}}}));
    assert!(early.is_empty(), "held for its prompt: {early:?}");
    let out = n.transcript_line(&prompt("p1", "Run echo hi"));
    assert_eq!(
        stored(&out),
        ["turn.started", "item.completed", "item.started", "usage"]
    );
    let started = out.iter().find_map(|o| match o {
        Output::Store(EventKind::ItemStarted(item)) => Some(item.turn_id.clone()),
        _ => None,
    });
    assert_eq!(started.as_deref(), Some("p1"));
}

#[test]
fn a_new_prompt_ends_a_turn_the_transcript_left_open() {
    let mut n = led();
    n.transcript_line(&prompt("p1", "First"));
    let out = n.transcript_line(&prompt("p2", "Second"));
    assert_eq!(ends(&out), [("p1".to_string(), TurnStatus::Interrupted)]);
    assert_eq!(n.turn(), Some("p2"));
}

#[test]
fn a_hook_line_hands_the_lead_back_to_the_hooks() {
    let mut n = led();
    assert!(n.transcript_led());
    n.hook(
        &json!({"receivedAt":1,"event":"UserPromptSubmit","payload":{"session_id":"s1","transcript_path":"/t/s1.jsonl","prompt_id":"p1","hook_event_name":"UserPromptSubmit","prompt":"Hi"}}),
        10,
    );
    assert!(!n.transcript_led());
    // With hooks, `idle` after `busy` ends the turn at once (the fence orders it).
    n.session_status("busy");
    assert_eq!(
        ends(&n.session_status("idle")),
        [("p1".to_string(), TurnStatus::Interrupted)]
    );
}

#[test]
fn rebind_follows_another_session_and_transcript() {
    let mut n = led();
    let out = n.rebind("s2", "/t/s2.jsonl");
    assert_eq!(
        out,
        [
            Output::Bound {
                claude_session_id: "s2".into(),
                transcript_path: Some("/t/s2.jsonl".into())
            },
            Output::Transcript("/t/s2.jsonl".into())
        ]
    );
    assert!(n.rebind("s2", "/t/s2.jsonl").is_empty());
}

#[test]
fn lines_read_again_after_a_restart_stay_with_the_last_turn_and_never_open_or_end_the_next() {
    // After a daemon restart the transcript tail resumes from its last saved checkpoint, which
    // may lie before the last turn's reply and turn_duration (a shutdown does not wait for the
    // save): they are read again, before the next prompt's line. Held as lines "above their
    // prompt", they were the next turn's — its reply and its end (seen in CI: a task after a
    // restart completed at once with no result).
    let mut n = Normalizer::resume(Some("s1".into()), Some("/t/s1.jsonl".into()), None);
    n.lead_by_transcript();
    n.resume_ended("p1".into());
    n.tick(1_000);
    let again = n.transcript_line(&reply("a1", "Before the restart."));
    assert!(
        again.iter().all(|o| match o {
            Output::Store(EventKind::ItemCompleted(item)) => item.turn_id == "p1",
            Output::Store(EventKind::TurnStarted(_)) => false,
            _ => true,
        }),
        "the reply read again is the last turn's: {again:?}"
    );
    assert!(
        ends(&n.transcript_line(&turn_duration())).is_empty(),
        "p1 ends once"
    );
    let next = n.transcript_line(&prompt("p2", "A task after the restart"));
    assert!(stored(&next).contains(&"turn.started"), "{next:?}");
    assert!(ends(&next).is_empty(), "the next turn stays open: {next:?}");
    assert_eq!(n.turn(), Some("p2"));
    n.transcript_line(&reply("a2", "Done as a task."));
    let end = n.transcript_line(&turn_duration());
    assert_eq!(ends(&end), [("p2".to_string(), TurnStatus::Completed)]);
}

/// The readings of a person's Escape before the first token in an adopted 2.1.197 (a live run
/// of `suite::claude::adopt::a_persons_escape_…`): the prompt line at 21:38:28.122, the session
/// file `busy` since 708_177 and `idle` since 708_532, no other line. The `busy` was read before
/// the prompt line, so no reading saw the turn busy: the `idle` after the prompt's line ends it.
#[test]
fn an_idle_after_a_typed_prompts_line_ends_its_turn_though_no_reading_saw_it_busy() {
    let mut n = led();
    n.tick(1_796_506_708_300);
    n.session_status_since("busy", Some(1_796_506_708_177));
    let mut line = prompt("p1", "Hang until a person stops it");
    line["timestamp"] = json!("2026-12-05T21:38:28.122Z");
    n.transcript_line(&line);
    // The idle before the prompt, read again late, ends nothing.
    assert!(
        ends(&n.session_status_since("idle", Some(1_796_506_700_000))).is_empty()
            && n.pending_ends.is_empty()
    );
    assert!(ends(&n.session_status_since("idle", Some(1_796_506_708_532))).is_empty());
    assert_eq!(
        ends(&n.tick(1_796_506_708_300 + IDLE_GRACE_MS)),
        [("p1".to_string(), TurnStatus::Interrupted)]
    );

    // A queued prompt's line says nothing of when its turn began: the idle between the turn
    // before it and its own (after its line's time) leaves it running.
    let mut n = led();
    n.tick(2_000_000_000_000);
    let mut line = prompt("q2", "Queued behind it");
    line["promptSource"] = json!("queued");
    line["timestamp"] = json!("2033-05-18T03:33:19.000Z");
    n.transcript_line(&line);
    assert_eq!(n.turn(), Some("q2"));
    assert!(ends(&n.session_status_since("idle", Some(2_000_000_000_500))).is_empty());
    assert!(ends(&n.tick(2_000_000_000_000 + 10 * IDLE_GRACE_MS)).is_empty());
    assert_eq!(n.turn(), Some("q2"));
}
