//! Tasks and leases over HTTP and the CLI, on codex sessions.
