//! `cargo xtask bench`: figures, not pass/fail tests.
//!
//! daemon: detection latency from the bpf() attach call to the metric
//! changing on /metrics (p50/p99 over N attaches, with event tracing and with
//! polling only), and idle CPU and peak RSS of `agent run` on a node with
//! 1,000 cgroups over a minute.

use std::time::{Duration, Instant};

use integration_tests::*;

const CTR: &str = "/kubepods/burstable/pod0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d/5cecdc399e2fa339d62a5b276331d8a5875fff7898a09d1ba1f5d710ecb12f13";
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
    let ctr = t.mkdir(CTR);
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
        let seen = wait_fast(Duration::from_secs(30), || {
            http_get(d.addr, "/metrics").is_some_and(|(_, m)| metric_value(&m, MISATTACHED) == Some(1.0))
        });
        assert!(seen, "attach {i} never showed:\n{}", d.logs());
        out.push(start.elapsed());
        drop(a);
        let cleared = wait_fast(Duration::from_secs(30), || {
            http_get(d.addr, "/metrics").is_some_and(|(_, m)| metric_value(&m, MISATTACHED).is_none())
        });
        assert!(cleared, "detach {i} never cleared");
    }
    out.sort();
    out
}

fn wait_fast(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
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

fn daemon_bench(attaches: usize, idle: Duration) {
    println!("== agent run: detection latency (bpf() attach -> /metrics), {attaches} attaches each ==");
    println!("{:<34} {:>10} {:>10} {:>10}", "mode", "p50", "p99", "max");
    let modes = [
        ("events (--interval 1h)", vec!["--interval", "1h"], Duration::ZERO),
        ("polling only (--interval 1s)", vec!["--no-tracing", "--interval", "1s"], Duration::from_secs(1)),
    ];
    for (mode, args, phase) in modes {
        let t = TestCgroup::new("bench-latency");
        let mut all = vec!["--cgroup-root", t.path.to_str().unwrap()];
        all.extend(args);
        let d = Daemon::start(&all);
        assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200));
        let l = latencies(&d, &t, attaches, phase);
        println!(
            "{:<34} {:>10.1?} {:>10.1?} {:>10.1?}",
            mode,
            percentile(&l, 0.5),
            percentile(&l, 0.99),
            l.last().unwrap()
        );
    }
    println!("(polling latency is uniform over the interval: with the default 30 s, expect p50 ~15 s, p99 ~30 s)");

    println!("\n== agent run: idle cost on a node with 1,000 cgroups, over {idle:?} ==");
    let t = TestCgroup::new("bench-idle");
    let mut n = 0;
    'outer: for pod in 0..250 {
        let base = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{pod:08x}_0000_4000_8000_000000000000.slice"
        );
        for c in 0..3 {
            t.mkdir(&format!("{base}/cri-containerd-{:064x}.scope", pod * 4 + c));
            n += 4.min(1000 - n).min(if c == 0 { 2 } else { 1 });
            if n >= 1000 {
                break 'outer;
            }
        }
    }
    let total = walk_count(&t.path);
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap()]);
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200));
    let pid = d.child.id();
    let hz = 100.0; // USER_HZ on Linux
    let (t0, c0) = (Instant::now(), cpu_ticks(pid));
    std::thread::sleep(idle);
    let (secs, ticks) = (t0.elapsed().as_secs_f64(), cpu_ticks(pid) - c0);
    let scrape = d.get("/metrics").1;
    let audits = metric_value(&scrape, "cgaudit_audit_duration_seconds_count").unwrap_or(0.0);
    let audit_secs = metric_value(&scrape, "cgaudit_audit_duration_seconds_sum").unwrap_or(0.0);
    println!("cgroups in the tree:        {total}");
    println!(
        "CPU over the window:        {:.3}% of one core ({} ticks in {secs:.1} s)",
        ticks as f64 / hz / secs * 100.0,
        ticks
    );
    println!("peak RSS (VmHWM):           {:.1} MiB", proc_field(pid, "status", "VmHWM:").unwrap_or(0) as f64 / 1024.0);
    println!("RSS now (VmRSS):            {:.1} MiB", proc_field(pid, "status", "VmRSS:").unwrap_or(0) as f64 / 1024.0);
    println!("audits so far:              {audits} (mean {:.1} ms)", audit_secs / audits.max(1.0) * 1000.0);
}

fn walk_count(p: &std::path::Path) -> usize {
    1 + std::fs::read_dir(p)
        .map(|e| e.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| walk_count(&e.path())).sum())
        .unwrap_or(0)
}

fn main() {
    assert!(can_run(&[]), "the benchmark needs root");
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let (attaches, idle) = if quick { (10, Duration::from_secs(5)) } else { (60, Duration::from_secs(60)) };
    daemon_bench(attaches, idle);
}
