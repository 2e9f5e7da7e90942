//! codex's wire types through `cohost::runtime::codex::normalize`: the first byte picks a notification
//! or request method codex sends, the rest is its `params` (any JSON); the same value is also
//! read as a turn (`turn_completed`, `backfill_turn`) and as an item.
#![no_main]

use cohost::runtime::codex::normalize;
use libfuzzer_sys::fuzz_target;

const METHODS: [&str; 16] = [
    "turn/started",
    "turn/completed",
    "item/started",
    "item/completed",
    "item/agentMessage/delta",
    "item/reasoning/summaryTextDelta",
    "item/reasoning/textDelta",
    "item/commandExecution/outputDelta",
    "thread/tokenUsage/updated",
    "thread/goal/updated",
    "thread/goal/cleared",
    "serverRequest/resolved",
    "error",
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/permissions/requestApproval",
];

fuzz_target!(|data: &[u8]| {
    let Some((pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(params) = serde_json::from_slice::<serde_json::Value>(rest) else {
        return;
    };
    let method = METHODS[usize::from(*pick) % METHODS.len()];
    let _ = normalize::notification(method, &params);
    let _ = normalize::approval_request(method, &params);
    let _ = normalize::turn_completed(&params);
    let _ = normalize::backfill_turn(&params);
    let _ = normalize::item("turn", &params);
    if let Some(turn) = params.get("turn") {
        let _ = normalize::backfill_turn(turn);
    }
});
