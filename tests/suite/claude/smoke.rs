//! Smoke tests for the Claude Code test infrastructure itself: the real interactive `claude` TUI
//! (2.1.197) in a private tmux server, driven without cohost, against the scripted
//! [`MockMessages`] server. They prove that the mock's SSE is what the CLI accepts (text,
//! tool_use with a permission dialog, a hung stream cut by Escape), that bracketed-paste
//! injection delivers one prompt, and that the readiness heuristic of
//! docs/peers.md ("Screen") holds on real screens.
//!
//! Every test owns its mock, tmux socket, `HOME` and work directory, so they run in parallel.
//! Set `COHOST_UPDATE_CLAUDE_SCREENS=1` to rewrite `tests/fixtures/claude/screens/*.txt` from
//! the screens test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::claude_env::{ClaudeEnv, is_running};
use crate::support::http::{Resp, raw_request};
use crate::support::mock_messages::{MockMessages, RequestKind, Step};
use crate::support::tmux::{TmuxServer, require_tmux};
use crate::support::{pinned_version, temp_dir};
use cohost::peers::CLAUDE;
use cohost::runtime::claude::normalize::unwrap_pasted;

/// How long any single wait on the TUI may take (startup on a loaded 2-core machine included).
const WAIT: Duration = Duration::from_secs(20);
/// How long the screen must stay ready before the TUI is taken as ready (§6: "about 0.3 s").
const READY_STABLE: Duration = Duration::from_millis(300);
/// Screen polling interval.
const POLL: Duration = Duration::from_millis(50);
/// The environment variable that makes the screens test rewrite the fixtures.
const UPDATE_SCREENS_ENV: &str = "COHOST_UPDATE_CLAUDE_SCREENS";

/// What the readiness heuristic (docs/peers.md, "Screen") reads from one `capture-pane -p`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Analysis {
    /// The unsent text of the live input box (`❯\u{a0}…`), `None` when no box is on screen.
    input: Option<String>,
    /// A spinner line above the box, or `esc to interrupt` in the footer.
    busy: bool,
    /// No input box, but a dialog marker (permission, trust, API key, Rewind…).
    dialog: bool,
    /// The box says prompts are queued.
    queued: bool,
}

impl Analysis {
    fn ready(&self) -> bool {
        self.input.as_deref() == Some("") && !self.busy && !self.dialog
    }
}

/// A rule line: only `─`, at least 20 of them.
fn is_rule(line: &str) -> bool {
    let line = line.trim();
    line.chars().count() >= 20 && line.chars().all(|c| c == '─')
}

/// A spinner line: `^\s*[^\w\s]\s+\w[\w' -]*…` (`✻ Churning… (3s · ↓ 26 tokens)`).
fn is_spinner(line: &str) -> bool {
    let mut chars = line.trim_start().chars();
    let Some(glyph) = chars.next() else {
        return false;
    };
    if glyph.is_alphanumeric() || glyph == '_' || glyph.is_whitespace() {
        return false;
    }
    let rest = chars.as_str();
    if !rest.starts_with(char::is_whitespace) {
        return false;
    }
    let rest = rest.trim_start();
    let Some((word, _)) = rest.split_once('…') else {
        return false;
    };
    word.chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '\'' || c == ' ' || c == '-')
}

const DIALOG_MARKERS: &[&str] = &[
    "Do you want to proceed?",
    "Esc to cancel",
    "Enter to confirm",
    "Enter to continue",
];

fn analyze(screen: &str) -> Analysis {
    let lines: Vec<&str> = screen.lines().collect();
    let box_start = (1..lines.len())
        .rev()
        .find(|&i| lines[i].starts_with("❯\u{a0}") && is_rule(lines[i - 1]));
    let Some(start) = box_start else {
        return Analysis {
            input: None,
            busy: false,
            dialog: DIALOG_MARKERS.iter().any(|m| screen.contains(m)),
            queued: false,
        };
    };
    let end = (start + 1..lines.len())
        .find(|&i| is_rule(lines[i]))
        .unwrap_or(lines.len());
    let mut input_lines = vec![lines[start].trim_start_matches("❯\u{a0}")];
    input_lines.extend(
        lines[start + 1..end]
            .iter()
            .map(|l| l.strip_prefix("  ").unwrap_or(l)),
    );
    let input = input_lines.join("\n").trim().to_owned();
    let footer = lines
        .get(end + 1..)
        .unwrap_or(&[])
        .iter()
        .find(|l| !l.trim().is_empty())
        .copied()
        .unwrap_or("");
    let spinner = lines[..start - 1]
        .iter()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(6)
        .any(|l| is_spinner(l));
    let queued = input.contains("Press up to edit queued messages");
    Analysis {
        input: Some(if queued { String::new() } else { input }),
        busy: spinner || footer.contains("esc to interrupt"),
        dialog: false,
        queued,
    }
}

/// One real claude TUI in its own tmux server, talking to its own mock.
struct Tui {
    // Field order is drop order: the tmux server (and claude with it) goes first.
    tmux: TmuxServer,
    env: ClaudeEnv,
    mock: MockMessages,
    pane: String,
    /// The pane's process: claude itself.
    pid: u32,
    _work: tempfile::TempDir,
}

impl Tui {
    /// Starts claude in a fresh tmux server, in the permission mode cohost launches sessions in
    /// (`default`: since 2.1.332 Claude's own default is `auto`, which asks for nothing), and
    /// waits until its input box is ready.
    fn start(mock: MockMessages) -> Tui {
        Tui::start_with(mock, &["--permission-mode", "default"], |_| {})
    }

    /// Starts claude with extra arguments, after `configure` had a chance to adjust the env.
    fn start_with(
        mock: MockMessages,
        args: &[&str],
        configure: impl FnOnce(&mut ClaudeEnv),
    ) -> Tui {
        require_tmux();
        let work = temp_dir("cohost-claude-ws-");
        let mut env = ClaudeEnv::new(&mock.base_url(), &work.path().join("ws"));
        configure(&mut env);
        let tmux = TmuxServer::new();
        // The server inherits its environment from the client that starts it: start it from a
        // cleared environment so that only `env.env()` reaches claude (plus tmux's own TMUX and
        // TMUX_PANE), whatever the test runner's environment holds.
        let mut argv = vec![env.claude_bin().to_string_lossy().into_owned()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let (pane, pid) = tmux.launch("claude", env.workdir(), &env.env(), &argv);
        tmux.run(&["set-option", "-g", "focus-events", "on"]);
        let tui = Tui {
            tmux,
            env,
            mock,
            pane,
            pid,
            _work: work,
        };
        tui.wait_ready("the first ready input box");
        tui
    }

    fn screen(&self) -> String {
        self.tmux.run(&["capture-pane", "-p", "-t", &self.pane])
    }

    /// Panics with `what`, the current screen, the session status and the mock's log.
    fn fail(&self, what: &str) -> ! {
        panic!(
            "{what}\n--- screen ---\n{}\n--- session status: {:?}\n--- mock: {}",
            self.screen(),
            self.env.session_status(),
            self.mock.summary()
        );
    }

    /// Polls the screen until `check` returns `Some`.
    fn wait_screen<T>(&self, what: &str, mut check: impl FnMut(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if let Some(value) = check(&screen) {
                return value;
            }
            if Instant::now() >= deadline {
                self.fail(&format!("timed out after {WAIT:?} waiting for {what}"));
            }
            thread::sleep(POLL);
        }
    }

    fn wait_text(&self, text: &str) -> String {
        self.wait_screen(&format!("{text:?} on screen"), |s| {
            s.contains(text).then(|| s.to_owned())
        })
    }

    fn wait_until(&self, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + WAIT;
        while !check() {
            if Instant::now() >= deadline {
                self.fail(&format!("timed out after {WAIT:?} waiting for {what}"));
            }
            thread::sleep(POLL);
        }
    }

    /// Waits until the screen shows an empty, idle input box for [`READY_STABLE`] and the
    /// session file says `idle`; returns that screen.
    fn wait_ready(&self, what: &str) -> String {
        self.wait_analysis(what, |a| a.ready())
    }

    /// Waits until the analysis satisfies `check` steadily and the session file says `idle`.
    fn wait_analysis(&self, what: &str, check: impl Fn(&Analysis) -> bool) -> String {
        let mut since: Option<Instant> = None;
        self.wait_screen(what, |screen| {
            let good =
                check(&analyze(screen)) && self.env.session_status().as_deref() == Some("idle");
            if !good {
                since = None;
                return None;
            }
            let first = *since.get_or_insert_with(Instant::now);
            (first.elapsed() >= READY_STABLE).then(|| screen.to_owned())
        })
    }

    fn wait_status(&self, status: &str) {
        self.wait_until(&format!("session status {status:?}"), || {
            self.env.session_status().as_deref() == Some(status)
        });
    }

    /// Bracketed paste of `text` into the pane (no Enter).
    fn paste(&self, text: &str) {
        let path = self.env.scratch().join("paste.txt");
        std::fs::write(&path, text).expect("write paste file");
        self.tmux.run(&[
            "load-buffer",
            "-b",
            "inj",
            path.to_str().expect("utf-8 path"),
        ]);
        self.tmux
            .run(&["paste-buffer", "-p", "-d", "-b", "inj", "-t", &self.pane]);
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.pane.as_str()];
        args.extend_from_slice(keys);
        self.tmux.run(&args);
    }

    /// Presses `key` in the permission dialog on screen. 2.1.332 ignored an Enter sent the moment
    /// its dialog appeared (seen in this test: the dialog stayed up), so the key goes in once the
    /// dialog has been up for a second, as a person's would.
    fn answer_dialog(&self, key: &str) {
        thread::sleep(Duration::from_secs(1));
        self.keys(&[key]);
    }

    /// Pastes `text`, waits until the box shows it, then presses Enter.
    fn submit(&self, text: &str) {
        self.paste(text);
        // A short, single-line paste is shown inline; longer ones collapse to a placeholder.
        let shown = if text.contains('\n') || text.len() > 800 {
            "[Pasted text".to_owned()
        } else {
            text.to_owned()
        };
        self.wait_screen(
            &format!("the pasted text {shown:?} in the input box"),
            |s| {
                analyze(s)
                    .input
                    .is_some_and(|input| input.contains(&shown))
                    .then_some(())
            },
        );
        self.keys(&["Enter"]);
    }

    /// The single transcript file, once it holds a line satisfying `check`.
    fn wait_transcript(&self, what: &str, check: impl Fn(&Value) -> bool) -> (PathBuf, Vec<Value>) {
        let mut found = None;
        self.wait_until(&format!("a transcript line with {what}"), || {
            let transcripts = self.env.transcripts();
            let [path] = transcripts.as_slice() else {
                return false;
            };
            let lines = read_jsonl(path);
            if lines.iter().any(&check) {
                found = Some((path.clone(), lines));
                true
            } else {
                false
            }
        });
        found.expect("found")
    }

    /// The single `~/.claude/sessions/<pid>.json` (its pid is claude's own process, which is
    /// not the pane's process).
    fn session_file(&self) -> Value {
        match self.env.session_files().as_slice() {
            [(_, value)] => value.clone(),
            files => self.fail(&format!("expected one session file, found {files:#?}")),
        }
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        // claude takes 1–2 s to exit on the SIGHUP of kill-server and flushes its transcript
        // meanwhile; SIGKILL ends it at once. The env's own drop then waits for it to be gone
        // before the HOME is removed.
        if is_running(self.pid) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
        let _ = self.tmux.command(&["kill-server"]);
        self.env.kill_leftover_processes();
    }
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The text of an `assistant` transcript line, if it is one.
fn assistant_text(line: &Value) -> Option<String> {
    if line["type"] != "assistant" {
        return None;
    }
    let text: String = line["message"]["content"]
        .as_array()?
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    Some(text)
}

#[test]
fn claude_smoke_plain_reply_reaches_screen_transcript_and_mock() {
    let started = Instant::now();
    let mock = MockMessages::start();
    let reply = "Hello from the mock, a plain reply.";
    mock.push(Step::text(reply));
    let tui = Tui::start(mock);
    let prompt = "Say hello to the smoke test";
    tui.submit(prompt);

    tui.wait_text(reply);
    let screen = tui.wait_ready("the box to be ready after the reply");
    assert!(
        screen.contains(&format!("❯ {prompt}")),
        "the submitted prompt is in the scroll-back with a plain space:\n{screen}"
    );

    tui.wait_transcript("the assistant reply", |line| {
        assistant_text(line).as_deref() == Some(reply)
    });
    // Claude may flush a turn's reply (and its turn_duration) above the prompt line that
    // opened it (watchers-observed.md, "File order ≠ logical order"; seen with 2.1.197 on a
    // loaded machine): the prompt line follows.
    let (path, lines) = tui.wait_transcript("the typed prompt", |line| {
        line["type"] == "user" && line["message"]["content"] == prompt
    });
    assert!(
        lines
            .iter()
            .any(|l| assistant_text(l).as_deref() == Some(reply)),
        "the transcript still holds the reply: {lines:#?}"
    );
    let session = tui.session_file();
    let session_id = session["sessionId"].as_str().expect("sessionId");
    assert_eq!(
        path.file_stem().and_then(|s| s.to_str()),
        Some(session_id),
        "the transcript is <session-id>.jsonl"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "user" && l["message"]["content"] == prompt),
        "the transcript holds the typed prompt: {lines:#?}"
    );
    assert_eq!(session["status"], "idle");
    assert_eq!(
        session["pid"], tui.pid,
        "the session file is named for claude's pid"
    );

    let main = tui.mock.main_requests();
    assert_eq!(main.len(), 1, "one main request: {}", tui.mock.summary());
    let request = &main[0];
    assert_eq!(request.last_user_text(), prompt);
    assert!(request.is_stream(), "the TUI streams");
    assert!(request.tool_count() > 0, "main requests offer tools");
    assert_eq!(request.uri, "/v1/messages?beta=true");
    assert_eq!(request.session_id(), Some(session_id));
    assert_eq!(request.step, Some(0));
    assert!(
        tui.mock.not_found().is_empty(),
        "unexpected paths: {:?}",
        tui.mock.not_found()
    );
    eprintln!("plain reply: {:?}", started.elapsed());
}

#[test]
fn claude_smoke_multi_line_paste_is_one_prompt() {
    let started = Instant::now();
    let mock = MockMessages::start();
    mock.push(Step::text("Got all four lines."));
    let tui = Tui::start(mock);
    let prompt = "First line of a multi-line prompt\n  indented second line with \"quotes\", `ticks` and $HOME\n\nlast line after a blank one \\ done";
    tui.submit(prompt);

    tui.wait_text("Got all four lines.");
    tui.wait_ready("the box to be ready after the reply");
    let main = tui.mock.main_requests();
    assert_eq!(
        main.len(),
        1,
        "one prompt, one request: {}",
        tui.mock.summary()
    );
    // 2.1.332 wraps a paste of more than two newlines (or 800 characters) in `<pasted_content>`
    // — in the request, the transcript and the hook alike; 2.1.197 sends it as it is.
    let sent = main[0].last_user_text();
    if pinned_version(&CLAUDE) == CLAUDE.oldest {
        assert_eq!(sent, prompt);
    } else {
        assert!(sent.contains("<pasted_content id="), "{sent:?}");
    }
    assert_eq!(unwrap_pasted(&sent), prompt);
    let (_, lines) = tui.wait_transcript("the reply", |line| {
        assistant_text(line).as_deref() == Some("Got all four lines.")
    });
    let prompts: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "user" && l["message"]["content"].is_string())
        .collect();
    assert_eq!(prompts.len(), 1, "one user prompt line: {prompts:#?}");
    let line = prompts[0]["message"]["content"].as_str().unwrap();
    assert_eq!(line, sent, "the transcript holds what the model got");
    assert_eq!(unwrap_pasted(line), prompt);
    eprintln!("multi-line paste: {:?}", started.elapsed());
}

#[test]
fn claude_smoke_bash_tool_use_asks_permission_then_runs() {
    let started = Instant::now();
    let mock = MockMessages::start();
    mock.push(Step::tool_use(
        "Bash",
        json!({ "command": "touch made.txt", "description": "Create made.txt" }),
    ));
    mock.push(Step::text("Created made.txt for you.").when_tool_result());
    let tui = Tui::start(mock);
    tui.submit("Please create made.txt");

    let screen = tui.wait_text("Do you want to proceed?");
    assert!(
        screen.contains("touch made.txt"),
        "the dialog names the command:\n{screen}"
    );
    assert!(
        analyze(&screen).dialog,
        "a dialog, not an input box:\n{screen}"
    );
    tui.wait_status("waiting");
    assert_eq!(tui.session_file()["waitingFor"], "permission prompt");
    let made = tui.env.workdir().join("made.txt");
    assert!(!made.exists(), "nothing runs before the approval");

    tui.answer_dialog("Enter");
    tui.wait_until("made.txt to exist", || made.exists());
    tui.wait_text("Created made.txt for you.");
    tui.wait_ready("the box to be ready after the follow-up");

    let main = tui.mock.main_requests();
    assert_eq!(main.len(), 2, "{}", tui.mock.summary());
    assert!(main[0].tool_results().is_empty());
    let results = main[1].tool_results();
    assert_eq!(results.len(), 1, "one tool_result: {results:#?}");
    let tool_use_id = results[0]["tool_use_id"].as_str().expect("tool_use_id");
    assert!(tool_use_id.starts_with("toolu_mock_"), "{tool_use_id}");
    assert_ne!(results[0]["is_error"], true, "{results:#?}");
    assert_eq!(main[1].step, Some(1));
    assert_eq!(tui.mock.pending_steps(), 0);
    let (_, lines) = tui.wait_transcript("the tool_result", |line| {
        line["type"] == "user"
            && line["message"]["content"][0]["tool_use_id"].as_str() == Some(tool_use_id)
    });
    assert!(
        lines
            .iter()
            .any(|l| l["message"]["content"][0]["type"] == "tool_use"),
        "the transcript holds the tool_use"
    );
    eprintln!("bash tool_use: {:?}", started.elapsed());
}

#[test]
fn claude_smoke_escape_interrupts_a_hung_stream() {
    let started = Instant::now();
    let mock = MockMessages::start();
    mock.push(Step::hang());
    let tui = Tui::start(mock);
    let prompt = "Take your time with this one";
    tui.submit(prompt);

    tui.mock.wait_for_requests(1, WAIT);
    tui.wait_status("busy");
    tui.wait_screen("the busy spinner", |s| analyze(s).busy.then_some(()));
    tui.keys(&["Escape"]);
    tui.mock.wait_for_disconnects(1, WAIT);
    tui.wait_status("idle");
    // Nothing had streamed yet, so the prompt goes back into the input box (§7 gotcha 2).
    let screen = tui.wait_analysis("the prompt restored to the box", |a| {
        !a.busy && a.input.as_deref() == Some(prompt)
    });
    assert!(!analyze(&screen).dialog);
    let main = tui.mock.main_requests();
    assert_eq!(main.len(), 1, "{}", tui.mock.summary());
    assert!(main[0].disconnected, "{}", tui.mock.summary());
    assert_eq!(tui.mock.disconnects(), 1);

    // `Escape Escape` in one send-keys clears the restored draft.
    tui.keys(&["Escape", "Escape"]);
    tui.wait_ready("an empty box after clearing the draft");
    eprintln!("escape on hang: {:?}", started.elapsed());
}

#[test]
fn claude_smoke_escape_mid_stream_keeps_the_partial_answer() {
    let started = Instant::now();
    let mock = MockMessages::start();
    mock.push(Step::text("Partial answer that never ends\n").then_hang());
    mock.push(Step::text("Fresh answer after the interrupt."));
    let tui = Tui::start(mock);
    tui.submit("Start answering");

    // The TUI renders streamed text one complete line at a time: the step's text ends in "\n".
    tui.wait_text("Partial answer that never ends");
    tui.keys(&["Escape"]);
    tui.mock.wait_for_disconnects(1, WAIT);
    tui.wait_text("Interrupted");
    tui.wait_ready("an empty, idle box after the interrupt");

    tui.submit("Try again");
    tui.wait_text("Fresh answer after the interrupt.");
    tui.wait_ready("the box to be ready after the second reply");
    let main = tui.mock.main_requests();
    assert_eq!(main.len(), 2, "{}", tui.mock.summary());
    assert!(main[0].disconnected);
    assert!(!main[1].disconnected);
    // The interrupt marker is merged into the next prompt's user message.
    assert_eq!(
        main[1].last_user_text(),
        "[Request interrupted by user]\nTry again"
    );
    // The partial text is sent back as the assistant's turn.
    let history = main[1].body["messages"].to_string();
    assert!(
        history.contains("Partial answer that never ends"),
        "the partial answer is in the history"
    );
    eprintln!("escape mid-stream: {:?}", started.elapsed());
}

/// Walks the TUI through every state a readiness analyzer must tell apart, checks the
/// heuristic on each screen, and (with `COHOST_UPDATE_CLAUDE_SCREENS=1`) saves them as fixtures.
#[test]
fn claude_smoke_screens_cover_the_readiness_states() {
    let started = Instant::now();
    let mock = MockMessages::start();
    let tui = Tui::start(mock);
    let mut screens: Vec<(&str, String)> = Vec::new();

    // Idle, empty box.
    let screen = tui.wait_ready("the idle box");
    screens.push(("idle_empty", screen));

    // A human draft in the box (pasted, not sent); `Escape Escape` clears it.
    let draft = "a human draft that is not sent yet";
    tui.paste(draft);
    let screen = tui.wait_analysis("the draft in the box", |a| {
        a.input.as_deref() == Some(draft) && !a.busy
    });
    screens.push(("draft", screen));
    tui.keys(&["Escape", "Escape"]);
    tui.wait_ready("the box cleared after Escape Escape");

    // Busy before the first token (spinner line), then Escape: the prompt is restored.
    tui.mock.push(Step::hang());
    let restored = "restore me after escape";
    tui.submit(restored);
    tui.wait_status("busy");
    let screen = tui.wait_screen("the spinner before any token", |s| {
        let a = analyze(s);
        let spinner = s.lines().any(is_spinner);
        (a.busy && spinner && a.input.as_deref() == Some("")).then(|| s.to_owned())
    });
    screens.push(("busy_spinner", screen));
    tui.keys(&["Escape"]);
    let screen = tui.wait_analysis("the prompt restored to the box", |a| {
        !a.busy && a.input.as_deref() == Some(restored)
    });
    screens.push(("escape_restored_prompt", screen));
    tui.keys(&["Escape", "Escape"]);
    tui.wait_ready("the box cleared after the restore");

    // Busy while a reply streams, then Escape mid-stream.
    tui.mock
        .push(Step::text("Streaming a long answer word by word\n").then_hang());
    tui.submit("Start a long answer");
    tui.wait_text("Streaming a long answer word by word");
    let screen = tui.wait_screen("the busy footer while streaming", |s| {
        let a = analyze(s);
        (a.busy && a.input.as_deref() == Some("")).then(|| s.to_owned())
    });
    screens.push(("busy_streaming", screen));
    tui.keys(&["Escape"]);
    tui.wait_text("Interrupted");
    let screen = tui.wait_ready("the idle box after the interrupt");
    screens.push(("interrupted_idle", screen));

    // A prompt queued while busy; Escape interrupts and the queued prompt runs at once.
    tui.mock
        .push(Step::text("Another long answer streaming\n").then_hang());
    tui.mock
        .push(Step::text("Answer to the queued prompt.").when_user_contains("queued prompt"));
    tui.submit("Start another long answer");
    tui.wait_text("Another long answer streaming");
    tui.submit_queued("a queued prompt while busy");
    let screen = tui.wait_screen("the queued prompt", |s| {
        let a = analyze(s);
        (a.busy && a.queued).then(|| s.to_owned())
    });
    screens.push(("queued_while_busy", screen));
    tui.keys(&["Escape"]);
    tui.wait_text("Answer to the queued prompt.");
    let screen = tui.wait_ready("the box after the queued prompt's answer");
    screens.push(("idle_after_reply", screen));

    // A permission dialog instead of the input box.
    tui.mock.push(Step::tool_use(
        "Bash",
        json!({ "command": "touch screens.txt", "description": "Create screens.txt" }),
    ));
    tui.mock
        .push(Step::text("Done creating the file.").when_tool_result());
    tui.submit("Create screens.txt");
    let screen = tui.wait_screen("the permission dialog", |s| {
        (s.contains("Do you want to proceed?") && analyze(s).dialog).then(|| s.to_owned())
    });
    screens.push(("permission_dialog", screen));
    tui.answer_dialog("Enter");
    tui.wait_text("Done creating the file.");
    tui.wait_ready("the box after the tool turn");
    assert_eq!(tui.mock.pending_steps(), 0, "{}", tui.mock.summary());

    if std::env::var_os(UPDATE_SCREENS_ENV).is_some() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude/screens")
            .join(pinned_version(&CLAUDE));
        std::fs::create_dir_all(&dir).expect("mkdir screens");
        for (name, screen) in &screens {
            std::fs::write(dir.join(format!("{name}.txt")), screen).expect("write screen");
        }
        eprintln!("wrote {} screens to {}", screens.len(), dir.display());
    }
    eprintln!("screens: {:?}", started.elapsed());
}

/// The saved screens of every supported release still classify as their names say.
#[test]
fn claude_smoke_saved_screens_classify_as_named() {
    for version in [CLAUDE.oldest, CLAUDE.newest] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude/screens")
            .join(version);
        saved_screens_classify_as_named(&dir);
    }
}

fn saved_screens_classify_as_named(dir: &Path) {
    let read = |name: &str| {
        let path = dir.join(format!("{name}.txt"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    };
    for name in ["idle_empty", "idle_after_reply", "interrupted_idle"] {
        let a = analyze(&read(name));
        assert!(a.ready(), "{name}: {a:?}");
    }
    let draft = analyze(&read("draft"));
    assert_eq!(
        draft.input.as_deref(),
        Some("a human draft that is not sent yet")
    );
    assert!(!draft.busy && !draft.ready());
    let spinner = read("busy_spinner");
    assert!(spinner.lines().any(is_spinner), "{spinner}");
    for name in ["busy_spinner", "busy_streaming"] {
        let a = analyze(&read(name));
        assert!(a.busy && !a.ready(), "{name}: {a:?}");
    }
    let queued = analyze(&read("queued_while_busy"));
    assert!(queued.busy && queued.queued, "{queued:?}");
    let dialog = analyze(&read("permission_dialog"));
    assert!(dialog.dialog && dialog.input.is_none(), "{dialog:?}");
    let restored = analyze(&read("escape_restored_prompt"));
    assert_eq!(restored.input.as_deref(), Some("restore me after escape"));
    assert!(!restored.busy);
    assert!(
        read("idle_empty").contains("❯\u{a0}"),
        "the fixtures keep the no-break space"
    );
}

impl Tui {
    /// Pastes and submits while a turn runs (the box shows the text first, then queues it).
    fn submit_queued(&self, text: &str) {
        self.paste(text);
        self.wait_screen("the pasted text while busy", |s| {
            analyze(s)
                .input
                .is_some_and(|input| input.contains(text))
                .then_some(())
        });
        self.keys(&["Enter"]);
    }
}

#[test]
fn claude_smoke_side_requests_do_not_consume_steps() {
    // The title request comes once per session, with a prompt long enough to name; it must be
    // answered from the side, leaving the scripted step for the main request.
    let mock = MockMessages::start();
    mock.push(Step::text("Main answer, not a title."));
    let tui = Tui::start(mock);
    tui.submit("Please write a function that parses ISO dates in Rust");
    tui.wait_text("Main answer, not a title.");
    tui.wait_ready("the box after the reply");
    if pinned_version(&CLAUDE) == CLAUDE.oldest {
        let titles = tui.mock.wait_for_requests_of(RequestKind::Title, 1, WAIT);
        assert_eq!(titles[0].tool_count(), 0);
        let (_, lines) = tui.wait_transcript("the ai-title", |line| line["type"] == "ai-title");
        assert!(
            lines.iter().any(|l| l["aiTitle"] == "Mock title"),
            "the title lands in the transcript"
        );
    } else {
        // Newer releases send no session-title request (seen on 2.1.332); nothing may wait for
        // one. Should it come back, this says so.
        std::thread::sleep(Duration::from_secs(2));
        assert!(
            tui.mock.requests_of(RequestKind::Title).is_empty(),
            "a title request came back: {}",
            tui.mock.summary()
        );
    }
    let main = tui.mock.main_requests();
    assert_eq!(main.len(), 1, "{}", tui.mock.summary());
    assert_eq!(main[0].step, Some(0));
}

/// POSTs `body` to the mock's `/v1/messages` and returns the answer.
fn post_messages(mock: &MockMessages, body: &Value) -> Resp {
    let port = mock.addr().port();
    raw_request(
        port,
        &format!(
            "POST /v1/messages?beta=true HTTP/1.1\nHost: 127.0.0.1:{port}\nContent-Type: application/json"
        ),
        body.to_string().as_bytes(),
    )
}

/// The `data:` payloads of an SSE body, in order.
fn sse_events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("SSE data is JSON"))
        .collect()
}

/// The mock on its own, without the CLI: both answer shapes, side requests, errors, extra routes.
#[test]
fn claude_smoke_mock_speaks_the_messages_api() {
    let mock = MockMessages::start();
    let main_body = |text: &str, stream: bool| {
        json!({
            "model": "claude-opus-4-8",
            "stream": stream,
            "tools": [{ "name": "Bash", "input_schema": { "type": "object" } }],
            "messages": [{ "role": "user", "content": [
                { "type": "text", "text": "<system-reminder>\ncontext\n</system-reminder>" },
                { "type": "text", "text": text },
            ] }],
        })
    };

    // A streamed text answer, split into word deltas.
    mock.push(Step::text("Hello there, streamer."));
    let resp = post_messages(&mock, &main_body("first", true));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.content_type.as_deref(), Some("text/event-stream"));
    let events = sse_events(&resp.body);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"message_start"));
    assert_eq!(&kinds[kinds.len() - 2..], ["message_delta", "message_stop"]);
    let text: String = events
        .iter()
        .filter(|e| e["delta"]["type"] == "text_delta")
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Hello there, streamer.");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["delta"]["type"] == "text_delta")
            .count(),
        3
    );
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");

    // A streamed tool_use: input_json_delta chunks that join into the input.
    let input = json!({ "command": "touch x", "description": "Create a file named x" });
    mock.push(Step::tool_use("Bash", input.clone()));
    let events = sse_events(&post_messages(&mock, &main_body("second", true)).body);
    let start = events
        .iter()
        .find(|e| e["type"] == "content_block_start")
        .unwrap();
    assert_eq!(start["content_block"]["type"], "tool_use");
    assert_eq!(start["content_block"]["name"], "Bash");
    let json_text: String = events
        .iter()
        .filter(|e| e["delta"]["type"] == "input_json_delta")
        .filter_map(|e| e["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&json_text).unwrap(), input);
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");

    // Non-streamed: one JSON message; an empty queue answers "ok".
    let message = post_messages(&mock, &main_body("third", false)).json();
    assert_eq!(message["type"], "message");
    assert_eq!(message["content"][0]["text"], "ok");
    assert_eq!(message["stop_reason"], "end_turn");
    mock.push(Step::text("Planning.").then_tool_use("Bash", input.clone()));
    let message = post_messages(&mock, &main_body("fourth", false)).json();
    assert_eq!(message["content"][1]["input"], input);
    assert_eq!(message["stop_reason"], "tool_use");

    // Side requests leave the queue alone.
    mock.push(Step::text("for the main request").when_user_contains("fifth"));
    let title = json!({
        "model": "claude-opus-4-8", "stream": false, "tools": [],
        "output_config": { "format": { "type": "json_schema", "schema": {
            "type": "object", "properties": { "title": { "type": "string" } } } } },
        "messages": [{ "role": "user", "content": "<session>\nfifth\n</session>" }],
    });
    let answer = post_messages(&mock, &title).json();
    let text = answer["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap()["title"],
        "Mock title"
    );
    let mut subagent = main_body("fifth", false);
    subagent["system"] = json!([{ "type": "text",
        "text": "x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli; cc_is_subagent=true;" }]);
    let answer = post_messages(&mock, &subagent).json();
    assert_eq!(answer["content"][0]["text"], "Mock subagent report.");
    let compact = main_body(
        "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools. fifth",
        false,
    );
    let answer = post_messages(&mock, &compact).json();
    assert!(
        answer["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("<summary>")
    );
    assert_eq!(mock.pending_steps(), 1, "{}", mock.summary());
    let answer = post_messages(&mock, &main_body("fifth", false)).json();
    assert_eq!(answer["content"][0]["text"], "for the main request");
    let kinds: Vec<RequestKind> = mock.received().iter().map(|r| r.kind).collect();
    use RequestKind::*;
    assert_eq!(
        kinds,
        [Main, Main, Main, Main, Title, Subagent, Compaction, Main]
    );
    assert_eq!(mock.main_requests()[0].last_user_text(), "first");
    assert_eq!(mock.defaulted(), 1);

    // Scripted HTTP errors use the Anthropic error shape.
    mock.push(Step::http_status(529, "mock is overloaded"));
    let resp = post_messages(&mock, &main_body("sixth", true));
    assert_eq!(resp.status, 529);
    assert_eq!(resp.json()["error"]["type"], "overloaded_error");
    assert_eq!(resp.json()["error"]["message"], "mock is overloaded");

    // count_tokens, models, and a 404 for anything else.
    let port = mock.addr().port();
    let tokens = raw_request(
        port,
        "POST /v1/messages/count_tokens HTTP/1.1\nHost: x\nContent-Type: application/json",
        main_body("x", false).to_string().as_bytes(),
    );
    assert!(tokens.json()["input_tokens"].as_u64().unwrap() > 0);
    let models = raw_request(port, "GET /v1/models HTTP/1.1\nHost: x", b"").json();
    assert_eq!(models["data"][0]["type"], "model");
    let missing = raw_request(port, "GET /v1/nope HTTP/1.1\nHost: x", b"");
    assert_eq!(missing.status, 404);
    assert_eq!(mock.not_found(), ["GET /v1/nope"]);

    // A hung stream notices the client hanging up.
    mock.push(Step::hang());
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = main_body("seventh", true).to_string();
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    stream.set_read_timeout(Some(WAIT)).unwrap();
    while !String::from_utf8_lossy(&seen).contains("message_start") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the hung stream closed early");
        seen.extend_from_slice(&buf[..n]);
    }
    assert_eq!(mock.disconnects(), 0);
    drop(stream);
    mock.wait_for_disconnects(1, WAIT);
    assert!(mock.received().last().unwrap().disconnected);
}

#[test]
fn claude_smoke_skip_permissions_runs_tools_without_a_dialog() {
    let started = Instant::now();
    let mock = MockMessages::start();
    mock.push(Step::tool_use(
        "Bash",
        json!({ "command": "touch skipped.txt", "description": "Create skipped.txt" }),
    ));
    mock.push(Step::text("Made it without asking.").when_tool_result());
    let tui = Tui::start_with(
        mock,
        &["--dangerously-skip-permissions"],
        ClaudeEnv::allow_dangerous_skip_permissions,
    );
    tui.submit("Create skipped.txt");
    tui.wait_text("Made it without asking.");
    let screen = tui.wait_ready("the box after the tool turn");
    assert!(tui.env.workdir().join("skipped.txt").exists());
    assert!(!screen.contains("Do you want to proceed?"));
    assert!(screen.contains("bypass permissions on"), "{screen}");
    eprintln!("skip permissions: {:?}", started.elapsed());
}

/// A hook command for the observation tests: appends its event (and the event name) to
/// `hooks.log` in `dir`, and prints `answer.<Event>.<tool>` from `dir` once if it exists.
fn answering_hooks(dir: &Path) -> PathBuf {
    let script = dir.join("hook.sh");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
dir='{dir}'
input=$(cat)
printf '%s\t%s\n' "$1" "$input" >> "$dir/hooks.log"
tool=other
for t in AskUserQuestion ExitPlanMode EnterPlanMode; do
  case "$input" in *"\"tool_name\":\"$t\""*) tool=$t;; esac
done
for answer in "$dir/answer.$1.$tool".*; do
  case "$answer" in *.used) continue;; esac
  if [ -f "$answer" ]; then cat "$answer"; mv "$answer" "$answer.used"; break; fi
done
exit 0
"#,
            dir = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hook = |event: &str| json!([{ "matcher": "*", "hooks": [{ "type": "command", "command": format!("{} {event}", script.display()) }] }]);
    let settings = dir.join("settings.json");
    std::fs::write(
        &settings,
        json!({ "hooks": {
            "PreToolUse": hook("PreToolUse"),
            "PermissionRequest": hook("PermissionRequest"),
            "PostToolUse": hook("PostToolUse"),
            "UserPromptSubmit": hook("UserPromptSubmit"),
        }})
        .to_string(),
    )
    .unwrap();
    settings
}

fn hook_log(dir: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(dir.join("hooks.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(event, json)| {
            (
                event.to_string(),
                serde_json::from_str(json).unwrap_or(Value::Null),
            )
        })
        .collect()
}

#[test]
fn claude_smoke_ask_user_question_is_answered_by_a_permission_request_hook() {
    let dir = temp_dir("cohost-claude-asks-");
    let settings = answering_hooks(dir.path());
    let questions = json!([{
        "question": "Which color?",
        "header": "Color",
        "options": [
            { "label": "Red", "description": "warm" },
            { "label": "Blue", "description": "cold" }
        ],
        "multiSelect": false
    }]);
    std::fs::write(
        dir.path()
            .join("answer.PermissionRequest.AskUserQuestion.1"),
        json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": {
            "behavior": "allow",
            "updatedInput": { "questions": questions, "answers": { "Which color?": "Blue" } }
        }}})
        .to_string(),
    )
    .unwrap();
    let mock = MockMessages::start();
    mock.push(Step::tool_use(
        "AskUserQuestion",
        json!({ "questions": questions }),
    ));
    mock.push(Step::text("Blue it is.").when_tool_result());
    let tui = Tui::start_with(
        mock,
        &[
            "--permission-mode",
            "default",
            "--settings",
            settings.to_str().unwrap(),
        ],
        |_| {},
    );
    tui.submit("Pick a color");
    tui.wait_text("Blue it is.");
    let main = tui.mock.main_requests();
    let results = main.last().unwrap().tool_results();
    assert_eq!(
        results[0]["content"],
        "Your questions have been answered: \"Which color?\"=\"Blue\". You can now continue with these answers in mind.",
        "{results:#?}"
    );
    let log = hook_log(dir.path());
    let request = log
        .iter()
        .find(|(event, _)| event == "PermissionRequest")
        .map(|(_, payload)| payload)
        .unwrap_or_else(|| panic!("no PermissionRequest: {log:#?}"));
    assert_eq!(request["tool_name"], "AskUserQuestion");
    assert_eq!(request["tool_input"]["questions"], questions);
    assert!(
        request.get("tool_use_id").is_none(),
        "PermissionRequest names no tool_use_id: {request}"
    );
}

#[test]
fn claude_smoke_exit_plan_mode_takes_a_hook_denial_and_an_approval_by_release() {
    let dir = temp_dir("cohost-claude-plan-");
    let settings = answering_hooks(dir.path());
    std::fs::write(
        dir.path().join("answer.PermissionRequest.ExitPlanMode.1"),
        json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": {
            "behavior": "deny", "message": "Use plan B instead"
        }}})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("answer.PermissionRequest.ExitPlanMode.2"),
        json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": {
            "behavior": "allow",
            "updatedPermissions": [{ "type": "setMode", "mode": "acceptEdits", "destination": "session" }]
        }}})
        .to_string(),
    )
    .unwrap();
    let mock = MockMessages::start();
    mock.push(Step::tool_use(
        "ExitPlanMode",
        json!({ "plan": "# Plan A\n1. Do A" }),
    ));
    mock.push(
        Step::tool_use("ExitPlanMode", json!({ "plan": "# Plan B\n1. Do B" })).when_tool_result(),
    );
    mock.push(Step::text("Plan B approved.").when_tool_result());
    let tui = Tui::start_with(
        mock,
        &[
            "--permission-mode",
            "plan",
            "--settings",
            settings.to_str().unwrap(),
        ],
        |_| {},
    );
    tui.submit("Plan something");
    let d = dir.path().to_path_buf();
    tui.wait_until("both ExitPlanMode hooks", || {
        d.join("answer.PermissionRequest.ExitPlanMode.2.used")
            .exists()
    });
    let log = hook_log(dir.path());
    let requests: Vec<&Value> = log
        .iter()
        .filter(|(event, _)| event == "PermissionRequest")
        .map(|(_, payload)| payload)
        .collect();
    assert!(
        requests.iter().all(|r| r["permission_mode"] == "plan"),
        "{requests:#?}"
    );
    if pinned_version(&CLAUDE) == CLAUDE.oldest {
        // 2.1.197 takes the plan in the input and the hook's allow (and its mode change).
        assert_eq!(requests[0]["tool_input"]["plan"], "# Plan A\n1. Do A");
        tui.wait_text("Plan B approved.");
        tui.wait_text("accept edits on");
        let results: Vec<Value> = tui
            .mock
            .main_requests()
            .iter()
            .flat_map(|r| r.tool_results())
            .collect();
        assert!(
            results[1]["content"]
                .as_str()
                .unwrap_or("")
                .starts_with("User has approved your plan."),
            "{results:#?}"
        );
    } else {
        // 2.1.332 sends `{}` (its plan is a file) and asks in its own dialog despite the allow.
        assert_eq!(requests[0]["tool_input"], json!({}));
        let screen = tui.wait_text("Exit plan mode?");
        assert!(screen.contains("1. Yes"), "{screen}");
    }
    let first = tui.mock.main_requests()[1].tool_results();
    assert_eq!(first[0]["content"], "Use plan B instead", "{first:#?}");
    assert_eq!(first[0]["is_error"], true);
}
