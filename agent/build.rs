//! Builds `agent-ebpf` for bpfel-unknown-none (nightly, -Z build-std=core,
//! bpf-linker) and leaves its objects (`bpf-calls`, `cgroup-iter`) in
//! OUT_DIR, where the agent embeds them: one `agent` binary is all a node
//! needs.

use std::path::Path;

/// The commit the agent is built from, for `cgaudit_build_info` and the
/// report: `$CGAUDIT_REVISION` when set (a build from a source archive),
/// else `git rev-parse`, else "unknown".
fn revision(workspace: &Path) -> String {
    println!("cargo:rerun-if-env-changed=CGAUDIT_REVISION");
    if let Some(r) = std::env::var("CGAUDIT_REVISION").ok().filter(|r| !r.is_empty()) {
        return r;
    }
    let git = workspace.join(".git");
    // HEAD names a branch whose ref file (or packed-refs) moves on commit.
    for f in ["HEAD", "packed-refs"] {
        if git.join(f).exists() {
            println!("cargo:rerun-if-changed={}", git.join(f).display());
        }
    }
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD"))
        && let Some(r) = head.trim().strip_prefix("ref: ")
        && git.join(r).exists()
    {
        println!("cargo:rerun-if-changed={}", git.join(r).display());
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(workspace)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let ebpf = Path::new(&manifest).join("../agent-ebpf");
    let ebpf = ebpf.canonicalize().expect("agent-ebpf next to agent");
    let workspace = Path::new(&manifest).join("..");
    println!("cargo:rustc-env=CGAUDIT_REVISION={}", revision(&workspace));
    println!("cargo:rerun-if-env-changed=PATH");
    let on_path =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("bpf-linker").is_file()));
    if !on_path {
        panic!(
            "bpf-linker is not on PATH: the agent embeds its eBPF object, which needs nightly's rust-src and \
             bpf-linker. Run `cargo xtask setup` (installs both) and put ~/.cache/cgaudit/tools/bin on PATH, \
             or build through `cargo xtask build`."
        );
    }
    // aya-build watches the eBPF crate's own directory; the records it
    // shares with the agent live in agent-common.
    let common = Path::new(&manifest).join("../agent-common");
    println!("cargo:rerun-if-changed={}", common.canonicalize().expect("agent-common next to agent").display());
    let root = ebpf.to_str().expect("utf-8 path");
    let package = aya_build::Package { name: "agent-ebpf", root_dir: root, ..Default::default() };
    if let Err(e) = aya_build::build_ebpf([package], aya_build::Toolchain::default()) {
        panic!("building agent-ebpf failed: {e:#}");
    }
}
