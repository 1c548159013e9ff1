//! The seed's own runtime: Kubernetes on Docker (cri-dockerd) with the
//! cgroupfs driver, against a real dockerd (`tests/src/docker.rs`). A
//! Cilium pod's agent in Docker's default private cgroup namespace mounts
//! cgroup2 at /run/cilium/cgroupv2 and attaches the socket-LB programs
//! through it; a plain pod runs beside it.
#![cfg(feature = "cri")]

use std::path::Path;
use std::time::Duration;

use integration_tests::docker::{Dockerd, PodContainer};
use integration_tests::*;
use serde_json::Value;

const CILIUM_PATH: &str = "/run/cilium/cgroupv2";
const WEB_UID: &str = "5e1c0b7a-2d4f-4c1e-9a8b-7f6e5d4c3b2a";

fn findings<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == kind).collect()
}

/// Issue 31: with the cgroupfs driver a container's cgroup is a bare
/// 64-hex id, and the report said `runtime: null`, with no pod, namespace
/// or container name, although Docker's `config.v2.json` carries them all
/// as cri-dockerd's labels (here under a data root that only
/// `/etc/docker/daemon.json` names). The fix text spoke only of Cilium's
/// Helm settings, where the lasting fix is Docker's own
/// `default-cgroupns-mode`. And `remount --target-pid <agent>` planned
/// `replace` as a dry run, then refused on `--apply`.
#[test]
fn a_docker_run_cilium_agent_is_named_advised_and_fixed_in_its_own_namespace() {
    if !can_run(&["dockerd", "unshare", "nsenter"]) {
        return;
    }
    let mut d = Dockerd::start();
    let agent_id = d.run(&PodContainer {
        namespace: "kube-system",
        pod: "cilium-x7k2p",
        uid: SEED_POD_UID,
        container: "cilium-agent",
        qos: "burstable",
        // Cilium's agent: the capabilities its DaemonSet gives it (these
        // machines' bounding set has not all that --privileged asks for;
        // Docker 20.10 knows no CAP_BPF, and SYS_ADMIN covers bpf()), on
        // the node's network, and in the cgroup namespace Docker gives
        // every container on cgroup v2.
        flags: &[
            "--cap-add",
            "SYS_ADMIN",
            "--cap-add",
            "NET_ADMIN",
            "--security-opt",
            "seccomp=unconfined",
            "--network",
            "host",
            "--entrypoint",
            "/cilium-agent",
        ],
        args: &["socket-lb-agent", CILIUM_PATH],
    });
    let _web = d.run(&PodContainer {
        namespace: "shop",
        pod: "web-0",
        uid: WEB_UID,
        container: "web",
        qos: "besteffort",
        flags: &["--network", "none"],
        args: &["pause"],
    });
    let attached = wait_until(Duration::from_secs(20), || d.logs(&agent_id).contains("attached 10"));
    assert!(attached, "the agent never attached: {}\n{}", d.logs(&agent_id), d.log());

    let root = d.root_in_node();
    let audit = || d.node.agent(&["audit", "--output", "json", "--cgroup-root", root.to_str().unwrap()]);
    let run = audit();
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();

    let below = findings(&report, "socket_lb_below_root");
    assert_eq!(below.len(), 1, "one finding for the cgroup: {report:#}");
    assert_eq!(below[0]["count"], 10, "{report:#}");
    let ctr_cgroup = format!("{}/{agent_id}", cgroupfs_pod("burstable", SEED_POD_UID));
    for f in &below {
        assert_eq!(f["cgroup"], ctr_cgroup.as_str(), "{f:#}");
        assert_eq!(f["container_id"], agent_id.as_str());
        assert_eq!(f["owner"], "cilium");
        assert_eq!(f["runtime"], "docker", "the bare id is Docker's: {f:#}");
        assert_eq!(f["pod_namespace"], "kube-system", "{f:#}");
        assert_eq!(f["pod_name"], "cilium-x7k2p", "{f:#}");
        assert_eq!(f["container_name"], "cilium-agent", "{f:#}");
        let fix = f["remediation"].as_str().unwrap();
        assert!(fix.contains(r#""default-cgroupns-mode": "host""#) && fix.contains("--cgroupns=host"), "{fix}");
    }
    let cause = findings(&report, "cni_agent_private_cgroupns");
    assert_eq!(cause.len(), 1, "{report:#}");
    assert_eq!(cause[0]["runtime"], "docker");
    assert!(cause[0]["remediation"].as_str().unwrap().contains("default-cgroupns-mode"), "{:#}", cause[0]);
    let uncovered = findings(&report, "pods_without_socket_lb");
    assert_eq!(uncovered.len(), 1, "{report:#}");
    let pods = uncovered[0]["pods"].as_array().unwrap();
    let web = pods
        .iter()
        .find(|p| p["uid"] == WEB_UID)
        .unwrap_or_else(|| panic!("the plain pod lacks socket LB: {:#}", uncovered[0]));
    assert_eq!((&web["namespace"], &web["name"]), (&Value::from("shop"), &Value::from("web-0")), "{web:#}");

    // The dry run says what --apply does: cgroup2 mounted from the node's
    // cgroup namespace into the agent's mount namespace, rooted at the root.
    let pid = d.pid(&agent_id).to_string();
    let remount = |apply: bool| {
        let mut args = vec!["remount", "--output", "json", "--path", CILIUM_PATH, "--target-pid", &pid];
        if apply {
            args.push("--apply");
        }
        d.node.agent(&args)
    };
    let plan = remount(false);
    assert_eq!(plan.code, 1, "a change is needed: {plan:?}");
    assert_eq!(plan.json()["plan"]["action"], "replace", "{plan:?}");
    let done = remount(true);
    assert_eq!(done.code, 0, "--apply does what the dry run said: {done:?}");
    let done = done.json();
    assert_eq!(done["outcome"], "done", "{done:#}");
    let real_root = cgroup_id(&cgroup2_root());
    assert_eq!(done["after"]["top_cgroup_id"], real_root, "{done:#}");
    let its_mount = d.node.path(&format!("/proc/{pid}/root{CILIUM_PATH}"));
    assert_eq!(cgroup_id(Path::new(&its_mount)), real_root, "the agent's mount is rooted at the root now");
}
