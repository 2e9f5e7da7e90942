//! What both directions of the bridge share: the homeserver, cohost's client, the persisted
//! state, the messages streaming now, and posting: every message the bridge posts has a
//! transaction id derived from what it is (a session, an item, an approval, a command's event),
//! so posting it again after a restart is the same message, never a second one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::config::MatrixConfig;
use crate::homeserver::{CallError, Homeserver};
use crate::state::State;

/// An agent message streaming into one Matrix message, edited in place.
pub struct Stream {
    pub room: String,
    pub event_id: String,
    pub text: String,
    pub dirty: bool,
    pub last_edit: Instant,
}

pub struct Bridge {
    pub config: MatrixConfig,
    pub hs: Homeserver,
    pub bot: String,
    pub daemon: cohost::client::Client,
    pub control_room: String,
    state: Mutex<State>,
    state_path: PathBuf,
    /// Item key (`session/item`) → its streaming message.
    pub streams: Mutex<HashMap<String, Stream>>,
    /// Held while a session's room is looked up or created.
    room_lock: Mutex<()>,
    /// No intermediate edit before this instant (a 429's `retry_after_ms`).
    pub edits_not_before: Mutex<Instant>,
}

/// Locks a mutex, taking it over from a thread that panicked while holding it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A message's content: `m.text` notifies the room's people (a live notification), `m.notice`
/// does not (everything else, and anything posted while catching up).
/// Markdown in `body` is rendered as HTML too (`formatted_body`, [`crate::markdown`]).
pub fn content(body: &str, notify: bool) -> Value {
    let body = cohost::redact::redact(body);
    let mut content = json!({"msgtype": if notify { "m.text" } else { "m.notice" }, "body": body});
    if let Some(html) = crate::markdown::to_html(&body) {
        content["format"] = json!("org.matrix.custom.html");
        content["formatted_body"] = json!(html);
    }
    content
}

/// An edit (`m.replace`) of `target` to `body`.
pub fn edit_content(target: &str, body: &str, notify: bool) -> Value {
    let new = content(body, notify);
    let shown = format!("* {}", new["body"].as_str().unwrap_or(""));
    let mut edit = json!({
        "msgtype": new["msgtype"],
        "body": shown,
        "m.relates_to": {"rel_type": "m.replace", "event_id": target},
    });
    // The fallback a client without edits shows, formatted as the new content is.
    if let Some(html) = new["formatted_body"].as_str() {
        edit["format"] = json!("org.matrix.custom.html");
        edit["formatted_body"] = json!(format!("* {html}"));
    }
    edit["m.new_content"] = new;
    edit
}

impl Bridge {
    pub fn new(
        config: MatrixConfig,
        hs: Homeserver,
        bot: String,
        daemon: cohost::client::Client,
        control_room: String,
        state: State,
        state_path: PathBuf,
    ) -> Bridge {
        Bridge {
            config,
            hs,
            bot,
            daemon,
            control_room,
            state: Mutex::new(state),
            state_path,
            streams: Mutex::new(HashMap::new()),
            room_lock: Mutex::new(()),
            edits_not_before: Mutex::new(Instant::now()),
        }
    }

    /// Runs `f` on the state and saves it (fsync'd) before answering.
    pub fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = lock(&self.state);
        let out = f(&mut state);
        if let Err(e) = state.save(&self.state_path) {
            tracing::error!("cannot save the bridge's state: {e:#}");
        }
        out
    }

    /// Reads the state.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&lock(&self.state))
    }

    /// Posts `body` in `room` as the message named `txn`; answers its event id.
    pub fn post(&self, room: &str, txn: &str, body: &str, notify: bool) -> anyhow::Result<String> {
        self.hs.send(room, txn, &content(body, notify))
    }

    /// Posts `body` in reply to the event `to` (a command's answer).
    pub fn reply(&self, room: &str, to: &str, body: &str) -> anyhow::Result<String> {
        let mut c = content(body, false);
        c["m.relates_to"] = json!({"m.in_reply_to": {"event_id": to}});
        self.hs.send(room, &format!("r.{to}"), &c)
    }

    /// Edits `target` to `body`, as the edit named `txn` (retried until it lands).
    pub fn edit(
        &self,
        room: &str,
        target: &str,
        txn: &str,
        body: &str,
        notify: bool,
    ) -> anyhow::Result<()> {
        self.hs
            .send(room, txn, &edit_content(target, body, notify))?;
        Ok(())
    }

    /// One throttled edit of a streaming message; a refusal (rate limit) only delays the next.
    pub fn try_edit(&self, stream: &mut Stream, txn: &str) {
        let now = Instant::now();
        if now < *lock(&self.edits_not_before) {
            return;
        }
        let body = format!("{} …", stream.text);
        match self.hs.send_once(
            &stream.room,
            txn,
            &edit_content(&stream.event_id, &body, false),
        ) {
            Ok(_) => {
                stream.dirty = false;
                stream.last_edit = now;
            }
            Err(CallError::Matrix(e)) if e.status == 429 => {
                let wait = Duration::from_millis(e.retry_after_ms.unwrap_or(2000));
                *lock(&self.edits_not_before) = now + wait;
            }
            Err(e) => tracing::warn!("editing a streaming message: {e}"),
        }
    }

    /// The room of `session`, if it has one.
    pub fn room_of(&self, session: &str) -> Option<String> {
        self.read(|s| s.rooms.get(session).cloned())
    }

    /// The room of `session`, created (private, the allowed users invited, aliased
    /// `#PREFIX-SESSION:server` so a creation a restart cut short is found, not repeated) when
    /// it has none; answers (room id, created now).
    pub fn ensure_room(&self, session: &str, about: &str) -> anyhow::Result<(String, bool)> {
        let _guard = lock(&self.room_lock);
        if let Some(room) = self.room_of(session) {
            return Ok((room, false));
        }
        let alias: String = format!("{}-{session}", self.config.room_prefix)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        let room = self.hs.create_room(
            &alias,
            self.config.server_name(),
            &format!("cohost: {session}"),
            about,
            &self.config.allowed_users,
        )?;
        self.update(|s| s.rooms.insert(session.to_string(), room.clone()));
        Ok((room, true))
    }
}
