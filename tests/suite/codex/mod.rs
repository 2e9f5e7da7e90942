//! codex app-server sessions: smoke, the host, approvals, capabilities, recovery, the HTTP surface, questions, co-driving, the watcher of codex run by hand, adopting a codex TUI started by hand (and its approvals, read from its screen), and rehoming it under cohost's app-server.

pub(crate) mod adopt;
pub(crate) mod adopt_approvals;
pub(crate) mod approvals;
pub(crate) mod asks;
pub(crate) mod capabilities;
pub(crate) mod codrive;
pub(crate) mod host;
pub(crate) mod recovery;
pub(crate) mod rehome;
pub(crate) mod smoke;
pub(crate) mod surface;
pub(crate) mod watch;
