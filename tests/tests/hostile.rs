//! What a process in a hostile pod can do to the agent, and why none of it
//! works: each test builds the attack for real and shows the agent still
//! sees, reports and stops as it should.

use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use integration_tests::*;

const MISATTACHED: &str = r#"cgaudit_socket_lb_misattached{attach_type="connect4",owner="cilium"}"#;

fn ready(d: &Daemon) {
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
}

#[test]
fn a_call_naming_an_unanswered_fuse_file_cannot_stall_event_tracing_or_shutdown() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("fuse-trap");
    // The trap is a call's target fd: the sources that resolve fds.
    let mut d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h", "--events", "syscalls"]);
    ready(&d);
    assert_eq!(d.metric("cgaudit_event_tracing_active"), Some(1.0), "{}", d.logs());
    let trap = FuseTrap::new();
    std::thread::sleep(Duration::from_millis(300));
    // The events still flow: a misattachment made after the trap is seen.
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let attached = Attached::new(&ctr, &prog, ALLOW_MULTI);
    let seen = wait_until(Duration::from_secs(5), || d.metric(MISATTACHED) == Some(1.0));
    assert!(seen, "event tracing stalled behind the FUSE file:\n{}", d.logs());
    drop(attached);
    // And it stops on SIGTERM.
    let start = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.child.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    let stopped = wait_until(Duration::from_secs(5), || d.child.try_wait().unwrap().is_some());
    assert!(stopped, "still running {:?} after SIGTERM:\n{}", start.elapsed(), d.logs());
    drop(trap);
}

/// A pod's `subPath` is bind-mounted in the node's mount namespace under its
/// own directory name, which the kernel writes into mountinfo unescaped
/// unless it is a space, tab, newline or backslash. procfs' parser split on
/// Unicode whitespace: one such line failed the whole file (the audit could
/// not find the root), and the U+00A0 name below read as a cgroup2 mount at
/// /run/cilium/cgroupv2.
#[test]
fn mount_paths_a_pod_chooses_neither_blind_the_audit_nor_fake_a_cgroup_mount() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let b = base.path().display();
    // printf escapes: \013 VT, \014 FF, \r, U+2028 (\342\200\250), U+00A0 (\302\240).
    let nbsp = r"\302\240";
    let fake = format!("e{nbsp}/run/cilium/cgroupv2{nbsp}rw{nbsp}-{nbsp}cgroup2{nbsp}cgroup2{nbsp}rw");
    let names = [r"v\013t".to_owned(), r"f\014f".into(), r"c\rr".into(), r"l\342\200\250s".into(), fake];
    let mut script = format!("mount -t tmpfs tmpfs /run\nmount -t tmpfs cgaudit-test {b}\n");
    for (i, n) in names.iter().enumerate() {
        script.push_str(&format!(
            "d=\"{b}/$(printf '{n}')\"; mkdir -p \"$d\" {b}/mnt{i} && mount --bind \"$d\" {b}/mnt{i}\n"
        ));
    }
    let sb = Sandbox::new(&script);
    let mountinfo = std::fs::read(format!("/proc/{}/mountinfo", sb.pid1)).unwrap();
    assert!(mountinfo.windows(2).any(|w| w == [0xc2, 0xa0]), "the crafted names are in PID 1's mountinfo");
    assert!(mountinfo.contains(&0x0b));

    let run = sb.agent(&["audit", "--output", "json"]);
    assert!(run.code == 0 || run.code == 1, "the audit was blinded: {run:?}");
    let report = run.json();
    assert_eq!(report["root_kind"], "hierarchy", "{:#}", report["root_note"]);
    let fake_mounts: Vec<&serde_json::Value> =
        report["mounts"].as_array().unwrap().iter().filter(|m| m["mount_point"] == "/run/cilium/cgroupv2").collect();
    assert!(fake_mounts.is_empty(), "a bind mount's name faked a cgroup2 mount: {fake_mounts:#?}");
    let errors = report["errors"].to_string();
    assert!(!errors.contains("malformed"), "{errors}");
}

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

fn audit_findings(t: &TestCgroup, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let run = agent(&args);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    run.json()["findings"].as_array().unwrap().clone()
}

/// A name is chosen by whoever loads the program. Any `sd_*` program used
/// to be systemd's on every hook, any `cgroup_connect*` Kmesh's, and an
/// unnamed one a runtime's: a connect4 program below the root hid behind
/// any of them. Now each owner is benign only on the hooks it uses.
#[test]
fn a_socket_lb_program_below_the_root_cannot_hide_behind_a_benign_name() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("spoof");
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let spoofs = [("sd_lb", "connect4"), ("cgroup_connect4_prog", "connect4"), ("", "sendmsg4")];
    let progs: Vec<Prog> = spoofs.iter().map(|(n, h)| Prog::load(n, h)).collect();
    let _a: Vec<Attached> = progs.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();
    // What systemd and runc really attach stays benign.
    let (dev, fw) = (Prog::load("", "device"), Prog::load("sd_fw_ingress", "ingress"));
    let _b = [Attached::new(&ctr, &dev, ALLOW_MULTI), Attached::new(&ctr, &fw, ALLOW_MULTI)];

    let f = audit_findings(&t, &[]);
    let flagged: Vec<u64> =
        f.iter().filter(|f| f["kind"] == "socket_lb_below_root").map(|f| f["prog_id"].as_u64().unwrap()).collect();
    for p in &progs {
        assert!(flagged.contains(&(p.id as u64)), "{:?} on {} hid behind its name: {f:#?}", p.name, p.hook);
    }
    assert_eq!(flagged.len(), 3, "the device and firewall programs are benign: {f:#?}");
    let sd = f.iter().find(|f| f["prog_name"] == "sd_lb").unwrap();
    assert!(sd["message"].as_str().unwrap().contains("Its name claims systemd"), "{sd:#}");
    // Where the operator says Kmesh runs, its connect program is its own.
    let f = audit_findings(&t, &["--kmesh"]);
    assert_eq!(f.iter().filter(|f| f["kind"] == "socket_lb_below_root").count(), 2, "{f:#?}");
}

/// Loading (not attaching) a program named like Cilium's used to raise
/// critical socket_lb_missing_at_root findings: anyone can load one.
#[test]
fn a_program_merely_loaded_with_a_cni_name_raises_nothing() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("loaded-only");
    let _loaded = Prog::load("cil_sock4_connect", "connect4");
    let f = audit_findings(&t, &[]);
    assert!(f.is_empty(), "{f:#?}");
}

/// Issue 28, M3 [CAP_BPF and PID 1's bpffs]: an unattached program named
/// `cil_sock4_connect`, pinned in Cilium's pin directory, made two
/// criticals naming every pod (socket LB missing at the root, pods without
/// it): pins counted as socket LB in use. Only attachments count now; a
/// pinned link whose cgroup is gone (Cilium reuses it on restart) is a
/// `defunct_link` warning. The pins are read from PID 1's bpffs.
#[test]
fn a_pin_alone_says_nothing_of_socket_lb_and_a_defunct_pinned_link_is_a_warning() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("pinned");
    t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let sb = Sandbox::new("mount -t bpf bpf /sys/fs/bpf && mkdir -p /sys/fs/bpf/cilium/socketlb/links/cgroup");
    let pin_at = |name: &str, fd: std::os::fd::BorrowedFd<'_>| {
        let pin = sb.path(&format!("/sys/fs/bpf/cilium/socketlb/links/cgroup/{name}"));
        let c = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes()).unwrap();
        agent::bpf::sys::obj_pin(fd, &c).unwrap();
        pin
    };
    // Loaded by anyone with CAP_BPF, pinned where Cilium pins, attached nowhere.
    let fake = Prog::load("cil_sock4_connect", "connect4");
    let fake_pin = pin_at("cil_sock4_connect", std::os::fd::AsFd::as_fd(&fake.fd));
    let run = sb.agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 0, "a pin is not socket LB in use: {run:?}");

    let gone = t.mkdir("/old-agent-cgroup");
    let prog = Prog::load("cil_sock6_connect", "connect6");
    let link = Link::new(&gone, &prog);
    let pin = pin_at("cil_sock6_connect", std::os::fd::AsFd::as_fd(&link.fd));
    std::fs::remove_dir(&gone).unwrap();
    // The kernel detaches the link when it releases the cgroup, later.
    let defunct = wait_until(Duration::from_secs(10), || {
        agent::bpf::sys::cgroup_link_info(std::os::fd::AsFd::as_fd(&link.fd)).unwrap().unwrap().cgroup_id == 0
    });
    assert!(defunct, "the kernel never released the cgroup");
    drop(link);
    let run = sb.agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    let f = run.json()["findings"].as_array().unwrap().clone();
    let kinds: Vec<&str> = f.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["defunct_link"], "{f:#?}");
    assert_eq!(f[0]["severity"], "warning");
    let _ = std::fs::remove_file(&pin);
    let _ = std::fs::remove_file(&fake_pin);
}

/// `remount --unpin-stale-links` read `--bpffs /sys/fs/bpf` in its own mount
/// namespace, where the shipped pod has no bpffs, and a missing directory
/// counted as "nothing stale". Now the default is the target's own bpffs,
/// and a directory that is not bpffs is refused.
#[test]
fn unpin_reads_the_targets_own_bpffs_and_refuses_a_directory_that_is_not_one() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("unpin-default");
    let sb = Sandbox::new(
        "mount -t tmpfs tmpfs /run && mkdir -p /run/cilium/cgroupv2 && mount -t cgroup2 none /run/cilium/cgroupv2 \
         && mount -t bpf bpf /sys/fs/bpf && mkdir -p /sys/fs/bpf/cilium/socketlb/links/cgroup",
    );
    let elsewhere = t.mkdir(&cgroupfs_pod("burstable", OTHER_POD_UID));
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let link = Link::new(&elsewhere, &prog);
    let pin = sb.path("/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock4_connect");
    let c = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes()).unwrap();
    agent::bpf::sys::obj_pin(std::os::fd::AsFd::as_fd(&link.fd), &c).unwrap();
    // From this (the host's) mount namespace, as the DaemonSet's pod runs.
    let pid = sb.pid1.to_string();
    let run = agent(&["remount", "--output", "json", "--target-pid", &pid, "--unpin-stale-links"]);
    assert_eq!(run.code, 1, "{run:?}");
    let unpin = run.json()["unpin"].as_array().unwrap().clone();
    assert_eq!(unpin.len(), 1, "{unpin:#?}");
    assert_eq!(unpin[0]["link_id"], link.id);
    let not_bpffs = tempfile::tempdir().unwrap();
    let run =
        agent(&["remount", "--target-pid", &pid, "--unpin-stale-links", "--bpffs", not_bpffs.path().to_str().unwrap()]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("not a bpffs mount"), "{}", run.stderr);
    assert_says_each_thing_once(&run.stderr);
    let _ = std::fs::remove_file(&pin);
}

/// Issue 22, 1: while a bpf_link is being made, `BPF_LINK_GET_FD_BY_ID`
/// answers EAGAIN for its id. A pod making links in a loop (anywhere on
/// the node, even outside the audited tree) made most audits exit 2. A
/// transient error on one object must not fail an audit: the link is
/// retried, then skipped and counted.
#[test]
fn links_being_made_cannot_fail_an_audit() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("link-churn");
    let elsewhere = TestCgroup::new("link-churn-elsewhere");
    let churn = std::process::Command::new(fixture_bin())
        .args(["link-churn", "8", "32"])
        .arg(&elsewhere.path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("churn");
    std::thread::sleep(Duration::from_millis(500));
    let mut failed = Vec::new();
    let mut skipped = 0u64;
    for _ in 0..20 {
        let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
        if run.code == 2 {
            failed.push(run.stderr.trim().to_owned());
        } else {
            skipped += run.json()["objects_skipped"]["links"].as_u64().unwrap_or(0);
        }
    }
    let made: u64 = String::from_utf8_lossy(&churn.wait_with_output().unwrap().stdout).trim().parse().unwrap_or(0);
    eprintln!("{made} links made meanwhile; {} of 20 audits failed; {skipped} links skipped", failed.len());
    assert!(made > 1000, "the churn was not heavy: {made}");
    assert!(failed.is_empty(), "{} of 20 audits failed: {:?}", failed.len(), failed.first());
}

/// Issue 22, 2: a process named `cilium-agent` whose `--config-dir` is a
/// FUSE mount nobody serves: reading its configuration blocked the audit
/// for good (the daemon's worker in D state, later misattachments never
/// reported). The read now has a deadline; the audit says why the intent
/// is unknown and goes on.
#[test]
fn a_cni_config_dir_on_an_unanswered_fuse_mount_cannot_stall_the_audit() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("fuse-config");
    let trap = FuseTrap::new();
    let cni = CiliumAgentAt::new(&trap.mnt());
    let start = Instant::now();
    let mut cmd = std::process::Command::new(agent_bin());
    cmd.args(["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let done = wait_until(Duration::from_secs(15), || child.try_wait().unwrap().is_some());
    if !done {
        let _ = child.kill();
        drop(trap); // unblocks it
        let _ = child.wait();
        panic!("the audit was still blocked on the FUSE file after 15 s");
    }
    let out = child.wait_with_output().unwrap();
    eprintln!("the audit ended after {:?}", start.elapsed());
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    let _report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a report");

    // The daemon: its passes go on, a later misattachment is reported, it
    // stays alive.
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "2s"]);
    ready(&d);
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let _attached = Attached::new(&ctr, &prog, ALLOW_MULTI);
    assert!(wait_until(Duration::from_secs(15), || d.metric(MISATTACHED) == Some(1.0)), "{}", d.logs());
    let passes = d.metric(r#"cgaudit_audits_total{trigger="interval"}"#).unwrap_or(0.0);
    assert!(wait_until(Duration::from_secs(10), || d.metric(r#"cgaudit_audits_total{trigger="interval"}"#)
        > Some(passes + 1.0)));
    assert_eq!(d.get("/healthz").0, 200);
    drop(cni);
}

/// Issue 22, 2: the configuration reader opened a key before checking
/// what it was: a device node there (mknod is a default container
/// capability) had its open handler run in the auditor, on the host. A
/// FIFO shows it: a writer waiting on it wakes when anyone opens it for
/// reading. Nothing but a regular file is opened now.
#[test]
fn a_config_key_that_is_no_regular_file_is_never_opened() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("fifo-config");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("kube-proxy-replacement");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let _cni = CiliumAgentAt::new(dir.path());
    // A writer blocks until a reader opens the FIFO.
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::OpenOptions::new().write(true).open(fifo).is_ok())
    };
    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    std::thread::sleep(Duration::from_millis(200));
    let opened = writer.is_finished();
    // Let the writer go, whatever happened.
    let _reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo);
    let _ = writer.join();
    assert!(!opened, "the audit opened the FIFO named as a configuration key");
}

/// Issue 22, 3: capabilities in `/proc/<pid>/status` are the process's in
/// its own user namespace. nobody, in a user namespace of its own
/// (`unshare -Ur`), made a `cilium-agent` with every capability there and
/// `kube-proxy-replacement=true`: the audit took it for Cilium's agent and
/// raised a critical `socket_lb_configured_not_attached` on a node
/// without Cilium. A CNI agent must hold its capability in the initial user
/// namespace.
#[test]
fn a_process_privileged_only_in_its_own_user_namespace_is_not_a_cni_agent() {
    if !can_run(&["unshare", "setpriv"]) {
        return;
    }
    let t = TestCgroup::new("userns-agent");
    let fake = CiliumAgent::in_user_namespace(&[("kube-proxy-replacement", "true")]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", fake.pid)).unwrap();
    assert!(status.contains("CapEff:\t000001ffffffffff"), "privileged in its namespace:\n{status}");
    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    let report = run.json();
    let kinds: Vec<&str> = report["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert!(
        !kinds.contains(&"socket_lb_configured_not_attached"),
        "a user namespace's root taken for Cilium: {kinds:?}"
    );
    assert_eq!(run.code, 0, "{report:#}");
}

/// Issue 28, M3 [CAP_BPF]: a process named `cilium-agent` holding CAP_BPF
/// alone, or every capability in a network namespace of its own, was taken
/// for Cilium's agent, its configuration for Cilium's: on a node without
/// Cilium, a critical `socket_lb_configured_not_attached`. A CNI agent has
/// the CNI's privilege profile (CAP_NET_ADMIN, and CAP_SYS_ADMIN or
/// CAP_BPF) on the node's own network, where CNI agents run.
#[test]
fn a_cni_agent_needs_the_cnis_privileges_on_the_nodes_network() {
    if !can_run(&["unshare", "setpriv"]) {
        return;
    }
    let t = TestCgroup::new("agent-profile");
    let judged = || {
        let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
        let report = run.json();
        let kinds: Vec<String> =
            report["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap().to_owned()).collect();
        (run.code, kinds)
    };
    let config = [("kube-proxy-replacement", "true")];
    {
        let _real = CiliumAgent::new(&config);
        assert_eq!(judged(), (1, vec!["socket_lb_configured_not_attached".to_owned()]), "the real profile is an agent");
    }
    for (what, fake) in
        [("CAP_BPF alone", CiliumAgent::bpf_only(&config)), ("its own network", CiliumAgent::in_own_network(&config))]
    {
        assert_eq!(judged(), (0, vec![]), "{what} taken for Cilium's agent");
        drop(fake);
    }
}

/// `agent audit` in `sb`, killed if still running after 30 s: (seconds it
/// took, its report).
fn audit_in_time(sb: &Sandbox, t: &TestCgroup, trap: FuseTrap) -> (f64, serde_json::Value) {
    let start = Instant::now();
    let mut child = sb
        .command(&agent_bin(), &["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let done = wait_until(Duration::from_secs(30), || child.try_wait().unwrap().is_some());
    let took = start.elapsed().as_secs_f64();
    if !done {
        let _ = child.kill();
        drop(trap); // unblocks it
        let _ = child.wait();
        panic!("the audit was still blocked on the pin directory after 30 s");
    }
    let out = child.wait_with_output().unwrap();
    drop(trap);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    (took, serde_json::from_slice(&out.stdout).expect("a report"))
}

/// Issue 28, H4 [write access to PID 1's bpffs, and a FUSE mount]: the
/// pin directories were read following links out of PID 1's bpffs, with no
/// deadline: a `cilium` symlink into a FUSE mount nobody serves hung every
/// audit (and the daemon's /healthz, then the pod, in a loop). They are now
/// resolved beneath the bpffs mount with no link and no mount crossing,
/// under the deadline of untrusted reads.
#[test]
fn a_pin_directory_leading_into_an_unanswered_fuse_mount_cannot_stall_the_audit() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("pin-trap");
    // A link: /sys/fs/bpf/cilium -> a directory of the FUSE mount.
    let trap = FuseTrap::new();
    let sb =
        Sandbox::new(&format!("mount -t bpf bpf /sys/fs/bpf && ln -s {} /sys/fs/bpf/cilium", trap.mnt().display()));
    let (took, report) = audit_in_time(&sb, &t, trap);
    eprintln!("through a link: {took:.2} s");
    assert!(took < 10.0, "{took} s");
    let errors = report["errors"].to_string();
    assert!(errors.contains("cilium/socketlb/links/cgroup: a symbolic link on the way, not followed"), "{errors}");

    // A mount: the FUSE file system mounted on /sys/fs/bpf/cilium itself.
    let sb = Sandbox::new("mount -t bpf bpf /sys/fs/bpf && mkdir /sys/fs/bpf/cilium");
    let trap = FuseTrap::in_sandbox(&sb, "/sys/fs/bpf/cilium");
    let (took, report) = audit_in_time(&sb, &t, trap);
    eprintln!("across a mount: {took:.2} s");
    assert!(took < 10.0, "{took} s");
    let errors = report["errors"].to_string();
    assert!(errors.contains("another filesystem is mounted on the way, not crossed"), "{errors}");
}

/// Processes named `cilium-agent` (one copy of the fixture, started `n`
/// times) whose `--config-dir` is `dir`; killed on drop.
struct Agents(Vec<std::process::Child>, tempfile::TempDir);

impl Agents {
    fn start(n: usize, dir: &std::path::Path) -> Agents {
        let bin = tempfile::Builder::new().prefix("cgaudit-agents-").tempdir_in("/var/tmp").unwrap();
        let fake = bin.path().join("cilium-agent");
        std::fs::copy(fixture_bin(), &fake).unwrap();
        let mut a = Agents(Vec::new(), bin);
        a.add(n, dir);
        a
    }

    fn add(&mut self, n: usize, dir: &std::path::Path) {
        let fake = self.1.path().join("cilium-agent");
        for _ in 0..n {
            let c = std::process::Command::new(&fake).arg("pause").arg("--config-dir").arg(dir).spawn().unwrap();
            self.0.push(c);
        }
    }

    /// Ends the oldest `n` and starts `n` new ones (new pids).
    fn churn(&mut self, n: usize, dir: &std::path::Path) {
        for mut c in self.0.drain(..n) {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.add(n, dir);
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn threads(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Issue 28, M2 [CAP_BPF and a FUSE volume]: the 2 s read deadline was per
/// process and served one after another: 70 fake agents whose
/// configuration sits on a FUSE mount nobody serves stalled a pass for
/// 140 s (/healthz 503), and each churned pid left a blocked thread. All
/// untrusted reads of a pass now share one deadline, on a bounded pool of
/// readers.
#[test]
fn seventy_blocked_agents_cost_a_pass_one_deadline_and_no_thread() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("fuse-many");
    let trap = FuseTrap::new();
    let mut agents = Agents::start(70, &trap.mnt());
    let start = Instant::now();
    let mut child = std::process::Command::new(agent_bin())
        .args(["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let done = wait_until(Duration::from_secs(30), || child.try_wait().unwrap().is_some());
    let took = start.elapsed();
    if !done {
        let _ = child.kill();
        let _ = child.wait();
        drop(agents);
        drop(trap);
        panic!("the audit with 70 blocked agents had not ended after 30 s");
    }
    assert!(took < Duration::from_secs(10), "the first audit took {took:?}");
    let out = child.wait_with_output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));

    // The daemon, passes every second, 10 agents replaced by new pids each
    // time: its threads do not grow, its probes answer.
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1s"]);
    assert!(wait_until(Duration::from_secs(15), || d.get("/readyz").0 == 200), "{}", d.logs());
    let before = threads(d.child.id());
    for _ in 0..10 {
        agents.churn(10, &trap.mnt());
        std::thread::sleep(Duration::from_millis(1500));
    }
    let after = threads(d.child.id());
    eprintln!("first audit {took:?}; daemon threads {before} -> {after} over 10 rounds of churn");
    assert!(after <= before + 4, "threads grew from {before} to {after}");
    assert_eq!(d.get("/healthz").0, 200, "{}", d.logs());
    assert!(d.metric(r#"cgaudit_audits_total{trigger="interval"}"#).unwrap_or(0.0) >= 5.0, "{}", d.logs());
    drop(agents);
    drop(trap);
}

/// Issue 28, H3 [CAP_BPF and CAP_NET_ADMIN]: the BTF of every attached
/// program was read whole, up to the kernel's 16 MiB each, and all of them
/// held together: eight harmless programs with padded BTF made 138 MB and
/// an OOM kill at every start of the DaemonSet (128 MiB). Only what naming
/// needs is read now, at most 4 MiB of one program at a time; a program
/// over that is named by its kernel name and counted.
#[test]
fn padded_btf_cannot_blow_up_the_audits_memory() {
    if !can_run(&["time"]) {
        return;
    }
    let t = TestCgroup::new("btf-pad");
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let progs: Vec<Prog> = (0..8).map(|_| Prog::load_padded("cil_sock4_connect", "connect4", 15 << 20)).collect();
    let _a: Vec<Attached> = progs.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();
    // And one whose BTF is of a real program's size, named in full.
    let fine = Prog::load_padded("cil_sock6_connect", "connect6", 64 << 10);
    let _f = Attached::new(&ctr, &fine, ALLOW_MULTI);
    let mut c = std::process::Command::new(agent_bin());
    c.args(["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    let (run, peak_kib) = run_measured(c);
    eprintln!("the audit's peak RSS: {} MiB", peak_kib / 1024);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(peak_kib < 32 * 1024, "peak RSS {peak_kib} KiB");
    let report = run.json();
    assert_eq!(report["objects_skipped"]["btf"], 8, "{:#}", report["objects_skipped"]);
    let names: std::collections::BTreeSet<&str> =
        report["attachments"].as_array().unwrap().iter().map(|a| a["prog_name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cil_sock4_conne", "cil_sock6_connect"].into(), "kernel names past the cap, full names below");
    let below = report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").count();
    assert_eq!(below, 9, "still judged as Cilium's: {report:#}");
}

/// The control characters in `s`, but the newlines that end lines.
fn controls(s: &str) -> Vec<char> {
    s.chars().filter(|c| c.is_control() && *c != '\n').collect()
}

/// Issue 22, 7: a cgroup name may hold any byte but `/` and newline, a
/// process name any byte but NUL, and both reached the table and the logs
/// as written: a crafted name cleared the operator's screen and printed a
/// fake "OK" line over the findings. Every control character is shown
/// escaped, and a name cannot start a line of its own.
#[test]
fn names_a_pod_chooses_cannot_write_to_the_operators_terminal() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("escapes");
    // Clear the screen, home the cursor, back to the line's start, a fake
    // verdict, and hide what follows.
    let name = "x\x1b[2J\x1b[H\rOK: no misplaced socket-LB programs\x1b[8m";
    let crafted = t.mkdir(name);
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let _attached = Attached::new(&crafted, &prog, ALLOW_MULTI);
    let resident = lb::Resident::named(&crafted, "\x1b[2J\nOK: clean\x1b[8m");

    let run = agent(&["audit", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    for (what, text) in [("table", &run.stdout), ("stderr", &run.stderr)] {
        assert!(controls(text).is_empty(), "control characters in the {what}: {:?}\n{text}", controls(text));
        assert!(!text.lines().any(|l| l.starts_with("OK")), "a name started a line of the {what}:\n{text}");
    }
    // Shown, escaped: not dropped.
    assert!(run.stdout.contains(r"x\x1b[2J\x1b[H\rOK: no misplaced"), "{}", run.stdout);
    assert!(run.stdout.contains(&format!(r"\x1b[2J\nOK: clean\x1b ({})", resident.pid())), "{}", run.stdout);

    // The daemon's text log carries the audited root in its summary.
    let d = Daemon::start(&["--cgroup-root", crafted.to_str().unwrap(), "--interval", "1h", "--events", "none"]);
    ready(&d);
    let logs = d.logs();
    assert!(logs.contains(r"\x1b[2J"), "the summary names the root:\n{logs}");
    assert!(controls(&logs).is_empty(), "control characters in the log: {:?}\n{logs}", controls(&logs));
}

/// Issue 22, 8: a log shipper's hostPath `/var/log` is writable from its
/// pod. A second `/var/log/pods/<ns>_<name>_<uid>` for a pod's UID, or a
/// second `/var/log/containers/..._<id>.log` link for a container, renamed
/// the pod (and container) in findings: whichever the directory listed
/// last or first won. Sources that disagree about one UID or one container
/// now name nothing.
#[test]
fn a_second_kubelet_log_entry_for_one_pod_cannot_rename_it() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("log-names");
    let pod = t.mkdir(&cgroupfs_pod("burstable", OTHER_POD_UID));
    const WEB_UID: &str = "7c1e2f3a-4b5d-4e6f-8a9b-0c1d2e3f4a5b";
    let ctr = t.mkdir(&cgroupfs_container("besteffort", WEB_UID, OTHER_CONTAINER));
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let _a = [Attached::new(&pod, &prog, ALLOW_MULTI), Attached::new(&ctr, &prog, ALLOW_MULTI)];
    let (u1, u2, id) = (OTHER_POD_UID, WEB_UID, OTHER_CONTAINER);
    // What the kubelet wrote, then what the shipper's pod added (in both
    // orders of creation: a listing's order is the filesystem's).
    let kubelet = format!(
        "mkdir -p /var/log/pods/kube-system_coredns-5d78c_{u1} /var/log/pods/kube-system_web-0_{u2}/app\n\
         ln -s /var/log/pods/kube-system_web-0_{u2}/app/0.log /var/log/containers/web-0_kube-system_app-{id}.log\n"
    );
    let shipper = format!(
        "mkdir -p /var/log/pods/kube-system_cilium-abcde_{u1} /var/log/pods/kube-system_cilium-abcde_{u2}/agent\n\
         ln -s /var/log/pods/kube-system_cilium-abcde_{u2}/agent/0.log /var/log/containers/cilium-abcde_kube-system_agent-{id}.log\n"
    );
    for (order, first, then) in [("kubelet first", &kubelet, &shipper), ("shipper first", &shipper, &kubelet)] {
        let sb = Sandbox::new(&format!("mount -t tmpfs tmpfs /var/log\nmkdir /var/log/containers\n{first}{then}"));
        let run = sb.agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
        assert_eq!(run.code, 1, "{run:?}");
        let report = run.json();
        let below: Vec<&serde_json::Value> =
            report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
        assert_eq!(below.len(), 2, "{report:#}");
        for f in below {
            assert_eq!(f["pod_name"], serde_json::Value::Null, "{order}: a shipper's entry named the pod: {f:#}");
            assert_eq!(f["container_name"], serde_json::Value::Null, "{order}: {f:#}");
        }
    }
}

/// The daemon's peak resident memory (VmHWM), in MiB.
fn peak_mib(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kib / 1024
}

/// Issue 22, 5: a pod with a writable cgroupfs made 200,000 cgroups in its
/// container (long names: the kernel allows 255 bytes): the daemon held
/// every name, 134 MB steady and 219 MB at a full pass, over the
/// DaemonSet's 128Mi limit: OOM-killed at its startup pass, again and
/// again. Past `--max-cgroups` it now keeps no tree: it degrades to full
/// passes, says so (metric, log line), still reports a misattachment, and
/// stays within half the limit (the walks hold no tree either).
#[test]
fn two_hundred_thousand_cgroups_cannot_push_the_daemon_over_its_limit() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("many");
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let long = "x".repeat(240);
    let made = Instant::now();
    for i in 0..200_000 {
        std::fs::create_dir(ctr.join(format!("{long}{i}"))).unwrap();
    }
    eprintln!("200,000 cgroups made in {:?}", made.elapsed());
    // The binary that ships: its memory is what the DaemonSet's limit is for.
    let shipped = std::process::Command::new(shipped_agent_bin());
    let mut d = Daemon::start_via(shipped, &["--cgroup-root", t.path.to_str().unwrap(), "--events", "reading"]);
    assert!(wait_until(Duration::from_secs(60), || d.get("/readyz").0 == 200), "{}", d.logs());
    let victim = t.mkdir(&cgroupfs_container("besteffort", SEED_POD_UID, "victim"));
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let attached_at = Instant::now();
    let _a = Attached::new(&victim, &prog, ALLOW_MULTI);
    let seen = wait_until(Duration::from_secs(60), || d.metric(MISATTACHED) == Some(1.0));
    let peak = peak_mib(&d);
    eprintln!("a misattachment reported after {:?}; peak {peak} MiB", attached_at.elapsed());
    assert!(seen, "the misattachment was not reported:\n{}", d.logs());
    assert!(peak < 64, "peak {peak} MiB: more than half the DaemonSet's 128Mi limit");
    assert_eq!(d.metric(r#"cgaudit_degraded{reason="cgroup_count"}"#), Some(1.0), "{}", d.get("/metrics").1);
    let logs = d.logs();
    assert_eq!(logs.matches("--max-cgroups").count(), 1, "one line says why:\n{logs}");
    let _ = d.child.kill();
}

/// A child process killed on drop.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 20, 4: syscall tracing (`--events syscalls`, opt-in) read the
/// command and attr from the 64-bit argument registers whatever ABI a call
/// used: a 32-bit `bpf()` (`int $0x80`) was never seen, and ia32 `signalfd`,
/// whose number is x86_64's `bpf`, with the 64-bit registers set as an
/// attach would set them, made a forged "connect4 attach" event. The ABI of
/// each call is decoded now.
#[cfg(target_arch = "x86_64")]
#[test]
fn syscall_tracing_decodes_32_bit_calls_as_32_bit_calls() {
    use std::io::{BufRead, Write};
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("ia32");
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let _detach = DetachAll(ctr.clone());
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h", "--events", "syscalls"]);
    ready(&d);
    let mut child = std::process::Command::new(fixture_bin())
        .arg("ia32-calls")
        .arg(&ctr)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("fixture ia32-calls");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let pid = child.id();
    let _child = Killed(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "forged");
    let attaches = r#"cgaudit_bpf_attach_events_total{command="prog_attach",attach_type="connect4"}"#;
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(d.metric(attaches), Some(0.0), "an ia32 signalfd() was taken for a bpf() attach:\n{}", d.logs());
    assert_eq!(d.metric(r#"cgaudit_audits_total{trigger="unplaced"}"#), Some(0.0), "{}", d.logs());

    writeln!(stdin).unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let prog: u64 = line.trim().strip_prefix("attached ").and_then(|n| n.parse().ok()).expect("attached <id>");
    let seen =
        wait_until(Duration::from_secs(3), || d.metric(attaches) == Some(1.0) && d.metric(MISATTACHED) == Some(1.0));
    assert!(seen, "a 32-bit bpf() attach was not seen:\n{}", d.get("/metrics").1);
    let audit: serde_json::Value = serde_json::from_str(&d.get("/audit").1).unwrap();
    let f = audit["findings"].as_array().unwrap().iter().find(|f| f["prog_id"] == prog).cloned().expect("its finding");
    assert_eq!(f["attached_by"]["pid"], pid, "{f:#}");
    writeln!(stdin).unwrap();
}
