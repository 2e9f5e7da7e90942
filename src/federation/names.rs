//! The names federation puts on the wire, in one place: the machine name, the stream, the
//! subjects, the de-duplication ids and the KV bucket. Pure.
//!
//! - stream `COHOST_<machine>`, subjects `cohost.ev.<machine>` (events of no session) and
//!   `cohost.ev.<machine>.<session>` (a session's events; the session id percent-encoded where it
//!   holds a byte a subject token may not: anything but letters, digits, `-` and `_`);
//! - `Nats-Msg-Id` `<machine>:<home id>:<seq>`: the same event always has the same id, so a re-sent
//!   event is dropped by the stream's duplicate window, and an event of another home (a home made
//!   anew under the same machine name) never passes for one of this home;
//! - KV bucket `cohost_machines`, key `<machine>`: the machine's current view.

/// The longest machine name.
pub const MAX_MACHINE: usize = 64;

/// The KV bucket holding each machine's current view, keyed by machine name.
pub const KV_BUCKET: &str = "cohost_machines";

/// Why `name` is not a machine name, if it is not: 1 to 64 letters, digits, `-` or `_` (a NATS
/// subject token, a stream name's part and a KV key all at once).
pub fn check_machine(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a machine name cannot be empty".to_string());
    }
    if name.len() > MAX_MACHINE {
        return Err(format!(
            "the machine name `{name}` is longer than {MAX_MACHINE} characters"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "the machine name `{name}` holds `{bad}`: use letters, digits, `-` and `_` only"
        ));
    }
    Ok(())
}

/// The default machine name: the host name's first label, with any character a machine name
/// may not hold replaced by `-` (`localhost` when there is none).
pub fn default_machine(host_name: &str) -> String {
    let label = host_name.trim().split('.').next().unwrap_or("");
    let name: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_MACHINE)
        .collect();
    if name.is_empty() {
        "localhost".to_string()
    } else {
        name
    }
}

/// This host's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

/// The machine's JetStream stream.
pub fn stream_name(machine: &str) -> String {
    format!("COHOST_{machine}")
}

/// The stream's subjects: the machine's events of no session, and of each session.
pub fn stream_subjects(machine: &str) -> Vec<String> {
    vec![
        format!("cohost.ev.{machine}"),
        format!("cohost.ev.{machine}.>"),
    ]
}

/// The subject of an event of `session` (or of none).
pub fn subject(machine: &str, session: Option<&str>) -> String {
    match session {
        Some(session) => format!("cohost.ev.{machine}.{}", session_token(session)),
        None => format!("cohost.ev.{machine}"),
    }
}

/// A session id as one subject token: letters, digits, `-` and `_` as they are, every other byte
/// as `%XX` (so `.`, `*`, `>` and blanks never split or widen a subject).
pub fn session_token(session: &str) -> String {
    let mut token = String::with_capacity(session.len());
    for byte in session.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            token.push(char::from(byte));
        } else {
            token.push_str(&format!("%{byte:02X}"));
        }
    }
    if token.is_empty() {
        token.push('%');
    }
    token
}

/// The subject a machine takes commands on from a hub (`serve --nats-commands`).
pub fn command_subject(machine: &str) -> String {
    format!("cohost.cmd.{machine}")
}

/// The `Nats-Msg-Id` of the event `seq` of this home.
pub fn msg_id(machine: &str, home_id: &str, seq: u64) -> String {
    format!("{machine}:{home_id}:{seq}")
}

/// The seq a `Nats-Msg-Id` names, when it is one of this machine's and home's.
pub fn seq_of_msg_id(id: &str, machine: &str, home_id: &str) -> Option<u64> {
    let rest = id.strip_prefix(machine)?.strip_prefix(':')?;
    let rest = rest.strip_prefix(home_id)?.strip_prefix(':')?;
    rest.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_names_are_subject_tokens() {
        assert!(check_machine("laptop").is_ok());
        assert!(check_machine("ci_runner-2").is_ok());
        for bad in ["", "a.b", "a b", "a*", "a>", "é", &"x".repeat(65)] {
            assert!(check_machine(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(default_machine("dev1.example.com\n"), "dev1");
        assert_eq!(default_machine("my box"), "my-box");
        assert_eq!(default_machine(""), "localhost");
        assert!(check_machine(&default_machine(&"h".repeat(200))).is_ok());
    }

    #[test]
    fn subjects_and_ids() {
        assert_eq!(subject("laptop", None), "cohost.ev.laptop");
        assert_eq!(
            subject("laptop", Some("cs_0a1b")),
            "cohost.ev.laptop.cs_0a1b"
        );
        assert_eq!(session_token("my.proj >x"), "my%2Eproj%20%3Ex");
        assert_eq!(session_token(""), "%");
        assert_eq!(stream_name("laptop"), "COHOST_laptop");
        let id = msg_id("laptop", "0123abcd", 42);
        assert_eq!(id, "laptop:0123abcd:42");
        assert_eq!(seq_of_msg_id(&id, "laptop", "0123abcd"), Some(42));
        assert_eq!(seq_of_msg_id(&id, "laptop", "ffff"), None);
        assert_eq!(seq_of_msg_id(&id, "lap", "0123abcd"), None);
    }
}
