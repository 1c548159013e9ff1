//! What ships: the static binaries (`cargo xtask dist`), one per
//! architecture, each embedding eBPF objects built for its architecture
//! (aya-build passes the target's arch to the eBPF build: the kprobe
//! programs read that architecture's `pt_regs`), with `SHA256SUMS` and a
//! CycloneDX SBOM; and the multi-arch image (`cargo xtask image`), built
//! offline with podman as a manifest list and an OCI archive.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::arch::{ALL, Arch, STATIC_TEST_FEATURES, check_elf, static_cargo, static_dir, target_installed};
use crate::toolchain::{cargo, ebpf_toolchain, setup, tools_dir};
use crate::{on_path, output, run, version, workspace_root};

/// cargo-cyclonedx, pinned: it writes the SBOM from `cargo metadata` for
/// one target, so each architecture lists exactly what its binary links.
const CYCLONEDX_VERSION: &str = "0.5.9";

/// The static agent for `arch`: target/<triple>/dist/agent.
pub fn agent(arch: Arch) -> Result<PathBuf> {
    ebpf_toolchain()?;
    target_installed(arch)?;
    run(static_cargo(arch, "build").args(["--package", "agent"]))?;
    let bin = static_dir(arch).join("agent");
    check_elf(&bin, arch)?;
    let size = std::fs::metadata(&bin)?.len();
    eprintln!("xtask: static binary {} ({:.1} MiB)", bin.display(), size as f64 / 1048576.0);
    Ok(bin)
}

/// The test `fixture` binary, static: the CRI tests' container image is
/// that one file.
pub fn fixture(arch: Arch) -> Result<PathBuf> {
    target_installed(arch)?;
    run(static_cargo(arch, "build").args(STATIC_TEST_FEATURES).args([
        "--package",
        "integration-tests",
        "--bin",
        "fixture",
    ]))?;
    Ok(static_dir(arch).join("fixture"))
}

/// The release directory, target/cgaudit-VERSION (not target/dist: cargo
/// keeps the `dist` profile's build scripts there).
pub fn release_dir() -> PathBuf {
    workspace_root().join(format!("target/cgaudit-{}", version()))
}

/// `cargo xtask dist`: both static binaries, then the release directory with each
/// as `agent-linux-<arch>`, its SBOM and `SHA256SUMS` over them all.
pub fn dist() -> Result<Vec<(Arch, PathBuf)>> {
    let built: Vec<(Arch, PathBuf)> = ALL.iter().map(|&a| agent(a).map(|p| (a, p))).collect::<Result<_>>()?;
    let out = release_dir();
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).with_context(|| format!("mkdir {}", out.display()))?;
    let mut files = Vec::new();
    for (arch, bin) in &built {
        let name = format!("agent-linux-{arch}");
        std::fs::copy(bin, out.join(&name)).with_context(|| format!("copy {} to {}", bin.display(), out.display()))?;
        files.push(name);
        files.push(sbom(*arch, &out)?);
    }
    let sums = output(Command::new("sha256sum").current_dir(&out).args(&files))?;
    std::fs::write(out.join("SHA256SUMS"), &sums).context("write SHA256SUMS")?;
    eprintln!("xtask: release in {} (check with: cd {} && sha256sum -c SHA256SUMS)", out.display(), out.display());
    Ok(built)
}

/// Writes the CycloneDX SBOM of the agent as built for `arch` into `out`;
/// returns its file name.
fn sbom(arch: Arch, out: &Path) -> Result<String> {
    let tool = tools_dir().join("bin/cargo-cyclonedx");
    let works = Command::new(&tool).args(["cyclonedx", "--version"]).output().is_ok_and(|o| o.status.success());
    if !works {
        eprintln!("xtask: installing cargo-cyclonedx {CYCLONEDX_VERSION} (once, for the SBOM)");
        run(cargo()
            .args(["install", "cargo-cyclonedx", "--locked", "--version", CYCLONEDX_VERSION, "--root"])
            .arg(tools_dir()))?;
    }
    let stem = format!("agent-linux-{arch}.cdx");
    let manifest = workspace_root().join("agent/Cargo.toml");
    // The member directories' times, to put back after: agent-ebpf/ is
    // watched by aya-build (rerun-if-changed), and a file made and removed
    // there would rebuild the eBPF objects and every agent after this.
    let members: Vec<(PathBuf, std::time::SystemTime)> = std::fs::read_dir(workspace_root())?
        .flatten()
        .map(|e| e.path())
        .filter(|d| d.join("Cargo.toml").is_file())
        .filter_map(|d| std::fs::metadata(&d).and_then(|m| m.modified()).ok().map(|t| (d, t)))
        .collect();
    // What the binary links for its target, not the build's own tools.
    let made = run(cargo()
        .args(["cyclonedx", "--format", "json", "--spec-version", "1.5", "--no-build-deps"])
        .args(["--target", arch.triple(), "--override-filename", &stem, "--manifest-path"])
        .arg(&manifest));
    // cargo-cyclonedx writes one SBOM next to each workspace member's
    // manifest: the agent's goes into the release, the rest are removed
    // (also when it failed halfway), leaving the source tree as it was.
    let name = format!("{stem}.json");
    let mut kept = Err(anyhow::anyhow!("cargo-cyclonedx wrote no agent/{name}"));
    for entry in std::fs::read_dir(workspace_root())?.flatten() {
        let written = entry.path().join(&name);
        if !written.is_file() {
            continue;
        }
        if entry.file_name() == "agent" && made.is_ok() {
            kept = std::fs::rename(&written, out.join(&name))
                .with_context(|| format!("move {} to {}", written.display(), out.display()));
        } else {
            let _ = std::fs::remove_file(&written);
        }
    }
    for (dir, modified) in &members {
        if let Err(e) = std::fs::File::open(dir).and_then(|d| d.set_modified(*modified)) {
            eprintln!("xtask: warning: cannot put back the time of {}: {e}", dir.display());
        }
    }
    made?;
    kept?;
    Ok(name)
}

/// Runs podman; on hybrid hosts (cgroup v1 at /sys/fs/cgroup, which crun
/// refuses) inside a private mount namespace with cgroup2 mounted there.
pub fn podman(args: &[&str]) -> Command {
    let hybrid = !std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains(" /sys/fs/cgroup ") && l.contains(" - cgroup2 "));
    if !hybrid {
        let mut c = Command::new("podman");
        c.args(args);
        return c;
    }
    let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!("mount -t cgroup2 none /sys/fs/cgroup && exec podman {}", quoted.join(" ")));
    c
}

pub fn image_tag() -> String {
    format!("localhost/cgaudit:{}", version())
}

/// The OCI archive `cargo xtask image` leaves: every platform, one file.
pub fn image_archive() -> PathBuf {
    workspace_root().join(format!("target/image/cgaudit-{}.oci.tar", version()))
}

/// `--push`'s value: a registry path, without a tag or digest (the version is the tag).
pub fn repository(s: &str) -> std::result::Result<String, String> {
    let last = s.rsplit('/').next().unwrap_or(s);
    if s.is_empty() || s.contains('@') || last.contains(':') || s.chars().any(char::is_whitespace) {
        return Err(format!(
            "expected a repository such as registry.example.com/cgaudit, without a tag (the tag is the version, {})",
            version()
        ));
    }
    Ok(s.to_owned())
}

/// Pushes the manifest list and every platform's image to `repository:VERSION`.
pub fn push_image(tag: &str, repository: &str) -> Result<String> {
    let to = format!("{repository}:{}", version());
    run(&mut podman(&["manifest", "push", "--all", tag, &format!("docker://{to}")]))?;
    eprintln!(
        "xtask: pushed {to}; install with: helm install cgaudit deploy/helm/cgaudit -n cgaudit --set image.repository={repository}"
    );
    Ok(to)
}

/// `cargo xtask image`: one image per architecture (FROM scratch: only the
/// static binary), joined in the manifest list `localhost/cgaudit:VERSION`
/// and written with every platform to the OCI archive.
pub fn image() -> Result<String> {
    if !on_path("podman") {
        setup()?;
    }
    let tag = image_tag();
    // A manifest list cannot be made over an image of the same name (an
    // older single-architecture build): both go first.
    let _ = podman(&["manifest", "rm", &tag]).output();
    let _ = podman(&["rmi", "--force", &tag]).output();
    run(&mut podman(&["manifest", "create", &tag]))?;
    for arch in ALL {
        let bin = agent(arch)?;
        let ctx = workspace_root().join(format!("target/image/{arch}"));
        std::fs::create_dir_all(&ctx)?;
        std::fs::copy(&bin, ctx.join("agent"))?;
        std::fs::copy(workspace_root().join("Containerfile"), ctx.join("Containerfile"))?;
        let ctx_s = ctx.to_str().context("utf-8 path")?;
        let arch_tag = format!("{tag}-{arch}");
        let platform = format!("linux/{arch}");
        let (version_arg, revision_arg) = (format!("VERSION={}", version()), format!("REVISION={}", revision()));
        run(&mut podman(&[
            "build",
            "--quiet",
            "--platform",
            &platform,
            "--build-arg",
            &version_arg,
            "--build-arg",
            &revision_arg,
            "--tag",
            &arch_tag,
            "--file",
            &format!("{ctx_s}/Containerfile"),
            ctx_s,
        ]))?;
        run(&mut podman(&["manifest", "add", &tag, &format!("containers-storage:{arch_tag}")]))?;
    }
    let archive = image_archive();
    let _ = std::fs::remove_file(&archive);
    let dest = format!("oci-archive:{}:{}", archive.to_str().context("utf-8 path")?, version());
    run(&mut podman(&["manifest", "push", "--all", &tag, &dest]))?;
    eprintln!("xtask: image {tag} (linux/amd64, linux/arm64) and {}", archive.display());
    eprintln!(
        "xtask: push it with: skopeo copy --all oci-archive:{} docker://REGISTRY/cgaudit:{}",
        archive.display(),
        version()
    );
    Ok(tag)
}

/// The commit the image is built from, as the agent reports it
/// (`git rev-parse --short=12`), else "unknown".
fn revision() -> String {
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(workspace_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::repository;

    #[test]
    fn push_takes_a_repository_without_a_tag() {
        assert_eq!(
            repository("registry.example.com:5000/team/cgaudit").as_deref(),
            Ok("registry.example.com:5000/team/cgaudit")
        );
        assert!(repository("registry.example.com/cgaudit:0.1.0").unwrap_err().contains("without a tag"));
        assert!(repository("r/c@sha256:00").is_err());
        assert!(repository("").is_err());
    }
}
