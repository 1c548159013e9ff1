//! What a process in a hostile pod can do to the agent, and why none of it
//! works: each test builds the attack for real and shows the agent still
//! sees, reports and stops as it should.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::*;

const MISATTACHED: &str = r#"cgaudit_socket_lb_misattached{attach_type="connect4",owner="cilium"}"#;

fn ready(d: &Daemon) {
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
}

/// `fixture fuse-trap`: a FUSE mount whose server never answers, named as
/// the target of a failing bpf() call. Killed, and its mount detached, on
/// drop.
struct FuseTrap {
    child: Child,
    dir: tempfile::TempDir,
}

impl FuseTrap {
    fn new() -> FuseTrap {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        let mut child = Command::new(agent_bin().with_file_name("fixture"))
            .arg("fuse-trap")
            .arg(&mnt)
            .stdout(Stdio::piped())
            .spawn()
            .expect("fixture fuse-trap");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "trapped");
        FuseTrap { child, dir }
    }
}

impl Drop for FuseTrap {
    fn drop(&mut self) {
        // Killing the server aborts the connection: waiters get ENOTCONN.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = nix::mount::umount2(&self.dir.path().join("mnt"), nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_call_naming_an_unanswered_fuse_file_cannot_stall_event_tracing_or_shutdown() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("fuse-trap");
    let mut d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
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
