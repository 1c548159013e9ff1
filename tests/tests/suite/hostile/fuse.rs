//! Files and directories a pod serves from an unanswered FUSE mount, where
//! the agent reads: a call, a CNI config dir, a pin directory, seventy
//! blocked agents. None stalls the audit, the events or the shutdown.

use super::*;

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

/// `agent audit` in `sb`, killed if still running after 30 s: (seconds it
/// took, its report).
fn audit_in_time(sb: &Sandbox, t: &TestCgroup, trap: FuseTrap) -> (f64, serde_json::Value) {
    audit_in_time_with(sb, t, trap, &[])
}

/// The same, with `extra` arguments.
fn audit_in_time_with(sb: &Sandbox, t: &TestCgroup, trap: FuseTrap, extra: &[&str]) -> (f64, serde_json::Value) {
    let start = Instant::now();
    let args = [&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()], extra].concat();
    let mut child = sb
        .command(&agent_bin(), &args)
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
        panic!("the audit was still blocked on the FUSE mount after 30 s");
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
/// untrusted reads of a pass now share one deadline, and the threads left
/// blocked are bounded.
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
    // One thread per process whose read is blocked, at most 32 of them.
    assert!(after <= before + 32 + 4, "threads grew from {before} to {after}");
    assert_eq!(d.get("/healthz").0, 200, "{}", d.logs());
    assert!(d.metric(r#"cgaudit_audits_total{trigger="interval"}"#).unwrap_or(0.0) >= 5.0, "{}", d.logs());
    drop(agents);
    drop(trap);
}

/// Issue 36 [four processes with a CNI agent's privileges, a FUSE
/// volume]: four fake agents whose configuration never answers held the
/// four shared readers, and the real agent's configuration went unread
/// (socket LB configured on, nothing at the root: no finding). Each
/// process's reads are its own now: only the fakes' facts are lost.
#[test]
fn blocked_fake_agents_cannot_keep_the_real_agents_configuration_unread() {
    if !can_run(&["unshare", "setpriv"]) {
        return;
    }
    let t = TestCgroup::new("fuse-four");
    let trap = FuseTrap::new();
    let fakes = Agents::start(4, &trap.mnt());
    let real = CiliumAgent::new(&[("kube-proxy-replacement", "true")]);
    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    let report = run.json();
    let f: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "socket_lb_configured_not_attached")
        .collect();
    assert_eq!(f.len(), 1, "the real agent's configuration was not read: {report:#}");
    assert_eq!(f[0]["processes"][0]["pid"], real.pid);
    drop(real);
    drop(fakes);
    drop(trap);
}

/// Issue 47, L2 [write access to the node's CNI configuration directory,
/// and a FUSE mount]: the node's CNI configuration was read through PID 1's
/// root with no deadline, following links and crossing mounts: a
/// `00-trap.conflist` linked to a FUSE file nobody serves hung the audit
/// until the server died. Its files are read through no link and no mount
/// now, under the deadline of untrusted reads.
#[test]
fn a_cni_configuration_leading_into_an_unanswered_fuse_mount_cannot_stall_the_audit() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("cni-trap");
    // The configuration directory is a tmpfs of the sandbox's own, on /mnt:
    // nothing of this machine's is written.
    // A pod: the interfaces, and with them the configuration, are read.
    t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let trap = FuseTrap::new();
    let link = format!("mount -t tmpfs cni /mnt && ln -s {}/x.conflist /mnt/00-trap.conflist", trap.mnt().display());
    let sb = Sandbox::new(&link);
    let (took, report) = audit_in_time_with(&sb, &t, trap, &["--cni-conf-dir", "/mnt"]);
    eprintln!("the audit ended after {took:.2} s");
    assert!(took < 10.0, "{took} s");
    assert_eq!(report["datapath"]["configured"], serde_json::json!([]), "{:#}", report["datapath"]);
}
