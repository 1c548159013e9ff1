//! `cargo xtask bench`: the benchmark binary (`tests/src/bin/bench/`),
//! built in release, against the release agent, with bpftool side by side.

use std::process::Command;

use anyhow::{Result, bail};

use crate::runner::clear_dead_runs;
use crate::toolchain::{cargo, is_root, setup};
use crate::{build, on_path, run, workspace_root};

/// Runs the benchmark with `flags` (as `cargo xtask bench --help` lists them).
pub fn bench(flags: &[String]) -> Result<()> {
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
