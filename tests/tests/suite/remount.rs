//! `agent remount` on sandbox nodes: plan, dry run, apply, verify, no-op;
//! refusals; from inside `agent run`; and the whole story from the seed
//! misattachment to a clean audit.
//! (Over 500 lines: the remount story is one behaviour area, and its
//! tests share the sandbox nodes built here.)

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
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
    // The mount on top at the path: the one no other there is mounted on.
    let at: Vec<&agent::mounts::Mount> = mi.iter().filter(|m| m.mount_point == Path::new(CILIUM_PATH)).collect();
    let top = at.iter().find(|m| !at.iter().any(|o| o.parent_id == m.mount_id)).expect("mounted");
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
    let (code, plan, _) = remount(&sb, &["--path", CILIUM_PATH]);
    assert_eq!((code, plan["plan"]["action"].as_str()), (1, Some("create_and_mount")));
    assert!(!sb.path(CILIUM_PATH).exists(), "dry run created nothing");
    let (code, _, run) = remount(&sb, &["--path", CILIUM_PATH, "--apply"]);
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
        let (code, report, run) = remount(&sb, &["--path", CILIUM_PATH, "--apply"]);
        assert_eq!(code, 2, "{run:?}");
        assert_eq!(report["outcome"], "refused");
        assert!(run.stderr.contains(expect), "{}", run.stderr);
        assert_says_each_thing_once(&run.stderr);
        assert_eq!(target_mountinfo(&sb), before, "nothing changed");
    }

    let sb = Sandbox::new("mount -t tmpfs tmpfs /run");
    let (code, _, run) = remount(&sb, &["--path", CILIUM_PATH, "--apply", "--target-pid", "999999"]);
    assert_eq!(code, 2);
    assert!(run.stderr.contains("target pid 999999: no such process"), "{}", run.stderr);
    assert_says_each_thing_once(&run.stderr);

    // Without privileges: refused with the reason, nothing created.
    let mut c = sb.command(Path::new("/usr/bin/setpriv"), &["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    c.arg(agent_bin()).args(["remount", "--path", CILIUM_PATH, "--apply"]);
    let run = integration_tests::run(c);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("Operation not permitted (os error 1) (needs CAP_SYS_ADMIN and hostPID)"),
        "{}",
        run.stderr
    );
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

// --- Detach acts only on what it planned -------------------------------

/// The plan `--detach-misattached` makes for `prog` at `cgroup`.
fn planned_detach(cgroup: &Path, prog: &Prog, link_id: Option<u32>) -> agent::remount::programs::Detach {
    let root = cgroup2_root();
    agent::remount::programs::Detach {
        cgroup: format!("/{}", cgroup.strip_prefix(&root).unwrap().display()),
        cgroup_id: cgroup_id(cgroup),
        attach_type: prog.hook,
        prog_id: prog.id,
        prog_name: Some(prog.name.clone()),
        owner: agent::owner::Owner::Cilium,
        link_id,
        result: agent::remount::programs::Applied::DryRun,
    }
}

/// Program ids attached at `cgroup`'s `hook` now.
fn attached_at(cgroup: &Path, hook: agent::bpf::AttachType) -> Vec<u32> {
    let fd = open_dir(cgroup);
    agent::bpf::sys::prog_query(std::os::fd::AsFd::as_fd(&fd), hook.kernel_value(), false).unwrap().prog_ids
}

#[test]
fn detach_follows_the_cgroup_it_planned_not_a_path_made_again() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("detach-remade");
    let svc = t.mkdir("system.slice/foo.service");
    let lb = Prog::load("cil_sock4_connect", "connect4");
    let _lb = Attached::new(&svc, &lb, 0);
    let d = planned_detach(&svc, &lb, None);
    // Between audit and detach the service restarts: its cgroup is removed
    // and made again at the same path, where a program of its own goes, on
    // a hook whose legacy detach takes whatever is attached.
    fs::remove_dir(&svc).unwrap();
    let svc = t.mkdir("system.slice/foo.service");
    let theirs = Prog::load("tenant_lb", "connect4");
    let _theirs = Attached::new(&svc, &theirs, 0);

    let result = agent::remount::programs::detach(&cgroup2_root(), &d);
    assert_eq!(attached_at(&svc, theirs.hook), vec![theirs.id], "a program it never planned was detached");
    let err = result.expect_err("refused").to_string();
    assert!(err.contains("no longer exists"), "{err}");
}

#[test]
fn detach_refuses_when_the_hook_no_longer_holds_the_planned_program() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("detach-swapped");
    let a = t.mkdir("a");
    let lb = Prog::load("cil_sock4_connect", "connect4");
    let att = Attached::new(&a, &lb, ALLOW_OVERRIDE);
    let d = planned_detach(&a, &lb, None);
    drop(att);
    let other = Prog::load("tenant_lb", "connect4");
    let _other = Attached::new(&a, &other, ALLOW_OVERRIDE);

    let result = agent::remount::programs::detach(&cgroup2_root(), &d);
    assert_eq!(attached_at(&a, other.hook), vec![other.id], "a program it never planned was detached");
    let err = result.expect_err("refused").to_string();
    assert!(err.contains(&other.id.to_string()) && err.contains(&lb.id.to_string()), "{err}");
}

#[test]
fn detach_refuses_a_link_that_now_runs_another_program() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("detach-link");
    let a = t.mkdir("a");
    let old = Prog::load("cil_sock4_connect", "connect4");
    let link = Link::new(&a, &old);
    let d = planned_detach(&a, &old, Some(link.id));
    // The CNI upgrades in place: BPF_LINK_UPDATE to its new program.
    let new = Prog::load("cil_sock4_connect", "connect4");
    link_update(&link, &new);

    let result = agent::remount::programs::detach(&cgroup2_root(), &d);
    assert_eq!(attached_at(&a, new.hook), vec![new.id], "a link it never planned for was detached");
    let err = result.expect_err("refused").to_string();
    assert!(err.contains(&format!("link {}", link.id)), "{err}");
}

// --- Remediation acts only on what it planned --------------------------

#[test]
fn a_symlink_on_the_mount_path_is_refused_and_nothing_is_mounted() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    // A pod that can write /run/cilium (Cilium's own hostPath) points it, or
    // the mount point itself, somewhere else on the node.
    for (setup, link) in [
        ("mkdir /run/elsewhere && ln -s /run/elsewhere /run/cilium", "/run/cilium"),
        ("mkdir -p /run/cilium /run/elsewhere && ln -s /run/elsewhere /run/cilium/cgroupv2", CILIUM_PATH),
    ] {
        let sb = Sandbox::new(&format!("mount -t tmpfs tmpfs /run && {setup}"));
        let before = target_mountinfo(&sb);
        let (code, report, run) = remount(&sb, &["--path", CILIUM_PATH, "--apply"]);
        assert_eq!(code, 2, "{run:?}");
        assert_eq!(report["outcome"], "refused", "{report:#}");
        assert!(run.stderr.contains(&format!("{link} is a symbolic link")), "{}", run.stderr);
        assert_says_each_thing_once(&run.stderr);
        assert_eq!(target_mountinfo(&sb), before, "nothing mounted anywhere");
        assert!(!sb.path("/run/elsewhere/cgroupv2").exists(), "nothing created through the link");
    }
}

#[test]
fn a_mount_that_fails_leaves_the_old_mount_in_place() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::mount_only("remount-fails");
    let sb = &s.sandbox;
    let before = target_mountinfo(sb);
    let namespaced = top_id(sb, CILIUM_PATH);
    // Mounting is refused (a seccomp profile, an LSM) after planning.
    let mut c = sb.command(&agent_bin(), &["remount", "--apply", "--output", "json"]);
    deny_syscalls(&mut c, vec![(libc::SYS_mount, vec![]), (libc::SYS_move_mount, vec![])]);
    let run = run(c);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.json()["outcome"], "failed");
    assert!(run.stderr.contains("Operation not permitted"), "{}", run.stderr);
    assert_says_each_thing_once(&run.stderr);
    assert_eq!(top_id(sb, CILIUM_PATH), namespaced, "the old mount is still there");
    assert_eq!(target_mountinfo(sb), before, "nothing changed");
}

/// `fixture remount-paused`: plan, wait for the test, apply.
struct Paused {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Paused {
    fn start(mut cmd: Command) -> Paused {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("fixture remount-paused");
        let out = BufReader::new(child.stdout.take().unwrap());
        Paused { child, out }
    }

    fn in_sandbox(sb: &Sandbox, pid: &str, path: &str) -> Paused {
        Self::start(sb.command(&agent_bin().with_file_name("fixture"), &["remount-paused", pid, path, "10000"]))
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }

    /// Lets it apply; returns what it said.
    fn resume(&mut self) -> String {
        writeln!(self.child.stdin.as_mut().unwrap()).unwrap();
        self.line()
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_mount_swapped_between_plan_and_apply_is_left_alone() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::mount_only("remount-swapped");
    let sb = &s.sandbox;
    let mut paused = Paused::in_sandbox(sb, "1", CILIUM_PATH);
    assert_eq!(paused.line(), "planned replace");
    // Another mount goes on top in between, one that looks exactly like the
    // planned one: same filesystem, same root. Only its identity differs.
    let looked = top_id(sb, CILIUM_PATH);
    let swap = run(sb.command(Path::new("/bin/sh"), &["-c", &format!("mount --bind {CILIUM_PATH} {CILIUM_PATH}")]));
    assert_eq!(swap.code, 0, "{swap:?}");
    assert_eq!(top_id(sb, CILIUM_PATH), looked);
    let before = target_mountinfo(sb);

    let said = paused.resume();
    assert!(said.starts_with(&format!("error: {CILIUM_PATH} changed since it was planned")), "{said}");
    assert_eq!(target_mountinfo(sb), before, "the other tool's mount is untouched");
}

#[test]
fn a_target_that_exits_after_planning_is_not_confused_with_the_next_process_of_its_pid() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let sb = Sandbox::new("mount -t tmpfs tmpfs /run");
    // The target: a process of the sandbox with a mount namespace of its own.
    let mut target = sb.command(
        Path::new("/bin/sh"),
        &["-c", "exec unshare --mount --propagation private sh -c 'mount -t tmpfs t /run && echo $$ && exec sleep infinity'"],
    );
    let mut target = target.stdout(Stdio::piped()).spawn().unwrap();
    let mut pid = String::new();
    BufReader::new(target.stdout.take().unwrap()).read_line(&mut pid).unwrap();
    let pid: u32 = pid.trim().parse().unwrap();
    let mut paused = Paused::in_sandbox(&sb, &pid.to_string(), CILIUM_PATH);
    assert_eq!(paused.line(), "planned create_and_mount");

    // It exits, and its pid goes to a process in the sandbox's own mount
    // namespace (the next pid is set through ns_last_pid).
    assert_eq!(run(sb.command(Path::new("/bin/kill"), &["-KILL", &pid.to_string()])).code, 0);
    target.wait().unwrap(); // nsenter, once it has reaped the target
    let script = format!("echo {} > /proc/sys/kernel/ns_last_pid || exit 1; sleep infinity & echo $!", pid - 1);
    let mut successor = sb.command(Path::new("/bin/sh"), &["-c", &script]).stdout(Stdio::piped()).spawn().unwrap();
    let mut reused = String::new();
    BufReader::new(successor.stdout.take().unwrap()).read_line(&mut reused).unwrap();
    let before = target_mountinfo(&sb);

    let said = paused.resume();
    let _ = successor.kill();
    let _ = successor.wait();
    assert_eq!(reused.trim(), pid.to_string(), "the pid was not reused; the test proves nothing");
    assert_eq!(said, format!("error: target pid {pid} exited"));
    assert_eq!(target_mountinfo(&sb), before, "nothing mounted in the successor's namespace");
    assert!(!sb.path("/run/cilium").exists());
}

#[test]
fn a_helper_stuck_on_a_filesystem_that_never_answers_is_killed_at_the_timeout() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let trap = FuseTrap::new();
    let path = trap.mnt().join("cgroupv2");
    // Target: a sandbox node's PID 1 (whose namespaces the helper enters,
    // as it enters the real PID 1's), made after the trap so that its mount
    // namespace holds the FUSE mount too.
    let sb = Sandbox::new("true");
    let cmd =
        sb.command(&agent_bin().with_file_name("fixture"), &["remount-paused", "1", path.to_str().unwrap(), "1000"]);
    let start = std::time::Instant::now();
    let mut paused = Paused::start(cmd);
    let said = paused.line();
    assert!(said.starts_with("error: the remount helper did not answer within 1s"), "{said}");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    let helpers = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .filter(|c| c.windows(17).any(|w| w == b"__remount-helper\0"))
        .count();
    assert_eq!(helpers, 0, "the helper was killed and reaped");
}

// --- Where it mounts, and for which CNI ---------------------------------

/// Issue 27, 3: `--path /run/cilium` (a plausible typo) and `--path /etc`
/// were planned as `mount cgroup2` over a directory with entries; the
/// plan's "an empty directory" was never checked.
#[test]
fn a_path_outside_the_cni_mount_points_or_with_entries_is_refused_and_nothing_changes() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::mount_only("remount-paths");
    let sb = &s.sandbox;
    let before = target_mountinfo(sb);
    for path in ["/etc", "/run/cilium", "/run"] {
        let (code, _, run) = remount(sb, &["--path", path, "--apply"]);
        assert_eq!(code, 2, "{path}: {run:?}");
        assert!(
            run.stderr.contains(&format!("--path {path}: not a known owner's cgroup2 mount point")),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("--force"), "{}", run.stderr);
        assert_says_each_thing_once(&run.stderr);
    }
    // --force is for a Cilium whose cgroup.hostRoot moved, not for these.
    let (code, report, run) = remount(sb, &["--path", "/run/cilium", "--force", "--apply"]);
    assert_eq!((code, report["outcome"].as_str()), (2, Some("refused")), "{run:?}");
    assert!(report["plan"]["reason"].as_str().unwrap().contains("with 1 entry"), "{report:#}");
    let (code, report, run) = remount(sb, &["--path", "/etc", "--force", "--apply"]);
    assert_eq!((code, report["outcome"].as_str()), (2, Some("refused")), "{run:?}");
    assert!(report["plan"]["state"]["kind"] == "non_empty", "{report:#}");
    let (code, report, run) = remount(sb, &["--path", "/run", "--force", "--apply"]);
    assert_eq!((code, report["outcome"].as_str()), (2, Some("refused")), "{run:?}");
    assert!(run.stderr.contains("tmpfs is mounted at /run"), "another filesystem's mount point: {}", run.stderr);
    assert_eq!(target_mountinfo(sb), before, "nothing mounted anywhere");
    let forced_alone = sb.agent(&["remount", "--force"]);
    assert_eq!(forced_alone.code, 2, "{forced_alone:?}");
}

/// Issue 27, 3: on a Calico node the default path and every fix text were
/// Cilium's (`/run/cilium/cgroupv2`, `cgroup.autoMount`, restarting
/// `k8s-app=cilium`).
#[test]
fn the_default_path_and_the_advice_follow_the_cni_that_owns_the_programs() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::calico("remount-calico");
    let sb = &s.sandbox;
    let top = top_id(sb, "/run/calico/cgroup");
    assert_ne!(top, 1);
    let (code, plan, run) = remount(sb, &["--detach-misattached"]);
    assert_eq!(code, 1, "{run:?}");
    assert_eq!(plan["plan"]["path"], "/run/calico/cgroup");
    assert_eq!(plan["owner"], "calico");
    assert_eq!(plan["plan"]["action"], "replace");
    assert_eq!(plan["detach"].as_array().unwrap().len(), 6, "{plan:#}");
    let next = plan["next_step"].as_str().unwrap();
    assert!(next.contains("-n calico-system") && next.contains("k8s-app=calico-node"), "{next}");
    // The audit's findings say the same.
    let run = sb.agent(&["audit", "--output", "json", "--cgroup-root", s.t.path.to_str().unwrap()]);
    let report = run.json();
    let fixes: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["owner"] == "calico")
        .map(|f| f["remediation"].as_str().unwrap())
        .collect();
    assert!(!fixes.is_empty(), "{report:#}");
    for fix in fixes {
        assert!(fix.contains("--path /run/calico/cgroup") || fix.contains("/run/calico/cgroup"), "{fix}");
        assert!(
            fix.contains("calico-node") && !fix.contains("cgroup.autoMount") && !fix.contains("k8s-app=cilium"),
            "{fix}"
        );
    }
    let (code, done, run) = remount(sb, &["--apply"]);
    assert_eq!((code, done["outcome"].as_str()), (0, Some("done")), "{run:?}");
    assert_eq!(top_id(sb, "/run/calico/cgroup"), 1);

    // Nothing of a CNI on the node (the seed above gone): asked for, not guessed.
    drop(s);
    let bare = Sandbox::new("mount -t tmpfs tmpfs /run");
    let (code, _, run) = remount(&bare, &[]);
    assert_eq!(code, 2, "{run:?}");
    assert!(
        run.stderr.contains("whose cgroup2 mount to repair cannot be told") && run.stderr.contains("--path"),
        "{}",
        run.stderr
    );
    assert!(!bare.path("/run/cilium").exists());
}

/// Issue 27, 3: `--unpin-stale-links` on a node with no bpffs where the
/// target keeps it dropped the whole plan (exit 2, nothing planned).
#[test]
fn unpinning_without_a_bpffs_is_skipped_with_a_note_and_the_plan_stands() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::mount_only("remount-nobpffs");
    let (code, report, run) = remount(&s.sandbox, &["--unpin-stale-links"]);
    assert_eq!(code, 1, "the remount is still planned: {run:?}");
    assert_eq!(report["plan"]["action"], "replace");
    let notes = report["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().starts_with("--unpin-stale-links skipped")), "{report:#}");
    // A --bpffs the user names that is not one is bad input.
    let (code, _, run) = remount(&s.sandbox, &["--unpin-stale-links", "--bpffs", "/run"]);
    assert_eq!(code, 2, "{run:?}");
    assert!(run.stderr.contains("--bpffs /run: not a bpffs mount"), "{}", run.stderr);
}

/// Issue 28, H4: what `--unpin-stale-links --apply` removes is resolved
/// again beneath the bpffs with no link, and removed relative to that
/// directory: a pin directory swapped for a link between the plan and the
/// removal (anyone who can write the node's bpffs can) cannot turn the
/// removal onto a file of the same name elsewhere.
#[test]
fn unpinning_follows_no_link_put_in_place_of_the_pin_directory() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("unpin-swap");
    let elsewhere = t.mkdir(&cgroupfs_pod("burstable", OTHER_POD_UID));
    let fs_ = BpfFs::new();
    let dir = fs_.dir.path().join("cilium/socketlb/links/cgroup");
    fs::create_dir_all(&dir).unwrap();
    let p = Prog::load("cil_sock4_connect", "connect4");
    let link = Link::new(&elsewhere, &p);
    let pin = fs_.pin("cilium/socketlb/links/cgroup/victim", std::os::fd::AsFd::as_fd(&link.fd));
    let bpffs = agent::bpf::pins::open_bpffs(fs_.dir.path()).unwrap();
    let stale = agent::remount::programs::stale_pins(std::os::fd::AsFd::as_fd(&bpffs), fs_.dir.path(), 1, &[]).unwrap();
    assert_eq!(stale.len(), 1, "{stale:?}");

    // The swap (bpffs renames nothing): its own pin removed, the directory
    // too, and a link to another in its place, holding a file of the pin's
    // name.
    let target = tempfile::tempdir().unwrap();
    fs::write(target.path().join("victim"), "not a pin").unwrap();
    fs::remove_file(&pin).unwrap();
    fs::remove_dir(&dir).unwrap();
    std::os::unix::fs::symlink(target.path(), &dir).unwrap();
    let err = agent::remount::programs::unpin(std::os::fd::AsFd::as_fd(&bpffs), fs_.dir.path(), &stale[0])
        .expect_err("a link in place of the directory is not followed");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(target.path().join("victim").exists(), "the file elsewhere is untouched");
    let _ = fs::remove_file(&dir);
}

/// Issue 31, 3: a CNI agent in a container with a private cgroup namespace
/// and a mount namespace of its own (its cgroup2 mount not shared with the
/// node's). `--target-pid <agent>` planned `replace` (exit 1) as a dry run,
/// then refused with exit 2 on `--apply`: the helper took the target's
/// cgroup namespace too, so the new mount would have been rooted at the
/// container again. It takes PID 1's now, as Cilium's init container does
/// with `nsenter --cgroup=/proc/1/ns/cgroup`: the dry run and `--apply`
/// agree, and the target's mount is rooted at the root.
#[test]
fn a_target_in_a_private_cgroup_namespace_is_fixed_as_the_dry_run_said() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("remount-private");
    let ctr = t.mkdir(&cilium_container());
    let sb = Sandbox::new(&format!(
        r#"mount -t tmpfs tmpfs /run
mkdir -p /run/agent
sh -c 'echo $$ > "$0/cgroup.procs" && exec unshare --cgroup --mount --propagation private sh -c "mkdir -p {CILIUM_PATH} && mount -t cgroup2 none {CILIUM_PATH} && echo \$\$ > /run/agent/pid && exec sleep infinity"' '{ctr}' &
i=0; until [ -s /run/agent/pid ]; do i=$((i+1)); [ $i -lt 200 ]; sleep 0.05; done"#,
        ctr = ctr.display(),
    ));
    let pid = fs::read_to_string(sb.path("/run/agent/pid")).unwrap().trim().to_owned();
    // The agent's host pid: the only process in its container's cgroup.
    let host_pid = fs::read_to_string(ctr.join("cgroup.procs")).unwrap().trim().to_owned();
    let its_mount = format!("/proc/{host_pid}/root{CILIUM_PATH}");
    assert_eq!(cgroup_id(Path::new(&its_mount)), cgroup_id(&ctr), "rooted at its container");
    let node_mount = || target_mountinfo(&sb).contains(&format!(" {CILIUM_PATH} "));
    assert!(!node_mount(), "not mounted in the node's mount namespace");

    let (code, plan, run) = remount(&sb, &["--path", CILIUM_PATH, "--target-pid", &pid]);
    assert_eq!(code, 1, "{run:?}");
    assert_eq!(plan["plan"]["action"], "replace", "{plan:#}");
    assert_eq!(cgroup_id(Path::new(&its_mount)), cgroup_id(&ctr), "a dry run changes nothing");

    let (code, done, run) = remount(&sb, &["--path", CILIUM_PATH, "--target-pid", &pid, "--apply"]);
    assert_eq!(code, 0, "--apply did what the dry run said: {run:?}");
    assert_eq!(done["outcome"], "done", "{done:#}");
    let root = cgroup2_root();
    assert_eq!(done["after"]["top_cgroup_id"], cgroup_id(&root));
    assert_eq!(cgroup_id(Path::new(&its_mount)), cgroup_id(&root), "its mount is rooted at the root now");
    assert!(!node_mount(), "the node's mount namespace is untouched");
}
