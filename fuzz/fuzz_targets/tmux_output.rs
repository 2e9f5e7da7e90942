//! What cohost parses from tmux: `list-sessions` output (`parse_list_sessions`), a new pane's
//! `#{pane_id} #{pane_pid}` (`parse_pane_ref`), and a `capture-pane` of Claude's TUI
//! (`claude::screen::analyze`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let list = cohost::tmux::parse_list_sessions(&text);
    assert!(
        list.sessions
            .windows(2)
            .all(|pair| pair[0].name <= pair[1].name)
    );
    if let Some(pane) = cohost::tmux::parse_pane_ref(&text) {
        assert!(pane.pane_id.starts_with('%'));
    }
    let screen = cohost::runtime::claude::screen::analyze(&text);
    let _ = (screen.ready(), screen.has_draft());
});
