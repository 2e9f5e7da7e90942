//! The commands about the agents cohost tracks and the daemon itself: `state`, `explain`,
//! `events`, `event`, `focus`, `token`, `web`, and the hidden `tmux-refresh` the tmux hooks run.
//! Each is one request to the daemon (over its socket, see `client.rs`), printed.

use std::io::Write;

use serde_json::json;

use crate::cli::EventArgs;
use crate::client::{Client, render_event, render_state};

pub fn state(client: &Client, json: bool) -> anyhow::Result<()> {
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

pub fn explain(client: &Client, session: String, agent: String, json: bool) -> anyhow::Result<()> {
    let view = client.explain(&session, &agent)?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &view)?;
        writeln!(out)?;
    } else {
        crate::client::render_explain(&view, &mut out)?;
    }
    Ok(())
}

pub fn adopt(client: &Client, session: String, agent: String, json: bool) -> anyhow::Result<()> {
    let reply = client.adopt(&session, &agent)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
    } else {
        println!("{}", reply.session.id);
    }
    Ok(())
}

pub fn events(
    client: &Client,
    id: Option<String>,
    after: u64,
    follow: bool,
    json: bool,
) -> anyhow::Result<()> {
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

pub fn event(client: &Client, args: EventArgs) -> anyhow::Result<()> {
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

pub fn focus(client: &Client, session: String, source: String) -> anyhow::Result<()> {
    let _: serde_json::Value = client.post(
        "/api/focus",
        &json!({ "session": session, "source": source }),
    )?;
    Ok(())
}

pub fn token(client: &Client) -> anyhow::Result<()> {
    println!("{}", client.token()?);
    Ok(())
}

pub fn web(client: &Client) -> anyhow::Result<()> {
    // The address comes from the daemon, over its socket: it fails with "not running"
    // rather than print a URL nothing answers, or one a squatter of the port answers.
    let listen = client.listen_addr()?;
    println!("{}", web_url(&listen, &client.token()?));
    Ok(())
}

pub fn tmux_refresh(client: &Client) -> anyhow::Result<()> {
    let _: serde_json::Value = client.post("/api/tmux/refresh", &json!({}))?;
    Ok(())
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
