//! The architectures cgaudit ships for and tests on: one static binary
//! each, one image platform each, one set of Debian kernels each.

use std::fmt;

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
