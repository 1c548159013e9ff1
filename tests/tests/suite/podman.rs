//! The seed through a real container runtime: a stand-in CNI agent in a
//! podman container with `--cgroupns=private` mounts cgroup2 and attaches the
//! socket-LB programs to "its root", which is its container's cgroup. Like
//! Cilium's agent it runs on the node's network (hostNetwork): a process merely
//! named like the agent is not taken for it.

use std::time::Duration;

use integration_tests::*;

#[test]
fn misattachment_from_a_private_cgroupns_container_names_the_container() {
    if !can_run(&["podman", "unshare"]) {
        return;
    }
    let t = TestCgroup::new("podman");
    t.mkdir(&cgroupfs_pod("burstable", OTHER_POD_UID));
    let bin = tempfile::tempdir().unwrap();
    let agent_copy = bin.path().join("cilium-agent");
    std::fs::copy(env!("CARGO_BIN_EXE_fixture"), &agent_copy).unwrap();

    let parent =
        format!("/{}{}", t.path.file_name().unwrap().to_str().unwrap(), cgroupfs_pod("burstable", OTHER_POD_UID));
    let container = Container::run(
        "podman",
        &format!(
            "--privileged --cgroupns=private --cgroup-manager=cgroupfs --cgroup-parent {parent} {PODMAN_LIMITS} \
             --annotation io.kubernetes.pod.namespace=kube-system --annotation io.kubernetes.pod.name=cilium-podman \
             --annotation io.kubernetes.pod.uid={OTHER_POD_UID} --annotation io.kubernetes.container.name=cilium-agent \
             --network=host --rootfs /:O {} socket-lb-agent /run/cilium/cgroupv2",
            agent_copy.display()
        ),
    );
    let attached = wait_until(Duration::from_secs(20), || container.logs().contains("attached 10"));
    assert!(attached, "the container never attached: {}", container.logs());

    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    let below: Vec<_> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
    assert_eq!(below.len(), 1, "one finding for the cgroup: {report:#}");
    assert_eq!(below[0]["count"], 10, "{report:#}");
    let ctr_cgroup = format!("{}/libpod-{}", cgroupfs_pod("burstable", OTHER_POD_UID), container.id);
    for f in &below {
        assert_eq!(f["cgroup"], ctr_cgroup.as_str());
        assert_eq!(f["container_id"], container.id.as_str(), "the finding names the container");
        assert_eq!(f["runtime"], "podman");
        assert_eq!(f["pod_uid"], OTHER_POD_UID);
        assert_eq!(f["owner"], "cilium");
        let programs = f["programs"].as_array().unwrap();
        assert!(programs.iter().all(|p| p["link_id"].is_u64()), "attached through bpf_links: {f:#}");
        assert!(f["processes"].as_array().unwrap().iter().any(|p| p["comm"] == "cilium-agent"), "{f:#}");
    }
    let agents: Vec<_> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "cni_agent_private_cgroupns").collect();
    assert_eq!(agents.len(), 1, "{report:#}");
    assert_eq!(agents[0]["container_id"], container.id.as_str());

    // Named from podman's containers/storage config.json annotations (the
    // format CRI-O writes), read through PID 1's root: on these machines the
    // real PID 1's root is closed to us, so from a sandbox node that shares
    // the host's filesystems.
    let node = Sandbox::new("true");
    let named = node.agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]).json();
    let below: Vec<_> =
        named["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
    assert_eq!(below.len(), 1, "{named:#}");
    for f in below {
        assert_eq!(f["pod_namespace"], "kube-system", "{f:#}");
        assert_eq!(f["pod_name"], "cilium-podman", "{f:#}");
        assert_eq!(f["container_name"], "cilium-agent", "{f:#}");
    }
    drop(node);

    // Removing the container ends its links: the node is clean again.
    drop(container);
    let clean = wait_until(Duration::from_secs(10), || {
        agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]).code == 0
    });
    assert!(clean, "links outlived the container");
}
