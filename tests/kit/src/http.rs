//! HTTP helpers: a response type, a raw TCP request (for headers ureq will not send, such as a
//! foreign `Host`), and a Server-Sent Events client over a plain socket.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub content_type: Option<String>,
    /// The `WWW-Authenticate` challenge, if any.
    pub www_authenticate: Option<String>,
    pub body: String,
}

/// At most 600 characters of a body, for assertion messages.
pub fn short(body: &str) -> String {
    if body.chars().count() <= 600 {
        body.to_string()
    } else {
        let head: String = body.chars().take(600).collect();
        format!("{head}… ({} bytes)", body.len())
    }
}

impl Resp {
    /// The body as JSON; panics (showing the body) if it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "HTTP {} body is not JSON ({e}): {:?}",
                self.status,
                short(&self.body)
            )
        })
    }

    /// Asserts the status and the `{"error":{"code","message","field"?}}` shape; returns the error.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str, field: Option<&str>) -> Value {
        assert_eq!(
            self.status,
            status,
            "expected HTTP {status} {code}, got {}: {}",
            self.status,
            short(&self.body)
        );
        assert!(
            self.content_type
                .as_deref()
                .is_some_and(|ct| ct.starts_with("application/json")),
            "an error must be JSON, got content-type {:?}: {}",
            self.content_type,
            short(&self.body)
        );
        let body = self.json();
        let error = &body["error"];
        assert!(error.is_object(), "no `error` object in {body}");
        assert_eq!(error["code"], code, "wrong error code in {body}");
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "the error needs a message: {body}"
        );
        match field {
            Some(field) => assert_eq!(error["field"], field, "wrong error field in {body}"),
            None => assert!(
                error.get("field").is_none(),
                "unexpected error field in {body}"
            ),
        }
        error.clone()
    }

    #[track_caller]
    pub fn assert_ok(&self) -> Value {
        assert_eq!(
            self.status,
            200,
            "expected 200, got {}: {}",
            self.status,
            short(&self.body)
        );
        self.json()
    }
}

/// Splits a raw response into status, headers (lower-cased names) and de-chunked body.
fn parse_response(bytes: &[u8]) -> Resp {
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "no complete HTTP head in {:?}",
                String::from_utf8_lossy(bytes)
            )
        });
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let mut body = bytes[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut content_type = None;
    let mut www_authenticate = None;
    let mut chunked = false;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            let value = value.trim();
            if name == "content-type" {
                content_type = Some(value.to_string());
            } else if name == "www-authenticate" {
                www_authenticate = Some(value.to_string());
            } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    if chunked {
        body = dechunk(&body);
    }
    Resp {
        status,
        content_type,
        www_authenticate,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        data = &data[eol + 2..];
        if size == 0 || data.len() < size {
            out.extend_from_slice(&data[..size.min(data.len())]);
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

/// Sends `head` (request line and header lines, without the blank line) plus `body` over a fresh
/// connection, adding `Content-Length` when there is a body and `Connection: close`; reads the
/// whole answer.
pub fn raw_request(port: u16, head: &str, body: &[u8]) -> Resp {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the daemon");
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    stream.set_write_timeout(Some(Duration::from_secs(10))).ok();
    let mut request = head.trim_end().replace("\r\n", "\n").replace('\n', "\r\n");
    request.push_str("\r\n");
    if !body.is_empty() {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("Connection: close\r\n\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    // The server may answer (413, 403…) and close before reading the whole body; a failed write
    // is then expected, the answer is what matters.
    let _ = stream.write_all(&bytes);
    let _ = stream.flush();
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e)
                if answer.windows(4).any(|w| w == b"\r\n\r\n")
                    && e.kind() != ErrorKind::WouldBlock =>
            {
                break;
            }
            Err(e) => panic!(
                "reading the raw answer: {e} (got so far: {:?})",
                String::from_utf8_lossy(&answer)
            ),
        }
    }
    parse_response(&answer)
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {:?}", self.data))
    }
}

/// A Server-Sent Events client over a plain socket (chunked transfer decoding included).
pub struct SseClient {
    reader: BufReader<TcpStream>,
    chunked: bool,
    /// De-chunked bytes not yet consumed as lines.
    pending: Vec<u8>,
    eof: bool,
}

impl SseClient {
    /// Opens `GET path` with the given extra headers. A non-200 answer is returned as `Err`.
    pub fn connect(port: u16, path: &str, headers: &[(&str, String)]) -> Result<SseClient, Resp> {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the daemon");
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut request = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream
            .write_all(request.as_bytes())
            .expect("send the SSE request");
        let mut reader = BufReader::new(stream);
        let mut head = Vec::new();
        loop {
            let mut line = Vec::new();
            let n = reader
                .read_until(b'\n', &mut line)
                .expect("read the SSE answer head");
            if n == 0 {
                panic!(
                    "connection closed inside the answer head: {:?}",
                    String::from_utf8_lossy(&head)
                );
            }
            head.extend_from_slice(&line);
            if line == b"\r\n" {
                break;
            }
        }
        let head_text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        let status: u16 = head_text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let chunked = head_text.contains("transfer-encoding: chunked");
        if status != 200 {
            // Error answers are small and carry a Content-Length.
            let length: usize = head_text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).ok();
            let mut bytes = head;
            bytes.extend_from_slice(&body);
            let mut resp = parse_response(&bytes);
            if chunked {
                resp.body = String::from_utf8_lossy(&dechunk(resp.body.as_bytes())).into_owned();
            }
            return Err(resp);
        }
        assert!(
            head_text.contains("content-type: text/event-stream"),
            "the stream must be text/event-stream: {head_text}"
        );
        Ok(SseClient {
            reader,
            chunked,
            pending: Vec::new(),
            eof: false,
        })
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        self.reader.get_ref().set_read_timeout(Some(timeout)).ok();
    }

    /// Reads more de-chunked bytes into `pending`; false at the end of the stream.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if !self.chunked {
            let mut buf = [0u8; 8192];
            let n = self.reader.read(&mut buf)?;
            if n == 0 {
                self.eof = true;
                return Ok(false);
            }
            self.pending.extend_from_slice(&buf[..n]);
            return Ok(true);
        }
        let mut size_line = Vec::new();
        if self.reader.read_until(b'\n', &mut size_line)? == 0 {
            self.eof = true;
            return Ok(false);
        }
        let text = String::from_utf8_lossy(&size_line);
        let size = usize::from_str_radix(text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| std::io::Error::other(format!("bad chunk size {text:?}: {e}")))?;
        if size == 0 {
            self.eof = true;
            return Ok(false);
        }
        let start = self.pending.len();
        self.pending.resize(start + size, 0);
        self.reader.read_exact(&mut self.pending[start..])?;
        let mut crlf = [0u8; 2];
        self.reader.read_exact(&mut crlf)?;
        Ok(true)
    }

    fn read_line(&mut self) -> std::io::Result<Option<String>> {
        loop {
            if let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                let text = String::from_utf8_lossy(&line[..line.len() - 1]);
                return Ok(Some(text.trim_end_matches('\r').to_string()));
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// The next event, `Ok(None)` when the server ended the stream, `Err` on a read error or
    /// timeout. Comments (keep-alives) are skipped.
    pub fn try_next(&mut self) -> std::io::Result<Option<SseEvent>> {
        let mut id = None;
        let mut event = None;
        let mut data: Option<String> = None;
        loop {
            let Some(line) = self.read_line()? else {
                return Ok(None);
            };
            if line.is_empty() {
                if let Some(data) = data.take() {
                    return Ok(Some(SseEvent { id, event, data }));
                }
                id = None;
                event = None;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => id = value.parse().ok(),
                "event" => event = Some(value.to_string()),
                "data" => match &mut data {
                    Some(existing) => {
                        existing.push('\n');
                        existing.push_str(value);
                    }
                    None => data = Some(value.to_string()),
                },
                _ => {}
            }
        }
    }

    /// The next event; panics on a timeout or read error, `None` when the stream ended.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.try_next()
            .unwrap_or_else(|e| panic!("reading the SSE stream: {e}"))
    }
}

/// Reads one answer off a keep-alive connection: its head, then `Content-Length` bytes of
/// body. What arrived so far, if the connection ends first (the caller's assertion shows it).
pub fn read_answer(socket: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match socket.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return String::from_utf8_lossy(&head).into_owned(),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .and_then(|v| v.trim().parse::<usize>().ok())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    match socket.read_exact(&mut body) {
        Ok(()) => head + &String::from_utf8_lossy(&body),
        Err(_) => head,
    }
}
