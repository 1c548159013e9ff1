//! Cgroups created and removed while audits run (containers starting and
//! stopping): no aborted audit, no false finding. The syscall walk counts
//! the cgroups that vanish under it; the in-kernel pass holds cgroup_mutex,
//! so nothing vanishes mid-pass. `bpftool cgroup tree` aborts its whole walk
//! on such a race.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use integration_tests::*;

#[test]
fn syscall_walks_survive_cgroup_churn_and_count_what_vanished() {
    if !can_run(&[]) {
        return;
    }
    let (audits, cycles, vanished) =
        churn("syscalls", |audits, vanished| audits < 200 && (audits < 20 || vanished == 0));
    eprintln!("{audits} audits during {cycles} pod create/remove cycles; {vanished} cgroups vanished mid-walk");
    assert!(vanished > 0, "{audits} audits never raced a removal; the churn is too weak to test anything");
}

#[test]
fn in_kernel_walks_survive_cgroup_churn() {
    if !can_run(&[]) {
        return;
    }
    // NB: the in-kernel pass reports no vanished cgroups by construction
    // (it holds cgroup_mutex), so that count is not asserted here.
    let (audits, cycles, _) = churn("bpf-iter", |audits, _| audits < 40);
    eprintln!("{audits} in-kernel audits during {cycles} pod create/remove cycles");
    assert!(cycles > audits as u64, "the churn ran alongside: {cycles} cycles for {audits} audits");
}

/// The reading source's sweep counts the tree's cgroups, and a count that
/// differs from the picture's means events were missed: a full pass. But
/// under container churn the count moves while the sweep runs (its events
/// wait until the sweep is done), and before this was taken into account
/// nearly every sweep asked for a full pass (on 50,000 cgroups a fifth of a
/// core's worth). Pods come and go 100 times a second over 5 sweeps: no
/// full pass; once they stop, the picture is a fresh audit.
#[test]
fn cgroups_coming_and_going_while_the_daemon_sweeps_ask_for_no_full_pass() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("churn-sweeps");
    let progs = load_cilium_socket_lb();
    let _at_root: Vec<Attached> = progs.iter().map(|p| Attached::new(&t.path, p, ALLOW_MULTI)).collect();
    // Enough cgroups that a sweep takes a while.
    for i in 0..2_000 {
        t.mkdir(&format!("/system.slice/unit-{i}.scope"));
    }
    let d = sources::daemon(&t, "reading");
    // Paced: 100 pods a second, 5 cgroups made and removed each.
    let mut churner = Churner::start(t.mkdir("/kubepods/burstable"), Duration::from_millis(10));
    let sweeps = |d: &Daemon| d.metric("cgaudit_attachment_sweeps_total").unwrap_or(0.0);
    let before = sweeps(&d);
    let swept = wait_until(Duration::from_secs(60), || sweeps(&d) >= before + 5.0);
    let cycles = churner.finish();
    assert!(swept, "five sweeps never came:\n{}", d.logs());
    assert!(cycles >= 500, "the churn made only {cycles} pods");
    let lost = d.metric("cgaudit_bpf_events_lost_total");
    assert_eq!(lost, Some(0.0), "the kernel dropped events, the test proves nothing then");
    let unplaced = d.metric(r#"cgaudit_audits_total{trigger="unplaced"}"#);
    assert_eq!(unplaced, Some(0.0), "{cycles} pods came and went during 5 sweeps:\n{}", d.logs());
    sources::assert_picture_is_a_fresh_audit(&d, &t);
}

/// Audits with `--walk <walk>` while pods come and go, as long as `more`
/// says; returns (audits, churn cycles, cgroups vanished).
fn churn(walk: &str, more: impl Fn(u32, u64) -> bool) -> (u32, u64, u64) {
    let t = TestCgroup::new("churn");
    // A healthy node: socket LB at the (test) root, a device program on a
    // stable container, so a misread would show up as a finding.
    let _agent = CiliumAgent::new(&[("kube-proxy-replacement", "true")]);
    let progs = load_cilium_socket_lb();
    let _at_root: Vec<Attached> = progs.iter().map(|p| Attached::new(&t.path, p, ALLOW_MULTI)).collect();
    let stable = t.mkdir(&cgroupfs_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER));
    let dev = Prog::load("", "device");
    let _dev = Attached::new(&stable, &dev, ALLOW_MULTI);

    // Stopped and joined however this function ends (a failed assertion
    // included), before `t` removes the tree it would otherwise refill.
    let mut churner = Churner::start(t.mkdir("/kubepods/burstable"), Duration::ZERO);

    let mut vanished = 0;
    let mut audits = 0;
    while more(audits, vanished) {
        let run = agent(&["audit", "--output", "json", "--walk", walk, "--cgroup-root", t.path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "audit {audits} under churn: {run:?}");
        let report = run.json();
        assert!(report["findings"].as_array().unwrap().is_empty(), "false finding under churn: {report:#}");
        assert_eq!(report["attachments"].as_array().unwrap().len(), 11, "{report:#}");
        // (What PID 1 keeps closed on a machine like this one is said too.)
        let about_cgroups = report["errors"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| !e["path"].as_str().is_some_and(|p| p.starts_with("/proc/1/")));
        assert_eq!(about_cgroups.count(), 0, "vanishing is not an error: {report:#}");
        assert_eq!(report["walk"]["method"], walk.replace('-', "_"));
        vanished += report["cgroups_vanished"].as_u64().unwrap();
        audits += 1;
    }
    (audits, churner.finish(), vanished)
}

struct Churner(Arc<AtomicBool>, Option<std::thread::JoinHandle<u64>>);

impl Churner {
    /// A pod with containers appears and disappears below `root`, again
    /// and again: one every `every` (zero: as fast as it can).
    fn start(root: std::path::PathBuf, every: Duration) -> Churner {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let due = started + every * n as u32;
                if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(wait);
                }
                let pod = root.join(format!("pod{:08x}-0000-4000-8000-000000000000", n % 64));
                let dirs: Vec<_> = (0..4).map(|c| pod.join(format!("{:064x}", c))).collect();
                for d in &dirs {
                    let _ = std::fs::create_dir_all(d);
                }
                for d in &dirs {
                    let _ = std::fs::remove_dir(d);
                }
                let _ = std::fs::remove_dir(&pod);
                n += 1;
            }
            n
        });
        Churner(stop, Some(thread))
    }

    /// Stops the thread; the number of cycles it ran.
    fn finish(&mut self) -> u64 {
        self.0.store(true, Ordering::Relaxed);
        self.1.take().map_or(0, |h| h.join().unwrap())
    }
}

impl Drop for Churner {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(h) = self.1.take() {
            let _ = h.join();
        }
    }
}
