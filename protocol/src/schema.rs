//! The schema drift test: the JSON Schema of every type the contract names, generated from the
//! types themselves, must equal `docs/protocol.schema.json`. A renamed, removed or retyped field
//! fails here until the file is regenerated on purpose (and `docs/api.md` follows):
//!
//! ```text
//! COHOST_BLESS_SCHEMA=1 cargo test -p cohost-protocol schema
//! ```

use serde_json::{Map, Value};

use super::boundary::{HookAnswer, HookLine, Launch, PermissionAnswer, PermissionAsk, RunnerEvent};
use super::*;

const FIXTURE: &str = "../docs/protocol.schema.json";

/// Each root of the contract: what clients send and get, the events, and the files and
/// requests exchanged with the pane programs.
fn contract() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut roots = Map::new();
    let mut root = |name: &str, schema: schemars::Schema| {
        roots.insert(name.to_string(), schema.to_value());
    };
    macro_rules! roots {
        ($($ty:ty),* $(,)?) => {
            $(root(stringify!($ty), generator.subschema_for::<$ty>());)*
        };
    }
    roots!(
        // Events, as logged and streamed.
        Event,
        // HTTP (and MCP) bodies.
        AgentEventParams,
        SetStatusParams,
        SetProgressParams,
        LogParams,
        SessionParams,
        Accepted,
        StateView,
        EventsPage,
        EventsWindow,
        RemoteEventsPage,
        RemoteCommand,
        RemoteReply,
        ErrorBody,
        Health,
        HostedSessionView,
        InputAnswer,
        PromptImage,
        TaskView,
        QueueView,
        ResultChunk,
        SendResult,
        ExplainView,
        WatchedView,
        WatchStats,
        // Hosted sessions, approvals, requests, tasks and leases (HTTP and MCP).
        CreateBody,
        ProfileList,
        MessageBody,
        DecisionBody,
        GoalBody,
        ForkBody,
        CommandBody,
        OpenTerminalBody,
        SendBody,
        LeaseBody,
        CancelBody,
        EditBody,
        ModeBody,
        ModelBody,
        FocusParams,
        Done,
        CreatedReply,
        SessionList,
        SessionPage,
        SessionReply,
        SessionStarted,
        ForkReply,
        PromptSent,
        Interrupted,
        Seen,
        Capability,
        ApprovalList,
        ApprovalDecided,
        RequestList,
        RequestAnswered,
        LeaseReply,
        TaskReply,
        TaskWaited,
        CancelResult,
        EditResult,
        TerminalSpec,
        DoctorReport,
        RuntimeList,
        // What the daemon leaves in its home for clients.
        DaemonFile,
        // The pane programs' files and requests.
        Launch,
        RunnerEvent,
        HookLine,
        HookAnswer,
        PermissionAsk,
        PermissionAnswer,
    );
    let definitions: Map<String, Value> = generator.take_definitions(true);
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "cohost protocol",
        "roots": roots,
        "$defs": definitions,
    })
}

/// Every object schema's property names, as `Type.field`, for a readable failure.
fn fields(schema: &Value) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    fn walk(path: &str, value: &Value, out: &mut std::collections::BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    for name in props.keys() {
                        out.insert(format!("{path}.{name}"));
                    }
                }
                for (key, child) in map {
                    walk(&format!("{path}/{key}"), child, out);
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    walk(&format!("{path}/{index}"), child, out);
                }
            }
            _ => {}
        }
    }
    walk("", schema, &mut out);
    out
}

#[test]
fn the_contract_matches_its_schema_file() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let generated = contract();
    let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
    if std::env::var_os("COHOST_BLESS_SCHEMA").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    if stored == text {
        return;
    }
    let stored: Value = serde_json::from_str(&stored).unwrap_or(Value::Null);
    let (old, new) = (fields(&stored), fields(&generated));
    let gone: Vec<_> = old.difference(&new).collect();
    let added: Vec<_> = new.difference(&old).collect();
    panic!(
        "the protocol's types no longer match {FIXTURE}.\nfields gone: {gone:#?}\nfields new: {added:#?}\n\
         If the change is meant, update docs/api.md and regenerate the file:\n  COHOST_BLESS_SCHEMA=1 cargo test -p cohost-protocol schema"
    );
}
