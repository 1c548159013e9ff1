//! The tasks behind `cargo xtask` (main.rs parses the command line and
//! dispatches here): `runner` (test: host suite, then `guest` on each
//! kernel of `kernels`; `platforms` writes docs/kernels.md's table), `dist`
//! (dist, image), `bench`, and `toolchain` (what every task installs
//! first), with the few helpers they share.

mod arch;
pub mod bench;
mod cilium;
pub mod dist;
mod guest;
pub mod helm;
mod kernels;
#[cfg(test)]
mod layout;
mod platforms;
pub mod runner;
mod tally;
pub mod toolchain;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

use crate::toolchain::{cargo, ebpf_toolchain};

pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_owned()
}

/// Whether `tool` is on PATH (or, given as an absolute path, there).
pub fn on_path(tool: &str) -> bool {
    if Path::new(tool).is_absolute() {
        return Path::new(tool).is_file();
    }
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file())).unwrap_or(false)
}

pub fn run(cmd: &mut Command) -> Result<()> {
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

pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn build() -> Result<()> {
    ebpf_toolchain()?;
    run(cargo().args(["build", "--release", "--package", "agent"]))
}

/// `cargo xtask audit`: the release agent's `audit` on this machine; its
/// exit code is the result.
pub fn audit(args: &[String]) -> Result<ExitCode> {
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
