//! A Pi session driven over MCP with the real Python SDK (`tests/mcp/client.py`): started with
//! an approval policy, a prompt sent as a task, the gate's approval listed and answered, the
//! task waited for.

use super::{PEER, PiFixture};
use crate::suite::mcp::{Transport, run_client};
use crate::support::hosted_cases::{check_mcp_approval_run, mcp_approval_plan};

#[test]
fn mcp_runs_a_pi_session_through_an_approval_to_its_result() {
    let root_dir = tempfile::tempdir().unwrap();
    let root = root_dir.path().canonicalize().unwrap();
    let fx = PiFixture::start_with_args(&["--mcp-allowed-root", root.to_str().unwrap()]);
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let plan = mcp_approval_plan(&fx, &PEER, &project, None);
    let run = run_client(&fx.daemon, Transport::Http, &plan, |_| {});
    check_mcp_approval_run(
        &fx,
        &project,
        &run.tools,
        [run.one(0), run.one(3), run.one(5)],
    );
}
