//! cgroup v1's network controllers, which switch off cgroup2 socket
//! matching: once `net_cls` or `net_prio` is used on a node, the kernel
//! stops running cgroup2 socket programs by the socket's cgroup (a kernel
//! without the fix says so in its log), so socket-LB programs below the
//! root stop matching too.

use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::cgroup::root;
use crate::snapshot::V1NetController;

/// cgroup v1 hierarchies with `net_cls` or `net_prio`: mounted in PID 1's
/// mount namespace (`<proc>/1/mountinfo`), or bound to a hierarchy
/// according to `<proc>/cgroups` (mounted somewhere, perhaps elsewhere).
pub fn v1_net_controllers(proc: &Path) -> Vec<V1NetController> {
    const NET: [&str; 2] = ["net_cls", "net_prio"];
    let mut out = Vec::new();
    if let Ok(mi) = root::read_mountinfo(&proc.join("1/mountinfo")) {
        for m in mi.mounts.iter().filter(|m| m.fs_type == "cgroup") {
            for c in NET.iter().filter(|c| m.super_options.split(',').any(|o| o == **c)) {
                out.push(V1NetController { controller: (*c).to_owned(), mount_point: Some(m.mount_point.clone()) });
            }
        }
    }
    if let Ok(text) = fs::read_to_string(proc.join("cgroups")) {
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = l.split_whitespace().collect();
            if let [name, hierarchy, ..] = f[..]
                && NET.contains(&name)
                && hierarchy != "0"
                && !out.iter().any(|v| v.controller == name)
            {
                out.push(V1NetController { controller: name.to_owned(), mount_point: None });
            }
        }
    }
    out
}

/// The running kernel lacks commit 8520e224f547: its
/// `cgroup_sk_alloc_disable` is still there (a symbol, listed whatever
/// `kptr_restrict` hides of addresses). Read once per process: the kernel
/// does not change under it, and the file is large.
pub fn kernel_lacks_socket_matching_fix() -> bool {
    static LACKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LACKS.get_or_init(|| {
        let Ok(text) = fs::read_to_string("/proc/kallsyms") else { return false };
        text.lines().any(|l| l.rsplit(' ').next() == Some("cgroup_sk_alloc_disable"))
    })
}

/// The kernel's line when it turns socket matching off.
const DISABLED_LINE: &str = "disabling cgroup2 socket matching due to net_prio or net_cls activation";

/// The kernel's log says it turned socket matching off (needs the log to be
/// readable: CAP_SYSLOG, or `dmesg_restrict` 0; and the line not yet rotated out).
fn kernel_log_says_disabled() -> bool {
    use std::io::Read;
    let Ok(mut kmsg) = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open("/dev/kmsg") else {
        return false;
    };
    let mut record = vec![0u8; 8192];
    for _ in 0..200_000 {
        match kmsg.read(&mut record) {
            Ok(0) => return false,
            Ok(n) if String::from_utf8_lossy(&record[..n]).contains(DISABLED_LINE) => return true,
            Ok(_) => {}
            // A record overwritten while reading (EPIPE): the next one.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Whether net_cls/net_prio are in use on the node, as the kernel counts
/// use: its own log line, else what the v1 hierarchies hold now (a non-zero
/// `net_cls.classid`, a priority in `net_prio.ifpriomap`, a task in a
/// net_prio cgroup below its root), read through PID 1's root. At most a
/// few thousand cgroups are read.
pub fn net_controllers_in_use(proc: &Path, v1: &[V1NetController]) -> Option<String> {
    if kernel_log_says_disabled() {
        return Some(format!("the kernel logged \"cgroup: {DISABLED_LINE}\""));
    }
    let mut budget = 4096usize;
    for mp in v1.iter().filter_map(|v| v.mount_point.as_ref()) {
        let top = root::in_root_of(proc, 1, mp);
        let mut dirs = vec![top.clone()];
        while let Some(dir) = dirs.pop() {
            if budget == 0 {
                return None;
            }
            budget -= 1;
            let shown = || mp.join(dir.strip_prefix(&top).unwrap_or(Path::new(""))).display().to_string();
            let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap_or_default();
            let classid = read("net_cls.classid");
            if classid.trim().parse::<u64>().is_ok_and(|c| c != 0) {
                return Some(format!("net_cls.classid {} in {}", classid.trim(), shown()));
            }
            let prio = read("net_prio.ifpriomap");
            if prio.lines().any(|l| l.split_whitespace().nth(1).is_some_and(|p| p != "0")) {
                return Some(format!("net_prio.ifpriomap sets a priority in {}", shown()));
            }
            if dir != top && dir.join("net_prio.prioidx").exists() && !read("cgroup.procs").trim().is_empty() {
                return Some(format!("tasks in the net_prio cgroup {}", shown()));
            }
            if let Ok(entries) = fs::read_dir(&dir) {
                dirs.extend(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
