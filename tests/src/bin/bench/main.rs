//! `cargo xtask bench`: figures, not pass/fail tests.
//!
//! audit: `agent audit` against `bpftool cgroup tree` on synthetic kubepods
//! hierarchies of 1,000, 10,000 and 50,000 cgroups, side by side in one run:
//! same attachment set, median and spread of wall time, bpf() calls per
//! cgroup, peak RSS.
//!
//! daemon: detection latency from the bpf() attach call to the metric
//! changing on /metrics (p50/p99 over N attaches, with event tracing and with
//! polling only); start-up CPU (until ready, and in the 3 s after), then
//! CPU, peak RSS, full passes and incremental updates of
//! `agent run` on nodes of 10,000 and 50,000 cgroups, idle and while
//! containers start (5 and 20 a second, each with a runc-like device
//! program, removed 5 s later), with the detection latency during churn;
//! and the same while an unprivileged process loops failing bpf() calls.
//! Each cost row also prints the worker's busy time by work
//! (`cgaudit_worker_busy_seconds_total`). `--churn N --rounds R`: only the
//! cost on an N-cgroup node, idle and under 5 starts/s, R times.
//!
//! devices: the audit on a node with 64 devices and 4 programs each,
//! beside `bpftool net show` (see `devices.rs`).
//!
//! hostile: what an ordinary eBPF tenant costs the agent and the node
//! (issue 36): see `hostile.rs`.
//!
//! tax: what the daemon costs everyone else: another process's `getppid()`
//! loop and `dd bs=64` with the daemon off, and on with each event source
//! this machine allows, interleaved rounds, medians side by side.

use std::time::{Duration, Instant};

use integration_tests::*;

mod audit;
mod daemon;
mod devices;
mod hostile;
mod tax;

use audit::*;
use daemon::*;
use devices::*;
use hostile::*;
use tax::*;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median, min and max.
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    let (lo, hi) = (v.iter().cloned().fold(f64::MAX, f64::min), v.iter().cloned().fold(0.0, f64::max));
    (median(v), lo, hi)
}

fn main() {
    assert!(can_run(&["bpftool", "strace"]), "the benchmark needs root, bpftool and strace");
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = |what: &str| {
        !args.iter().any(|a| a == "--audit" || a == "--daemon" || a == "--tax" || a == "--hostile" || a == "--devices")
            || args.iter().any(|a| a == what)
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
    // --revision: only what a hook's revision could save a reader.
    if args.iter().any(|a| a == "--revision") {
        revision_bench(100_000);
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
        revision_bench(if quick { 20_000 } else { 100_000 });
        println!();
        audit_bench("realistic (a device program per container)", sizes, 1, 1_000, runs);
        println!();
        deep_chain_bench(runs);
        println!();
        audit_bench("sparse (a device program per 100 containers)", sizes, 100, usize::MAX, runs);
        println!();
    }
    if only("--devices") {
        devices_bench(64, if quick { 3 } else { 7 });
        println!();
    }
    if only("--tax") {
        tax_bench(if quick { 1 } else { 3 });
        println!();
    }
    if only("--hostile") {
        tenant_bench(30);
        println!();
        deep_churn_bench();
        println!();
        probe_lane_bench();
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
