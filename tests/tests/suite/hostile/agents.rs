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

/// Issue 47, M2 [CAP_BPF + CAP_NET_ADMIN]: a process named `kmesh-daemon`
/// holding only CAP_BPF and CAP_NET_ADMIN, in a network namespace of its
/// own (as Kmesh runs), was taken for Kmesh's agent: the program it holds
/// on a cgroup below the root was Kmesh's (`held`), a critical
/// `socket_lb_below_root` with Kmesh's restart command. Kmesh runs
/// privileged: CAP_SYS_ADMIN and CAP_NET_ADMIN at least. Now it is a
/// program nobody is proven to own: a warning that says what it is named
/// like.
#[test]
fn a_kmesh_named_process_with_cap_bpf_is_not_kmeshs_agent() {
    if !can_run(&["unshare", "setpriv"]) {
        return;
    }
    let t = TestCgroup::new("kmesh-profile");
    let below = t.mkdir("tenant");
    let mut holder = std::process::Command::new("unshare")
        .args(["--net", "setpriv", "--bounding-set=-all,+bpf,+net_admin", "--inh-caps=-all"])
        .arg(fixture_bin())
        .args(["hold-link", below.to_str().unwrap(), "connect4", "cgroup_connect4_prog", "kmesh-daemon"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the holder");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut out = std::io::BufReader::new(holder.stdout.take().unwrap());
    let holder = Kill(holder);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(line.starts_with("held "), "the holder says what it holds: {line:?}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", holder.0.id())).unwrap();
    assert!(status.contains("CapEff:\t0000008000001000"), "CAP_BPF and CAP_NET_ADMIN only:\n{status}");
    let report = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]).json();
    let below_root: Vec<&serde_json::Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
    let [f] = below_root[..] else { panic!("one finding: {:#}", report["findings"]) };
    assert_eq!((&f["severity"], &f["owner"]), (&"warning".into(), &"unknown".into()), "{f:#}");
    assert!(f["message"].as_str().unwrap().contains("named like Kmesh's"), "{f:#}");
    drop(holder);
}
