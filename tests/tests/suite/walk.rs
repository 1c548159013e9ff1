//! The two ways of reading the tree (`--walk bpf-iter`: one in-kernel pass
//! of an iter/cgroup program; `--walk syscalls`: a directory walk with
//! BPF_PROG_QUERY per hook) give the same report, and the in-kernel pass
//! leaves nothing loaded behind.

use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

/// The seed's Cilium container, and an ordinary pod's container.
fn containers() -> (String, String) {
    (cilium_container(), systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER))
}

fn audit(t: &TestCgroup, walk: &str) -> Value {
    let run = agent(&["audit", "--output", "json", "--walk", walk, "--cgroup-root", t.path.to_str().unwrap()]);
    assert!(run.code == 0 || run.code == 1, "--walk {walk}: {run:?}");
    run.json()
}

#[test]
fn both_walks_give_the_same_report_on_a_busy_tree() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("walks");
    let (ctr, other_ctr) = containers();
    let (ctr, other_ctr) = (t.mkdir(&ctr), t.mkdir(&other_ctr));
    let slice = t.path.join("kubepods.slice");
    // Socket LB at the root, half by bpf_link; the same programs misattached
    // to a container (the seed's failure); runtime device programs with both
    // exclusive-override and multi flags; and eight more connect4 programs
    // on kubepods.slice, so each pod has nine effective connect4 programs:
    // more than the in-kernel record carries, which sends the agent to
    // BPF_F_QUERY_EFFECTIVE for them.
    let lb = load_cilium_socket_lb();
    let (legacy, linked) = lb.split_at(5);
    let _root: Vec<Attached> = legacy.iter().map(|p| Attached::new(&t.path, p, ALLOW_MULTI)).collect();
    let _links: Vec<Link> = linked.iter().map(|p| Link::new(&t.path, p)).collect();
    let _below: Vec<Attached> = lb.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();
    let dev = Prog::load("", "device");
    let _dev = Attached::new(&ctr, &dev, ALLOW_OVERRIDE);
    let _dev2 = Attached::new(&other_ctr, &dev, ALLOW_MULTI);
    let extra: Vec<Prog> = (0..8).map(|i| Prog::load(&format!("lb_extra_{i}"), "connect4")).collect();
    let _extra: Vec<Attached> = extra.iter().map(|p| Attached::new(&slice, p, ALLOW_MULTI)).collect();
    let egress = Prog::load("sd_fw_egress", "egress");
    let _egress = Link::new(&other_ctr, &egress);

    let before = loaded_program_ids();
    let iter = audit(&t, "bpf-iter");
    assert_eq!(programs_left_since(&before), [0u32; 0], "the iterator program is unloaded once the audit is done");
    let syscalls = audit(&t, "syscalls");
    assert_eq!(iter["walk"]["method"], "bpf_iter", "{:#}", iter["walk"]);
    assert!(iter["walk"]["fallback_reason"].is_null());
    assert_eq!(syscalls["walk"]["method"], "syscalls");
    assert_eq!(iter["attachments"].as_array().unwrap().len(), 10 + 10 + 2 + 8 + 1, "{iter:#}");
    assert_eq!(iter["cgroups_scanned"], syscalls["cgroups_scanned"]);
    assert_eq!(what_was_found(iter.clone()), what_was_found(syscalls.clone()), "the walks disagree");

    // The misattachment is found by both, with its link ids and flags.
    let kinds: Vec<&str> = iter["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"socket_lb_below_root"), "{kinds:?}");
    assert!(!kinds.contains(&"pods_without_socket_lb"), "the pods inherit the root's programs: {kinds:?}");
    let dev_flags: Vec<&str> = iter["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["prog_id"] == dev.id)
        .map(|a| a["attach_flags"].as_str().unwrap())
        .collect();
    assert_eq!(dev_flags.len(), 2);
    assert!(dev_flags.contains(&"override") && dev_flags.contains(&"multi"), "{dev_flags:?}");
}

#[test]
fn a_missing_root_program_is_seen_the_same_way_by_both() {
    if !can_run(&[]) {
        return;
    }
    // Only below the root: pods have no effective connect program.
    let t = TestCgroup::new("walks-missing");
    let (ctr, other_ctr) = containers();
    let ctr = t.mkdir(&ctr);
    t.mkdir(&other_ctr);
    let lb = load_cilium_socket_lb();
    let _cilium = Holder::cilium_all(&lb);
    let _below: Vec<Attached> = lb.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();
    let iter = audit(&t, "bpf-iter");
    let syscalls = audit(&t, "syscalls");
    assert_eq!(what_was_found(iter.clone()), what_was_found(syscalls), "the walks disagree");
    let pods = iter["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "pods_without_socket_lb");
    // Programs on a container cgroup do not reach its pod's cgroup.
    assert_eq!(pods.unwrap_or_else(|| panic!("{iter:#}"))["count"], 2);
}

#[test]
fn the_default_walk_is_the_in_kernel_one_on_this_kernel() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("walks-default");
    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["walk"]["method"], "bpf_iter", "auto fell back: {:#}", report["walk"]);
    let table = agent(&["audit", "--walk", "syscalls", "--cgroup-root", t.path.to_str().unwrap()]);
    assert!(!table.stdout.contains("not in one kernel pass"), "an explicit choice is not a fallback: {}", table.stdout);
}

/// `agent <args>` under a seccomp filter that fails `bpf(BPF_LINK_CREATE)`
/// with EPERM, as a hardened seccomp profile or an LSM policy can: the
/// iterator program loads but cannot be attached, so the in-kernel pass
/// cannot run while every call of the syscall walk still works.
fn agent_without_link_create(args: &[&str]) -> Run {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    const BPF_LINK_CREATE: u64 = 28;
    let link_create = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, BPF_LINK_CREATE).unwrap();
    let mut c = std::process::Command::new(agent_bin());
    c.args(args);
    deny_syscalls(&mut c, vec![(libc::SYS_bpf, vec![SeccompRule::new(vec![link_create]).unwrap()])]);
    run(c)
}

#[test]
fn when_the_kernel_pass_cannot_run_the_default_walk_falls_back_and_says_why() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("walks-fallback");
    let (ctr, other_ctr) = containers();
    let ctr = t.mkdir(&ctr);
    t.mkdir(&other_ctr);
    let lb = load_cilium_socket_lb();
    let _below: Vec<Attached> = lb.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();
    let dev = Prog::load("", "device");
    let _dev = Attached::new(&ctr, &dev, ALLOW_OVERRIDE);
    let root = t.path.to_str().unwrap();

    let normal = audit(&t, "auto");
    let before = loaded_program_ids();
    let json = agent_without_link_create(&["audit", "--output", "json", "--cgroup-root", root]);
    assert_eq!(json.code, 1, "the findings still decide the exit code: {json:?}");
    let fallback = json.json();
    assert_eq!(normal["walk"]["method"], "bpf_iter");
    assert_eq!(fallback["walk"]["method"], "syscalls", "{:#}", fallback["walk"]);
    let reason = fallback["walk"]["fallback_reason"].as_str().unwrap_or_else(|| panic!("{:#}", fallback["walk"]));
    assert!(reason.contains("BPF_LINK_CREATE"), "the reason names the call that failed: {reason}");
    assert_says_each_thing_once(reason);
    assert_eq!(what_was_found(fallback), what_was_found(normal), "the fallback walk disagrees with the in-kernel one");
    assert_eq!(programs_left_since(&before), [0u32; 0], "the iterator program that could not attach is unloaded");

    let table = agent_without_link_create(&["audit", "--cgroup-root", root]);
    assert_eq!(table.code, 1, "{table:?}");
    assert!(table.stdout.contains("note: cgroups read by syscalls, not in one kernel pass: "), "{}", table.stdout);

    // Asked for by name, the in-kernel pass is not silently replaced.
    let forced = agent_without_link_create(&["audit", "--walk", "bpf-iter", "--cgroup-root", root]);
    assert_eq!(forced.code, 2, "{forced:?}");
    assert!(forced.stdout.is_empty(), "no report from a walk that did not run: {}", forced.stdout);
    assert!(
        forced.stderr.contains("--walk bpf-iter") && forced.stderr.contains("BPF_LINK_CREATE"),
        "{}",
        forced.stderr
    );
    assert_says_each_thing_once(&forced.stderr);
    assert_eq!(programs_left_since(&before), [0u32; 0], "nothing was left loaded");
}

/// Issue 28, H2 [a writable cgroupfs; kernels before 6.1, or --walk
/// syscalls]: the syscall walk recursed once per level, keeping one open
/// directory and its 32 KiB buffer per level: it died of a stack overflow
/// at depth 4,500 (and held 130 MB on the way). It is iterative now, with
/// at most 64 directories open at once, at any depth.
#[test]
fn a_chain_deeper_than_any_stack_is_walked_by_syscalls() {
    if !can_run(&["time"]) {
        return;
    }
    let t = TestCgroup::new("deep-walk");
    let chain = Chain::make(&t.path, "d", 5000);
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let _a = Attached::new_fd(chain.bottom(), &prog, ALLOW_MULTI);
    let mut c = std::process::Command::new(agent_bin());
    c.args(["audit", "--output", "json", "--walk", "syscalls", "--cgroup-root", t.path.to_str().unwrap()]);
    let (run, peak_kib) = run_measured(c);
    eprintln!("5,000 levels by syscalls: peak RSS {} MiB", peak_kib / 1024);
    assert_eq!(run.code, 1, "exit {}: {}", run.code, run.stderr.lines().last().unwrap_or(""));
    let report = run.json();
    assert_eq!(report["cgroups_scanned"], 5001);
    let below: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
    assert_eq!(below.len(), 1, "the program at the bottom is found");
    // Its path is 10,000 bytes: shown around its id, within PATH_MAX.
    let path = below[0]["cgroup"].as_str().unwrap();
    let attachments = report["attachments"].as_array().unwrap();
    let id = attachments.iter().find(|a| a["prog_id"] == prog.id).expect("listed")["cgroup_id"].as_u64().unwrap();
    assert!(path.len() <= 4096 && path.starts_with("/d/d/") && path.ends_with("/d/d"), "{path}");
    assert!(path.contains(&format!("/…(cgroup id {id})…/")), "{path}");
    assert!(peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB");
    drop(_a);
    drop(chain);
}

/// Issue 28, H1 [a writable cgroupfs in a pod]: every populated cgroup below
/// a pod and every event kept a copy of its full path, so a cgroup cost its
/// depth times its name's length: a chain 4,000 deep of 255-byte names in a
/// pod's container, with a process at the bottom, took the audit 37.8 s and
/// 135.6 MB. Goal: at most 10 s and 64 MiB, with either walk; the finding
/// still names the pod.
#[test]
fn a_deep_chain_of_long_names_in_a_pod_costs_the_audit_little() {
    if !can_run(&["time"]) {
        return;
    }
    let node = DeepPodChain::make("deep-names", 4000);
    let t = &node.t;
    for walk in ["bpf-iter", "syscalls"] {
        let mut c = std::process::Command::new(agent_bin());
        c.args(["audit", "--output", "json", "--walk", walk, "--cgroup-root", t.path.to_str().unwrap()]);
        let start = std::time::Instant::now();
        let (run, peak_kib) = run_measured(c);
        let took = start.elapsed();
        eprintln!("4,000 levels of 255-byte names in a pod, --walk {walk}: {took:?}, peak RSS {} MiB", peak_kib / 1024);
        assert!(run.code == 1, "exit {}: {}", run.code, run.stderr.lines().last().unwrap_or(""));
        let report = run.json();
        assert_eq!(report["cgroups_scanned"], 4005, "--walk {walk}");
        let below: Vec<&Value> =
            report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
        assert_eq!(below.len(), 1, "--walk {walk}");
        let text = below[0].to_string();
        assert!(
            text.contains(OTHER_POD_UID),
            "--walk {walk}: the finding names the pod: {}",
            &text[..text.len().min(400)]
        );
        assert!(took < std::time::Duration::from_secs(10), "--walk {walk}: {took:?}");
        assert!(peak_kib < 64 * 1024, "--walk {walk}: peak RSS {peak_kib} KiB");
    }
}

/// Issue 28, H1, the daemon: its picture kept every cgroup's path, and each
/// event its cgroup's and its caller's: a chain 4,000 deep of 255-byte names
/// got it OOM-killed at start, and each event at the bottom cost about
/// 2.1 MB. Goal: under a 128 MiB limit it stays up and ready while the chain
/// is made and while it churns at the bottom, and still sees a
/// misattachment there. Most of the chain is made before the daemon starts
/// (its start is where the old one died), the deepest levels while it
/// watches: with the tree tracepoints enabled the kernel formats each new
/// cgroup's path (`kernfs_path_from_node`, quadratic in depth), so making
/// all 4,000 levels under watch takes minutes of the pod's own time and
/// tells nothing the last hundred do not.
#[test]
fn a_deep_chain_in_a_pod_cannot_push_the_daemon_over_its_limit() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("deep-daemon");
    let ctr = t.mkdir(&systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER));
    let name = "n".repeat(255);
    let started = Chain::make(&ctr, &name, 3900);
    let limit = MemoryLimit::new("deep-daemon", 128 << 20);
    // The binary that ships: its memory is what the DaemonSet's limit is for.
    let mut d = Daemon::start_via(limit.command(&shipped_agent_bin()), &["--cgroup-root", t.path.to_str().unwrap()]);
    let up = |d: &mut Daemon| {
        matches!(d.child.try_wait(), Ok(None)) && http_get(d.addr, "/readyz").is_some_and(|(s, _)| s == 200)
    };
    assert!(wait_until(Duration::from_secs(30), || up(&mut d)), "never ready:\n{}", d.logs());
    // The deepest levels made while the daemon watches: one event each.
    let made = std::time::Instant::now();
    let chain = Chain::make(&ctr, &name, 4000);
    std::mem::forget(started); // the same directories: `chain` removes them
    eprintln!("levels 3,901 to 4,000 made in {:?}", made.elapsed());
    assert!(wait_until(Duration::from_secs(30), || up(&mut d)), "down after the chain:\n{}", d.logs());
    // Churn at the bottom: cgroups made and removed there, a program
    // attached and detached: events 4,000 levels down, more than the
    // daemon keeps.
    let bottom = chain.bottom();
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let churned = std::time::Instant::now();
    for i in 0..100 {
        rustix::fs::mkdirat(&bottom, "c", rustix::fs::Mode::from_raw_mode(0o755)).expect("mkdir at the bottom");
        rustix::fs::unlinkat(&bottom, "c", rustix::fs::AtFlags::REMOVEDIR).expect("rmdir at the bottom");
        if i % 10 == 0 {
            drop(Attached::new_fd(bottom.try_clone().unwrap(), &prog, ALLOW_MULTI));
        }
        if i % 25 == 0 {
            assert!(up(&mut d), "down while churning (round {i}):\n{}", d.logs());
        }
    }
    eprintln!("100 rounds of churn at the bottom in {:?}", churned.elapsed());
    // And it still sees what happens there.
    let resident = Resident::into(&bottom);
    let _a = Attached::new_fd(bottom.try_clone().unwrap(), &prog, ALLOW_MULTI);
    let misattached =
        r#"cgaudit_socket_lb_misattached{attach_type="connect4",pod_uid="0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d"}"#;
    let seen = wait_until(Duration::from_secs(20), || up(&mut d) && d.metric(misattached) == Some(1.0));
    let peak = limit.peak().unwrap_or(0) >> 20;
    eprintln!("the daemon's cgroup peaked at {peak} MiB; OOM kills: {}", limit.oom_kills());
    assert_eq!(limit.oom_kills(), 0, "OOM-killed under its 128 MiB limit:\n{}", d.logs());
    assert!(seen, "the misattachment at the bottom was not reported:\n{}", d.logs());
    assert!(up(&mut d));
    let _ = d.child.kill();
    let _ = d.child.wait();
    drop(resident);
    drop(_a);
    drop(chain);
}
