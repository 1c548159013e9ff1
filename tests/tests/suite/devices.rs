//! The node's own devices (issue 48): a node (a sandbox with its own
//! network, mount namespace and bpffs) whose device `eth1` is a veth pair
//! into a namespace `peer` that sends it traffic; Cilium's own `bpf_host.o`
//! (built from its source with its own Makefile rule: src/cilium.rs)
//! attached as its agent's loader attaches it (`fixture cilium-loader`:
//! maps pinned by name in `tc/globals`, tail calls filled, links pinned
//! under `cilium/devices/eth1/links/`, no fd kept); a process named
//! `cilium-agent` on the node's network while its agent "runs"; the audit
//! read from the node, and what the programs really do proven by the
//! kernel's run counts of the traffic sent through.

use integration_tests::datapath::{run_count, send_from_ns};
use integration_tests::*;
use serde_json::Value;

const TOOLS: &[&str] = &["nsenter", "unshare", "ip", "tc"];

/// Cilium's CNI configuration as its agent writes it on the node.
const CILIUM_CONFLIST: &str = r#"{"cniVersion":"0.3.1","name":"cilium","plugins":[{"type":"cilium-cni"}]}"#;

struct DeviceNode {
    node: Sandbox,
    t: TestCgroup,
    /// Cilium's agent on the node's network, while it runs.
    agent: Option<CiliumAgent>,
}

impl DeviceNode {
    fn new() -> DeviceNode {
        Self::with_config(&[])
    }

    /// A node whose Cilium agent's configuration says `config`.
    fn with_config(config: &[(&str, &str)]) -> DeviceNode {
        let t = TestCgroup::new("devices");
        let node = Sandbox::with_network(&format!(
            "mount -t tmpfs tmpfs /run\nmount -t bpf bpf /sys/fs/bpf\n\
             mkdir -p /run/cni/net.d\nprintf '%s' '{CILIUM_CONFLIST}' > /run/cni/net.d/05-cilium.conflist\n\
             ip netns add peer\nip link add eth1 type veth peer name eth1p netns peer\n\
             ip addr add 10.98.0.1/24 dev eth1\nip link set eth1 up\n\
             ip -n peer addr add 10.98.0.2/24 dev eth1p\nip -n peer link set eth1p up\nip -n peer link set lo up\n\
             ip addr add {node_ip}/32 dev lo",
            node_ip = std::net::Ipv4Addr::from(integration_tests::net::NODE_IP)
        ));
        let agent = CiliumAgent::in_node(node.pid1, config);
        DeviceNode { node, t, agent: Some(agent) }
    }

    /// Cilium's agent attaches eth1's programs from its own `bpf_host.o`
    /// (`tc`: by legacy tc filters at that priority); their ids, ingress
    /// first.
    fn attach(&self, tc: Option<u16>) -> (u32, u32) {
        let object = integration_tests::cilium::objects().join("bpf_host.o");
        let how = tc.map_or("tcx".to_owned(), |p| format!("tc:{p}"));
        let args = [
            "cilium-loader",
            object.to_str().unwrap(),
            "eth1",
            &how,
            "netdev",
            "cil_from_netdev:in",
            "cil_to_netdev:out",
        ];
        let out = self.node.command_on_network(&fixture_bin(), &args).output().expect("cilium-loader");
        assert!(out.status.success(), "cilium-loader: {}", String::from_utf8_lossy(&out.stderr));
        let ids: Vec<u32> =
            String::from_utf8_lossy(&out.stdout).split_whitespace().map(|w| w.parse().unwrap()).collect();
        (ids[0], ids[1])
    }

    /// Cilium's overlay: `cilium_vxlan` on the node (collect-metadata
    /// mode, port 8472, as Cilium makes it), and in `peer` a VXLAN device
    /// `vx0` to the node over eth1 (10.99.0.2, the node's overlay address
    /// 10.99.0.1 resolved to cilium_vxlan's MAC): what `peer` sends to
    /// 10.99.0.1 arrives on cilium_vxlan's ingress.
    fn overlay(&self) {
        let ip = which("ip").unwrap();
        let sh = |args: &[&str]| {
            let out = self.node.command_on_network(&ip, args).output().expect("ip");
            assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        sh(&["link", "add", "cilium_vxlan", "type", "vxlan", "external", "dstport", "8472"]);
        sh(&["link", "set", "cilium_vxlan", "up"]);
        let shown = sh(&["-o", "link", "show", "cilium_vxlan"]);
        let mac = shown.split_whitespace().skip_while(|w| *w != "link/ether").nth(1).expect("its MAC").to_owned();
        for args in [
            &["-n", "peer", "link", "add", "vx0", "type", "vxlan", "id", "2", "remote", "10.98.0.1", "dstport", "8472"]
                [..],
            &["-n", "peer", "addr", "add", "10.99.0.2/24", "dev", "vx0"],
            &["-n", "peer", "link", "set", "vx0", "up"],
            &["-n", "peer", "neigh", "add", "10.99.0.1", "lladdr", &mac, "dev", "vx0"],
        ] {
            sh(args);
        }
    }

    /// Cilium's agent attaches `dev`'s programs from its own `object` by
    /// tcx, its tail-call map pinned as `calls`; the entries' ids.
    fn attach_object(&self, object: &str, dev: &str, calls: &str, entries: &[&str]) -> Vec<u32> {
        let object = integration_tests::cilium::objects().join(object);
        let mut args = vec!["cilium-loader", object.to_str().unwrap(), dev, "tcx", calls];
        args.extend(entries);
        let out = self.node.command_on_network(&fixture_bin(), &args).output().expect("cilium-loader");
        assert!(out.status.success(), "cilium-loader: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(|w| w.parse().unwrap()).collect()
    }

    /// Sends `n` datagrams from `peer` through the overlay (into
    /// cilium_vxlan's ingress).
    fn send_overlay(&self, n: usize) {
        send_from_ns(&self.node.path("/run/netns/peer"), "10.99.0.1", n);
    }

    /// Cilium's agent stops (its pod deleted; its programs stay): gone
    /// before the next audit looks.
    fn stop_agent(&mut self) {
        drop(self.agent.take());
    }

    fn audit(&self) -> (Value, Run) {
        let root = self.t.path.display().to_string();
        let run =
            self.node.agent(&["audit", "--output", "json", "--cgroup-root", &root, "--cni-conf-dir", "/run/cni/net.d"]);
        assert!(run.code == 0 || run.code == 1, "{run:?}");
        (run.json(), run)
    }

    /// Sends `n` datagrams from `peer` into eth1 (its ingress).
    fn send(&self, n: usize) {
        send_from_ns(&self.node.path("/run/netns/peer"), "10.98.0.1", n);
    }
}

fn eth1(report: &Value) -> &Value {
    let devices = report["datapath"]["devices"]["devices"].as_array().expect("datapath.devices.devices");
    devices.iter().find(|d| d["name"] == "eth1").unwrap_or_else(|| panic!("no eth1 in {devices:#?}"))
}

fn of_kind<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == kind).collect()
}

const DEVICE_KINDS: [&str; 5] = [
    "device_duplicate_programs",
    "device_program_never_runs",
    "device_leftover_programs",
    "bpffs_shadowed",
    "device_not_meant",
];

/// The healthy node: Cilium's two device programs where its pins say,
/// once each; listed with owner and proof, nothing raised; what is sent
/// through runs Cilium's program.
#[test]
fn ciliums_device_programs_where_its_pins_say_raise_nothing() {
    if !can_run(TOOLS) {
        return;
    }
    let n = DeviceNode::new();
    let (from, to) = n.attach(None);
    let stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    n.send(5);
    assert!(run_count(from) >= 5, "cil_from_netdev ran {} times", run_count(from));
    drop(stats);
    let (report, run) = n.audit();
    let programs = eth1(&report)["programs"].as_array().unwrap();
    let seen: Vec<(&str, &str, &str, &str)> = programs
        .iter()
        .map(|p| {
            (
                p["hook"].as_str().unwrap(),
                p["prog_name"].as_str().unwrap(),
                p["owner"].as_str().unwrap_or("-"),
                p["proof"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("tcx_ingress", "cil_from_netdev", "cilium", "link_pinned"),
            ("tcx_egress", "cil_to_netdev", "cilium", "link_pinned")
        ],
        "{programs:#?}"
    );
    assert_eq!(programs[1]["prog_id"], to);
    for kind in DEVICE_KINDS {
        assert!(of_kind(&report, kind).is_empty(), "{kind}: {:#}", report["findings"]);
    }
    assert_eq!(run.code, 0, "{run:?}");
    // The table says the same.
    let text =
        n.node.agent(&["audit", "--cgroup-root", &n.t.path.display().to_string(), "--cni-conf-dir", "/run/cni/net.d"]);
    assert!(text.stdout.contains("HOST DEVICES"), "{}", text.stdout);
    assert!(
        text.stdout.lines().any(|l| l.contains("eth1") && l.contains("cil_from_netdev") && l.contains("link_pinned")),
        "{}",
        text.stdout
    );
}

/// cilium#47847: a second bpffs mounted over /sys/fs/bpf while the agent
/// runs hides its pins; at its next attach it finds none and attaches
/// again. Two copies on each direction of eth1; the traffic proves that
/// the first (the hidden one's) decides every packet and the new one never
/// runs. The audit names the copy nothing of Cilium's proves as stale,
/// critical, with the command that detaches it; after that command the
/// new copy runs.
#[test]
fn a_restart_under_a_shadowed_bpffs_leaves_a_stale_copy_that_is_named() {
    if !can_run(TOOLS) {
        return;
    }
    let n = DeviceNode::new();
    let (old_from, _) = n.attach(None);
    // `mount -a` from fstab, on the node.
    let mounted = n.node.command(&which("mount").unwrap(), &["-t", "bpf", "bpf", "/sys/fs/bpf"]).status().unwrap();
    assert!(mounted.success());
    let (new_from, _) = n.attach(None);
    assert_ne!(old_from, new_from);
    let stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    n.send(5);
    let (old_ran, new_ran) = (run_count(old_from), run_count(new_from));
    assert!(old_ran >= 5 && new_ran == 0, "old ran {old_ran}, new {new_ran}: the first copy decides");
    let (report, run) = n.audit();
    let dups = of_kind(&report, "device_duplicate_programs");
    let ingress: Vec<&&Value> = dups.iter().filter(|f| f["prog_name"] == "cil_from_netdev").collect();
    let [f] = ingress[..] else { panic!("one duplicate on eth1's ingress: {:#}", report["findings"]) };
    assert_eq!((f["severity"].as_str(), f["prog_id"].as_u64()), (Some("critical"), Some(u64::from(old_from))), "{f:#}");
    assert_eq!(f["interfaces"][0]["name"], "eth1");
    let message = f["message"].as_str().unwrap();
    assert!(message.contains("the first decides every packet and the others never run"), "{message}");
    assert!(message.contains(&format!("prog {old_from} looks stale (not the one Cilium's pin holds)")), "{message}");
    assert_eq!(run.code, 1, "{run:?}");
    // And the cause, named with what it hides.
    let shadowed = of_kind(&report, "bpffs_shadowed");
    let [b] = shadowed[..] else { panic!("{:#}", report["findings"]) };
    assert_eq!((b["severity"].as_str(), b["mount_point"].as_str()), (Some("critical"), Some("/sys/fs/bpf")), "{b:#}");
    assert!(b["message"].as_str().unwrap().contains(&format!("cil_from_netdev (prog {old_from}")), "{b:#}");
    assert!(b["remediation"].as_str().unwrap().contains("umount /sys/fs/bpf"), "{b:#}");
    // Its own fix: the stale link detached, the new copy runs.
    let link = f["link_id"].as_u64().expect("the stale copy's link");
    let bpftool_free = agent::bpf::sys::link_fd_by_id(link as u32)
        .and_then(|fd| agent::bpf::sys::link_detach(std::os::fd::AsFd::as_fd(&fd)));
    bpftool_free.expect("detach the stale link");
    n.send(5);
    assert!(run_count(new_from) >= 5, "after the fix the new copy ran {} times", run_count(new_from));
    drop(stats);
    let (report, _) = n.audit();
    assert!(
        of_kind(&report, "device_duplicate_programs").iter().all(|f| f["prog_name"] != "cil_from_netdev"),
        "{:#}",
        report["findings"]
    );
}

/// cilium#36172: `bpf-filter-priority` changed from 1 to 2 on a node
/// without tcx; the filters at the old priority stay. Both copies use
/// Cilium's pinned maps; the older one, at priority 1, runs first and is
/// named stale.
#[test]
fn a_changed_filter_priority_leaves_the_old_filters_named_stale() {
    if !can_run(TOOLS) {
        return;
    }
    let n = DeviceNode::new();
    let (old_from, _) = n.attach(Some(1));
    let (new_from, _) = n.attach(Some(2));
    let stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    n.send(5);
    assert!(run_count(old_from) >= 5 && run_count(new_from) == 0, "pref 1 runs first and decides");
    drop(stats);
    let (report, _) = n.audit();
    let dups = of_kind(&report, "device_duplicate_programs");
    let f =
        dups.iter().find(|f| f["prog_name"] == "cil_from_netdev").unwrap_or_else(|| panic!("{:#}", report["findings"]));
    assert_eq!(f["prog_id"].as_u64(), Some(u64::from(old_from)), "{f:#}");
    assert!(
        f["remediation"].as_str().unwrap().contains("tc filter del dev eth1 ingress pref 1 handle 0x1 bpf"),
        "{f:#}"
    );
    let proofs: Vec<&str> =
        eth1(&report)["programs"].as_array().unwrap().iter().map(|p| p["proof"].as_str().unwrap_or("-")).collect();
    assert!(proofs.iter().all(|p| *p == "maps_pinned"), "{proofs:?}");
}

/// Red team R1: a pod makes 1,100 bridges named `cilium_N` in the node's
/// namespace (as one with CAP_NET_ADMIN can, through a netns id). They
/// carry nothing: eth1, where Cilium's stale copy is, is read all the same
/// and the duplicate said; the idle devices past the list are counted.
#[test]
fn a_thousand_devices_named_like_ciliums_cannot_hide_a_stale_copy() {
    if !can_run(TOOLS) {
        return;
    }
    let n = DeviceNode::new();
    n.attach(Some(1));
    n.attach(Some(2));
    let (report, _) = n.audit();
    assert_eq!(of_kind(&report, "device_duplicate_programs").len(), 2, "{:#}", report["findings"]);
    let decoys: String = (0..1100).map(|i| format!("link add cilium_{i} type bridge\n")).collect();
    std::fs::write(n.node.path("/run/decoys"), decoys).expect("write the batch");
    let out = n.node.command_on_network(&which("ip").unwrap(), &["-batch", "/run/decoys"]).output().expect("ip");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let root = n.t.path.display().to_string();
    let run = n.node.agent(&["audit", "--output", "json", "--cgroup-root", &root, "--cni-conf-dir", "/run/cni/net.d"]);
    let report = run.json();
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(of_kind(&report, "device_duplicate_programs").len(), 2, "{:#}", report["findings"]);
    let devices = &report["datapath"]["devices"];
    assert_eq!(devices["not_read"], 0, "{:#}", devices["not_read"]);
    assert!(devices["idle_not_listed"].as_u64().is_some_and(|n| n >= 77), "{:#}", devices["idle_not_listed"]);
    assert_ne!(report["status"], "incomplete", "{:#}", report["view"]);
}

/// Red team round 8, S1: when the device read's time runs out (a slow
/// kernel, as under RTNL held by a busy CNI: here strace delays every
/// bpf() call by 10 ms), eth1 and its Cilium programs are not read; the
/// audit may not then say the node is fine: its view is incomplete.
#[test]
fn a_device_read_out_of_time_is_never_ok() {
    if !can_run(&["nsenter", "unshare", "ip", "tc", "strace"]) {
        return;
    }
    let n = DeviceNode::new();
    n.attach(Some(1));
    n.attach(Some(2));
    let decoys: String = (0..600).map(|i| format!("link add br{i} type bridge\n")).collect();
    std::fs::write(n.node.path("/run/decoys"), decoys).expect("write the batch");
    let out = n.node.command_on_network(&which("ip").unwrap(), &["-batch", "/run/decoys"]).output().expect("ip");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let root = n.t.path.display().to_string();
    let agent = agent_bin();
    let args = [
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        "trace=bpf",
        "-e",
        "inject=bpf:delay_exit=10000",
        agent.to_str().unwrap(),
        "audit",
        "--output",
        "json",
        "--cgroup-root",
        &root,
        "--cni-conf-dir",
        "/run/cni/net.d",
    ];
    let run = run(n.node.command(&which("strace").unwrap(), &args));
    let report = run.json();
    let devices = &report["datapath"]["devices"];
    assert!(devices["not_read"].as_u64().is_some_and(|n| n > 0), "{:#}", devices["not_read"]);
    assert_eq!(report["status"], "incomplete", "{:#}", report["view"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// cilium#48695: Cilium's agent configured for `devices=eth0` with its
/// programs on eth1 (auto-detected once, or dropped from the list and never
/// cleaned): said, a warning, with Cilium's own fix.
#[test]
fn ciliums_programs_on_a_device_its_configuration_does_not_name_are_said() {
    if !can_run(TOOLS) {
        return;
    }
    let n = DeviceNode::with_config(&[("devices", "eth0")]);
    let (from, _) = n.attach(None);
    let (report, _) = n.audit();
    let found = of_kind(&report, "device_not_meant");
    let [f] = found[..] else { panic!("{:#}", report["findings"]) };
    assert_eq!((f["severity"].as_str(), f["prog_id"].as_u64()), (Some("warning"), Some(u64::from(from))), "{f:#}");
    assert!(f["message"].as_str().unwrap().contains("(devices=eth0)"), "{f:#}");
    // Named there (by prefix): nothing.
    drop(n);
    let n = DeviceNode::with_config(&[("devices", "eth+")]);
    n.attach(None);
    let (report, _) = n.audit();
    assert!(of_kind(&report, "device_not_meant").is_empty(), "{:#}", report["findings"]);
}

/// cilium#41393: a monitoring program attached as a legacy tc filter on a
/// device where Cilium's tcx program runs first never sees a packet; the
/// kernel's counts say so, and so does the audit.
#[test]
fn a_filter_after_ciliums_tcx_program_is_said_never_to_run() {
    if !can_run(TOOLS) {
        return;
    }
    let n = DeviceNode::new();
    let (from, _) = n.attach(None);
    // A user's monitor, as `tc filter add ... bpf da` would attach it.
    let out = n.node.command_on_network(&fixture_bin(), &["tc-monitor", "eth1"]).output().expect("tc-monitor");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let monitor: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("its id");
    let stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    n.send(5);
    assert!(run_count(from) >= 5 && run_count(monitor) == 0, "Cilium's decides; the monitor never runs");
    drop(stats);
    let (report, _) = n.audit();
    let never = of_kind(&report, "device_program_never_runs");
    let [f] = never[..] else { panic!("{:#}", report["findings"]) };
    assert_eq!((f["prog_id"].as_u64(), f["other_owner"].as_str()), (Some(u64::from(monitor)), Some("cilium")), "{f:#}");
    assert_eq!(f["severity"], "warning");
}

/// cilium#30609: Cilium uninstalled without its cleanup: its agent gone,
/// its CNI configuration removed, its programs left on the device, and
/// still deciding its traffic (the kernel's counts). A critical with the
/// cleanup commands; while the configuration still names Cilium (an agent
/// restart), nothing.
#[test]
fn ciliums_programs_left_after_an_uninstall_are_a_critical_leftover() {
    if !can_run(TOOLS) {
        return;
    }
    let mut n = DeviceNode::new();
    let (from, _) = n.attach(None);
    n.stop_agent();
    // An agent restart: its configuration still names it.
    let (report, _) = n.audit();
    assert!(of_kind(&report, "device_leftover_programs").is_empty(), "{:#}", report["findings"]);
    // ... also behind Multus, whose configuration comes first and names
    // Cilium's network (red team N7), and through an absolute link to a
    // file of the directory, which libcni follows.
    let dir = n.node.path("/run/cni/net.d");
    let multus = r#"{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus-shim","clusterNetwork":"cilium"}"#;
    std::fs::write(dir.join("00-multus.conf"), multus).unwrap();
    let (report, _) = n.audit();
    assert_eq!(report["datapath"]["configured"][0]["owner"], "cilium", "{:#}", report["datapath"]);
    assert!(of_kind(&report, "device_leftover_programs").is_empty(), "{:#}", report["findings"]);
    std::fs::remove_file(dir.join("00-multus.conf")).unwrap();
    std::os::unix::fs::symlink("/run/cni/net.d/05-cilium.conflist", dir.join("00-a.conflist")).unwrap();
    let (report, _) = n.audit();
    assert!(of_kind(&report, "device_leftover_programs").is_empty(), "{:#}", report["findings"]);
    std::fs::remove_file(dir.join("00-a.conflist")).unwrap();
    // Uninstalled: the configuration is gone too.
    std::fs::remove_file(n.node.path("/run/cni/net.d/05-cilium.conflist")).unwrap();
    let stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    n.send(5);
    assert!(run_count(from) >= 5, "the leftover still decides eth1's traffic: it ran {} times", run_count(from));
    drop(stats);
    let (report, run) = n.audit();
    let left = of_kind(&report, "device_leftover_programs");
    let [f] = left[..] else { panic!("{:#}", report["findings"]) };
    assert_eq!(
        (f["severity"].as_str(), f["owner"].as_str(), f["count"].as_u64()),
        (Some("critical"), Some("cilium"), Some(2))
    );
    let fix = f["remediation"].as_str().unwrap();
    assert!(fix.contains("bpftool link detach id") && fix.contains("/sys/fs/bpf/cilium"), "{fix}");
    assert_eq!(run.code, 1);
}

/// The daemon: a legacy tc filter added to a device makes an rtnetlink
/// message, and the node's network is read at once: the duplicate a
/// changed `bpf-filter-priority` leaves reaches /metrics within 5 s.
#[test]
fn the_daemon_reads_a_changed_device_at_once() {
    if !can_run(TOOLS) {
        return;
    }
    let n = DeviceNode::new();
    n.attach(Some(1));
    let netns = std::path::PathBuf::from(format!("/proc/{}/ns/net", n.node.pid1));
    let root = n.t.path.display().to_string();
    let d = Daemon::start_in_netns_of(
        &netns,
        Some(n.node.pid1),
        &["--cgroup-root", &root, "--cni-conf-dir", "/run/cni/net.d", "--interval", "1h"],
    );
    let series = r#"cgaudit_findings{kind="device_duplicate_programs",severity="critical"}"#;
    let ready = wait_until(std::time::Duration::from_secs(20), || d.metric("cgaudit_audit_view_complete") == Some(1.0));
    assert!(ready, "{}", d.logs());
    assert_eq!(d.metric(series), Some(0.0));
    n.attach(Some(2));
    let changed = std::time::Instant::now();
    // One on each direction of eth1.
    let seen = poll_until(std::time::Duration::from_secs(5), std::time::Duration::from_millis(100), || {
        d.metric(series) == Some(2.0)
    });
    eprintln!("the duplicate reached /metrics after {:?}", changed.elapsed());
    assert!(seen, "not within 5 s: {:?}\n{}", d.metric(series), d.logs());
    // A tcx link makes no rtnetlink message: read within the 5 s period,
    // its hook's revision a series.
    n.attach(None);
    let revision = r#"cgaudit_device_hook_revision{device="eth1",hook="tcx_ingress"}"#;
    let moved = poll_until(std::time::Duration::from_secs(15), std::time::Duration::from_millis(200), || {
        d.metric(revision).is_some_and(|r| r >= 2.0)
    });
    assert!(moved, "{:?}\n{}", d.metric(revision), d.logs());
}

/// cilium#44194 (1.18.6): after an agent restart, stale tcx links of
/// Cilium's own `bpf_overlay.o` stay on `cilium_vxlan` beside the new ones
/// (here: the restart finds no pins, a bpffs mounted over the node's hides
/// them). First the healthy overlay: both programs where Cilium's pins say,
/// nothing raised, and what arrives through the tunnel runs
/// `cil_from_overlay`. Then the duplicate: traffic through the tunnel
/// proves the old copy decides every packet and the new one never runs,
/// and the audit names the old one stale, critical.
#[test]
fn a_stale_overlay_copy_on_cilium_vxlan_is_named_and_traffic_says_which_runs() {
    if !can_run(TOOLS) {
        return;
    }
    let n = DeviceNode::new();
    n.overlay();
    let entries = ["cil_from_overlay:in", "cil_to_overlay:out"];
    let old = n.attach_object("bpf_overlay.o", "cilium_vxlan", "cilium_calls_overlay_2", &entries);
    let stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    n.send_overlay(5);
    assert!(run_count(old[0]) >= 5, "cil_from_overlay ran {} times", run_count(old[0]));
    let (report, run) = n.audit();
    let devices = report["datapath"]["devices"]["devices"].as_array().unwrap();
    let vxlan = devices.iter().find(|d| d["name"] == "cilium_vxlan").unwrap_or_else(|| panic!("{devices:#?}"));
    let seen: Vec<(&str, &str, &str)> = vxlan["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (p["prog_name"].as_str().unwrap(), p["owner"].as_str().unwrap_or("-"), p["proof"].as_str().unwrap_or("-"))
        })
        .collect();
    assert_eq!(
        seen,
        [("cil_from_overlay", "cilium", "link_pinned"), ("cil_to_overlay", "cilium", "link_pinned")],
        "{vxlan:#}"
    );
    assert_eq!(vxlan["driver"], "vxlan", "{vxlan:#}");
    for kind in DEVICE_KINDS {
        assert!(of_kind(&report, kind).is_empty(), "{kind}: {:#}", report["findings"]);
    }
    assert_eq!(run.code, 0, "{run:?}");
    // The restart that finds none of its pins.
    let mounted = n.node.command(&which("mount").unwrap(), &["-t", "bpf", "bpf", "/sys/fs/bpf"]).status().unwrap();
    assert!(mounted.success());
    let new = n.attach_object("bpf_overlay.o", "cilium_vxlan", "cilium_calls_overlay_2", &entries);
    let (old_before, new_before) = (run_count(old[0]), run_count(new[0]));
    n.send_overlay(5);
    let (old_ran, new_ran) = (run_count(old[0]) - old_before, run_count(new[0]) - new_before);
    assert!(old_ran >= 5 && new_ran == 0, "old ran {old_ran}, new {new_ran}: the first copy decides");
    drop(stats);
    let (report, run) = n.audit();
    let dups = of_kind(&report, "device_duplicate_programs");
    let f = dups
        .iter()
        .find(|f| f["prog_name"] == "cil_from_overlay")
        .unwrap_or_else(|| panic!("a duplicate on cilium_vxlan's ingress: {:#}", report["findings"]));
    assert_eq!((f["severity"].as_str(), f["prog_id"].as_u64()), (Some("critical"), Some(u64::from(old[0]))), "{f:#}");
    assert_eq!(f["interfaces"][0]["name"], "cilium_vxlan", "{f:#}");
    assert!(dups.iter().any(|f| f["prog_name"] == "cil_to_overlay"), "{:#}", report["findings"]);
    assert_eq!(run.code, 1, "{run:?}");
}
