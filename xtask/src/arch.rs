//! The architectures cgaudit ships for and tests on: one static binary
//! each, one image platform each, one set of Debian kernels each; and the
//! static build for each (`static_cargo`), which dist and the guests share.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::toolchain::cargo;
use crate::{output, run, workspace_root};

/// The test crate's features in static builds: without its CRI client
/// (tonic, k8s-cri), which only the host suite uses.
pub const STATIC_TEST_FEATURES: &[&str] = &["--no-default-features"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

/// Every architecture a release holds, the build machine's first.
pub const ALL: [Arch; 2] = [Arch::X86_64, Arch::Aarch64];

impl Arch {
    /// The musl target the static binary is built for.
    pub fn triple(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-musl",
            Arch::Aarch64 => "aarch64-unknown-linux-musl",
        }
    }

    /// Debian's and OCI's name for it (`linux/<name>`, `linux-image-*-<name>`).
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The ELF `e_machine` its binaries carry.
    pub fn elf_machine(self) -> u16 {
        match self {
            Arch::X86_64 => 62,
            Arch::Aarch64 => 183,
        }
    }

    /// The QEMU system emulator for its guests, and the Debian package
    /// that has it.
    pub fn qemu(self) -> (&'static str, &'static str) {
        match self {
            Arch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
            Arch::Aarch64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }

    /// The architecture this xtask runs on (where KVM could help).
    pub fn native() -> Arch {
        if cfg!(target_arch = "aarch64") { Arch::Aarch64 } else { Arch::X86_64 }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.debian())
    }
}

/// `cargo <subcommand>` for what ships and what runs in the guests: the
/// static `dist` build for `arch` (aarch64 links with the toolchain's own
/// rust-lld, set in .cargo/config.toml).
pub fn static_cargo(arch: Arch, subcommand: &str) -> Command {
    let mut c = cargo();
    c.args([subcommand, "--profile", "dist", "--target", arch.triple()]);
    c
}

/// Where `static_cargo` puts its binaries.
pub fn static_dir(arch: Arch) -> PathBuf {
    workspace_root().join(format!("target/{}/dist", arch.triple()))
}

/// Adds the musl target of `arch` to the toolchain, if missing.
pub fn target_installed(arch: Arch) -> Result<()> {
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if !installed.lines().any(|l| l.trim() == arch.triple()) {
        eprintln!("xtask: installing the {} target", arch.triple());
        run(Command::new("rustup").args(["target", "add", arch.triple()]))?;
    }
    Ok(())
}

/// Fails unless `path` is an ELF executable for `arch`: what `file` checks,
/// read from the header itself (its first 20 bytes).
pub fn check_elf(path: &Path, arch: Arch) -> Result<()> {
    use std::io::Read;
    let mut head = Vec::with_capacity(20);
    std::fs::File::open(path)
        .and_then(|f| f.take(20).read_to_end(&mut head))
        .with_context(|| format!("read {}", path.display()))?;
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        bail!("{} is not an ELF file", path.display());
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    if machine != arch.elf_machine() {
        bail!("{} is built for ELF machine {machine}, not {arch} ({})", path.display(), arch.elf_machine());
    }
    Ok(())
}
