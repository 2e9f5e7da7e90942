//! Agent profiles: the `[profiles.NAME]` tables of the config file, validated once
//! ([`parse`]: pure, the file system reached only through the reader it is given), resolved
//! through their `extends` chain with where each value came from ([`Profiles::effective`]),
//! checked against what a runtime honours ([`check_runtime`], from the registry's
//! [`profile_support`]), and turned into a create request's settings
//! ([`Profiles::apply`]). docs/profiles.md describes the keys and how each reaches a runtime.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::protocol::{McpServer, ProfileValue, ProfileView, Runtime, SessionProfile};
use crate::runtime::{ProfileSupport, profile_support};

mod parse;
#[cfg(test)]
mod tests;

use parse::Naming;
pub use parse::{is_name, parse, read_beside};

/// The keys of a `[profiles.NAME]` table.
pub const KEYS: [&str; 14] = [
    "extends",
    "runtime",
    "model",
    "effort",
    "approval_policy",
    "permission_mode",
    "sandbox",
    "instructions",
    "instructions_file",
    "mcp_servers",
    "skills",
    "env",
    "cwd",
    "prompt",
];

/// The largest instructions (inline or a file) a profile may carry.
pub const MAX_INSTRUCTIONS: usize = 64 * 1024;

/// A profile error: one message naming the file, the profile and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileError {
    pub file: Option<PathBuf>,
    pub profile: String,
    /// The key (`effort`, `mcp_servers.NAME.url`, …); empty for the profile's table itself.
    pub key: String,
    pub reason: String,
}

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "config file {}: ", file.display())?;
        }
        write!(f, "profile `{}`", self.profile)?;
        if !self.key.is_empty() {
            write!(f, ": `{}`", self.key)?;
        }
        write!(f, " {}", self.reason)
    }
}

impl std::error::Error for ProfileError {}

/// A value and the profile (or `request`) it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub from: String,
}

/// One `[profiles.NAME]` table as written (before its `extends` chain applies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    pub extends: Option<String>,
    pub runtime: Option<Runtime>,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub approval_policy: Option<String>,
    pub permission_mode: Option<String>,
    pub sandbox: Option<String>,
    /// Inline, or the text of `instructions_file`.
    pub instructions: Option<String>,
    pub mcp_servers: BTreeMap<String, McpServer>,
    pub skills: Option<Vec<String>>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub prompt: Option<String>,
}

/// A profile resolved through its chain: each value from the nearest profile that sets it
/// (`env` and `mcp_servers` merge by name, the nearer entry winning).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effective {
    pub name: String,
    /// This profile, then its parent, and so on.
    pub chain: Vec<String>,
    pub runtime: Option<Sourced<Runtime>>,
    pub model: Option<Sourced<String>>,
    pub effort: Option<Sourced<String>>,
    pub approval_policy: Option<Sourced<String>>,
    pub permission_mode: Option<Sourced<String>>,
    pub sandbox: Option<Sourced<String>>,
    pub instructions: Option<Sourced<String>>,
    pub mcp_servers: BTreeMap<String, Sourced<McpServer>>,
    pub skills: Option<Sourced<Vec<String>>>,
    pub env: BTreeMap<String, Sourced<String>>,
    pub cwd: Option<Sourced<String>>,
    pub prompt: Option<Sourced<String>>,
}

/// The profiles of the config file.
#[derive(Debug, Clone, Default)]
pub struct Profiles {
    file: Option<PathBuf>,
    by_name: BTreeMap<String, Profile>,
}

/// Reads and validates the config file's profiles again: the new profiles, or one error naming
/// the file (and the profile and key when one is at fault).
pub type Reload = Arc<dyn Fn() -> Result<Profiles, String> + Send + Sync>;

/// Why a reload changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadError {
    /// The daemon has nothing to read them from again.
    Unsupported(String),
    /// The file or a profile did not validate.
    Invalid(String),
}

/// The profiles a daemon holds: read whole at start, replaced whole by a reload that
/// validates. A create takes the profiles of its moment ([`Held::current`]), so a reload
/// changes only the sessions started after it.
#[derive(Clone)]
pub struct Held {
    current: Arc<RwLock<Arc<Profiles>>>,
    reload: Option<Reload>,
    /// One reload at a time, so an older read never replaces a newer one.
    reloading: Arc<Mutex<()>>,
}

impl Held {
    pub fn new(profiles: Profiles, reload: Option<Reload>) -> Held {
        Held {
            current: Arc::new(RwLock::new(Arc::new(profiles))),
            reload,
            reloading: Arc::default(),
        }
    }

    pub fn current(&self) -> Arc<Profiles> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Reads the profiles again and puts them in place when they validate; on an error the
    /// old ones stay.
    pub fn reload(&self) -> Result<Arc<Profiles>, ReloadError> {
        let Some(reload) = &self.reload else {
            return Err(ReloadError::Unsupported(
                "this daemon has no config file to read its profiles from again".into(),
            ));
        };
        let _one = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let profiles = Arc::new(reload().map_err(ReloadError::Invalid)?);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&profiles);
        Ok(profiles)
    }
}

/// The create request's own values, which override a profile's.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub runtime: Option<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub approval_policy: Option<String>,
    pub permission_mode: Option<String>,
    pub sandbox: Option<String>,
    pub prompt: Option<String>,
}

/// A create request's settings with a profile applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub runtime: Runtime,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub approval_policy: Option<String>,
    pub permission_mode: Option<String>,
    pub sandbox: Option<String>,
    pub prompt: Option<String>,
    pub profile: SessionProfile,
}

impl Profiles {
    /// Profiles from already-parsed tables (tests).
    #[cfg(test)]
    pub fn from_tables(by_name: BTreeMap<String, Profile>) -> Profiles {
        Profiles {
            file: None,
            by_name,
        }
    }

    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.by_name.keys()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    fn naming<'a>(&'a self, profile: &'a str) -> Naming<'a> {
        Naming {
            file: self.file.as_deref(),
            profile,
        }
    }

    /// `name` resolved through its `extends` chain; an unknown profile, an unknown parent or a
    /// cycle is the error.
    pub fn effective(&self, name: &str) -> Result<Effective, ProfileError> {
        let mut chain: Vec<String> = Vec::new();
        let mut current = name.to_string();
        loop {
            let Some(profile) = self.by_name.get(&current) else {
                return Err(match chain.last() {
                    None => ProfileError {
                        file: self.file.clone(),
                        profile: name.to_string(),
                        key: String::new(),
                        reason: format!("is not a profile of the config file ({})", self.known()),
                    },
                    Some(child) => self.naming(child).error(
                        "extends",
                        format!(
                            "names `{current}`, which is not a profile ({})",
                            self.known()
                        ),
                    ),
                });
            };
            chain.push(current.clone());
            match &profile.extends {
                None => break,
                Some(parent) if chain.contains(parent) => {
                    let mut cycle = chain.clone();
                    cycle.push(parent.clone());
                    return Err(self
                        .naming(&current)
                        .error("extends", format!("makes a cycle: {}", cycle.join(" -> "))));
                }
                Some(parent) => current = parent.clone(),
            }
        }
        let mut effective = Effective {
            name: name.to_string(),
            chain: chain.clone(),
            ..Effective::default()
        };
        // The root parent first, so nearer profiles overwrite.
        for from in chain.iter().rev() {
            let profile = &self.by_name[from];
            let sourced = |value: &Option<String>| {
                value.clone().map(|value| Sourced {
                    value,
                    from: format!("profile {from}"),
                })
            };
            let set = |slot: &mut Option<Sourced<String>>, value: &Option<String>| {
                if let Some(value) = sourced(value) {
                    *slot = Some(value);
                }
            };
            if let Some(runtime) = profile.runtime {
                effective.runtime = Some(Sourced {
                    value: runtime,
                    from: format!("profile {from}"),
                });
            }
            set(&mut effective.model, &profile.model);
            set(&mut effective.effort, &profile.effort);
            set(&mut effective.approval_policy, &profile.approval_policy);
            set(&mut effective.permission_mode, &profile.permission_mode);
            set(&mut effective.sandbox, &profile.sandbox);
            set(&mut effective.instructions, &profile.instructions);
            set(&mut effective.cwd, &profile.cwd);
            set(&mut effective.prompt, &profile.prompt);
            if let Some(skills) = &profile.skills {
                effective.skills = Some(Sourced {
                    value: skills.clone(),
                    from: format!("profile {from}"),
                });
            }
            for (key, server) in &profile.mcp_servers {
                effective.mcp_servers.insert(
                    key.clone(),
                    Sourced {
                        value: server.clone(),
                        from: format!("profile {from}"),
                    },
                );
            }
            for (key, value) in &profile.env {
                effective.env.insert(
                    key.clone(),
                    Sourced {
                        value: value.clone(),
                        from: format!("profile {from}"),
                    },
                );
            }
        }
        Ok(effective)
    }

    fn known(&self) -> String {
        if self.by_name.is_empty() {
            "it has none".to_string()
        } else {
            format!(
                "the profiles are: {}",
                self.by_name.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    }

    /// A create request's settings with profile `name` under its own values (`overrides`),
    /// checked against what the runtime honours.
    pub fn apply(&self, name: &str, overrides: Overrides) -> Result<Applied, ProfileError> {
        let mut effective = self.effective(name)?;
        let request = |value: Option<String>| {
            value.filter(|v| !v.is_empty()).map(|value| Sourced {
                value,
                from: "request".to_string(),
            })
        };
        if let Some(runtime) = request(overrides.runtime) {
            let parsed = Runtime::parse(&runtime.value).ok_or_else(|| {
                self.naming(name).error(
                    "runtime",
                    format!(
                        "(from the request) must be one of {}, got `{}`",
                        Runtime::ALL.map(Runtime::as_str).join(", "),
                        runtime.value
                    ),
                )
            })?;
            effective.runtime = Some(Sourced {
                value: parsed,
                from: runtime.from,
            });
        }
        for (slot, value) in [
            (&mut effective.cwd, overrides.cwd),
            (&mut effective.model, overrides.model),
            (&mut effective.approval_policy, overrides.approval_policy),
            (&mut effective.permission_mode, overrides.permission_mode),
            (&mut effective.sandbox, overrides.sandbox),
            (&mut effective.prompt, overrides.prompt),
        ] {
            if let Some(value) = request(value) {
                *slot = Some(value);
            }
        }
        let Some(runtime) = effective.runtime.clone() else {
            return Err(self.naming(name).error(
                "runtime",
                "is not set: the profile names no runtime, so the request must",
            ));
        };
        check_runtime(&effective, runtime.value, self.file.as_deref())?;
        let mut sources = BTreeMap::new();
        for (key, value) in values(&effective) {
            sources.insert(key, value.from);
        }
        let take = |value: Option<Sourced<String>>| value.map(|v| v.value);
        Ok(Applied {
            runtime: runtime.value,
            cwd: take(effective.cwd),
            model: take(effective.model),
            approval_policy: take(effective.approval_policy),
            permission_mode: take(effective.permission_mode),
            sandbox: take(effective.sandbox),
            prompt: take(effective.prompt),
            profile: SessionProfile {
                name: name.to_string(),
                effort: effective.effort.map(|v| v.value),
                instructions: effective.instructions.map(|v| v.value),
                mcp_servers: effective
                    .mcp_servers
                    .into_iter()
                    .map(|(k, v)| (k, v.value))
                    .collect(),
                env: effective
                    .env
                    .into_iter()
                    .map(|(k, v)| (k, v.value))
                    .collect(),
                sources,
            },
        })
    }

    /// The list `GET /api/profiles` answers: the file and every profile's effective values.
    pub fn list(&self) -> crate::protocol::ProfileList {
        crate::protocol::ProfileList {
            file: self.file().map(|file| file.to_string_lossy().into_owned()),
            profiles: self.views(),
        }
    }

    /// Every profile with its effective values (secrets redacted) and where each came from.
    pub fn views(&self) -> Vec<ProfileView> {
        self.by_name
            .keys()
            .filter_map(|name| self.effective(name).ok())
            .map(|effective| ProfileView {
                name: effective.name.clone(),
                chain: effective.chain.clone(),
                values: values(&effective)
                    .into_iter()
                    .map(|(key, sourced)| ProfileValue {
                        key,
                        value: sourced.value,
                        from: sourced.from,
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The effective values as (key, JSON value, source), secrets redacted, in the keys' order.
fn values(effective: &Effective) -> Vec<(String, Sourced<serde_json::Value>)> {
    use serde_json::Value;
    let mut out = Vec::new();
    let mut push = |key: String, value: Value, from: &str| {
        out.push((
            key,
            Sourced {
                value,
                from: from.to_string(),
            },
        ))
    };
    if let Some(runtime) = &effective.runtime {
        push(
            "runtime".into(),
            Value::from(runtime.value.as_str()),
            &runtime.from,
        );
    }
    for (key, slot) in [
        ("model", &effective.model),
        ("effort", &effective.effort),
        ("approval_policy", &effective.approval_policy),
        ("permission_mode", &effective.permission_mode),
        ("sandbox", &effective.sandbox),
        ("instructions", &effective.instructions),
    ] {
        if let Some(sourced) = slot {
            push(
                key.into(),
                Value::from(sourced.value.clone()),
                &sourced.from,
            );
        }
    }
    for (name, server) in &effective.mcp_servers {
        push(
            format!("mcp_servers.{name}"),
            serde_json::to_value(server.value.redacted()).unwrap_or(Value::Null),
            &server.from,
        );
    }
    if let Some(skills) = &effective.skills {
        push(
            "skills".into(),
            Value::from(skills.value.clone()),
            &skills.from,
        );
    }
    for (name, value) in &effective.env {
        push(
            format!("env.{name}"),
            Value::from(crate::protocol::REDACTED),
            &value.from,
        );
    }
    for (key, slot) in [("cwd", &effective.cwd), ("prompt", &effective.prompt)] {
        if let Some(sourced) = slot {
            push(
                key.into(),
                Value::from(sourced.value.clone()),
                &sourced.from,
            );
        }
    }
    out
}

/// Refuses a value `runtime` cannot honour, naming the setting, the runtime and where the value
/// came from: a setting the runtime does not take, or a value it does not know.
pub fn check_runtime(
    effective: &Effective,
    runtime: Runtime,
    file: Option<&Path>,
) -> Result<(), ProfileError> {
    let support = profile_support(runtime);
    check_support(effective, runtime, &support, file)
}

fn check_support(
    effective: &Effective,
    runtime: Runtime,
    support: &ProfileSupport,
    file: Option<&Path>,
) -> Result<(), ProfileError> {
    let error = |from: &str, key: &str, reason: String| {
        let (profile, reason) = match from.strip_prefix("profile ") {
            Some(profile) => (profile.to_string(), reason),
            None => (
                effective.name.clone(),
                format!("(from the request) {reason}"),
            ),
        };
        ProfileError {
            file: file.map(Path::to_path_buf),
            profile,
            key: key.to_string(),
            reason,
        }
    };
    let takes = || {
        if support.settings.is_empty() {
            "it takes none of a profile's settings".to_string()
        } else {
            format!("it takes: {}", support.settings.join(", "))
        }
    };
    let mut present: Vec<(&str, &str)> = Vec::new();
    let scalar = [
        ("model", &effective.model),
        ("effort", &effective.effort),
        ("approval_policy", &effective.approval_policy),
        ("permission_mode", &effective.permission_mode),
        ("sandbox", &effective.sandbox),
        ("instructions", &effective.instructions),
    ];
    for (key, slot) in &scalar {
        if let Some(sourced) = slot {
            present.push((key, &sourced.from));
        }
    }
    if let Some((_, server)) = effective.mcp_servers.iter().next() {
        present.push(("mcp_servers", &server.from));
    }
    if let Some(skills) = &effective.skills {
        present.push(("skills", &skills.from));
    }
    if let Some((_, value)) = effective.env.iter().next() {
        present.push(("env", &value.from));
    }
    for (key, from) in present {
        if !support.settings.contains(&key) {
            return Err(error(
                from,
                key,
                format!("cannot be honoured by runtime {runtime} ({})", takes()),
            ));
        }
    }
    type Choice<'a> = (&'a str, &'a Option<Sourced<String>>, &'a [&'a str]);
    let choices: [Choice; 4] = [
        ("effort", &effective.effort, support.efforts),
        (
            "approval_policy",
            &effective.approval_policy,
            support.approval_policies,
        ),
        ("sandbox", &effective.sandbox, support.sandboxes),
        (
            "permission_mode",
            &effective.permission_mode,
            support.permission_modes,
        ),
    ];
    for (key, slot, allowed) in choices {
        if let Some(sourced) = slot
            && !allowed.contains(&sourced.value.as_str())
        {
            return Err(error(
                &sourced.from,
                key,
                format!(
                    "must be one of {} for runtime {runtime}, got `{}`",
                    allowed.join(", "),
                    sourced.value
                ),
            ));
        }
    }
    Ok(())
}
