//! The flags, checked against the host and turned into the modules' own
//! settings: the one place a flag's meaning for the node is decided, so
//! that nothing below `cmd` sees the command line.

use std::path::PathBuf;

use nix::sys::statfs::{PROC_SUPER_MAGIC, statfs};

use crate::cgroup::root::{self, RootError};
use crate::cli::ScanArgs;
use crate::findings::Policy;
use crate::scan::ScanOptions;

/// A flag that names a host path which is not what it must be.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error("--proc {0}: not a procfs mount")]
    NotProcfs(PathBuf),
    #[error("--proc {path}: {error}")]
    Proc { path: PathBuf, error: nix::Error },
    #[error("--cgroup-root {0}")]
    CgroupRoot(RootError),
    #[error(
        "--kmesh was removed: Kmesh means its programs for the root cgroup, and cgaudit now judges them as Kmesh's \
         only when its agent holds them, they are in its pin directory or they are at the root (README, \"Owners \
         cgaudit knows\"); drop the flag"
    )]
    Kmesh,
}

impl ScanArgs {
    /// Checks the flags that name host paths before anything runs: a wrong
    /// one (not procfs, not a cgroup2 directory) is refused at once (exit 2)
    /// rather than failing every audit. A `--cgroup-root` that does not
    /// exist yet is not wrong: the daemon may start before the hierarchy
    /// below it is made, and stays unready until it is (the one-shot audit
    /// then says it is missing).
    pub fn validate(&self) -> Result<(), FlagError> {
        if self.kmesh {
            return Err(FlagError::Kmesh);
        }
        match statfs(&self.proc) {
            Ok(fs) if fs.filesystem_type() == PROC_SUPER_MAGIC => {}
            Ok(_) => return Err(FlagError::NotProcfs(self.proc.clone())),
            Err(error) => return Err(FlagError::Proc { path: self.proc.clone(), error }),
        }
        if let Some(dir) = &self.cgroup_root {
            match root::open_cgroup_dir(dir) {
                Ok(_) | Err(RootError::NotFound { .. }) => {}
                Err(e) => return Err(FlagError::CgroupRoot(e)),
            }
        }
        Ok(())
    }

    /// What the scan is to read.
    pub fn options(&self) -> ScanOptions {
        ScanOptions {
            cgroup_root: self.cgroup_root.clone(),
            node_name: self.node_name.clone(),
            walk: self.walk,
            nested_node: self.nested_node,
            cni_conf_dir: self.cni_conf_dir.clone(),
            ..ScanOptions::node(self.proc.clone())
        }
    }

    /// How findings are judged.
    pub fn policy(&self) -> Policy {
        Policy { allow: self.allow.clone(), endpoint_grace: self.endpoint_grace }
    }
}
