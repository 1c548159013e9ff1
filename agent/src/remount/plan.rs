//! Pure: what to do at a cgroup2 mount path, given what is there now.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the path holds in the target's mount namespace, as the remount
/// helper saw it from inside, component by component, following no link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PathState {
    /// `missing` is the first component that does not exist.
    Absent { missing: PathBuf },
    /// An empty directory with nothing mounted on it.
    Directory,
    /// A directory with nothing mounted on it and `entries` entries in it:
    /// a mount there would hide them (a parent of the mount point, say).
    NonEmpty { entries: u64 },
    /// `path` (the mount point or one of its parents) is a file, a socket...
    NotDirectory { path: PathBuf, file_type: String },
    /// `path` (the mount point or one of its parents) is a symbolic link.
    Symlink { path: PathBuf },
    /// The top-most mount at the path. `top_cgroup_id` is set when the
    /// filesystem is cgroup2 (by its magic, not its name): the inode of the
    /// mount's top directory, which is the cgroup id it is rooted at.
    Mounted { fs_type: String, mountinfo_root: String, top_cgroup_id: Option<u64> },
}

impl std::fmt::Display for PathState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathState::Absent { missing } => write!(f, "absent ({} does not exist)", missing.display()),
            PathState::Directory => f.write_str("an empty directory, nothing mounted"),
            PathState::NonEmpty { entries } => {
                write!(
                    f,
                    "a directory with {entries} {}, nothing mounted",
                    if *entries == 1 { "entry" } else { "entries" }
                )
            }
            PathState::NotDirectory { path, file_type } => write!(f, "a {file_type} at {}", path.display()),
            PathState::Symlink { path } => write!(f, "a symbolic link at {}", path.display()),
            PathState::Mounted { fs_type, mountinfo_root, top_cgroup_id: Some(id) } => {
                write!(f, "{fs_type} rooted at {mountinfo_root} (cgroup id {id})")
            }
            PathState::Mounted { fs_type, mountinfo_root, top_cgroup_id: None } => {
                write!(f, "{fs_type} mounted from {mountinfo_root}")
            }
        }
    }
}

/// Which directory the path resolved to: the helper refuses to act unless it
/// finds the same one again under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The mount the path's directory is in (the top mount, when mounted).
    pub mount_id: u64,
    pub dev: u64,
    pub ino: u64,
}

/// What the helper saw: the state and, for a directory, which one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub state: PathState,
    pub identity: Option<Identity>,
}

impl Observed {
    /// Whether `now` is still what was planned on: the same directory, the
    /// same mount and the same cgroup it is rooted at. A mount's
    /// `mountinfo_root` is left out: it is that cgroup's path as the
    /// reader's cgroup namespace shows it (`/../..` from a debug pod's own),
    /// so two looks from two namespaces differ in it and nothing else.
    pub fn is_still(&self, now: &Observed) -> bool {
        let same_state = match (&self.state, &now.state) {
            (
                PathState::Mounted { fs_type: a, top_cgroup_id: Some(x), .. },
                PathState::Mounted { fs_type: b, top_cgroup_id: Some(y), .. },
            ) => a == b && x == y,
            (a, b) => a == b,
        };
        same_state && self.identity == now.identity
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
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
    /// The directory planned on; applying refuses if it is another now.
    pub identity: Option<Identity>,
    /// The cgroup id a correct mount's top must have.
    pub reference_root_id: u64,
    pub action: Action,
    pub reason: String,
}

/// Decides what to do at `path`.
pub fn plan(path: PathBuf, seen: Observed, reference_root_id: u64) -> Plan {
    let p = path.display();
    let (action, reason) = match &seen.state {
        PathState::Absent { missing } => {
            (Action::CreateAndMount, format!("{} does not exist: create {p} and mount cgroup2", missing.display()))
        }
        PathState::Directory => (Action::Mount, format!("nothing is mounted at {p}: mount cgroup2")),
        PathState::NonEmpty { entries } => (
            Action::Refuse,
            format!(
                "{p} is a directory with {entries} {} and nothing mounted on it: a mount there would hide \
                 what is in it (is --path a parent of the mount point?); refusing",
                if *entries == 1 { "entry" } else { "entries" }
            ),
        ),
        PathState::NotDirectory { path, file_type } => {
            (Action::Refuse, format!("{} is a {file_type}, not a directory: refusing to touch it", path.display()))
        }
        PathState::Symlink { path } => (
            Action::Refuse,
            format!(
                "{} is a symbolic link: refusing to follow it, as a link there can point the mount anywhere \
                 on the node; remove it, or pass the real directory as --path",
                path.display()
            ),
        ),
        PathState::Mounted { fs_type, top_cgroup_id: None, .. } => {
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
    };
    Plan { path, state: seen.state, identity: seen.identity, reference_root_id, action, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(state: PathState) -> Observed {
        Observed { state, identity: None }
    }

    fn cg2(id: u64, root: &str) -> Observed {
        seen(PathState::Mounted { fs_type: "cgroup2".into(), mountinfo_root: root.into(), top_cgroup_id: Some(id) })
    }

    fn act(state: Observed) -> Action {
        plan("/run/cilium/cgroupv2".into(), state, 1).action
    }

    /// A look from a debug pod's own cgroup namespace and one from the
    /// node's see one mount: the cgroup's path differs, nothing else.
    #[test]
    fn the_same_mount_seen_from_two_cgroup_namespaces_is_still_the_same() {
        let id = Some(Identity { mount_id: 67, dev: 38, ino: 4242 });
        let pod_view = Observed { identity: id, ..cg2(4242, "/../../kubepods/pod1/ctr") };
        let node_view = Observed { identity: id, ..cg2(4242, "/kubepods/pod1/ctr") };
        assert!(pod_view.is_still(&node_view));
        // Another cgroup, another mount or another directory is a change.
        assert!(!pod_view.is_still(&Observed { identity: id, ..cg2(4243, "/kubepods/pod1/ctr") }));
        let moved = Some(Identity { mount_id: 68, dev: 38, ino: 4242 });
        assert!(!pod_view.is_still(&Observed { identity: moved, ..node_view.clone() }));
        let not_cgroup2 =
            PathState::Mounted { fs_type: "tmpfs".into(), mountinfo_root: "/".into(), top_cgroup_id: None };
        assert!(!pod_view.is_still(&Observed { state: not_cgroup2, identity: id }));
        // Other states compare whole.
        assert!(seen(PathState::Directory).is_still(&seen(PathState::Directory)));
        assert!(!seen(PathState::Directory).is_still(&seen(PathState::NonEmpty { entries: 1 })));
    }

    #[test]
    fn absent_path_is_created_and_mounted() {
        assert_eq!(act(seen(PathState::Absent { missing: "/run/cilium".into() })), Action::CreateAndMount);
        assert_eq!(act(seen(PathState::Directory)), Action::Mount);
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
    fn a_directory_with_entries_is_never_mounted_over() {
        let p = plan("/run/cilium".into(), seen(PathState::NonEmpty { entries: 3 }), 1);
        assert_eq!(p.action, Action::Refuse);
        assert!(p.reason.contains("3 entries"), "{}", p.reason);
        assert!(plan("/x".into(), seen(PathState::NonEmpty { entries: 1 }), 1).reason.contains("1 entry "));
    }

    #[test]
    fn anything_else_is_refused() {
        let tmpfs = PathState::Mounted { fs_type: "tmpfs".into(), mountinfo_root: "/".into(), top_cgroup_id: None };
        assert_eq!(act(seen(tmpfs)), Action::Refuse);
        // A filesystem that calls itself cgroup2 but is not one (by magic).
        let fake = PathState::Mounted { fs_type: "cgroup2".into(), mountinfo_root: "/".into(), top_cgroup_id: None };
        assert_eq!(act(seen(fake)), Action::Refuse);
        let file = PathState::NotDirectory { path: "/run/cilium/cgroupv2".into(), file_type: "regular file".into() };
        assert_eq!(act(seen(file)), Action::Refuse);
        let p = plan("/run/cilium/cgroupv2".into(), seen(PathState::Symlink { path: "/run/cilium".into() }), 1);
        assert_eq!(p.action, Action::Refuse);
        assert!(p.reason.starts_with("/run/cilium is a symbolic link"), "{}", p.reason);
    }

    #[test]
    fn nested_node_reference_is_pid1s_namespace_root() {
        assert_eq!(plan("/x".into(), cg2(77, "/"), 77).action, Action::Nothing);
        assert_eq!(plan("/x".into(), cg2(1, "/"), 77).action, Action::Replace);
    }
}
