//! `cargo xtask test`: the host suite (lints, unit tests, the privileged
//! integration tests on this machine's kernel), then the guest suite on each
//! kernel of the matrix, one closing count over all of them, and the check
//! that nothing was left behind on the host.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::arch::{self, Arch};
use crate::dist::{self, dist, image};
use crate::helm::deploy_tools;
use crate::tally::Tally;
use crate::toolchain::{cargo, ebpf_toolchain, is_root, setup};
use crate::{guest, kernels, on_path, output, platforms, run, workspace_root};

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
pub(crate) fn clear_dead_runs() -> Result<()> {
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
    let cilium = crate::cilium::objects()?;
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
            .env("CGAUDIT_CILIUM_OBJECTS", &cilium)
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

pub fn test(kernels: &[String], args: &[String]) -> Result<()> {
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
            for b in &r.reboots {
                println!("booted once more (the first died before init): {b}");
            }
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
    // Every kernel, every test: what docs/kernels.md says each platform does.
    if results.len() == kernels::MATRIX.len() && filter.is_none() {
        platforms::update(&workspace_root().join("docs/kernels.md"), &results)?;
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

#[cfg(test)]
mod tests {
    use super::test_cgroup_creator;

    #[test]
    fn a_test_cgroup_names_the_run_that_made_it() {
        assert_eq!(test_cgroup_creator("cgaudit-test-bench-audit-475-5"), Some(475));
        assert_eq!(test_cgroup_creator("cgaudit-test-node-12-0"), Some(12));
        assert_eq!(test_cgroup_creator("cgaudit-test-classid"), None);
        assert_eq!(test_cgroup_creator("cgaudit-test-12-0"), None);
        assert_eq!(test_cgroup_creator("kubepods-475-5"), None);
    }
}
