//! Reads one session's messages and parts from OpenCode's SQLite database (the file the
//! OpenCode watcher follows), in the shape `GET /session/:id/message` answers, so that
//! `normalize::history` — the one place that turns OpenCode's messages into cohost's events —
//! serves an adopted TUI too: a turn is named by its prompt's message id and each item by its
//! part id, the ids OpenCode keeps, so reading the session again yields the same events.
//!
//! The rows' `data` holds a message's or part's JSON without its ids (those are the row's
//! columns); they are put back before the row is read with the `wire` types. A row whose
//! `data` is not a JSON object is skipped and logged: a bad row is data, not a failure.
//! Read-only: it never writes the database.

use rusqlite::Connection;
use serde_json::Value;

use crate::runtime::opencode::wire::{MessageInfo, MessageWithParts, Part};

/// `data` with the row's ids put back, read as `T`; `None` (logged) when it is not an object.
fn with_ids<T: serde::de::DeserializeOwned>(data: &str, ids: &[(&str, &str)]) -> Option<T> {
    let mut value: Value = match serde_json::from_str(data) {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!(?ids, "opencode database row is not JSON: {e}");
            return None;
        }
    };
    let Some(object) = value.as_object_mut() else {
        tracing::warn!(?ids, "opencode database row is not a JSON object");
        return None;
    };
    for (key, id) in ids {
        object.insert((*key).to_string(), Value::String((*id).to_string()));
    }
    match serde_json::from_value(value) {
        Ok(read) => Some(read),
        Err(e) => {
            tracing::warn!(?ids, "opencode database row cannot be read: {e}");
            None
        }
    }
}

/// Session `session_id`'s messages in OpenCode's order (created, then id), each with its
/// parts in id order (OpenCode's ids ascend).
pub fn session_messages(
    db: &Connection,
    session_id: &str,
) -> rusqlite::Result<Vec<MessageWithParts>> {
    let mut parts_of = std::collections::HashMap::<String, Vec<Part>>::new();
    let mut statement = db.prepare(
        "SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id",
    )?;
    let rows = statement.query_map([session_id], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
        ))
    })?;
    for row in rows {
        let (id, message_id, data) = row?;
        let ids = [
            ("id", id.as_str()),
            ("sessionID", session_id),
            ("messageID", message_id.as_str()),
        ];
        if let Some(part) = with_ids::<Part>(&data, &ids) {
            parts_of.entry(message_id).or_default().push(part);
        }
    }
    let mut statement =
        db.prepare("SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")?;
    let rows = statement.query_map([session_id], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })?;
    let mut messages = Vec::new();
    for row in rows {
        let (id, data) = row?;
        let ids = [("id", id.as_str()), ("sessionID", session_id)];
        if let Some(info) = with_ids::<MessageInfo>(&data, &ids) {
            let parts = parts_of.remove(&id).unwrap_or_default();
            messages.push(MessageWithParts { info, parts });
        }
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{EventKind, Item, TurnStatus};
    use crate::runtime::opencode::normalize;

    /// The rows OpenCode 1.18.33 wrote for a TUI prompt interrupted by Escape twice while the
    /// reply streamed, as JSON lines (`tbl`, `id`, `parent`, `time_created`, `data`).
    fn recorded() -> Connection {
        let path = format!(
            "{}/tests/fixtures/opencode/adopt/interrupted-turn.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch(
            "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, \
               time_created integer NOT NULL, data text NOT NULL);
             CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, \
               session_id text NOT NULL, time_created integer NOT NULL, data text NOT NULL);",
        )
        .unwrap();
        let session = "ses_dbee89954ffe1kvG9Fdv5NdA8B";
        for line in text.lines() {
            let row: Value = serde_json::from_str(line).unwrap();
            let (id, parent, created, data) = (
                row["id"].as_str().unwrap(),
                row["parent"].as_str().unwrap(),
                row["time_created"].as_i64().unwrap(),
                row["data"].as_str().unwrap(),
            );
            match row["tbl"].as_str().unwrap() {
                "message" => db
                    .execute(
                        "INSERT INTO message VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![id, parent, created, data],
                    )
                    .unwrap(),
                _ => db
                    .execute(
                        "INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?5)",
                        rusqlite::params![id, parent, session, created, data],
                    )
                    .unwrap(),
            };
        }
        db
    }

    #[test]
    fn an_interrupted_tui_turn_reads_as_the_hosted_history_does() {
        let db = recorded();
        let messages = session_messages(&db, "ses_dbee89954ffe1kvG9Fdv5NdA8B").unwrap();
        assert_eq!(messages.len(), 2);
        let events = normalize::history(&messages);
        let turn = "msg_241176810001JnVMIj88LBQTm9";
        let [
            EventKind::TurnStarted(started),
            EventKind::ItemCompleted(prompt),
            EventKind::ItemCompleted(reply),
            EventKind::TurnCompleted(completed),
        ] = events.as_slice()
        else {
            panic!("{events:#?}");
        };
        assert_eq!(started.turn_id, turn);
        assert_eq!(
            prompt.item,
            Item::UserMessage {
                id: "prt_24117681e001JLGzNYGMLZkh5P".into(),
                text: "Tell me a long story\nplease".into()
            }
        );
        assert_eq!(
            reply.item,
            Item::AgentMessage {
                id: "prt_24117728f001iLA66Uict9KjPw".into(),
                text: "Once upon a time\n".into(),
                interrupted: true
            }
        );
        assert_eq!(
            (completed.turn_id.as_str(), completed.status),
            (turn, TurnStatus::Interrupted)
        );
        // Read again, the same events: nothing new to store.
        let again = normalize::history(&session_of(&db));
        assert_eq!(again, events);
        // Another session's rows are not this one's.
        assert!(session_messages(&db, "ses_other").unwrap().is_empty());
    }

    fn session_of(db: &Connection) -> Vec<MessageWithParts> {
        session_messages(db, "ses_dbee89954ffe1kvG9Fdv5NdA8B").unwrap()
    }

    #[test]
    fn a_row_that_is_not_a_json_object_is_skipped() {
        let db = recorded();
        db.execute(
            "UPDATE part SET data = '[1]' WHERE id = 'prt_24117728f001iLA66Uict9KjPw'",
            [],
        )
        .unwrap();
        let messages = session_of(&db);
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[1].parts.len(), 1, "{:?}", messages[1].parts);
    }
}
