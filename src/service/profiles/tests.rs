//! The profile validation's every error path, and resolution with provenance.

use std::path::{Path, PathBuf};

use super::{Overrides, ProfileError, Profiles, parse};
use crate::protocol::Runtime;

fn file() -> PathBuf {
    PathBuf::from("/cfg/config.toml")
}

fn read(path: &Path) -> Result<String, String> {
    match path.to_str() {
        Some("review.md") => Ok("Review carefully.".into()),
        Some("empty.md") => Ok("  \n".into()),
        _ => Err("No such file or directory (os error 2)".into()),
    }
}

fn refuses(mode: &str) -> Option<String> {
    ["auto", "bypassPermissions"].contains(&mode).then(|| {
        format!("permission mode `{mode}` is not allowed by this daemon (--allow-permission-mode)")
    })
}

fn load(text: &str) -> Result<Profiles, ProfileError> {
    let table: toml::Table = toml::from_str(text).expect("test TOML");
    parse(&table["profiles"], &file(), &read, &refuses)
}

/// The one error `text` gets: its profile, its key, and its message.
fn error(text: &str) -> ProfileError {
    let error = load(text).expect_err("an invalid profile");
    let shown = error.to_string();
    assert!(
        shown.starts_with("config file /cfg/config.toml: profile `"),
        "{shown}"
    );
    error
}

fn check(text: &str, profile: &str, key: &str, says: &str) {
    let error = error(text);
    assert_eq!(
        (error.profile.as_str(), error.key.as_str()),
        (profile, key),
        "{error}"
    );
    assert!(error.to_string().contains(says), "{error}");
}

#[test]
fn a_valid_file_loads_every_key() {
    let profiles = load(
        r#"
        [profiles.base]
        runtime = "codex"
        model = "gpt-5"
        effort = "high"
        approval_policy = "on-request"
        sandbox = "workspace-write"
        instructions_file = "review.md"
        env = {}
        cwd = "~/src"
        prompt = "Start."
        [profiles.base.mcp_servers.echo]
        command = "python3"
        args = ["echo.py"]
        env = { TOKEN = "s3cret" }
        [profiles.base.mcp_servers.web]
        url = "https://example.com/mcp"
        headers = { Authorization = "Bearer x" }
        "#,
    )
    .unwrap();
    let effective = profiles.effective("base").unwrap();
    assert_eq!(
        effective.instructions.unwrap().value,
        "Review carefully.",
        "read from the file"
    );
    assert_eq!(effective.mcp_servers.len(), 2);
}

#[test]
fn an_unknown_key_names_the_profile_the_key_and_the_file() {
    check(
        "[profiles.r]\nrutime = \"codex\"",
        "r",
        "rutime",
        "is not a profile key (the keys are: extends, runtime",
    );
    check(
        "[profiles.r.mcp_servers.x]\ncommand = \"a\"\ncmd = \"b\"",
        "r",
        "mcp_servers.x.cmd",
        "is not a key of an MCP server",
    );
}

#[test]
fn a_bad_value_is_refused() {
    check(
        "[profiles.r]\nruntime = \"gemini\"",
        "r",
        "runtime",
        "must be one of codex, claude, opencode, pi, got `gemini`",
    );
    check(
        "[profiles.r]\nmodel = 5",
        "r",
        "model",
        "must be a string, not integer",
    );
    check(
        "[profiles.r]\nmodel = \"\"",
        "r",
        "model",
        "must not be empty",
    );
    check(
        "[profiles.r]\nruntime = \"codex\"\neffort = \"max\"",
        "r",
        "effort",
        "must be one of minimal, low, medium, high, xhigh for runtime codex, got `max`",
    );
    check(
        "[profiles.r]\nruntime = \"codex\"\napproval_policy = \"sometimes\"",
        "r",
        "approval_policy",
        "for runtime codex, got `sometimes`",
    );
    check(
        "[profiles.r]\nruntime = \"codex\"\nsandbox = \"open\"",
        "r",
        "sandbox",
        "got `open`",
    );
    check(
        "[profiles.r]\ncwd = \"src\"",
        "r",
        "cwd",
        "must be an absolute path",
    );
    check(
        "[profiles.r]\nenv = { \"1X\" = \"v\" }",
        "r",
        "env.1X",
        "is not a valid variable name",
    );
    check(
        "[profiles.r]\nenv = { X = 1 }",
        "r",
        "env.X",
        "must be a string, not integer",
    );
    check(
        "[profiles.r]\nskills = \"dir\"",
        "r",
        "skills",
        "must be a list of strings",
    );
    check(
        "[profiles.r]\nmcp_servers = []",
        "r",
        "mcp_servers",
        "must be a table of servers",
    );
    check(
        "[profiles.r.mcp_servers.\"a b\"]\ncommand = \"x\"",
        "r",
        "mcp_servers.a b",
        "is not a valid server name",
    );
    check(
        "[profiles.\"a b\"]\nmodel = \"m\"",
        "a b",
        "",
        "is not a valid profile name",
    );
    check("[profiles]\nr = 3", "r", "", "must be a table");
}

#[test]
fn an_mcp_server_is_a_command_or_a_url() {
    check(
        "[profiles.r.mcp_servers.x]\ncommand = \"a\"\nurl = \"https://e\"",
        "r",
        "mcp_servers.x",
        "sets both `command`",
    );
    check(
        "[profiles.r.mcp_servers.x]\nargs = [\"a\"]",
        "r",
        "mcp_servers.x",
        "needs `command`",
    );
    check(
        "[profiles.r.mcp_servers.x]\nurl = \"ftp://e\"",
        "r",
        "mcp_servers.x.url",
        "must be an http:// or https:// URL",
    );
    check(
        "[profiles.r.mcp_servers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }",
        "r",
        "mcp_servers.x.headers",
        "applies to an HTTP server",
    );
    check(
        "[profiles.r.mcp_servers.x]\nurl = \"https://e\"\nargs = [\"a\"]",
        "r",
        "mcp_servers.x.args",
        "applies to a stdio server",
    );
}

#[test]
fn instructions_come_from_one_place_that_can_be_read() {
    check(
        "[profiles.r]\ninstructions = \"a\"\ninstructions_file = \"review.md\"",
        "r",
        "instructions_file",
        "and `instructions` are both set",
    );
    check(
        "[profiles.r]\ninstructions_file = \"missing.md\"",
        "r",
        "instructions_file",
        "cannot be read (missing.md): No such file",
    );
    check(
        "[profiles.r]\ninstructions_file = \"empty.md\"",
        "r",
        "instructions_file",
        "empty.md is empty",
    );
    check(
        &format!(
            "[profiles.r]\ninstructions = \"{}\"",
            "x".repeat(super::MAX_INSTRUCTIONS + 1)
        ),
        "r",
        "instructions",
        "must be at most",
    );
}

#[test]
fn a_parent_must_exist_and_the_chain_must_end() {
    check(
        "[profiles.r]\nextends = \"base\"",
        "r",
        "extends",
        "names `base`, which is not a profile (the profiles are: r)",
    );
    let cycle = error(
        "[profiles.a]\nextends = \"b\"\n[profiles.b]\nextends = \"c\"\n[profiles.c]\nextends = \"a\"",
    );
    assert_eq!(cycle.key, "extends", "{cycle}");
    assert!(cycle.to_string().contains("makes a cycle: "), "{cycle}");
    check(
        "[profiles.a]\nextends = \"a\"",
        "a",
        "extends",
        "makes a cycle: a -> a",
    );
}

#[test]
fn a_setting_the_runtime_cannot_honour_is_refused_where_it_was_set() {
    check(
        "[profiles.r]\nruntime = \"codex\"\npermission_mode = \"plan\"",
        "r",
        "permission_mode",
        "cannot be honoured by runtime codex (it takes: model, effort, approval_policy",
    );
    check(
        "[profiles.r]\nruntime = \"claude\"\nsandbox = \"read-only\"",
        "r",
        "sandbox",
        "cannot be honoured by runtime claude",
    );
    check(
        "[profiles.r]\nruntime = \"claude\"\nskills = [\"skills/review\"]",
        "r",
        "skills",
        "cannot be honoured by runtime claude",
    );
    check(
        "[profiles.r]\nruntime = \"codex\"\nenv = { A = \"b\" }",
        "r",
        "env",
        "cannot be honoured by runtime codex",
    );
    check(
        "[profiles.r]\nruntime = \"pi\"\ninstructions = \"be brief\"",
        "r",
        "instructions",
        "cannot be honoured by runtime pi (it takes: model, approval_policy)",
    );
    // The parent set it; the child chose the runtime: the error names the parent.
    check(
        "[profiles.base]\ninstructions = \"x\"\n[profiles.r]\nextends = \"base\"\nruntime = \"opencode\"",
        "base",
        "instructions",
        "cannot be honoured by runtime opencode",
    );
}

#[test]
fn a_permission_mode_is_bounded_by_what_the_daemon_allows() {
    check(
        "[profiles.r]\nruntime = \"claude\"\npermission_mode = \"bypassPermissions\"",
        "r",
        "permission_mode",
        "is not allowed by this daemon",
    );
}

const CHAIN: &str = r#"
[profiles.base]
runtime = "claude"
model = "m1"
instructions = "Base."
env = { A = "1" }
[profiles.base.mcp_servers.one]
command = "one"
[profiles.reviewer]
extends = "base"
model = "m2"
effort = "high"
[profiles.reviewer.mcp_servers.two]
url = "https://two/mcp"
headers = { Authorization = "Bearer secret" }
[profiles.free]
instructions = "Anywhere."
"#;

#[test]
fn values_resolve_through_the_chain_with_where_each_came_from() {
    let profiles = load(CHAIN).unwrap();
    let effective = profiles.effective("reviewer").unwrap();
    assert_eq!(effective.chain, ["reviewer", "base"]);
    assert_eq!(effective.model.as_ref().unwrap().value, "m2");
    assert_eq!(effective.model.as_ref().unwrap().from, "profile reviewer");
    assert_eq!(effective.runtime.as_ref().unwrap().from, "profile base");
    assert_eq!(effective.mcp_servers["one"].from, "profile base");
    assert_eq!(effective.mcp_servers["two"].from, "profile reviewer");
    let view = profiles
        .views()
        .into_iter()
        .find(|v| v.name == "reviewer")
        .unwrap();
    let two = view
        .values
        .iter()
        .find(|v| v.key == "mcp_servers.two")
        .unwrap();
    assert_eq!(
        two.value["headers"]["Authorization"], "(redacted)",
        "secrets never leave the daemon"
    );
}

#[test]
fn a_request_overrides_a_profile_and_is_named_as_the_source() {
    let profiles = load(CHAIN).unwrap();
    let applied = profiles
        .apply(
            "reviewer",
            Overrides {
                cwd: Some("/work".into()),
                model: Some("m3".into()),
                ..Overrides::default()
            },
        )
        .unwrap();
    assert_eq!(applied.runtime, Runtime::Claude);
    assert_eq!(applied.model.as_deref(), Some("m3"));
    assert_eq!(applied.profile.sources["model"], "request");
    assert_eq!(applied.profile.sources["effort"], "profile reviewer");
    assert_eq!(applied.profile.sources["instructions"], "profile base");
    assert_eq!(applied.profile.instructions.as_deref(), Some("Base."));
    assert_eq!(applied.profile.env["A"], "1");
}

#[test]
fn a_request_cannot_carry_a_profile_to_a_runtime_that_cannot_honour_it() {
    let profiles = load(CHAIN).unwrap();
    // Claude takes the whole chain; pi takes its model but not its effort.
    let error = profiles
        .apply(
            "reviewer",
            Overrides {
                runtime: Some("pi".into()),
                ..Overrides::default()
            },
        )
        .unwrap_err();
    assert_eq!(error.key, "effort", "{error}");
    assert!(
        error
            .to_string()
            .contains("cannot be honoured by runtime pi"),
        "{error}"
    );
    let error = profiles
        .apply(
            "free",
            Overrides {
                cwd: Some("/w".into()),
                ..Overrides::default()
            },
        )
        .unwrap_err();
    assert_eq!(error.key, "runtime", "{error}");
    let error = profiles
        .apply(
            "reviewer",
            Overrides {
                permission_mode: Some("sometimes".into()),
                ..Overrides::default()
            },
        )
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("(from the request) must be one of"),
        "{error}"
    );
}

#[test]
fn an_unknown_profile_lists_the_known_ones() {
    let profiles = load(CHAIN).unwrap();
    let error = profiles.apply("nope", Overrides::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "config file /cfg/config.toml: profile `nope` is not a profile of the config file (the profiles are: base, free, reviewer)"
    );
    assert!(
        Profiles::default()
            .effective("x")
            .unwrap_err()
            .to_string()
            .contains("it has none")
    );
}

#[test]
fn a_reload_replaces_the_profiles_whole_only_when_they_validate() {
    use std::sync::{Arc, Mutex};

    use super::{Held, ReloadError};
    let next: Arc<Mutex<String>> = Arc::new(Mutex::new(
        "[profiles.a]\nruntime = \"codex\"\nmodel = \"two\"\n".into(),
    ));
    let source = Arc::clone(&next);
    let held = Held::new(
        load("[profiles.a]\nruntime = \"codex\"\nmodel = \"one\"\n").unwrap(),
        Some(Arc::new(move || {
            load(&source.lock().unwrap()).map_err(|e| e.to_string())
        })),
    );
    let before = held.current();
    let model = |p: &Profiles| p.effective("a").unwrap().model.unwrap().value;
    assert_eq!(model(&held.reload().unwrap()), "two");
    assert_eq!(model(&held.current()), "two");
    // What a create took before the reload is unchanged.
    assert_eq!(model(&before), "one");
    *next.lock().unwrap() = "[profiles.a]\nruntime = \"codex\"\neffort = \"loud\"\n".into();
    let Err(ReloadError::Invalid(why)) = held.reload() else {
        panic!("a bad profile reloads nothing");
    };
    assert!(
        why.contains("/cfg/config.toml") && why.contains("profile `a`") && why.contains("`effort`"),
        "{why}"
    );
    assert_eq!(model(&held.current()), "two", "the old profiles stay");
    let none = Held::new(Profiles::default(), None);
    assert!(matches!(none.reload(), Err(ReloadError::Unsupported(_))));
}
