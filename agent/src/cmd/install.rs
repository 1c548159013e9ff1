//! `agent install --to DIR`: puts this very binary at `DIR/agent`, for a
//! tool on the host to run (node-problem-detector's custom plugin): the
//! image is `FROM scratch`, with no `cp` and no shell, so the binary copies
//! itself. Atomic: written to a new file in DIR, synced, made executable,
//! then renamed over `DIR/agent`; a reader never runs half a binary, and a
//! failure leaves what was there.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::cli::InstallArgs;

/// Why the binary was not installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("--to {}: {why}", dir.display())]
    Dir { dir: PathBuf, why: String },
    #[error("read this binary (/proc/self/exe): {0}")]
    Own(std::io::Error),
    #[error("{call} {}: {error}", path.display())]
    Write { call: &'static str, path: PathBuf, error: std::io::Error },
}

/// The name it is installed as, in `--to`.
pub const NAME: &str = "agent";

/// Copies `/proc/self/exe` to `dir/agent` (mode 0755), atomically.
pub fn install(dir: &Path) -> Result<PathBuf, InstallError> {
    let meta = std::fs::metadata(dir).map_err(|e| InstallError::Dir { dir: dir.to_owned(), why: e.to_string() })?;
    if !meta.is_dir() {
        return Err(InstallError::Dir { dir: dir.to_owned(), why: "not a directory".into() });
    }
    let own = std::fs::read("/proc/self/exe").map_err(InstallError::Own)?;
    let target = dir.join(NAME);
    let tmp = dir.join(format!(".{NAME}.install-{}", std::process::id()));
    let written = (|| -> Result<(), InstallError> {
        let err = |call| {
            let path = tmp.clone();
            move |error| InstallError::Write { call, path, error }
        };
        // A name of our own, made here: never an existing file or a link.
        let mut f =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o700).open(&tmp).map_err(err("create"))?;
        f.write_all(&own).map_err(err("write"))?;
        f.set_permissions(std::fs::Permissions::from_mode(0o755)).map_err(err("chmod"))?;
        f.sync_all().map_err(err("fsync"))?;
        std::fs::rename(&tmp, &target).map_err(|error| InstallError::Write {
            call: "rename",
            path: target.clone(),
            error,
        })
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| target)
}

/// `agent install`: exit 0 installed, 2 not (`main` says why).
pub fn main(args: &InstallArgs) -> anyhow::Result<u8> {
    let to = install(&args.to)?;
    println!("installed {} ({})", to.display(), crate::build::LONG_VERSION);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_plain_file_target_is_refused_and_nothing_is_left() {
        let dir = std::env::temp_dir().join(format!("cgaudit-install-test-{}", std::process::id()));
        assert!(matches!(install(&dir), Err(InstallError::Dir { .. })));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = install(&file).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        let installed = install(&dir).unwrap();
        assert_eq!(std::fs::read(&installed).unwrap(), std::fs::read("/proc/self/exe").unwrap());
        let mode = std::fs::metadata(&installed).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 2, "only the file and the binary: {left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
