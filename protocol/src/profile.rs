//! Agent profiles: the effective values a session started from (recorded in `session.created`,
//! shown in the session's view) and the profiles the daemon holds (`GET /api/profiles`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the views show instead of a secret (an MCP server's `env` or `headers` value, a
/// profile's `env` value): the name is shown, the value never leaves the daemon.
pub const REDACTED: &str = "(redacted)";

/// An MCP server a profile gives its sessions: a stdio program (`command`, `args`, `env`) or a
/// streamable-HTTP endpoint (`url`, `headers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

impl McpServer {
    /// The server with its `env` and `headers` values replaced by [`REDACTED`].
    pub fn redacted(&self) -> McpServer {
        McpServer {
            env: redact(&self.env),
            headers: redact(&self.headers),
            ..self.clone()
        }
    }
}

fn redact(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    map.keys()
        .map(|key| (key.clone(), REDACTED.to_string()))
        .collect()
}

/// `session.created`'s `profile`: the profile a session started from and the effective values
/// it adds to the session's own settings (`model`, `approvalPolicy`, `permissionMode`,
/// `sandbox`, `cwd` are the session's fields). Fork and relaunch start from these, so a profile
/// edited later changes only the sessions started after.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionProfile {
    /// The profile's name (`[profiles.NAME]`).
    pub name: String,
    /// The reasoning effort (codex `model_reasoning_effort`, claude `--effort`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// Instructions added to the agent's own (codex developer instructions, claude
    /// `--append-system-prompt-file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// Environment of the agent's process (claude).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Where each effective value came from, by setting (`model`, `mcp_servers.NAME`,
    /// `env.NAME`, …): `profile NAME` (the profile in the `extends` chain that set it) or
    /// `request` (the create request's override).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, String>,
}

impl SessionProfile {
    /// The profile as views show it: secrets ([`McpServer::redacted`], `env` values) redacted.
    pub fn redacted(&self) -> SessionProfile {
        SessionProfile {
            mcp_servers: self
                .mcp_servers
                .iter()
                .map(|(name, server)| (name.clone(), server.redacted()))
                .collect(),
            env: redact(&self.env),
            ..self.clone()
        }
    }
}

/// One effective value of a profile and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileValue {
    /// The setting (`model`, `mcp_servers.NAME`, `env.NAME`, …), as the config file names it.
    pub key: String,
    /// Its effective value (secrets redacted).
    pub value: serde_json::Value,
    /// The profile of the `extends` chain that set it.
    pub from: String,
}

/// A profile the daemon holds, resolved through its `extends` chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileView {
    pub name: String,
    /// The chain, this profile first, then its parent, and so on.
    pub chain: Vec<String>,
    pub values: Vec<ProfileValue>,
}

/// `GET /api/profiles`: the profiles of the daemon's config file, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileList {
    /// The config file they were read from, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub profiles: Vec<ProfileView>,
}
