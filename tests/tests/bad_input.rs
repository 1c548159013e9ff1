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
    assert!(run.stderr.contains("[possible values: table, json]"), "{}", run.stderr);
    let run = agent(&["audit", "--bogus"]);
    assert_eq!(run.code, 2, "{run:?}");
    let run = agent(&["audit", "--walk", "fast"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("[possible values: auto, bpf-iter, syscalls]"), "{}", run.stderr);
    assert_eq!(before, host_state());
}

#[test]
fn no_cgroup2_mounted_anywhere_is_refused() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    // A node whose mount namespace has no cgroup2 at all (cgroup v1 only).
    let sb =
        Sandbox::new(r#"for m in $(awk '$9 == "cgroup2" { print $5 }' /proc/self/mountinfo); do umount -l "$m"; done"#);
    let run = sb.agent(&["audit"]);
    assert_refused(&run, "no cgroup2 filesystem is mounted");
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
    // Root without CAP_SYS_ADMIN is refused the same way.
    let mut c = std::process::Command::new("setpriv");
    c.args(["--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--"])
        .arg(agent_bin())
        .args(["audit", "--output", "json"]);
    assert_refused(&integration_tests::run(c), "missing capability CAP_SYS_ADMIN");
    assert_eq!(before, host_state());
}
