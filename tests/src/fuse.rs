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
    dir: tempfile::TempDir,
}

impl FuseTrap {
    pub fn new() -> FuseTrap {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut trap = FuseTrap {
            child: Command::new(agent_bin().with_file_name("fixture"))
                .arg("fuse-trap")
                .arg(dir.path().join("mnt"))
                .stdout(Stdio::piped())
                .spawn()
                .expect("fixture fuse-trap"),
            dir,
        };
        let mut line = String::new();
        BufReader::new(trap.child.stdout.take().expect("stdout")).read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "trapped");
        trap
    }

    /// The mount point.
    pub fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
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
