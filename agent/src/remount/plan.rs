//! Pure: what to do at a cgroup2 mount path, given what is there now.

use std::path::PathBuf;

use serde::Serialize;

/// What the path holds in the target's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PathState {
    Absent,
    /// A directory with nothing mounted on it.
    Directory,
    /// Something that is not a directory (a file, a socket...).
    NotDirectory {
        file_type: String,
    },
    /// The top-most mount at the path.
    Mounted {
        fs_type: String,
        mountinfo_root: String,
        top_cgroup_id: Option<u64>,
    },
}

impl std::fmt::Display for PathState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathState::Absent => f.write_str("absent"),
            PathState::Directory => f.write_str("an empty directory, nothing mounted"),
            PathState::NotDirectory { file_type } => write!(f, "a {file_type}"),
            PathState::Mounted { fs_type, mountinfo_root, top_cgroup_id: Some(id) } => {
                write!(f, "{fs_type} rooted at {mountinfo_root} (cgroup id {id})")
            }
            PathState::Mounted { fs_type, mountinfo_root, top_cgroup_id: None } => {
                write!(f, "{fs_type} mounted from {mountinfo_root}")
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::EnumString)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Action {
    /// The path holds a cgroup2 mount of the reference root already.
    Nothing,
    /// Create the directory, then mount cgroup2 on it.
    CreateAndMount,
    /// Mount cgroup2 on the existing empty directory.
    Mount,
    /// Unmount the namespaced cgroup2 mount, then mount cgroup2 from the
    /// target's namespaces.
    Replace,
    /// Something else is there: never touch it.
    Refuse,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn changes_something(self) -> bool {
        matches!(self, Action::CreateAndMount | Action::Mount | Action::Replace)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub path: PathBuf,
    pub state: PathState,
    /// The cgroup id a correct mount's top must have.
    pub reference_root_id: u64,
    pub action: Action,
    pub reason: String,
}

/// Decides what to do at `path`.
pub fn plan(path: PathBuf, state: PathState, reference_root_id: u64) -> Plan {
    let p = path.display();
    let (action, reason) = match &state {
        PathState::Absent => (Action::CreateAndMount, format!("{p} does not exist: create it and mount cgroup2")),
        PathState::Directory => (Action::Mount, format!("nothing is mounted at {p}: mount cgroup2")),
        PathState::NotDirectory { file_type } => {
            (Action::Refuse, format!("{p} is a {file_type}, not a directory: refusing to touch it"))
        }
        PathState::Mounted { fs_type, .. } if fs_type != "cgroup2" => {
            (Action::Refuse, format!("{fs_type} is mounted at {p}, not cgroup2: refusing to unmount something else"))
        }
        PathState::Mounted { top_cgroup_id: Some(id), .. } if *id == reference_root_id => {
            (Action::Nothing, format!("cgroup2 at {p} is rooted at the root cgroup (id {id}): nothing to do"))
        }
        PathState::Mounted { top_cgroup_id: Some(id), mountinfo_root, .. } => (
            Action::Replace,
            format!(
                "cgroup2 at {p} is rooted at cgroup id {id} ({mountinfo_root}), not the root (id {reference_root_id}): \
                 it was mounted from a private cgroup namespace; replace it"
            ),
        ),
        PathState::Mounted { top_cgroup_id: None, .. } => {
            (Action::Refuse, format!("the cgroup2 mount at {p} could not be inspected: refusing to act blind"))
        }
    };
    Plan { path, state, reference_root_id, action, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg2(id: u64, root: &str) -> PathState {
        PathState::Mounted { fs_type: "cgroup2".into(), mountinfo_root: root.into(), top_cgroup_id: Some(id) }
    }

    fn act(state: PathState) -> Action {
        plan("/run/cilium/cgroupv2".into(), state, 1).action
    }

    #[test]
    fn absent_path_is_created_and_mounted() {
        assert_eq!(act(PathState::Absent), Action::CreateAndMount);
        assert_eq!(act(PathState::Directory), Action::Mount);
    }

    #[test]
    fn correct_mount_needs_nothing() {
        assert_eq!(act(cg2(1, "/")), Action::Nothing);
        // The text of field 4 does not matter; identity does.
        assert_eq!(act(cg2(1, "/../..")), Action::Nothing);
    }

    #[test]
    fn namespaced_mount_is_replaced() {
        let p = plan("/run/cilium/cgroupv2".into(), cg2(4242, "/kubepods/pod1/ctr"), 1);
        assert_eq!(p.action, Action::Replace);
        assert!(p.reason.contains("4242") && p.reason.contains("private cgroup namespace"));
    }

    #[test]
    fn anything_else_is_refused() {
        let tmpfs = PathState::Mounted { fs_type: "tmpfs".into(), mountinfo_root: "/".into(), top_cgroup_id: None };
        assert_eq!(act(tmpfs), Action::Refuse);
        assert_eq!(act(PathState::NotDirectory { file_type: "regular file".into() }), Action::Refuse);
        let blind = PathState::Mounted { fs_type: "cgroup2".into(), mountinfo_root: "/".into(), top_cgroup_id: None };
        assert_eq!(act(blind), Action::Refuse);
    }

    #[test]
    fn nested_node_reference_is_pid1s_namespace_root() {
        assert_eq!(plan("/x".into(), cg2(77, "/"), 77).action, Action::Nothing);
        assert_eq!(plan("/x".into(), cg2(1, "/"), 77).action, Action::Replace);
    }
}
