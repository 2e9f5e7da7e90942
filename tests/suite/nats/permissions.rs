//! Per-machine permissions, against a real nats-server started from the sample configuration
//! the docs ship (`docs/nats/cohost-nats.conf`, only its store directory and port changed), so
//! the page stays true: machines `alpha` and `beta` publish with their own user files and the hub
//! `laptop` sees both and commands `beta`; alpha's credentials used as `beta` (a daemon, and a
//! raw client publishing, subscribing and requesting on beta's subjects) are refused by the
//! server, the daemon says which subject, and beta's stream holds beta's events only. With the
//! `CREATE` grants removed, a machine publishes into its stream and the bucket an administrator
//! made ahead (and, before they exist, says its `CREATE` was refused).

use super::hub::{link, wait_caught_up};
use super::*;

/// The sample configuration, as the docs ship it.
const SAMPLE: &str = include_str!("../../../docs/nats/cohost-nats.conf");
/// The sample's JetStream store directory, which the test replaces with its own.
const SAMPLE_STORE: &str = "/var/lib/nats/cohost";

/// A user's password in the sample (each a placeholder the docs say to replace).
fn password(user: &str) -> String {
    let password = format!("replace-with-{user}-password");
    assert!(
        SAMPLE.contains(&format!("user: {user}\n        password: \"{password}\"")),
        "the sample configuration has no user `{user}` with the password {password}"
    );
    password
}

/// A nats-server running the sample configuration.
fn sample_server() -> NatsServer {
    NatsServer::start_with_config(|store| {
        assert!(
            SAMPLE.contains(SAMPLE_STORE),
            "the sample configuration's store_dir is no longer {SAMPLE_STORE}"
        );
        SAMPLE.replace(SAMPLE_STORE, store.to_str().expect("a UTF-8 store path"))
    })
}

/// The user file `--nats-user-file` reads (`USER:PASSWORD`), as the docs make it.
fn user_file(dir: &std::path::Path, user: &str) -> String {
    let path = dir.join(format!("{user}.user"));
    std::fs::write(&path, format!("{user}:{}\n", password(user))).unwrap();
    path.to_str().unwrap().to_string()
}

/// A daemon publishing as `machine` with `user`'s credentials.
fn machine(
    nats: &NatsServer,
    users: &std::path::Path,
    name: &str,
    user: &str,
    extra: &[&str],
) -> (TmuxServer, TestDaemon) {
    let (tmux, _) = tmux_with_sessions(&["work"]);
    let url = nats.url();
    let file = user_file(users, user);
    let mut args = vec!["--nats", &url, "--machine", name, "--nats-user-file", &file];
    args.extend_from_slice(extra);
    let daemon = TestDaemon::start(&tmux, &args);
    (tmux, daemon)
}

/// A raw client with `user`'s credentials and inbox prefix, and the errors the server sends it.
async fn raw_client(
    url: &str,
    user: &str,
) -> (
    async_nats::Client,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (errors, received) = tokio::sync::mpsc::unbounded_channel();
    let client = async_nats::ConnectOptions::with_user_and_password(user.into(), password(user))
        .custom_inbox_prefix(format!("_INBOX.{user}"))
        .event_callback(move |event| {
            let errors = errors.clone();
            async move {
                if let async_nats::Event::ServerError(error) = event {
                    let _ = errors.send(error.to_string());
                }
            }
        })
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("{user} cannot connect: {e}"));
    (client, received)
}

/// A JetStream API answer to `user`'s raw request.
async fn api(client: &async_nats::Client, subject: &str) -> Value {
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        client.request(subject.to_string(), "".into()),
    )
    .await
    .unwrap_or_else(|_| panic!("no answer to {subject} within 10 s"))
    .unwrap_or_else(|e| panic!("{subject}: {e}"));
    serde_json::from_slice(&answer.payload).unwrap()
}

#[test]
fn a_machine_publishes_and_takes_commands_only_as_itself_under_the_sample_configuration() {
    let nats = sample_server();
    let url = nats.url();
    let users = temp_dir("cohost-nats-users-");
    let (_tmux_a, alpha) = machine(&nats, users.path(), "alpha", "alpha", &[]);
    let (_tmux_b, beta) = machine(&nats, users.path(), "beta", "beta", &["--nats-commands"]);
    let (_tmux_h, hub) = machine(&nats, users.path(), "laptop", "laptop", &["--hub"]);
    for i in 0..4 {
        post(&alpha, i);
        post(&beta, i);
    }
    // The hub sees both, each with its own credentials.
    wait_caught_up(&hub, &alpha, "alpha");
    wait_caught_up(&hub, &beta, "beta");
    assert_eq!(link(&hub, "alpha").unwrap()["link"], "up");
    // A command from the hub reaches beta and beta's answer comes back (beta's service answers
    // for its own sessions: the refusal is the one it gives locally).
    let answered = hub.post(
        "/api/sessions/beta/cs_nope/messages",
        &json!({ "text": "x" }),
    );
    let local = beta.post("/api/sessions/cs_nope/messages", &json!({ "text": "x" }));
    assert_eq!(answered.status, local.status, "{}", answered.body);
    assert!(
        answered.body.contains("the machine `beta` answered"),
        "{}",
        answered.body
    );

    // alpha's credentials with --machine beta: refused by the server at start, said clearly,
    // nothing lost locally.
    let (_tmux_i, impostor) = machine(&nats, users.path(), "beta", "alpha", &["--nats-commands"]);
    for i in 0..3 {
        post(&impostor, i);
    }
    let federation = impostor.wait_for(
        "the impostor's publisher and commands refused",
        CATCH_UP,
        |d| {
            let federation = health(d)["federation"].clone();
            let refused = federation["refused"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            (federation["link"] == "refused"
                && refused
                    .iter()
                    .any(|r| r.as_str().unwrap().contains("\"cohost.cmd.beta\"")))
            .then_some(federation)
        },
    );
    eprintln!("alpha's credentials as beta: {federation:#}");
    let refused: Vec<&str> = federation["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    for refusal in &refused {
        assert!(
            refusal.contains("Permissions Violation for") && refusal.contains("beta"),
            "a refusal names the subject refused: {refusal}"
        );
    }
    let last_error = federation["lastError"].as_str().unwrap_or_default();
    assert!(
        last_error.contains("refused the publisher of machine `beta`")
            && last_error.contains("Permissions Violation for"),
        "{federation}"
    );
    assert_eq!(federation["lastAckedSeq"], 0, "{federation}");
    assert_eq!(
        federation["backlog"], federation["lastLoggedSeq"],
        "{federation}"
    );
    assert!(
        impostor.events_after(0).len() >= 4,
        "the impostor's log keeps its events"
    );
    let doctor = impostor.get("/api/doctor").json();
    let issues = doctor["issues"].to_string();
    assert!(
        issues.contains("a permission was refused") && issues.contains("\"cohost.cmd.beta\\\""),
        "{issues}"
    );
    assert!(
        impostor
            .stderr_text()
            .contains("publishing stopped: the NATS server refused a permission"),
        "{}",
        impostor.stderr_tail(30)
    );

    // A raw client with alpha's credentials: every act as beta is refused by the server.
    let rt = runtime();
    let (refused, total) = rt.block_on(async {
        let (client, mut errors) = raw_client(&url, "alpha").await;
        // Alpha's credentials do work for alpha's own stream (the refusals below are not a
        // wrong password).
        let own = api(&client, "$JS.API.STREAM.INFO.COHOST_alpha").await;
        assert_eq!(own["config"]["name"], "COHOST_alpha", "{own}");
        let publish = [
            ("cohost.ev.beta.x", Vec::from(&b"{\"seq\":1}"[..])),
            ("cohost.ev.beta", Vec::from(&b"{\"seq\":1}"[..])),
            ("$KV.cohost_machines.beta", Vec::from(&b"{}"[..])),
            ("$JS.API.STREAM.DELETE.COHOST_beta", Vec::new()),
            ("$JS.API.STREAM.PURGE.COHOST_beta", Vec::new()),
            ("$JS.API.STREAM.CREATE.COHOST_beta", Vec::new()),
        ];
        let subscribe = ["cohost.cmd.beta", "cohost.ev.beta.>", "_INBOX.laptop.>"];
        let total = publish.len() + 1 + subscribe.len();
        let mut refused = 0;
        for (subject, payload) in publish {
            client
                .publish(subject.to_string(), payload.into())
                .await
                .unwrap();
            client.flush().await.unwrap();
            refused += expect_refusal(
                &mut errors,
                &format!("Permissions Violation for Publish to \"{subject}\""),
            )
            .await;
        }
        // A request on beta's command subject (a command beta would run if it got it).
        let command = serde_json::to_vec(&json!({
            "op": "interrupt", "session": "cs_nope", "from": "alpha",
        }))
        .unwrap();
        client
            .publish_with_reply(
                "cohost.cmd.beta".to_string(),
                "_INBOX.alpha.probe".to_string(),
                command.into(),
            )
            .await
            .unwrap();
        client.flush().await.unwrap();
        refused += expect_refusal(
            &mut errors,
            "Permissions Violation for Publish to \"cohost.cmd.beta\"",
        )
        .await;
        let mut subscriptions = Vec::new();
        for subject in subscribe {
            subscriptions.push(client.subscribe(subject.to_string()).await.unwrap());
            client.flush().await.unwrap();
            refused += expect_refusal(
                &mut errors,
                &format!("Permissions Violation for Subscription to \"{subject}\""),
            )
            .await;
        }
        (refused, total)
    });
    // beta's stream holds beta's events, each once, and nothing else (none of alpha's raw
    // publishes, none of the impostor's): its count is beta's log's, and the hub's copy is
    // beta's log.
    wait_published(&beta);
    let logged = seqs(&beta.events_after(0));
    let head = beta.head();
    hub.wait_for("the hub caught up with beta again", CATCH_UP, |h| {
        link(h, "beta").filter(|l| l["receivedSeq"].as_u64() >= Some(head))
    });
    let beta_messages = rt.block_on(async {
        let (laptop, _) = raw_client(&url, "laptop").await;
        let info = api(&laptop, "$JS.API.STREAM.INFO.COHOST_beta").await;
        info["state"]["messages"].as_u64().unwrap()
    });
    let copy = std::fs::read_to_string(hub.home().join("hub/beta.events")).unwrap();
    let copied: Vec<u64> = copy
        .lines()
        .map(|line| {
            let (_, json) = line.split_once(' ').unwrap();
            serde_json::from_str::<Value>(json).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let foreign = copied.iter().filter(|s| !logged.contains(s)).count();
    eprintln!(
        "refused {refused}/{total}; beta's stream holds {beta_messages} events, beta logged {}, the hub's copy {} ({foreign} not beta's)",
        logged.len(),
        copied.len()
    );
    assert_eq!(refused, total);
    assert_eq!(
        beta_messages,
        logged.len() as u64,
        "beta's stream is beta's log"
    );
    assert_eq!(copied, logged, "the hub's copy of beta is beta's log");
}

/// Waits for the server's next error on a raw client and checks it is `what`; 1 when it is.
async fn expect_refusal(
    errors: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    what: &str,
) -> usize {
    let error = tokio::time::timeout(Duration::from_secs(10), errors.recv())
        .await
        .unwrap_or_else(|_| panic!("the server did not refuse ({what}) within 10 s"))
        .expect("the error channel");
    assert!(error.contains(what), "expected {what}, got {error}");
    eprintln!("refused: {error}");
    1
}

/// The sample configuration with alpha's `CREATE` grants removed (the streams are made ahead),
/// and an administrator's user in the same account (no permissions: all of them).
fn made_ahead_server() -> NatsServer {
    NatsServer::start_with_config(|store| {
        let mut text = SAMPLE.replace(SAMPLE_STORE, store.to_str().expect("a UTF-8 store path"));
        for grant in [
            r#" "$JS.API.STREAM.CREATE.COHOST_alpha","#,
            r#", "$JS.API.STREAM.CREATE.KV_cohost_machines""#,
        ] {
            let at = text
                .find("user: alpha")
                .expect("the sample has the user alpha");
            let found = text[at..]
                .find(grant)
                .unwrap_or_else(|| panic!("alpha's grants in the sample no longer hold {grant}"));
            text.replace_range(at + found..at + found + grant.len(), "");
        }
        let users = text.find("users: [").expect("the sample's users");
        text.insert_str(
            users + "users: [".len(),
            "\n      { user: admin, password: \"admin-password\" }",
        );
        text
    })
}

#[test]
fn a_machine_without_create_grants_publishes_into_streams_an_administrator_made_ahead() {
    let nats = made_ahead_server();
    let url = nats.url();
    let users = temp_dir("cohost-nats-users-");
    // Nothing made ahead: alpha's first act, making its stream, is refused, and said.
    let (_tmux_a, mut alpha) = machine(&nats, users.path(), "alpha", "alpha", &[]);
    post(&alpha, 0);
    let federation = alpha.wait_for("alpha's CREATE refused", CATCH_UP, |d| {
        let federation = health(d)["federation"].clone();
        federation["refused"]
            .to_string()
            .contains("$JS.API.STREAM.CREATE.COHOST_alpha")
            .then_some(federation)
    });
    eprintln!("without its stream: {federation:#}");
    assert_eq!(federation["lastAckedSeq"], 0, "{federation}");
    alpha.stop();

    // The administrator makes alpha's stream and the bucket as docs/federation.md describes.
    let rt = runtime();
    rt.block_on(async {
        let admin = async_nats::ConnectOptions::with_user_and_password(
            "admin".into(),
            "admin-password".into(),
        )
        .connect(&url)
        .await
        .expect("the administrator connects");
        let js = async_nats::jetstream::new(admin);
        use async_nats::jetstream::stream::{Config, DiscardPolicy, StorageType};
        js.create_stream(Config {
            name: "COHOST_alpha".into(),
            subjects: vec!["cohost.ev.alpha".into(), "cohost.ev.alpha.>".into()],
            storage: StorageType::File,
            duplicate_window: Duration::from_secs(600),
            ..Default::default()
        })
        .await
        .expect("the administrator makes COHOST_alpha");
        js.create_stream(Config {
            name: "KV_cohost_machines".into(),
            subjects: vec!["$KV.cohost_machines.>".into()],
            max_messages_per_subject: 1,
            storage: StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: DiscardPolicy::New,
            ..Default::default()
        })
        .await
        .expect("the administrator makes the bucket's stream");
    });

    // alpha, still without CREATE, publishes everything into them; the hub sees it.
    alpha.start_again();
    for i in 1..5 {
        post(&alpha, i);
    }
    let published = wait_published(&alpha);
    let federation = &published["federation"];
    assert!(
        federation["refused"].as_array().is_none_or(Vec::is_empty),
        "{federation}"
    );
    let (_tmux_h, hub) = machine(&nats, users.path(), "laptop", "laptop", &["--hub"]);
    wait_caught_up(&hub, &alpha, "alpha");
    let own: Vec<Value> = alpha
        .events_after(0)
        .into_iter()
        .filter(|e| e["session"] == "work")
        .collect();
    assert_eq!(
        hub.session_events("alpha/work"),
        own,
        "the hub reads alpha's events, published into the streams made ahead"
    );
}
