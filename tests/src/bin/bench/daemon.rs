//! The daemon's figures: detection latency, and its cost on nodes of
//! 10,000 and 50,000 cgroups, idle and while containers start.

use super::*;

pub(super) const MISATTACHED: &str = r#"cgaudit_socket_lb_misattached{attach_type="connect4"}"#;

/// Attaches and detaches `n` times; returns the sorted latencies until the
/// metric showed each attachment. Each attach waits a random part of
/// `phase` first, so it does not always land right after an audit (the
/// previous detach was just seen), which would bias polling to a full interval.
pub(super) fn latencies(d: &Daemon, t: &TestCgroup, n: usize, phase: Duration) -> Vec<Duration> {
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let mut out = Vec::with_capacity(n);
    let mut seed = std::process::id() as u64 | 1;
    for i in 0..n {
        // xorshift: enough to spread the phase, no dependency needed.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(phase.mul_f64((seed % 1000) as f64 / 1000.0));
        let start = Instant::now();
        let a = Attached::new(&ctr, &prog, ALLOW_MULTI);
        let seen = poll_until(Duration::from_secs(30), Duration::from_millis(2), || {
            http_get(d.addr, "/metrics").is_some_and(|(_, m)| metric_value(&m, MISATTACHED) == Some(1.0))
        });
        assert!(seen, "attach {i} never showed:\n{}", d.logs());
        out.push(start.elapsed());
        drop(a);
        let cleared = poll_until(Duration::from_secs(30), Duration::from_millis(2), || {
            http_get(d.addr, "/metrics").is_some_and(|(_, m)| metric_value(&m, MISATTACHED).is_none())
        });
        assert!(cleared, "detach {i} never cleared");
    }
    out.sort();
    out
}

/// The daemon's CPU (% of one core) and peak RSS (MiB) over `window`,
/// with its full passes and incremental updates counted meanwhile.
pub(super) struct Cost {
    pub(super) cpu_percent: f64,
    pub(super) peak_mib: f64,
    pub(super) rss_mib: f64,
    pub(super) full_passes: f64,
    pub(super) incremental: f64,
    pub(super) lost: f64,
    /// The worker's busy time by work, as % of one core over the window.
    pub(super) busy: Vec<(&'static str, f64)>,
}

pub(super) const WORK: [&str; 5] = ["full_pass", "judge", "sweep", "reread", "event"];

pub(super) fn busy(d: &Daemon) -> Vec<f64> {
    let m = d.get("/metrics").1;
    WORK.iter()
        .map(|w| metric_value(&m, &format!(r#"cgaudit_worker_busy_seconds_total{{work="{w}"}}"#)).unwrap_or(0.0))
        .collect()
}

pub(super) fn counters(d: &Daemon) -> (f64, f64, f64) {
    let m = d.get("/metrics").1;
    let full: f64 = ["startup", "interval", "events_lost", "unplaced"]
        .iter()
        .filter_map(|t| metric_value(&m, &format!(r#"cgaudit_audits_total{{trigger="{t}"}}"#)))
        .sum();
    let inc = metric_value(&m, "cgaudit_incremental_updates_total").unwrap_or(0.0);
    let lost = metric_value(&m, "cgaudit_bpf_events_lost_total").unwrap_or(0.0);
    (full, inc, lost)
}

pub(super) fn cost_over(d: &Daemon, window: Duration) -> Cost {
    let pid = d.child.id();
    let hz = 100.0; // USER_HZ on Linux
    let (f0, i0, l0) = counters(d);
    let b0 = busy(d);
    let (t0, c0) = (Instant::now(), cpu_ticks(pid));
    std::thread::sleep(window);
    let (secs, ticks) = (t0.elapsed().as_secs_f64(), cpu_ticks(pid) - c0);
    let (f1, i1, l1) = counters(d);
    let b1 = busy(d);
    Cost {
        cpu_percent: ticks as f64 / hz / secs * 100.0,
        peak_mib: proc_field(pid, "status", "VmHWM:").unwrap_or(0) as f64 / 1024.0,
        rss_mib: proc_field(pid, "status", "VmRSS:").unwrap_or(0) as f64 / 1024.0,
        full_passes: f1 - f0,
        incremental: i1 - i0,
        lost: l1 - l0,
        busy: WORK.iter().zip(b0.iter().zip(&b1)).map(|(w, (a, b))| (*w, (b - a) / secs * 100.0)).collect(),
    }
}

/// Container starts as runc makes them, `per_second`: a cgroup under
/// `parent` with an unnamed device program attached (BPF_PROG_ATTACH,
/// ALLOW_MULTI), removed `life` later by rmdir (its program goes with it),
/// as runc leaves it.
pub(super) struct Churn {
    pub(super) stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(super) thread: Option<std::thread::JoinHandle<u64>>,
}

impl Churn {
    pub(super) fn start(parent: std::path::PathBuf, per_second: f64, life: Duration) -> Churn {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let dev = Prog::load("", "device");
            let mut live: std::collections::VecDeque<(std::path::PathBuf, Instant)> = Default::default();
            let start = Instant::now();
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let due = start + Duration::from_secs_f64(n as f64 / per_second);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait.min(Duration::from_millis(50)));
                    continue;
                }
                let dir = parent.join(format!("cri-containerd-{n:064x}.scope"));
                std::fs::create_dir_all(&dir).unwrap();
                let fd = open_dir(&dir);
                agent::bpf::sys::prog_attach(
                    std::os::fd::AsFd::as_fd(&fd),
                    std::os::fd::AsFd::as_fd(&dev.fd),
                    dev.hook.kernel_value(),
                    ALLOW_MULTI,
                )
                .unwrap();
                live.push_back((dir, Instant::now()));
                while live.front().is_some_and(|(_, t)| t.elapsed() >= life) {
                    let (dir, _) = live.pop_front().unwrap();
                    let _ = std::fs::remove_dir(&dir);
                }
                n += 1;
            }
            for (dir, _) in live {
                let _ = std::fs::remove_dir(&dir);
            }
            n
        });
        Churn { stop, thread: Some(thread) }
    }

    pub(super) fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map(|t| t.join().unwrap()).unwrap_or(0)
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(super) fn print_cost(label: &str, c: &Cost, extra: &str) {
    println!(
        "{label:<44} {:>7.3}% {:>9.1} {:>9.1} {:>6} {:>8} {:>5} {extra}",
        c.cpu_percent, c.peak_mib, c.rss_mib, c.full_passes, c.incremental, c.lost
    );
    let parts: Vec<String> = c.busy.iter().map(|(w, p)| format!("{w} {p:.2}%")).collect();
    println!("{:<44}  (worker busy: {})", "", parts.join(", "));
}

pub(super) fn daemon_bench(attaches: usize, window: Duration, sizes: &[usize]) {
    println!("== agent run: detection latency (bpf() attach -> /metrics), {attaches} attaches each ==");
    println!("{:<34} {:>10} {:>10} {:>10}", "mode", "p50", "p99", "max");
    let modes = [
        ("--events fexit", vec!["--events", "fexit", "--interval", "1h"], Duration::ZERO),
        ("--events kprobe", vec!["--events", "kprobe", "--interval", "1h"], Duration::ZERO),
        ("--events reading", vec!["--events", "reading", "--interval", "1h"], Duration::from_secs(8)),
        ("--events syscalls", vec!["--events", "syscalls", "--interval", "1h"], Duration::ZERO),
        ("polling only (--interval 1s)", vec!["--events", "none", "--interval", "1s"], Duration::from_secs(1)),
    ];
    for (mode, args, phase) in modes {
        let t = TestCgroup::new("bench-latency");
        let mut all = vec!["--cgroup-root", t.path.to_str().unwrap()];
        all.extend(args);
        let Ok(d) = Daemon::try_start(&all) else {
            println!("{mode:<34} refused by this kernel");
            continue;
        };
        // The reading source's latency is the sweep's: fewer, slower rounds.
        let n = if mode.contains("reading") { attaches.min(10) } else { attaches };
        let l = latencies(&d, &t, n, phase);
        println!(
            "{:<34} {:>10.1?} {:>10.1?} {:>10.1?}",
            mode,
            percentile(&l, 0.5),
            percentile(&l, 0.99),
            l.last().unwrap()
        );
    }
    println!("(polling latency is uniform over the interval: with the default 30 s, expect p50 ~15 s, p99 ~30 s)");

    println!(
        "\n== agent run --interval 30s (--events auto): cost over {window:?} (CPU of one core from /proc/PID/stat) =="
    );
    println!(
        "{:<44} {:>8} {:>9} {:>9} {:>6} {:>8} {:>5}",
        "scenario", "CPU", "peak MiB", "RSS MiB", "passes", "incr.", "lost"
    );
    for &n in sizes {
        let rates: &[f64] = if n <= 10_000 { &[5.0, 20.0] } else { &[5.0] };
        node_cost(n, window, rates, n <= 10_000);
    }
    println!(
        "(passes: full passes over the tree in the window (one per ~30 s is the interval); incr.: changes applied from \
         kernel events; lost: events the kernel dropped)"
    );

    println!(
        "\n== agent run --interval 1h: an unprivileged process (uid 65534) looping failing bpf(BPF_LINK_DETACH), 1,000/s =="
    );
    let t = TestCgroup::new("bench-flood");
    // An hour between passes: any pass in the window is one the flood caused.
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200));
    std::thread::sleep(Duration::from_secs(1));
    let idle = cost_over(&d, window.min(Duration::from_secs(20)));
    let lines_before = d.logs().lines().count();
    let fixture = agent_bin().with_file_name("fixture");
    let secs = window.min(Duration::from_secs(20)).as_secs().to_string();
    let flood = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&fixture)
        .args(["bpf-flood", &secs, "1000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("flood");
    let during = cost_over(&d, window.min(Duration::from_secs(20)));
    let out = flood.wait_with_output().expect("flood");
    let calls = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    print_cost("1 cgroup, idle", &idle, "");
    print_cost(
        "1 cgroup, during the flood",
        &during,
        &format!("{calls} failing calls, {} log lines", d.logs().lines().count() - lines_before),
    );
}

/// The daemon's cost on a node of `n` cgroups (a device program on one
/// container in 50, as in the issue's node): idle, then under each rate of
/// container starts, with the detection latency during 5 starts/s if asked.
pub(super) fn node_cost(n: usize, window: Duration, rates: &[f64], latency: bool) {
    let h = Hierarchy::build(n, 50);
    let root = h.t.path.to_str().unwrap().to_owned();
    let d = Daemon::start(&["--cgroup-root", &root, "--interval", "30s"]);
    assert!(wait_until(Duration::from_secs(60), || d.get("/readyz").0 == 200), "{}", d.logs());
    let source = ["fexit", "kprobe", "reading", "syscalls", "none"]
        .into_iter()
        .find(|s| d.metric(&format!(r#"cgaudit_event_source{{source="{s}"}}"#)) == Some(1.0))
        .unwrap_or("?");
    println!("(event source on this machine: {source}; daemon pid {})", d.child.id());
    // Start-up is paid on every node at every restart: the CPU to turn
    // ready, and in the 3 s after (also letting that work settle).
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64;
    let at_ready = cpu_ticks(d.child.id());
    std::thread::sleep(Duration::from_secs(3));
    let after = cpu_ticks(d.child.id()).saturating_sub(at_ready);
    println!(
        "{:<44} {:.2} s of CPU until ready, {:.2} s in the 3 s after",
        format!("{} cgroups, start-up", h.cgroups),
        at_ready as f64 / hz,
        after as f64 / hz
    );
    let c = cost_over(&d, window);
    print_cost(&format!("{} cgroups, idle", h.cgroups), &c, "");
    for &rate in rates {
        let pod = h.t.path.join(format!(
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podc{:07}_0000_4000_8000_000000000000.slice",
            rate as u32
        ));
        let churn = Churn::start(pod, rate, Duration::from_secs(5));
        std::thread::sleep(Duration::from_secs(6)); // steady state: starts and removals
        let c = cost_over(&d, window);
        let extra = if rate == 5.0 && latency {
            // Detection latency while the churn goes on.
            let l = latencies(&d, &h.t, 20, Duration::from_millis(200));
            format!("misattachment -> /metrics p50 {:.1?} p99 {:.1?}", percentile(&l, 0.5), percentile(&l, 0.99))
        } else {
            String::new()
        };
        let starts = churn.stop();
        print_cost(&format!("{} cgroups, {rate} container starts/s", h.cgroups), &c, &extra);
        eprintln!("({starts} container starts made)");
    }
}
