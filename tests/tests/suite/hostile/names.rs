//! Names and objects a pod chooses (program names, pins, mount paths,
//! config keys, cgroup and pod names, kubelet log entries): none hides a
//! finding, fakes one, or writes to the operator's terminal.

use super::*;

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

/// A name is chosen by whoever loads the program. Any `sd_*` program used
/// to be systemd's on every hook, any `cgroup_connect*` Kmesh's, and an
/// unnamed one a runtime's: a connect4 program below the root hid behind
/// any of them. Now each benign owner is benign only on the hooks it uses,
/// and Kmesh's name makes a program Kmesh's only with proof.
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
    let flagged: Vec<u64> = f
        .iter()
        .filter(|f| f["kind"] == "socket_lb_below_root")
        .flat_map(|f| f["programs"].as_array().unwrap())
        .map(|p| p["prog_id"].as_u64().unwrap())
        .collect();
    for p in &progs {
        assert!(flagged.contains(&(p.id as u64)), "{:?} on {} hid behind its name: {f:#?}", p.name, p.hook);
    }
    assert_eq!(flagged.len(), 3, "the device and firewall programs are benign: {f:#?}");
    let below = f.iter().find(|f| f["kind"] == "socket_lb_below_root").unwrap();
    assert!(below["message"].as_str().unwrap().contains("sd_lb's name claims systemd"), "{below:#}");
    // Kmesh's name proves nothing either: unknown, named like Kmesh's, a
    // warning (nothing of Kmesh's holds it).
    let kmesh = f.iter().find(|f| f["named_like"] == "kmesh").expect("named like Kmesh's");
    assert_eq!(
        (&kmesh["owner"], &kmesh["severity"], &kmesh["count"]),
        (&"unknown".into(), &"warning".into(), &1.into())
    );
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

/// Issue 47, M3 [CAP_BPF, CAP_NET_ADMIN and PID 1's bpffs]: a tenant's
/// program attached to its own container's cgroup and pinned in Cilium's
/// pin directory was Cilium's (`pinned`): a critical socket_lb_below_root
/// ("restart Cilium") and the pods without it, on a node where Cilium does
/// not even run. A pin is Cilium's proof only while Cilium's agent runs:
/// now it is a program nobody is proven to own, a warning.
#[test]
fn a_tenants_program_pinned_in_ciliums_directory_is_not_ciliums() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let t = TestCgroup::new("pin-forged");
    let own = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let sb = Sandbox::new("mount -t bpf bpf /sys/fs/bpf && mkdir -p /sys/fs/bpf/cilium/socketlb/links/cgroup");
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let link = Link::new(&own, &prog);
    let pin = sb.path("/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock4_connect");
    let c = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes()).unwrap();
    agent::bpf::sys::obj_pin(std::os::fd::AsFd::as_fd(&link.fd), &c).unwrap();
    let run = sb.agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    let report = run.json();
    let f = report["findings"].as_array().unwrap();
    let critical: Vec<&serde_json::Value> = f.iter().filter(|f| f["severity"] == "critical").collect();
    assert!(critical.is_empty(), "a pin without Cilium's agent made criticals: {critical:#?}");
    let below = f.iter().find(|f| f["kind"] == "socket_lb_below_root").expect("said, as a warning");
    assert_eq!((&below["severity"], &below["owner"]), (&"warning".into(), &"unknown".into()), "{below:#}");
    assert_eq!(report["attachments"][0]["owner"], "unknown", "{:#}", report["attachments"]);
    drop(link);
    let _ = std::fs::remove_file(&pin);
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
    // From a mount namespace other than the target's (the host's copy), as
    // the DaemonSet's pod runs, in the sandbox's PID namespace (its /proc/1
    // is the target, as a hostPID pod's is the node's init).
    let remount = |more: &[&str]| {
        let mut cmd = std::process::Command::new("nsenter");
        cmd.args([
            "--target",
            &sb.pid1.to_string(),
            "--pid",
            "--",
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--mount-proc",
        ])
        .arg(agent_bin())
        .args(["remount", "--path", "/run/cilium/cgroupv2", "--unpin-stale-links"])
        .args(more)
        .env("CGAUDIT_NESTED_NODE", "true");
        integration_tests::spawn::run(cmd)
    };
    let run = remount(&["--output", "json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let unpin = run.json()["unpin"].as_array().unwrap().clone();
    assert_eq!(unpin.len(), 1, "{unpin:#?}");
    assert_eq!(unpin[0]["link_id"], link.id);
    assert_eq!(unpin[0]["owner"], "cilium");
    let not_bpffs = tempfile::tempdir().unwrap();
    let run = remount(&["--bpffs", not_bpffs.path().to_str().unwrap()]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("not a bpffs mount"), "{}", run.stderr);
    assert_says_each_thing_once(&run.stderr);
    let _ = std::fs::remove_file(&pin);
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
