//! The stable error codes: the `code` of every `{"error": {"code", "message"}}` answer over HTTP
//! and of every MCP tool failure, named once. Clients match on these strings, so each is part of
//! the contract; every one of them is listed in `docs/api.md` (a unit test holds the two to each
//! other).

// The request itself (HTTP extractors and the guard).

/// The body is not JSON, or has trailing data.
pub const INVALID_JSON: &str = "invalid_json";
/// The body is JSON but not an object.
pub const INVALID_BODY: &str = "invalid_body";
/// A required field is absent.
pub const MISSING_FIELD: &str = "missing_field";
/// A field has the wrong type, an unknown value, or is out of bounds.
pub const INVALID_FIELD: &str = "invalid_field";
/// A query string that does not parse.
pub const INVALID_QUERY: &str = "invalid_query";
/// The request is wrong in a way no field names.
pub const INVALID_REQUEST: &str = "invalid_request";
/// The config file read again (`POST /api/profiles/reload`) did not validate: nothing changed.
pub const INVALID_CONFIG: &str = "invalid_config";
/// `Host`, `Origin` or `Authorization` given more than once.
pub const DUPLICATE_HEADER: &str = "duplicate_header";
/// No or wrong bearer token.
pub const UNAUTHORIZED: &str = "unauthorized";
/// A `403` the daemon did not answer itself.
pub const FORBIDDEN: &str = "forbidden";
pub const FORBIDDEN_HOST: &str = "forbidden_host";
pub const FORBIDDEN_ORIGIN: &str = "forbidden_origin";
/// No such route.
pub const NOT_FOUND: &str = "not_found";
/// OAuth discovery: cohost has no OAuth server, only its token.
pub const NO_OAUTH: &str = "no_oauth";
pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
pub const NOT_ACCEPTABLE: &str = "not_acceptable";
pub const REQUEST_TIMEOUT: &str = "request_timeout";
pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";
/// Past `--max-connections`; sent on the new connection, which is then closed.
pub const TOO_MANY_CONNECTIONS: &str = "too_many_connections";

// Error answers the HTTP framework made (not JSON), rewritten by status.

/// A `409` the daemon did not answer itself.
pub const CONFLICT: &str = "conflict";
/// A `429` the daemon did not answer itself.
pub const TOO_MANY_REQUESTS: &str = "too_many_requests";
/// A `503` the daemon did not answer itself.
pub const UNAVAILABLE: &str = "unavailable";
/// A `5xx` the daemon did not answer itself.
pub const INTERNAL_ERROR: &str = "internal_error";
/// Any other error status the daemon did not answer itself.
pub const REQUEST_FAILED: &str = "request_failed";

// The core: storage and bounds.

pub const OVERLOADED: &str = "overloaded";
pub const SHUTTING_DOWN: &str = "shutting_down";
pub const TOO_MANY_INSTANCES: &str = "too_many_instances";
/// The event repeats a turn, item or approval already stored.
pub const DUPLICATE: &str = "duplicate";
/// The event log could not be written or read.
pub const STORAGE_ERROR: &str = "storage_error";
/// The cursor is older than the oldest retained event.
pub const CURSOR_EXPIRED: &str = "cursor_expired";
/// MCP: an answer that does not fit the answer bound even with its strings cut and its list
/// emptied (a cut answer must still have its declared shape, so none is sent).
pub const ANSWER_TOO_LARGE: &str = "answer_too_large";

// The tracker.

/// No live tmux session matches (also: no hosted session of that id).
pub const SESSION_NOT_FOUND: &str = "session_not_found";
/// The session has no such agent instance.
pub const INSTANCE_NOT_FOUND: &str = "instance_not_found";
/// A hub (`serve --hub`) knows no machine of that name (`/api/sessions/{machine}/{id}/…`).
pub const MACHINE_NOT_FOUND: &str = "machine_not_found";
/// A command to another machine got no answer in time, or the machine takes no commands.
pub const MACHINE_UNREACHABLE: &str = "machine_unreachable";

// Hosted sessions.

pub const SESSION_CLOSED: &str = "session_closed";
/// A direct message to a session that does not exist or is closed.
pub const NOT_LIVE: &str = "not_live";
pub const NOT_READY: &str = "not_ready";
/// A direct message the runtime refused, or whose backend is gone.
pub const FAILED: &str = "failed";
/// The runtime cannot do this at all, or the daemon hosts no session of that runtime.
pub const UNSUPPORTED: &str = "unsupported";
pub const HUMAN_TYPING: &str = "human_typing";
pub const HUMAN_CONTROL: &str = "human_control";
/// A start outside the allowed project roots.
pub const PERMISSION_DENIED: &str = "permission_denied";
pub const IDEMPOTENCY_KEY_IN_USE: &str = "idempotency_key_in_use";
pub const APPROVAL_NOT_FOUND: &str = "approval_not_found";
pub const APPROVAL_RESOLVED: &str = "approval_resolved";
pub const REQUEST_NOT_FOUND: &str = "request_not_found";
pub const REQUEST_RESOLVED: &str = "request_resolved";
/// `/answer` or `/plan` with no pending request to answer.
pub const NO_PENDING_REQUEST: &str = "no_pending_request";
/// The runtime's program is not installed or did not start (`Runtime::unavailable_code`).
pub const CODEX_UNAVAILABLE: &str = "codex_unavailable";
pub const CLAUDE_UNAVAILABLE: &str = "claude_unavailable";
pub const OPENCODE_UNAVAILABLE: &str = "opencode_unavailable";
pub const PI_UNAVAILABLE: &str = "pi_unavailable";
/// The runtime answered with an error, or its process failed us (`Runtime::error_code`).
pub const CODEX_ERROR: &str = "codex_error";
pub const CLAUDE_ERROR: &str = "claude_error";
pub const OPENCODE_ERROR: &str = "opencode_error";
pub const PI_ERROR: &str = "pi_error";

// Adopting an agent a person started by hand (and giving it back).

/// The instance's tmux pane is gone.
pub const PANE_GONE: &str = "pane_gone";
/// The agent's process exited (its pane may show a shell now).
pub const AGENT_EXITED: &str = "agent_exited";
/// The pane no longer runs the agent the watcher placed there (another process owns it).
pub const PANE_CHANGED: &str = "pane_changed";
/// A cohost session already drives the instance (it is hosted or adopted).
pub const ALREADY_DRIVEN: &str = "already_driven";
/// The instance cannot be adopted: not in a pane, no process known, reported over the API.
pub const NOT_ADOPTABLE: &str = "not_adoptable";
/// `disown` of a session cohost started itself (only an adopted one can be given back).
pub const NOT_ADOPTED: &str = "not_adopted";
/// `rehome` of an adopted agent that runs a turn (or shows a dialog): it is never stopped
/// mid-turn; ask again when it is idle.
pub const BUSY: &str = "busy";
/// An answer typed as a key into an adopted TUI's prompt (an adopted codex's approval) when the
/// screen is not exactly the prompt cohost knows for that release: nothing was typed; answer
/// in the pane.
pub const SCREEN_MISMATCH: &str = "screen_mismatch";

// Tasks.

pub const TASK_NOT_FOUND: &str = "task_not_found";
pub const REVISION_CONFLICT: &str = "revision_conflict";
pub const NOT_WAITING: &str = "not_waiting";
pub const EDIT_LIMIT: &str = "edit_limit";
pub const QUEUE_FULL: &str = "queue_full";

/// Every code above, for the test that holds them to `docs/api.md`.
pub const ALL: &[&str] = &[
    INVALID_JSON,
    INVALID_BODY,
    MISSING_FIELD,
    INVALID_FIELD,
    INVALID_QUERY,
    INVALID_REQUEST,
    INVALID_CONFIG,
    DUPLICATE_HEADER,
    UNAUTHORIZED,
    FORBIDDEN,
    FORBIDDEN_HOST,
    FORBIDDEN_ORIGIN,
    NOT_FOUND,
    NO_OAUTH,
    METHOD_NOT_ALLOWED,
    NOT_ACCEPTABLE,
    REQUEST_TIMEOUT,
    PAYLOAD_TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    TOO_MANY_CONNECTIONS,
    CONFLICT,
    TOO_MANY_REQUESTS,
    UNAVAILABLE,
    INTERNAL_ERROR,
    REQUEST_FAILED,
    OVERLOADED,
    SHUTTING_DOWN,
    TOO_MANY_INSTANCES,
    DUPLICATE,
    STORAGE_ERROR,
    CURSOR_EXPIRED,
    ANSWER_TOO_LARGE,
    SESSION_NOT_FOUND,
    INSTANCE_NOT_FOUND,
    MACHINE_NOT_FOUND,
    MACHINE_UNREACHABLE,
    SESSION_CLOSED,
    NOT_LIVE,
    NOT_READY,
    FAILED,
    UNSUPPORTED,
    HUMAN_TYPING,
    HUMAN_CONTROL,
    PERMISSION_DENIED,
    IDEMPOTENCY_KEY_IN_USE,
    APPROVAL_NOT_FOUND,
    APPROVAL_RESOLVED,
    REQUEST_NOT_FOUND,
    REQUEST_RESOLVED,
    NO_PENDING_REQUEST,
    CODEX_UNAVAILABLE,
    CLAUDE_UNAVAILABLE,
    OPENCODE_UNAVAILABLE,
    PI_UNAVAILABLE,
    CODEX_ERROR,
    CLAUDE_ERROR,
    OPENCODE_ERROR,
    PI_ERROR,
    PANE_GONE,
    AGENT_EXITED,
    PANE_CHANGED,
    ALREADY_DRIVEN,
    NOT_ADOPTABLE,
    NOT_ADOPTED,
    BUSY,
    SCREEN_MISMATCH,
    TASK_NOT_FOUND,
    REVISION_CONFLICT,
    NOT_WAITING,
    EDIT_LIMIT,
    QUEUE_FULL,
];

#[cfg(test)]
mod tests {
    use super::ALL;

    /// Each code is documented: `docs/api.md` names it as code (`queue_full`, `404 no_oauth`).
    #[test]
    fn every_error_code_is_in_the_api_docs() {
        let docs = include_str!("../../docs/api.md");
        let in_code: Vec<&str> = docs
            .split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|span| span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
            .collect();
        let missing: Vec<&str> = ALL
            .iter()
            .copied()
            .filter(|code| !in_code.contains(code))
            .collect();
        assert!(missing.is_empty(), "not in docs/api.md: {missing:?}");
    }

    #[test]
    fn error_codes_are_distinct() {
        let mut codes = ALL.to_vec();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ALL.len());
    }
}
