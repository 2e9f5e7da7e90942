//! The room commands, parsed from a message's text: what each room takes, and the usage a bad
//! one answers with (a bad command changes nothing).

/// Which kind of room a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    Control,
    Session,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    /// Control room.
    Sessions,
    Start {
        target: String,
        prompt: Option<String>,
    },
    State,
    /// Session room: a prompt (a plain message, or `/send`).
    Send(String),
    Steer(String),
    Queue(String),
    Interrupt,
    Approve {
        number: u32,
        for_session: bool,
    },
    Decline(u32),
    Answer {
        number: Option<u32>,
        text: String,
    },
    Takeover,
    Release {
        drop_queued: bool,
    },
    Model(String),
    /// Forwarded to `POST /api/sessions/{id}/command` as written: `/models`, `/fork`,
    /// `/goal …`, `/plan on|off`.
    Forward(String),
}

pub const CONTROL_USAGE: &str =
    "Commands here: /sessions · /start RUNTIME|PROFILE [prompt] · /state · /help";
pub const SESSION_USAGE: &str = "Commands here: a plain message is a prompt · /send TEXT · /steer TEXT · /queue TEXT · /interrupt · /approve N [session] · /decline N · /answer [N] TEXT · /takeover · /release [drop] · /model NAME · /models · /fork · /goal [clear|OBJECTIVE] · /plan on|off · /help";

/// Parses `text` sent in a room of kind `room`; `Err` is the usage to answer with.
pub fn parse(text: &str, room: Room) -> Result<Command, String> {
    let text = text.trim();
    let Some(rest) = text.strip_prefix('/') else {
        return match room {
            Room::Session if !text.is_empty() => Ok(Command::Send(text.to_string())),
            Room::Session => Err(SESSION_USAGE.into()),
            Room::Control => Err(format!(
                "Plain messages are prompts in a session's room, not here. {CONTROL_USAGE}"
            )),
        };
    };
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let usage = |what: &str| Err(format!("usage: {what}"));
    let number = |s: &str| {
        s.trim_start_matches('#')
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
    };
    match (room, name) {
        (_, "help") => Ok(Command::Help),
        (Room::Control, "sessions") if args.is_empty() => Ok(Command::Sessions),
        (Room::Control, "sessions") => usage("/sessions"),
        (Room::Control, "state") if args.is_empty() => Ok(Command::State),
        (Room::Control, "state") => usage("/state"),
        (Room::Control, "start") => {
            let (target, prompt) = match args.split_once(char::is_whitespace) {
                Some((t, p)) => (t, Some(p.trim().to_string()).filter(|p| !p.is_empty())),
                None => (args, None),
            };
            // An empty or unknown target answers the usage with the runtimes and profiles
            // there are (`start::request`).
            Ok(Command::Start {
                target: target.to_string(),
                prompt,
            })
        }
        (Room::Session, "send" | "steer" | "queue") if args.is_empty() => {
            usage(&format!("/{name} TEXT"))
        }
        (Room::Session, "send") => Ok(Command::Send(args.into())),
        (Room::Session, "steer") => Ok(Command::Steer(args.into())),
        (Room::Session, "queue") => Ok(Command::Queue(args.into())),
        (Room::Session, "interrupt") if args.is_empty() => Ok(Command::Interrupt),
        (Room::Session, "approve") => {
            let mut words = args.split_whitespace();
            match (words.next().and_then(number), words.next(), words.next()) {
                (Some(n), None, None) => Ok(Command::Approve {
                    number: n,
                    for_session: false,
                }),
                (Some(n), Some("session"), None) => Ok(Command::Approve {
                    number: n,
                    for_session: true,
                }),
                _ => usage("/approve N [session]  (N: the approval's number)"),
            }
        }
        (Room::Session, "decline") => match number(args) {
            Some(n) => Ok(Command::Decline(n)),
            None => usage("/decline N  (N: the approval's number)"),
        },
        (Room::Session, "answer") => {
            let (first, after) = match args.split_once(char::is_whitespace) {
                Some((f, a)) => (f, a.trim()),
                None => (args, ""),
            };
            match number(first) {
                Some(n) if !after.is_empty() => Ok(Command::Answer {
                    number: Some(n),
                    text: after.into(),
                }),
                _ if !args.is_empty() && number(first).is_none() => Ok(Command::Answer {
                    number: None,
                    text: args.into(),
                }),
                _ => usage(
                    "/answer [N] TEXT  (N: the question's number; TEXT: an option's number or words)",
                ),
            }
        }
        (Room::Session, "takeover") if args.is_empty() => Ok(Command::Takeover),
        (Room::Session, "release") if args.is_empty() => {
            Ok(Command::Release { drop_queued: false })
        }
        (Room::Session, "release") if args == "drop" => Ok(Command::Release { drop_queued: true }),
        (Room::Session, "release") => usage("/release [drop]"),
        (Room::Session, "model") if !args.is_empty() && !args.contains(char::is_whitespace) => {
            Ok(Command::Model(args.into()))
        }
        (Room::Session, "model") => usage("/model NAME  (/models lists them)"),
        (Room::Session, "models" | "fork") if args.is_empty() => {
            Ok(Command::Forward(format!("/{name}")))
        }
        (Room::Session, "goal") => Ok(Command::Forward(text.to_string())),
        (Room::Session, "plan") if args == "on" || args == "off" => {
            Ok(Command::Forward(text.to_string()))
        }
        (Room::Session, "plan") => usage("/plan on|off"),
        (Room::Session, "interrupt" | "takeover" | "models" | "fork") => usage(&format!("/{name}")),
        (Room::Control, _) => Err(format!("unknown command `/{name}` here. {CONTROL_USAGE}")),
        (Room::Session, _) => Err(format!("unknown command `/{name}` here. {SESSION_USAGE}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_commands_parse_and_bad_ones_answer_usage() {
        use Command::*;
        let ok = [
            ("/sessions", Room::Control, Sessions),
            ("/state", Room::Control, State),
            (
                "/start codex Fix it now",
                Room::Control,
                Start {
                    target: "codex".into(),
                    prompt: Some("Fix it now".into()),
                },
            ),
            ("hello there", Room::Session, Send("hello there".into())),
            ("/steer faster", Room::Session, Steer("faster".into())),
            (
                "/approve 2",
                Room::Session,
                Approve {
                    number: 2,
                    for_session: false,
                },
            ),
            (
                "/approve #3 session",
                Room::Session,
                Approve {
                    number: 3,
                    for_session: true,
                },
            ),
            ("/decline 1", Room::Session, Decline(1)),
            (
                "/answer 4 2",
                Room::Session,
                Answer {
                    number: Some(4),
                    text: "2".into(),
                },
            ),
            (
                "/answer Blue",
                Room::Session,
                Answer {
                    number: None,
                    text: "Blue".into(),
                },
            ),
            (
                "/release drop",
                Room::Session,
                Release { drop_queued: true },
            ),
            ("/goal clear", Room::Session, Forward("/goal clear".into())),
            ("/plan on", Room::Session, Forward("/plan on".into())),
            ("/help", Room::Control, Help),
            (
                "/start",
                Room::Control,
                Start {
                    target: String::new(),
                    prompt: None,
                },
            ),
        ];
        for (text, room, want) in ok {
            assert_eq!(parse(text, room), Ok(want), "{text}");
        }
        for (text, room, says) in [
            ("/approve", Room::Session, "usage: /approve"),
            ("/approve x", Room::Session, "usage: /approve"),
            ("/decline 0", Room::Session, "usage: /decline"),
            ("/send", Room::Session, "usage: /send"),
            ("/plan maybe", Room::Session, "usage: /plan"),
            ("/model a b", Room::Session, "usage: /model"),
            (
                "/frobnicate",
                Room::Session,
                "unknown command `/frobnicate`",
            ),
            (
                "/approve 1",
                Room::Control,
                "unknown command `/approve` here",
            ),
            (
                "/start codex",
                Room::Session,
                "unknown command `/start` here",
            ),
            ("hello", Room::Control, "Plain messages are prompts"),
        ] {
            let err = parse(text, room).err().unwrap_or_default();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
