//! The config file, `$XDG_CONFIG_HOME/cohost/config.toml` (else `~/.config/cohost/config.toml`,
//! or the file `COHOST_CONFIG` names): every `cohost serve` setting, under the flags and the
//! environment and over the defaults.
//!
//! The file's keys are the `serve` settings themselves, read off the clap definitions: each
//! option of `cohost serve` (and the global `--listen`) is the key of its field name in kebab
//! case (`--mcp-allowed-root` is `mcp-allowed-roots`, `--fsync` is `fsync`). A new `serve` flag is
//! therefore a new key with no code here; its value is checked by the flag's own parser, so the
//! file accepts exactly what the command line accepts. Only `serve` (and `cohost config show`)
//! read the file; the other commands find the daemon through `$COHOST_HOME/daemon.json`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command, ServeArgs};

/// The environment variable naming the config file (instead of the XDG default).
pub const CONFIG_ENV: &str = "COHOST_CONFIG";

/// The config file's table for the chat bridges (`[bridge.matrix]`, read by `cohost-matrix`):
/// the daemon skips it.
pub const BRIDGE_TABLE: &str = "bridge";
/// The config file's table of agent profiles (`[profiles.NAME]`, see `service::profiles`).
pub const PROFILES_TABLE: &str = "profiles";

/// The config file's path, and whether it was named explicitly (`COHOST_CONFIG`): a named file
/// must exist, the default one may be absent.
pub fn locate() -> anyhow::Result<(PathBuf, bool)> {
    if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty()) {
        return Ok((std::path::absolute(&path)?, true));
    }
    if let Some(config) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Ok((
            std::path::absolute(Path::new(&config))?.join("cohost/config.toml"),
            false,
        ));
    }
    let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) else {
        bail!("cannot find the config file: set {CONFIG_ENV} (or XDG_CONFIG_HOME or HOME)");
    };
    Ok((
        PathBuf::from(home).join(".config/cohost/config.toml"),
        false,
    ))
}

/// The largest config file read; a longer one is refused (a file of settings is a few KiB).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Reads and parses the config file: `None` when the default file does not exist.
///
/// The file decides what the daemon runs (`notify-command`), where it listens and what agents
/// may touch, so it is held to ssh's standard for its own config: a regular file of this user
/// (or root), not writable by group or others, in directories that are as safe up to the
/// user's home (or `/`), and at most [`MAX_CONFIG_BYTES`]. Anything else is refused, naming the
/// path and the fix, before anything starts; a FIFO is refused at once, never waited on.
pub fn load(path: &Path, explicit: bool) -> anyhow::Result<Option<toml::Table>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !explicit => {
            return Ok(None);
        }
        Err(error) => {
            return Err(anyhow!(
                "cannot read the config file {}: {error}",
                path.display()
            ));
        }
    };
    let metadata = file
        .metadata()
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    check_safe(path, &metadata, "the config file")?;
    check_dirs(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        bail!(
            "refusing the config file {}: it is larger than {} bytes (a config file is a few KiB); nothing was started",
            path.display(),
            MAX_CONFIG_BYTES
        );
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow!("config file {}: it is not UTF-8 text", path.display()))?;
    // toml's error names the line and column, and shows the line with a caret.
    let table: toml::Table = toml::from_str(&text)
        .map_err(|error| anyhow!("config file {}: {error}", path.display()))?;
    Ok(Some(flatten_sections(table)))
}

/// A section's keys are settings named `SECTION-KEY`: `[nats]` `url = …` is `nats-url`, the
/// same as a top-level `nats-url = …`. The bridges' table (`[bridge.matrix]`) and the agent
/// profiles (`[profiles.NAME]`) stay whole: they are tables of their own, not settings.
fn flatten_sections(table: toml::Table) -> toml::Table {
    let mut flat = toml::Table::new();
    for (key, value) in table {
        match value {
            toml::Value::Table(section) if key != BRIDGE_TABLE && key != PROFILES_TABLE => {
                for (inner, value) in section {
                    flat.insert(format!("{key}-{inner}"), value);
                }
            }
            value => {
                flat.insert(key, value);
            }
        }
    }
    flat
}

/// How another user could have written what `metadata` describes: it is theirs, or it is
/// writable by group or others (a root-owned sticky directory such as `/tmp` passes when
/// `sticky_root_passes`: no other user can rename or remove what is yours inside it).
fn exposure(metadata: &std::fs::Metadata, sticky_root_passes: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = crate::core::private_file::current_uid();
    let mode = metadata.mode() & 0o7777;
    let sticky_root = sticky_root_passes && metadata.uid() == 0 && mode & 0o1000 != 0;
    if metadata.uid() != uid && metadata.uid() != 0 {
        Some(format!(
            "owned by uid {}, not by you (uid {uid}) or root",
            metadata.uid()
        ))
    } else if mode & 0o022 != 0 && !sticky_root {
        Some(format!("writable by group or others (mode {mode:04o})"))
    } else {
        None
    }
}

/// A file another user could have written is refused: it must be a regular file, owned by
/// this user or root, and not writable by group or others.
fn check_safe(path: &Path, metadata: &std::fs::Metadata, what: &str) -> anyhow::Result<()> {
    let shown = path.display();
    if !metadata.file_type().is_file() {
        bail!(
            "refusing {what} {shown}: it is not a regular file (a FIFO, a device or a directory); point COHOST_CONFIG at a regular file; nothing was started"
        );
    }
    if let Some(how) = exposure(metadata, false) {
        bail!(
            "refusing {what} {shown}: it is {how}, so another user could have written it; run `chmod go-w {shown}` (or `chown` it, if it is yours); nothing was started"
        );
    }
    Ok(())
}

/// Every directory above `path`, up to the user's home when `path` is inside it (else up to
/// `/`), must be owned by this user or root and not writable by group or others, like ssh's
/// `safe_path`. A root-owned directory with the sticky bit (`/tmp`) passes: no other user can
/// rename or remove what is yours inside it.
fn check_dirs(path: &Path) -> anyhow::Result<()> {
    check_dirs_of(path, "the config file")
}

/// [`check_dirs`] for any file or directory a setting names (`what` says which).
fn check_dirs_of(path: &Path, what: &str) -> anyhow::Result<()> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .and_then(|h| h.canonicalize().ok());
    let real = path
        .canonicalize()
        .with_context(|| format!("cannot resolve {what} {}", path.display()))?;
    let stop_at_home = home.as_ref().is_some_and(|h| real.starts_with(h));
    let mut dir = real.parent();
    while let Some(current) = dir {
        let metadata = std::fs::metadata(current)
            .with_context(|| format!("cannot read {}", current.display()))?;
        if let Some(how) = exposure(&metadata, true) {
            bail!(
                "refusing {what} {}: its directory {} is {how}, so another user could replace what is in it; run `chmod go-w {}` (or `chown` it, if it is yours); nothing was started",
                path.display(),
                current.display(),
                current.display()
            );
        }
        if stop_at_home && home.as_deref() == Some(current) {
            break;
        }
        dir = current.parent();
    }
    Ok(())
}

/// The program a `notify-command` runs (its first word; a name without `/` as `sh` finds it on
/// `PATH`) is held to the config file's standard: the daemon runs it, so another user must not
/// have been able to write it or replace it. A program that cannot be found is not refused
/// here (`sh` reports it on each run).
pub fn check_notify_program(command: &str, what: &str) -> anyhow::Result<()> {
    let Some(word) = first_word(command) else {
        return Ok(());
    };
    let program = if word.contains('/') {
        Some(PathBuf::from(&word))
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(|dir| dir.join(&word))
                .find(|candidate| candidate.is_file())
        })
    };
    let Some(program) = program.filter(|p| p.exists()) else {
        return Ok(());
    };
    let what = format!("the program of {what}");
    let metadata = std::fs::metadata(&program)
        .with_context(|| format!("cannot read {what} {}", program.display()))?;
    check_safe(&program, &metadata, &what)?;
    check_dirs_of(&program, &what)
}

/// A directory agents may be started in (`mcp-allowed-roots`) is held to the same standard:
/// a root another user can write to lets them plant a project's instructions, settings and
/// hooks where an agent will run. A root-owned sticky directory (`/tmp`) passes, as above.
pub fn check_root_dir(dir: &Path, what: &str) -> anyhow::Result<()> {
    let what = &format!("the agent directory of {what}");
    let metadata =
        std::fs::metadata(dir).with_context(|| format!("cannot read {what} {}", dir.display()))?;
    if let Some(how) = exposure(&metadata, true) {
        bail!(
            "refusing {what} {}: it is {how}, so another user could plant files where agents run; run `chmod go-w {}` (or `chown` it, if it is yours); nothing was started",
            dir.display(),
            dir.display()
        );
    }
    check_dirs_of(dir, what)
}

/// The first word of a shell command line: up to the first blank, or a quoted word.
fn first_word(command: &str) -> Option<String> {
    let command = command.trim_start();
    let mut chars = command.chars();
    match chars.next()? {
        quote @ ('\'' | '"') => {
            let rest = &command[1..];
            rest.find(quote).map(|end| rest[..end].to_string())
        }
        _ => command
            .split(|c: char| c.is_whitespace() || c == ';' || c == '|' || c == '&')
            .next()
            .filter(|w| !w.is_empty())
            .map(str::to_string),
    }
}

/// Where a setting's effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env(String),
    File(PathBuf),
    Default,
}

impl Source {
    /// How `config show` names it.
    pub fn label(&self) -> String {
        match self {
            Source::Flag => "flag".to_string(),
            Source::Env(name) => format!("env {name}"),
            Source::File(path) => format!("file {}", path.display()),
            Source::Default => "default".to_string(),
        }
    }
}

/// Every `serve` setting's source, by key (`segment-mb`), for error messages and `config show`.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    sources: BTreeMap<String, (Source, String)>,
}

impl Origins {
    /// How an error names a setting: the flag, the variable or the key and its file.
    pub fn name(&self, key: &str) -> String {
        match self.sources.get(key) {
            Some((Source::Env(var), _)) => var.clone(),
            Some((Source::File(path), _)) => format!("`{key}` in {}", path.display()),
            Some((_, flag)) => flag.clone(),
            None => format!("--{key}"),
        }
    }

    pub fn source(&self, key: &str) -> Option<&Source> {
        self.sources.get(key).map(|(source, _)| source)
    }
}

/// `serve`'s settings with the file applied: the global `--listen`, the args and their sources.
#[derive(Debug)]
pub struct Settings {
    pub home: Option<PathBuf>,
    pub listen: Option<String>,
    pub args: ServeArgs,
    pub origins: Origins,
    /// The config file, and whether it existed.
    pub file: PathBuf,
    pub file_found: bool,
    /// Every setting with its effective value as text (`config show`), by key.
    pub shown: Vec<(String, String, Source)>,
    /// The file's `profiles` table (agent profiles), not yet validated: see
    /// `ServeConfig::with_profiles`.
    pub profiles: Option<toml::Value>,
}

/// The settings a key names, from the clap definitions: `listen` (global) and `serve`'s options.
fn settable(root: &clap::Command) -> anyhow::Result<Vec<clap::Arg>> {
    let serve = root
        .find_subcommand("serve")
        .context("the command line has no `serve`")?;
    let mut args: Vec<clap::Arg> = root
        .get_arguments()
        .filter(|arg| arg.get_id() == "listen")
        .cloned()
        .collect();
    args.extend(
        serve
            .get_arguments()
            .filter(|arg| arg.get_long().is_some() && !is_builtin(arg))
            .cloned(),
    );
    Ok(args)
}

fn is_builtin(arg: &clap::Arg) -> bool {
    matches!(
        arg.get_id().as_str(),
        "help" | "version" | "home" | "listen"
    )
}

fn key_of(arg: &clap::Arg) -> String {
    arg.get_id().as_str().replace('_', "-")
}

/// The file's value for one key as command-line words (`--fsync=never`), checked by the flag's
/// own parser; errors name the key and the file.
fn words_for(
    root: &clap::Command,
    arg: &clap::Arg,
    value: &toml::Value,
    file: &Path,
) -> anyhow::Result<Vec<OsString>> {
    let key = key_of(arg);
    let long = arg.get_long().unwrap_or(arg.get_id().as_str());
    let bad = |what: &str| anyhow!("config file {}: `{key}` {what}", file.display());
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return match value {
            toml::Value::Boolean(true) => Ok(vec![format!("--{long}").into()]),
            toml::Value::Boolean(false) => Ok(Vec::new()),
            other => Err(bad(&format!(
                "must be true or false, not {}",
                other.type_str()
            ))),
        };
    }
    let scalar = |value: &toml::Value| -> anyhow::Result<String> {
        match value {
            toml::Value::String(text) => Ok(text.clone()),
            toml::Value::Integer(n) => Ok(n.to_string()),
            other => Err(bad(&format!(
                "must be a string or a number, not {}",
                other.type_str()
            ))),
        }
    };
    let values: Vec<String> = match (value, arg.get_action()) {
        (toml::Value::Array(items), ArgAction::Append) => {
            items.iter().map(scalar).collect::<anyhow::Result<_>>()?
        }
        (toml::Value::Array(_), _) => {
            return Err(bad("takes one value, not a list"));
        }
        (single, _) => vec![scalar(single)?],
    };
    let mut words = Vec::new();
    for text in values {
        let word: OsString = format!("--{long}={text}").into();
        // The flag's own parser checks the value: one parse of `cohost [--listen=V] serve
        // [--key=V]` by a command line that reads no environment.
        let probe: Vec<OsString> = if arg.get_id() == "listen" {
            vec!["cohost".into(), word.clone(), "serve".into()]
        } else {
            vec!["cohost".into(), "serve".into(), word.clone()]
        };
        if let Err(error) = probe_command(root).try_get_matches_from(probe) {
            let reason = error
                .to_string()
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ")
                .to_string();
            let hint = arg
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect::<Vec<_>>();
            let hint = if hint.is_empty() {
                String::new()
            } else {
                format!(" (one of: {})", hint.join(", "))
            };
            return Err(bad(&format!("has a bad value `{text}`: {reason}{hint}")));
        }
        words.push(word);
    }
    Ok(words)
}

/// The command line with no environment variables: it checks one file value alone.
fn probe_command(root: &clap::Command) -> clap::Command {
    root.clone()
        .mut_args(|arg| arg.env(None))
        .mut_subcommand("serve", |serve| serve.mut_args(|arg| arg.env(None)))
}

/// Parses `argv` (a `cohost … serve …` command line) with the config file applied under its
/// flags and environment.
pub fn serve_settings(argv: Vec<OsString>) -> anyhow::Result<Settings> {
    let (file, explicit) = locate()?;
    let table = load(&file, explicit)?;
    let root = Cli::command();
    let first = root
        .clone()
        .try_get_matches_from(&argv)
        .map_err(|error| anyhow!("{error}"))?;
    let keys = settable(&root)?;
    let mut built = root.clone();
    built.build();
    let serve_command = built
        .find_subcommand("serve")
        .context("the command line has no `serve`")?
        .clone();
    let mut from_file = std::collections::BTreeSet::new();
    let mut argv = argv;
    let mut table = table;
    let profiles = table
        .as_mut()
        .and_then(|table| table.remove(PROFILES_TABLE));
    if let Some(table) = &table {
        let serve_matches = first
            .subcommand_matches("serve")
            .context("not a `serve` command line")?;
        for (key, value) in table {
            // `[bridge.*]`: the chat bridges' own settings (docs/matrix.md), read by them.
            if key == BRIDGE_TABLE {
                continue;
            }
            let Some(arg) = keys.iter().find(|arg| &key_of(arg) == key) else {
                let known: Vec<String> = keys.iter().map(key_of).collect();
                bail!(
                    "config file {}: unknown key `{key}` (the keys are: {}, and the `[profiles.NAME]` tables)",
                    file.display(),
                    known.join(", ")
                );
            };
            let matches = if arg.get_id() == "listen" {
                &first
            } else {
                serve_matches
            };
            let words = words_for(&root, arg, value, &file)?;
            // A flag or a variable for this setting, or for one it excludes (`watchers` and
            // `no-watchers`), wins over the file.
            let set_above = |id: &str| {
                matches!(
                    matches.value_source(id),
                    Some(ValueSource::CommandLine | ValueSource::EnvVariable)
                )
            };
            let mut excluded: Vec<String> = serve_command
                .get_arg_conflicts_with(arg)
                .iter()
                .map(|other| other.get_id().to_string())
                .collect();
            // Conflicts are declared on one side only.
            excluded.extend(
                serve_command
                    .get_arguments()
                    .filter(|other| {
                        serve_command
                            .get_arg_conflicts_with(other)
                            .iter()
                            .any(|c| c.get_id() == arg.get_id())
                    })
                    .map(|other| other.get_id().to_string()),
            );
            if set_above(arg.get_id().as_str()) || excluded.iter().any(|id| set_above(id)) {
                continue;
            }
            from_file.insert(key.clone());
            argv.extend(words);
        }
    }
    let matches = root
        .clone()
        .try_get_matches_from(&argv)
        .map_err(|error| anyhow!("config file {}: {error}", file.display()))?;
    let cli = Cli::from_arg_matches(&matches).map_err(|error| anyhow!("{error}"))?;
    let Command::Serve(args) = cli.command else {
        bail!("not a `serve` command line");
    };
    let serve_matches = matches
        .subcommand_matches("serve")
        .context("not a `serve` command line")?;
    let mut origins = Origins::default();
    let mut shown = Vec::new();
    for arg in &keys {
        let key = key_of(arg);
        let id = arg.get_id().as_str();
        let matches: &ArgMatches = if id == "listen" {
            &matches
        } else {
            serve_matches
        };
        let source = if from_file.contains(&key) {
            Source::File(file.clone())
        } else {
            match matches.value_source(id) {
                Some(ValueSource::CommandLine) => Source::Flag,
                Some(ValueSource::EnvVariable) => Source::Env(
                    arg.get_env()
                        .map(|v| v.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                ),
                _ => Source::Default,
            }
        };
        let value = match matches.get_raw(id) {
            Some(raw) => {
                let values: Vec<String> = raw.map(|v| v.to_string_lossy().into_owned()).collect();
                if matches!(arg.get_action(), ArgAction::Append) {
                    format!("[{}]", values.join(", "))
                } else {
                    values.join(",")
                }
            }
            None if id == "listen" => super::DEFAULT_LISTEN.to_string(),
            None if matches!(arg.get_action(), ArgAction::Append) => "[]".to_string(),
            None => "(unset)".to_string(),
        };
        let flag = format!("--{}", arg.get_long().unwrap_or(id));
        origins
            .sources
            .insert(key.clone(), (source.clone(), flag.clone()));
        shown.push((key, value, source));
    }
    Ok(Settings {
        home: cli.home,
        listen: cli.listen,
        args,
        origins,
        file,
        file_found: table.is_some(),
        shown,
        profiles,
    })
}

#[cfg(test)]
mod tests {
    use super::{BRIDGE_TABLE, PROFILES_TABLE, first_word, flatten_sections};

    #[test]
    fn sections_become_settings_but_the_bridges_table_stays_whole() {
        let table: toml::Table = toml::from_str(
            "machine = \"m\"\n[nats]\nurl = \"nats://127.0.0.1:4222\"\n[bridge.matrix]\nhomeserver = \"http://127.0.0.1:8008\"\n[profiles.review]\nmodel = \"m\"\n",
        )
        .unwrap();
        let flat = flatten_sections(table);
        assert_eq!(flat["machine"].as_str(), Some("m"));
        assert_eq!(flat["nats-url"].as_str(), Some("nats://127.0.0.1:4222"));
        assert_eq!(
            flat[BRIDGE_TABLE]["matrix"]["homeserver"].as_str(),
            Some("http://127.0.0.1:8008")
        );
        assert_eq!(flat[PROFILES_TABLE]["review"]["model"].as_str(), Some("m"));
        assert!(!flat.contains_key("bridge-matrix"), "{flat:?}");
        assert!(!flat.contains_key("profiles-review"), "{flat:?}");
    }

    #[test]
    fn the_program_of_a_command_line_is_its_first_word() {
        let check = |command: &str, expect: Option<&str>| {
            assert_eq!(first_word(command).as_deref(), expect, "{command:?}");
        };
        check("notify-send cohost", Some("notify-send"));
        check("  /opt/bin/notify --x", Some("/opt/bin/notify"));
        check("cat >> '/tmp/out'", Some("cat"));
        check("'/path with space/run' a", Some("/path with space/run"));
        check("\"/quoted/run\"", Some("/quoted/run"));
        check("tee|cat", Some("tee"));
        check("run;other", Some("run"));
        check("", None);
        check("   ", None);
        check("'unterminated", None);
    }
}
