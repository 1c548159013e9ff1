//! Project tasks: `cargo xtask <task>`. Each task installs what it needs
//! first (Debian packages), says what it is doing, and fails loudly.
//!
//! - `cargo xtask audit [ARGS]`: build the agent and run `agent audit ARGS` here.
//! - `cargo xtask test`: lints, unit tests, the privileged real-kernel suite
//!   on this machine's kernel, then the guest suite on each kernel of the
//!   matrix (Debian's 5.10, 6.1 and 6.12 for x86_64 and arm64, booted under
//!   QEMU); `--kernel LABEL` runs the suites of the
//!   kernels named.
//! - `cargo xtask build`: the release binary, `target/release/agent`.
//! - `cargo xtask dist`: the static, stripped binaries that ship (x86_64,
//!   aarch64), their SBOMs and checksums (`dist`).
//! - `cargo xtask image`: the multi-arch image, built offline with podman.
//! - `cargo xtask bench`: the performance figures of docs/performance.md,
//!   each beside its reference tool in the same run (`--audit`, `--tax`,
//!   `--daemon`, `--hostile`, `--revision` for one part).
//! - `cargo xtask setup`: only install what the build and the tests need.
//!
//! This file is the command line and its dispatch; the tasks are in the
//! library (lib.rs).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use xtask::dist::{dist, image, push_image, repository};
use xtask::helm::deploy_tools;
use xtask::toolchain::{ebpf_toolchain, setup};
use xtask::{audit, bench, build, runner};

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
        /// Only what an ordinary eBPF tenant costs the agent and the node:
        /// a tenant filling every socket-LB hook (the daemon's memory), a
        /// deep cgroup chain churned (another pod's mkdir latency), silent
        /// connections (the probes' success rate).
        #[arg(long)]
        hostile: bool,
        /// Only the node's devices: the audit on a node of 64 devices with
        /// 4 Cilium programs each, beside `bpftool net show`.
        #[arg(long)]
        devices: bool,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Audit { args } => audit(&args),
        Task::Test { kernels, args } => runner::test(&kernels, &args).map(|()| ExitCode::SUCCESS),
        Task::Build => build().map(|()| ExitCode::SUCCESS),
        Task::Dist => dist().map(|_| ExitCode::SUCCESS),
        Task::Image { push } => image()
            .and_then(|tag| match push {
                Some(repository) => push_image(&tag, &repository),
                None => Ok(tag),
            })
            .map(|_| ExitCode::SUCCESS),
        Task::Bench { quick, audit, daemon, tax, hostile, devices, churn, rounds } => {
            let mut flags: Vec<String> = [
                (quick, "--quick"),
                (audit, "--audit"),
                (daemon, "--daemon"),
                (tax, "--tax"),
                (hostile, "--hostile"),
                (devices, "--devices"),
            ]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, f)| f.to_owned())
            .collect();
            if let Some(n) = churn {
                flags.extend(["--churn".into(), n.to_string(), "--rounds".into(), rounds.to_string()]);
            }
            bench::bench(&flags).map(|()| ExitCode::SUCCESS)
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
