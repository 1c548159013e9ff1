//! What an ordinary eBPF tenant costs the agent, and through it the node
//! (issue 36): figures under each attack, with the reference tool beside
//! the agent where there is one.
//!
//! - tenant: 30 pod cgroups, each with 64 harmless programs on every one
//!   of the 13 socket-LB hooks (24,960 attachments). `agent audit` and
//!   `bpftool cgroup tree` side by side (wall time, peak RSS, output size),
//!   then the daemon's peak RSS through two full passes with /metrics and
//!   /audit asked for, and what those answer.
//! - deep churn: another pod's mkdir+rmdir (3 s windows) while a pod
//!   makes and removes a cgroup 4,000 levels down: agent off, on with its
//!   default source, off again.

use std::io::BufRead;

use super::*;

/// A fixture process stopped with SIGTERM (it cleans up after itself).
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

/// Starts `fixture ARGS` and waits for its first line.
fn fixture(args: &[&str]) -> (Stopped, String) {
    let mut child = std::process::Command::new(fixture_bin())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("fixture");
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    std::io::BufReader::new(out).read_line(&mut line).expect("fixture's first line");
    (Stopped(child), line.trim().to_owned())
}

pub(super) fn tenant_bench(cgroups: usize) {
    let t = TestCgroup::new("bench-tenant");
    let n = cgroups.to_string();
    let (_flood, ready) = fixture(&["attach-flood", t.path.to_str().unwrap(), &n, "64"]);
    println!("A tenant's harmless programs: {cgroups} cgroups x 64 programs x 13 socket-LB hooks ({ready})");
    let root = t.path.to_str().unwrap();
    let agent = agent_bin();
    let shipped = shipped_agent_bin();
    println!("{:<36} {:>9} {:>10} {:>12}", "one-shot", "wall", "peak MiB", "output");
    for (label, cmd) in [
        (
            "agent audit --output json",
            vec![agent.to_str().unwrap(), "audit", "--output", "json", "--cgroup-root", root],
        ),
        ("agent audit (table)", vec![agent.to_str().unwrap(), "audit", "--cgroup-root", root]),
        ("bpftool cgroup tree", vec!["bpftool", "cgroup", "tree", root]),
    ] {
        let (wall, rss, out) = timed(&cmd);
        println!("{label:<36} {wall:>8.3}s {:>10.1} {:>11} B", rss as f64 / 1024.0, out.len());
    }
    let d = Daemon::start_via(std::process::Command::new(&shipped), &["--cgroup-root", root, "--interval", "5s"]);
    assert!(wait_until(Duration::from_secs(60), || d.get("/readyz").0 == 200), "{}", d.logs());
    let (metrics, audit) = (d.get("/metrics").1, d.get("/audit").1);
    std::thread::sleep(Duration::from_secs(6));
    let _ = (d.get("/metrics"), d.get("/audit"));
    let pid = d.child.id();
    let series = metrics.lines().filter(|l| l.starts_with("cgaudit_socket_lb_misattached{")).count();
    println!(
        "daemon (static release, two full passes): peak RSS {:.1} MiB (limit 64), /metrics {} B ({series} per-program series, {} truncated), /audit {} B",
        proc_field(pid, "status", "VmHWM:").unwrap_or(0) as f64 / 1024.0,
        metrics.len(),
        metric_value(&metrics, "cgaudit_socket_lb_misattached_truncated").unwrap_or(-1.0),
        audit.len(),
    );
}

pub(super) fn deep_churn_bench() {
    sources::deep_churn_costs_others_nothing(None, 4000, Duration::from_secs(3));
}
