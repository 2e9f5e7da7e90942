//! `cohost status [--tmux]` and `cohost next`: the agents that need the human, for tmux's status
//! line and a jump key. Both read the daemon's state with one `GET /api/state`; `next` then
//! drives the user's tmux client (the daemon's socket, from `daemon.json`) and reports the focus.
//! At a hub (`serve --hub`) the state holds other machines' agents too: they count like this
//! machine's while their machine is up; a machine that is down is named instead (its agents' last
//! known states are not news), and `next` switches only to this machine's tmux sessions.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::client::Client;
use crate::protocol::{AgentStatus, InstanceView, MachineLinkState, StateView};

/// The agents by what they ask of the human.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// `running` or `tool-running`.
    pub running: usize,
    /// `waiting`: an approval, a question, input.
    pub waiting: usize,
    /// Finished (or failed, interrupted) and not seen yet.
    pub unseen: usize,
    /// At a hub, the other machines that are down (their agents are not counted).
    pub down: Vec<String>,
}

fn instances(state: &StateView) -> impl Iterator<Item = &InstanceView> {
    state
        .sessions
        .iter()
        .flat_map(|session| session.agents.iter())
        .chain(state.unplaced.iter())
}

/// Whether an agent (or a tmux session) is on another machine a hub views: `machine` is its
/// machine, and only other machines have a link in `state.machines`.
fn is_remote(state: &StateView, machine: Option<&str>) -> bool {
    machine.is_some_and(|name| state.machines.iter().any(|m| m.machine == name))
}

/// The other machines a hub views that are down, by name.
fn down_machines(state: &StateView) -> Vec<String> {
    state
        .machines
        .iter()
        .filter(|m| m.link == MachineLinkState::Down)
        .map(|m| m.machine.clone())
        .collect()
}

pub fn counts(state: &StateView) -> Counts {
    let mut counts = Counts {
        down: down_machines(state),
        ..Counts::default()
    };
    for instance in instances(state) {
        if instance
            .machine
            .as_ref()
            .is_some_and(|m| counts.down.contains(m))
        {
            continue;
        }
        match instance.status {
            AgentStatus::Running | AgentStatus::ToolRunning => counts.running += 1,
            AgentStatus::Waiting => counts.waiting += 1,
            _ if instance.unseen => counts.unseen += 1,
            _ => {}
        }
    }
    counts
}

/// The tmux segment: `●2 !1 ✓3` in colour, zeros left out, then each machine that is down
/// (`⚠laptop down`); empty when there is nothing to say.
pub fn tmux_segment(counts: &Counts) -> String {
    let mut parts: Vec<String> = [
        (counts.waiting, "#[fg=colour3,bold]!"),
        (counts.unseen, "#[fg=colour6]✓"),
        (counts.running, "#[fg=colour2]●"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, mark)| format!("{mark}{n}#[default]"))
    .collect();
    for machine in &counts.down {
        parts.push(format!("#[fg=colour1]⚠{machine} down#[default]"));
    }
    parts.join(" ")
}

pub fn status(
    home: Option<PathBuf>,
    tmux: bool,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let state = Client::new(home).and_then(|client| client.state());
    let state = match state {
        Ok(state) => state,
        // The status line shows that the daemon is down rather than an error tmux hides.
        Err(_) if tmux => {
            writeln!(out, "#[fg=colour1]cohost down#[default]")?;
            return Ok(());
        }
        Err(error) => return Err(error),
    };
    let counts = counts(&state);
    if tmux {
        writeln!(out, "{}", tmux_segment(&counts))?;
    } else if json {
        let mut body = json!({
            "running": counts.running,
            "waiting": counts.waiting,
            "unseen": counts.unseen,
            "seq": state.seq,
        });
        if !state.machines.is_empty() {
            body["machines"] = serde_json::to_value(&state.machines)?;
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
    } else {
        writeln!(
            out,
            "{} running, {} waiting for you, {} finished unseen",
            counts.running, counts.waiting, counts.unseen
        )?;
        for machine in state
            .machines
            .iter()
            .filter(|m| m.link == MachineLinkState::Down)
        {
            writeln!(
                out,
                "{} is down: {}; its agents are not counted",
                machine.machine,
                crate::client::heard(machine.last_heard)
            )?;
        }
    }
    Ok(())
}

/// Which agents `next` goes to.
#[derive(Debug, Clone, Copy)]
pub enum Want {
    Any,
    Waiting,
    Unseen,
}

impl Want {
    pub fn from_flags(waiting: bool, unseen: bool) -> Want {
        match (waiting, unseen) {
            (true, _) => Want::Waiting,
            (_, true) => Want::Unseen,
            _ => Want::Any,
        }
    }
}

/// One agent that needs the human, in a tmux session.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub session: String,
    pub pane: Option<String>,
    pub agent: String,
    pub status: AgentStatus,
    /// At a hub, another machine's agent (its session's name is qualified): listed, never
    /// switched to.
    pub remote: bool,
}

/// The agents to visit, in order: those waiting first, then the finished unseen ones, each in
/// the state's session order. Agents in no tmux session cannot be switched to.
pub fn candidates(state: &StateView, want: Want) -> Vec<Candidate> {
    let waiting = |i: &InstanceView| i.status == AgentStatus::Waiting;
    let unseen = |i: &InstanceView| !waiting(i) && i.unseen;
    let mut out = Vec::new();
    let passes: &[&dyn Fn(&InstanceView) -> bool] = match want {
        Want::Any => &[&waiting, &unseen],
        Want::Waiting => &[&waiting],
        Want::Unseen => &[&unseen],
    };
    let down = down_machines(state);
    for pass in passes {
        for session in &state.sessions {
            // A down machine's last known waits are not news.
            if session.machine.as_ref().is_some_and(|m| down.contains(m)) {
                continue;
            }
            let remote = is_remote(state, session.machine.as_deref());
            for instance in session.agents.iter().filter(|i| pass(i)) {
                out.push(Candidate {
                    session: session.name.clone(),
                    pane: instance.pane_id.clone(),
                    agent: instance.agent.clone(),
                    status: instance.status,
                    remote,
                });
            }
        }
    }
    out
}

/// The next one after the client's current session in the list, wrapping around (so pressing the
/// key again moves on through all of them); the first when the current session is not listed.
pub fn pick<'a>(candidates: &'a [Candidate], current: Option<&str>) -> Option<&'a Candidate> {
    let is_current = |c: &Candidate| Some(c.session.as_str()) == current;
    let Some(last) = candidates.iter().rposition(is_current) else {
        return candidates.first();
    };
    candidates[last + 1..]
        .iter()
        .chain(&candidates[..=last])
        .find(|c| !is_current(c))
        .or(candidates.first())
}

pub fn next(
    home: Option<PathBuf>,
    want: Want,
    client_name: Option<String>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let client = Client::new(home)?;
    let state = client.state()?;
    let (candidates, elsewhere): (Vec<Candidate>, Vec<Candidate>) = candidates(&state, want)
        .into_iter()
        .partition(|c| !c.remote);
    let tmux = client.tmux_command();
    let mut target_client: Vec<&str> = Vec::new();
    if let Some(name) = &client_name {
        target_client = vec!["-c", name.as_str()];
    }
    let mut display = vec!["display-message", "-p"];
    display.extend(&target_client);
    display.push("#{client_session}");
    let current = tmux(&display)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let Some(next) = pick(&candidates, current.as_deref()) else {
        if elsewhere.is_empty() {
            writeln!(out, "nothing needs you")?;
        } else {
            // At a hub: tmux cannot switch to another machine's session; say where they are.
            let list: Vec<String> = elsewhere
                .iter()
                .map(|c| {
                    let status = serde_json::to_value(c.status).unwrap_or_default();
                    format!(
                        "{} ({} {})",
                        c.session,
                        c.agent,
                        status.as_str().unwrap_or("")
                    )
                })
                .collect();
            writeln!(
                out,
                "nothing here needs you; on other machines: {}",
                list.join(", ")
            )?;
        }
        for machine in down_machines(&state) {
            writeln!(
                out,
                "{machine} is down: its agents' last known states are not shown here"
            )?;
        }
        return Ok(());
    };
    if let Some(pane) = &next.pane {
        let _ = tmux(&["select-window", "-t", pane]).status();
        let _ = tmux(&["select-pane", "-t", pane]).status();
    }
    let mut switch = vec!["switch-client"];
    switch.extend(&target_client);
    let target = format!("={}", next.session);
    switch.extend(["-t", target.as_str()]);
    let output = tmux(&switch).output()?;
    if !output.status.success() {
        anyhow::bail!(
            "tmux could not switch {} to {}: {} (run it inside tmux, or pass --client)",
            client_name.as_deref().unwrap_or("the client"),
            next.session,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let _: serde_json::Value = client.post(
        "/api/focus",
        &json!({ "session": next.session, "source": "tmux" }),
    )?;
    let status = serde_json::to_value(next.status)?;
    writeln!(
        out,
        "{} ({} {})",
        next.session,
        next.agent,
        status.as_str().unwrap_or("")
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(session: &str) -> Candidate {
        Candidate {
            session: session.into(),
            pane: None,
            agent: "codex".into(),
            status: AgentStatus::Waiting,
            remote: false,
        }
    }

    #[test]
    fn next_moves_on_from_the_current_session_and_cycles() {
        let list = [candidate("a"), candidate("b"), candidate("c")];
        assert_eq!(pick(&list, Some("a")).unwrap().session, "b");
        assert_eq!(pick(&list, Some("b")).unwrap().session, "c");
        assert_eq!(pick(&list, Some("c")).unwrap().session, "a");
        assert_eq!(pick(&list, Some("elsewhere")).unwrap().session, "a");
        assert_eq!(pick(&list, None).unwrap().session, "a");
        assert_eq!(pick(&list[..1], Some("a")).unwrap().session, "a");
        assert!(pick(&[], Some("a")).is_none());
    }

    #[test]
    fn the_tmux_segment_leaves_out_zeros() {
        let counts = Counts {
            running: 2,
            waiting: 1,
            unseen: 0,
            down: Vec::new(),
        };
        assert_eq!(
            tmux_segment(&counts),
            "#[fg=colour3,bold]!1#[default] #[fg=colour2]●2#[default]"
        );
        assert_eq!(tmux_segment(&Counts::default()), "");
        let down = Counts {
            down: vec!["laptop".into()],
            ..counts
        };
        assert_eq!(
            tmux_segment(&down),
            "#[fg=colour3,bold]!1#[default] #[fg=colour2]●2#[default] #[fg=colour1]⚠laptop down#[default]"
        );
    }
}
