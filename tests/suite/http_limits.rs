//! Connection limits and timeouts (issue 15, defect 3): a connection that sends nothing, half a
//! request head or half a body is closed; past the connection cap a client gets a clear JSON
//! answer; SSE streams and long-polls outlive the header timeout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::*;

fn connect(daemon: &TestDaemon) -> TcpStream {
    let socket = TcpStream::connect(("127.0.0.1", daemon.port())).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    socket
}

/// Reads until the server closes the connection; returns what it sent and how long it took.
/// Fails if the connection is still open after the socket's read timeout.
#[track_caller]
fn read_to_close(socket: &mut TcpStream) -> (String, Duration) {
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(error) => panic!(
                "the connection is still open after {:?} ({error}); got {:?}",
                started.elapsed(),
                String::from_utf8_lossy(&answer)
            ),
        }
    }
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

// See: issue 15, defect 3 — "a connection that sends nothing, half its headers or a partial
// body (to a token-less route) stays open indefinitely".
#[test]
fn r15_silent_and_slow_connections_are_closed() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &["--header-timeout", "1", "--body-timeout", "1"]);
    let port = daemon.port();

    // Nothing at all.
    let mut silent = connect(&daemon);
    let (answer, took) = read_to_close(&mut silent);
    assert!(took < Duration::from_secs(4), "{took:?} {answer:?}");

    // Half a request head.
    let mut half = connect(&daemon);
    write!(
        half,
        "POST /log HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Ty"
    )
    .unwrap();
    let (_, took) = read_to_close(&mut half);
    assert!(took < Duration::from_secs(4), "{took:?}");

    // A token-less route with half its body: a JSON 408, then the connection closes.
    let before = daemon.stored_fingerprint();
    let mut partial = connect(&daemon);
    write!(
        partial,
        "POST /log HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"session\":"
    )
    .unwrap();
    let (answer, took) = read_to_close(&mut partial);
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("application/json"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    assert_eq!(daemon.stored_fingerprint(), before);

    // An idle keep-alive connection, after an answer.
    let mut idle = connect(&daemon);
    write!(
        idle,
        "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let (answer, took) = read_to_close(&mut idle);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(
        took >= Duration::from_millis(900),
        "closed before it was idle: {took:?}"
    );

    // The daemon is fine.
    daemon.report_status("s1", "a", "running");
}

// See: issue 15, defect 3 — "any local process can hold connections up to the fd limit; at the
// limit every client is refused".
#[test]
fn r15_connections_past_the_cap_get_a_clear_answer() {
    let daemon = TestDaemon::start_with(None, &["--max-connections", "4"]);
    let port = daemon.port();
    // Four connections that send nothing hold every slot.
    let mut held: Vec<TcpStream> = (0..4).map(|_| connect(&daemon)).collect();
    thread::sleep(Duration::from_millis(300));
    let resp = daemon.raw(
        &format!("GET /api/health HTTP/1.1\nHost: 127.0.0.1:{port}"),
        b"",
    );
    let error = resp.assert_error(503, "too_many_connections", None);
    assert!(
        error["message"].as_str().unwrap().contains("4 connections"),
        "{error}"
    );
    // A slot freed is a slot served.
    held.pop();
    daemon.wait_for("a freed slot", Duration::from_secs(5), |d| {
        let resp = d.raw(
            &format!("GET /api/health HTTP/1.1\nHost: 127.0.0.1:{port}"),
            b"",
        );
        (resp.status == 200).then_some(())
    });
    drop(held);
}

#[test]
fn sse_and_long_polls_outlive_the_header_timeout() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = std::sync::Arc::new(TestDaemon::start(&tmux, &["--header-timeout", "1"]));
    let head = daemon.head();
    let mut stream = daemon
        .sse(&format!("?after={head}"), None)
        .unwrap_or_else(|r| panic!("{r:?}"));
    let poster = {
        let daemon = std::sync::Arc::clone(&daemon);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(2500));
            daemon.report_status("s1", "late", "running")
        })
    };
    let page = daemon
        .get(&format!("/api/events?after={head}&wait=10"))
        .assert_ok();
    let seq = poster.join().unwrap();
    assert_eq!(page["events"][0]["seq"], seq, "{page}");
    stream.set_read_timeout(Duration::from_secs(5));
    let event = stream.next_event().expect("the live event");
    assert_eq!(event.id, Some(seq));
}
