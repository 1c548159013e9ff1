//! What a pod churning cgroups costs everyone else through the agent.

use super::*;

/// Issue 36, H3: while the agent ran, the kernel formatted every new or
/// removed cgroup's whole path under cgroup_mutex and a global spinlock
/// with interrupts off (`TRACE_CGROUP_PATH`, for the cgroup_mkdir and
/// cgroup_rmdir tracepoints its programs enabled, with every event source).
/// A pod churning a cgroup 4,000 levels down made every other pod's mkdir
/// wait: a median of 66 ms instead of 0.02 ms. The agent enables no such
/// tracepoint now: another pod's mkdir+rmdir costs what it costs with the
/// agent stopped (A-B-A, the churn running throughout).
#[test]
fn a_pod_churning_a_deep_chain_slows_no_one_else_through_the_agent() {
    if !can_run(&[]) {
        return;
    }
    sources::deep_churn_costs_others_nothing(None, 4000, Duration::from_secs(3));
}
