//! `cargo xtask bench`: figures, not pass/fail tests.
//!
//! audit: `agent audit` against `bpftool cgroup tree` on synthetic kubepods
//! hierarchies of 1,000, 10,000 and 50,000 cgroups, side by side in one run:
//! same attachment set, median and spread of wall time, bpf() calls per
//! cgroup, peak RSS.
//!
//! daemon: detection latency from the bpf() attach call to the metric
//! changing on /metrics (p50/p99 over N attaches, with event tracing and with
//! polling only); CPU, peak RSS, full passes and incremental updates of
//! `agent run` on nodes of 10,000 and 50,000 cgroups, idle and while
//! containers start (5 and 20 a second, each with a runc-like device
//! program, removed 5 s later), with the detection latency during churn;
//! and the same while an unprivileged process loops failing bpf() calls.
//! Each cost row also prints the worker's busy time by work
//! (`cgaudit_worker_busy_seconds_total`). `--churn N --rounds R`: only the
//! cost on an N-cgroup node, idle and under 5 starts/s, R times.
//!
//! tax: what the daemon costs everyone else: another process's `getppid()`
//! loop and `dd bs=64` with the daemon off, and on with each event source
//! this machine allows, interleaved rounds, medians side by side.

use std::time::{Duration, Instant};

use integration_tests::*;

const MISATTACHED: &str = r#"cgaudit_socket_lb_misattached{attach_type="connect4"}"#;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Attaches and detaches `n` times; returns the sorted latencies until the
/// metric showed each attachment. Each attach waits a random part of
/// `phase` first, so it does not always land right after an audit (the
/// previous detach was just seen), which would bias polling to a full interval.
fn latencies(d: &Daemon, t: &TestCgroup, n: usize, phase: Duration) -> Vec<Duration> {
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

fn proc_field(pid: u32, file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// utime + stime in clock ticks, from /proc/<pid>/stat.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

/// The daemon's CPU (% of one core) and peak RSS (MiB) over `window`,
/// with its full passes and incremental updates counted meanwhile.
struct Cost {
    cpu_percent: f64,
    peak_mib: f64,
    rss_mib: f64,
    full_passes: f64,
    incremental: f64,
    lost: f64,
    /// The worker's busy time by work, as % of one core over the window.
    busy: Vec<(&'static str, f64)>,
}

const WORK: [&str; 5] = ["full_pass", "judge", "sweep", "reread", "event"];

fn busy(d: &Daemon) -> Vec<f64> {
    let m = d.get("/metrics").1;
    WORK.iter()
        .map(|w| metric_value(&m, &format!(r#"cgaudit_worker_busy_seconds_total{{work="{w}"}}"#)).unwrap_or(0.0))
        .collect()
}

fn counters(d: &Daemon) -> (f64, f64, f64) {
    let m = d.get("/metrics").1;
    let full: f64 = ["startup", "interval", "events_lost", "unplaced"]
        .iter()
        .filter_map(|t| metric_value(&m, &format!(r#"cgaudit_audits_total{{trigger="{t}"}}"#)))
        .sum();
    let inc = metric_value(&m, "cgaudit_incremental_updates_total").unwrap_or(0.0);
    let lost = metric_value(&m, "cgaudit_bpf_events_lost_total").unwrap_or(0.0);
    (full, inc, lost)
}

fn cost_over(d: &Daemon, window: Duration) -> Cost {
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
struct Churn {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Churn {
    fn start(parent: std::path::PathBuf, per_second: f64, life: Duration) -> Churn {
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

    fn stop(mut self) -> u64 {
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

fn print_cost(label: &str, c: &Cost, extra: &str) {
    println!(
        "{label:<44} {:>7.3}% {:>9.1} {:>9.1} {:>6} {:>8} {:>5} {extra}",
        c.cpu_percent, c.peak_mib, c.rss_mib, c.full_passes, c.incremental, c.lost
    );
    let parts: Vec<String> = c.busy.iter().map(|(w, p)| format!("{w} {p:.2}%")).collect();
    println!("{:<44}  (worker busy: {})", "", parts.join(", "));
}

fn daemon_bench(attaches: usize, window: Duration, sizes: &[usize]) {
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
fn node_cost(n: usize, window: Duration, rates: &[f64], latency: bool) {
    let h = Hierarchy::build(n, 50);
    let root = h.t.path.to_str().unwrap().to_owned();
    let d = Daemon::start(&["--cgroup-root", &root, "--interval", "30s"]);
    assert!(wait_until(Duration::from_secs(60), || d.get("/readyz").0 == 200), "{}", d.logs());
    let source = ["fexit", "kprobe", "reading", "syscalls", "none"]
        .into_iter()
        .find(|s| d.metric(&format!(r#"cgaudit_event_source{{source="{s}"}}"#)) == Some(1.0))
        .unwrap_or("?");
    println!("(event source on this machine: {source}; daemon pid {})", d.child.id());
    // Let the startup pass's transient work settle.
    std::thread::sleep(Duration::from_secs(2));
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

/// The daemon with `--events <events>` on `t`, if this machine runs that
/// source (one that cannot run stops the daemon at start).
fn daemon_with(t: &TestCgroup, events: &str) -> Option<Daemon> {
    Daemon::try_start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "30s", "--events", events]).ok()
}

/// One round of the two workloads: ns per getppid(), seconds of dd.
fn workloads(fixture: &std::path::Path) -> (f64, f64) {
    let out = std::process::Command::new(fixture).args(["getppid", "5000000"]).output().expect("fixture getppid");
    let ns: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("ns per call");
    let start = Instant::now();
    let dd = std::process::Command::new("dd")
        .args(["if=/dev/zero", "of=/dev/null", "bs=64", "count=1000000"])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("dd");
    assert!(dd.success());
    (ns, start.elapsed().as_secs_f64())
}

fn tax_bench(rounds: usize) {
    println!("== what the daemon costs other processes: their syscalls with it off and on, 1-cgroup tree ==");
    let t = TestCgroup::new("bench-tax");
    let fixture = agent_bin().with_file_name("fixture");
    let mut modes: Vec<(&str, Option<&str>)> = vec![("daemon off", None)];
    for events in ["fexit", "kprobe", "reading", "syscalls"] {
        match daemon_with(&t, events) {
            Some(_) => modes.push((events, Some(events))),
            None => println!("(--events {events}: refused by this kernel, not measured)"),
        }
    }
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut dd: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..rounds {
        for (i, (_, events)) in modes.iter().enumerate() {
            let d = events.map(|e| daemon_with(&t, e).expect("the source ran a moment ago"));
            let (n, s) = workloads(&fixture);
            ns[i].push(n);
            dd[i].push(s);
            drop(d);
        }
    }
    let ns: Vec<f64> = ns.iter_mut().map(|v| median(v)).collect();
    let dd: Vec<f64> = dd.iter_mut().map(|v| median(v)).collect();
    print!("{:<36}", "workload of another process");
    for (label, events) in &modes {
        print!(" {:>18}", if events.is_some() { format!("--events {label}") } else { label.to_string() });
    }
    println!();
    let row = |name: &str, v: &[f64], unit: &str| {
        print!("{name:<36}");
        for (i, x) in v.iter().enumerate() {
            let cell = if i == 0 {
                format!("{x:.2}{unit}")
            } else {
                format!("{x:.2}{unit} {:+.0}%", (x / v[0] - 1.0) * 100.0)
            };
            print!(" {cell:>18}");
        }
        println!();
    };
    row("getppid() loop, ns/call", &ns, "");
    row("dd bs=64 count=1000000, s", &dd, "");
    println!("(median of {rounds} rounds, modes interleaved; each round starts the daemon afresh)");
}

/// A synthetic node: `n` cgroups in kubepods layouts (systemd slices, pods
/// of 1-4 containers), with Cilium's socket-LB programs at the top, an
/// unnamed device program per container (as runc/crun attach), systemd-like
/// programs on a system slice, and some bpf_links. Everything it attached is
/// detached on drop, then the tree is removed.
struct Hierarchy {
    attached: Vec<(std::path::PathBuf, u32)>,
    _links: Vec<Link>,
    progs: Vec<Prog>,
    dev: Prog,
    t: TestCgroup,
    cgroups: usize,
}

impl Hierarchy {
    /// `device_every`: a device program on every Nth container (1: all, as
    /// on a real node; larger: a sparse tree that measures the walk itself).
    fn build(n: usize, device_every: usize) -> Hierarchy {
        let t = TestCgroup::new("bench-audit");
        let dev = Prog::load("", "device");
        let progs = load_cilium_socket_lb();
        let mut attached = Vec::new();
        let mut links = Vec::new();
        let mut cgroups = 1;
        let svc = t.mkdir("/system.slice/containerd.service");
        cgroups += 2;
        let fw = Prog::load("sd_fw_ingress", "ingress");
        let bind = Prog::load("sd_bind4", "bind4");
        links.push(Link::new(&svc, &fw));
        links.push(Link::new(&svc, &bind));
        for p in &progs {
            let cg = open_dir(&t.path);
            agent::bpf::sys::prog_attach(
                std::os::fd::AsFd::as_fd(&cg),
                std::os::fd::AsFd::as_fd(&p.fd),
                p.hook.kernel_value(),
                ALLOW_MULTI,
            )
            .unwrap();
            attached.push((t.path.clone(), p.id));
        }
        t.mkdir("/kubepods.slice/kubepods-burstable.slice");
        t.mkdir("/kubepods.slice/kubepods-besteffort.slice");
        cgroups += 3;
        let mut pod = 0usize;
        while cgroups < n {
            let qos = if pod.is_multiple_of(3) { "besteffort" } else { "burstable" };
            let base = format!(
                "/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{pod:08x}_0000_4000_8000_000000000000.slice"
            );
            t.mkdir(&base);
            cgroups += 1;
            for c in 0..(1 + pod % 4).min(n - cgroups) {
                let id = pod * 4 + c;
                let ctr = t.mkdir(&format!("{base}/cri-containerd-{id:064x}.scope"));
                if id.is_multiple_of(device_every) {
                    let fd = open_dir(&ctr);
                    let (cg, prog) = (std::os::fd::AsFd::as_fd(&fd), std::os::fd::AsFd::as_fd(&dev.fd));
                    agent::bpf::sys::prog_attach(cg, prog, dev.hook.kernel_value(), ALLOW_MULTI).unwrap();
                    attached.push((ctr, dev.id));
                }
                cgroups += 1;
            }
            pod += 1;
        }
        let mut progs = progs;
        progs.push(fw);
        progs.push(bind);
        Hierarchy { attached, _links: links, progs, dev, t, cgroups }
    }
}

impl Drop for Hierarchy {
    fn drop(&mut self) {
        for (path, id) in &self.attached {
            let prog = if *id == self.dev.id { &self.dev } else { self.progs.iter().find(|p| p.id == *id).unwrap() };
            if let Ok(f) = std::fs::File::open(path) {
                let _ = agent::bpf::sys::prog_detach(
                    std::os::fd::AsFd::as_fd(&f),
                    std::os::fd::AsFd::as_fd(&prog.fd),
                    prog.hook.kernel_value(),
                );
            }
        }
    }
}

/// (cgroup path, attach type, program id) from either tool.
type AttachmentSet = std::collections::BTreeSet<(String, String, u64)>;

fn agent_set(json: &str, root: &std::path::Path) -> AttachmentSet {
    let v: serde_json::Value = serde_json::from_str(json).expect("agent JSON");
    v["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let rel = a["cgroup"].as_str().unwrap();
            let full = if rel == "/" { root.display().to_string() } else { format!("{}{rel}", root.display()) };
            (full, a["attach_type"].as_str().unwrap().to_owned(), a["prog_id"].as_u64().unwrap())
        })
        .collect()
}

/// Parses `bpftool cgroup tree` text: a path line, then indented
/// `ID AttachType [AttachFlags] [Name]` lines. (Its JSON mode is not used:
/// at 1,000 cgroups it takes seconds and gigabytes, at 10,000 it breaks.)
fn bpftool_set(text: &str) -> AttachmentSet {
    let mut set = AttachmentSet::new();
    let mut path = String::new();
    for line in text.lines().skip(2) {
        if line.starts_with('/') {
            path = line.trim_end().to_owned();
        } else if let [id, t, ..] = line.split_whitespace().collect::<Vec<_>>()[..] {
            let t = agent::bpf::AttachType::from_any_name(t).unwrap_or_else(|| panic!("attach type {t}"));
            set.insert((path.clone(), t.name().to_owned(), id.parse().unwrap()));
        }
    }
    set
}

/// Runs a command under GNU time: (wall seconds, peak RSS KiB, stdout).
fn timed(cmd: &[&str]) -> (f64, u64, String) {
    // Wall time measured here (GNU time's %e has 10 ms resolution); peak
    // RSS from GNU time's %M. /usr/bin/time's own start-up is in both.
    let start = std::time::Instant::now();
    let out =
        std::process::Command::new("/usr/bin/time").args(["-f", "%M", "--"]).args(cmd).output().expect("/usr/bin/time");
    let wall = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    let rss: u64 = last.trim().parse().unwrap_or(0);
    (wall, rss, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// bpf() syscalls a command makes, from `strace -c`.
fn bpf_calls(cmd: &[&str]) -> u64 {
    let out = std::process::Command::new("strace")
        .args(["-f", "-c", "-e", "trace=bpf", "-o", "/dev/stderr", "--"])
        .args(cmd)
        .stdout(std::process::Stdio::null())
        .output()
        .expect("strace");
    let text = String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find(|l| l.trim_end().ends_with(" bpf"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(0)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median, min and max.
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    let (lo, hi) = (v.iter().cloned().fold(f64::MAX, f64::min), v.iter().cloned().fold(0.0, f64::max));
    (median(v), lo, hi)
}

/// The one-shot commands compared on a tree rooted at `root`: the agent
/// with each walk, and the reference tool.
fn one_shots<'a>(agent: &'a str, root: &'a str) -> [(&'static str, Vec<&'a str>); 3] {
    [
        ("agent audit", vec![agent, "audit", "--output", "json", "--cgroup-root", root]),
        (
            "agent audit --walk syscalls",
            vec![agent, "audit", "--output", "json", "--walk", "syscalls", "--cgroup-root", root],
        ),
        ("bpftool cgroup tree", vec!["bpftool", "cgroup", "tree", root]),
    ]
}

/// The one-shot's fixed cost: a tree of one cgroup, where the walk costs
/// nothing and what remains is loading, BTF and the process itself.
fn fixed_cost_bench(runs: usize) {
    println!("== agent audit on a 1-cgroup tree (the fixed cost), {runs} runs each after a warm-up ==");
    let t = TestCgroup::new("bench-fixed");
    let root = t.path.to_str().unwrap().to_owned();
    let agent = agent_bin();
    let cmds = one_shots(agent.to_str().unwrap(), &root);
    println!("{:<30} {:>22} {:>8}", "", "wall p50 (min-max)", "RSS MiB");
    for (label, cmd) in &cmds {
        let _ = timed(cmd);
        let mut walls = Vec::new();
        let mut rss = 0;
        for _ in 0..runs {
            let (wall, r, _) = timed(cmd);
            walls.push(wall * 1000.0);
            rss = rss.max(r);
        }
        let (p50, lo, hi) = spread(&mut walls);
        println!("{label:<30} {:>22} {:>8.1}", format!("{p50:.1} ms ({lo:.1}-{hi:.1})"), rss as f64 / 1024.0);
    }
}

/// One row per size; `bpftool_max`: the largest tree bpftool is run on
/// (it keeps a copy of vmlinux BTF, ~5 MB, per attached program). The agent
/// runs with its default walk (one in-kernel pass) and with
/// `--walk syscalls`, so the table shows what each bought.
fn audit_bench(title: &str, sizes: &[usize], device_every: usize, bpftool_max: usize, runs: usize) {
    println!("== {title}: agent audit vs bpftool cgroup tree, {runs} runs each after a warm-up, alternating ==");
    println!(
        "{:>7} {:>6} | {:>20} {:>6} {:>7} | {:>20} {:>6} {:>7} | {:>20} {:>6} {:>7} | {:>7} {:>7}",
        "cgroups",
        "attach",
        "agent p50 (min-max)",
        "bpf/cg",
        "RSS MiB",
        "--walk syscalls",
        "bpf/cg",
        "RSS MiB",
        "bpftool",
        "bpf/cg",
        "RSS MiB",
        "ratio",
        "ratio sc"
    );
    let agent = agent_bin();
    for &n in sizes {
        let h = Hierarchy::build(n, device_every);
        let root = h.t.path.to_str().unwrap().to_owned();
        let a_cmd = [agent.to_str().unwrap(), "audit", "--output", "json", "--cgroup-root", &root];
        let s_cmd =
            [agent.to_str().unwrap(), "audit", "--output", "json", "--walk", "syscalls", "--cgroup-root", &root];
        let b_cmd = ["bpftool", "cgroup", "tree", &root];
        let with_bpftool = n <= bpftool_max;
        // Warm-up, and the answers compared.
        let (_, _, a_out) = timed(&a_cmd);
        let (_, _, s_out) = timed(&s_cmd);
        let a_set = agent_set(&a_out, &h.t.path);
        assert!(a_set == agent_set(&s_out, &h.t.path), "the agent's two walks disagree at {n} cgroups");
        let method = serde_json::from_str::<serde_json::Value>(&a_out).ok().map(|r| r["walk"]["method"].clone());
        assert_eq!(method, Some("bpf_iter".into()), "the default walk fell back at {n}: {a_out:.400}");
        if with_bpftool {
            let (_, _, b_out) = timed(&b_cmd);
            let b_set = bpftool_set(&b_out);
            assert_eq!(a_set.len(), b_set.len(), "different number of attachments at {n}");
            assert!(a_set == b_set, "different attachment sets at {n} cgroups");
        }
        let (mut a_wall, mut s_wall, mut b_wall) = (Vec::new(), Vec::new(), Vec::new());
        let (mut a_rss, mut s_rss, mut b_rss) = (0, 0, 0);
        for _ in 0..runs {
            let (w, r, _) = timed(&a_cmd);
            a_wall.push(w);
            a_rss = a_rss.max(r);
            let (w, r, _) = timed(&s_cmd);
            s_wall.push(w);
            s_rss = s_rss.max(r);
            if with_bpftool {
                let (w, r, _) = timed(&b_cmd);
                b_wall.push(w);
                b_rss = b_rss.max(r);
            }
        }
        let per_cg = |cmd: &[&str]| bpf_calls(cmd) as f64 / h.cgroups as f64;
        let (a_med, a_min, a_max) = spread(&mut a_wall);
        let (s_med, s_min, s_max) = spread(&mut s_wall);
        let mib = |kb: u64| kb as f64 / 1024.0;
        let bpftool_cols = if with_bpftool {
            let (b_med, b_min, b_max) = spread(&mut b_wall);
            format!(
                "{:>20} {:>6.1} {:>7.1} | {:>6.1}x",
                format!("{b_med:.3}s ({b_min:.2}-{b_max:.2})"),
                per_cg(&b_cmd),
                mib(b_rss),
                b_med / a_med
            )
        } else {
            format!("{:>36} | {:>7}", format!("not run: would need ~{} GiB", a_set.len() * 5 / 1024 + 1), "")
        };
        println!(
            "{:>7} {:>6} | {:>20} {:>6.2} {:>7.1} | {:>20} {:>6.1} {:>7.1} | {} {:>6.1}x",
            h.cgroups,
            a_set.len(),
            format!("{a_med:.3}s ({a_min:.2}-{a_max:.2})"),
            per_cg(&a_cmd),
            mib(a_rss),
            format!("{s_med:.3}s ({s_min:.2}-{s_max:.2})"),
            per_cg(&s_cmd),
            mib(s_rss),
            bpftool_cols,
            s_med / a_med
        );
    }
    println!(
        "(wall time of the whole process; ratio = bpftool / agent, ratio sc = --walk syscalls / agent; \
         identical (cgroup, attach type, program) sets checked at each size)"
    );
}

/// Issue 28, H1: the audit of a chain 4,000 deep of 255-byte names in a
/// pod's container (a process and a connect4 program at the bottom), next
/// to the wide trees above: what a tracked cgroup costs at depth.
fn deep_chain_bench(runs: usize) {
    println!(
        "== a 4,000-deep chain of 255-byte names in a pod (a process and a program at the bottom), {runs} runs =="
    );
    let node = DeepPodChain::make("bench-deep", 4000);
    let prog = &node.prog;
    let root = node.t.path.to_str().unwrap().to_owned();
    let agent = agent_bin();
    let cmds = one_shots(agent.to_str().unwrap(), &root);
    println!("{:<30} {:>22} {:>8}  found the program", "", "wall p50 (min-max)", "RSS MiB");
    for (label, cmd) in &cmds {
        let (_, _, out) = timed(cmd);
        let found = if cmd[0] == "bpftool" {
            out.contains("cil_sock4_connect") || out.contains(&prog.id.to_string())
        } else {
            serde_json::from_str::<serde_json::Value>(&out)
                .ok()
                .and_then(|r| Some(r["attachments"].as_array()?.iter().any(|x| x["prog_id"] == prog.id)))
                .unwrap_or(false)
        };
        let mut walls = Vec::new();
        let mut rss = 0;
        for _ in 0..runs {
            let (wall, r, _) = timed(cmd);
            walls.push(wall);
            rss = rss.max(r);
        }
        let (p50, lo, hi) = spread(&mut walls);
        println!(
            "{label:<30} {:>22} {:>8.1}  {}",
            format!("{p50:.3}s ({lo:.2}-{hi:.2})"),
            rss as f64 / 1024.0,
            if found { "yes" } else { "no" }
        );
    }
}

fn main() {
    assert!(can_run(&["bpftool", "strace"]), "the benchmark needs root, bpftool and strace");
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = |what: &str| {
        !args.iter().any(|a| a == "--audit" || a == "--daemon" || a == "--tax") || args.iter().any(|a| a == what)
    };
    // --probe N: build the N-cgroup tree and show where bpftool's time goes.
    if let Some(n) = args.iter().position(|a| a == "--probe").and_then(|i| args.get(i + 1)?.parse::<usize>().ok()) {
        let every = if args.iter().any(|a| a == "--sparse") { 100 } else { 1 };
        let h = Hierarchy::build(n, every);
        let root = h.t.path.to_str().unwrap().to_owned();
        let agent = agent_bin();
        let a = agent.to_str().unwrap();
        let walks = [
            vec![a, "audit", "--output", "json", "--cgroup-root", &root],
            vec![a, "audit", "--output", "json", "--walk", "syscalls", "--cgroup-root", &root],
        ];
        for cmd in &walks {
            for _ in 0..3 {
                let (wall, rss, out) = timed(cmd);
                let walk =
                    serde_json::from_str::<serde_json::Value>(&out).map(|r| r["walk"].to_string()).unwrap_or_default();
                let label = if cmd.len() > 6 { cmd[4..cmd.len() - 2].join(" ") } else { "default walk".into() };
                eprintln!("agent audit, {label}: {wall:.3} s, peak RSS {:.1} MiB, walk {walk}", rss as f64 / 1024.0);
            }
        }
        let bpftool = vec!["bpftool", "cgroup", "tree", &root];
        // bpftool keeps ~5 MB per attached program: only on sparse trees.
        let traced = if every > 1 || n <= 1_000 { vec![bpftool, walks[0].clone()] } else { vec![walks[0].clone()] };
        for cmd in traced {
            let out = std::process::Command::new("strace")
                .args(["-f", "-c", "-o", "/dev/stderr", "--"])
                .args(&cmd)
                .stdout(std::process::Stdio::null())
                .output()
                .unwrap();
            println!("== {}", cmd[0]);
            println!("{}", String::from_utf8_lossy(&out.stderr).lines().take(12).collect::<Vec<_>>().join("\n"));
        }
        return;
    }
    // --churn N [--rounds R]: only the daemon's cost on an N-cgroup node,
    // idle and under 5 starts/s, R times: the spread between identical runs.
    if let Some(n) = args.iter().position(|a| a == "--churn").and_then(|i| args.get(i + 1)?.parse::<usize>().ok()) {
        let rounds = args.iter().position(|a| a == "--rounds").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(3);
        println!(
            "{:<44} {:>8} {:>9} {:>9} {:>6} {:>8} {:>5}",
            "scenario", "CPU", "peak MiB", "RSS MiB", "passes", "incr.", "lost"
        );
        for _ in 0..rounds {
            node_cost(n, Duration::from_secs(60), &[5.0], false);
        }
        return;
    }
    if only("--audit") {
        let sizes: &[usize] = if quick { &[1_000, 10_000] } else { &[1_000, 10_000, 50_000] };
        let runs = if quick { 3 } else { 5 };
        fixed_cost_bench(if quick { 5 } else { 11 });
        println!();
        audit_bench("realistic (a device program per container)", sizes, 1, 1_000, runs);
        println!();
        deep_chain_bench(runs);
        println!();
        audit_bench("sparse (a device program per 100 containers)", sizes, 100, usize::MAX, runs);
        println!();
    }
    if only("--tax") {
        tax_bench(if quick { 1 } else { 3 });
        println!();
    }
    if only("--daemon") {
        let (attaches, window, sizes): (usize, Duration, &[usize]) = if quick {
            (10, Duration::from_secs(10), &[10_000])
        } else {
            (60, Duration::from_secs(60), &[10_000, 50_000])
        };
        daemon_bench(attaches, window, sizes);
    }
}
