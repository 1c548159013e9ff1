//! A FUSE mount whose server never answers: anything that looks inside it
//! blocks until the server dies.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::spawn::agent_bin;

/// `fixture fuse-trap`: the FUSE mount, also named as the target of a
/// failing bpf() call. Killed, and its mount detached, on drop.
pub struct FuseTrap {
    child: Child,
    _dir: Option<tempfile::TempDir>,
    mnt: PathBuf,
}

impl FuseTrap {
    pub fn new() -> FuseTrap {
        let dir = tempfile::tempdir().expect("tempdir");
        let mnt = dir.path().join("mnt");
        Self::start(mnt, Some(dir))
    }

    /// Mounted at `mnt` (an existing directory) in the sandbox's own mount
    /// namespace, by a server running there.
    pub fn in_sandbox(sb: &crate::Sandbox, mnt: &str) -> FuseTrap {
        let fixture = agent_bin().with_file_name("fixture");
        Self::spawn(sb.command(&fixture, &["fuse-trap", mnt]), sb.path(mnt), None)
    }

    fn start(mnt: PathBuf, dir: Option<tempfile::TempDir>) -> FuseTrap {
        let mut c = Command::new(agent_bin().with_file_name("fixture"));
        c.arg("fuse-trap").arg(&mnt);
        Self::spawn(c, mnt, dir)
    }

    fn spawn(mut c: Command, mnt: PathBuf, dir: Option<tempfile::TempDir>) -> FuseTrap {
        let mut trap = FuseTrap { child: c.stdout(Stdio::piped()).spawn().expect("fixture fuse-trap"), _dir: dir, mnt };
        let mut line = String::new();
        BufReader::new(trap.child.stdout.take().expect("stdout")).read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "trapped");
        trap
    }

    /// The mount point.
    pub fn mnt(&self) -> PathBuf {
        self.mnt.clone()
    }
}

impl Default for FuseTrap {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for FuseTrap {
    fn drop(&mut self) {
        // Killing the server aborts the connection: waiters get ENOTCONN.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = nix::mount::umount2(&self.mnt(), nix::mount::MntFlags::MNT_DETACH);
    }
}
