//! `agent install --to DIR`: puts this very binary at `DIR/agent`, for a
//! tool on the host to run (node-problem-detector's custom plugin): the
//! image is `FROM scratch`, with no `cp` and no shell, so the binary copies
//! itself. Atomic: written to an unnamed file in DIR (`O_TMPFILE`), synced,
//! made executable, given a random name of its own and renamed over
//! `DIR/agent`; a reader never runs half a binary, and a failure leaves
//! what was there. An install killed between naming and renaming leaves its
//! temporary name: the next one removes those (issue 47, L1: the name was
//! `.agent.install-<pid>`, always `-1` in an init container, so one such
//! leftover made every later install fail).

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
    remove_stale(dir);
    let mut random = [0u8; 8];
    rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty()).map_err(|e| InstallError::Write {
        call: "getrandom",
        path: dir.to_owned(),
        error: e.into(),
    })?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = dir.join(format!("{TEMP_PREFIX}{hex}"));
    let written = (|| -> Result<(), InstallError> {
        let err = |call| {
            let path = tmp.clone();
            move |error| InstallError::Write { call, path, error }
        };
        let f = match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_TMPFILE).mode(0o700).open(dir) {
            // Unnamed until linked; a file system without O_TMPFILE gets a
            // name of our own at once: never an existing file or a link.
            Ok(f) => Some(f),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)) => None,
            Err(e) => return Err(err("open O_TMPFILE")(e)),
        };
        let named = f.is_none();
        let mut f = match f {
            Some(f) => f,
            None => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o700)
                .open(&tmp)
                .map_err(err("create"))?,
        };
        f.write_all(&own).map_err(err("write"))?;
        f.set_permissions(std::fs::Permissions::from_mode(0o755)).map_err(err("chmod"))?;
        f.sync_all().map_err(err("fsync"))?;
        if !named {
            // Named through the descriptor's magic link: linkat with
            // AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH.
            let fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&f));
            rustix::fs::linkat(
                rustix::fs::CWD,
                fd.as_str(),
                rustix::fs::CWD,
                &tmp,
                rustix::fs::AtFlags::SYMLINK_FOLLOW,
            )
            .map_err(|e| err("linkat")(e.into()))?;
        }
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

/// What an install names its file before the rename.
const TEMP_PREFIX: &str = ".agent.install-";

/// Removes what installs killed midway left in `dir` (files of our
/// temporary names, not touched for a minute: another install may be
/// writing one now).
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let old = e
            .metadata()
            .ok()
            .filter(|m| m.file_type().is_file())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= std::time::Duration::from_secs(60));
        if name.starts_with(TEMP_PREFIX) && old {
            let _ = std::fs::remove_file(e.path());
        }
    }
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

    /// Issue 47, L1: an install killed between creating its temporary file
    /// and renaming it left `.agent.install-<pid>`, and in an init
    /// container the pid is always 1: every later install failed (exit 2,
    /// Init:CrashLoopBackOff, the node unaudited). The name is random now,
    /// and an old leftover is removed.
    #[test]
    fn a_leftover_of_an_interrupted_install_does_not_stop_the_next() {
        let dir = std::env::temp_dir().join(format!("cgaudit-install-left-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let leftover = dir.join(format!(".agent.install-{}", std::process::id()));
        std::fs::write(&leftover, b"half a binary").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&leftover).unwrap().set_modified(old).unwrap();
        let installed = install(&dir).expect("installed despite the leftover");
        assert_eq!(std::fs::read(&installed).unwrap(), std::fs::read("/proc/self/exe").unwrap());
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("agent")], "the leftover removed, nothing else left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
