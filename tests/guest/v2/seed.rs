//! The seed as production has it, at the real root of each kernel: a
//! `cilium-agent` in a kubepods container cgroup, in a cgroup namespace of
//! its own, mounts cgroup2 at /run/cilium/cgroupv2 in PID 1's mount
//! namespace and attaches its socket-LB programs to the top of that mount,
//! which is its own container. `agent audit` (with no flags: the node as it
//! is) finds all of it, with either walk.

use integration_tests::guest::{self, Guest, RootTree, StandInCni};
use integration_tests::*;
use serde_json::Value;

fn findings<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["findings"].as_array().expect("findings").iter().filter(|f| f["kind"] == kind).collect()
}

/// The walk each kernel of the matrix takes by default, and why.
fn assert_default_walk(g: &Guest, report: &Value) {
    let walk = &report["walk"];
    if g.version() < (6, 1) {
        // No cgroup iterator before 6.1: the reason names what is missing,
        // not a failure to read the kernel's BTF.
        assert_eq!(walk["method"], "syscalls", "{walk:#}");
        let why = walk["fallback_reason"].as_str().unwrap_or_default();
        assert!(why.contains("bpf_iter_cgroup"), "the fallback says what the kernel lacks: {why}");
        assert!(!why.contains("Argument list too long"), "{why}");
    } else {
        assert_eq!(walk["method"], "bpf_iter", "{walk:#}");
        assert!(walk["fallback_reason"].is_null(), "{walk:#}");
    }
    guest::platform("walk", walk["method"].as_str().unwrap_or_default());
}

fn seed_is_found(attach: &str) {
    let g = guest::require("v2");
    let mut tree = RootTree::new();
    let ctr = tree.mkdir(&cilium_container());
    tree.mkdir(&systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER));
    let cni = StandInCni::start("/run/cilium/cgroupv2", &ctr, true, attach);
    let _detach = DetachAll(ctr.clone());

    let run = agent(&["audit", "--output", "json"]);
    assert_eq!(run.code, 1, "a misattachment is a problem: {}\n{}", run.stderr, run.stdout);
    let report = run.json();
    assert_eq!(report["root_cgroup_id"], 1, "the real root: {}", report["cgroup_root"]);
    assert_default_walk(&g, &report);

    let below = findings(&report, "socket_lb_below_root");
    assert_eq!(below.len(), 1, "one finding for the agent's cgroup: {report:#}");
    let programs = below[0]["programs"].as_array().unwrap();
    let mut hooks: Vec<&str> = programs.iter().map(|p| p["attach_type"].as_str().unwrap()).collect();
    hooks.sort();
    let mut expected: Vec<&str> = CILIUM_SOCKET_LB.iter().map(|(_, h)| *h).collect();
    expected.sort();
    assert_eq!(hooks, expected, "every program on its hook: {report:#}");
    for f in &below {
        assert_eq!(
            (f["cgroup"].as_str(), f["pod_uid"].as_str()),
            (Some(cilium_container().as_str()), Some(SEED_POD_UID))
        );
        assert_eq!(f["container_id"], SEED_CONTAINER);
        let procs = f["processes"].as_array().unwrap();
        assert!(procs.iter().any(|p| p["pid"] == cni.pid), "names the agent process: {f:#}");
        if attach == "links" {
            assert!(programs.iter().all(|p| p["link_id"].as_u64().is_some()), "a link names its id: {f:#}");
        }
    }
    let missing = findings(&report, "socket_lb_missing_at_root");
    assert_eq!((missing.len(), missing[0]["hooks"].as_array().map(Vec::len)), (1, Some(10)), "{report:#}");
    let mounts = findings(&report, "cgroup_mount_not_root");
    assert_eq!(mounts.len(), 1, "{report:#}");
    assert_eq!(
        (mounts[0]["mount_point"].as_str(), mounts[0]["severity"].as_str()),
        (Some("/run/cilium/cgroupv2"), Some("critical"))
    );
    assert_eq!(mounts[0]["cgroup"], cilium_container());
    // The other pod has nothing in effect; the agent's own container has
    // (its process is where the programs are).
    let pods = findings(&report, "pods_without_socket_lb");
    assert_eq!(pods.len(), 1, "{report:#}");
    assert_eq!(pods[0]["count"], 1);
    assert_eq!(pods[0]["pods"][0]["uid"], OTHER_POD_UID);
    let cause = findings(&report, "cni_agent_private_cgroupns");
    assert_eq!(cause.len(), 1, "the private cgroup namespace is named as the cause: {report:#}");

    let syscalls = agent(&["audit", "--output", "json", "--walk", "syscalls"]);
    assert_eq!(syscalls.code, 1, "{}", syscalls.stderr);
    assert_eq!(what_was_found(report), what_was_found(syscalls.json()), "the walks disagree");
}

#[test]
fn the_seed_through_links_is_found_at_the_real_root() {
    seed_is_found("links");
}

#[test]
fn the_seed_through_prog_attach_is_found_at_the_real_root() {
    seed_is_found("multi");
}
