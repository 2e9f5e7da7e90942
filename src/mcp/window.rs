//! The `events` tool's reads beyond a forward page: a window of one session read backwards
//! (`last`, `before`), and, at a hub, another machine's session (its machine's seqs, the answer
//! naming `machine` and `link`).

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::args::EventsArgs;
use super::tools::{DEFAULT_EVENTS, MAX_EVENTS, failed, to_value};
use super::{CohostMcp, bound, failure};
use crate::protocol::codes;

/// The `events` answer for a window read backwards (`last`, `before`).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct LoggedWindow {
    events: Vec<Value>,
    next: u64,
    head: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    gaps: Vec<crate::protocol::SeqRange>,
    has_older: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    older_before: Option<u64>,
}

impl CohostMcp {
    /// `events` with `last` or `before`: a window of one session's events read backwards. A
    /// window cut to fit keeps its oldest events; `next` then is the last one kept.
    pub(super) async fn window(&self, args: EventsArgs) -> CallToolResult {
        let Some(session) = args.session_id else {
            return failure(
                codes::INVALID_FIELD,
                "`last` and `before` read one session's events: give `session_id`",
            );
        };
        let conflict = if args.after.is_some() {
            Some("after")
        } else if args.wait_seconds.is_some() {
            Some("wait_seconds")
        } else if args.last.is_some() && args.before.is_some() {
            Some("before")
        } else if args.last.is_some() && args.limit.is_some() {
            Some("limit")
        } else {
            None
        };
        if let Some(name) = conflict {
            return failure(
                codes::INVALID_FIELD,
                &format!(
                    "`{name}` does not go with this read: `last=N` alone, or `before` with `limit`"
                ),
            );
        }
        let (name, count) = match args.last {
            Some(last) => ("last", last),
            None => ("limit", args.limit.unwrap_or(DEFAULT_EVENTS as u64)),
        };
        if count == 0 || count > MAX_EVENTS as u64 {
            return failure(
                codes::INVALID_FIELD,
                &format!("`{name}` must be between 1 and {MAX_EVENTS}"),
            );
        }
        // On a hub, `laptop/<id>` names another machine's session: its seqs are the cursor.
        let remote = self
            .service
            .remote_id(&session)
            .map(|(machine, id)| (machine.to_string(), id.to_string()));
        let session = self.service.local_id(&session).to_string();
        let head = match &remote {
            Some((machine, _)) => self.service.remote_head(machine),
            None => self.service.head(),
        };
        if let Some(before) = args.before
            && (before == 0 || before > head + 1)
        {
            return failure(
                codes::INVALID_FIELD,
                &format!(
                    "`before` must be between 1 and {} (the newest event + 1)",
                    head + 1
                ),
            );
        }
        let (answer, machine) = match &remote {
            Some((machine, id)) => {
                let page = match self
                    .service
                    .remote_window(machine, id, args.before, count as usize)
                    .await
                {
                    Ok(page) => page,
                    Err(error) => return failed(error),
                };
                let answer = LoggedWindow {
                    events: remote_values(&page),
                    next: page.next,
                    head: page.head,
                    gaps: Vec::new(),
                    has_older: page.older_before.is_some(),
                    older_before: page.older_before,
                };
                (answer, Some((page.machine, page.link)))
            }
            None => {
                let window = match self
                    .service
                    .read_window(&session, args.before, count as usize)
                    .await
                {
                    Ok(window) => window,
                    Err(error) => return failed(error),
                };
                let answer = LoggedWindow {
                    events: window
                        .events
                        .iter()
                        .filter_map(|e| serde_json::from_str(&e.json).ok())
                        .collect(),
                    next: window.next,
                    head: window.head,
                    gaps: window.gaps,
                    has_older: window.older_before.is_some(),
                    older_before: window.older_before,
                };
                (answer, None)
            }
        };
        let total = answer.events.len();
        let window_next = answer.next;
        let mut gaps = answer.gaps.clone();
        let bounded = match bound(to_value(answer), Some("events")) {
            Ok(bounded) => bounded,
            Err(failure) => return failure,
        };
        let mut value = bounded.value;
        with_machine(&mut value, machine);
        if bounded.kept < total {
            let next = value["events"]
                .as_array()
                .and_then(|kept| kept.last())
                .and_then(|last| last.get("seq"))
                .and_then(Value::as_u64)
                .unwrap_or(window_next);
            value["next"] = json!(next);
            gaps.retain(|gap| gap.from <= next);
            for gap in &mut gaps {
                gap.to = gap.to.min(next);
            }
            if gaps.is_empty() {
                if let Some(object) = value.as_object_mut() {
                    object.remove("gaps");
                }
            } else {
                value["gaps"] = json!(gaps);
            }
            value["note"] = json!(format!(
                "only {} of {total} events fit; read the rest with after={next}",
                bounded.kept
            ));
        }
        CallToolResult::structured(value)
    }
}

/// Another machine's events as that machine published them (each parses: its daemon wrote it).
pub(super) fn remote_values(page: &crate::service::RemotePage) -> Vec<Value> {
    page.events
        .iter()
        .filter_map(|e| serde_json::from_str(&e.json).ok())
        .collect()
}

/// An `events` answer about another machine's session names the machine and its link.
pub(super) fn with_machine(
    value: &mut Value,
    machine: Option<(String, crate::protocol::MachineLinkState)>,
) {
    if let (Some((machine, link)), Some(object)) = (machine, value.as_object_mut()) {
        object.insert("machine".to_string(), json!(machine));
        object.insert("link".to_string(), json!(link));
    }
}
