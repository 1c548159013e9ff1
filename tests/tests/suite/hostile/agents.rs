//! Processes that pretend to be a CNI agent: without the CNI's privileges
//! on the node's own namespaces, they are not one.

use super::*;

/// Issue 22, 3: capabilities in `/proc/<pid>/status` are the process's in
/// its own user namespace. nobody, in a user namespace of its own
/// (`unshare -Ur`), made a `cilium-agent` with every capability there and
/// `kube-proxy-replacement=true`: the audit took it for Cilium's agent and
/// raised a critical `socket_lb_configured_not_attached` on a node
/// without Cilium. A CNI agent must hold its capability in the initial user
/// namespace.
#[test]
fn a_process_privileged_only_in_its_own_user_namespace_is_not_a_cni_agent() {
    if !can_run(&["unshare", "setpriv"]) {
        return;
    }
    let t = TestCgroup::new("userns-agent");
    let fake = CiliumAgent::in_user_namespace(&[("kube-proxy-replacement", "true")]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", fake.pid)).unwrap();
    assert!(status.contains("CapEff:\t000001ffffffffff"), "privileged in its namespace:\n{status}");
    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    let report = run.json();
    let kinds: Vec<&str> = report["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert!(
        !kinds.contains(&"socket_lb_configured_not_attached"),
        "a user namespace's root taken for Cilium: {kinds:?}"
    );
    assert_eq!(run.code, 0, "{report:#}");
}

/// Issue 28, M3 [CAP_BPF]: a process named `cilium-agent` holding CAP_BPF
/// alone, or every capability in a network namespace of its own, was taken
/// for Cilium's agent, its configuration for Cilium's: on a node without
/// Cilium, a critical `socket_lb_configured_not_attached`. A CNI agent has
/// the CNI's privilege profile (CAP_NET_ADMIN, and CAP_SYS_ADMIN or
/// CAP_BPF) on the node's own network, where CNI agents run.
#[test]
fn a_cni_agent_needs_the_cnis_privileges_on_the_nodes_network() {
    if !can_run(&["unshare", "setpriv"]) {
        return;
    }
    let t = TestCgroup::new("agent-profile");
    let judged = || {
        let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
        let report = run.json();
        let kinds: Vec<String> =
            report["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap().to_owned()).collect();
        (run.code, kinds)
    };
    let config = [("kube-proxy-replacement", "true")];
    {
        let _real = CiliumAgent::new(&config);
        assert_eq!(judged(), (1, vec!["socket_lb_configured_not_attached".to_owned()]), "the real profile is an agent");
    }
    for (what, fake) in
        [("CAP_BPF alone", CiliumAgent::bpf_only(&config)), ("its own network", CiliumAgent::in_own_network(&config))]
    {
        assert_eq!(judged(), (0, vec![]), "{what} taken for Cilium's agent");
        drop(fake);
    }
}
