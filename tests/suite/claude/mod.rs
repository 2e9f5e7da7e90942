//! Claude Code sessions in tmux: smoke, the host, their lifecycle, questions and plans, the watcher of Claude run by hand, adopting such a Claude (relaying its approvals; over MCP too; rehoming it under cohost), and the machine-wide hook (`cohost hooks`).

pub(crate) mod adopt;
pub(crate) mod adopt_approvals;
pub(crate) mod adopt_mcp;
pub(crate) mod asks;
pub(crate) mod hooks;
pub(crate) mod host;
pub(crate) mod lifecycle;
pub(crate) mod rehome;
pub(crate) mod smoke;
pub(crate) mod watch;
