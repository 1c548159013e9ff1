//! Running the agent binary under test and reading what it printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the agent binary is: `$CGAUDIT_AGENT` (set by `cargo xtask test`),
/// else next to this test binary's directory.
pub fn agent_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CGAUDIT_AGENT") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let p = exe.parent().and_then(Path::parent).map(|d| d.join("agent")).expect("target dir");
    assert!(
        p.is_file(),
        "agent binary not found at {}: build it first (`cargo build -p agent`) or run `cargo xtask test`",
        p.display()
    );
    p
}

/// The binary that ships (static, release): `$CGAUDIT_AGENT_STATIC` (set
/// by `cargo xtask test`), else where `cargo xtask dist` puts it.
pub fn shipped_agent_bin() -> PathBuf {
    let p = std::env::var_os("CGAUDIT_AGENT_STATIC").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("target/x86_64-unknown-linux-musl/dist/agent")
    });
    assert!(
        p.is_file(),
        "static agent missing at {}: run `cargo xtask dist` (cargo xtask test builds it)",
        p.display()
    );
    p
}

/// The `fixture` binary (tests/src/bin/fixture/): `$CGAUDIT_FIXTURE`,
/// else next to the agent under test.
pub fn fixture_bin() -> PathBuf {
    std::env::var_os("CGAUDIT_FIXTURE").map(PathBuf::from).unwrap_or_else(|| agent_bin().with_file_name("fixture"))
}

/// A finished agent run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("agent output is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }
}

/// Panics when an error line repeats one of its ": "-separated parts, as
/// "--cgroup-root /x: no such directory: /x: no such directory" did when
/// an error both quoted its cause and returned it as `source()`.
pub fn assert_says_each_thing_once(stderr: &str) {
    for line in stderr.lines() {
        let parts: Vec<&str> = line.split(": ").map(str::trim).filter(|p| p.len() > 3).collect();
        for (i, p) in parts.iter().enumerate() {
            assert!(!parts[i + 1..].contains(p), "{p:?} is said twice in: {line}");
        }
    }
}

/// Runs `cmd` to its end: what it printed, and its peak resident memory
/// in KiB, as GNU time measures it. (A process's own peak counts what it
/// shared with its parent until its exec: measured from this test process,
/// the test's memory would be counted. GNU time's child starts small.)
pub fn run_measured(cmd: Command) -> (Run, u64) {
    let out = tempfile::NamedTempFile::new().expect("tempfile");
    let mut timed = Command::new("/usr/bin/time");
    timed.args(["-f", "%M", "-o"]).arg(out.path()).arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    let run = run(timed);
    let kib = std::fs::read_to_string(out.path()).unwrap_or_default();
    let kib = kib.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or_else(|| panic!("GNU time said {kib:?}"));
    (run, kib)
}

pub fn run(mut cmd: Command) -> Run {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `agent <args>` from the test's own namespaces.
pub fn agent(args: &[&str]) -> Run {
    let mut c = Command::new(agent_bin());
    c.args(args);
    run(c)
}

/// Makes `cmd` (and everything it starts) fail the given syscalls with
/// EPERM, as a hardened seccomp profile or an LSM policy can. A syscall with
/// no rules fails on every call; with rules, only on calls that match one.
pub fn deny_syscalls(cmd: &mut Command, denied: Vec<(i64, Vec<seccompiler::SeccompRule>)>) {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
    use std::os::unix::process::CommandExt;
    let filter = SeccompFilter::new(
        denied.into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        std::env::consts::ARCH.try_into().expect("seccomp arch"),
    )
    .expect("seccomp filter");
    let filter: BpfProgram = filter.try_into().expect("compile seccomp filter");
    // SAFETY: between fork and exec the closure only makes the prctl(2)
    // calls of `apply_filter` (no_new_privs, then the filter compiled above,
    // before the fork); it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || seccompiler::apply_filter(&filter).map_err(std::io::Error::other));
    }
}
