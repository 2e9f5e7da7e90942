//! The open vocabularies of the contract: string fields whose values a runtime may add to, or an
//! older cohost wrote and a log still holds. Each is an [`open_enum!`]: the values cohost knows
//! as variants, any other kept verbatim, the JSON the same plain string either way.

use super::open_enum::open_enum;

open_enum! {
    /// An answer to an approval (`approval.requested`'s `decisions`, `approval.resolved`'s
    /// `decision`).
    pub enum ApprovalDecision {
        /// Run it, this once.
        Accept = "accept",
        /// Run it, and do not ask again for the like in this session.
        AcceptForSession = "acceptForSession",
        /// Do not run it; the turn goes on.
        Decline = "decline",
        /// Do not run it, and interrupt the turn.
        Cancel = "cancel",
    }
}

impl ApprovalDecision {
    /// The decisions cohost relays, in the order it offers them.
    pub const RELAYED: [ApprovalDecision; 4] = [
        ApprovalDecision::Accept,
        ApprovalDecision::AcceptForSession,
        ApprovalDecision::Decline,
        ApprovalDecision::Cancel,
    ];
}

open_enum! {
    /// What an approval asks for (`approval.requested`'s `kind`).
    pub enum ApprovalKind {
        /// A shell command (codex, Claude's `Bash`).
        Command = "command",
        /// A patch (codex).
        FileChange = "fileChange",
        /// Any other Claude tool.
        Tool = "tool",
    }
}

open_enum! {
    /// Who resolved an approval or an input request (`by`). A surface answering through cohost
    /// may name itself instead (`web`, a bot's name): that name is kept as `Other`.
    pub enum ResolvedBy {
        /// A surface (HTTP, MCP, CLI, web page) through cohost.
        Api = "api",
        /// The runtime: another client answered, or it withdrew the request (an interrupt).
        Runtime = "runtime",
        /// The turn that asked ended (or, for a plan, the next turn started) without an answer.
        Turn = "turn",
    }
}

open_enum! {
    /// codex's approval policy (`approvalPolicy`). Claude sessions created before
    /// `permissionMode` existed kept their permission mode here.
    pub enum ApprovalPolicy {
        Untrusted = "untrusted",
        OnRequest = "on-request",
        Never = "never",
    }
}

open_enum! {
    /// codex's sandbox mode (`sandbox`).
    pub enum Sandbox {
        ReadOnly = "read-only",
        WorkspaceWrite = "workspace-write",
        DangerFullAccess = "danger-full-access",
    }
}

open_enum! {
    /// A Claude permission mode (`permissionMode`).
    pub enum PermissionMode {
        Default = "default",
        AcceptEdits = "acceptEdits",
        Plan = "plan",
        Auto = "auto",
        DontAsk = "dontAsk",
        BypassPermissions = "bypassPermissions",
    }
}

open_enum! {
    /// What a streamed piece of text belongs to (`item.delta`'s `kind`).
    pub enum DeltaKind {
        AgentMessage = "agentMessage",
        Reasoning = "reasoning",
        CommandOutput = "commandOutput",
        /// A plan streaming in (codex plan mode).
        Plan = "plan",
    }
}

open_enum! {
    /// What a patch does to a file (`fileChange` item's `changes[].kind`).
    pub enum FileChangeKind {
        Add = "add",
        Delete = "delete",
        Update = "update",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value cohost ever wrote reads back as itself, known or not.
    fn check<T>(values: &[&str])
    where
        T: serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        for value in values {
            let json = serde_json::Value::from(*value);
            let read: T = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(serde_json::to_value(&read).unwrap(), json, "{read:?}");
        }
    }

    #[test]
    fn every_value_written_reads_back_unchanged() {
        check::<ApprovalDecision>(&["accept", "acceptForSession", "decline", "cancel"]);
        check::<ApprovalKind>(&["command", "fileChange", "tool", "userInput", "other"]);
        check::<ResolvedBy>(&["api", "runtime", "turn", "web", "ci-bot"]);
        // Old claude sessions: their permission mode in `approvalPolicy`.
        check::<ApprovalPolicy>(&["untrusted", "on-request", "never", "on-failure", "plan"]);
        check::<Sandbox>(&["read-only", "workspace-write", "danger-full-access"]);
        check::<PermissionMode>(&["default", "acceptEdits", "plan", "auto", "dontAsk"]);
        check::<DeltaKind>(&["agentMessage", "reasoning", "commandOutput", "plan"]);
        check::<FileChangeKind>(&["add", "delete", "update", "rename"]);
    }

    #[test]
    fn known_values_read_as_their_variants() {
        assert_eq!(
            ApprovalDecision::from("acceptForSession"),
            ApprovalDecision::AcceptForSession
        );
        assert_eq!(ResolvedBy::from("web"), ResolvedBy::Other("web".into()));
        assert_eq!(
            ApprovalPolicy::from("on-request"),
            ApprovalPolicy::OnRequest
        );
        assert_eq!(
            PermissionMode::from("bypassPermissions"),
            PermissionMode::BypassPermissions
        );
        assert_eq!(ApprovalDecision::KNOWN, ApprovalDecision::RELAYED);
    }
}
