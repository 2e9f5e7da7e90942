//! `cohost task …`: queue a prompt, read a task's status and result, cancel, edit or supersede
//! it.

use serde_json::json;

use crate::cli::TaskCommand;
use crate::client::Client;

pub fn run(client: &Client, command: TaskCommand) -> anyhow::Result<()> {
    let print = |value: &serde_json::Value| -> anyhow::Result<()> {
        println!("{}", serde_json::to_string_pretty(value)?);
        Ok(())
    };
    match command {
        TaskCommand::Send {
            id,
            text,
            idempotency_key,
        } => {
            let mut body = json!({ "text": text, "source": "cli" });
            if let Some(key) = idempotency_key {
                body["idempotencyKey"] = json!(key);
            }
            let answer: serde_json::Value =
                client.post(&format!("/api/sessions/{id}/tasks"), &body)?;
            println!(
                "{} {}{}",
                answer["task"]["taskId"].as_str().unwrap_or(""),
                answer["task"]["state"].as_str().unwrap_or(""),
                if answer["replayed"] == true {
                    " (already sent)"
                } else {
                    ""
                }
            );
            Ok(())
        }
        TaskCommand::Status { task, json } => {
            let answer: serde_json::Value = client.get(&format!("/api/tasks/{task}"))?;
            if json {
                return print(&answer);
            }
            crate::commands::print_task(&answer["task"], &mut std::io::stdout().lock())
        }
        TaskCommand::Result { task, json } => {
            let mut offset = 0u64;
            let mut out = std::io::stdout().lock();
            let mut whole = String::new();
            loop {
                let chunk: serde_json::Value =
                    client.get(&format!("/api/tasks/{task}/result?offset={offset}"))?;
                if chunk["available"] != true {
                    if json {
                        return print(&chunk);
                    }
                    anyhow::bail!(
                        "task {task} has no result (state {})",
                        chunk["state"].as_str().unwrap_or("?")
                    );
                }
                let text = chunk["text"].as_str().unwrap_or("");
                if json {
                    whole.push_str(text);
                } else {
                    std::io::Write::write_all(&mut out, text.as_bytes())?;
                }
                if chunk["eof"] == true {
                    if json {
                        // The whole text as one answer of the route, read from offset 0.
                        let mut answer = chunk.clone();
                        answer["text"] = json!(whole);
                        answer["offset"] = json!(0);
                        return print(&answer);
                    }
                    std::io::Write::write_all(&mut out, b"\n")?;
                    return Ok(());
                }
                offset = chunk["nextOffset"].as_u64().unwrap_or(offset);
            }
        }
        TaskCommand::Cancel {
            task,
            lease_generation,
        } => {
            let mut body = json!({});
            if let Some(generation) = lease_generation {
                body["leaseGeneration"] = json!(generation);
            }
            let answer: serde_json::Value =
                client.post(&format!("/api/tasks/{task}/cancel"), &body)?;
            println!(
                "{} {}",
                answer["task"]["state"].as_str().unwrap_or(""),
                answer["outcome"].as_str().unwrap_or("")
            );
            Ok(())
        }
        TaskCommand::Edit {
            task,
            text,
            revision,
            idempotency_key,
        } => print(&client.post(
            &format!("/api/tasks/{task}/edit"),
            &json!({ "text": text, "revision": revision, "idempotencyKey": idempotency_key }),
        )?),
        TaskCommand::Supersede {
            task,
            text,
            revision,
            idempotency_key,
        } => print(&client.post(
            &format!("/api/tasks/{task}/supersede"),
            &json!({ "text": text, "revision": revision, "idempotencyKey": idempotency_key }),
        )?),
    }
}
