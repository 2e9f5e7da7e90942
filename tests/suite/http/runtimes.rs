//! `GET /api/runtimes`: the runtimes the daemon hosts and how a session of each is started, as
//! each runtime describes it (what the web page's New session form offers).

use crate::support::*;

fn policies(runtime: &Value) -> Vec<(String, bool)> {
    runtime["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["value"].as_str().unwrap().to_string(),
                p["allowed"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_daemon_lists_its_runtimes_with_the_policies_each_takes() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let answer = daemon.get("/api/runtimes").assert_ok();
    let list = answer["runtimes"].as_array().unwrap();
    let names: Vec<&str> = list
        .iter()
        .map(|r| r["runtime"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["codex", "claude", "opencode", "pi"], "{answer}");
    let fields: Vec<&str> = list
        .iter()
        .map(|r| r["policyField"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "approvalPolicy",
            "permissionMode",
            "approvalPolicy",
            "approvalPolicy"
        ],
        "{answer}"
    );
    let yes = |v: &str| (v.to_string(), true);
    assert_eq!(
        policies(&list[0]),
        [yes(""), yes("untrusted"), yes("on-request"), yes("never")]
    );
    // Claude's unguarded modes are listed, and not allowed unless the daemon allows them.
    assert_eq!(
        policies(&list[1]),
        [
            yes("default"),
            yes("acceptEdits"),
            yes("plan"),
            ("auto".to_string(), false),
            ("bypassPermissions".to_string(), false)
        ]
    );
    for runtime in &list[2..] {
        assert_eq!(
            policies(runtime),
            [yes("on-request"), yes("untrusted"), yes("never")],
            "{runtime}"
        );
    }
    assert!(
        list.iter()
            .flat_map(|r| r["policies"].as_array().unwrap())
            .all(|p| !p["label"].as_str().unwrap().is_empty()),
        "every value says what it means: {answer}"
    );
    // Like every /api route, it needs the token.
    assert_eq!(daemon.get_no_token("/api/runtimes").status, 401);
}

#[test]
fn an_unguarded_claude_mode_the_daemon_allows_is_listed_as_allowed() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &["--allow-permission-mode", "auto"]);
    let answer = daemon.get("/api/runtimes").assert_ok();
    let claude = answer["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["runtime"] == "claude")
        .cloned()
        .unwrap();
    assert_eq!(
        policies(&claude)[3..],
        [
            ("auto".to_string(), true),
            ("bypassPermissions".to_string(), false)
        ],
        "{claude}"
    );
}
