//! The codex JSON-RPC peer (`cohost::runtime::codex::rpc::RpcClient::from_stdio`) reading arbitrary
//! bytes as codex's stdout: line framing (over-long lines, CR, no final newline), message
//! routing, and every notification and server request through `codex::normalize`.
//!
//! Checks: nothing panics, the reader ends at EOF, and every message is delivered or skipped.
#![no_main]

use cohost::runtime::codex::normalize;
use cohost::runtime::codex::rpc::{Incoming, RpcClient};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stdout = std::io::Cursor::new(data.to_vec());
    runtime.block_on(async move {
        let (client, mut incoming) = RpcClient::from_stdio(tokio::io::sink(), stdout, None);
        while let Some(message) = incoming.recv().await {
            match message {
                Incoming::Notification { method, params } => {
                    let _ = normalize::notification(&method, &params);
                    let _ = normalize::thread_id(&params);
                }
                Incoming::Request { method, params, .. } => {
                    let _ = normalize::approval_request(&method, &params);
                }
            }
        }
        drop(client);
    });
});
