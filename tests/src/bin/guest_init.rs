//! PID 1 of a kernel-matrix guest (`cargo xtask test`, xtask/src/guest.rs).
//!
//! Mounts what a node has, runs the guest tests of the boot profile one at
//! a time, says how they ended on the console and powers the machine off.
//! Everything it is told comes on the kernel command line:
//!
//! - `cgaudit.run=probe`: only say `cgaudit-guest: up` and power off (xtask
//!   checks whether KVM boots here);
//! - `cgaudit.boot=v2`: cgroup2 at /sys/fs/cgroup, as systemd's unified
//!   layout mounts it; `cgaudit.boot=v1`: cgroup v1 controllers only, as a
//!   legacy node (Amazon Linux 2) has them, and no cgroup2 anywhere;
//! - `cgaudit.label=6.1`: the matrix's name for this kernel;
//! - `cgaudit.filter=NAME`: run only the tests whose name holds NAME.
//!
//! The tests run with `CGAUDIT_GUEST=<label>` and `CGAUDIT_BOOT=<profile>`
//! set, which is how they know they may use the real root cgroup and this
//! process's namespaces.

use std::process::Command;

use nix::mount::{MsFlags, mount};
use nix::sys::reboot::{RebootMode, reboot};
use nix::sys::wait::{WaitStatus, waitpid};

/// The value of `cgaudit.<key>=` on the kernel command line.
fn param(cmdline: &str, key: &str) -> Option<String> {
    let key = format!("cgaudit.{key}=");
    cmdline.split_whitespace().find_map(|w| w.strip_prefix(&key)).map(str::to_owned)
}

fn mount_fs(source: &str, target: &str, fstype: &str, data: Option<&str>) {
    let _ = std::fs::create_dir_all(target);
    // Device nodes only where they live (`nodev` on /dev would make even
    // /dev/null unopenable).
    let flags = if fstype == "devtmpfs" { MsFlags::MS_NOSUID } else { MsFlags::MS_NOSUID | MsFlags::MS_NODEV };
    if let Err(e) = mount(Some(source), target, Some(fstype), flags, data) {
        println!("cgaudit-guest: mount {fstype} at {target}: {e}");
    }
}

/// The v1 hierarchies of a legacy systemd node (its `name=systemd`
/// hierarchy, and one per controller group) on a tmpfs at /sys/fs/cgroup.
fn mount_v1() {
    mount_fs("tmpfs", "/sys/fs/cgroup", "tmpfs", Some("mode=755"));
    mount_fs("cgroup", "/sys/fs/cgroup/systemd", "cgroup", Some("none,name=systemd"));
    // Only controllers this kernel offers to v1 (6.12 builds memcg v1 no more).
    let known = std::fs::read_to_string("/proc/cgroups").unwrap_or_default();
    let has = |c: &str| known.lines().any(|l| l.split_whitespace().next() == Some(c));
    for controllers in ["cpu,cpuacct", "memory", "pids", "devices", "freezer", "blkio", "net_cls,net_prio"] {
        if controllers.split(',').all(has) {
            mount_fs("cgroup", &format!("/sys/fs/cgroup/{controllers}"), "cgroup", Some(controllers));
        }
    }
}

/// Loads the modules xtask appended (`lib/modules/cgaudit/`: veth, clsact,
/// the bpf classifier), as a node's boot would, compressed ones through the
/// kernel's own decompressor.
fn load_modules() {
    let Ok(entries) = std::fs::read_dir("/lib/modules/cgaudit") else { return };
    for e in entries.flatten() {
        let path = e.path();
        let compressed = path.extension().is_some_and(|x| x != "ko");
        // MODULE_INIT_COMPRESSED_FILE (5.17+), which nix does not name.
        let flags = if compressed {
            nix::kmod::ModuleInitFlags::from_bits_retain(4)
        } else {
            nix::kmod::ModuleInitFlags::empty()
        };
        let loaded = std::fs::File::open(&path)
            .map_err(|e| e.to_string())
            .and_then(|f| nix::kmod::finit_module(&f, c"", flags).map_err(|e| e.to_string()));
        if let Err(e) = loaded {
            println!("cgaudit-guest: load {}: {e}", path.display());
        }
    }
}

fn main() {
    mount_fs("proc", "/proc", "proc", None);
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    mount_fs("sysfs", "/sys", "sysfs", None);
    mount_fs("devtmpfs", "/dev", "devtmpfs", None);
    mount_fs("tmpfs", "/run", "tmpfs", Some("mode=755"));
    mount_fs("tmpfs", "/tmp", "tmpfs", Some("mode=1777"));
    let boot = param(&cmdline, "boot").unwrap_or_else(|| "v2".into());
    match boot.as_str() {
        "v1" => mount_v1(),
        _ => mount_fs("cgroup2", "/sys/fs/cgroup", "cgroup2", None),
    }
    mount_fs("bpf", "/sys/fs/bpf", "bpf", None);
    mount_fs("tracefs", "/sys/kernel/tracing", "tracefs", None);
    if let Err(e) = integration_tests::net::loopback_up() {
        println!("cgaudit-guest: lo up: {e}");
    }
    load_modules();
    let label = param(&cmdline, "label").unwrap_or_default();
    let _ = nix::unistd::sethostname(format!("guest-{}", label.replace('.', "-")));
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!("cgaudit-guest: up {}", release.trim());

    // A test runner's limit for locked memory: before 5.11 every BPF map
    // and program counts against it, and tests load and drop many (their
    // memory is freed asynchronously). What a node's processes get is what
    // the tests that care set for themselves (`fixture memlock-64k`).
    let unlimited = nix::sys::resource::RLIM_INFINITY;
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK, unlimited, unlimited);
    let code = if param(&cmdline, "run").as_deref() == Some("tests") {
        let mut cmd = Command::new("/bin/guest-tests");
        // Only the tests of this boot's profile (the module of that name)
        // whose name holds the filter: libtest ORs its filters, so the
        // names are chosen here and passed exactly.
        let filter = param(&cmdline, "filter").unwrap_or_default();
        let names: Vec<String> =
            list_tests().into_iter().filter(|n| n.starts_with(&format!("{boot}::")) && n.contains(&filter)).collect();
        if names.is_empty() {
            println!("cgaudit-guest: no guest test of the {boot} profile matches {filter:?}");
        }
        cmd.args(["--test-threads=1", "--exact", "--show-output"])
            .args(&names)
            .env_clear()
            .env("PATH", "/bin")
            .env("HOME", "/root")
            .env("CI", "true")
            .env("RUST_BACKTRACE", "1")
            .env("CGAUDIT_GUEST", &label)
            .env("CGAUDIT_BOOT", &boot)
            .env("CGAUDIT_AGENT", "/bin/agent")
            .env("CGAUDIT_AGENT_STATIC", "/bin/agent")
            .env("CGAUDIT_FIXTURE_STATIC", "/bin/fixture")
            .env("CGAUDIT_CILIUM_OBJECTS", "/cilium");
        if names.is_empty() { 1 } else { run(cmd) }
    } else {
        0
    };
    println!("cgaudit-guest: exit {code}");
    nix::unistd::sync();
    let _ = reboot(RebootMode::RB_POWER_OFF);
}

/// The names of the guest tests (`--list --format terse`: `name: test`).
fn list_tests() -> Vec<String> {
    match Command::new("/bin/guest-tests").args(["--list", "--format", "terse"]).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_suffix(": test"))
            .map(str::to_owned)
            .collect(),
        Ok(out) => {
            println!(
                "cgaudit-guest: listing the guest tests failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            Vec::new()
        }
        Err(e) => {
            println!("cgaudit-guest: cannot run /bin/guest-tests: {e}");
            Vec::new()
        }
    }
}

/// Runs the tests and waits for them, reaping whatever else ends meanwhile
/// (as PID 1, orphans become ours).
fn run(mut cmd: Command) -> i32 {
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            println!("cgaudit-guest: cannot start the guest tests: {e}");
            return 127;
        }
    };
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(p, code)) if p == pid => return code,
            Ok(WaitStatus::Signaled(p, signal, _)) if p == pid => {
                println!("cgaudit-guest: the guest tests were killed by {signal}");
                return 128 + signal as i32;
            }
            Ok(_) => {}
            Err(e) => {
                println!("cgaudit-guest: waitpid: {e}");
                return 126;
            }
        }
    }
}
