//! Pods outside the CNI's datapath (issue 38), on a node whose pods get
//! their network from a real CNI plugin: the per-endpoint programs on each
//! pod's host-side veth, read from the node without changing it, and
//! proven by the pods' own traffic.
#![cfg(feature = "cri")]

use std::os::unix::ffi::OsStrExt;

use integration_tests::datapath::*;
use integration_tests::*;
use serde_json::Value;

const TOOLS: &[&str] = &[
    "containerd",
    "ctr",
    "runc",
    "podman",
    "nsenter",
    "unshare",
    "ip",
    "tc",
    "/usr/lib/cni/ptp",
    "/usr/lib/cni/host-local",
    "/usr/lib/cni/loopback",
];

fn pod_with(node: &mut Containerd, namespace: &str, name: &str, host_network: bool) -> Pod {
    let pod = if host_network { node.run_host_network_pod(namespace, name) } else { node.run_pod(namespace, name) };
    node.run_container(&pod, &Spec { name: "app", args: &["pause"], ..Spec::default() });
    pod
}

fn audit(node: &Containerd, extra: &[&str]) -> Run {
    let mut args: Vec<String> = node.audit_args();
    if extra.contains(&"--output") {
        // The caller's output instead of the JSON.
        let at = args.iter().position(|a| a == "--output").expect("--output");
        args.drain(at..at + 2);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    node.agent(&args)
}

fn pod_net<'a>(report: &'a Value, pod: &Pod) -> &'a Value {
    let pods = report["datapath"]["pods"].as_array().expect("datapath.pods");
    pods.iter().find(|p| p["pod_uid"] == pod.uid.as_str()).unwrap_or_else(|| panic!("{} not in {pods:#?}", pod.name))
}

/// The seeds' node: a DaemonSet pod (ebs-csi-node) started before the
/// CNI's agent, with a network from the previous plugin (and, with
/// `hider`, a container of it in a network namespace of its own: the red
/// team's hiding place, which any container with CAP_SYS_ADMIN or a user
/// namespace can make); a hostNetwork pod (aws-node); then Cilium's agent,
/// whose endpoints are web-0 (legacy tc) and api-0 (tcx where the kernel
/// takes it).
struct SeedNode {
    node: Containerd,
    cilium: EndpointAgent,
    early: Pod,
    aws_node: Pod,
    web: Pod,
    api: Pod,
    /// Each endpoint's program, and how api-0's was attached.
    web_prog: u32,
    api_prog: u32,
    api_how: String,
}

impl SeedNode {
    fn new(hider: bool) -> SeedNode {
        let mut node = Containerd::start_with_pod_network();
        let early = pod_with(&mut node, "kube-system", "ebs-csi-node-x2v9q", false);
        if hider {
            // 70 processes, each in a network namespace of its own: more
            // processes than are read of a pod, more namespaces than are
            // looked up (the red team's second hiding place).
            let spec = Spec { name: "hider", args: &["netns-pause", "70"], caps: &["SYS_ADMIN"], ..Spec::default() };
            node.run_container(&early, &spec);
        }
        let aws_node = pod_with(&mut node, "kube-system", "aws-node-7dfkq", true);
        // Start times are whole seconds: the agent starts in a later one.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let mut cilium = EndpointAgent::start(&node);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let web = pod_with(&mut node, "shop", "web-0", false);
        let api = pod_with(&mut node, "shop", "api-0", false);
        let (web_how, web_prog) = cilium.attach("tc", &host_veth(&node, &web));
        assert_eq!(web_how, "tc");
        let (api_how, api_prog) = cilium.attach("tcx", &host_veth(&node, &api));
        SeedNode { node, cilium, early, aws_node, web, api, web_prog, api_prog, api_how }
    }
}

/// The seeds' node (`SeedNode`, its early pod with a container in a
/// namespace of its own), and a pod made a moment ago that the CNI has not
/// reached yet. The audit names the early pod, with the fix, lists
/// the others' programs, and leaves the rest alone; the pods' traffic says
/// the same; the node is as it was.
#[test]
fn a_pod_started_before_the_cni_is_named_outside_its_datapath() {
    if !can_run(TOOLS) {
        return;
    }
    let SeedNode { mut node, mut cilium, early, aws_node, web, api, web_prog, api_prog, api_how } = SeedNode::new(true);
    let (early_veth, web_veth) = (host_veth(&node, &early), host_veth(&node, &web));
    // ... and its blinding: a host interface whose name is not UTF-8 (a pod
    // with CAP_NET_ADMIN makes one through its namespace's id for the
    // node's). Nothing is lost.
    let bad = node
        .node
        .command_on_network(&which("ip").unwrap(), &[])
        .args(["link", "add"])
        .arg(std::ffi::OsStr::from_bytes(b"bad\xffname"))
        .args(["type", "veth", "peer", "name", "badpeer0"])
        .status()
        .expect("ip link add");
    assert!(bad.success(), "a veth pair named bad\\xffname");
    let tcx = api_how == "tcx";
    let fresh = pod_with(&mut node, "shop", "web-1", false);

    // An XDP program on web's interface is read too (IFLA_XDP), beside
    // its CNI's.
    let (_, xdp_prog) = cilium.attach("xdp", &web_veth);

    // What reading must not change: netns ids, qdiscs.
    let ids_before = on_node_network(&node, "ip", &["netns", "list-id"]);
    let early_qdiscs = on_node_network(&node, "tc", &["qdisc", "show", "dev", &early_veth]);

    let run = audit(&node, &[]);
    assert_eq!(run.code, 1, "a pod outside the datapath is a problem: {run:?}");
    let report = run.json();
    assert_eq!(report["datapath"]["owners"], serde_json::json!(["cilium"]), "{:#}", report["datapath"]);
    // The node's links are never dumped (each pod's pair is read from its
    // eth0 and looked up by index): the link that is not UTF-8 costs
    // nothing and hides nothing.
    assert!(report["datapath"].get("links_undecodable").is_none(), "{:#}", report["datapath"]);
    let outside: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "pod_outside_datapath").collect();
    assert_eq!(outside.len(), 1, "only the pod that started before the agent: {outside:#?}");
    let f = outside[0];
    assert_eq!(f["severity"], "critical", "{f:#}");
    assert_eq!(f["owner"], "cilium", "{f:#}");
    assert_eq!(f["pod_uid"], early.uid.as_str(), "{f:#}");
    assert_eq!((&f["pod_namespace"], &f["pod_name"]), (&"kube-system".into(), &"ebs-csi-node-x2v9q".into()), "{f:#}");
    assert_eq!(f["interfaces"][0]["name"], early_veth.as_str(), "{f:#}");
    assert_eq!(f["interfaces"][0]["driver"], "veth", "{f:#}");
    let names: Vec<&Value> = f["pods"][0]["containers"].as_array().unwrap().iter().map(|c| &c["name"]).collect();
    assert!(names.contains(&&Value::from("app")), "its containers are named: {f:#}");
    let message = f["message"].as_str().unwrap();
    assert!(message.contains("started before Cilium's agent"), "{message}");
    let fix = f["remediation"].as_str().unwrap();
    for words in ["delete the pod", "unmanagedPodWatcher", "--pod-restart-selector", "NoExecute"] {
        assert!(fix.contains(words), "the fix says {words:?}: {fix}");
    }
    // The managed pods' programs, each as it was attached.
    let programs =
        |pod: &Pod| pod_net(&report, pod)["interfaces"][0]["programs"].as_array().cloned().unwrap_or_default();
    let mut web_progs = programs(&web);
    let xdp: Vec<Value> = web_progs.iter().filter(|p| p["hook"] == "xdp").cloned().collect();
    assert_eq!(xdp.len(), 1, "{web_progs:#?}");
    assert_eq!((&xdp[0]["prog_id"], &xdp[0]["prog_name"]), (&xdp_prog.into(), &"xdp_pass".into()), "{xdp:#?}");
    web_progs.retain(|p| p["hook"] != "xdp");
    assert_eq!(web_progs.len(), 1, "{web_progs:#?}");
    assert_eq!(web_progs[0]["hook"], "tc_ingress");
    assert_eq!(web_progs[0]["prog_name"], "cil_from_container");
    assert_eq!(web_progs[0]["via"], "filter");
    assert_eq!(web_progs[0]["filter_name"], format!("cil_from_container-{web_veth}").as_str());
    assert_eq!(
        (&web_progs[0]["prio"], &web_progs[0]["handle"], &web_progs[0]["direct_action"]),
        (&1.into(), &1.into(), &true.into())
    );
    let api_progs = programs(&api);
    assert_eq!(api_progs[0]["prog_id"], api_prog, "{api_progs:#?}");
    assert_eq!(web_progs[0]["prog_id"], web_prog, "{web_progs:#?}");
    let (hook, via) = if tcx { ("tcx_ingress", "link") } else { ("tc_ingress", "filter") };
    assert_eq!((&api_progs[0]["hook"], &api_progs[0]["via"]), (&hook.into(), &via.into()), "{api_progs:#?}");
    // What the audit found the kernel takes is what the agent found.
    assert_eq!(report["kernel_features"]["tcx"]["works"], tcx, "{:#}", report["kernel_features"]);
    assert_eq!(pod_net(&report, &aws_node)["network"], "host_network");
    assert_eq!(pod_net(&report, &early)["interfaces"][0]["programs"], serde_json::json!([]));
    // The pod made a moment ago waits for its endpoint (--endpoint-grace).
    assert!(programs(&fresh).is_empty());
    // ... and is judged once the grace is over.
    let strict = audit(&node, &["--endpoint-grace", "0s"]).json();
    let judged: Vec<&str> = strict["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "pod_outside_datapath")
        .filter_map(|f| f["pod_uid"].as_str())
        .collect();
    assert_eq!(judged.len(), 2, "{judged:?}");
    assert!(judged.contains(&fresh.uid.as_str()) && !judged.contains(&aws_node.uid.as_str()), "{judged:?}");

    // The table says the same.
    let table = audit(&node, &["--output", "table"]);
    eprintln!("{}", table.stdout);
    assert!(table.stdout.contains("pod_outside_datapath"), "{}", table.stdout);
    assert!(table.stdout.contains("POD INTERFACES (datapath: cilium"), "{}", table.stdout);
    assert!(table.stdout.contains(&web_veth) && table.stdout.contains("cil_from_container"), "{}", table.stdout);
    // ... and node-problem-detector's line, as its shipped plugin runs it.
    let npd = audit(&node, &["--output", "summary", "--fail-on", "critical"]);
    assert_eq!(npd.code, 1, "{npd:?}");
    let want = format!(
        "PROBLEM (1 finding, 1 critical): pod_outside_datapath in pod kube-system/ebs-csi-node-x2v9q: cilium not on {early_veth}"
    );
    assert_eq!(npd.stdout.trim_end(), want, "{npd:?}");

    // Nothing on the node changed.
    assert_eq!(on_node_network(&node, "ip", &["netns", "list-id"]), ids_before, "a netns id was assigned");
    assert_eq!(on_node_network(&node, "tc", &["qdisc", "show", "dev", &early_veth]), early_qdiscs, "a qdisc was made");

    // The traffic: the managed pods' packets run the CNI's program, the
    // unmanaged pod's run none.
    let _stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    let gateway = |pod: &Pod| {
        let ip = node.pod_ip(pod);
        format!("{}.1", &ip[..ip.rfind('.').unwrap()])
    };
    // Each endpoint has a program of its own; the pods' own background
    // packets (IPv6 neighbour discovery) run theirs now and then, never 20.
    let runs = || run_count(web_prog) + run_count(api_prog);
    let before = runs();
    send_from(pod_pid(&node, &early), &gateway(&early), 20);
    let after_early = runs();
    assert!(after_early < before + 20, "the unmanaged pod's 20 packets ran the CNI's programs");
    let before = run_count(web_prog);
    send_from(pod_pid(&node, &web), &gateway(&web), 20);
    let after = run_count(web_prog);
    assert!(after >= before + 20, "web's packets (tc) ran its program {} times", after - before);
    let before = run_count(api_prog);
    send_from(pod_pid(&node, &api), &gateway(&api), 20);
    let after = run_count(api_prog);
    assert!(after >= before + 20, "api's packets ({api_how}) ran its program {} times", after - before);

    // The fix: the pod deleted and made again, now under the CNI.
    node.remove_pod(&early);
    let again = pod_with(&mut node, "kube-system", "ebs-csi-node-p8w4t", false);
    cilium.attach("tc", &host_veth(&node, &again));
    let run = audit(&node, &["--endpoint-grace", "0s"]);
    let report = run.json();
    let judged: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "pod_outside_datapath" && f["pod_uid"] != fresh.uid.as_str())
        .collect();
    assert!(judged.is_empty(), "the recreated pod is in the datapath: {judged:#?}");
}

/// Issue 47, H1: on a node whose CNI runs no eBPF datapath (Calico with
/// iptables: calico-node runs, `FELIX_BPFENABLED` unset), a pod with
/// CAP_NET_ADMIN and CAP_BPF moves a veth end carrying a program named
/// `cali_tc_preamble` into the node's namespace. Before the fix every other
/// pod was "outside Calico's datapath", critical, "delete the pod". Now the
/// node is no datapath (its configuration says none), no pod is judged, and
/// the tenant's interface is its `eth0` pair's host end, not the end it
/// moved.
#[test]
fn a_pod_cannot_make_the_node_a_datapath_by_moving_a_named_program_into_it() {
    if !can_run(TOOLS) {
        return;
    }
    let mut node = Containerd::start_with_pod_network();
    let _calico = EndpointAgent::start_named(&node, "calico-node");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let web = pod_with(&mut node, "shop", "web-0", false);
    let api = pod_with(&mut node, "shop", "api-0", false);
    let tenant = node.run_pod("tenant", "mover-0");
    let spec =
        Spec { name: "mover", args: &["veth-out", "cali_tc_preamble"], caps: &["NET_ADMIN", "BPF"], ..Spec::default() };
    node.run_container(&tenant, &spec);
    let moved = wait_until(std::time::Duration::from_secs(10), || {
        on_node_network(&node, "ip", &["-o", "link", "show"]).contains("h1out")
    });
    assert!(moved, "the tenant's veth end never reached the node's namespace");

    let run = audit(&node, &["--endpoint-grace", "0s"]);
    let report = run.json();
    assert_eq!(report["datapath"]["owners"], serde_json::json!([]), "{:#}", report["datapath"]);
    assert!(
        outside(&report).is_empty(),
        "no pod is outside a datapath the node does not run: {:#}",
        report["findings"]
    );
    assert_eq!(run.code, 0, "{run:?}");
    let names: Vec<&Value> =
        pod_net(&report, &tenant)["interfaces"].as_array().unwrap().iter().map(|i| &i["name"]).collect();
    assert_eq!(names, [&Value::from(host_veth(&node, &tenant))], "{:#}", pod_net(&report, &tenant));
    for pod in [&web, &api] {
        assert_eq!(pod_net(&report, pod)["network"], "interfaces", "{:#}", pod_net(&report, pod));
    }
}

/// A node running Cilium's datapath (the stand-in attaches as its loader
/// does: pins, no fd kept) with one managed pod, and a tenant pod started
/// after the agent whose container runs `args` with `caps`; once `ready`
/// says the attack ran, the audit's report.
fn tenant_report(
    args: &[&str],
    caps: &[&str],
    ready: impl Fn(&Containerd, &Pod) -> bool,
) -> (Containerd, Pod, Value, Run) {
    let mut node = Containerd::start_with_pod_network();
    let mut cilium = EndpointAgent::start(&node);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let web = pod_with(&mut node, "shop", "web-0", false);
    cilium.attach("tcx", &host_veth(&node, &web));
    let tenant = node.run_pod("tenant", "hider-0");
    node.run_container(&tenant, &Spec { name: "hider", args, caps, ..Spec::default() });
    let ran = wait_until(std::time::Duration::from_secs(10), || ready(&node, &tenant));
    assert!(ran, "the tenant's attack never ran");
    let run = audit(&node, &["--endpoint-grace", "0s"]);
    let report = run.json();
    drop(cilium);
    (node, tenant, report, run)
}

/// Issue 47 red team, F1 [CAP_NET_ADMIN]: a pod outside the datapath
/// renames its `eth0` (its traffic still leaves through it) and makes a
/// bridge called `eth0`. The audit read the decoy, found no pair, and said
/// nothing of the pod at all (exit 0). Now the pod is unreadable, and says
/// why: something of it still leads into the node while its `eth0` does not.
#[test]
fn a_decoy_eth0_does_not_hide_a_pod_outside_the_datapath() {
    if !can_run(TOOLS) {
        return;
    }
    // Its eth0 is a bridge now.
    let ready = |node: &Containerd, pod: &Pod| {
        let ns = format!("--net=/proc/{}/ns/net", pod_pid(node, pod));
        let out = std::process::Command::new("nsenter")
            .args([ns.as_str(), "ip", "-o", "-d", "link", "show", "eth0"])
            .output();
        out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("bridge"))
    };
    let (_node, tenant, report, run) = tenant_report(&["decoy-eth0"], &["NET_ADMIN"], ready);
    let pod = pod_net(&report, &tenant);
    assert_eq!(pod["network"], "unreadable", "{pod:#}");
    let reason = pod["reason"].as_str().unwrap();
    assert!(reason.contains("its eth0 is a bridge, not a pair into the node's network namespace"), "{reason}");
    let unread: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "pod_network_unreadable").collect();
    assert_eq!(unread.len(), 1, "{:#}", report["findings"]);
    assert!(unread[0]["pods"].as_array().unwrap().iter().any(|p| p["uid"] == tenant.uid.as_str()), "{:#}", unread[0]);
    assert_ne!(run.code, 0, "{run:?}");
}

/// Issue 47 red team, N1 [CAP_NET_ADMIN]: the pod renames its `eth0` to
/// bytes that are not UTF-8; its traffic still leaves through it. The link
/// could not be decoded and was skipped: no interface, no finding, exit 0.
/// Now the pod is unreadable, and says why.
#[test]
fn an_eth0_renamed_to_bytes_that_are_not_utf8_does_not_hide_a_pod() {
    if !can_run(TOOLS) {
        return;
    }
    let ready = |node: &Containerd, pod: &Pod| {
        let ns = format!("--net=/proc/{}/ns/net", pod_pid(node, pod));
        let out =
            std::process::Command::new("nsenter").args([ns.as_str(), "ip", "-o", "link", "show", "eth0"]).output();
        out.is_ok_and(|o| !o.status.success())
    };
    let (_node, tenant, report, run) = tenant_report(&["decoy-eth0", "--non-utf8"], &["NET_ADMIN"], ready);
    let pod = pod_net(&report, &tenant);
    assert_eq!(pod["network"], "unreadable", "{pod:#}");
    assert!(pod["reason"].as_str().unwrap().contains("could not be decoded"), "{pod:#}");
    assert_ne!(run.code, 0, "{run:?}");
}

/// Issue 47 red team, N2 [CAP_NET_ADMIN]: a managed pod (its `eth0` pair
/// carries Cilium's program) makes another way into the node (a veth end
/// moved there; a macvlan on the node's NIC does the same) and can route
/// around Cilium through it. It was "managed", silent. Now it is said, as
/// a warning.
#[test]
fn a_managed_pod_with_another_way_into_the_node_is_said() {
    if !can_run(TOOLS) {
        return;
    }
    let mut node = Containerd::start_with_pod_network();
    let mut cilium = EndpointAgent::start(&node);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let web = pod_with(&mut node, "shop", "web-0", false);
    cilium.attach("tcx", &host_veth(&node, &web));
    let tenant = pod_with(&mut node, "tenant", "router-0", false);
    cilium.attach("tcx", &host_veth(&node, &tenant));
    let spec = Spec { name: "router", args: &["veth-out", "anything"], caps: &["NET_ADMIN", "BPF"], ..Spec::default() };
    node.run_container(&tenant, &spec);
    let moved = wait_until(std::time::Duration::from_secs(10), || {
        on_node_network(&node, "ip", &["-o", "link", "show"]).contains("h1out")
    });
    assert!(moved, "the tenant's veth end never reached the node's namespace");
    let report = audit(&node, &["--endpoint-grace", "0s"]).json();
    assert_eq!(pod_net(&report, &tenant)["other_links_into_node"], 1, "{:#}", pod_net(&report, &tenant));
    let found = outside(&report);
    let [f] = found[..] else { panic!("{found:#?}") };
    assert_eq!((f["pod_uid"].as_str(), f["severity"].as_str()), (Some(tenant.uid.as_str()), Some("warning")), "{f:#}");
    assert!(
        f["message"].as_str().unwrap().contains("1 other interface of its network namespace leads into the node's"),
        "{f:#}"
    );
}

/// Issue 47 red team, F2 [CAP_NET_ADMIN, CAP_BPF]: a pod outside the
/// datapath makes a veth pair carrying a program named
/// `cil_from_container`, moves one end into the node and makes the other
/// its `eth0` (its real one renamed, still carrying its traffic). The name
/// made it "managed": no finding, exit 0. A name proves nothing now: the
/// program is nobody's, and the pod is outside, named with the interface.
#[test]
fn a_forged_entry_program_does_not_make_a_pod_managed() {
    if !can_run(TOOLS) {
        return;
    }
    // Its real eth0 is eth9 now, and the forged end is its eth0.
    let ready = |node: &Containerd, pod: &Pod| {
        let ns = format!("--net=/proc/{}/ns/net", pod_pid(node, pod));
        let out = std::process::Command::new("nsenter").args([ns.as_str(), "ip", "-o", "link", "show"]).output();
        out.is_ok_and(|o| {
            let links = String::from_utf8_lossy(&o.stdout).into_owned();
            links.contains(": eth9@") && links.contains(": eth0@")
        })
    };
    let args = ["veth-out", "cil_from_container", "--as-eth0"];
    let (_node, tenant, report, run) = tenant_report(&args, &["NET_ADMIN", "BPF"], ready);
    let pod = pod_net(&report, &tenant);
    let programs = &pod["interfaces"][0]["programs"];
    assert_eq!(pod["interfaces"][0]["name"], "h1out", "{pod:#}");
    assert_eq!(programs[0]["prog_name"], "cil_from_container", "{pod:#}");
    assert_eq!(programs[0]["owner"], Value::Null, "a name proves nothing: {pod:#}");
    let found = outside(&report);
    let mine: Vec<&&Value> = found.iter().filter(|f| f["pod_uid"] == tenant.uid.as_str()).collect();
    assert_eq!(mine.len(), 1, "{:#}", report["findings"]);
    assert_eq!(mine[0]["severity"], "critical");
    assert_eq!(run.code, 1, "{run:?}");
}

/// Issue 48: a pod outside the datapath whose interface is a port of
/// another CNI's bridge (podman's `cni-podman0`: rke2#10360's pods that got
/// 10.88.0.x) is named with that bridge, in the JSON and the finding.
#[test]
fn a_pod_on_another_cnis_bridge_is_named_with_it() {
    if !can_run(TOOLS) {
        return;
    }
    let mut node = Containerd::start_with_pod_network();
    let mut cilium = EndpointAgent::start(&node);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let web = pod_with(&mut node, "shop", "web-0", false);
    cilium.attach("tcx", &host_veth(&node, &web));
    let early = pod_with(&mut node, "kube-system", "ebs-csi-node-x2v9q", false);
    let veth = host_veth(&node, &early);
    on_node_network(&node, "ip", &["link", "add", "cni-podman0", "type", "bridge"]);
    on_node_network(&node, "ip", &["link", "set", &veth, "master", "cni-podman0"]);
    let report = audit(&node, &["--endpoint-grace", "0s"]).json();
    assert_eq!(pod_net(&report, &early)["interfaces"][0]["bridge"], "cni-podman0", "{:#}", pod_net(&report, &early));
    let found = outside(&report);
    let f = found.iter().find(|f| f["pod_uid"] == early.uid.as_str()).unwrap_or_else(|| panic!("{found:#?}"));
    assert!(f["message"].as_str().unwrap().contains("Its interface is a port of bridge cni-podman0"), "{f:#}");
}

/// Issue 48: a pod outside the datapath on no bridge, whose address
/// (10.99.0.x, from the node's earlier CNI) is outside the pod CIDR
/// Cilium's agent is configured with (`cluster-pool-ipv4-cidr`), is named
/// with its address; the JSON lists the pod's addresses.
#[test]
fn a_pod_outside_the_cnis_pod_cidr_is_named_with_its_address() {
    if !can_run(TOOLS) {
        return;
    }
    let mut node = Containerd::start_with_pod_network();
    let dir = node.node.path("/run/cilium-config");
    std::fs::create_dir_all(&dir).expect("config dir");
    std::fs::write(dir.join("cluster-pool-ipv4-cidr"), "10.0.0.0/16\n").expect("write the key");
    let mut cilium = EndpointAgent::start_configured(&node, "/run/cilium-config");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let web = pod_with(&mut node, "shop", "web-0", false);
    cilium.attach("tcx", &host_veth(&node, &web));
    let early = pod_with(&mut node, "kube-system", "ebs-csi-node-x2v9q", false);
    let report = audit(&node, &["--endpoint-grace", "0s"]).json();
    let addresses = &pod_net(&report, &early)["addresses"];
    assert!(
        addresses.as_array().is_some_and(|a| a.iter().any(|a| a.as_str().is_some_and(|a| a.starts_with("10.99.0.")))),
        "{addresses:#}"
    );
    let found = outside(&report);
    let f = found.iter().find(|f| f["pod_uid"] == early.uid.as_str()).unwrap_or_else(|| panic!("{found:#?}"));
    let m = f["message"].as_str().unwrap();
    assert!(m.contains("is outside Cilium's pod CIDR 10.0.0.0/16 (its configuration)"), "{m}");
}

/// Issue 47, H2 [CAP_NET_ADMIN]: a pod makes 8,000 devices in the node's
/// network namespace (through the id its own namespace has for the
/// node's). The interface read kept the whole decoded link dump, about
/// 16 KB a link: 128 MiB for these, the daemon's limit (20,000 cost a
/// one-shot audit 333 MB). The node's links are not dumped any more: the
/// audit's peak stays where it is without them, and the pod outside the
/// datapath is still named.
#[test]
fn thousands_of_devices_in_the_nodes_namespace_cost_the_audit_nothing() {
    if !can_run(&[TOOLS, &["time"]].concat()) {
        return;
    }
    let SeedNode { node, early, cilium: _cilium, .. } = SeedNode::new(false);
    let batch = tempfile::NamedTempFile::new().unwrap();
    // 4,000 veth pairs (what a pod's route into the node makes; dummy
    // devices may not be built into the kernel).
    let lines: String = (0..4000).map(|i| format!("link add dev dm{i}a type veth peer name dm{i}b\n")).collect();
    std::fs::write(batch.path(), lines).unwrap();
    on_node_network(&node, "ip", &["-batch", batch.path().to_str().unwrap()]);
    let args = node.audit_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (run, kib) = run_measured(node.node.command(&agent_bin(), &args));
    eprintln!("audit with 8,000 devices in the node's namespace: peak {kib} KiB");
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert!(outside(&report).iter().any(|f| f["pod_uid"] == early.uid.as_str()), "{:#}", report["findings"]);
    assert!(kib < 64 * 1024, "the audit's peak grew with the node's devices: {kib} KiB");
}

/// Issue 47, M1 [CAP_NET_ADMIN]: a pod churns a device in the node's
/// namespace: every link dump was interrupted (NLM_F_DUMP_INTR, twice), the
/// interfaces could not be read, and the audit said OK and exited 0 with
/// the pod outside the datapath unnamed. No dump is made now: each answer
/// is one link, which a churn cannot interrupt.
#[test]
fn a_churning_device_cannot_blind_the_audit() {
    if !can_run(TOOLS) {
        return;
    }
    let SeedNode { node, early, cilium: _cilium, .. } = SeedNode::new(false);
    // Enough devices that a dump takes several answers (a change between
    // two of them interrupts it), then the churn.
    let batch = tempfile::NamedTempFile::new().unwrap();
    let lines: String = (0..400).map(|i| format!("link add dev ch{i}a type veth peer name ch{i}b\n")).collect();
    std::fs::write(batch.path(), lines).unwrap();
    on_node_network(&node, "ip", &["-batch", batch.path().to_str().unwrap()]);
    let sh = which("sh").expect("sh");
    let mut churn = node
        .node
        .command_on_network(
            &sh,
            &["-c", "while :; do ip link add churn0 type veth peer name churn1; ip link del churn0; done"],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the churn");
    struct Stop<'a>(&'a mut std::process::Child);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _churn = Stop(&mut churn);
    std::thread::sleep(std::time::Duration::from_millis(300));
    for _ in 0..3 {
        let run = audit(&node, &[]);
        assert_eq!(run.code, 1, "{run:?}");
        let report = run.json();
        assert_eq!(report["datapath"]["error"], Value::Null, "{:#}", report["datapath"]);
        assert!(outside(&report).iter().any(|f| f["pod_uid"] == early.uid.as_str()), "{:#}", report["findings"]);
    }
}

/// A process of the node (in its PID namespace, where the agent looks) in
/// `into`'s sandbox cgroup and `from`'s network namespace; killed on drop.
struct Borrower<'a> {
    node: &'a Containerd,
    /// Its pid in the node's PID namespace.
    pid: String,
    _child: std::process::Child,
}

impl<'a> Borrower<'a> {
    fn start(node: &'a Containerd, from: &Pod, into: &Pod) -> Borrower<'a> {
        let (from_pid, into_pid) = (node.sandbox_pid(from), node.sandbox_pid(into));
        let script = format!(
            "p=$(sed -n 's/^0:://p' /proc/{into_pid}/cgroup) && echo $$ > /sys/fs/cgroup$p/cgroup.procs && echo $$ && \
             exec nsenter --net=/proc/{from_pid}/ns/net {} pause",
            fixture_bin().display()
        );
        let mut child = node
            .node
            .command(std::path::Path::new("/bin/sh"), &["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the borrower");
        let mut pid = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut pid)
            .expect("its pid");
        let pid = pid.trim().to_owned();
        assert!(!pid.is_empty(), "the borrower did not start");
        // Once nsenter has joined and run the fixture (same pid).
        let fixture = std::fs::canonicalize(fixture_bin()).expect("the fixture");
        let exe = node.node.path(&format!("/proc/{pid}/exe"));
        let joined =
            wait_until(std::time::Duration::from_secs(5), || std::fs::read_link(&exe).is_ok_and(|e| e == fixture));
        assert!(joined, "the borrower never ran the fixture");
        Borrower { node, pid, _child: child }
    }
}

impl Drop for Borrower<'_> {
    fn drop(&mut self) {
        let _ = self.node.node.command(std::path::Path::new("/bin/kill"), &["-9", &self.pid]).status();
    }
}

/// Cilium's CNI configuration as its agent writes it on the node.
const CILIUM_CONFLIST: &str = r#"{"cniVersion":"0.3.1","name":"cilium","plugins":[{"type":"cilium-cni","enable-debug":false,"log-file":"/var/run/cilium/cilium-cni.log"}]}"#;

fn outside(report: &Value) -> Vec<&Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "pod_outside_datapath").collect()
}

/// A node whose CNI configuration names Cilium while its agent is down and
/// no pod carries its programs (the datapath never came up): one finding
/// for the node, not one per pod. With ptp's configuration alone it has no
/// eBPF datapath and nothing is judged. Once the agent runs, each pod that
/// started before it is named, critical.
#[test]
fn a_node_configured_for_cilium_whose_agent_is_down_is_one_finding() {
    if !can_run(TOOLS) {
        return;
    }
    let mut node = Containerd::start_with_pod_network();
    // Cilium's CNI configuration, in a directory of the node's own
    // (containerd's, ptp's, is left as it is).
    let dir = node.node.path("/run/cni/cilium.d");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("05-cilium.conflist"), CILIUM_CONFLIST).expect("write the conflist");
    std::fs::write(dir.join("10-cgaudit-pods.conflist"), r#"{"name":"pods","plugins":[{"type":"ptp"}]}"#).unwrap();

    // The daemon, started on the node before it has pods: the pods are read
    // as they start and judged as their grace ends.
    let root = node.audit_args().last().unwrap().clone();
    let daemon = Daemon::start_via(
        node.node.command(&agent_bin(), &[]),
        &["--cgroup-root", &root, "--interval", "1h", "--endpoint-grace", "2s", "--cni-conf-dir", "/run/cni/cilium.d"],
    );
    let made = std::time::Instant::now();
    let dns = pod_with(&mut node, "kube-system", "coredns-5d78c9869d-qk2x4", false);
    let web = pod_with(&mut node, "shop", "web-0", false);
    let by_owner = r#"cgaudit_findings_by_owner{kind="pod_outside_datapath",severity="warning",owner="cilium"}"#;
    let seen = wait_until(std::time::Duration::from_secs(15), || daemon.metric(by_owner) == Some(1.0));
    assert!(seen, "no {by_owner} within 15 s:\n{}\n{}", daemon.get("/metrics").1, daemon.logs());
    eprintln!("the node's finding came {:?} after its first pod was made (grace 2 s)", made.elapsed());
    drop(daemon);

    // The CNI configuration the runtime uses here: ptp's.
    let plain = audit(&node, &["--endpoint-grace", "0s", "--cni-conf-dir", "/run/cni/net.d"]).json();
    assert_eq!(plain["datapath"]["owners"], serde_json::json!([]), "{:#}", plain["datapath"]);
    assert!(outside(&plain).is_empty(), "no eBPF datapath, nothing outside it: {:#?}", outside(&plain));

    // Cilium's: the node is configured for Cilium's datapath.
    let args = ["--endpoint-grace", "0s", "--cni-conf-dir", "/run/cni/cilium.d"];
    let run = audit(&node, &args);
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert_eq!(report["datapath"]["owners"], serde_json::json!(["cilium"]), "{:#}", report["datapath"]);
    let source = "/run/cni/cilium.d/05-cilium.conflist names the cilium-cni plugin";
    assert_eq!(report["datapath"]["configured"][0]["source"], source, "{:#}", report["datapath"]);
    let found = outside(&report);
    let [f] = found[..] else { panic!("one finding for the node: {found:#?}") };
    assert_eq!((&f["severity"], &f["pod_uid"], &f["count"]), (&"warning".into(), &Value::Null, &2.into()), "{f:#}");
    let mut uids: Vec<&str> = f["pods"].as_array().unwrap().iter().filter_map(|p| p["uid"].as_str()).collect();
    uids.sort();
    let mut want = vec![dns.uid.as_str(), web.uid.as_str()];
    want.sort();
    assert_eq!(uids, want, "{f:#}");
    let message = f["message"].as_str().unwrap();
    assert!(message.starts_with(source) && message.contains("agent is not running"), "{message}");
    let summary =
        audit(&node, &["--output", "summary", "--endpoint-grace", "0s", "--cni-conf-dir", "/run/cni/cilium.d"]);
    let line = summary.stdout.trim_end();
    assert!(line.starts_with("PROBLEM (1 finding, 0 critical): pod_outside_datapath: cilium down: 2 pods ("), "{line}");
    assert!(line.contains("kube-system/coredns-5d78c9869d-qk2x4") && line.contains("shop/web-0"), "{line}");
    let table = audit(&node, &["--output", "table", "--endpoint-grace", "0s", "--cni-conf-dir", "/run/cni/cilium.d"]);
    eprintln!("{}", table.stdout);
    assert!(table.stdout.contains("    where: pods "), "{}", table.stdout);

    // Its agent comes up (its maps pinned) and attaches nothing: every pod
    // predates it. Still one finding for the node, critical now (issue 47
    // red team, F4: never one page per pod from no pod managed at all).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let _cilium = EndpointAgent::start(&node);
    let report = audit(&node, &args).json();
    let found = outside(&report);
    let [f] = found[..] else { panic!("one finding for the node: {found:#?}") };
    assert_eq!((&f["severity"], &f["pod_uid"], &f["count"]), (&"critical".into(), &Value::Null, &2.into()), "{f:#}");
    let message = f["message"].as_str().unwrap();
    assert!(message.contains("and Cilium's agent runs"), "{message}");
    let mut uids: Vec<&str> = f["pods"].as_array().unwrap().iter().filter_map(|p| p["uid"].as_str()).collect();
    uids.sort();
    assert_eq!(uids, want, "{f:#}");
}

/// The daemon: the pod that started before the CNI's agent is a series and
/// an alert within 10 s of the daemon's start; a pod whose program is
/// detached from its interface joins it within 10 s (the interfaces are
/// read every 5 s), young as it is; the hostNetwork pod never does.
#[test]
fn the_daemon_names_pods_outside_the_datapath_and_a_pod_that_lost_its_program() {
    if !can_run(TOOLS) {
        return;
    }
    let SeedNode { mut node, mut cilium, early, aws_node, web, api, api_how: how, .. } = SeedNode::new(false);
    let api_veth = host_veth(&node, &api);

    let root = node.audit_args().last().unwrap().clone();
    let started = std::time::Instant::now();
    let daemon = Daemon::start_via(
        node.node.command(&agent_bin(), &[]),
        &["--cgroup-root", &root, "--interval", "1h", "--node-name", "cri-node"],
    );
    let series = |pod: &Pod| {
        format!(
            r#"cgaudit_pod_outside_datapath{{owner="cilium",severity="critical",pod_namespace="{}",pod_name="{}",pod_uid="{}"}}"#,
            pod.namespace, pod.name, pod.uid
        )
    };
    let named = wait_until(std::time::Duration::from_secs(10), || daemon.metric(&series(&early)) == Some(1.0));
    assert!(named, "no {} within 10 s:\n{}\n{}", series(&early), daemon.get("/metrics").1, daemon.logs());
    eprintln!("the early pod's series came {:?} after the daemon started", started.elapsed());
    let by_owner = r#"cgaudit_findings_by_owner{kind="pod_outside_datapath",severity="critical",owner="cilium"}"#;
    assert_eq!(daemon.metric(by_owner), Some(1.0), "{}", daemon.get("/metrics").1);
    // The daemon's /audit is the audit's, pods' names in datapath.pods
    // included (issue 46: the daemon named only the pods its findings name).
    sources::assert_picture_is(&daemon, || audit(&node, &[]).json());
    let picture: Value = serde_json::from_str(&daemon.get("/audit").1).unwrap();
    assert_eq!(pod_net(&picture, &web)["name"], "web-0", "{:#}", pod_net(&picture, &web));

    // The red team's borrowed namespace: a process of the early pod in
    // web-0's network namespace (a container with CAP_SYS_ADMIN in the
    // node's user namespace joins one whose fd another pod hands it). web's
    // veth carries the program; it is still web's, not the early pod's.
    let borrower = Borrower::start(&node, &web, &early);
    let report = audit(&node, &[]).json();
    let early_net = pod_net(&report, &early);
    let names: Vec<&Value> = early_net["interfaces"].as_array().unwrap().iter().map(|i| &i["name"]).collect();
    assert_eq!(names, [&Value::from(host_veth(&node, &early))], "{early_net:#}");
    assert!(
        report["findings"].as_array().unwrap().iter().any(|f| f["pod_uid"] == early.uid.as_str()),
        "the early pod is still named: {:#}",
        report["findings"]
    );
    assert_eq!(pod_net(&report, &web)["network"], "interfaces", "{:#}", pod_net(&report, &web));
    drop(borrower);

    if how == "tcx" {
        // Its link closed: the program leaves api's interface, and api is
        // outside at once, though younger than --endpoint-grace.
        cilium.detach(&api_veth);
        let detached = std::time::Instant::now();
        let lost = wait_until(std::time::Duration::from_secs(10), || daemon.metric(&series(&api)) == Some(1.0));
        assert!(lost, "api never reported after its program left:\n{}\n{}", daemon.get("/metrics").1, daemon.logs());
        eprintln!("a detached program was noticed after {:?}", detached.elapsed());
        let audit: Value = serde_json::from_str(&daemon.get("/audit").1).unwrap();
        let f = audit["findings"].as_array().unwrap().iter().find(|f| f["pod_uid"] == api.uid.as_str()).unwrap();
        assert!(f["message"].as_str().unwrap().contains("they were detached"), "{f:#}");
    }
    assert!(!daemon.get("/metrics").1.contains(&aws_node.uid), "the hostNetwork pod is never a series");
    assert!(daemon.metric(&series(&web)).is_none(), "web is in the datapath");

    // The fix: the pod deleted and made again under the CNI.
    node.remove_pod(&early);
    let again = pod_with(&mut node, "kube-system", "ebs-csi-node-p8w4t", false);
    cilium.attach("tc", &host_veth(&node, &again));
    let gone = wait_until(std::time::Duration::from_secs(10), || daemon.metric(&series(&early)).is_none());
    assert!(gone, "the deleted pod's series stays:\n{}", daemon.get("/metrics").1);
    assert!(daemon.metric(&series(&again)).is_none());
}

/// Issue 48 (aws-network-policy-agent#514): the AWS network policy agent's
/// programs, pinned and attached as its loader does, are its (proof
/// `program_pinned`) and no finding; aws-node made again pins new
/// programs, its `FilterAdd` leaves the old ones on the pod's interface,
/// and the audit names the pod, the program its filter still runs and the
/// pinned one, with the `tc filter replace` that fixes it. Running that
/// command clears the finding.
#[test]
fn a_pod_whose_policy_filter_kept_the_old_program_is_named() {
    if !can_run(TOOLS) {
        return;
    }
    let mut node = Containerd::start_with_pod_network();
    let web = pod_with(&mut node, "shop", "web-7f9c4b8d5-x2v9q", false);
    let veth = host_veth(&node, &web);
    let mut first = PolicyAgent::start(&node);
    let [old_in, old_eg] = first.attach(&veth, "web-7f9c4b8d5-x2v9q", "shop");
    assert!(old_in.added && old_eg.added, "{old_in:?} {old_eg:?}");
    let report = audit(&node, &[]).json();
    let programs = &pod_net(&report, &web)["interfaces"][0]["programs"];
    let on = |hook: &str| {
        programs
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["hook"] == hook)
            .unwrap_or_else(|| panic!("{programs:#}"))
            .clone()
    };
    assert_eq!(on("tc_egress")["prog_id"], old_in.prog_id, "{programs:#}");
    assert_eq!(on("tc_egress")["owner"], "aws_network_policy", "{programs:#}");
    assert_eq!(on("tc_egress")["proof"], "program_pinned", "{programs:#}");
    assert_eq!(on("tc_ingress")["owner"], "aws_network_policy", "{programs:#}");
    let stale = |report: &Value| -> Vec<Value> {
        let found = report["findings"].as_array().expect("findings");
        found.iter().filter(|f| f["kind"] == "endpoint_program_stale").cloned().collect()
    };
    assert!(stale(&report).is_empty(), "{:#}", report["findings"]);

    // aws-node made again.
    first.stop();
    let mut second = PolicyAgent::start(&node);
    let [new_in, new_eg] = second.attach(&veth, "web-7f9c4b8d5-x2v9q", "shop");
    assert!(!new_in.added && !new_eg.added, "the filters stay: {new_in:?} {new_eg:?}");
    assert_ne!(new_in.prog_id, old_in.prog_id);
    let run = audit(&node, &[]);
    let report = run.json();
    let found = stale(&report);
    assert_eq!(found.len(), 1, "{:#}", report["findings"]);
    let f = &found[0];
    assert_eq!(f["severity"], "critical", "{f:#}");
    assert_eq!(f["owner"], "aws_network_policy", "{f:#}");
    assert_eq!(f["pod_uid"], web.uid.as_str(), "{f:#}");
    assert_eq!(f["pod_name"], "web-7f9c4b8d5-x2v9q", "{f:#}");
    assert_eq!(f["count"], 2, "{f:#}");
    let m = f["message"].as_str().unwrap();
    let pin = "/sys/fs/bpf/globals/aws/programs/web-7f9c4b8d5@shop_handle_ingress";
    assert!(m.contains(&format!("handle_ingress (prog {})", old_in.prog_id)), "{m}");
    assert!(m.contains(&format!("is prog {} ({pin})", new_in.prog_id)), "{m}");
    assert_eq!(run.code, 1, "{run:?}");
    // The pod renames its eth0 (CAP_NET_ADMIN in its own namespace): it
    // cannot be judged, and that is said, not "ok" (red team 51, S1).
    let rename = |from: &str, to: &str| {
        let ns = format!("--net=/proc/{}/ns/net", pod_pid(&node, &web));
        for args in
            [vec!["link", "set", from, "down"], vec!["link", "set", from, "name", to], vec!["link", "set", to, "up"]]
        {
            let ok = std::process::Command::new("nsenter").arg(&ns).arg("ip").args(&args).status().unwrap();
            assert!(ok.success(), "ip {args:?}");
        }
    };
    rename("eth0", "eth9");
    let run = audit(&node, &[]);
    let report = run.json();
    let unread: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "pod_network_unreadable").collect();
    assert_eq!(unread.len(), 1, "{:#}", report["findings"]);
    assert_eq!(unread[0]["owner"], "aws_network_policy", "{:#}", unread[0]);
    assert_eq!(run.code, 1, "{run:?}");
    rename("eth9", "eth0");
    // The fix the finding names, run on the node, points the filter at the
    // pinned program; with the egress one done too, nothing is said.
    let fix = f["remediation"].as_str().unwrap();
    let mut replaced = 0;
    for cmd in fix.split('`').filter(|c| c.starts_with("tc filter replace")) {
        let words: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        on_node_network(&node, "tc", &words);
        replaced += 1;
    }
    assert_eq!(replaced, 2, "{fix}");
    let report = audit(&node, &[]).json();
    assert!(stale(&report).is_empty(), "{:#}", report["findings"]);
    drop(second);
}

/// Issue 48: Cilium's own `bpf_lxc.o` (built from its source with its own
/// Makefile rule), loaded and attached to a pod's host-side veth as
/// cilium-agent's loader does: maps pinned by name in `tc/globals`, the
/// endpoint's tail-call map pinned as `cilium_calls_<id>`, its tcx link
/// pinned under `cilium/endpoints/<id>/links/`, and no fd kept (the loader
/// exits). The listing proves it Cilium's (`link_pinned`), the pod is
/// managed while a pod beside it that nothing attached to is not, and
/// what the pod sends runs the program.
#[test]
fn ciliums_own_endpoint_program_is_proven_its_and_runs() {
    if !can_run(TOOLS) {
        return;
    }
    let mut node = Containerd::start_with_pod_network();
    // The agent's process (the loader below does what its loader does).
    let _cilium = CiliumAgent::in_node(node.node.pid1, &[]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let web = pod_with(&mut node, "shop", "web-0", false);
    let early = pod_with(&mut node, "kube-system", "ebs-csi-node-x2v9q", false);
    let veth = host_veth(&node, &web);
    let object = integration_tests::cilium::objects().join("bpf_lxc.o");
    let args = ["cilium-loader", object.to_str().unwrap(), &veth, "tcx", "endpoint:2301", "cil_from_container:in"];
    let out = node.node.command_on_network(&fixture_bin(), &args).output().expect("cilium-loader");
    assert!(out.status.success(), "cilium-loader: {}", String::from_utf8_lossy(&out.stderr));
    let prog: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("its id");
    let report = audit(&node, &["--endpoint-grace", "0s"]).json();
    let programs = &pod_net(&report, &web)["interfaces"][0]["programs"];
    let p = &programs[0];
    assert_eq!(
        (p["prog_id"].as_u64(), p["prog_name"].as_str(), p["owner"].as_str(), p["proof"].as_str()),
        (Some(u64::from(prog)), Some("cil_from_container"), Some("cilium"), Some("link_pinned")),
        "{programs:#}"
    );
    let outside: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "pod_outside_datapath").collect();
    let uids: Vec<&str> = outside.iter().filter_map(|f| f["pod_uid"].as_str()).collect();
    assert_eq!(uids, [early.uid.as_str()], "{outside:#?}");
    assert_eq!(outside[0]["severity"], "critical", "{:#}", outside[0]);
    let _stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    let ip = node.pod_ip(&web);
    let before = run_count(prog);
    send_from(pod_pid(&node, &web), &format!("{}.1", &ip[..ip.rfind('.').unwrap()]), 20);
    assert!(run_count(prog) >= before + 20, "web's packets ran cil_from_container {} times", run_count(prog) - before);
}
