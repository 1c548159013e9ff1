//! The CNIs' program hygiene, the rest of the failure family, each built
//! for real under a test root:
//! duplicated CNI programs, a hook filling up to the kernel's limit, socket
//! LB configured but not attached, leftovers with no agent, a foreign
//! program on the CNI's hook at the root; and the daemon's event history.
//! (The v1 net_cls/net_prio conflict needs a kernel before 5.15: a pure rule,
//! unit-tested in agent/src/findings/v1_net_conflict.rs, and for real on
//! the matrix's kernels in tests/guest/v1/net_cls.rs.)

use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

fn audit(root: &std::path::Path) -> (i32, Value) {
    let run = agent(&["audit", "--output", "json", "--cgroup-root", root.to_str().unwrap()]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    (run.code, run.json())
}

fn of_kind<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == kind).collect()
}

const KPR: [(&str, &str); 1] = [("kube-proxy-replacement", "true")];

#[test]
fn two_copies_of_a_cni_program_on_one_hook_name_the_unpinned_one_stale() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("dup");
    let lb = load_cilium_socket_lb();
    let _links: Vec<Link> = lb.iter().map(|p| Link::new(&t.path, p)).collect();
    // A restart left its old sock_release link; the new one is pinned.
    let old = Prog::load("cil_sock_release", "sock_release");
    let new = Prog::load("cil_sock_release", "sock_release");
    let (old_link, new_link) = (Link::new(&t.path, &old), Link::new(&t.path, &new));
    let sb = Sandbox::new("mount -t bpf bpf /sys/fs/bpf && mkdir -p /sys/fs/bpf/cilium/socketlb/links/cgroup");
    // The node's running agent: a pin is its proof only while it runs.
    let _agent = CiliumAgent::in_node(sb.pid1, &KPR);
    let pin = sb.path("/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock_release");
    let c = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes()).unwrap();
    agent::bpf::sys::obj_pin(std::os::fd::AsFd::as_fd(&new_link.fd), &c).unwrap();

    let run = sb.agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    let report = run.json();
    let f = of_kind(&report, "duplicate_cni_programs");
    assert_eq!(f.len(), 1, "{report:#}");
    assert_eq!((f[0]["prog_id"].as_u64(), f[0]["link_id"].as_u64()), (Some(old.id.into()), Some(old_link.id.into())));
    assert_eq!((&f[0]["severity"], &f[0]["cgroup"], &f[0]["count"]), (&"critical".into(), &"/".into(), &2.into()));
    let m = f[0]["message"].as_str().unwrap();
    assert!(m.contains(&format!("prog {} looks stale (not pinned by Cilium", old.id)), "{m}");
    assert!(m.contains("pinned at /sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock_release"), "{m}");
    assert_eq!(run.code, 1);
    let _ = std::fs::remove_file(&pin);
}

#[test]
fn a_hook_filling_up_to_the_kernels_limit_is_flagged_and_its_count_exported() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("crowded");
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
    // A runtime that leaks its device program on every update.
    let progs: Vec<Prog> = (0..48).map(|_| Prog::load("", "device")).collect();
    let _leaked: Vec<Attached> = progs.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();

    let (code, report) = audit(&t.path);
    assert_eq!(code, 1);
    let f = of_kind(&report, "hook_program_count_high");
    assert_eq!(f.len(), 1, "{report:#}");
    assert_eq!(
        (&f[0]["severity"], &f[0]["count"], &f[0]["attach_type"]),
        (&"warning".into(), &48.into(), &"device".into())
    );
    assert_eq!(f[0]["container_id"], OTHER_CONTAINER);
    assert!(f[0]["message"].as_str().unwrap().contains("48 runtime"), "{:#}", f[0]);
    // The daemon followed the attaches without reading the whole tree.
    let counted = wait_until(Duration::from_secs(10), || {
        d.metric(r#"cgaudit_hook_programs_max{attach_type="device"}"#) == Some(48.0)
            && d.metric(r#"cgaudit_findings{kind="hook_program_count_high",severity="warning"}"#) == Some(1.0)
    });
    assert!(counted, "{}", d.get("/metrics").1);
    assert_eq!(d.metric(r#"cgaudit_audits_total{trigger="startup"}"#), Some(1.0), "no full pass needed");
}

#[test]
fn socket_lb_configured_with_nothing_at_the_root_is_critical_unless_the_agent_is_a_fake() {
    if !can_run(&["unshare", "setpriv"]) {
        return;
    }
    let t = TestCgroup::new("configured");
    // A FIFO where a key should be: read without blocking, and ignored.
    let agent = CiliumAgent::with_extra(&KPR, "mkfifo $d/bpf-lb-sock-hostns-only");
    let (code, report) = audit(&t.path);
    assert_eq!(code, 1);
    let f = of_kind(&report, "socket_lb_configured_not_attached");
    assert_eq!(f.len(), 1, "{report:#}");
    assert_eq!(f[0]["severity"], "critical");
    assert_eq!(f[0]["processes"][0]["pid"], agent.pid);
    let m = f[0]["message"].as_str().unwrap();
    assert!(m.contains("kube-proxy-replacement=true (in /tmp/cilium/config-map)"), "{m}");
    drop(agent);

    // The same configuration in a process anyone could start.
    let _fake = CiliumAgent::unprivileged(&KPR);
    let (code, report) = audit(&t.path);
    assert_eq!(code, 0, "a process named cilium-agent without privileges is not Cilium: {report:#}");
}

#[test]
fn cni_programs_with_no_agent_running_are_leftovers() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("leftover");
    let lb = load_cilium_socket_lb();
    let _left: Vec<Attached> = lb.iter().map(|p| Attached::new(&t.path, p, ALLOW_MULTI)).collect();
    let (_, report) = audit(&t.path);
    let f = of_kind(&report, "cni_leftover_programs");
    assert_eq!(f.len(), 1, "{report:#}");
    assert_eq!((&f[0]["severity"], &f[0]["count"], &f[0]["owner"]), (&"warning".into(), &10.into(), &"cilium".into()));
    assert!(f[0]["message"].as_str().unwrap().contains("no cilium-agent process runs on this node"));
    // Its agent, configured with socket LB off: still leftovers.
    let agent = CiliumAgent::new(&[("kube-proxy-replacement", "false"), ("bpf-lb-sock", "false")]);
    let (_, report) = audit(&t.path);
    let f = of_kind(&report, "cni_leftover_programs");
    assert!(f[0]["message"].as_str().unwrap().contains("its configuration turns socket LB off"), "{:#}", f[0]);
    drop(agent);
    // With socket LB on, they are what they should be.
    let _agent = CiliumAgent::new(&KPR);
    let (code, report) = audit(&t.path);
    assert_eq!(code, 0, "{report:#}");
}

#[test]
fn a_foreign_program_beside_the_cnis_at_the_root_is_named_with_who_attached_it() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("foreign");
    let _agent = CiliumAgent::new(&KPR);
    let lb = load_cilium_socket_lb();
    let _links: Vec<Link> = lb.iter().map(|p| Link::new(&t.path, p)).collect();
    // Naming who attached needs a source that sees calls: on any kernel,
    // syscall tracing (fexit and kprobes name them in the guests).
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h", "--events", "syscalls"]);
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
    let mesh = Prog::load("mesh_redirect4", "connect4");
    let _mesh = Attached::new(&t.path, &mesh, ALLOW_MULTI);

    let (code, report) = audit(&t.path);
    assert_eq!(code, 1);
    let f = of_kind(&report, "foreign_program_on_cni_hook");
    assert_eq!(f.len(), 1, "{report:#}");
    assert_eq!((&f[0]["prog_id"], &f[0]["owner"]), (&mesh.id.into(), &"unknown".into()));
    assert!(f[0]["message"].as_str().unwrap().contains("on connect4 beside Cilium's"), "{:#}", f[0]);

    // The daemon names who attached it, and the event that says so.
    let seen = wait_until(Duration::from_secs(10), || {
        d.metric(r#"cgaudit_findings{kind="foreign_program_on_cni_hook",severity="warning"}"#) == Some(1.0)
    });
    assert!(seen, "{}", d.logs());
    let audit: Value = serde_json::from_str(&d.get("/audit").1).unwrap();
    let f = of_kind(&audit, "foreign_program_on_cni_hook");
    let by = &f[0]["attached_by"];
    assert_eq!(by["pid"], std::process::id(), "{:#}", f[0]);
    let events: Value = serde_json::from_str(&d.get("/events").1).unwrap();
    let e = events["events"].as_array().unwrap().iter().find(|e| e["seq"] == by["event"]).expect("the cited event");
    assert_eq!(
        (&e["command"], &e["attach_type"], &e["prog_id"]),
        (&"prog_attach".into(), &"connect4".into(), &mesh.id.into())
    );
    assert_eq!((&e["cgroup"], &e["effect"]), (&"/".into(), &"reread".into()));
    assert_eq!(events["capacity"], 1024);
}

/// A node agent's process (`comm`) holding a link of a program named `name`
/// on `hook` of `cgroup`, started in `sb`; killed on drop.
struct Holder(std::process::Child);

impl Holder {
    fn start(sb: &Sandbox, cgroup: &std::path::Path, hook: &str, name: &str, comm: &str) -> (Holder, u32) {
        use std::io::BufRead;
        let mut child = sb
            .command(&fixture_bin(), &["hold-link", cgroup.to_str().unwrap(), hook, name, comm])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let id = line.trim().strip_prefix("held ").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line:?}"));
        (Holder(child), id)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 27: programs other node agents attach at the host's root cgroup
/// are named by their owner, not left as `unknown`: OpenTelemetry eBPF
/// Instrumentation's (Beyla's) sock_ops program by its name, an Inspektor
/// Gadget gadget's sock_ops program (named by the gadget) by the process
/// that holds it, and Calico's connect-time load balancer attached through
/// links pinned in its bpffs directory (Calico 3.31+).
#[test]
fn node_agents_at_the_root_are_named_by_their_owner() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("neighbours");
    let sb = Sandbox::new(&format!(
        "mount -t bpf bpf /sys/fs/bpf && mkdir /sys/fs/bpf/ctlb\n{f} named calico-node &\n{f} named obi &",
        f = fixture_bin().display()
    ));
    let obi = Prog::load("obi_sockmap_tracker", "sock_ops");
    let _obi = Link::new(&t.path, &obi);
    let (_ig, gadget) = Holder::start(&sb, &t.path, "sock_ops", "gadget_sockops", "gadgettracermanager");
    let (_other, stranger) = Holder::start(&sb, &t.path, "sock_ops", "gadget_sockops", "notagadget");
    let ctlb: Vec<(Prog, Link)> = [("calico_connect_v4", "connect4"), ("calico_connect_v46", "connect6")]
        .into_iter()
        .map(|(name, hook)| {
            let p = Prog::load(name, hook);
            let l = Link::new(&t.path, &p);
            let pin = std::ffi::CString::new(format!("{}/{name}", sb.path("/sys/fs/bpf/ctlb").display())).unwrap();
            agent::bpf::sys::obj_pin(std::os::fd::AsFd::as_fd(&l.fd), &pin).expect("pin the link");
            (p, l)
        })
        .collect();

    let run = sb.agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 0, "known neighbours are no finding: {run:?}");
    let report = run.json();
    let owner_of = |id: u32| {
        let a = report["attachments"].as_array().unwrap().iter().find(|a| a["prog_id"] == id).expect("listed");
        assert_eq!(a["cgroup"], "/");
        (a["owner"].as_str().unwrap().to_owned(), a["link_id"].clone())
    };
    assert_eq!(owner_of(obi.id).0, "obi");
    assert_eq!(owner_of(gadget).0, "inspektor_gadget", "held by gadgettracermanager");
    assert_eq!(owner_of(stranger).0, "unknown", "the same program held by any other process is no one's");
    for (p, l) in &ctlb {
        assert_eq!(owner_of(p.id), ("calico".to_owned(), Value::from(l.id)), "{}", p.name);
    }
    let table = sb.agent(&["audit", "--cgroup-root", t.path.to_str().unwrap()]).stdout;
    assert!(table.contains(" obi ") && table.contains("inspektor_gadget"), "{table}");
    let d = Daemon::start_via(
        sb.command(&agent_bin(), &[]),
        &["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"],
    );
    assert!(
        wait_until(Duration::from_secs(10), || {
            d.metric(r#"cgaudit_attachments{attach_type="sock_ops",location="root",owner="inspektor_gadget"}"#)
                == Some(1.0)
                && d.metric(r#"cgaudit_attachments{attach_type="sock_ops",location="root",owner="obi"}"#) == Some(1.0)
        }),
        "{}",
        d.get("/metrics").1
    );
}
