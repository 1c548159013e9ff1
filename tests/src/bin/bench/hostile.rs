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
//! - silent connections: /metrics from a ninth address while eight hold 8
//!   each; the probes (TCP, and the exec probe over the agent's socket)
//!   while 1,000 are held from the kubelet's address.

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
    let d = Daemon::start_via(std::process::Command::new(&agent), &["--cgroup-root", root, "--interval", "5s"]);
    assert!(wait_until(Duration::from_secs(60), || d.get("/readyz").0 == 200), "{}", d.logs());
    let (metrics, audit) = (d.get("/metrics").1, d.get("/audit").1);
    std::thread::sleep(Duration::from_secs(6));
    let _ = (d.get("/metrics"), d.get("/audit"));
    let pid = d.child.id();
    let series = metrics.lines().filter(|l| l.starts_with("cgaudit_socket_lb_misattached{")).count();
    println!(
        "daemon (release, two full passes): peak RSS {:.1} MiB (limit 64), /metrics {} B ({series} per-program series, {} truncated), /audit {} B",
        proc_field(pid, "status", "VmHWM:").unwrap_or(0) as f64 / 1024.0,
        metrics.len(),
        metric_value(&metrics, "cgaudit_socket_lb_misattached_truncated").unwrap_or(-1.0),
        audit.len(),
    );
}

pub(super) fn deep_churn_bench() {
    sources::deep_churn_costs_others_nothing(None, 4000, Duration::from_secs(3));
}

/// Holds `per_address` connections that send nothing from each address in
/// `from`, topped up as the agent closes them, until `stop` turns true;
/// returns how many it opened.
fn hold_silent(
    addr: std::net::SocketAddr,
    from: Vec<[u8; 4]>,
    per_address: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut held: Vec<([u8; 4], std::net::TcpStream)> = Vec::new();
        let mut opened = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            held.retain(|(_, s)| {
                let mut b = [0u8; 1];
                s.set_nonblocking(true).is_ok()
                    && matches!(s.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            });
            for a in &from {
                while held.iter().filter(|(h, _)| h == a).count() < per_address {
                    let Ok(sock) = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None) else {
                        break;
                    };
                    if sock.bind(&std::net::SocketAddr::from((*a, 0)).into()).is_err()
                        || sock.connect_timeout(&addr.into(), Duration::from_millis(200)).is_err()
                    {
                        break;
                    }
                    held.push((*a, sock.into()));
                    opened += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        opened
    })
}

/// One GET from `from`, answered 200 within `within`.
fn get_from(addr: std::net::SocketAddr, from: [u8; 4], path: &str, within: Duration) -> bool {
    use std::io::{Read, Write};
    let Ok(sock) = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None) else { return false };
    if sock.bind(&std::net::SocketAddr::from((from, 0)).into()).is_err()
        || sock.connect_timeout(&addr.into(), within).is_err()
    {
        return false;
    }
    let mut s: std::net::TcpStream = sock.into();
    let _ = s.set_read_timeout(Some(within));
    if write!(s, "GET {path} HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.split_whitespace().nth(1) == Some("200")
}

/// Issue 36, M3: what silent connections leave of /metrics and the probes.
pub(super) fn probe_lane_bench() {
    let t = TestCgroup::new("bench-probes");
    let dir = tempfile::tempdir().expect("a directory for the socket");
    let sock = dir.path().join("probe.sock");
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--probe-socket", sock.to_str().unwrap()]);
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let eight: Vec<[u8; 4]> = (0..8).map(|i| [127, 0, 3, 1 + i]).collect();
    let holder = hold_silent(d.addr, eight, 8, stop.clone());
    std::thread::sleep(Duration::from_millis(500));
    let metrics = (0..10).filter(|_| get_from(d.addr, [127, 0, 3, 100], "/metrics", Duration::from_secs(3))).count();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = holder.join().unwrap_or(0);
    println!("8 silent connections from each of 8 addresses ({opened} opened): /metrics from a ninth, {metrics} of 10");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let holder = hold_silent(d.addr, vec![[127, 0, 0, 1]], 1000, stop.clone());
    std::thread::sleep(Duration::from_millis(500));
    let tcp = (0..10).filter(|_| get_from(d.addr, [127, 0, 0, 1], "/healthz", Duration::from_secs(5))).count();
    let exec = (0..10)
        .filter(|_| {
            std::process::Command::new(agent_bin())
                .args(["probe", "--socket", sock.to_str().unwrap(), "live"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .count();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = holder.join().unwrap_or(0);
    println!(
        "1,000 silent connections held from the kubelet's address ({opened} opened): TCP /healthz {tcp} of 10, exec probe (agent probe) {exec} of 10"
    );
}
