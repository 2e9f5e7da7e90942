//! cohost-hook: the command Claude Code runs for every hook event cohost registers
//! (`cohost-hook <EventName>`, the event's JSON on stdin). It owns the process flow: record the
//! event as one line of `$COHOST_SESSION_DIR/hooks.jsonl`, for `PermissionRequest` relay the
//! question to the daemon and print Claude's decision, and for `PreToolUse` under a permission
//! mode the daemon does not allow, answer `ask`. As `cohost-hook --home <home> <EventName>` it
//! is the machine-wide hook of `cohost hooks install` instead ([`installed`]). It must never
//! fail Claude or change what Claude does by accident: every error is one line on stderr and
//! exit status 0, and nothing is printed on stdout (the hook protocol) except a decision the
//! daemon actually made.

#![deny(clippy::print_stdout, clippy::print_stderr)]

use cohost_protocol::boundary;
// The hook uses the transport only (not the file name or the CLI's error mapping).
mod installed;
#[allow(dead_code)]
#[path = "../../src/local_socket.rs"]
mod local_socket;
mod mode;
mod permission;
mod record;

use std::io::Write;

/// The event whose hook waits for the daemon and may answer on stdout.
pub(crate) const PERMISSION_EVENT: &str = "PermissionRequest";

fn main() {
    // A panic must not turn into a non-zero status: Claude treats exit 2 as "block".
    let _ = std::panic::catch_unwind(run);
    std::process::exit(0);
}

fn run() {
    let mut args = std::env::args().skip(1);
    let argv_event = args.next();
    if argv_event.as_deref() == Some("--home") {
        let home = args.next();
        installed::run(home.as_deref(), args.next(), warn);
        return;
    }
    let input = record::read_stdin(std::io::stdin().lock());
    let payload = record::payload_of(input);
    let event = match argv_event {
        Some(event) => event,
        None => {
            warn("no event name in argv (usage: cohost-hook <EventName>)");
            payload
                .get("hook_event_name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("unknown")
                .to_string()
        }
    };
    let request_id = (event == PERMISSION_EVENT).then(record::random_hex_id);

    let line = record::Line {
        received_at: record::now_ms(),
        event: event.clone(),
        request_id: request_id.clone(),
        payload,
    };
    let payload = &line.payload;
    match std::env::var_os("COHOST_SESSION_DIR") {
        Some(dir) if !dir.is_empty() => {
            let path = std::path::Path::new(&dir).join("hooks.jsonl");
            if let Err(error) = record::append_line(&path, &line) {
                warn(&format!("cannot append to {}: {error}", path.display()));
            }
        }
        _ => warn("COHOST_SESSION_DIR is not set; the event is not recorded"),
    }

    if event == "PreToolUse"
        && let Some(out) = mode::pre_tool_use(
            payload,
            std::env::var("COHOST_PERMISSION_MODES").ok().as_deref(),
        )
    {
        print_line(&out);
    }

    if let Some(request_id) = request_id {
        match permission::ask_daemon(&request_id, payload) {
            Ok(Some(decision)) => print_line(&permission::hook_output(&decision)),
            // The daemon said "ask": Claude shows its own dialog.
            Ok(None) => {}
            Err(error) => warn(&format!(
                "permission relay failed, Claude will ask in the TUI: {error}"
            )),
        }
    }
}

/// One line of hook output on stdout.
pub(crate) fn print_line(out: &str) {
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush())
    {
        warn(&format!("cannot print the hook's answer: {error}"));
    }
}

/// One line on stderr; a closed stderr is ignored (eprintln! would panic).
fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "cohost-hook: {message}");
}
