//! Builds `agent-ebpf` for bpfel-unknown-none (nightly, -Z build-std=core,
//! bpf-linker) for the agent's target architecture, once per architecture
//! in a directory every build of the agent shares (`shared_ebpf_dir`), and
//! leaves its objects (`cgroup-events`, `cgroup-iter`) in OUT_DIR, where
//! the agent embeds them: one `agent` binary is all a node needs.

use std::path::{Path, PathBuf};

/// The commit the agent is built from, for `cgaudit_build_info` and the
/// report: `$CGAUDIT_REVISION` when set (a build from a source archive),
/// else `git rev-parse` (with `-dirty` when the agent's sources differ from
/// it), else "unknown".
fn revision(workspace: &Path) -> String {
    println!("cargo:rerun-if-env-changed=CGAUDIT_REVISION");
    if let Some(r) = std::env::var("CGAUDIT_REVISION").ok().filter(|r| !r.is_empty()) {
        return r;
    }
    let dot_git = workspace.join(".git");
    // HEAD names a branch whose ref file (or packed-refs) moves on commit.
    for f in ["HEAD", "packed-refs"] {
        if dot_git.join(f).exists() {
            println!("cargo:rerun-if-changed={}", dot_git.join(f).display());
        }
    }
    if let Ok(head) = std::fs::read_to_string(dot_git.join("HEAD"))
        && let Some(r) = head.trim().strip_prefix("ref: ")
        && dot_git.join(r).exists()
    {
        println!("cargo:rerun-if-changed={}", dot_git.join(r).display());
    }
    // The sources the binary is built from, changed since that commit: the
    // revision says so (`-dirty`), or `agent --version` would name a commit
    // whose bytes it does not hold. Their changes run this again.
    let sources = ["agent", "agent-common", "agent-ebpf", "Cargo.toml", "Cargo.lock"];
    for s in sources {
        println!("cargo:rerun-if-changed={}", workspace.join(s).display());
    }
    let head = git(workspace, &["rev-parse", "--short=12", "HEAD"]);
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no", "--"])
        .args(sources)
        .current_dir(workspace)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty());
    if dirty && head != "unknown" { format!("{head}-dirty") } else { head }
}

/// What `git ARGS` prints in `workspace`, trimmed, or "unknown".
fn git(workspace: &Path, args: &[&str]) -> String {
    std::process::Command::new("git")
        .args(args)
        .current_dir(workspace)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The day the source was committed (`git log`), or `$SOURCE_DATE_EPOCH`'s
/// day when set (a reproducible build), else "unknown": a build's date, and
/// the same for every build of one commit.
fn build_date(workspace: &Path) -> String {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    if let Some(secs) = std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| s.trim().parse::<u64>().ok()) {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        return humantime::format_rfc3339_seconds(at).to_string()[..10].to_owned();
    }
    git(workspace, &["log", "-1", "--format=%cs"])
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let ebpf = Path::new(&manifest).join("../agent-ebpf");
    let ebpf = ebpf.canonicalize().expect("agent-ebpf next to agent");
    let workspace = Path::new(&manifest).join("..");
    println!("cargo:rustc-env=CGAUDIT_REVISION={}", revision(&workspace));
    println!("cargo:rustc-env=CGAUDIT_BUILD_DATE={}", build_date(&workspace));
    println!("cargo:rustc-env=CGAUDIT_TARGET={}", std::env::var("TARGET").unwrap_or_default());
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
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("CARGO_CFG_TARGET_ARCH");
    let shared = shared_ebpf_dir(&out_dir, &arch);
    std::fs::create_dir_all(&shared).unwrap_or_else(|e| panic!("mkdir {}: {e}", shared.display()));
    // One build at a time in the shared directory, and no copy out of it
    // while another build script's aya-build copies in.
    let lock = std::fs::File::create(shared.join(".lock"))
        .unwrap_or_else(|e| panic!("create {}: {e}", shared.join(".lock").display()));
    lock.lock().unwrap_or_else(|e| panic!("lock {}: {e}", shared.join(".lock").display()));
    // aya-build builds into (and copies the objects to) OUT_DIR: pointed at
    // the shared directory for that call.
    // SAFETY: a build script is one thread; nothing reads the environment
    // concurrently.
    unsafe { std::env::set_var("OUT_DIR", &shared) };
    let package = aya_build::Package { name: "agent-ebpf", root_dir: root, ..Default::default() };
    let built = aya_build::build_ebpf([package], aya_build::Toolchain::default());
    // SAFETY: as above.
    unsafe { std::env::set_var("OUT_DIR", &out_dir) };
    if let Err(e) = built {
        panic!("building agent-ebpf failed: {e:#}");
    }
    for object in OBJECTS {
        let (from, to) = (shared.join(object), out_dir.join(object));
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
    }
}

/// The eBPF objects the agent embeds (agent-ebpf's binaries).
const OBJECTS: [&str; 2] = ["cgroup-events", "cgroup-iter"];

/// Where the eBPF objects for `arch` are built: `<target dir>/ebpf/<arch>`,
/// shared by every build of the agent for that architecture (debug,
/// release, dist; with or without test-support; gnu or musl). Cargo runs
/// this script once per such unit, and each would otherwise build
/// nightly's `core` and the programs from scratch in its own OUT_DIR
/// (about a minute each); in the shared directory the second one finds
/// them built. The eBPF build depends only on the sources and
/// `bpf_target_arch`. Falls back to OUT_DIR outside a cargo target dir.
fn shared_ebpf_dir(out_dir: &Path, arch: &str) -> PathBuf {
    out_dir
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .map(|target| target.join("ebpf").join(arch))
        .unwrap_or_else(|| out_dir.join("ebpf"))
}
