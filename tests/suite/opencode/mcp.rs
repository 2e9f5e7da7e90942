//! An OpenCode session driven over MCP with the real Python SDK (`tests/mcp/client.py`):
//! started with an approval policy, switched to the second model (`set_model`), a prompt sent
//! as a task, the approval listed and answered, the task waited for.

use super::{OpencodeFixture, PEER};
use crate::suite::mcp::{Transport, run_client};
use crate::support::hosted_cases::{check_mcp_approval_run, mcp_approval_plan, structured};

#[test]
fn mcp_runs_an_opencode_session_through_an_approval_to_its_result() {
    let root_dir = tempfile::tempdir().unwrap();
    let root = root_dir.path().canonicalize().unwrap();
    let fx = OpencodeFixture::start_with_args(&["--mcp-allowed-root", root.to_str().unwrap()]);
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let plan = mcp_approval_plan(&fx, &PEER, &project, Some("mock/mock-model-2"));
    let run = run_client(&fx.daemon, Transport::Http, &plan, |_| {});
    check_mcp_approval_run(
        &fx,
        &project,
        &run.tools,
        [run.one(0), run.one(4), run.one(6)],
    );
    let switched = structured(run.one(1));
    assert_eq!(switched["ok"], true, "{switched:#}");
    assert_eq!(
        switched["data"]["model"], "mock/mock-model-2",
        "{switched:#}"
    );
    let models: Vec<String> = fx
        .mock
        .main_requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        models,
        ["mock-model-2", "mock-model-2"],
        "{}",
        fx.mock.summary()
    );
}
