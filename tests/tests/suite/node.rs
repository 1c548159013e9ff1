//! Audits of the whole node (no --cgroup-root): the real root, compared with
//! bpftool, and an auditor that itself runs in a private cgroup namespace.

use std::collections::BTreeSet;
use std::os::fd::AsFd;

use integration_tests::*;
use serde_json::Value;

#[test]
fn whole_node_audit_finds_the_real_root_and_agrees_with_bpftool() {
    if !can_run(&["bpftool"]) {
        return;
    }
    let root = cgroup2_root();
    let t = TestCgroup::new("node");
    let ctr = t.mkdir(&format!("/libpod_parent/libpod-{OTHER_CONTAINER}"));
    // At the real root only as a bpf_link: it dies with this process even if
    // the guard never runs, so nothing can be left on the node's root.
    let connect = Prog::load("cil_sock4_connect", "connect4");
    let link = Link::new(&root, &connect);
    let _agent = CiliumAgent::new(&[("kube-proxy-replacement", "true")]);
    let dev = Prog::load("", "device");
    let _dev = Attached::new(&ctr, &dev, ALLOW_MULTI);

    let run = agent(&["audit", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["root_kind"], "hierarchy");
    assert_eq!(report["root_cgroup_id"], 1);
    assert_eq!(report["cgroup_root"], root.to_str().unwrap());
    let atts = report["attachments"].as_array().unwrap();
    let at_root = atts.iter().find(|a| a["prog_id"] == connect.id).expect("root attachment listed");
    assert_eq!(at_root["cgroup"], "/");
    assert_eq!(at_root["link_id"], link.id);
    let below = atts.iter().find(|a| a["prog_id"] == dev.id).expect("device program listed");
    assert_eq!(below["owner"], "runtime");
    assert_eq!(
        below["cgroup"],
        format!("/{}/libpod_parent/libpod-{OTHER_CONTAINER}", t.path.file_name().unwrap().to_str().unwrap())
    );

    // Same (cgroup, attach type, program) set as the reference tool.
    let ours: BTreeSet<(String, String, u64)> = atts
        .iter()
        .map(|a| {
            let rel = a["cgroup"].as_str().unwrap();
            let full = if rel == "/" { root.display().to_string() } else { format!("{}{rel}", root.display()) };
            (full, a["attach_type"].as_str().unwrap().to_owned(), a["prog_id"].as_u64().unwrap())
        })
        .collect();
    let out =
        std::process::Command::new("bpftool").args(["-j", "cgroup", "tree"]).arg(&root).output().expect("bpftool");
    assert!(out.status.success(), "bpftool: {}", String::from_utf8_lossy(&out.stderr));
    let tree: Value = serde_json::from_slice(&out.stdout).expect("bpftool json");
    let theirs: BTreeSet<(String, String, u64)> = tree
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|cg| {
            let path = cg["cgroup"].as_str().unwrap().to_owned();
            cg["programs"].as_array().unwrap().iter().map(move |p| {
                // bpftool 7 prints libbpf's names: cgroup_inet4_connect.
                let t = agent::bpf::AttachType::from_any_name(p["attach_type"].as_str().unwrap())
                    .expect("a cgroup attach type");
                (path.clone(), t.name().to_owned(), p["id"].as_u64().unwrap())
            })
        })
        .collect();
    assert_eq!(ours, theirs);
    drop(link);
}

/// Runs `agent audit` inside `sandbox`, from a process that joined `cgroup`,
/// unshared its cgroup and mount namespaces and mounted cgroup2 over the
/// hierarchy's mount point (after unmounting the host's, as a container only
/// has its own): its own view is rooted at `cgroup`.
fn namespaced_audit(sandbox: &Sandbox, cgroup: &std::path::Path, setpriv: &str) -> Run {
    let script = format!(
        r#"echo $$ > "{cg}/cgroup.procs" && exec {setpriv} unshare --cgroup --mount --propagation private sh -c 'umount -l "{mp}" && mount -t cgroup2 none "{mp}" && exec "{agent}" audit --output json'"#,
        cg = cgroup.display(),
        mp = cgroup2_root().display(),
        agent = agent_bin().display(),
    );
    run(sandbox.command(std::path::Path::new("/bin/sh"), &["-c", &script]))
}

#[test]
fn namespaced_auditor_that_cannot_reach_pid1_says_its_view_is_incomplete() {
    if !can_run(&["unshare", "nsenter", "setpriv"]) {
        return;
    }
    let t = TestCgroup::new("nsview");
    let me = t.mkdir("/auditor");
    // PID 1 runs as another user and the auditor lacks CAP_SYS_PTRACE: its
    // /proc/1/root is closed, as on a node where hostPID is not granted.
    let sb = Sandbox::with_init("", "setpriv --reuid=65534 --regid=65534 --clear-groups sleep infinity");
    let run = namespaced_audit(&sb, &me, "setpriv --bounding-set=-sys_ptrace --inh-caps=-sys_ptrace");
    assert_eq!(run.code, 2, "never clean from a namespaced root: {run:?}");
    let report = run.json();
    assert_eq!(report["status"], "incomplete");
    assert_eq!(report["root_kind"], "namespaced");
    assert_eq!(report["root_cgroup_id"], cgroup_id(&me));
    assert!(run.stderr.contains("INCOMPLETE"), "{}", run.stderr);
    assert!(run.stderr.contains("private cgroup namespace"), "{}", run.stderr);
}

#[test]
fn namespaced_auditor_with_host_pid_reaches_the_real_root_through_pid1() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("nsreach");
    let me = t.mkdir("/auditor");
    let victim = t.mkdir(&cgroupfs_pod("besteffort", OTHER_POD_UID));
    let p = Prog::load("cil_sock4_connect", "connect4");
    let _a = Attached::new(&victim, &p, ALLOW_MULTI);
    let sb = Sandbox::new("");
    let run = namespaced_audit(&sb, &me, "");
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert_eq!(report["root_kind"], "hierarchy");
    assert_eq!(report["root_cgroup_id"], 1);
    assert!(report["root_note"].as_str().unwrap().contains("PID 1's mount namespace"));
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "socket_lb_below_root" && f["prog_id"] == p.id)
        .expect("finding");
    assert_eq!(f["pod_uid"], OTHER_POD_UID);
    let _ = p.fd.as_fd();
}

#[test]
fn nested_node_audits_pid1s_cgroup_namespace_root() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    // A kind-style node: its init runs in a private cgroup namespace rooted
    // at the node container's cgroup and mounts cgroup2 from there.
    let t = TestCgroup::new("nested");
    let node = t.mkdir("/node");
    let pod = t.mkdir(&format!("/node{}", cgroupfs_pod("besteffort", OTHER_POD_UID)));
    t.mkdir("/node/auditor");
    let mp = cgroup2_root();
    let sb = Sandbox::with_init(
        &format!(r#"echo $$ > "{}/cgroup.procs""#, node.display()),
        &format!(
            r#"unshare --cgroup sh -c 'umount -l "{mp}" && mount -t cgroup2 none "{mp}" && exec sleep infinity'"#,
            mp = mp.display()
        ),
    );
    let remounted = wait_until(std::time::Duration::from_secs(10), || {
        std::fs::metadata(sb.path(mp.to_str().unwrap())).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).ok()
            == Some(cgroup_id(&node))
    });
    assert!(remounted, "the node's init never mounted its namespaced cgroup2");
    let p = Prog::load("cil_sock4_connect", "connect4");
    let _a = Attached::new(&pod, &p, ALLOW_MULTI);

    // The auditor: a pod on that node, in its own cgroup namespace.
    let script = format!(
        r#"echo $$ > "{mp}/auditor/cgroup.procs" && exec unshare --cgroup --mount --propagation private sh -c 'umount -l "{mp}" && mount -t cgroup2 none "{mp}" && exec "{agent}" audit --output json'"#,
        mp = mp.display(),
        agent = agent_bin().display(),
    );
    let run = run(sb.command(std::path::Path::new("/bin/sh"), &["-c", &script]));
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert_eq!(report["root_kind"], "pid1_namespace");
    assert_eq!(report["root_cgroup_id"], cgroup_id(&node));
    assert!(report["root_note"].as_str().unwrap().contains("nested node"));
    let f =
        report["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "socket_lb_below_root").expect("finding");
    assert_eq!(f["cgroup"], cgroupfs_pod("besteffort", OTHER_POD_UID));
    assert_eq!(f["pod_uid"], OTHER_POD_UID);
    assert_eq!(report["view"]["complete"], true, "--nested-node (the sandbox's CGAUDIT_NESTED_NODE)");

    // Without --nested-node, what runs on the node says whose PID namespace
    // this is: a kubelet makes it a node's; nothing of a node, a pod's.
    let unflagged = |setup: &str| {
        let line = format!("{setup} exec env -u CGAUDIT_NESTED_NODE /bin/sh -c '{}'", script.replace('\'', "'\\''"));
        integration_tests::run(sb.command(std::path::Path::new("/bin/sh"), &["-c", &line]))
    };
    let bare = unflagged("");
    assert_eq!(bare.code, 2, "PID 1's cgroup namespace is not taken for a node's on no evidence: {bare:?}");
    let report = bare.json();
    assert_eq!(report["root_kind"], "namespaced");
    assert_eq!(report["view"]["complete"], false, "{report:#}");
    assert!(
        report["view"]["reason"].as_str().unwrap().contains("no kubelet, container runtime or CNI agent runs in it")
    );
    let bin = tempfile::tempdir().unwrap();
    let kubelet = bin.path().join("kubelet");
    std::fs::copy(which("sleep").unwrap(), &kubelet).unwrap();
    let with_kubelet = unflagged(&format!("{} 30 & ", kubelet.display()));
    assert_eq!(with_kubelet.code, 1, "{with_kubelet:?}");
    assert_eq!(with_kubelet.json()["view"]["complete"], true, "a kubelet runs there: a nested node");
}

/// Issue 36: where PID 1's root and namespaces cannot be opened (EACCES:
/// an LSM, or no CAP_SYS_PTRACE and PID 1 another user's), the audit
/// reported no names, no runtime and no cause without a word. Each path
/// it could not open is an error entry now, with its errno and what the
/// report then does not know.
#[test]
fn pid_1_out_of_reach_is_said_with_what_it_hides() {
    if !can_run(&["setpriv", "unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("pid1-closed");
    // PID 1 another user's; the agent root, without CAP_SYS_PTRACE.
    let sb = Sandbox::with_init("true", "setpriv --reuid 65534 --regid 65534 --clear-groups sleep infinity");
    let setpriv = which("setpriv").unwrap();
    let agent = agent_bin();
    let run = run(sb.command(
        &setpriv,
        &[
            "--inh-caps=-sys_ptrace",
            "--bounding-set=-sys_ptrace",
            "--",
            agent.to_str().unwrap(),
            "audit",
            "--output",
            "json",
            "--cgroup-root",
            t.path.to_str().unwrap(),
        ],
    ));
    assert!(run.code == 0 || run.code == 2, "{run:?}");
    let report = run.json();
    let errors = report["errors"].as_array().unwrap();
    let said = |path: &str| {
        errors.iter().find(|e| e["path"].as_str().is_some_and(|p| p.ends_with(path))).map(|e| e["message"].clone())
    };
    let root = said("/1/root").unwrap_or_else(|| panic!("no error names PID 1's root: {report:#}"));
    assert!(root.as_str().unwrap().contains("Permission denied"), "{root}");
    assert!(root.as_str().unwrap().contains("names"), "says what it hides: {root}");
    assert!(said("/1/ns/cgroup").is_some(), "{report:#}");
}
