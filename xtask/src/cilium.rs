//! Cilium's own datapath objects for the suite: its `bpf/` source of
//! v1.18.3 (tests/third_party/cilium, as Cilium ships it) built with
//! Cilium's own Makefile rule (`make V=1 CLANG=clang-14 bpf_host.o ...`,
//! its compile-test configuration) into `target/cilium/bpf`. The tree is
//! copied there with its files' times kept, so that make rebuilds only
//! what changed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::{run, workspace_root};

/// The objects the suite loads (`tests/src/cilium.rs`).
const OBJECTS: &[&str] = &["bpf_host.o", "bpf_overlay.o", "bpf_lxc.o"];

/// Builds the objects (once; again when the source changed); where they are.
pub fn objects() -> Result<PathBuf> {
    let src = workspace_root().join("tests/third_party/cilium");
    let out = workspace_root().join("target/cilium");
    mirror(&src, &out)?;
    let bpf = out.join("bpf");
    // Makefile.defs asks `go` for a version it does not need here: its
    // complaint on stderr is harmless.
    run(Command::new("make").current_dir(&bpf).args(["V=1", "CLANG=clang-14"]).args(OBJECTS))?;
    for o in OBJECTS {
        let built = bpf.join(o);
        anyhow::ensure!(built.is_file(), "make left no {}", built.display());
    }
    Ok(bpf)
}

/// Copies `from` into `to`, each file only when its content differs, with
/// its modification time kept.
fn mirror(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("mkdir {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            mirror(&src, &dst)?;
            continue;
        }
        let data = std::fs::read(&src).with_context(|| format!("read {}", src.display()))?;
        if std::fs::read(&dst).is_ok_and(|d| d == data) {
            continue;
        }
        std::fs::write(&dst, &data).with_context(|| format!("write {}", dst.display()))?;
        let modified = entry.metadata()?.modified()?;
        std::fs::File::options().write(true).open(&dst)?.set_modified(modified)?;
    }
    Ok(())
}
