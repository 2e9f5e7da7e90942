//! The permission-mode guard of `PreToolUse`: when Claude reports a permission mode the daemon
//! does not allow for the session (`$COHOST_PERMISSION_MODES`, a comma-separated list) — a human
//! cycled to `auto` with shift+tab, or Claude started in it despite `--permission-mode` — the hook
//! answers `ask`, so the tool call goes through Claude's permission prompt (and so through
//! cohost's `PermissionRequest` relay) instead of running unseen. In an allowed mode, or when the
//! variable or the payload's `permission_mode` is missing, it prints nothing and Claude decides
//! as usual.

use serde::Serialize;
use serde_json::Value;

#[derive(Serialize)]
struct Output<'a> {
    #[serde(rename = "hookSpecificOutput")]
    hook_specific_output: Specific<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Specific<'a> {
    hook_event_name: &'static str,
    permission_decision: &'static str,
    permission_decision_reason: &'a str,
}

/// Claude's stdout for a `PreToolUse` payload under `allowed` modes, or `None` to stay silent.
pub fn pre_tool_use(payload: &Value, allowed: Option<&str>) -> Option<String> {
    let allowed = allowed.filter(|a| !a.trim().is_empty())?;
    let mode = payload.get("permission_mode")?.as_str()?;
    if allowed.split(',').any(|m| m.trim() == mode) {
        return None;
    }
    let reason = format!(
        "cohost: permission mode `{mode}` is not allowed for this session (allowed: {allowed}); asking instead"
    );
    serde_json::to_string(&Output {
        hook_specific_output: Specific {
            hook_event_name: "PreToolUse",
            permission_decision: "ask",
            permission_decision_reason: &reason,
        },
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALLOWED: Option<&str> = Some("default,acceptEdits,plan");

    #[test]
    fn asks_only_under_a_mode_that_is_not_allowed() {
        let payload = |mode: &str| json!({"hook_event_name":"PreToolUse","permission_mode":mode,"tool_name":"Bash"});
        for mode in ["default", "acceptEdits", "plan"] {
            assert_eq!(pre_tool_use(&payload(mode), ALLOWED), None, "{mode}");
        }
        let out = pre_tool_use(&payload("auto"), ALLOWED).unwrap();
        let out: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(out["hookSpecificOutput"]["hookEventName"], "PreToolUse");
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "ask");
        assert!(
            out["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .contains("`auto`")
        );
        assert!(pre_tool_use(&payload("bypassPermissions"), ALLOWED).is_some());
        assert_eq!(
            pre_tool_use(&payload("auto"), Some("default,auto")),
            None,
            "the owner allowed it"
        );
        // Nothing to go by: Claude decides.
        assert_eq!(pre_tool_use(&payload("auto"), None), None);
        assert_eq!(pre_tool_use(&json!({"tool_name":"Bash"}), ALLOWED), None);
    }
}
