//! Cgroups created and removed while audits run (containers starting and
//! stopping): no aborted audit, no false finding. The syscall walk counts
//! the cgroups that vanish under it; the in-kernel pass holds cgroup_mutex,
//! so nothing vanishes mid-pass. `bpftool cgroup tree` aborts its whole walk
//! on such a race.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

    let stop = Arc::new(AtomicBool::new(false));
    let churn_root = t.mkdir("/kubepods/burstable");
    // Stopped and joined however this function ends (a failed assertion
    // included), before `t` removes the tree it would otherwise refill.
    let mut churner = Churner(
        stop.clone(),
        Some({
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // A pod with containers appears and disappears.
                    let pod = churn_root.join(format!("pod{:08x}-0000-4000-8000-000000000000", n % 64));
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
            })
        }),
    );

    let mut vanished = 0;
    let mut audits = 0;
    while more(audits, vanished) {
        let run = agent(&["audit", "--output", "json", "--walk", walk, "--cgroup-root", t.path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "audit {audits} under churn: {run:?}");
        let report = run.json();
        assert!(report["findings"].as_array().unwrap().is_empty(), "false finding under churn: {report:#}");
        assert_eq!(report["attachments"].as_array().unwrap().len(), 11, "{report:#}");
        assert!(report["errors"].as_array().unwrap().is_empty(), "vanishing is not an error: {report:#}");
        assert_eq!(report["walk"]["method"], walk.replace('-', "_"));
        vanished += report["cgroups_vanished"].as_u64().unwrap();
        audits += 1;
    }
    (audits, churner.finish(), vanished)
}

struct Churner(Arc<AtomicBool>, Option<std::thread::JoinHandle<u64>>);

impl Churner {
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
