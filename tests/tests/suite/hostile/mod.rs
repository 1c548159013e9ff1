//! What a process in a hostile pod can do to the agent, and why none of it
//! works: each test builds the attack for real and shows the agent still
//! sees, reports and stops as it should.

use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use integration_tests::*;

mod agents;
mod fuse;
mod http;
mod load;
mod names;
mod tree;

/// The misattachment these tests make (by this test process: its owner is
/// not proven, which is not what they are about).
const MISATTACHED: &str = r#"cgaudit_socket_lb_misattached{attach_type="connect4"}"#;

fn ready(d: &Daemon) {
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
}

fn audit_findings(t: &TestCgroup, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let run = agent(&args);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    run.json()["findings"].as_array().unwrap().clone()
}
