//! Server-sent-events framing as `opencode serve` writes it on `/event`: each event is one
//! `data: {json}` line and a blank line (no `event:`, `id:` or `retry:` lines in 1.18.33; any
//! such line is ignored, and several `data:` lines of one event are joined with `\n`, as the
//! SSE specification says). Pure: bytes in, payloads out.

/// The most bytes one event may hold before the decoder drops it (a runaway stream must not
/// grow memory without bound). OpenCode's largest events are whole parts (a tool's output).
const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Default)]
pub struct SseDecoder {
    buffer: Vec<u8>,
    /// The `data:` lines of the event being read.
    data: Option<String>,
    /// The event being read grew past [`MAX_EVENT_BYTES`]: skip to its end.
    skipping: bool,
}

impl SseDecoder {
    /// Feeds bytes as they arrive; returns the payloads of the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(newline) = self.buffer.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=newline).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if let Some(data) = self.data.take()
                    && !self.skipping
                {
                    out.push(data);
                }
                self.skipping = false;
                continue;
            }
            let line = String::from_utf8_lossy(&line);
            if let Some(value) = line.strip_prefix("data:") {
                let value = value.strip_prefix(' ').unwrap_or(value);
                let data = self.data.get_or_insert_with(String::new);
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
                if data.len() > MAX_EVENT_BYTES {
                    tracing::warn!(bytes = data.len(), "dropping an oversized opencode event");
                    self.data = None;
                    self.skipping = true;
                }
            }
        }
        if self.buffer.len() > MAX_EVENT_BYTES {
            tracing::warn!(
                bytes = self.buffer.len(),
                "dropping an oversized opencode event line"
            );
            self.buffer.clear();
            self.data = None;
            self.skipping = true;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::SseDecoder;

    #[test]
    fn events_are_split_on_blank_lines_across_chunks() {
        let mut decoder = SseDecoder::default();
        let stream = "data: {\"id\":\"evt_1\",\"type\":\"server.connected\",\"properties\":{}}\n\ndata: {\"type\":\"session.idle\",\"properties\":{\"sessionID\":\"ses_1\"}}\n\n";
        let mut events = Vec::new();
        for chunk in stream.as_bytes().chunks(7) {
            events.extend(decoder.push(chunk));
        }
        assert_eq!(
            events,
            vec![
                "{\"id\":\"evt_1\",\"type\":\"server.connected\",\"properties\":{}}".to_string(),
                "{\"type\":\"session.idle\",\"properties\":{\"sessionID\":\"ses_1\"}}".to_string(),
            ]
        );
    }

    #[test]
    fn crlf_comments_and_multi_line_data_follow_the_spec() {
        let mut decoder = SseDecoder::default();
        let events = decoder.push(b": comment\r\nid: 3\r\ndata: a\r\ndata:b\r\n\r\n\n");
        assert_eq!(events, vec!["a\nb".to_string()]);
    }

    #[test]
    fn an_incomplete_event_waits_for_its_blank_line() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"data: {}\n").is_empty());
        assert_eq!(decoder.push(b"\n"), vec!["{}".to_string()]);
    }
}
