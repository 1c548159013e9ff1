//! Bad input and missing privileges: one clear line naming what was wrong,
//! exit 2, no panic, no output on stdout, and nothing changed on the host.

use std::fs;
use std::path::Path;

use integration_tests::*;

/// What the audit could change: mounts, the cgroup tree's top level, and
/// attachments at the root.
fn host_state() -> (String, Vec<String>) {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut cgroups: Vec<String> =
        fs::read_dir(cgroup2_root()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    cgroups.sort();
    (mounts, cgroups)
}

fn assert_refused(run: &Run, expect_in_stderr: &str) {
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.is_empty(), "nothing on stdout: {run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
    assert!(
        run.stderr.contains(expect_in_stderr),
        "stderr should name the problem ({expect_in_stderr}): {}",
        run.stderr
    );
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "one line: {}", run.stderr);
    assert_says_each_thing_once(&run.stderr);
}

#[test]
fn every_bad_cgroup_root_is_refused_by_name() {
    if !can_run(&[]) {
        return;
    }
    let before = host_state();
    let file = tempfile::NamedTempFile::new().unwrap();
    let not_cg = tempfile::tempdir().unwrap();
    let missing = "/nonexistent/cgaudit/dir";
    assert_refused(
        &agent(&["audit", "--cgroup-root", missing]),
        &format!("--cgroup-root {missing}: no such directory"),
    );
    let f = file.path().to_str().unwrap();
    assert_refused(&agent(&["audit", "--cgroup-root", f]), &format!("--cgroup-root {f}: not a directory"));
    let d = not_cg.path().to_str().unwrap();
    assert_refused(&agent(&["audit", "--cgroup-root", d]), &format!("--cgroup-root {d}: not a cgroup2 directory"));
    // A cgroup v1 hierarchy is not cgroup2 either (hybrid hosts have both).
    if Path::new("/sys/fs/cgroup/cpu").is_dir() {
        assert_refused(&agent(&["audit", "--cgroup-root", "/sys/fs/cgroup/cpu"]), "not a cgroup2 directory");
    }
    assert_eq!(before, host_state());
}

#[test]
fn bad_proc_and_bad_flags_are_refused() {
    if !can_run(&[]) {
        return;
    }
    let before = host_state();
    let d = tempfile::tempdir().unwrap();
    let p = d.path().to_str().unwrap();
    assert_refused(&agent(&["audit", "--proc", p]), &format!("--proc {p}: not a procfs mount"));
    assert_refused(&agent(&["audit", "--proc", "/nonexistent"]), "--proc /nonexistent");
    let run = agent(&["audit", "--output", "yaml"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("invalid value 'yaml'"), "{}", run.stderr);
    assert!(run.stderr.contains("[possible values: table, json, summary]"), "{}", run.stderr);
    let run = agent(&["audit", "--bogus"]);
    assert_eq!(run.code, 2, "{run:?}");
    let run = agent(&["audit", "--walk", "fast"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("[possible values: auto, bpf-iter, syscalls]"), "{}", run.stderr);
    assert_eq!(before, host_state());
}

#[test]
fn a_node_with_no_cgroup2_mounted_is_read_through_a_private_mount() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    // A node whose mount namespace has no cgroup2 at all (cgroup v1 only):
    // not bad input, the v2 hierarchy is still there and its programs run.
    let sb =
        Sandbox::new(r#"for m in $(awk '$9 == "cgroup2" { print $5 }' /proc/self/mountinfo); do umount -l "$m"; done"#);
    let mounts = || std::fs::read_to_string(format!("/proc/{}/mountinfo", sb.pid1)).unwrap();
    let before = mounts();
    assert!(!before.contains(" - cgroup2 "), "{before}");
    let run = sb.agent(&["audit", "--output", "json"]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    let report = run.json();
    assert_eq!(report["root_cgroup_id"], 1, "{report:#}");
    let note = report["root_note"].as_str().unwrap_or_default();
    assert!(note.contains("no cgroup2 is mounted"), "{note}");
    assert_eq!(mounts(), before, "the audit's own mount is attached nowhere");
}

#[test]
fn unprivileged_run_names_the_missing_capability() {
    if !can_run(&["setpriv"]) {
        return;
    }
    let before = host_state();
    let mut c = std::process::Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(agent_bin()).arg("audit");
    let run = run(c);
    assert_refused(&run, "missing capability CAP_SYS_ADMIN");
    // Root without CAP_SYS_ADMIN is refused the same way; asked for JSON,
    // stdout says so as JSON too.
    let mut c = std::process::Command::new("setpriv");
    c.args(["--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--"])
        .arg(agent_bin())
        .args(["audit", "--output", "json"]);
    let mut json = integration_tests::run(c);
    let doc = json.json();
    assert_eq!(doc["status"], "error");
    assert!(doc["error"].as_str().unwrap().starts_with("missing capability CAP_SYS_ADMIN"), "{doc:#}");
    json.stdout.clear();
    assert_refused(&json, "missing capability CAP_SYS_ADMIN");
    assert_eq!(before, host_state());
}

/// `agent <args>`, killed after 10 s: a daemon that wrongly accepts its
/// flags fails the test (exit 124) instead of hanging it.
fn agent_briefly(args: &[&str]) -> Run {
    let mut c = std::process::Command::new("timeout");
    c.arg("10").arg(agent_bin()).args(args);
    integration_tests::run(c)
}

/// A flag clap rejects: exit 2, the flag and the reason named, nothing on
/// stdout.
fn assert_flag_refused(args: &[&str], expect_in_stderr: &str) {
    let run = agent_briefly(args);
    assert_eq!(run.code, 2, "{args:?}: {run:?}");
    assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
    assert!(run.stderr.contains(expect_in_stderr), "{args:?} should say {expect_in_stderr:?}: {}", run.stderr);
}

#[test]
fn values_that_would_silently_change_the_verdict_are_refused() {
    if !can_run(&["timeout"]) {
        return;
    }
    let before = host_state();
    // An empty prefix matches every program name: it would allow everything.
    assert_flag_refused(&["audit", "--allow", ""], "'--allow <PREFIX>'");
    assert_flag_refused(&["run", "--allow", ""], "'--allow <PREFIX>'");
    assert_flag_refused(&["remount", "--allow", ""], "'--allow <PREFIX>'");
    // A zero interval would audit without pause.
    for bad in ["0s", "500ms"] {
        assert_flag_refused(&["run", "--interval", bad], "'--interval <DURATION>': must be at least 1s");
    }
    assert_flag_refused(&["run", "--interval", "soon"], "'--interval <DURATION>'");
    // One that overflows a Duration's arithmetic once jittered.
    assert_flag_refused(&["run", "--interval", "580000000000years"], "'--interval <DURATION>': must be at most 1day");
    // The CNI's mount point is a path in the node's mount namespace.
    assert_flag_refused(&["remount", "--path", "run/cilium/cgroupv2"], "'--path <PATH>': must be an absolute path");
    assert_flag_refused(&["remount", "--path", "/run/cilium/../../etc"], "without . or .. components");
    assert_flag_refused(&["remount", "--path", "/"], "'--path <PATH>': must be an absolute path below /");
    assert_eq!(before, host_state());
}

/// A --cgroup-root that does not exist yet is not refused: the daemon waits
/// for it, unready (daemon.rs tests that).
#[test]
fn the_daemon_refuses_a_bad_path_at_start_instead_of_failing_every_interval() {
    if !can_run(&["timeout"]) {
        return;
    }
    let before = host_state();
    let loaded = loaded_program_ids();
    let listen = free_addr().to_string();
    let d = tempfile::tempdir().unwrap();
    let not_cg = d.path().to_str().unwrap();
    for (args, expect) in [
        (vec!["--cgroup-root", not_cg], format!("--cgroup-root {not_cg}: not a cgroup2 directory")),
        (vec!["--proc", not_cg], format!("--proc {not_cg}: not a procfs mount")),
    ] {
        let mut all = vec!["run", "--listen", &listen];
        all.extend(&args);
        let run = agent_briefly(&all);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(&expect), "{args:?} should say {expect:?}: {}", run.stderr);
        assert_eq!(run.stderr.trim_end().lines().count(), 1, "one line, before anything starts: {}", run.stderr);
        assert_says_each_thing_once(&run.stderr);
        assert!(std::net::TcpStream::connect(&listen).is_err(), "nothing listens on {listen}");
    }
    assert_eq!(programs_left_since(&loaded), [0u32; 0], "no tracer was loaded");
    assert_eq!(before, host_state());
}

#[test]
fn an_empty_node_name_means_the_hostname() {
    if !can_run(&[]) {
        return;
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned();
    let t = TestCgroup::new("node-name");
    let root = t.path.to_str().unwrap();
    let mut c = std::process::Command::new(agent_bin());
    // A DaemonSet whose fieldRef resolves to nothing sets NODE_NAME="".
    c.env("NODE_NAME", "").args(["audit", "--output", "json", "--cgroup-root", root]);
    let run = integration_tests::run(c);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["node"], hostname.as_str());
    let run = agent(&["audit", "--output", "json", "--node-name", "node-a", "--cgroup-root", root]);
    assert_eq!(run.json()["node"], "node-a");
}

/// Issue 36: `CGAUDIT_NESTED_NODE=1` was refused as bad input ("invalid
/// value '1'"): a switch in the environment takes what Kubernetes users
/// write (1/0, true/false, yes/no), and only nonsense is refused.
#[test]
fn a_switch_in_the_environment_takes_one_and_yes() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("env-switch");
    for value in ["1", "true", "yes", "0", "false", "no"] {
        let run = run({
            let mut c = std::process::Command::new(agent_bin());
            c.args(["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
            c.env("CGAUDIT_NESTED_NODE", value);
            c
        });
        assert_eq!(run.code, 0, "CGAUDIT_NESTED_NODE={value}: {run:?}");
    }
    let mut c = std::process::Command::new(agent_bin());
    c.args(["audit", "--cgroup-root", t.path.to_str().unwrap()]).env("CGAUDIT_NESTED_NODE", "maybe");
    let run = run(c);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("invalid value 'maybe' for '--nested-node'"), "{run:?}");
}
