//! The Claude permission modes a daemon lets its sessions run in.
//!
//! Claude Code 2.1.332 made "auto" its default mode: tools it judges safe run with no
//! `PermissionRequest` and no dialog, so nothing reaches cohost's approval relay. cohost therefore
//! launches every session with an explicit mode, and only the modes in which Claude asks before
//! anything that needs permission are open to every session.

use anyhow::bail;

/// Which Claude permission modes a session may run in. `default`, `acceptEdits` and `plan` always
/// (Claude asks before anything that needs permission, and cohost relays the question); `auto`
/// and `bypassPermissions` let tools run without asking, so only when the daemon's owner named
/// them (`--allow-permission-mode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionPolicy {
    allowed: Vec<&'static str>,
}

impl PermissionPolicy {
    /// The modes every session may use.
    pub const SAFE: [&'static str; 3] = ["default", "acceptEdits", "plan"];
    /// The modes that skip approvals, allowed only when named.
    pub const UNGUARDED: [&'static str; 2] = ["auto", "bypassPermissions"];
    /// The mode a session runs in when its request names none.
    pub const DEFAULT: &'static str = "default";

    pub fn allowing(extra: &[String]) -> anyhow::Result<Self> {
        let mut allowed: Vec<&'static str> = Self::SAFE.to_vec();
        for mode in extra.iter().map(|m| m.trim()).filter(|m| !m.is_empty()) {
            let Some(known) = Self::SAFE
                .iter()
                .chain(Self::UNGUARDED.iter())
                .find(|known| **known == mode)
            else {
                bail!(
                    "--allow-permission-mode `{mode}` is not a Claude permission mode (one of: {})",
                    Self::UNGUARDED.join(", ")
                );
            };
            if !allowed.contains(known) {
                allowed.push(known);
            }
        }
        Ok(PermissionPolicy { allowed })
    }

    pub fn allows(&self, mode: &str) -> bool {
        self.allowed.contains(&mode)
    }

    /// Every mode a session may use, in a stable order.
    pub fn allowed(&self) -> &[&'static str] {
        &self.allowed
    }

    /// Why a requested mode is refused, or `None` when it is allowed.
    pub fn refusal(&self, mode: &str) -> Option<String> {
        if self.allows(mode) {
            None
        } else if Self::UNGUARDED.contains(&mode) {
            Some(format!(
                "permission mode `{mode}` lets Claude run tools without asking, so it is off unless \
                 the daemon's owner allows it (`cohost serve --allow-permission-mode {mode}`); \
                 allowed: {}",
                self.allowed.join(", ")
            ))
        } else {
            Some(format!(
                "`{mode}` is not a permission mode; allowed: {}",
                self.allowed.join(", ")
            ))
        }
    }
}

impl Default for PermissionPolicy {
    fn default() -> Self {
        PermissionPolicy {
            allowed: Self::SAFE.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unguarded_modes_need_the_owner() {
        let policy = PermissionPolicy::default();
        for mode in PermissionPolicy::SAFE {
            assert!(policy.allows(mode), "{mode}");
        }
        let refusal = policy.refusal("auto").unwrap();
        assert!(
            refusal.contains("--allow-permission-mode auto"),
            "{refusal}"
        );
        assert!(policy.refusal("bypassPermissions").is_some());
        assert!(
            policy
                .refusal("yolo")
                .unwrap()
                .contains("not a permission mode")
        );

        let policy = PermissionPolicy::allowing(&["auto".into(), " ".into()]).unwrap();
        assert!(policy.allows("auto"));
        assert!(!policy.allows("bypassPermissions"));
        let error = PermissionPolicy::allowing(&["yolo".into()]).unwrap_err();
        assert!(error.to_string().contains("`yolo`"), "{error}");
    }
}
