//! What the audit lists and judges, attachment by attachment, on a test
//! subtree audited with `--cgroup-root` (its top counts as the root).

use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

fn ctr() -> String {
    systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER)
}

fn audit_json(t: &TestCgroup, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let run = agent(&args);
    assert!(run.code == 0 || run.code == 1, "audit failed: {run:?}");
    (run.code, run.json())
}

fn kinds(report: &Value) -> Vec<String> {
    report["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn socket_lb_at_the_root_only_is_clean_and_fully_listed() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("rootonly");
    t.mkdir(&ctr());
    // Its agent runs, configured for socket LB: nothing is left over.
    let _agent = CiliumAgent::new(&[("kube-proxy-replacement", "true")]);
    let progs = load_cilium_socket_lb();
    // Half legacy attachments with flags, half bpf_links, as Cilium mixes them.
    let (legacy, linked) = progs.split_at(5);
    let _att: Vec<Attached> = legacy.iter().map(|p| Attached::new(&t.path, p, ALLOW_MULTI)).collect();
    let links: Vec<Link> = linked.iter().map(|p| Link::new(&t.path, p)).collect();

    let (code, report) = audit_json(&t, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["status"], "ok");
    assert!(report["findings"].as_array().unwrap().is_empty(), "{report:#}");
    assert_eq!(report["root_kind"], "given");
    assert_eq!(report["root_cgroup_id"], t.id());
    assert_eq!(report["cgroups_scanned"], 5);
    let atts = report["attachments"].as_array().unwrap();
    assert_eq!(atts.len(), 10);
    for p in &progs {
        let a = atts.iter().find(|a| a["prog_id"] == p.id).unwrap_or_else(|| panic!("{} missing", p.name));
        assert_eq!(a["cgroup"], "/");
        assert_eq!(a["cgroup_id"], t.id());
        assert_eq!(a["attach_type"], p.hook.name());
        assert_eq!(a["prog_name"], p.name.as_str());
        assert_eq!(a["owner"], "cilium");
        assert_eq!(a["attach_flags"], "multi", "links are multi too");
        assert_eq!(a["prog_tag"].as_str().unwrap().len(), 16);
        let want = if p.name.contains("post_bind") { "cgroup_sock" } else { "cgroup_sock_addr" };
        assert_eq!(a["prog_type"], want);
        match linked.iter().zip(&links).find(|(l, _)| l.id == p.id) {
            Some((_, link)) => assert_eq!(a["link_id"], link.id),
            None => assert!(a["link_id"].is_null(), "legacy attachments have no link"),
        }
    }
}

#[test]
fn exclusive_and_override_flags_are_reported() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("flags");
    let a = Prog::load("cil_sock4_connect", "connect4");
    let b = Prog::load("cil_sock6_connect", "connect6");
    let _x = Attached::new(&t.path, &a, 0);
    let _y = Attached::new(&t.path, &b, ALLOW_OVERRIDE);
    let (_, report) = audit_json(&t, &[]);
    let flags = |id: u32| {
        report["attachments"].as_array().unwrap().iter().find(|x| x["prog_id"] == id).unwrap()["attach_flags"].clone()
    };
    assert_eq!(flags(a.id), "none");
    assert_eq!(flags(b.id), "override");
}

#[test]
fn benign_programs_below_the_root_are_listed_not_flagged() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("benign");
    let svc = t.mkdir("/system.slice/foo.service");
    let ctr = t.mkdir(&ctr());
    let fw = Prog::load("sd_fw_ingress", "ingress");
    let dev = Prog::load("sd_devices", "device");
    let bind = Prog::load("sd_bind4", "bind4");
    let runc = Prog::load("", "device");
    let _a = [
        Attached::new(&svc, &fw, ALLOW_MULTI),
        Attached::new(&svc, &dev, ALLOW_MULTI),
        Attached::new(&svc, &bind, ALLOW_MULTI),
        Attached::new(&ctr, &runc, 0),
    ];
    let (code, report) = audit_json(&t, &[]);
    assert_eq!(code, 0, "benign owners are never flagged: {report:#}");
    let owner = |id: u32| {
        report["attachments"].as_array().unwrap().iter().find(|x| x["prog_id"] == id).unwrap()["owner"].clone()
    };
    assert_eq!(owner(fw.id), "systemd");
    assert_eq!(owner(dev.id), "systemd");
    assert_eq!(owner(bind.id), "systemd");
    assert_eq!(owner(runc.id), "runtime");
    let proof = |id: u32| {
        report["attachments"].as_array().unwrap().iter().find(|x| x["prog_id"] == id).unwrap()["proof"].clone()
    };
    assert_eq!(proof(fw.id), "named", "known by name, type and hook together");
}

/// Issue 37: `--kmesh` is gone, and said so: an old command line fails
/// clearly (exit 2) rather than silently meaning something else.
#[test]
fn the_removed_kmesh_flag_is_refused_with_why() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("kmesh-flag");
    let run = agent(&["audit", "--kmesh", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("--kmesh was removed") && run.stderr.contains("Owners cgaudit knows"),
        "{}",
        run.stderr
    );
}

#[test]
fn unknown_socket_lb_below_root_is_flagged_unless_allowed() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("unknown");
    let ctr = t.mkdir(&ctr());
    let p = Prog::load("my_lb_connect4", "connect4");
    let _a = Attached::new(&ctr, &p, ALLOW_MULTI);
    let (code, report) = audit_json(&t, &[]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&report), ["socket_lb_below_root"]);
    let f = &report["findings"][0];
    assert_eq!(f["owner"], "unknown");
    assert_eq!(f["severity"], "warning", "nobody's proven: at most a warning");
    assert_eq!(f["container_id"], OTHER_CONTAINER);
    assert!(f["remediation"].as_str().unwrap().contains("--allow"));

    let (code, report) = audit_json(&t, &["--allow", "my_lb_"]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["attachments"][0]["owner"], "allowed");
}

#[test]
fn pinned_link_below_root_is_reported_with_its_link_id() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("pinned");
    let ctr = t.mkdir(&ctr());
    let fs = BpfFs::new();
    let p = Prog::load("cil_sock4_connect", "connect4");
    let link = Link::new(&ctr, &p);
    fs.pin("cil_sock4_connect", std::os::fd::AsFd::as_fd(&link.fd));
    let link_id = link.id;
    drop(link); // only the pin keeps it now, as after a Cilium restart

    let (code, report) = audit_json(&t, &[]);
    assert_eq!(code, 1);
    let below: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
    assert_eq!(below.len(), 1, "{report:#}");
    assert_eq!(below[0]["link_id"], link_id);
    assert_eq!(below[0]["prog_id"], p.id);
    assert_eq!(report["attachments"][0]["link_id"], link_id);
}

#[test]
fn link_to_a_removed_cgroup_is_defunct() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("defunct");
    let doomed = t.mkdir("/doomed");
    let fs = BpfFs::new();
    let p = Prog::load("cil_sock4_connect", "connect4");
    let link = Link::new(&doomed, &p);
    fs.pin("cil_sock4_connect", std::os::fd::AsFd::as_fd(&link.fd));
    // Cilium's agent holds the link, as it holds the links it made.
    let _cilium = Holder::new("cilium-agent", &[std::os::fd::AsFd::as_fd(&link.fd)]);
    std::fs::remove_dir(&doomed).expect("rmdir a cgroup with a link");
    // The kernel detaches the link when the cgroup is released, which is
    // asynchronous (a workqueue): wait for cgroup_id to read 0.
    let defunct = wait_until(Duration::from_secs(10), || {
        agent::bpf::sys::cgroup_link_info(std::os::fd::AsFd::as_fd(&link.fd)).unwrap().unwrap().cgroup_id == 0
    });
    assert!(defunct, "the kernel never released the cgroup");

    let (code, report) = audit_json(&t, &[]);
    assert_eq!(code, 1);
    let f: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "defunct_link").collect();
    assert_eq!(f.len(), 1, "{report:#}");
    assert_eq!(f[0]["link_id"], link.id);
    assert_eq!(f[0]["prog_name"], "cil_sock4_connect");
    assert_eq!(f[0]["attach_type"], "connect4");
    assert_eq!(f[0]["severity"], "warning");
}

/// Issue 37, 5: a program attached with `BPF_F_PREORDER` (6.15) runs
/// before the others of its hook, not in attach order; the in-kernel walk
/// reads it from `bpf_prog_list.flags`, and the table shows it. The syscall
/// walk cannot know (`BPF_PROG_QUERY`'s `prog_attach_flags` repeat the
/// hook's flags for cgroup hooks) and says null, never false. Decided by trying the
/// attach once: a kernel that refuses the flag has no such program, and
/// the audit says what it found of the kernel.
#[test]
fn a_preorder_program_is_shown_running_first_by_both_walks() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("preorder");
    let first = Prog::load("cil_sock4_connect", "connect4");
    let late = Prog::load("mesh_connect4", "connect4");
    let _a = Attached::new(&t.path, &first, ALLOW_MULTI);
    let cg = open_dir(&t.path);
    let preorder = agent::bpf::BPF_F_PREORDER;
    let taken = agent::bpf::sys::prog_attach(
        std::os::fd::AsFd::as_fd(&cg),
        std::os::fd::AsFd::as_fd(&late.fd),
        late.hook.kernel_value(),
        ALLOW_MULTI | preorder,
    );
    let _detach = DetachAll(t.path.clone());
    for walk in ["bpf-iter", "syscalls"] {
        let (_, report) = audit_json(&t, &["--walk", walk]);
        let features = &report["kernel_features"];
        assert!(features["query_revision"]["works"].is_boolean(), "tried, and said: {features:#}");
        let a = |id: u32| report["attachments"].as_array().unwrap().iter().find(|a| a["prog_id"] == id).cloned();
        // BPF_PROG_QUERY gives a cgroup hook's flags only: the syscall walk
        // does not know (null), the in-kernel one reads each program's.
        let (yes, no) = if walk == "syscalls" { (Value::Null, Value::Null) } else { (true.into(), false.into()) };
        assert_eq!(a(first.id).unwrap()["preorder"], no, "{walk}");
        match &taken {
            Ok(()) => {
                assert_eq!(a(late.id).unwrap()["preorder"], yes, "{walk}: {report:#}");
                if walk == "bpf-iter" {
                    assert_eq!(features["program_flags"]["works"], true, "{walk}: {features:#}");
                }
            }
            Err(e) => {
                assert_eq!(e.errno(), Some(libc::EINVAL), "the kernel refuses the flag it does not know: {e}");
                assert!(a(late.id).is_none(), "not attached at all: {report:#}");
            }
        }
    }
    if taken.is_ok() {
        let table = agent(&["audit", "--cgroup-root", t.path.to_str().unwrap()]).stdout;
        assert!(table.contains("multi,preorder"), "{table}");
    }
}
