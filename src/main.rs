//! The `cohost` binary: parses the command line and runs one command.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use serde_json::json;

use cohost::cli::{Cli, Command, LogCommand, TaskCommand};
use cohost::client::{Client, render_event, render_state};
use cohost::config::ServeConfig;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if let Some(io) = error.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("cohost: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(_) => {
            // The config file applies under the flags and the environment (issue 16).
            let settings = cohost::config::file::serve_settings(std::env::args_os().collect())?;
            let config = ServeConfig::from_settings(
                settings.home,
                settings.listen,
                &settings.args,
                &settings.origins,
            )?;
            serve(config)
        }
        Command::State { json } => {
            let client = Client::new(cli.home)?;
            let state = client.state()?;
            let mut out = std::io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &state)?;
                writeln!(out)?;
            } else {
                render_state(&state, &mut out)?;
            }
            Ok(())
        }
        Command::Explain {
            session,
            agent,
            json,
        } => {
            let client = Client::new(cli.home)?;
            let view = client.explain(&session, &agent)?;
            let mut out = std::io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &view)?;
                writeln!(out)?;
            } else {
                cohost::client::render_explain(&view, &mut out)?;
            }
            Ok(())
        }
        Command::Events {
            id,
            after,
            follow,
            json,
        } => {
            let client = Client::new(cli.home)?;
            let Some(id) = id else {
                return client.print_events(after, follow, &mut std::io::stdout().lock());
            };
            let mut out = std::io::stdout().lock();
            client.for_each_event(
                &format!("/api/sessions/{id}/events"),
                after,
                follow,
                |line| {
                    if json {
                        writeln!(out, "{line}")?;
                    } else if let Some(text) = render_event(line) {
                        writeln!(out, "{text}")?;
                    }
                    out.flush()
                },
            )
        }
        Command::Start(args) => {
            let client = Client::new(cli.home)?;
            let cwd = match args.cwd {
                Some(cwd) => std::path::absolute(&cwd).unwrap_or(cwd),
                None => std::env::current_dir()?,
            };
            let mut body = json!({ "runtime": args.runtime, "cwd": cwd });
            let fields = [
                ("model", args.model),
                ("approvalPolicy", args.approval_policy),
                ("permissionMode", args.permission_mode),
                ("sandbox", args.sandbox),
                ("prompt", args.prompt),
                ("idempotencyKey", args.idempotency_key),
            ];
            for (key, value) in fields {
                if let Some(value) = value {
                    body[key] = json!(value);
                }
            }
            if args.terminal {
                body["terminal"] = json!(true);
            }
            if let Some(tmux_session) = args.tmux_session {
                body["tmuxSession"] = json!(tmux_session);
            }
            let answer: serde_json::Value = client.post("/api/sessions", &body)?;
            println!("{}", answer["session"]["id"].as_str().unwrap_or(""));
            if let Some(error) = answer.get("injectError") {
                eprintln!("cohost: the prompt was not sent: {error}");
            }
            Ok(())
        }
        Command::Sessions { json } => {
            let client = Client::new(cli.home)?;
            let answer: serde_json::Value = client.get("/api/sessions")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
                return Ok(());
            }
            let sessions = answer["sessions"].as_array().cloned().unwrap_or_default();
            if sessions.is_empty() {
                println!("no sessions");
            }
            for s in sessions {
                let turn = if s["activeTurnId"].is_string() {
                    "running"
                } else {
                    "idle"
                };
                println!(
                    "{:<20} {:<7} {:<10} {:<8} {:>3} turns  {:<7} {:>3} waiting  {}",
                    s["id"].as_str().unwrap_or(""),
                    s["runtime"].as_str().unwrap_or(""),
                    s["state"].as_str().unwrap_or(""),
                    turn,
                    s["turns"],
                    s["lease"]["holder"].as_str().unwrap_or("managed"),
                    s["waitingTasks"].as_u64().unwrap_or(0),
                    s["cwd"].as_str().unwrap_or("")
                );
            }
            Ok(())
        }
        Command::Send {
            id,
            text,
            idempotency_key,
        } => {
            let client = Client::new(cli.home)?;
            let mut body = json!({ "text": text });
            if let Some(key) = idempotency_key {
                body["idempotencyKey"] = json!(key);
            }
            let answer: serde_json::Value =
                client.post(&format!("/api/sessions/{id}/messages"), &body)?;
            println!(
                "{} {} (task {})",
                answer["outcome"].as_str().unwrap_or(""),
                answer["turnId"].as_str().unwrap_or(""),
                answer["taskId"].as_str().unwrap_or("?")
            );
            Ok(())
        }
        Command::Task(command) => run_task(Client::new(cli.home)?, command),
        Command::Queue { id, json } => {
            let client = Client::new(cli.home)?;
            let queue: serde_json::Value = client.get(&format!("/api/sessions/{id}/queue"))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&queue)?);
                return Ok(());
            }
            let lease = &queue["lease"];
            println!(
                "lease: {} (generation {})",
                lease["holder"].as_str().unwrap_or("?"),
                lease["generation"]
            );
            for (label, list) in [
                ("running", "running"),
                ("waiting", "pending"),
                ("recent", "recent"),
            ] {
                for task in queue[list].as_array().into_iter().flatten() {
                    let detail = task["waitingReason"]
                        .as_str()
                        .or(task["cancelOutcome"].as_str())
                        .unwrap_or("");
                    println!(
                        "{label:8} {} {:10} {:9} {detail:24} {}",
                        task["taskId"].as_str().unwrap_or(""),
                        task["state"].as_str().unwrap_or(""),
                        task["phase"].as_str().unwrap_or(""),
                        task["promptPreview"]
                            .as_str()
                            .unwrap_or("")
                            .lines()
                            .next()
                            .unwrap_or("")
                    );
                }
            }
            Ok(())
        }
        Command::Takeover { id } => {
            let client = Client::new(cli.home)?;
            let answer: serde_json::Value = client.post(
                &format!("/api/sessions/{id}/lease"),
                &json!({ "action": "takeover", "by": "cli" }),
            )?;
            println!(
                "{} now holds {id} (generation {})",
                answer["lease"]["holder"].as_str().unwrap_or("?"),
                answer["lease"]["generation"]
            );
            Ok(())
        }
        Command::Release { id, drop_queued } => {
            let client = Client::new(cli.home)?;
            let answer: serde_json::Value = client.post(
                &format!("/api/sessions/{id}/lease"),
                &json!({ "action": "release", "by": "cli", "dropQueued": drop_queued }),
            )?;
            println!(
                "{id} is {} (generation {}); {} waiting task(s) dropped",
                answer["lease"]["holder"].as_str().unwrap_or("?"),
                answer["lease"]["generation"],
                answer["dropped"].as_array().map_or(0, Vec::len)
            );
            Ok(())
        }
        Command::Interrupt { id } => {
            let client = Client::new(cli.home)?;
            let answer: serde_json::Value =
                client.post(&format!("/api/sessions/{id}/interrupt"), &json!({}))?;
            if answer["interrupted"].as_bool() == Some(true) {
                println!("interrupted");
            } else {
                println!("no turn was running");
            }
            Ok(())
        }
        Command::Requests { id, all, json } => {
            let client = Client::new(cli.home)?;
            let answer: serde_json::Value = client.get(&format!("/api/sessions/{id}/requests"))?;
            let requests: Vec<&serde_json::Value> = answer["requests"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| all || r["pending"] == true)
                .collect();
            let mut out = std::io::stdout().lock();
            if json {
                // The route's shape, `{"requests": [...]}`, pending ones only unless --all.
                serde_json::to_writer_pretty(&mut out, &json!({ "requests": requests }))?;
                writeln!(out)?;
                return Ok(());
            }
            if requests.is_empty() {
                writeln!(out, "nothing is waiting for an answer")?;
            }
            for r in requests {
                let request = &r["request"];
                let state = if r["pending"] == true {
                    "pending"
                } else {
                    "resolved"
                };
                writeln!(
                    out,
                    "{}  {}  {state}",
                    request["requestId"].as_str().unwrap_or(""),
                    request["kind"].as_str().unwrap_or("")
                )?;
                for q in request["questions"].as_array().into_iter().flatten() {
                    let options: Vec<&str> = q["options"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|o| o["label"].as_str())
                        .collect();
                    writeln!(
                        out,
                        "  {}: {}  [{}]",
                        q["id"].as_str().unwrap_or(""),
                        q["question"].as_str().unwrap_or(""),
                        options.join(" | ")
                    )?;
                }
                for field in ["plan", "message"] {
                    if let Some(text) = request[field].as_str() {
                        writeln!(out, "  {}", text.replace('\n', "\n  "))?;
                    }
                }
                if let Some(decisions) = request["decisions"].as_array() {
                    let decisions: Vec<&str> =
                        decisions.iter().filter_map(|d| d.as_str()).collect();
                    writeln!(out, "  decisions: {}", decisions.join(", "))?;
                }
            }
            Ok(())
        }
        Command::Answer {
            id,
            request,
            answers,
            decision,
            feedback,
            mode,
            content,
        } => {
            let client = Client::new(cli.home)?;
            let mut body = json!({});
            if !answers.is_empty() {
                let mut map = serde_json::Map::new();
                for pair in &answers {
                    let Some((question, text)) = pair.split_once('=') else {
                        anyhow::bail!("--answer takes QUESTION_ID=TEXT, got `{pair}`");
                    };
                    match map.get_mut(question) {
                        Some(serde_json::Value::Array(list)) => list.push(json!(text)),
                        _ => {
                            map.insert(question.to_string(), json!([text]));
                        }
                    }
                }
                body["answers"] = serde_json::Value::Object(map);
            }
            for (field, value) in [
                ("decision", decision),
                ("feedback", feedback),
                ("mode", mode),
            ] {
                if let Some(value) = value {
                    body[field] = json!(value);
                }
            }
            if let Some(content) = content {
                body["content"] = serde_json::from_str(&content)
                    .map_err(|e| anyhow::anyhow!("--content is not JSON: {e}"))?;
            }
            let _: serde_json::Value =
                client.post(&format!("/api/sessions/{id}/requests/{request}"), &body)?;
            println!("answered {request}");
            Ok(())
        }
        Command::Mode { id, mode } => {
            let client = Client::new(cli.home)?;
            let answer: serde_json::Value = client.put(
                &format!("/api/sessions/{id}/mode"),
                &json!({ "mode": mode }),
            )?;
            if answer["ok"] == true {
                println!("{mode}");
                Ok(())
            } else {
                anyhow::bail!(
                    "{}",
                    answer["message"].as_str().unwrap_or("the mode was not set")
                )
            }
        }
        Command::Approve {
            id,
            approval,
            decision,
        } => {
            let client = Client::new(cli.home)?;
            let _: serde_json::Value = client.post(
                &format!("/api/sessions/{id}/approvals/{approval}"),
                &json!({ "decision": decision }),
            )?;
            println!("{decision}");
            Ok(())
        }
        Command::Goal {
            id,
            text,
            clear,
            status,
            token_budget,
        } => {
            let client = Client::new(cli.home)?;
            let path = format!("/api/sessions/{id}/goal");
            let answer: serde_json::Value = if clear {
                client.delete(&path)?
            } else if text.is_some() || status.is_some() || token_budget.is_some() {
                let mut body = json!({});
                if let Some(text) = text {
                    body["objective"] = json!(text);
                }
                if let Some(status) = status {
                    body["status"] = json!(status);
                }
                if let Some(budget) = token_budget {
                    body["tokenBudget"] = json!(budget);
                }
                client.put(&path, &body)?
            } else {
                client.get(&path)?
            };
            print_capability(&answer)
        }
        Command::Fork { id, after_turn } => {
            let client = Client::new(cli.home)?;
            let mut body = json!({});
            if let Some(turn) = after_turn {
                body["afterTurnId"] = json!(turn);
            }
            let answer: serde_json::Value =
                client.post(&format!("/api/sessions/{id}/fork"), &body)?;
            if answer["ok"].as_bool() == Some(true) {
                println!("{}", answer["data"]["session"]["id"].as_str().unwrap_or(""));
                Ok(())
            } else {
                print_capability(&answer)
            }
        }
        Command::Models { json } => {
            let client = Client::new(cli.home)?;
            let answer: serde_json::Value = client.get("/api/models?runtime=codex")?;
            if json || answer["ok"].as_bool() != Some(true) {
                return print_capability(&answer);
            }
            for model in answer["data"]["data"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                println!(
                    "{:<28} {}",
                    model["id"].as_str().unwrap_or(""),
                    model["displayName"].as_str().unwrap_or("")
                );
            }
            Ok(())
        }
        Command::Attach { id } => {
            let client = Client::new(cli.home)?;
            let view: serde_json::Value = client.get(&format!("/api/sessions/{id}"))?;
            let (Some(pane), Some(tmux_session)) =
                (view["paneId"].as_str(), view["tmuxSession"].as_str())
            else {
                anyhow::bail!(
                    "session {id} has no terminal (codex: `cohost start codex --terminal`, or POST /api/sessions/{id}/terminal)"
                );
            };
            let tmux = client.tmux_command();
            // Make the session's pane the active one of its window and session, then move
            // the user's client there: switch inside tmux, attach from outside.
            let _ = tmux(&["select-window", "-t", pane]).status();
            let _ = tmux(&["select-pane", "-t", pane]).status();
            let status = if std::env::var_os("TMUX").is_some() {
                tmux(&["switch-client", "-t", tmux_session]).status()?
            } else {
                tmux(&["attach-session", "-t", tmux_session]).status()?
            };
            if !status.success() {
                anyhow::bail!("tmux could not switch to {tmux_session} ({pane})");
            }
            Ok(())
        }
        Command::Relaunch { id } => {
            let client = Client::new(cli.home)?;
            let _: serde_json::Value =
                client.post(&format!("/api/sessions/{id}/relaunch"), &json!({}))?;
            println!("relaunching");
            Ok(())
        }
        Command::Doctor { json } => {
            let client = Client::new(cli.home)?;
            let answer: serde_json::Value = client.get("/api/doctor")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
            } else {
                print_doctor(&answer);
            }
            if answer["ok"].as_bool() == Some(true) {
                Ok(())
            } else {
                anyhow::bail!("doctor found issues")
            }
        }
        Command::Event(args) => {
            let client = Client::new(cli.home)?;
            let project_dir = args.project_dir.map(|dir| {
                std::path::absolute(&dir)
                    .unwrap_or(dir)
                    .to_string_lossy()
                    .into_owned()
            });
            let mut body = json!({ "agent": args.agent, "status": args.status });
            let fields = [
                ("tmuxSession", args.session.map(serde_json::Value::from)),
                ("projectDir", project_dir.map(serde_json::Value::from)),
                ("threadId", args.thread_id.map(serde_json::Value::from)),
                ("threadName", args.thread_name.map(serde_json::Value::from)),
                ("lastUserPrompt", args.prompt.map(serde_json::Value::from)),
                ("paneId", args.pane_id.map(serde_json::Value::from)),
                (
                    "liveness",
                    args.liveness
                        .map(|l| serde_json::to_value(l).unwrap_or_default()),
                ),
                ("ts", args.ts.map(serde_json::Value::from)),
            ];
            for (key, value) in fields {
                if let Some(value) = value {
                    body[key] = value;
                }
            }
            let answer: serde_json::Value = client.post("/api/agent-event", &body)?;
            println!("{answer}");
            Ok(())
        }
        Command::Focus { session, source } => {
            let client = Client::new(cli.home)?;
            let _: serde_json::Value = client.post(
                "/api/focus",
                &json!({ "session": session, "source": source }),
            )?;
            Ok(())
        }
        Command::Token => {
            let client = Client::new(cli.home)?;
            println!("{}", client.token()?);
            Ok(())
        }
        Command::Web => {
            let client = Client::new(cli.home)?;
            // The address comes from the daemon, over its socket: it fails with "not running"
            // rather than print a URL nothing answers, or one a squatter of the port answers.
            let listen = client.listen_addr()?;
            println!("{}", web_url(&listen, &client.token()?));
            Ok(())
        }
        Command::Mcp => cohost::commands::mcp_bridge::run(cli.home),
        Command::Log(LogCommand::Verify { json }) => {
            let home = cohost::config::resolve_home(cli.home)?;
            let report = cohost::core::verify(&home)?;
            let mut out = std::io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &report)?;
                writeln!(out)?;
            } else {
                report.render(&mut out)?;
            }
            if report.damage.is_some() {
                anyhow::bail!(
                    "the event log in {} is damaged; the next `cohost serve` quarantines the bad lines and reports the rest",
                    home.display()
                );
            }
            Ok(())
        }
        Command::Daily(command) => cohost::commands::run(cli.home, command),
        Command::TmuxRefresh => {
            let client = Client::new(cli.home)?;
            let _: serde_json::Value = client.post("/api/tmux/refresh", &json!({}))?;
            Ok(())
        }
    }
}

/// `http://ADDR/#token=TOKEN`: the fragment never leaves the browser. A daemon listening on
/// every address is reached on loopback (its guard only trusts a loopback `Origin`).
fn web_url(base: &str, token: &str) -> String {
    let addr = base.strip_prefix("http://").unwrap_or(base);
    let addr = match addr.parse::<std::net::SocketAddr>() {
        Ok(mut socket) if socket.ip().is_unspecified() => {
            socket.set_ip(match socket {
                std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
            socket.to_string()
        }
        _ => addr.to_string(),
    };
    let token: String = token
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("http://{addr}/#token={token}")
}

fn serve(config: ServeConfig) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (first_signal, signalled) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(signals(first_signal));
        cohost::daemon::run(
            config,
            async move {
                let _ = signalled.await;
            },
            |addr| {
                // One machine-readable line on stdout for scripts and tests; logs go to stderr.
                println!("cohost listening on {addr}");
                let _ = std::io::stdout().flush();
            },
        )
        .await
    })
}

/// The first SIGINT or SIGTERM starts a graceful shutdown; a second one forces exit.
async fn signals(first: tokio::sync::oneshot::Sender<()>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down (signal again to force)");
    let _ = first.send(());
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    tracing::warn!("second signal: exiting now");
    std::process::exit(130);
}

/// Prints a capability answer: its data, or why it failed (and fails the command).
fn print_capability(answer: &serde_json::Value) -> anyhow::Result<()> {
    if answer["ok"].as_bool() == Some(true) {
        println!("{}", serde_json::to_string_pretty(&answer["data"])?);
        Ok(())
    } else {
        anyhow::bail!(
            "{}: {}",
            answer["reason"].as_str().unwrap_or("error"),
            answer["message"].as_str().unwrap_or("")
        )
    }
}

fn print_doctor(answer: &serde_json::Value) {
    let yes = |v: &serde_json::Value| match v.as_bool() {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    println!(
        "codex found:    {} {}",
        yes(&answer["codexFound"]),
        text(&answer["codexPath"])
    );
    println!("codex version:  {}", text(&answer["codexVersion"]));
    println!(
        "logged in:      {} {}",
        yes(&answer["loggedIn"]),
        text(&answer["authMode"])
    );
    println!("session store:  {}", yes(&answer["sessionStoreWritable"]));
    println!("codex sessions: {}", yes(&answer["codexSessionsReadable"]));
    let range = |supported: &serde_json::Value| {
        format!(
            "tested with {}–{}",
            text(&supported["oldest"]),
            text(&supported["newest"])
        )
    };
    println!("codex tested:   {}", range(&answer["codexSupported"]));
    let claude = &answer["claude"];
    println!(
        "claude found:   {} {}",
        yes(&claude["found"]),
        text(&claude["path"])
    );
    println!(
        "claude version: {} ({})",
        text(&claude["version"]),
        range(&claude["supported"])
    );
    println!("claude hooks:   {}", yes(&claude["hooksInstallable"]));
    let modes: Vec<String> = claude["allowedPermissionModes"]
        .as_array()
        .map(|m| m.iter().map(&text).collect())
        .unwrap_or_default();
    println!(
        "claude mode:    {} (allowed: {})",
        text(&claude["permissionMode"]),
        modes.join(", ")
    );
    for warning in answer["warnings"].as_array().cloned().unwrap_or_default() {
        println!("warning: {}", text(&warning));
    }
    for issue in answer["issues"].as_array().cloned().unwrap_or_default() {
        println!("issue: {}", text(&issue));
    }
}

fn run_task(client: Client, command: TaskCommand) -> anyhow::Result<()> {
    let print = |value: &serde_json::Value| -> anyhow::Result<()> {
        println!("{}", serde_json::to_string_pretty(value)?);
        Ok(())
    };
    match command {
        TaskCommand::Send {
            id,
            text,
            idempotency_key,
        } => {
            let mut body = json!({ "text": text, "source": "cli" });
            if let Some(key) = idempotency_key {
                body["idempotencyKey"] = json!(key);
            }
            let answer: serde_json::Value =
                client.post(&format!("/api/sessions/{id}/tasks"), &body)?;
            println!(
                "{} {}{}",
                answer["task"]["taskId"].as_str().unwrap_or(""),
                answer["task"]["state"].as_str().unwrap_or(""),
                if answer["replayed"] == true {
                    " (already sent)"
                } else {
                    ""
                }
            );
            Ok(())
        }
        TaskCommand::Status { task, json } => {
            let answer: serde_json::Value = client.get(&format!("/api/tasks/{task}"))?;
            if json {
                return print(&answer);
            }
            cohost::commands::print_task(&answer["task"], &mut std::io::stdout().lock())
        }
        TaskCommand::Result { task, json } => {
            let mut offset = 0u64;
            let mut out = std::io::stdout().lock();
            let mut whole = String::new();
            loop {
                let chunk: serde_json::Value =
                    client.get(&format!("/api/tasks/{task}/result?offset={offset}"))?;
                if chunk["available"] != true {
                    if json {
                        return print(&chunk);
                    }
                    anyhow::bail!(
                        "task {task} has no result (state {})",
                        chunk["state"].as_str().unwrap_or("?")
                    );
                }
                let text = chunk["text"].as_str().unwrap_or("");
                if json {
                    whole.push_str(text);
                } else {
                    std::io::Write::write_all(&mut out, text.as_bytes())?;
                }
                if chunk["eof"] == true {
                    if json {
                        // The whole text as one answer of the route, read from offset 0.
                        let mut answer = chunk.clone();
                        answer["text"] = json!(whole);
                        answer["offset"] = json!(0);
                        return print(&answer);
                    }
                    std::io::Write::write_all(&mut out, b"\n")?;
                    return Ok(());
                }
                offset = chunk["nextOffset"].as_u64().unwrap_or(offset);
            }
        }
        TaskCommand::Cancel {
            task,
            lease_generation,
        } => {
            let mut body = json!({});
            if let Some(generation) = lease_generation {
                body["leaseGeneration"] = json!(generation);
            }
            let answer: serde_json::Value =
                client.post(&format!("/api/tasks/{task}/cancel"), &body)?;
            println!(
                "{} {}",
                answer["task"]["state"].as_str().unwrap_or(""),
                answer["outcome"].as_str().unwrap_or("")
            );
            Ok(())
        }
        TaskCommand::Edit {
            task,
            text,
            revision,
            idempotency_key,
        } => print(&client.post(
            &format!("/api/tasks/{task}/edit"),
            &json!({ "text": text, "revision": revision, "idempotencyKey": idempotency_key }),
        )?),
        TaskCommand::Supersede {
            task,
            text,
            revision,
            idempotency_key,
        } => print(&client.post(
            &format!("/api/tasks/{task}/supersede"),
            &json!({ "text": text, "revision": revision, "idempotencyKey": idempotency_key }),
        )?),
    }
}

#[cfg(test)]
mod tests {
    use super::web_url;

    #[test]
    fn web_url_is_loopback_with_an_escaped_token() {
        assert_eq!(
            web_url("http://127.0.0.1:7391", "ab12"),
            "http://127.0.0.1:7391/#token=ab12"
        );
        assert_eq!(
            web_url("http://0.0.0.0:7391", "ab12"),
            "http://127.0.0.1:7391/#token=ab12"
        );
        assert_eq!(web_url("http://[::]:80", "t"), "http://[::1]:80/#token=t");
        assert_eq!(
            web_url("http://localhost:7391", "a b+c/%"),
            "http://localhost:7391/#token=a%20b%2Bc%2F%25"
        );
    }
}
