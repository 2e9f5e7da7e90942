//! An adopted codex TUI's command approvals, read from its screen (issue 25): the real codex TUI
//! (the release the version matrix names) asks before an escalated command; the adopted session
//! shows `approval.requested` with the command and the instance `waiting`; an answer over HTTP
//! types the prompt's own key only while the screen is exactly the known prompt (a moved
//! selection refuses, nothing typed); accept runs the command, cancel does not, a second answer
//! is 409, and a prompt answered in the pane resolves the approval `by: "pane"`. A command that
//! ran is a `command` item of its turn with its output, once.

use serde_json::{Value, json};

use crate::suite::adopting::{answer, prompt_approval};
use crate::suite::codex::adopt::{AGENT, Rig, adopt, events, turn_by_hand, wait_event};
use crate::suite::watch::common::wait_instance;
use crate::support::TestDaemon;
use crate::support::mock_responses::Step;

fn escalated(cmd: &str) -> Step {
    Step::exec_with(json!({
        "cmd": cmd,
        "sandbox_permissions": "require_escalated",
        "justification": "Need to write"
    }))
}

/// A codex TUI started by hand, a turn typed there, then adopted: the rig, the daemon and the
/// session's id.
fn adopted_tui() -> (Rig, TestDaemon, String) {
    let rig = Rig::start();
    let daemon = rig.daemon();
    let watched = turn_by_hand(&rig, &daemon);
    let key = watched["key"].as_str().unwrap().to_string();
    let (status, adopted) = adopt(&daemon, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let id = adopted["session"]["id"].as_str().unwrap().to_string();
    (rig, daemon, id)
}

#[test]
fn an_adopted_codex_tuis_approvals_are_seen_on_its_screen_and_answered_only_when_it_matches() {
    let (rig, daemon, id) = adopted_tui();

    // The prompt on screen is a pending approval with its command; the instance waits.
    rig.mock
        .push(escalated("touch made_by_codex.txt && echo made it"));
    rig.mock.push(Step::text("The command ran."));
    let (turn, requested) = prompt_approval(&daemon, &id, "touch please");
    let data = &requested["data"];
    assert_eq!(data["kind"], "command", "{requested}");
    assert_eq!(
        data["command"], "touch made_by_codex.txt && echo made it",
        "{requested}"
    );
    assert_eq!(data["reason"], "Need to write", "{requested}");
    assert_eq!(
        data["decisions"],
        json!(["accept", "cancel"]),
        "{requested}"
    );
    let approval = data["approvalId"].as_str().unwrap().to_string();
    wait_instance(&daemon, AGENT, "the adopted codex, waiting", |i| {
        i["status"] == "waiting" && i["paneId"] == rig.pane.as_str()
    });
    let listed = daemon
        .get(&format!("/api/sessions/{id}/approvals"))
        .assert_ok();
    assert!(
        listed.to_string().contains(&approval),
        "listed pending: {listed}"
    );

    // A person moved the selection: the screen is not the known prompt; nothing is typed.
    rig.keys(&["Down"]);
    rig.wait_screen("the second option selected", |s| {
        s.contains("\u{203a} 2. Yes")
    });
    let (status, refused) = answer(&daemon, &id, &approval, "accept");
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "screen_mismatch", "{refused}");
    let screen = rig.screen();
    assert!(
        screen.contains("\u{203a} 2. Yes") && screen.contains("Would you like to run"),
        "nothing typed:\n{screen}"
    );
    assert!(!rig.work.join("made_by_codex.txt").exists());
    rig.keys(&["Up"]);
    rig.wait_screen("the first option selected", |s| {
        s.contains("\u{203a} 1. Yes")
    });

    // Accept: the command runs and the turn goes on; a second answer is 409.
    let (status, accepted) = answer(&daemon, &id, &approval, "accept");
    assert_eq!(status, 200, "{accepted}");
    let done = wait_event(&daemon, &id, "the accepted turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "completed", "{done}");
    assert!(
        rig.work.join("made_by_codex.txt").exists(),
        "the command ran"
    );
    let resolved = wait_event(&daemon, &id, "approval.resolved", |e| {
        e["type"] == "approval.resolved" && e["data"]["approvalId"] == approval.as_str()
    });
    assert_eq!(resolved["data"]["decision"], "accept", "{resolved}");
    let (status, again) = answer(&daemon, &id, &approval, "cancel");
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "approval_resolved", "{again}");
    wait_event(&daemon, &id, "the agent's reply in the turn", |e| {
        e["type"] == "item.completed" && e["data"]["item"]["text"] == "The command ran."
    });
    // The command is an item of its turn, with its output, as for a hosted codex.
    let ran: Vec<Value> = events(&daemon, &id)
        .into_iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "command")
        .collect();
    let [command] = &ran[..] else {
        panic!("one command item: {ran:#?}")
    };
    assert_eq!(command["data"]["turnId"], turn.as_str(), "{command:#}");
    let item = &command["data"]["item"];
    assert_eq!(
        item["command"], "/bin/bash -lc 'touch made_by_codex.txt && echo made it'",
        "{command:#}"
    );
    assert_eq!(item["output"], "made it\n", "{command:#}");
    assert_eq!(item["status"], "completed", "{command:#}");
    assert_eq!(item["exitCode"], 0, "{command:#}");
    assert_eq!(item["cwd"], rig.work.to_str().unwrap(), "{command:#}");

    // Cancel: the command does not run, the turn ends.
    rig.mock.push(escalated("touch declined.txt"));
    let (turn, requested) = prompt_approval(&daemon, &id, "second please");
    let second = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(second, approval);
    let (status, cancelled) = answer(&daemon, &id, &second, "cancel");
    assert_eq!(status, 200, "{cancelled}");
    let done = wait_event(&daemon, &id, "the cancelled turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    assert!(!rig.work.join("declined.txt").exists(), "not run");

    // Answered by the person in the pane: resolved by the pane.
    rig.mock.push(escalated("touch by_hand.txt"));
    rig.mock.push(Step::text("Ran it by hand."));
    let (turn, requested) = prompt_approval(&daemon, &id, "third please");
    let third = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    rig.keys(&["y"]);
    let resolved = wait_event(&daemon, &id, "the approval answered in the pane", |e| {
        e["type"] == "approval.resolved" && e["data"]["approvalId"] == third.as_str()
    });
    assert_eq!(resolved["data"]["by"], "pane", "{resolved}");
    assert_eq!(resolved["data"]["decision"], "accept", "{resolved}");
    wait_event(&daemon, &id, "the third turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert!(rig.work.join("by_hand.txt").exists());
    let (status, late) = answer(&daemon, &id, &third, "accept");
    assert_eq!(status, 409, "{late}");
    assert_eq!(late["error"]["code"], "approval_resolved", "{late}");
    // Each command that ran once (the cancelled one never ran: no item).
    let commands: Vec<String> = events(&daemon, &id)
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "command")
        .filter_map(|e| e["data"]["item"]["command"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        commands,
        vec![
            "/bin/bash -lc 'touch made_by_codex.txt && echo made it'",
            "/bin/bash -lc 'touch by_hand.txt'"
        ],
        "each command once"
    );
}

/// A directory outside the workspace and outside `/tmp` (both writable in `workspace-write`),
/// so codex asks before a patch writes there; removed at the end.
struct Outside(std::path::PathBuf);

impl Outside {
    fn new() -> Outside {
        let dir = std::path::PathBuf::from(format!(
            "/var/tmp/cohost-adopt-edits-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("mkdir in /var/tmp");
        Outside(dir)
    }

    /// The model's `apply_patch` (through `exec_command`, as codex intercepts it) adding
    /// `name` there.
    fn add(&self, name: &str, line: &str) -> Step {
        let patch = format!(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {}\n+{line}\n*** End Patch\nEOF\n",
            self.0.join(name).display()
        );
        Step::exec_with(json!({ "cmd": patch }))
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn an_adopted_codex_tuis_file_edits_are_asked_on_its_screen_and_answered_over_http() {
    let (rig, daemon, id) = adopted_tui();
    let outside = Outside::new();
    let patched = outside.0.join("patched.txt");

    // The edits prompt on screen is a pending file-change approval naming where they go.
    rig.mock
        .push(outside.add("patched.txt", "hello from the patch"));
    rig.mock.push(Step::text("Patched."));
    let (turn, requested) = prompt_approval(&daemon, &id, "patch please");
    let data = &requested["data"];
    assert_eq!(data["kind"], "fileChange", "{requested}");
    assert!(data.get("command").is_none(), "{requested}");
    assert_eq!(
        data["reason"],
        format!("Apply proposed file edits: {}", patched.display()),
        "{requested}"
    );
    assert_eq!(
        data["decisions"],
        json!(["accept", "cancel"]),
        "{requested}"
    );
    let approval = data["approvalId"].as_str().unwrap().to_string();
    assert!(approval.ends_with(":fileChange"), "{approval}");
    wait_instance(&daemon, AGENT, "the adopted codex, waiting", |i| {
        i["status"] == "waiting" && i["paneId"] == rig.pane.as_str()
    });
    assert!(!patched.exists(), "nothing written before the answer");

    // Accept: the patch is applied and is a fileChange item of its turn; a second answer 409.
    let (status, accepted) = answer(&daemon, &id, &approval, "accept");
    assert_eq!(status, 200, "{accepted}");
    let done = wait_event(&daemon, &id, "the accepted turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(&patched).ok().as_deref(),
        Some("hello from the patch\n"),
        "the patch was applied"
    );
    let (status, again) = answer(&daemon, &id, &approval, "cancel");
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "approval_resolved", "{again}");
    let change = wait_event(&daemon, &id, "the fileChange item", |e| {
        e["type"] == "item.completed" && e["data"]["item"]["type"] == "fileChange"
    });
    assert_eq!(change["data"]["turnId"], turn.as_str(), "{change:#}");
    let item = &change["data"]["item"];
    assert_eq!(item["status"], "completed", "{change:#}");
    assert_eq!(
        item["changes"],
        json!([{
            "path": patched.to_str().unwrap(),
            "kind": "add",
            "diff": "hello from the patch\n"
        }]),
        "{change:#}"
    );

    // Cancel: nothing is written, the turn ends.
    rig.mock.push(outside.add("declined.txt", "no"));
    let (turn, requested) = prompt_approval(&daemon, &id, "second patch please");
    assert_eq!(requested["data"]["kind"], "fileChange", "{requested}");
    let second = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, cancelled) = answer(&daemon, &id, &second, "cancel");
    assert_eq!(status, 200, "{cancelled}");
    let done = wait_event(&daemon, &id, "the cancelled turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    assert!(!outside.0.join("declined.txt").exists(), "not written");
    let changes = events(&daemon, &id)
        .into_iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "fileChange")
        .count();
    assert_eq!(
        changes, 1,
        "the applied patch once, the cancelled one never"
    );
}
