//! Fixtures for the real-kernel integration tests: cgroups, programs,
//! attachments, links, bpffs mounts, sandbox "nodes", the daemon and
//! containers, each a guard whose `Drop` undoes it, even when the test
//! panics.
//!
//! Tests need root. Outside CI a test that cannot run says so loudly and
//! returns; under `CI=true` the same situation fails the test, because CI can
//! run everything.

pub mod bpf;
pub mod cgroup;
pub mod cilium;
pub mod cni;
#[cfg(feature = "cri")]
pub mod cri;
pub mod daemon;
pub mod datapath;
#[cfg(feature = "cri")]
pub mod docker;
pub mod fuse;
pub mod guest;
pub mod kubepods;
pub mod lb;
pub mod net;
pub mod owners;
pub mod podman;
pub mod prom;
pub mod sandbox;
pub mod seed;
pub mod sources;
pub mod spawn;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

pub use bpf::*;
pub use cgroup::*;
pub use cni::*;
#[cfg(feature = "cri")]
pub use cri::*;
pub use daemon::*;
pub use fuse::*;
pub use kubepods::*;
pub use podman::*;
pub use prom::*;
pub use sandbox::*;
pub use seed::*;
pub use spawn::*;

/// Returns false (after saying why) when the test cannot run here; panics
/// instead under CI, where a skip would hide a missing install step.
pub fn can_run(requirements: &[&str]) -> bool {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root".to_owned());
    }
    for tool in requirements {
        if which(tool).is_none() {
            missing.push(format!("the `{tool}` command"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!("this test needs {}", missing.join(", "));
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0") {
        panic!("{msg}; under CI a skipped test is a failure (install it with `cargo xtask test`)");
    }
    eprintln!("SKIPPED: {msg}");
    false
}

pub fn which(tool: &str) -> Option<PathBuf> {
    // A tool outside PATH (CNI plugins) is named by its path.
    if tool.starts_with('/') {
        return Path::new(tool).is_file().then(|| PathBuf::from(tool));
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique name for this process and call.
pub fn unique(tag: &str) -> String {
    format!("cgaudit-test-{tag}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A JSON report without what says how and when it was read (the walk,
/// the kernel features that walk tried, the time it was made): what two
/// readings of one node must agree on.
pub fn what_was_found(mut report: serde_json::Value) -> serde_json::Value {
    if let Some(r) = report.as_object_mut() {
        for how in ["walk", "kernel_features", "generated_at"] {
            r.remove(how);
        }
        // Each program's own flags are the in-kernel walk's to read
        // (`BPF_PROG_QUERY` does not give them): the syscall walk says null.
        if let Some(atts) = r.get_mut("attachments").and_then(|a| a.as_array_mut()) {
            for a in atts.iter_mut().filter_map(|a| a.as_object_mut()) {
                a.remove("preorder");
            }
        }
    }
    report
}
