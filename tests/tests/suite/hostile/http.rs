//! The agent's HTTP port, reachable from pods: slow, endless and idle
//! clients cannot hold its memory or starve /metrics and the probes.

use super::*;

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// A connection to the daemon from loopback address `from`.
fn connect_from(d: &Daemon, from: [u8; 4]) -> Option<std::net::TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    sock.bind(&std::net::SocketAddr::from((from, 0)).into()).ok()?;
    sock.connect_timeout(&d.addr.into(), Duration::from_secs(2)).ok()?;
    let s: std::net::TcpStream = sock.into();
    s.set_write_timeout(Some(Duration::from_millis(200))).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    Some(s)
}

/// GET `/metrics` from loopback address `from`: the status.
fn scrape_from(d: &Daemon, from: [u8; 4]) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = connect_from(d, from)?;
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    buf.split_whitespace().nth(1)?.parse().ok()
}

/// The three loads of the issue: clients asking for /audit and never
/// reading; clients sending 380 KiB of a request head that never ends;
/// clients leaving a request line half sent. `addresses` spreads them over
/// loopback addresses (pods). Returns what it keeps open.
fn http_loads(d: &Daemon, readers: usize, endless: usize, half: usize, addresses: u8) -> Vec<std::net::TcpStream> {
    use std::io::Write;
    let mut held = Vec::new();
    let mut n = 0usize;
    let mut from = || {
        n += 1;
        [127, 0, 1, 1 + (n % addresses as usize) as u8]
    };
    for _ in 0..readers {
        if let Some(mut s) = connect_from(d, from()) {
            let _ = socket2::SockRef::from(&s).set_recv_buffer_size(4096);
            let _ = write!(s, "GET /audit HTTP/1.1\r\nHost: x\r\n\r\n");
            held.push(s);
        }
    }
    let chunk = vec![b'a'; 8192];
    for _ in 0..endless {
        if let Some(mut s) = connect_from(d, from()) {
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nX-Long: ");
            for _ in 0..(380 * 1024 / chunk.len()) {
                if s.write_all(&chunk).is_err() {
                    break;
                }
            }
            held.push(s);
        }
    }
    for _ in 0..half {
        if let Some(mut s) = connect_from(d, from()) {
            let _ = s.write_all(b"GET /metr");
            held.push(s);
        }
    }
    held
}

/// Without limits (axum::serve) the agent held every connection and every
/// byte: +120 MiB for these loads, 1,000 fds still held after 40 s.
#[test]
fn slow_and_endless_http_clients_cannot_hold_the_agents_memory_or_starve_metrics() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("http-flood");
    // A report of some size: 400 cgroups with a device program each.
    let dev = Prog::load("", "device");
    let attached: Vec<Attached> =
        (0..400).map(|i| Attached::new(&t.mkdir(&format!("/c{i}")), &dev, ALLOW_MULTI)).collect();
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    ready(&d);
    let pid = d.child.id();
    let audit_len = d.get("/audit").1.len();
    assert!(audit_len > 100_000, "{audit_len}");
    let (rss0, fds0) = (vm_rss_kib(pid), open_fds(pid));

    // One pod (one address) cannot take the slots Prometheus needs.
    let held = http_loads(&d, 8, 200, 1000, 1);
    assert_eq!(scrape_from(&d, [127, 0, 0, 2]), Some(200), "/metrics starved by one pod:\n{}", d.logs());
    drop(held);

    // Spread over 250 addresses: the caps, the head size limit (16 KiB)
    // and the head timeout (5 s) bound what they hold, and free it.
    let held = http_loads(&d, 8, 200, 1000, 250);
    let (peak, fds_during) = (vm_rss_kib(pid), open_fds(pid));
    std::thread::sleep(Duration::from_secs(6));
    let fds_after = open_fds(pid);
    eprintln!(
        "RSS {rss0} KiB -> {peak} KiB; fds {fds0} -> {fds_during} -> {fds_after} after 6 s; /audit {audit_len} bytes"
    );
    assert!(peak < rss0 + 20 * 1024, "memory grew from {rss0} to {peak} KiB");
    // 64 slots, and the probe lane's 256 connections of half a second each.
    assert!(fds_during <= fds0 + 64 + 256 + 2, "{fds_during} fds held (was {fds0})");
    assert!(fds_after <= fds0 + 8 + 2, "{fds_after} fds still held after the head timeout (was {fds0})");
    assert_eq!(scrape_from(&d, [127, 0, 0, 2]), Some(200));
    drop(held);
    drop(attached);
}

/// A kubelet probe: GET `path` from 127.0.0.1, all of it within a second.
fn probe(d: &Daemon, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut s = std::net::TcpStream::connect_timeout(&d.addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    if Instant::now() > deadline {
        return None;
    }
    String::from_utf8_lossy(&buf).split_whitespace().nth(1)?.parse().ok()
}

/// Issue 28, M1 [a hostNetwork pod]: HTTP slots were counted per source
/// address, and a client sharing the kubelet's address (a hostNetwork pod)
/// held all 8 with connections that never sent a request: every liveness
/// and readiness probe failed, and the kubelet restarted the agent in a
/// loop. A connection serving no request now gives its place up to a new
/// one.
#[test]
fn idle_connections_from_the_probes_own_address_cannot_starve_the_probes() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("probe-starve");
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    ready(&d);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (addr, stop_idle) = (d.addr, stop.clone());
    // 32 connections from 127.0.0.1 that send nothing, topped up as the
    // agent closes them.
    let idle = std::thread::spawn(move || {
        let mut held: Vec<std::net::TcpStream> = Vec::new();
        let mut opened = 0usize;
        while !stop_idle.load(std::sync::atomic::Ordering::Relaxed) {
            held.retain(|s| {
                let mut b = [0u8; 1];
                s.set_nonblocking(true).is_ok()
                    && matches!(s.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            });
            while held.len() < 32 {
                match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                    Ok(s) => {
                        held.push(s);
                        opened += 1;
                    }
                    Err(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        opened
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut failed = Vec::new();
    for second in 0..20 {
        let started = Instant::now();
        for path in ["/healthz", "/readyz"] {
            if probe(&d, path) != Some(200) {
                failed.push((second, path));
            }
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(started.elapsed()));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = idle.join().unwrap();
    eprintln!("{opened} idle connections opened over the 20 s");
    assert!(opened >= 32);
    assert!(failed.is_empty(), "probes failed: {failed:?}\n{}", d.logs());
}
