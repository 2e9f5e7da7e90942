//! The publisher against a real nats-server: in order with the right subjects and ids, loss-free
//! and duplicate-free across a killed server and a killed daemon — in the stream and in a hub's
//! view, with the counts printed —, its health, and the refusal of a plaintext remote URL.

use super::*;

#[test]
fn events_reach_the_stream_in_order_with_their_subjects_and_ids() {
    let nats = NatsServer::start();
    let (_tmux, daemon) = publishing(&nats, "laptop");
    for i in 0..20 {
        post(&daemon, i);
    }
    let health = wait_published(&daemon);
    assert_eq!(health["machine"], "laptop");
    assert_eq!(health["federation"]["stream"], "COHOST_laptop");
    assert_eq!(health["federation"]["url"], nats.url());
    assert_eq!(daemon.state()["machine"], "laptop");
    assert_mirrors_the_log(&daemon, &nats, "laptop", "in order");
    // The machine's current view is in the KV bucket, under its name.
    let view = daemon.wait_for("the machine's view in the KV bucket", CATCH_UP, |d| {
        machine_view(&nats.url(), "laptop")
            .filter(|view| view["ackedSeq"].as_u64() >= Some(d.head().saturating_sub(1)))
    });
    assert_eq!(view["machine"], "laptop");
    assert_eq!(view["state"]["machine"], "laptop");
    let work = view["state"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "work")
        .cloned()
        .unwrap_or_else(|| panic!("no session `work` in {view}"));
    assert_eq!(work["agents"][0]["agent"], "codex", "{work}");
    // doctor shows the link.
    let doctor = daemon.get("/api/doctor").json();
    assert_eq!(doctor["machine"], "laptop");
    assert_eq!(doctor["federation"]["link"], "connected", "{doctor}");
}

#[test]
fn a_killed_nats_server_mid_stream_loses_and_repeats_nothing() {
    let mut nats = NatsServer::start();
    let (_tmux, daemon) = publishing(&nats, "dev1");
    // A hub reads dev1 through the same server: its view must end complete too.
    let (_tmux_h, hub) = super::hub::hub(&nats);
    for i in 0..30 {
        post(&daemon, i);
    }
    // Killed once the publisher is under way (connected, something acknowledged).
    daemon.wait_for("a first acknowledged publish", CATCH_UP, |d| {
        let federation = health(d)["federation"].clone();
        (federation["lastAckedSeq"].as_u64() > Some(0)).then_some(())
    });
    nats.kill9();
    // Ingest goes on while the server is gone; the backlog grows and the link shows down.
    for i in 30..60 {
        post(&daemon, i);
    }
    let mut seen = Value::Null;
    let down = daemon.wait_for("the link shown down, with a backlog", CATCH_UP, |d| {
        let health = health(d);
        let federation = health["federation"].clone();
        if federation != seen {
            eprintln!("health: {federation}");
            seen = federation.clone();
        }
        (federation["link"] == "disconnected" && federation["backlog"].as_u64() > Some(0))
            .then_some(federation)
    });
    eprintln!("while the server was down: {down}");
    assert!(
        down["lastAckedSeq"].as_u64() < Some(daemon.head()),
        "{down}"
    );
    nats.start_again();
    for i in 60..70 {
        post(&daemon, i);
    }
    wait_published(&daemon);
    assert_mirrors_the_log(&daemon, &nats, "dev1", "nats-server killed mid-stream");
    let link = super::hub::wait_caught_up(&hub, &daemon, "dev1");
    eprintln!("the hub after the server's kill -9: {link}");
    super::hub::assert_same(
        &hub.session_events("dev1/work"),
        &super::hub::own_events(&daemon, "work"),
        "the hub's view, nats-server killed mid-stream",
    );
}

#[test]
fn a_daemon_killed_with_9_resumes_without_duplicates() {
    let nats = NatsServer::start();
    let (_tmux, mut daemon) = publishing(&nats, "box");
    let (_tmux_h, hub) = super::hub::hub(&nats);
    for i in 0..40 {
        post(&daemon, i);
    }
    // Killed right after the posts: some may not have been acknowledged or checkpointed.
    daemon.kill9();
    daemon.start_again();
    for i in 40..50 {
        post(&daemon, i);
    }
    wait_published(&daemon);
    assert_mirrors_the_log(&daemon, &nats, "box", "daemon killed with -9");
    let link = super::hub::wait_caught_up(&hub, &daemon, "box");
    eprintln!("the hub after the machine's kill -9: {link}");
    super::hub::assert_same(
        &hub.session_events("box/work"),
        &super::hub::own_events(&daemon, "work"),
        "the hub's view, the machine's daemon killed with -9",
    );
    // A clean restart too: `daemon.stopped` and the next `daemon.started` follow in order.
    daemon.restart();
    post(&daemon, 50);
    wait_published(&daemon);
    assert_mirrors_the_log(&daemon, &nats, "box", "daemon restarted");
}

#[test]
fn a_remote_plaintext_nats_url_is_refused_at_start() {
    let dir = temp_dir("cohost-nats-refuse-");
    let serve = |args: &[&str], config: Option<&std::path::Path>| {
        let mut command = std::process::Command::new(BIN);
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("COHOST_HOME", dir.path().join("home"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"));
        for name in SCRUBBED_ENV.iter().filter(|n| **n != "COHOST_HOME") {
            command.env_remove(name);
        }
        if let Some(config) = config {
            command.env("COHOST_CONFIG", config);
        }
        let output = run_with_timeout(&mut command, Duration::from_secs(20));
        assert!(!output.status.success(), "serve started with {args:?}");
        String::from_utf8_lossy(&output.stderr).to_string()
    };
    let refused = serve(&["--nats", "nats://10.1.2.3:4222"], None);
    assert!(
        refused.contains("refusing to publish to the NATS server at nats://10.1.2.3:4222")
            && refused.contains("tls://")
            && refused.contains("nothing was started"),
        "{refused}"
    );
    // TLS without credentials is refused too.
    let refused = serve(&["--nats", "tls://hub.example:4222"], None);
    assert!(refused.contains("refusing to publish"), "{refused}");
    // A CA for a plain link is a mistake, said at start.
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "not read").unwrap();
    let ca = ca.to_str().unwrap();
    let refused = serve(&["--nats", "nats://127.0.0.1:4222", "--nats-ca", ca], None);
    assert!(
        refused.contains("--nats-ca names CA certificates for a TLS link")
            && refused.contains("--nats-tls"),
        "{refused}"
    );
    // The config file's `[nats]` section names the same setting, and the error names the key.
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[nats]\nurl = \"nats://10.1.2.3:4222\"\n").unwrap();
    let refused = serve(&[], Some(&config));
    assert!(
        refused.contains("refusing to publish to the NATS server at nats://10.1.2.3:4222"),
        "{refused}"
    );
    // A bad machine name is refused with what is wrong with it.
    let refused = serve(&["--machine", "my.laptop"], None);
    assert!(refused.contains("`my.laptop` holds `.`"), "{refused}");
    // A hub, or a machine taking commands, needs a server; the config file's `hub = true` is
    // the same setting as `--hub`.
    let refused = serve(&["--hub"], None);
    assert!(
        refused.contains("--hub views the machines publishing into a NATS server"),
        "{refused}"
    );
    std::fs::write(&config, "hub = true\n").unwrap();
    let refused = serve(&[], Some(&config));
    assert!(
        refused.contains("`hub`") && refused.contains("NATS server"),
        "{refused}"
    );
    let refused = serve(&["--nats-commands"], None);
    assert!(
        refused.contains("--nats-commands takes commands"),
        "{refused}"
    );
    assert!(!dir.path().join("home/federation").exists());
}

#[test]
fn a_tls_link_to_a_server_a_private_ca_signs_publishes_with_that_ca_and_says_why_without_it() {
    let certs = temp_dir("cohost-nats-tls-");
    crate::support::certs::write_certificates(certs.path());
    let file = |name: &str| certs.path().join(name).to_str().unwrap().to_string();
    let nats = NatsServer::start_with_config(|store| {
        format!(
            "host: 127.0.0.1\njetstream {{ store_dir: \"{}\" }}\ntls {{ cert_file: \"{}\", key_file: \"{}\" }}\n",
            store.display(),
            file("server.pem"),
            file("server.key")
        )
    });
    let url = format!("tls://127.0.0.1:{}", nats.port());
    // The CA trusted: the log is published over TLS.
    let (tmux, _) = tmux_with_sessions(&["work"]);
    let ca = file("ca.pem");
    let daemon = TestDaemon::start(
        &tmux,
        &["--nats", &url, "--machine", "box", "--nats-ca", &ca],
    );
    for i in 0..3 {
        post(&daemon, i);
    }
    // (The server acknowledged every logged event: it speaks only TLS.)
    let published = wait_published(&daemon);
    eprintln!("with --nats-ca: {}", published["federation"]);
    assert!(published["seq"].as_u64() >= Some(3), "{published}");
    // Without it the server's certificate is not trusted: nothing is published, and health
    // says why and what to give.
    let (tmux_b, _) = tmux_with_sessions(&["work"]);
    let untrusting = TestDaemon::start(&tmux_b, &["--nats", &url, "--machine", "other"]);
    post(&untrusting, 0);
    let federation = untrusting.wait_for("the TLS failure in health", CATCH_UP, |d| {
        let federation = health(d)["federation"].clone();
        federation["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("cannot connect") && e.contains("--nats-ca"))
            .then_some(federation)
    });
    eprintln!("without --nats-ca: {federation}");
    assert_ne!(federation["link"], "connected", "{federation}");
    assert_eq!(federation["lastAckedSeq"], 0, "{federation}");
}
