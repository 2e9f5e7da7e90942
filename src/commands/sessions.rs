//! The commands that drive hosted sessions: `start`, `sessions`, `send`, `queue`, `takeover`,
//! `release`, `interrupt`, `requests`, `answer`, `mode`, `approve`, `goal`, `fork`, `models`,
//! `attach`, `relaunch` and `doctor`. Each is one request to the daemon, printed.

use std::io::Write;

use serde_json::json;

use crate::cli::{AnswerArgs, StartArgs};
use crate::client::Client;

pub fn start(client: &Client, mut args: StartArgs) -> anyhow::Result<()> {
    // `cohost start --profile NAME PROMPT`: the one word is the prompt when it names no runtime.
    if args.profile.is_some()
        && args.prompt.is_none()
        && args
            .runtime
            .as_deref()
            .is_some_and(|r| crate::protocol::Runtime::parse(r).is_none())
    {
        args.prompt = args.runtime.take();
    }
    let cwd = match args.cwd {
        // `~` and `~/…` (quoted past the shell) are expanded by the daemon, as for HTTP and MCP.
        Some(cwd) if cwd.to_str().is_some_and(|c| c.starts_with('~')) => Some(cwd),
        Some(cwd) => Some(std::path::absolute(&cwd).unwrap_or(cwd)),
        // A profile's own directory, when it sets one, else the current one.
        None if args
            .profile
            .as_deref()
            .is_some_and(|name| profile_sets_cwd(client, name)) =>
        {
            None
        }
        None => Some(std::env::current_dir()?),
    };
    let mut body = json!({});
    if let Some(cwd) = cwd {
        body["cwd"] = json!(cwd);
    }
    let fields = [
        ("runtime", args.runtime),
        ("profile", args.profile),
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

/// Whether profile `name` of the daemon sets a `cwd`.
fn profile_sets_cwd(client: &Client, name: &str) -> bool {
    let Ok(list) = client.get::<crate::protocol::ProfileList>("/api/profiles") else {
        return false;
    };
    list.profiles
        .iter()
        .any(|p| p.name == name && p.values.iter().any(|v| v.key == "cwd"))
}

/// `cohost profiles [show NAME | reload] [--json]`.
pub fn profiles(
    client: &Client,
    command: Option<crate::cli::ProfilesCommand>,
    json: bool,
) -> anyhow::Result<()> {
    let list: crate::protocol::ProfileList = match &command {
        Some(crate::cli::ProfilesCommand::Reload { json: reload_json }) => {
            let list: crate::protocol::ProfileList =
                client.post("/api/profiles/reload", &serde_json::json!({}))?;
            if json || *reload_json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                let names: Vec<&str> = list.profiles.iter().map(|p| p.name.as_str()).collect();
                println!(
                    "profiles reloaded from {}: {}",
                    list.file.as_deref().unwrap_or("(no config file)"),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                );
            }
            return Ok(());
        }
        _ => client.get("/api/profiles")?,
    };
    let Some(crate::cli::ProfilesCommand::Show {
        name,
        json: show_json,
    }) = command
    else {
        if json {
            println!("{}", serde_json::to_string_pretty(&list)?);
            return Ok(());
        }
        if list.profiles.is_empty() {
            println!("no profiles");
        }
        for profile in &list.profiles {
            let value = |key: &str| {
                profile
                    .values
                    .iter()
                    .find(|v| v.key == key)
                    .and_then(|v| v.value.as_str())
                    .unwrap_or("-")
                    .to_string()
            };
            println!(
                "{:<20} {:<9} {:<24} {}",
                profile.name,
                value("runtime"),
                value("model"),
                profile.chain.join(" <- ")
            );
        }
        return Ok(());
    };
    let Some(profile) = list.profiles.iter().find(|p| p.name == name) else {
        let names: Vec<&str> = list.profiles.iter().map(|p| p.name.as_str()).collect();
        anyhow::bail!(
            "no profile `{name}` in the daemon's config file (the profiles are: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
    };
    if json || show_json {
        println!("{}", serde_json::to_string_pretty(profile)?);
        return Ok(());
    }
    println!(
        "# profile {} ({})",
        profile.name,
        profile.chain.join(" <- ")
    );
    for value in &profile.values {
        let shown = match &value.value {
            serde_json::Value::String(text) => serde_json::Value::from(text.as_str()).to_string(),
            other => other.to_string(),
        };
        println!("{} = {}  # {}", value.key, shown, value.from);
    }
    Ok(())
}

pub fn list(client: &Client, json: bool) -> anyhow::Result<()> {
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
            "{:<20} {:<20} {:<7} {:<10} {:<8} {:>3} turns  {:<7} {:>3} waiting  {}",
            s["id"].as_str().unwrap_or(""),
            s["name"].as_str().unwrap_or(""),
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

pub fn send(
    client: &Client,
    id: String,
    text: String,
    idempotency_key: Option<String>,
) -> anyhow::Result<()> {
    let mut body = json!({ "text": text });
    if let Some(key) = idempotency_key {
        body["idempotencyKey"] = json!(key);
    }
    let answer: serde_json::Value = client.post(&format!("/api/sessions/{id}/messages"), &body)?;
    println!(
        "{} {} (task {})",
        answer["outcome"].as_str().unwrap_or(""),
        answer["turnId"].as_str().unwrap_or(""),
        answer["taskId"].as_str().unwrap_or("?")
    );
    Ok(())
}

pub fn queue(client: &Client, id: String, json: bool) -> anyhow::Result<()> {
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

pub fn takeover(client: &Client, id: String) -> anyhow::Result<()> {
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

pub fn release(client: &Client, id: String, drop_queued: bool) -> anyhow::Result<()> {
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

pub fn interrupt(client: &Client, id: String) -> anyhow::Result<()> {
    let answer: serde_json::Value =
        client.post(&format!("/api/sessions/{id}/interrupt"), &json!({}))?;
    if answer["interrupted"].as_bool() == Some(true) {
        println!("interrupted");
    } else {
        println!("no turn was running");
    }
    Ok(())
}

pub fn requests(client: &Client, id: String, all: bool, json: bool) -> anyhow::Result<()> {
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
            let decisions: Vec<&str> = decisions.iter().filter_map(|d| d.as_str()).collect();
            writeln!(out, "  decisions: {}", decisions.join(", "))?;
        }
    }
    Ok(())
}

pub fn answer(client: &Client, args: AnswerArgs) -> anyhow::Result<()> {
    let AnswerArgs {
        id,
        request,
        answers,
        decision,
        feedback,
        mode,
        content,
    } = args;
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

pub fn mode(client: &Client, id: String, mode: String) -> anyhow::Result<()> {
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

pub fn approve(
    client: &Client,
    id: String,
    approval: String,
    decision: String,
) -> anyhow::Result<()> {
    let _: serde_json::Value = client.post(
        &format!("/api/sessions/{id}/approvals/{approval}"),
        &json!({ "decision": decision }),
    )?;
    println!("{decision}");
    Ok(())
}

pub fn goal(
    client: &Client,
    id: String,
    text: Option<String>,
    clear: bool,
    status: Option<String>,
    token_budget: Option<u64>,
) -> anyhow::Result<()> {
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

pub fn fork(client: &Client, id: String, after_turn: Option<String>) -> anyhow::Result<()> {
    let mut body = json!({});
    if let Some(turn) = after_turn {
        body["afterTurnId"] = json!(turn);
    }
    let answer: serde_json::Value = client.post(&format!("/api/sessions/{id}/fork"), &body)?;
    if answer["ok"].as_bool() == Some(true) {
        println!("{}", answer["data"]["session"]["id"].as_str().unwrap_or(""));
        Ok(())
    } else {
        print_capability(&answer)
    }
}

pub fn models(client: &Client, json: bool) -> anyhow::Result<()> {
    let answer: serde_json::Value = client.get("/api/models?runtime=codex")?;
    if json || answer["ok"].as_bool() != Some(true) {
        return print_capability(&answer);
    }
    for model in answer["data"].as_array().cloned().unwrap_or_default() {
        println!(
            "{:<28} {}",
            model["id"].as_str().unwrap_or(""),
            model["displayName"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

pub fn attach(client: &Client, id: String) -> anyhow::Result<()> {
    let view: serde_json::Value = client.get(&format!("/api/sessions/{id}"))?;
    let (Some(pane), Some(tmux_session)) = (view["paneId"].as_str(), view["tmuxSession"].as_str())
    else {
        anyhow::bail!(
            "session {id} has no terminal (codex, opencode: `cohost start codex|opencode --terminal`, or POST /api/sessions/{id}/terminal)"
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

pub fn disown(client: &Client, id: String) -> anyhow::Result<()> {
    let _: serde_json::Value = client.post(&format!("/api/sessions/{id}/disown"), &json!({}))?;
    println!("{id} ended; the agent keeps running in its pane, watched only");
    Ok(())
}

pub fn rehome(client: &Client, id: String) -> anyhow::Result<()> {
    let _: serde_json::Value = client.post(&format!("/api/sessions/{id}/rehome"), &json!({}))?;
    println!("{id} rehomed: its agent runs under cohost in the same pane, the same conversation");
    Ok(())
}

pub fn relaunch(client: &Client, id: String) -> anyhow::Result<()> {
    let _: serde_json::Value = client.post(&format!("/api/sessions/{id}/relaunch"), &json!({}))?;
    println!("relaunching");
    Ok(())
}

pub fn doctor(client: &Client, json: bool) -> anyhow::Result<()> {
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

/// Prints a capability answer: its data, or why it failed (and fails the command).
pub fn print_capability(answer: &serde_json::Value) -> anyhow::Result<()> {
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
    let pi = &answer["pi"];
    println!(
        "pi found:       {} {}",
        yes(&pi["found"]),
        text(&pi["path"])
    );
    if pi["found"].as_bool() == Some(true) {
        println!(
            "pi version:     {} {} ({})",
            text(&pi["version"]),
            text(&pi["package"]),
            range(&pi["supported"])
        );
        println!(
            "pi node:        {} {} (needs {})",
            text(&pi["nodeVersion"]),
            text(&pi["nodePath"]),
            pi["nodeNeeded"]
                .as_str()
                .map_or("nothing known".to_string(), |v| format!("{v} or later"))
        );
    }
    println!("machine:        {}", text(&answer["machine"]));
    let federation = &answer["federation"];
    if federation.is_object() {
        println!(
            "nats:           {} {} (stream {})",
            text(&federation["link"]),
            text(&federation["url"]),
            text(&federation["stream"])
        );
        println!(
            "nats backlog:   {} (logged {}, acked {})",
            federation["backlog"], federation["lastLoggedSeq"], federation["lastAckedSeq"]
        );
    }
    for warning in answer["warnings"].as_array().cloned().unwrap_or_default() {
        println!("warning: {}", text(&warning));
    }
    for issue in answer["issues"].as_array().cloned().unwrap_or_default() {
        println!("issue: {}", text(&issue));
    }
}
