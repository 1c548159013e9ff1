//! Booting the kernel matrix: one initramfs (a static init, the static
//! agent, the static `fixture` and the guest test binary; no shell), with
//! each kernel's few modules appended (`kernels::MODULES`), booted under
//! QEMU once per kernel and boot profile, results read
//! back from the serial console, as aya runs its integration tests on the
//! kernels it supports.
//!
//! Inside, `guest-init` (tests/src/bin/guest_init.rs) is PID 1: it mounts
//! what a node has (cgroup2, or only v1 controllers for the `v1` profile),
//! runs the guest tests of that profile one at a time, prints
//! `cgaudit-guest: exit <code>` and powers off. The tests use the real root
//! cgroup, PID 1's namespaces and real mounts: the machine is thrown away.
//!
//! `/dev/kvm` is tried first (a boot to a marker within a few seconds);
//! where it cannot run these kernels (a nested host refusing them), QEMU
//! emulates the CPU (TCG), which the results say.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::arch::{Arch, STATIC_TEST_FEATURES, check_elf, static_cargo, static_dir};
use crate::kernels::Fetched;
use crate::tally::Tally;
use crate::{run, workspace_root};

/// The guests' boot profiles: which cgroup hierarchies init mounts, and
/// which guest tests (the module of that name) run.
pub const PROFILES: &[&str] = &["v2", "v1"];

/// Longest a boot may take, tests included, under emulation.
const BOOT_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// How long a KVM boot may take to reach init before KVM is given up.
const KVM_PROBE: Duration = Duration::from_secs(12);

/// The static binaries the initramfs holds.
pub struct GuestBinaries {
    pub agent: PathBuf,
    pub fixture: PathBuf,
    pub init: PathBuf,
    pub tests: PathBuf,
}

/// Builds the init and the guest test binary (static, like the agent and
/// the fixture `dist` already built).
pub fn build(arch: Arch, agent: PathBuf) -> Result<GuestBinaries> {
    run(static_cargo(arch, "build").args(STATIC_TEST_FEATURES).args([
        "--package",
        "integration-tests",
        "--bin",
        "fixture",
        "--bin",
        "guest-init",
    ]))?;
    let bin = static_dir(arch);
    // The test binary's file name carries a hash: cargo names it.
    let built = static_cargo(arch, "test")
        .args(STATIC_TEST_FEATURES)
        .args([
            "--no-run",
            "--package",
            "integration-tests",
            "--test",
            "guest",
            "--message-format",
            "json-diagnostic-rendered-ansi",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo test --no-run for the guest tests")?;
    let json = String::from_utf8_lossy(&built.stdout);
    if !built.status.success() {
        // The compiler's messages are in the JSON: show them as it would.
        for m in json.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
            if let Some(text) = m["message"]["rendered"].as_str() {
                eprint!("{text}");
            }
        }
        bail!("building the guest tests failed");
    }
    let tests = json
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "guest")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .context("cargo built no executable for the guest tests")?;
    Ok(GuestBinaries { agent, fixture: bin.join("fixture"), init: bin.join("guest-init"), tests })
}

/// Writes the initramfs (newc cpio, uncompressed) holding `b`, built for `arch`.
pub fn initramfs(arch: Arch, b: &GuestBinaries) -> Result<PathBuf> {
    let root = workspace_root().join(format!("target/guest/{arch}/rootfs"));
    let _ = std::fs::remove_dir_all(&root);
    for d in ["bin", "proc", "sys", "dev", "run", "tmp", "var/tmp", "etc", "root"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    let copy = |from: &Path, to: &str| -> Result<()> {
        check_elf(from, arch)?;
        std::fs::copy(from, root.join(to)).with_context(|| format!("copy {} into the initramfs", from.display()))?;
        Ok(())
    };
    copy(&b.init, "init")?;
    copy(&b.agent, "bin/agent")?;
    copy(&b.fixture, "bin/fixture")?;
    copy(&b.tests, "bin/guest-tests")?;
    // Cilium's own objects, for the device tests (BPF: any architecture).
    std::fs::create_dir_all(root.join("cilium"))?;
    let objects = crate::cilium::objects()?;
    for o in ["bpf_host.o", "bpf_overlay.o"] {
        std::fs::copy(objects.join(o), root.join("cilium").join(o))
            .with_context(|| format!("copy {} into the initramfs", objects.join(o).display()))?;
    }
    let image = workspace_root().join(format!("target/guest/{arch}/initramfs.cpio"));
    run(Command::new("sh")
        .current_dir(&root)
        .arg("-c")
        .arg(format!("find . -print | cpio --quiet -o -H newc -R 0:0 > '{}'", image.display())))?;
    Ok(image)
}

/// `initramfs` followed by `kernel`'s modules, as one file beside it.
fn with_modules(initramfs: &Path, kernel: &Fetched) -> Result<PathBuf> {
    let out = initramfs.with_file_name(format!("initramfs-{}.cpio", kernel.label));
    let mut bytes = std::fs::read(initramfs).with_context(|| format!("read {}", initramfs.display()))?;
    bytes.extend(std::fs::read(&kernel.modules).with_context(|| format!("read {}", kernel.modules.display()))?);
    std::fs::write(&out, bytes).with_context(|| format!("write {}", out.display()))?;
    Ok(out)
}

/// How QEMU runs the guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    fn args(self) -> &'static [&'static str] {
        match self {
            Accel::Kvm => &["-accel", "kvm"],
            Accel::Tcg => &["-accel", "tcg,thread=multi"],
        }
    }
}

/// What one boot printed and how it ended.
pub struct Boot {
    pub lines: Vec<String>,
    /// The guest test binary's exit code, when init got to say it.
    pub exit: Option<i32>,
    pub elapsed: Duration,
    /// Seconds from power-on to init (its `up` marker).
    pub to_init: Option<Duration>,
}

fn qemu(arch: Arch, kernel: &Path, initramfs: &Path, accel: Accel, append: &str) -> Command {
    let mut c = Command::new(arch.qemu().0);
    c.args(["-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio", "-m", "1024", "-smp", "2"]);
    let console = match arch {
        Arch::X86_64 => "ttyS0",
        // The `virt` board (its PL011 UART is the console) with every CPU
        // feature TCG has; pauth-impdef: QEMU's own pointer-authentication
        // algorithm, much cheaper to emulate than the architected one.
        Arch::Aarch64 => {
            c.args(["-M", "virt", "-cpu", "max,pauth-impdef=on"]);
            "ttyAMA0"
        }
    };
    c.args(accel.args())
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(initramfs)
        .arg("-append")
        .arg(format!("console={console} panic=-1 quiet {append}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // QEMU goes with xtask, however xtask ends (Ctrl-C, a panic, a kill):
    // no guest is left running behind a test run.
    // SAFETY: the closure runs in the forked child before exec and only
    // makes one async-signal-safe call (prctl).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
    c
}

/// Boots once and reads the console until QEMU exits or `timeout` passes
/// (then it is killed). `echo` prints each line as it comes.
fn boot_once(
    arch: Arch,
    kernel: &Path,
    initramfs: &Path,
    accel: Accel,
    append: &str,
    timeout: Duration,
    echo: Option<&str>,
) -> Result<Boot> {
    let started = Instant::now();
    let mut child =
        qemu(arch, kernel, initramfs, accel, append).spawn().with_context(|| format!("start {}", arch.qemu().0))?;
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().context("qemu stdout")?;
    let stderr = child.stderr.take().context("qemu stderr")?;
    let err_tx = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = err_tx.send(format!("qemu: {line}"));
        }
    });
    std::thread::spawn(move || {
        // The console is raw bytes (a kernel message may cut a line).
        let mut r = BufReader::new(stdout);
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            let line = String::from_utf8_lossy(&buf).trim_end_matches(['\r', '\n']).to_owned();
            buf.clear();
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut boot = Boot { lines: Vec::new(), exit: None, elapsed: Duration::ZERO, to_init: None };
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        match rx.recv_timeout(left.min(Duration::from_millis(500))) {
            Ok(line) => {
                let clean = strip_escapes(&line);
                if clean.contains("cgaudit-guest: up") && boot.to_init.is_none() {
                    boot.to_init = Some(started.elapsed());
                }
                if let Some(code) = clean.split("cgaudit-guest: exit ").nth(1) {
                    boot.exit = code.trim().parse().ok();
                }
                if let Some(prefix) = echo {
                    println!("{prefix} {clean}");
                }
                boot.lines.push(clean);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if started.elapsed() >= timeout {
                    let _ = child.kill();
                    boot.lines.push(format!("(killed after {timeout:?})"));
                    break;
                }
            }
        }
    }
    let _ = child.wait();
    boot.elapsed = started.elapsed();
    Ok(boot)
}

/// Whether KVM can boot these kernels here: one boot to init's marker.
pub fn probe_accel(kernel: &Fetched, initramfs: &Path) -> Result<Accel> {
    if kernel.arch != Arch::native() {
        eprintln!("xtask: {} guests on an {} machine run under emulation (TCG)", kernel.arch, Arch::native());
        return Ok(Accel::Tcg);
    }
    if !Path::new("/dev/kvm").exists() {
        eprintln!("xtask: no /dev/kvm: the guests run under emulation (TCG)");
        return Ok(Accel::Tcg);
    }
    let b = boot_once(kernel.arch, &kernel.vmlinuz, initramfs, Accel::Kvm, "cgaudit.run=probe", KVM_PROBE, None)?;
    if b.to_init.is_some() {
        eprintln!("xtask: KVM boots {}: the guests run on KVM", kernel.package);
        return Ok(Accel::Kvm);
    }
    let mut why = format!("no boot to init within {}s", KVM_PROBE.as_secs());
    if let Some(qemu) = b.lines.iter().rev().find(|l| l.starts_with("qemu:")) {
        why.push_str(&format!("; last said: {qemu}"));
    }
    eprintln!("xtask: /dev/kvm cannot boot {} here ({why}): the guests run under emulation (TCG)", kernel.package);
    Ok(Accel::Tcg)
}

/// The outcome of one kernel's boots.
pub struct KernelResult {
    pub label: &'static str,
    pub arch: Arch,
    pub package: String,
    /// `[label] test name` of each failure, or of a boot that gave no result.
    pub failures: Vec<String>,
    /// Boots that died before init and were booted once more (what they
    /// last said).
    pub reboots: Vec<String>,
    /// (profile, boot to init, whole boot).
    pub timings: Vec<(&'static str, Option<Duration>, Duration)>,
    /// What the tests found this platform does (`cgaudit-platform:
    /// KEY=VALUE` lines): walk, event sources, remount path.
    pub platform: std::collections::BTreeMap<String, String>,
}

/// Boots `kernel` once per profile, running that profile's guest tests
/// (`filter` narrows them further), and adds their counts to `tally`.
pub fn run_kernel(
    kernel: &Fetched,
    initramfs: &Path,
    accel: Accel,
    filter: Option<&str>,
    tally: &mut Tally,
) -> Result<KernelResult> {
    let mut result = KernelResult {
        label: kernel.label,
        arch: kernel.arch,
        platform: Default::default(),
        package: kernel.package.clone(),
        failures: Vec::new(),
        reboots: Vec::new(),
        timings: Vec::new(),
    };
    for profile in PROFILES {
        let mut append = format!("cgaudit.run=tests cgaudit.boot={profile} cgaudit.label={}", kernel.label);
        if let Some(f) = filter {
            if f.contains(char::is_whitespace) {
                bail!("a guest test filter cannot hold white space: {f:?}");
            }
            append.push_str(&format!(" cgaudit.filter={f}"));
        }
        let prefix = format!("[{} {profile}]", kernel.label);
        // The initramfs with this kernel's modules appended (the kernel
        // unpacks concatenated archives in turn).
        let initramfs = &with_modules(initramfs, kernel)?;
        eprintln!("xtask: booting {} ({profile} profile, {accel:?})", kernel.package);
        let mut boot = boot_once(kernel.arch, &kernel.vmlinuz, initramfs, accel, &append, BOOT_TIMEOUT, Some(&prefix))?;
        if boot.to_init.is_none() {
            // The kernel died before init ran (no test had started): an
            // emulator's or a kernel's flake, not a test's result. One more
            // boot, said aloud; a second death is a failure as before.
            let last = boot.lines.iter().rev().find(|l| !l.trim().is_empty()).cloned().unwrap_or_default();
            eprintln!(
                "xtask: {} ({profile}) never reached init after {:.0?} (last said: {last}); booting it once more",
                kernel.package, boot.elapsed
            );
            result.reboots.push(format!("[{}] {profile}: {last}", kernel.label));
            boot = boot_once(kernel.arch, &kernel.vmlinuz, initramfs, accel, &append, BOOT_TIMEOUT, Some(&prefix))?;
        }
        let failed_before = result.failures.len();
        for line in &boot.lines {
            tally.add_line(line);
            if let Some((key, value)) = line.strip_prefix("cgaudit-platform: ").and_then(|l| l.split_once('=')) {
                result.platform.insert(key.to_owned(), value.trim().to_owned());
            }
            if let Some(name) = line.strip_prefix("test ").and_then(|l| l.strip_suffix(" ... FAILED")) {
                result.failures.push(format!("[{}] {name}", kernel.label));
            }
        }
        match boot.exit {
            Some(0) => {}
            Some(code) if result.failures.len() == failed_before => {
                result.failures.push(format!("[{}] {profile} boot: the guest tests exited {code}", kernel.label));
                tally.failed += 1;
            }
            Some(_) => {}
            None => {
                let last = boot.lines.iter().rev().take(3).cloned().collect::<Vec<_>>();
                result.failures.push(format!(
                    "[{}] {profile} boot: no result (kernel panic, a hang or QEMU failing): {}",
                    kernel.label,
                    last.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ));
                tally.failed += 1;
            }
        }
        result.timings.push((profile, boot.to_init, boot.elapsed));
    }
    Ok(result)
}

/// Drops terminal escape sequences (the firmware clears the screen).
fn strip_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        if c.is_control() && c != '\t' {
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strip_escapes;

    #[test]
    fn console_escapes_are_dropped() {
        assert_eq!(strip_escapes("c\u{1b}[?7l\u{1b}[2Jcgaudit-guest: up\r"), "ccgaudit-guest: up");
        assert_eq!(strip_escapes("test a ... ok"), "test a ... ok");
    }
}
