//! Tests of finding and running codex: fake binaries, and the real pinned codex.

use super::*;
use serde_json::json;
use std::os::unix::fs::symlink;

const WAIT: Duration = Duration::from_secs(10);
/// How long the real codex may take to answer `initialize` and `model/list`: its start under
/// the CI's load (the other half of the version matrix running beside the unit tests, on two
/// cores) went past 10 s twice.
const REAL_CODEX_WAIT: Duration = Duration::from_secs(60);

/// Writes an executable script. The file is written by a `sh` child, not by this process:
/// a file this process had open for writing could be inherited by a child another test is
/// forking at that moment, and exec'ing it would then fail with ETXTBSY.
fn write_executable(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let status = std::process::Command::new("sh")
        .args([
            "-c",
            "printf '%s' \"$2\" > \"$1\" && chmod 755 \"$1\"",
            "sh",
        ])
        .arg(path)
        .arg(text)
        .status()
        .unwrap();
    assert!(status.success(), "writing {} failed", path.display());
}

/// Lays out an npm install like `npm install --prefix DIR @openai/codex` does; returns
/// (`node_modules/.bin/codex`, the native binary).
fn fake_npm_install(prefix: &Path, with_platform_package: bool) -> (PathBuf, PathBuf) {
    let (target, platform_package) =
        native_target(std::env::consts::OS, std::env::consts::ARCH).unwrap();
    let node_modules = prefix.join("node_modules");
    let launcher = node_modules.join("@openai/codex/bin/codex.js");
    write_executable(
        &launcher,
        "#!/usr/bin/env node\n// Unified entry point for the Codex CLI.\n",
    );
    std::fs::write(
        node_modules.join("@openai/codex/package.json"),
        r#"{"name":"@openai/codex"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(node_modules.join(".bin")).unwrap();
    symlink(
        "../@openai/codex/bin/codex.js",
        node_modules.join(".bin/codex"),
    )
    .unwrap();
    let native = if with_platform_package {
        let package = node_modules.join(platform_package);
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("package.json"), "{}").unwrap();
        package.join("vendor").join(target).join("bin/codex")
    } else {
        node_modules
            .join("@openai/codex/vendor")
            .join(target)
            .join("bin/codex")
    };
    write_executable(&native, "#!/bin/sh\necho 'codex-cli 9.8.7'\n");
    (node_modules.join(".bin/codex"), native)
}

#[test]
fn npm_launcher_resolves_to_the_platform_package_binary() {
    let dir = tempfile::tempdir().unwrap();
    let (launcher, native) = fake_npm_install(dir.path(), true);
    let bin = resolve_codex_bin(&launcher).unwrap();
    assert_eq!(bin.path, std::fs::canonicalize(&native).unwrap());
    assert_eq!(
        bin.package_root,
        Some(std::fs::canonicalize(dir.path().join("node_modules/@openai/codex")).unwrap())
    );
    assert_eq!(bin.version, None);
}

#[test]
fn npm_launcher_falls_back_to_its_own_vendor_dir() {
    let dir = tempfile::tempdir().unwrap();
    let (launcher, native) = fake_npm_install(dir.path(), false);
    let bin = resolve_codex_bin(&launcher).unwrap();
    assert_eq!(bin.path, std::fs::canonicalize(&native).unwrap());
}

#[test]
fn npm_launcher_without_native_binary_is_an_error_naming_the_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (launcher, native) = fake_npm_install(dir.path(), true);
    std::fs::remove_file(&native).unwrap();
    let err = resolve_codex_bin(&launcher).unwrap_err();
    let FindError::NativeMissing { tried, .. } = &err else {
        panic!("expected NativeMissing, got {err:?}");
    };
    assert_eq!(tried.len(), 2, "{tried:?}");
    assert!(err.to_string().contains("npm launcher"), "{err}");
}

#[test]
fn native_binary_and_other_scripts_are_used_as_is() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("codex");
    write_executable(&script, "#!/bin/sh\nexec true\n");
    let bin = resolve_codex_bin(&script).unwrap();
    assert_eq!(bin.path, script);
    assert_eq!(bin.package_root, None);

    let elf = dir.path().join("codex-elf");
    std::fs::write(&elf, b"\x7fELF\x02\x01\x01\0\0\0").unwrap();
    assert_eq!(resolve_codex_bin(&elf).unwrap().path, elf);

    assert!(matches!(
        resolve_codex_bin(&dir.path().join("nope")),
        Err(FindError::Missing { .. })
    ));
}

#[test]
fn find_prefers_the_env_override_then_path() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a/codex");
    let second = dir.path().join("b/codex");
    write_executable(&second, "#!/bin/sh\n");
    std::fs::create_dir_all(first.parent().unwrap()).unwrap();
    std::fs::write(&first, "not executable").unwrap();
    let path_var = std::env::join_paths([dir.path().join("a"), dir.path().join("b")]).unwrap();

    let found = find_codex_in(None, Some(path_var.clone())).unwrap();
    assert_eq!(found.path, second, "skips the non-executable one");

    let override_bin = dir.path().join("override");
    write_executable(&override_bin, "#!/bin/sh\n");
    let found = find_codex_in(Some(override_bin.clone().into()), Some(path_var)).unwrap();
    assert_eq!(found.path, override_bin);

    assert!(matches!(
        find_codex_in(None, Some(dir.path().join("empty").into())),
        Err(FindError::NotFound)
    ));
    assert!(matches!(
        find_codex_in(Some(dir.path().join("missing").into()), None),
        Err(FindError::Missing { .. })
    ));
}

#[tokio::test]
async fn detect_version_runs_the_binary_with_the_given_home() {
    let dir = tempfile::tempdir().unwrap();
    let bin_path = dir.path().join("codex");
    write_executable(
        &bin_path,
        "#!/bin/sh\n[ \"$1\" = --version ] || exit 3\necho \"codex-cli 0.169.0 home=$CODEX_HOME\"\n",
    );
    let mut bin = resolve_codex_bin(&bin_path).unwrap();
    let version = bin.detect_version(dir.path()).await.unwrap();
    assert_eq!(version, "0.169.0");
    assert_eq!(bin.version(), Some("0.169.0"));

    write_executable(&bin_path, "#!/bin/sh\necho oops >&2\nexit 2\n");
    let err = bin.detect_version(dir.path()).await.unwrap_err();
    assert!(err.to_string().contains("oops"), "{err}");
}

#[test]
fn parse_version_finds_the_semver() {
    assert_eq!(
        parse_version("codex-cli 0.169.0\n").as_deref(),
        Some("0.169.0")
    );
    assert_eq!(
        parse_version("codex-cli v1.2.3-alpha.1").as_deref(),
        Some("1.2.3-alpha.1")
    );
    assert_eq!(parse_version("codex-cli dev"), None);
}

#[test]
fn stderr_tail_keeps_the_last_lines() {
    let tail = StderrTail::new(3);
    for n in 0..5 {
        tail.push_line(&format!("line {n}"));
    }
    assert_eq!(tail.lines(), vec!["line 2", "line 3", "line 4"]);
    assert_eq!(tail.render(), "line 2\nline 3\nline 4");
    assert!(!tail.is_finished());
    tail.finish();
    assert!(tail.is_finished());
}

#[tokio::test]
async fn stderr_drain_strips_colours_and_finishes_at_eof() {
    let (mut writer, reader) = tokio::io::duplex(1024);
    let tail = StderrTail::drain(reader, "test".into());
    writer
        .write_all(b"\x1b[2m2026-11-29T13:53:39Z\x1b[0m \x1b[31mERROR\x1b[0m no bwrap\nsecond\n")
        .await
        .unwrap();
    drop(writer);
    assert!(tail.wait_finished(WAIT).await);
    assert_eq!(
        tail.lines(),
        vec!["2026-11-29T13:53:39Z ERROR no bwrap", "second"]
    );
}

#[test]
fn banner_port_reads_the_listening_line() {
    assert_eq!(
        banner_port("  listening on: ws://127.0.0.1:40033"),
        Some(40033)
    );
    assert_eq!(banner_port("  readyz: http://127.0.0.1:40033/readyz"), None);
}

#[test]
fn ws_token_is_random_hex_and_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    let first = write_ws_token(&path).unwrap();
    let second = write_ws_token(&path).unwrap();
    assert_eq!(first.len(), 64);
    assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_ne!(first, second);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), second);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(read_token(&path).unwrap(), second);
}

fn fake_bin(dir: &Path, script: &str) -> CodexBin {
    let path = dir.join("fake-codex");
    write_executable(&path, script);
    resolve_codex_bin(&path).unwrap()
}

/// The supervisor, pipes and env plumbing, with a shell script standing in for codex.
#[tokio::test]
async fn spawn_stdio_round_trips_and_passes_env() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_bin(
        dir.path(),
        "#!/bin/sh\n\
         echo \"args=$* home=$CODEX_HOME extra=$EXTRA\" >&2\n\
         while read -r line; do\n\
           case \"$line\" in *initialized*) continue;; esac\n\
           echo '{\"id\":1,\"result\":{\"ok\":true}}'\n\
         done\n\
         echo 'stdin closed' >&2\n",
    );
    let home = dir.path().join("home");
    let (process, rpc, _incoming) = AppServerProcess::spawn(
        &bin,
        &home,
        Listen::Stdio,
        &["--strict-config".to_owned()],
        &[("EXTRA".to_owned(), "yes".to_owned())],
    )
    .await
    .unwrap();
    let result = tokio::time::timeout(WAIT, rpc.initialize("cohost-test", "0.0.0"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result, json!({"ok": true}));

    let status = tokio::time::timeout(WAIT, process.shutdown(WAIT))
        .await
        .unwrap()
        .unwrap();
    // Either stdin EOF or SIGTERM ended it, well within the grace period.
    assert!(status.success() || status.code().is_none(), "{status}");
    let reason = tokio::time::timeout(WAIT, rpc.closed()).await.unwrap();
    assert!(reason.contains("EOF"), "{reason}");
    let stderr = process.stderr_tail().render();
    assert!(
        stderr.contains(&format!(
            "args=app-server --strict-config home={} extra=yes",
            home.display()
        )),
        "{stderr}"
    );
    assert!(matches!(
        rpc.request("model/list", json!({})).await,
        Err(RpcError::Closed { .. })
    ));
}

#[tokio::test]
async fn shutdown_escalates_to_sigkill_for_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild.pid");
    let bin = fake_bin(
        dir.path(),
        &format!(
            "#!/bin/sh\ntrap '' TERM\nsh -c 'trap \"\" TERM; exec sleep 300' &\necho $! > {}\nexec 0<&-\nwhile :; do sleep 1; done\n",
            pid_file.display()
        ),
    );
    let (process, rpc, _incoming) =
        AppServerProcess::spawn(&bin, dir.path(), Listen::Stdio, &[], &[])
            .await
            .unwrap();
    let deadline = Instant::now() + WAIT;
    let grandchild: i32 = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = text.trim().parse()
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "grandchild never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(process.try_status().is_none());

    let started = Instant::now();
    let status = tokio::time::timeout(WAIT, process.shutdown(Duration::from_millis(300)))
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    assert!(tokio::time::timeout(WAIT, rpc.closed()).await.is_ok());
    // The grandchild shared the group and died with it.
    let deadline = Instant::now() + WAIT;
    while Path::new(&format!("/proc/{grandchild}")).exists()
        && !std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
            .unwrap_or_default()
            .contains(") Z")
    {
        assert!(
            Instant::now() < deadline,
            "grandchild {grandchild} survived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn dropping_the_handle_kills_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_bin(dir.path(), "#!/bin/sh\nexec sleep 300\n");
    let (process, rpc, _incoming) =
        AppServerProcess::spawn(&bin, dir.path(), Listen::Stdio, &[], &[])
            .await
            .unwrap();
    let pid = process.pid();
    assert!(pid > 0);
    drop(process);
    let reason = tokio::time::timeout(WAIT, rpc.closed()).await.unwrap();
    assert!(reason.contains("EOF"), "{reason}");
    let deadline = Instant::now() + WAIT;
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "child {pid} survived its handle");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether `pid` is gone or a zombie (nobody may be left to reap it in a test process).
fn is_dead(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| stat.contains(") Z"))
}

#[test]
fn dropping_the_runtime_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild.pid");
    let bin = fake_bin(
        dir.path(),
        &format!(
            "#!/bin/sh\nsleep 300 &\necho $! > {}\nwait\n",
            pid_file.display()
        ),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (process, rpc, incoming) = runtime
        .block_on(AppServerProcess::spawn(
            &bin,
            dir.path(),
            Listen::Stdio,
            &[],
            &[],
        ))
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let grandchild: i32 = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = text.trim().parse()
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "grandchild never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let leader = i32::try_from(process.pid()).unwrap();
    // The handle is still alive: only the supervisor task dies with the runtime.
    drop(runtime);
    while !(is_dead(leader) && is_dead(grandchild)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the group outlived the runtime"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop((process, rpc, incoming));
}

#[tokio::test]
async fn websocket_child_that_exits_early_reports_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    write_ws_token(&token_file).unwrap();
    let bin = fake_bin(
        dir.path(),
        "#!/bin/sh\necho 'Error: approval_policy = \"untrusted\" is no longer supported' >&2\nexit 1\n",
    );
    let err = AppServerProcess::spawn(
        &bin,
        dir.path(),
        Listen::WebSocket {
            port: 0,
            token_file,
        },
        &[],
        &[],
    )
    .await
    .unwrap_err();
    let SpawnError::ExitedEarly { stderr_tail, .. } = &err else {
        panic!("expected ExitedEarly, got {err:?}");
    };
    assert!(stderr_tail.contains("no longer supported"), "{err}");
}

#[tokio::test]
async fn websocket_spawn_needs_a_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_bin(dir.path(), "#!/bin/sh\nexit 0\n");
    let err = AppServerProcess::spawn(
        &bin,
        dir.path(),
        Listen::WebSocket {
            port: 0,
            token_file: dir.path().join("missing"),
        },
        &[],
        &[],
    )
    .await
    .unwrap_err();
    assert!(matches!(err, SpawnError::TokenFile { .. }), "{err:?}");
}

#[test]
fn a_token_file_error_names_its_path_and_keeps_the_io_error() {
    use std::error::Error as _;
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("ws-token");
    let err = read_token(&missing).unwrap_err();
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );
    let source = err.source().expect("the io error is kept");
    let io = source.downcast_ref::<std::io::Error>().unwrap();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    // An empty file has no cause beyond itself.
    std::fs::write(&missing, "  \n").unwrap();
    let err = read_token(&missing).unwrap_err();
    assert!(err.to_string().ends_with("the file is empty"), "{err}");
    assert!(err.source().is_none());
}

// ------------------------------------------------------------------ real codex

/// The real codex (`scripts/test` installs the pinned npm package and exports this).
fn real_codex_bin() -> PathBuf {
    match std::env::var_os("COHOST_TEST_CODEX_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => panic!(
            "COHOST_TEST_CODEX_BIN is not set: run ./scripts/test (it installs the pinned \
             @openai/codex and exports it), or export COHOST_TEST_CODEX_BIN=<path to codex> \
             for a local cargo test"
        ),
    }
}

/// A CODEX_HOME that never reaches the network: a mock provider on a closed port and the
/// plugin sync off (see the wire notes, §1).
fn offline_home(dir: &Path) -> PathBuf {
    let home = dir.join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "model = \"mock-model\"\n\
         model_provider = \"mock\"\n\
         \n\
         [model_providers.mock]\n\
         name = \"mock\"\n\
         base_url = \"http://127.0.0.1:9/v1\"\n\
         wire_api = \"responses\"\n\
         \n\
         [features]\n\
         plugins = false\n",
    )
    .unwrap();
    home
}

async fn initialize_and_list_models(rpc: &RpcClient, what: &str) {
    let init = tokio::time::timeout(REAL_CODEX_WAIT, rpc.initialize("cohost-test", "0.1.0"))
        .await
        .unwrap_or_else(|_| panic!("{what}: initialize timed out"))
        .unwrap_or_else(|err| panic!("{what}: initialize failed: {err}"));
    let user_agent = init["userAgent"].as_str().unwrap_or_default();
    assert!(user_agent.starts_with("cohost-test/"), "{what}: {init}");
    let models = tokio::time::timeout(REAL_CODEX_WAIT, rpc.request("model/list", json!({})))
        .await
        .unwrap_or_else(|_| panic!("{what}: model/list timed out"))
        .unwrap_or_else(|err| panic!("{what}: model/list failed: {err}"));
    let data = models["data"].as_array().cloned().unwrap_or_default();
    assert!(!data.is_empty(), "{what}: empty model list: {models}");
    assert!(data[0]["id"].is_string(), "{what}: {models}");
}

#[tokio::test]
async fn real_npm_launcher_resolves_to_the_native_binary() {
    let launcher = real_codex_bin();
    let mut bin = resolve_codex_bin(&launcher).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let version = bin.detect_version(dir.path()).await.unwrap();
    assert!(parse_version(&version).is_some(), "{version}");
    if is_node_script(&launcher).unwrap() {
        let (target, platform_package) =
            native_target(std::env::consts::OS, std::env::consts::ARCH).unwrap();
        let expected_tail = Path::new("node_modules")
            .join(platform_package)
            .join("vendor")
            .join(target)
            .join("bin/codex");
        assert!(
            bin.path.ends_with(&expected_tail),
            "{} does not end with {}",
            bin.path.display(),
            expected_tail.display()
        );
        assert!(!is_node_script(&bin.path).unwrap());
        assert!(bin.package_root.is_some());
    }
}

#[tokio::test]
async fn real_codex_app_server_over_stdio_and_websocket() {
    let bin = resolve_codex_bin(&real_codex_bin()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = offline_home(dir.path());

    // stdio
    let (process, rpc, _incoming) = AppServerProcess::spawn(&bin, &home, Listen::Stdio, &[], &[])
        .await
        .unwrap();
    initialize_and_list_models(&rpc, "stdio").await;
    let status = tokio::time::timeout(WAIT, process.shutdown(Duration::from_secs(3)))
        .await
        .expect("stdio app-server did not stop");
    assert!(status.is_some(), "stdio exit status unknown");
    tokio::time::timeout(WAIT, rpc.closed()).await.unwrap();

    // WebSocket with a capability token, on a port codex picks.
    let token_file = dir.path().join("ws-token");
    let token = write_ws_token(&token_file).unwrap();
    let (process, rpc, _incoming) = AppServerProcess::spawn(
        &bin,
        &home,
        Listen::WebSocket {
            port: 0,
            token_file,
        },
        &[],
        &[],
    )
    .await
    .unwrap_or_else(|err| panic!("websocket spawn failed: {err}"));
    let url = process.ws_url().unwrap().to_owned();
    initialize_and_list_models(&rpc, "websocket").await;

    // A second client with the token shares the server; one without it is refused.
    let (second, _second_incoming) = RpcClient::connect_ws(&url, Some(&token)).await.unwrap();
    initialize_and_list_models(&second, "second websocket client").await;
    let refused = RpcClient::connect_ws(&url, None).await.unwrap_err();
    assert!(
        matches!(&refused, RpcError::Handshake { message, .. } if message.contains("401")),
        "{refused:?}"
    );
    let refused = RpcClient::connect_ws(&url, Some("wrong-token"))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, RpcError::Handshake { message, .. } if message.contains("401")),
        "{refused:?}"
    );

    let status = tokio::time::timeout(WAIT, process.shutdown(Duration::from_secs(3)))
        .await
        .expect("websocket app-server did not stop");
    assert!(status.is_some(), "websocket exit status unknown");
    let reason = tokio::time::timeout(WAIT, rpc.closed()).await.unwrap();
    assert!(!reason.is_empty());
}
