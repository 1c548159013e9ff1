//! `agent remount` on sandbox nodes: plan, dry run, apply, verify, no-op;
//! refusals; from inside `agent run`; and the whole story from the seed
//! misattachment to a clean audit.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

const CILIUM_PATH: &str = "/run/cilium/cgroupv2";

fn target_mountinfo(sb: &Sandbox) -> String {
    fs::read_to_string(format!("/proc/{}/mountinfo", sb.pid1)).unwrap()
}

/// Cgroup id of the top of the mount at `path` in the sandbox.
fn top_id(sb: &Sandbox, path: &str) -> u64 {
    fs::metadata(sb.path(path)).unwrap().ino()
}

fn remount(sb: &Sandbox, extra: &[&str]) -> (i32, Value, Run) {
    let mut args = vec!["remount", "--output", "json"];
    args.extend_from_slice(extra);
    let run = sb.agent(&args);
    let json = if run.stdout.trim().is_empty() { Value::Null } else { run.json() };
    (run.code, json, run)
}

#[test]
fn dry_run_changes_nothing_apply_fixes_and_a_second_run_is_a_no_op() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::mount_only("remount");
    let sb = &s.sandbox;
    let before = target_mountinfo(sb);
    assert_ne!(top_id(sb, CILIUM_PATH), 1);

    let (code, plan, run) = remount(sb, &[]);
    assert_eq!(code, 1, "a change is needed: {run:?}");
    assert_eq!(plan["plan"]["action"], "replace");
    assert_eq!(plan["outcome"], "dry_run");
    assert_eq!(
        plan["plan"]["state"]["top_cgroup_id"],
        cgroup_id(&s.t.path.join(cilium_container().trim_start_matches('/')))
    );
    assert_eq!(target_mountinfo(sb), before, "a dry run changes nothing");

    let (code, done, run) = remount(sb, &["--apply"]);
    assert_eq!(code, 0, "{run:?}");
    assert_eq!(done["outcome"], "done");
    assert_eq!(done["after"]["top_cgroup_id"], 1);
    assert_eq!(top_id(sb, CILIUM_PATH), 1, "seen from the host: the mount's top is the root");
    let mi = agent::mounts::parse_mountinfo(target_mountinfo(sb).as_bytes()).mounts;
    let top = agent::mounts::top_mount_at(&mi, Path::new(CILIUM_PATH)).expect("mounted");
    assert_eq!((top.fs_type.as_str(), top.root.as_str()), ("cgroup2", "/"));
    assert!(
        run.stderr.contains("remount") && run.stderr.contains("before") && run.stderr.contains("after"),
        "one log line with before and after: {}",
        run.stderr
    );
    assert!(done["next_step"].as_str().unwrap().contains("kubectl -n kube-system delete pod -l k8s-app=cilium"));

    let (code, again, _) = remount(sb, &["--apply"]);
    assert_eq!(code, 0);
    assert_eq!(again["outcome"], "nothing_to_do");
    assert!(again["next_step"].is_null());
}

#[test]
fn missing_path_is_created_and_mounted() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let sb = Sandbox::new("mount -t tmpfs tmpfs /run");
    let (code, plan, _) = remount(&sb, &[]);
    assert_eq!((code, plan["plan"]["action"].as_str()), (1, Some("create_and_mount")));
    assert!(!sb.path(CILIUM_PATH).exists(), "dry run created nothing");
    let (code, _, run) = remount(&sb, &["--apply"]);
    assert_eq!(code, 0, "{run:?}");
    assert_eq!(top_id(&sb, CILIUM_PATH), 1);
}

#[test]
fn refusals_exit_2_and_change_nothing() {
    if !can_run(&["unshare", "nsenter", "setpriv"]) {
        return;
    }
    for (setup, expect) in [
        ("mkdir -p /run/cilium/cgroupv2 && mount -t tmpfs cgaudit-test /run/cilium/cgroupv2", "tmpfs is mounted"),
        ("mkdir -p /run/cilium && touch /run/cilium/cgroupv2", "is a regular file"),
    ] {
        let sb = Sandbox::new(&format!("mount -t tmpfs tmpfs /run && {setup}"));
        let before = target_mountinfo(&sb);
        let (code, report, run) = remount(&sb, &["--apply"]);
        assert_eq!(code, 2, "{run:?}");
        assert_eq!(report["outcome"], "refused");
        assert!(run.stderr.contains(expect), "{}", run.stderr);
        assert_says_each_thing_once(&run.stderr);
        assert_eq!(target_mountinfo(&sb), before, "nothing changed");
    }

    let sb = Sandbox::new("mount -t tmpfs tmpfs /run");
    let (code, _, run) = remount(&sb, &["--apply", "--target-pid", "999999"]);
    assert_eq!(code, 2);
    assert!(run.stderr.contains("target pid 999999: no such process"), "{}", run.stderr);
    assert_says_each_thing_once(&run.stderr);

    // Without privileges: refused with the reason, nothing created.
    let mut c = sb.command(Path::new("/usr/bin/setpriv"), &["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    c.arg(agent_bin()).args(["remount", "--apply"]);
    let run = integration_tests::run(c);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("Permission denied") || run.stderr.contains("needs hostPID"), "{}", run.stderr);
    assert_says_each_thing_once(&run.stderr);
    assert!(!sb.path(CILIUM_PATH).exists());
}

#[test]
fn agent_run_remediates_from_inside_its_runtime() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::mount_only("remount-daemon");
    let sb = &s.sandbox;
    let addr = free_addr();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = sb.command(
        &agent_bin(),
        &["run", "--listen", &addr.to_string(), "--no-tracing", "--interval", "1s", "--remediate", "on"],
    );
    cmd.args(["--cgroup-root", s.t.path.to_str().unwrap()]).stderr(log.reopen().unwrap());
    let mut child = cmd.spawn().unwrap();
    let done = wait_until(Duration::from_secs(15), || {
        http_get(addr, "/metrics").is_some_and(|(_, m)| {
            metric_value(&m, r#"cgaudit_remediations_total{action="remount",result="done"}"#) == Some(1.0)
        })
    });
    let logs = fs::read_to_string(log.path()).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(done, "the daemon never remounted:\n{logs}");
    assert_eq!(top_id(sb, CILIUM_PATH), 1);
    assert!(logs.contains("remediation"), "{logs}");
    assert!(!logs.contains("EINVAL"), "setns ran in a single-threaded helper: {logs}");
}

#[test]
fn whole_story_seed_to_clean_audit_leaving_benign_programs_alone() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::new("story");
    let sb = &s.sandbox;
    // Benign neighbours that must survive every step.
    let svc = s.t.mkdir("/system.slice/foo.service");
    let ctr = s.t.path.join(cilium_container().trim_start_matches('/'));
    let fw = Prog::load("sd_fw_ingress", "ingress");
    let dev = Prog::load("", "device");
    let _benign = [Attached::new(&svc, &fw, ALLOW_MULTI), Attached::new(&ctr, &dev, ALLOW_MULTI)];

    let audit = sb.agent(&["audit", "--output", "json"]);
    assert_eq!(audit.code, 1, "{audit:?}");

    let (code, report, run) = remount(sb, &["--apply", "--detach-misattached"]);
    assert_eq!(code, 0, "{run:?}");
    let detached = report["detach"].as_array().unwrap();
    assert_eq!(detached.len(), 10, "{report:#}");
    assert!(detached.iter().all(|d| d["result"] == "done" && d["owner"] == "cilium"));
    assert_eq!(top_id(sb, CILIUM_PATH), 1);

    // A stand-in CNI agent restarts and attaches through the repaired mount:
    // now the root. bpf_links, so nothing can outlive this test.
    let root = sb.path(CILIUM_PATH);
    let progs = load_cilium_socket_lb();
    let _links: Vec<Link> = progs.iter().map(|p| Link::new(&root, p)).collect();

    let audit = sb.agent(&["audit", "--output", "json"]);
    assert_eq!(audit.code, 0, "clean after the fix: {}", audit.stdout);
    let report = audit.json();
    let atts = report["attachments"].as_array().unwrap();
    for p in &progs {
        assert!(atts.iter().any(|a| a["prog_id"] == p.id && a["cgroup"] == "/"), "{} at the root", p.name);
    }
    for benign in [&fw, &dev] {
        assert!(atts.iter().any(|a| a["prog_id"] == benign.id), "benign prog {} untouched", benign.id);
    }
}

#[test]
fn stale_pinned_links_are_listed_then_unpinned() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("pins");
    let elsewhere = t.mkdir(&cgroupfs_pod("burstable", OTHER_POD_UID));
    let fs_ = BpfFs::new();
    let dir = fs_.dir.path().join("cilium/socketlb/links/cgroup");
    fs::create_dir_all(&dir).unwrap();
    let p = Prog::load("cil_sock4_connect", "connect4");
    let benign = Prog::load("sd_fw_ingress", "ingress");
    let link = Link::new(&elsewhere, &p);
    let other = Link::new(&elsewhere, &benign);
    let pin = fs_.pin("cilium/socketlb/links/cgroup/cil_sock4_connect", std::os::fd::AsFd::as_fd(&link.fd));
    let kept = fs_.pin("cilium/socketlb/links/cgroup/not_cilium", std::os::fd::AsFd::as_fd(&other.fd));
    // A node whose mount is already right: only the pins need work.
    let sb = Sandbox::new(
        "mount -t tmpfs tmpfs /run && mkdir -p /run/cilium/cgroupv2 && mount -t cgroup2 none /run/cilium/cgroupv2",
    );
    let bpffs = fs_.dir.path().to_str().unwrap();

    let (code, report, run) = remount(&sb, &["--unpin-stale-links", "--bpffs", bpffs]);
    assert_eq!(code, 1, "{run:?}");
    assert_eq!(report["plan"]["action"], "nothing");
    let unpin = report["unpin"].as_array().unwrap();
    assert_eq!(unpin.len(), 1, "only the CNI's link: {report:#}");
    assert_eq!(unpin[0]["link_id"], link.id);
    assert_eq!(unpin[0]["cgroup_id"], cgroup_id(&elsewhere));
    assert!(pin.exists(), "dry run");

    let (code, report, run) = remount(&sb, &["--unpin-stale-links", "--bpffs", bpffs, "--apply"]);
    assert_eq!(code, 0, "{run:?}");
    assert_eq!(report["unpin"][0]["result"], "done");
    assert!(!pin.exists(), "unpinned");
    assert!(kept.exists(), "a program it does not own is never touched");
}
