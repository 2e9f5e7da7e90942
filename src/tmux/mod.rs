//! The tmux adapter: the only module that knows tmux's command syntax and output formats.
//!
//! [`Tmux`] runs `tmux [-S socket] …` commands. [`SessionCache`] keeps the server's sessions and
//! their directories in memory so that resolving an agent report costs no subprocess; it is
//! re-read when tmux tells us something changed (hooks installed by [`Tmux::install_hooks`] call
//! back into the daemon), when a lookup misses, and by a slow safety-net poll in `daemon`.
//! Targets are always tmux ids or exact names (`=name`), never fuzzy matches.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::process::Command;

use crate::protocol::{Bare, Field, Message, Piece};

/// The longest a tmux command may take before it is treated as failed.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// `tmux` could not be started (not installed, or not executable).
    #[error("failed to run tmux: {0}")]
    Spawn(std::io::Error),
    /// tmux ran and failed; `stderr` is what it said.
    #[error("tmux {args} failed: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("tmux {args} timed out after {COMMAND_TIMEOUT:?}")]
    Timeout { args: String },
}

/// One tmux session as cohost tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmuxSession {
    /// `$N`
    pub id: String,
    pub name: String,
    /// `#{session_path}`: the directory new panes of the session start in.
    pub dir: String,
    pub attached: bool,
    pub windows: u32,
}

/// A pane cohost opened: its id (`%N`) and the pid of the process it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneRef {
    pub pane_id: String,
    pub pid: u32,
}

/// Parses `#{pane_id} #{pane_pid}` output (public for the fuzz targets).
pub fn parse_pane_ref(out: &str) -> Option<PaneRef> {
    let mut fields = out.split_whitespace();
    let pane_id = fields.next()?.to_string();
    let pid = fields.next()?.parse().ok()?;
    pane_id.starts_with('%').then_some(PaneRef { pane_id, pid })
}

/// One pane of the server, for placing watched agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    pub pane_id: String,
    pub pid: u32,
    pub session: String,
}

/// The fields of `list-panes -a`, session name last (it may hold a tab).
const PANES_FORMAT: &str = "#{pane_id}\t#{pane_pid}\t#{session_name}";

/// Parses `list-panes -a -F PANES_FORMAT` output; lines that do not fit are skipped.
pub fn parse_list_panes(stdout: &str) -> Vec<PaneInfo> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let pane_id = fields.next()?.to_string();
            let pid = fields.next()?.parse().ok()?;
            let session = fields.next()?.to_string();
            pane_id.starts_with('%').then_some(PaneInfo {
                pane_id,
                pid,
                session,
            })
        })
        .collect()
}

/// The sessions of one tmux server at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionList {
    /// Whether a server answered on the socket.
    pub running: bool,
    pub server_pid: Option<u32>,
    pub sessions: Vec<TmuxSession>,
}

/// Runs tmux commands against one server socket.
#[derive(Debug, Clone)]
pub struct Tmux {
    socket: Option<PathBuf>,
}

const SEP: char = '\t';

/// The fields of `list-sessions`, name last so a tab in a name cannot shift the others.
const LIST_FORMAT: &str = "#{pid}\t#{session_id}\t#{session_attached}\t#{session_windows}\t#{session_path}\t#{session_name}";

impl Tmux {
    pub fn new(socket: Option<PathBuf>) -> Self {
        Tmux { socket }
    }

    pub fn socket(&self) -> Option<&Path> {
        self.socket.as_deref()
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        if let Some(socket) = &self.socket {
            command.arg("-S").arg(socket);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Runs `tmux ARGS` and returns its stdout.
    pub async fn run(&self, args: &[&str]) -> Result<String, TmuxError> {
        let mut command = self.command();
        command.args(args);
        let output = tokio::time::timeout(COMMAND_TIMEOUT, command.output())
            .await
            .map_err(|_| TmuxError::Timeout {
                args: args.join(" "),
            })?
            .map_err(TmuxError::Spawn)?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(TmuxError::Failed {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            })
        }
    }

    /// Lists the server's sessions. A server that is not running is an empty list, not an error.
    pub async fn list_sessions(&self) -> Result<SessionList, TmuxError> {
        match self.run(&["list-sessions", "-F", LIST_FORMAT]).await {
            Ok(stdout) => Ok(parse_list_sessions(&stdout)),
            Err(TmuxError::Failed { stderr, .. }) if is_no_server(&stderr) => {
                Ok(SessionList::default())
            }
            Err(error) => Err(error),
        }
    }

    /// Every pane of the server with its process and session (for placing watched agents: the
    /// pane whose process is an ancestor of the agent's). A server that is not running has none.
    pub async fn list_panes(&self) -> Result<Vec<PaneInfo>, TmuxError> {
        match self.run(&["list-panes", "-a", "-F", PANES_FORMAT]).await {
            Ok(stdout) => Ok(parse_list_panes(&stdout)),
            Err(TmuxError::Failed { stderr, .. }) if is_no_server(&stderr) => Ok(Vec::new()),
            Err(error) => Err(error),
        }
    }

    /// Runs `tmux ARGS` with `input` on its stdin (for `load-buffer -`).
    pub async fn run_with_input(&self, args: &[&str], input: &[u8]) -> Result<String, TmuxError> {
        use tokio::io::AsyncWriteExt;
        let mut command = self.command();
        command.args(args).stdin(Stdio::piped());
        let mut child = command.spawn().map_err(TmuxError::Spawn)?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input).await.map_err(TmuxError::Spawn)?;
            drop(stdin);
        }
        let output = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| TmuxError::Timeout {
                args: args.join(" "),
            })?
            .map_err(TmuxError::Spawn)?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(TmuxError::Failed {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            })
        }
    }

    /// Opens a pane running `argv` (exec'd directly, no shell) in a new window of `session`,
    /// creating the session when it does not exist. Returns the pane's id and process id.
    pub async fn open_pane(
        &self,
        session: &str,
        window_name: &str,
        cwd: &Path,
        env: &[(String, String)],
        argv: &[String],
    ) -> Result<PaneRef, TmuxError> {
        let exists = self
            .run(&["has-session", "-t", &format!("={session}")])
            .await
            .is_ok();
        let cwd = cwd.to_string_lossy().into_owned();
        let mut args: Vec<String> = if exists {
            vec![
                "new-window".into(),
                "-d".into(),
                "-t".into(),
                format!("={session}:"),
            ]
        } else {
            vec![
                "new-session".into(),
                "-d".into(),
                "-s".into(),
                session.into(),
                "-x".into(),
                "200".into(),
                "-y".into(),
                "50".into(),
            ]
        };
        args.extend([
            "-P".into(),
            "-F".into(),
            "#{pane_id} #{pane_pid}".into(),
            "-n".into(),
            window_name.into(),
            "-c".into(),
            cwd,
        ]);
        for (key, value) in env {
            args.push("-e".into());
            args.push(format!("{key}={value}"));
        }
        args.push("--".into());
        args.extend(argv.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.run(&refs).await?;
        // A detached session has no client to size it from; `default-size` keeps panes usable
        // (`window-size manual` crashes tmux 3.3a without a client). Focus events keep the
        // TUI's footer free of tmux hints.
        let _ = self.run(&["set-option", "-s", "focus-events", "on"]).await;
        parse_pane_ref(&out).ok_or_else(|| TmuxError::Failed {
            args: "new-window -P".into(),
            stderr: format!("unexpected answer `{}`", out.trim()),
        })
    }

    /// The pid of the process a pane runs, or `None` when the pane is gone.
    pub async fn pane_pid(&self, pane_id: &str) -> Option<u32> {
        self.run(&["display-message", "-p", "-t", pane_id, "#{pane_pid}"])
            .await
            .ok()
            .and_then(|out| out.trim().parse().ok())
    }

    /// The pane's visible text.
    pub async fn capture(&self, pane_id: &str) -> Result<String, TmuxError> {
        self.run(&["capture-pane", "-p", "-t", pane_id]).await
    }

    /// Pastes `text` into the pane as one bracketed paste (newlines do not submit).
    pub async fn paste(&self, pane_id: &str, text: &str) -> Result<(), TmuxError> {
        let buffer = format!("cohost-{}", pane_id.trim_start_matches('%'));
        self.run_with_input(&["load-buffer", "-b", &buffer, "-"], text.as_bytes())
            .await?;
        self.run(&["paste-buffer", "-p", "-d", "-b", &buffer, "-t", pane_id])
            .await?;
        Ok(())
    }

    /// Sends tmux key names (`Enter`, `Escape`) to the pane, in one `send-keys`.
    pub async fn send_keys(&self, pane_id: &str, keys: &[&str]) -> Result<(), TmuxError> {
        let mut args = vec!["send-keys", "-t", pane_id];
        args.extend_from_slice(keys);
        self.run(&args).await.map(|_| ())
    }

    pub async fn kill_pane(&self, pane_id: &str) -> Result<(), TmuxError> {
        self.run(&["kill-pane", "-t", pane_id]).await.map(|_| ())
    }

    /// Installs cohost's hooks on the server under `index`, so they sit beside the user's own
    /// hooks of the same names instead of replacing them. `focus_command` and `changed_command`
    /// are shell commands; the focus one gets the shell-quoted session name appended.
    pub async fn install_hooks(
        &self,
        index: u32,
        focus_command: &str,
        changed_command: &str,
    ) -> Result<(), TmuxError> {
        for (hook, command) in hook_commands(focus_command, changed_command) {
            let name = format!("{hook}[{index}]");
            self.run(&["set-hook", "-g", &name, &command]).await?;
        }
        Ok(())
    }

    /// Removes the hooks installed under `index`; a server that is gone is fine.
    pub async fn remove_hooks(&self, index: u32) -> Result<(), TmuxError> {
        for hook in HOOKS {
            let name = format!("{hook}[{index}]");
            match self.run(&["set-hook", "-gu", &name]).await {
                Ok(_) => {}
                Err(TmuxError::Failed { stderr, .. }) if is_no_server(&stderr) => return Ok(()),
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

/// The hooks cohost installs: the first reports focus (it also fires when a client attaches),
/// the rest report a changed session list.
const HOOKS: [&str; 4] = [
    "client-session-changed",
    "session-created",
    "session-closed",
    "session-renamed",
];

fn hook_commands(focus_command: &str, changed_command: &str) -> Vec<(&'static str, String)> {
    HOOKS
        .iter()
        .enumerate()
        .map(|(i, hook)| {
            let shell = if i == 0 {
                // `#{q:…}` makes tmux shell-escape the name when run-shell expands it.
                format!("{focus_command} #{{q:session_name}}")
            } else {
                changed_command.to_string()
            };
            (*hook, format!("run-shell -b {}", tmux_quote(&shell)))
        })
        .collect()
}

/// Quotes a string as one tmux command argument.
fn tmux_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Quotes a string as one POSIX shell word.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn is_no_server(stderr: &str) -> bool {
    stderr.contains("no server running")
        || stderr.contains("error connecting to")
        || stderr.contains("No such file or directory")
}

/// Parses `list-sessions -F LIST_FORMAT` output; a line that does not fit is skipped (public
/// for the fuzz targets).
pub fn parse_list_sessions(stdout: &str) -> SessionList {
    let mut list = SessionList {
        running: true,
        server_pid: None,
        sessions: Vec::new(),
    };
    for line in stdout.lines() {
        let mut fields = line.splitn(6, SEP);
        let (Some(pid), Some(id), Some(attached), Some(windows), Some(dir), Some(name)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            tracing::warn!(line, "unexpected tmux list-sessions line");
            continue;
        };
        list.server_pid = pid.parse().ok();
        list.sessions.push(TmuxSession {
            id: id.to_string(),
            name: name.to_string(),
            dir: dir.to_string(),
            attached: attached != "0",
            windows: windows.parse().unwrap_or(0),
        });
    }
    list.sessions.sort_by(|a, b| a.name.cmp(&b.name));
    list
}

/// Why a report could not be tied to a session; the message names what was tried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ResolveError {
    /// Names the fields tried as values (each surface names them its own way).
    pub message: Message,
}

/// Resolves against a list: exact `tmux_session` first; else `project_dir` equal to a session's
/// directory; else the session whose directory is the longest parent or child of `project_dir`.
pub fn resolve(
    list: &SessionList,
    tmux_session: Option<&str>,
    project_dir: Option<&str>,
) -> Result<String, ResolveError> {
    if let Some(name) = tmux_session
        && list.sessions.iter().any(|session| session.name == name)
    {
        return Ok(name.to_string());
    }
    if let Some(dir) = project_dir {
        let dir = trim_dir(dir);
        if let Some(session) = list.sessions.iter().find(|s| trim_dir(&s.dir) == dir) {
            return Ok(session.name.clone());
        }
        let best = list
            .sessions
            .iter()
            .filter(|s| {
                let session_dir = trim_dir(&s.dir);
                !session_dir.is_empty()
                    && (is_within(dir, session_dir) || is_within(session_dir, dir))
            })
            .max_by_key(|s| trim_dir(&s.dir).len());
        if let Some(session) = best {
            return Ok(session.name.clone());
        }
    }
    let mut pieces = vec![Piece::from("no tmux session matches ")];
    if let Some(name) = tmux_session {
        pieces.extend([Bare(Field::TmuxSession).into(), format!(" `{name}`").into()]);
    }
    if let Some(dir) = project_dir {
        if tmux_session.is_some() {
            pieces.push(" or ".into());
        }
        pieces.extend([
            Bare(Field::ProjectDir).into(),
            format!(" `{dir}` (exact, parent and child directories)").into(),
        ]);
    }
    let known = if list.running {
        format!("{} live tmux session(s)", list.sessions.len())
    } else {
        "no tmux server running on the configured socket".to_string()
    };
    pieces.push(format!(" among {known}").into());
    Err(ResolveError {
        message: Message::from_pieces(pieces),
    })
}

fn trim_dir(dir: &str) -> &str {
    if dir.len() > 1 {
        dir.trim_end_matches('/')
    } else {
        dir
    }
}

/// Whether `inner` is strictly inside `outer` (as directories, not as string prefixes).
fn is_within(inner: &str, outer: &str) -> bool {
    if outer == "/" {
        return inner.len() > 1;
    }
    inner.len() > outer.len() && inner.starts_with(outer) && inner.as_bytes()[outer.len()] == b'/'
}

/// The in-memory copy of the server's sessions.
pub struct SessionCache {
    tmux: Tmux,
    current: RwLock<Arc<SessionList>>,
    refresh_lock: tokio::sync::Mutex<()>,
    /// Counts completed refreshes, so callers that queued behind a refresh can reuse its result.
    generation: AtomicU64,
}

impl SessionCache {
    pub fn new(tmux: Tmux) -> Self {
        SessionCache {
            tmux,
            current: RwLock::new(Arc::new(SessionList::default())),
            refresh_lock: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
        }
    }

    pub fn tmux(&self) -> &Tmux {
        &self.tmux
    }

    /// The cached list; no subprocess.
    pub fn get(&self) -> Arc<SessionList> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Re-reads the sessions. Concurrent callers share one `tmux` run: whoever arrives while a
    /// refresh is under way waits for the next one to start after its own arrival, never more.
    pub async fn refresh(&self) -> Arc<SessionList> {
        let arrived = self.generation.load(Ordering::Acquire);
        let _guard = self.refresh_lock.lock().await;
        // A refresh that started after we arrived has already completed: its result is fresh enough.
        if self.generation.load(Ordering::Acquire) >= arrived + 2 {
            return self.get();
        }
        match self.tmux.list_sessions().await {
            Ok(list) => {
                let list = Arc::new(list);
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&list);
                self.generation.fetch_add(1, Ordering::AcqRel);
                list
            }
            Err(error) => {
                tracing::warn!(%error, "could not list tmux sessions; keeping the previous list");
                self.generation.fetch_add(1, Ordering::AcqRel);
                self.get()
            }
        }
    }

    /// Resolves from the cache, and on a miss once more after a refresh.
    pub async fn resolve(
        &self,
        tmux_session: Option<&str>,
        project_dir: Option<&str>,
    ) -> Result<String, ResolveError> {
        match resolve(&self.get(), tmux_session, project_dir) {
            Ok(name) => Ok(name),
            Err(_) => resolve(&*self.refresh().await, tmux_session, project_dir),
        }
    }

    /// Whether `name` is a live session (cache first, then one refresh).
    pub async fn contains(&self, name: &str) -> bool {
        self.resolve(Some(name), None).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(sessions: &[(&str, &str)]) -> SessionList {
        SessionList {
            running: true,
            server_pid: Some(1),
            sessions: sessions
                .iter()
                .enumerate()
                .map(|(i, (name, dir))| TmuxSession {
                    id: format!("${i}"),
                    name: name.to_string(),
                    dir: dir.to_string(),
                    attached: false,
                    windows: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn parses_list_sessions_with_tabs_in_names() {
        let out = "42\t$0\t1\t2\t/home/me/proj\twork\n42\t$1\t0\t1\t/tmp\tname\twith tab\n";
        let list = parse_list_sessions(out);
        assert_eq!(list.server_pid, Some(42));
        assert_eq!(list.sessions.len(), 2);
        assert_eq!(list.sessions[0].name, "name\twith tab");
        assert_eq!(list.sessions[1].name, "work");
        assert!(list.sessions[1].attached);
        assert_eq!(list.sessions[1].windows, 2);
    }

    #[test]
    fn resolves_by_name_then_exact_dir_then_longest_relative() {
        let sessions = list(&[
            ("root", "/home/me"),
            ("proj", "/home/me/proj"),
            ("other", "/srv/other/"),
        ]);
        assert_eq!(resolve(&sessions, Some("root"), None).unwrap(), "root");
        assert_eq!(
            resolve(&sessions, Some("missing"), Some("/home/me/proj")).unwrap(),
            "proj"
        );
        assert_eq!(
            resolve(&sessions, None, Some("/srv/other")).unwrap(),
            "other"
        );
        // Child of a session dir: the deepest parent wins.
        assert_eq!(
            resolve(&sessions, None, Some("/home/me/proj/src/lib")).unwrap(),
            "proj"
        );
        // Parent of a session dir.
        assert_eq!(resolve(&sessions, None, Some("/srv")).unwrap(), "other");
        // A sibling that merely shares a string prefix with `proj` falls back to its parent.
        assert_eq!(
            resolve(&sessions, None, Some("/home/me/projx")).unwrap(),
            "root"
        );
        assert!(resolve(&sessions, None, Some("/home/m")).is_err());
    }

    #[test]
    fn unresolvable_names_what_was_tried() {
        let sessions = list(&[("a", "/x")]);
        let err = resolve(&sessions, Some("nope"), Some("/y/z")).unwrap_err();
        let message = err.message.to_string();
        assert!(message.contains("tmuxSession `nope`"), "{}", message);
        assert!(message.contains("projectDir `/y/z`"), "{message}");
        assert!(message.contains("1 live tmux session"), "{}", message);
        let err = resolve(&SessionList::default(), Some("a"), None).unwrap_err();
        let message = err.message.to_string();
        assert!(message.contains("no tmux server running"), "{}", message);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("abc/d-e"), "abc/d-e");
        assert_eq!(shell_quote("a b'c"), "'a b'\\''c'");
        assert_eq!(tmux_quote("x 'y'"), "'x '\\''y'\\'''");
    }
}
