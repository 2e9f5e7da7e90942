//! The hosted-session routes as the fixtures drive them, on [`TestDaemon`]: a session created
//! (`POST /api/sessions`), a prompt sent (`POST …/messages`), every stored event of a session
//! read page by page (`GET …/events`); a request the daemon refuses fails the test with its
//! answer and the daemon's stderr.

use serde_json::{Value, json};

use super::Binaries;
use super::daemon::TestDaemon;

/// `base` with `extra`'s fields merged in (each replacing `base`'s of the same name), when both
/// are objects.
pub fn merged(mut base: Value, extra: &Value) -> Value {
    if let (Some(body), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            body.insert(key.clone(), value.clone());
        }
    }
    base
}

impl<B: Binaries> TestDaemon<B> {
    /// Creates a session from `body`; returns its id (any answer but 201 fails the test).
    pub fn create_session(&self, body: &Value) -> String {
        let resp = self.post("/api/sessions", body);
        if resp.status != 201 {
            self.fail(&format!("create answered {}: {}", resp.status, resp.body));
        }
        let answer = resp.json();
        answer["session"]["id"]
            .as_str()
            .unwrap_or_else(|| self.fail(&format!("no session id in {answer}")))
            .to_string()
    }

    /// Sends `text` to the session; returns the answer (any answer but 200 fails the test).
    pub fn send_message(&self, id: &str, text: &str) -> Value {
        let resp = self.post(
            &format!("/api/sessions/{id}/messages"),
            &json!({ "text": text }),
        );
        if resp.status != 200 {
            self.fail(&format!("send answered {}: {}", resp.status, resp.body));
        }
        resp.json()
    }

    /// Asserts a prompt to the session is refused at once as lost (`409 not_live`), the
    /// message saying why: it starts with `session `<id>` is lost: ` and `why`.
    #[track_caller]
    pub fn assert_prompt_refused_as_lost(&self, id: &str, why: &str) {
        let refused = self
            .post(
                &format!("/api/sessions/{id}/messages"),
                &json!({"text": "Are you there?"}),
            )
            .assert_error(409, "not_live", None);
        let message = refused["message"].as_str().unwrap_or("");
        assert!(
            message.starts_with(&format!("session `{id}` is lost: {why}")),
            "{refused}"
        );
    }

    /// Every stored event of the session so far.
    pub fn session_events(&self, id: &str) -> Vec<Value> {
        let mut after = 0;
        let mut out = Vec::new();
        loop {
            let page = self
                .get(&format!(
                    "/api/sessions/{id}/events?after={after}&limit=1000"
                ))
                .assert_ok();
            out.extend(page["events"].as_array().cloned().unwrap_or_default());
            let next = page["next"].as_u64().unwrap();
            if next >= page["head"].as_u64().unwrap() || next == after {
                return out;
            }
            after = next;
        }
    }
}
