//! The kernel matrix: the Debian kernels fleets run (5.10, 6.1, 6.12), for
//! x86_64 and for arm64, fetched once into `~/.cache/cgaudit/kernels/` and
//! booted by `guest`.
//!
//! Packages come through a private apt configuration (its own sources
//! list, lists and cache directories under `~/.cache/cgaudit/apt/`; the
//! machine's apt state is never touched; arm64's is apt told
//! `APT::Architecture=arm64`) whose mirror is read at run time
//! from the machine's own `/etc/apt/sources.list.d/debian.sources`: no
//! registry host is written in this repository. Only `boot/` of each
//! package is unpacked (the kernel and its config), with the few modules the
//! pods' network needs (`MODULES`), packed as a cpio the boot appends to the
//! initramfs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::arch::Arch;
use crate::toolchain::cache_dir;
use crate::{output, run};

/// One kernel of the matrix.
pub struct Kernel {
    /// What `--kernel` and the results call it (`[5.10] ...`, `[6.1-arm64] ...`).
    pub label: &'static str,
    pub arch: Arch,
    /// The Debian suite that ships it.
    suite: &'static str,
    package: Package,
}

/// Which package of a suite.
enum Package {
    /// This one: 5.10.0-32 (5.10.223) is the last bullseye kernel before
    /// commit 8520e224f547 reached 5.10.y (5.10.226), which the v1 net_cls
    /// scenario needs.
    Exact(&'static str),
    /// The newest `<prefix><number><suffix>` the suite has: point releases
    /// drop older ABIs from the index, so a pinned one would vanish.
    Newest { prefix: &'static str, suffix: &'static str },
}

pub const MATRIX: &[Kernel] = &[
    Kernel {
        label: "5.10",
        arch: Arch::X86_64,
        suite: "bullseye",
        package: Package::Exact("linux-image-5.10.0-32-amd64"),
    },
    Kernel {
        label: "6.1",
        arch: Arch::X86_64,
        suite: "bookworm",
        package: Package::Newest { prefix: "linux-image-6.1.0-", suffix: "-amd64" },
    },
    Kernel {
        label: "6.12",
        arch: Arch::X86_64,
        suite: "bookworm-backports",
        package: Package::Newest { prefix: "linux-image-6.12.", suffix: "+deb12-amd64" },
    },
    // The same releases for arm64 (Graviton, Ampere, Cobalt): their images
    // are uncompressed `Image` files QEMU's `virt` machine boots directly.
    Kernel {
        label: "5.10-arm64",
        arch: Arch::Aarch64,
        suite: "bullseye",
        package: Package::Exact("linux-image-5.10.0-32-arm64"),
    },
    Kernel {
        label: "6.1-arm64",
        arch: Arch::Aarch64,
        suite: "bookworm",
        package: Package::Newest { prefix: "linux-image-6.1.0-", suffix: "-arm64" },
    },
    Kernel {
        label: "6.12-arm64",
        arch: Arch::Aarch64,
        suite: "bookworm-backports",
        package: Package::Newest { prefix: "linux-image-6.12.", suffix: "+deb12-arm64" },
    },
];

/// The modules the guests load at boot (Debian builds them as modules):
/// veth pairs for the pods, and tc's clsact qdisc and bpf classifier for the
/// CNIs' legacy per-endpoint programs. tcx and netkit are built in where the
/// kernel has them.
pub const MODULES: [&str; 3] = ["veth", "sch_ingress", "cls_bpf"];

/// A kernel ready to boot.
pub struct Fetched {
    pub label: &'static str,
    pub arch: Arch,
    /// e.g. `linux-image-6.1.0-50-amd64`.
    pub package: String,
    pub vmlinuz: PathBuf,
    /// A newc cpio of `MODULES` under `lib/modules/cgaudit/`.
    pub modules: PathBuf,
}

impl Package {
    /// The number between prefix and suffix, when `name` is one of ours.
    fn number(&self, name: &str) -> Option<u64> {
        match self {
            Package::Exact(p) => (*p == name).then_some(0),
            Package::Newest { prefix, suffix } => {
                name.strip_prefix(prefix)?.strip_suffix(suffix)?.parse().ok().filter(|_| !name.contains(".."))
            }
        }
    }

    /// The package to use among `names`.
    fn pick<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
        names.into_iter().filter_map(|n| Some((self.number(n)?, n))).max().map(|(_, n)| n)
    }
}

fn kernels_dir() -> PathBuf {
    cache_dir().join("kernels")
}

/// The kernels of the matrix whose labels are in `labels`, fetched if not
/// cached yet. The network is used only for what the cache lacks.
pub fn fetch(labels: &[&str]) -> Result<Vec<Fetched>> {
    let wanted: Vec<&Kernel> = MATRIX.iter().filter(|k| labels.contains(&k.label)).collect();
    let mut out = Vec::new();
    let mut apts: Vec<PrivateApt> = Vec::new();
    for k in wanted {
        if let Some(f) = cached(k)? {
            out.push(f);
            continue;
        }
        let apt = match apts.iter().position(|a| a.arch == k.arch) {
            Some(i) => &apts[i],
            None => {
                apts.push(PrivateApt::new(k.arch)?);
                apts.last().expect("just pushed")
            }
        };
        let names = apt.package_names(k)?;
        let package = k
            .package
            .pick(names.iter().map(String::as_str))
            .with_context(|| {
                format!("no {} kernel package in Debian {} (looked for {})", k.label, k.suite, k.describe())
            })?
            .to_owned();
        eprintln!("xtask: fetching {package} from Debian {} (once; cached in {})", k.suite, kernels_dir().display());
        let dir = kernels_dir().join(&package);
        apt.unpack_boot(&package, &dir)?;
        out.push(ready(k, &package, &dir)?);
    }
    Ok(out)
}

impl Kernel {
    fn describe(&self) -> String {
        match self.package {
            Package::Exact(p) => p.to_owned(),
            Package::Newest { prefix, suffix } => format!("{prefix}N{suffix}"),
        }
    }
}

/// The newest cached kernel of `k`'s series, if one was fetched before.
fn cached(k: &Kernel) -> Result<Option<Fetched>> {
    let Ok(entries) = std::fs::read_dir(kernels_dir()) else { return Ok(None) };
    let names: Vec<String> = entries.flatten().filter_map(|e| e.file_name().into_string().ok()).collect();
    let Some(package) = k.package.pick(names.iter().map(String::as_str)) else { return Ok(None) };
    let dir = kernels_dir().join(package);
    // A fetch that did not finish leaves no `vmlinuz`; one from before the
    // modules were kept has no `modules.cpio` (fetched again).
    if !dir.join("vmlinuz").is_file() || !dir.join("modules.cpio").is_file() {
        return Ok(None);
    }
    ready(k, package, &dir).map(Some)
}

fn ready(k: &Kernel, package: &str, dir: &Path) -> Result<Fetched> {
    let vmlinuz = dir.join("vmlinuz");
    if !vmlinuz.is_file() {
        bail!("{}: no kernel image after unpacking {package}", vmlinuz.display());
    }
    Ok(Fetched {
        label: k.label,
        arch: k.arch,
        package: package.to_owned(),
        vmlinuz,
        modules: dir.join("modules.cpio"),
    })
}

/// apt with its own sources list, lists and cache, for suites the machine
/// does not list (bullseye, bookworm-backports).
struct PrivateApt {
    arch: Arch,
    dir: PathBuf,
    options: Vec<String>,
}

/// The Debian mirror and keyring the machine itself uses, from the first
/// `deb` stanza of its deb822 sources whose suites are not `-security`.
pub fn machine_mirror(sources: &str) -> Option<(String, Option<String>)> {
    for stanza in sources.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_owned())
            })
        };
        let (Some(types), Some(uris), Some(suites)) = (field("Types"), field("URIs"), field("Suites")) else {
            continue;
        };
        if !types.split_whitespace().any(|t| t == "deb") || suites.split_whitespace().any(|s| s.ends_with("-security"))
        {
            continue;
        }
        let uri = uris.split_whitespace().next()?.trim_end_matches('/').to_owned();
        return Some((uri, field("Signed-By")));
    }
    None
}

const SOURCES: &str = "/etc/apt/sources.list.d/debian.sources";

impl PrivateApt {
    fn new(arch: Arch) -> Result<PrivateApt> {
        let text = std::fs::read_to_string(SOURCES)
            .with_context(|| format!("read {SOURCES} (the Debian mirror this machine uses)"))?;
        let (uri, keyring) = machine_mirror(&text).with_context(|| format!("no Debian `deb` source in {SOURCES}"))?;
        let keyring = keyring.unwrap_or_else(|| "/usr/share/keyrings/debian-archive-keyring.gpg".to_owned());
        // amd64's lists keep the directory they always had.
        let dir = match arch {
            Arch::X86_64 => cache_dir().join("apt"),
            other => cache_dir().join(format!("apt-{other}")),
        };
        for d in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(dir.join(d)).with_context(|| format!("mkdir {}", dir.join(d).display()))?;
        }
        let mut suites: Vec<&str> = MATRIX.iter().filter(|k| k.arch == arch).map(|k| k.suite).collect();
        suites.dedup();
        let list: String =
            suites.iter().map(|suite| format!("deb [arch={arch} signed-by={keyring}] {uri} {suite} main\n")).collect();
        let sources = dir.join("sources.list");
        std::fs::write(&sources, list).with_context(|| format!("write {}", sources.display()))?;
        let options = vec![
            format!("Dir::Etc::SourceList={}", sources.display()),
            "Dir::Etc::SourceParts=/dev/null".into(),
            "Dir::Etc::PreferencesParts=/dev/null".into(),
            format!("Dir::State::Lists={}", dir.join("lists").display()),
            format!("Dir::Cache={}", dir.join("cache").display()),
            "Dir::State::status=/dev/null".into(),
            // Downloads land in our cache, which apt's sandbox user cannot write.
            "APT::Sandbox::User=root".into(),
            // Another architecture's packages, as if apt ran there (lists
            // and downloads only: nothing is installed).
            format!("APT::Architecture={arch}"),
        ];
        let apt = PrivateApt { arch, dir, options };
        run(apt.command("apt-get").args(["update", "-qq"]))?;
        Ok(apt)
    }

    fn command(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        c
    }

    fn package_names(&self, k: &Kernel) -> Result<Vec<String>> {
        let prefix = match k.package {
            Package::Exact(p) => p,
            Package::Newest { prefix, .. } => prefix,
        };
        let names = output(self.command("apt-cache").args(["pkgnames", prefix]))?;
        Ok(names.lines().map(str::to_owned).collect())
    }

    /// Downloads `package` and unpacks its kernel and config into `dir`.
    fn unpack_boot(&self, package: &str, dir: &Path) -> Result<()> {
        let download = self.dir.join("download");
        let _ = std::fs::remove_dir_all(&download);
        std::fs::create_dir_all(&download)?;
        run(self.command("apt-get").current_dir(&download).args(["download", "-qq", package]))?;
        let deb = std::fs::read_dir(&download)?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .with_context(|| format!("apt-get download {package} left no .deb"))?;
        let unpacked = download.join("unpacked");
        std::fs::create_dir_all(&unpacked)?;
        // Only boot/ (the image and its config, ~10 MB of ~300) and MODULES
        // (wherever the package keeps them: lib/ or usr/lib/, compressed or not).
        let modules: Vec<String> = MODULES.iter().map(|m| format!("'*/{m}.ko*'")).collect();
        run(Command::new("sh").arg("-c").arg(format!(
            "dpkg-deb --fsys-tarfile '{}' | tar -x -C '{}' --wildcards './boot/*' {}",
            deb.display(),
            unpacked.display(),
            modules.join(" ")
        )))?;
        let boot = unpacked.join("boot");
        let pick = |prefix: &str| -> Result<PathBuf> {
            std::fs::read_dir(&boot)?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
                .with_context(|| format!("{package} has no boot/{prefix}*"))
        };
        let staged = download.join("staged");
        std::fs::create_dir_all(&staged)?;
        std::fs::rename(pick("config-")?, staged.join("config"))?;
        pack_modules(&unpacked, &staged.join("modules.cpio"))?;
        // Last: a directory with `vmlinuz` is a complete fetch.
        std::fs::rename(pick("vmlinuz-")?, staged.join("vmlinuz"))?;
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir.parent().context("kernels dir")?)?;
        std::fs::rename(&staged, dir).with_context(|| format!("move the kernel to {}", dir.display()))?;
        let _ = std::fs::remove_dir_all(&download);
        Ok(())
    }
}

/// Packs the `MODULES` found below `unpacked` into `cpio` at
/// `lib/modules/cgaudit/<file>`; each must be there.
fn pack_modules(unpacked: &Path, cpio: &Path) -> Result<()> {
    fn find(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                find(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    find(unpacked, &mut files);
    let root = unpacked.join("cgaudit-modules");
    let into = root.join("lib/modules/cgaudit");
    std::fs::create_dir_all(&into)?;
    for m in MODULES {
        let file = files
            .iter()
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.split('.').next() == Some(m) && n.contains(".ko"))
            })
            .with_context(|| format!("no {m}.ko in {}", unpacked.display()))?;
        std::fs::copy(file, into.join(file.file_name().context("a file name")?))?;
    }
    run(Command::new("sh")
        .current_dir(&root)
        .arg("-c")
        .arg(format!("find . -print | cpio --quiet -o -H newc -R 0:0 > '{}'", cpio.display())))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_is_the_machines_first_non_security_deb_source() {
        let sources = "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n\
            Types: deb\n# a comment\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\n\
            Components: main\nSigned-By: /usr/share/keyrings/k.gpg\n\n\
            Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n";
        assert_eq!(
            machine_mirror(sources),
            Some(("http://mirror.example/debian".into(), Some("/usr/share/keyrings/k.gpg".into())))
        );
        assert_eq!(machine_mirror("Types: deb\nURIs: http://x/debian-security\nSuites: bookworm-security\n"), None);
    }

    #[test]
    fn the_newest_of_a_series_is_picked_and_nothing_else() {
        let names = [
            "linux-image-6.12.9+deb12-amd64",
            "linux-image-6.12.95+deb12-amd64",
            "linux-image-6.12.90+deb12.1-amd64",
            "linux-image-6.12.95+deb12-amd64-unsigned",
            "linux-image-6.12.96+deb12-cloud-amd64",
        ];
        let series = Package::Newest { prefix: "linux-image-6.12.", suffix: "+deb12-amd64" };
        assert_eq!(series.pick(names), Some("linux-image-6.12.95+deb12-amd64"));
        let one = Package::Exact("linux-image-5.10.0-32-amd64");
        assert_eq!(one.pick(["linux-image-5.10.0-33-amd64"]), None);
        assert_eq!(one.pick(["linux-image-5.10.0-32-amd64"]), Some("linux-image-5.10.0-32-amd64"));
    }
}
