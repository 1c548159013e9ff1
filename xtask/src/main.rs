//! Project tasks: `cargo xtask <task>`. Each task installs what it needs
//! first (Debian packages), says what it is doing, and fails loudly.
//!
//! - `cargo xtask audit [ARGS]`: build the agent and run `agent audit ARGS` here.
//! - `cargo xtask test`: unit tests, then the privileged real-kernel suite.
//! - `cargo xtask setup`: only install the test dependencies.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

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
    /// Run every test: format and lint checks, unit tests, then the
    /// real-kernel integration suite (needs root). Installs missing test
    /// tools first.
    Test {
        /// Extra arguments for the integration test binaries (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Install the Debian packages the tests use, if missing.
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
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_owned()
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file())).unwrap_or(false)
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd.status().with_context(|| format!("could not start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// apt-get installs the packages of any missing test tool.
fn setup() -> Result<()> {
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
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&packages)
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    for (tool, pkg) in TEST_TOOLS {
        if !on_path(tool) {
            bail!("`{tool}` is still missing after installing {pkg}");
        }
    }
    Ok(())
}

/// Test counts summed over every `test result:` line cargo printed.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Tally {
    fn add_line(&mut self, line: &str) {
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
    let mut child =
        cmd.stdout(std::process::Stdio::piped()).spawn().with_context(|| format!("could not start {cmd:?}"))?;
    let stdout = child.stdout.take().context("cargo test stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo test output")?;
        tally.add_line(&line);
        let _ = writeln!(std::io::stdout(), "{line}");
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

fn audit(args: &[String]) -> Result<ExitCode> {
    run(cargo().args(["build", "--release", "--package", "agent"]))?;
    let bin = workspace_root().join("target/release/agent");
    let status = Command::new(&bin)
        .arg("audit")
        .args(args)
        .status()
        .with_context(|| format!("could not start {}", bin.display()))?;
    // The agent's exit code is the result (0 OK, 1 problem, 2 unknown).
    Ok(ExitCode::from(status.code().unwrap_or(2) as u8))
}

fn test(args: &[String]) -> Result<()> {
    if !is_root() {
        bail!("the integration suite creates cgroups and loads BPF programs: run `cargo xtask test` as root");
    }
    setup()?;
    let mut tally = Tally::default();
    let result = (|| {
        // The lints carry project rules (every unsafe block documented).
        run(cargo().args(["fmt", "--all", "--check"]))?;
        run(cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
        run_tests(cargo().args(["test", "--package", "agent", "--package", "xtask"]), &mut tally)?;
        run(cargo().args(["build", "--package", "agent"]))?;
        let agent = workspace_root().join("target/debug/agent");
        // One test at a time: the tests share one kernel, and some audit the
        // whole node, which another test's programs would disturb.
        run_tests(
            cargo()
                .args(["test", "--package", "integration-tests", "--", "--test-threads=1"])
                .args(args)
                .env("CGAUDIT_AGENT", &agent)
                .env("RUST_BACKTRACE", "1"),
            &mut tally,
        )
    })();
    // One closing line over every test binary (cargo's last line is only the
    // last binary's).
    println!("summary: {} passed, {} failed, {} skipped", tally.passed, tally.failed, tally.ignored);
    result?;
    if tally.passed == 0 {
        bail!("no test ran");
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Audit { args } => audit(&args),
        Task::Test { args } => test(&args).map(|()| ExitCode::SUCCESS),
        Task::Setup => setup().map(|()| ExitCode::SUCCESS),
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
    use super::Tally;

    #[test]
    fn tally_sums_every_result_line() {
        let mut t = Tally::default();
        t.add_line("test result: ok. 41 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.00s");
        t.add_line("test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.37s");
        t.add_line("running 3 tests");
        assert_eq!((t.passed, t.failed, t.ignored), (43, 1, 2));
    }
}
