//! A node where nobody mounted cgroup2: cgroup v1 controllers only (a
//! legacy node, or any node before its CNI mounts its own cgroup2). cgroup-v2
//! programs still run there (every socket belongs to the v2 hierarchy, at
//! its root unless moved), so the audit reads the v2 hierarchy through a
//! cgroup2 mount of its own that no one else sees, and says so.

use std::os::fd::AsRawFd;
use std::path::PathBuf;

use integration_tests::guest::{self, RootTree};
use integration_tests::*;

fn cgroup2_mounts(mountinfo: &str) -> usize {
    mountinfo.lines().filter(|l| l.split(" - ").nth(1).is_some_and(|t| t.starts_with("cgroup2 "))).count()
}

/// The cgroup2 hierarchy as a mount no one can see: mounted, its top
/// opened, then detached at once. The test reaches it through
/// `/proc/self/fd/N` (its open top), which neither PID 1's mountinfo nor
/// the agent shows.
struct DetachedCgroup2(std::fs::File);

impl DetachedCgroup2 {
    fn new() -> DetachedCgroup2 {
        let dir = tempfile::tempdir().expect("tempdir");
        nix::mount::mount(Some("none"), dir.path(), Some("cgroup2"), nix::mount::MsFlags::empty(), None::<&str>)
            .expect("mount cgroup2");
        let top = std::fs::File::open(dir.path()).expect("open the mount's top");
        nix::mount::umount2(dir.path(), nix::mount::MntFlags::MNT_DETACH).expect("detach the mount");
        DetachedCgroup2(top)
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.0.as_raw_fd()))
    }
}

#[test]
fn a_node_without_cgroup2_is_audited_through_a_private_mount() {
    guest::require("v1");
    let before = std::fs::read_to_string("/proc/1/mountinfo").unwrap();
    assert_eq!(cgroup2_mounts(&before), 0, "this boot mounts no cgroup2:\n{before}");

    let clean = agent(&["audit", "--output", "json"]);
    assert_eq!(clean.code, 0, "nothing wrong on this node: {}\n{}", clean.stderr, clean.stdout);
    let report = clean.json();
    assert_eq!(report["root_cgroup_id"], 1, "{report:#}");
    assert_eq!(report["root_kind"], "hierarchy");
    let note = report["root_note"].as_str().unwrap_or_default();
    assert!(note.contains("no cgroup2 is mounted"), "the report says how it saw the hierarchy: {note}");
    let table = agent(&["audit"]);
    assert!(table.stdout.contains("no cgroup2 is mounted"), "{}", table.stdout);

    // A socket-LB program below the root of the v2 hierarchy, attached
    // through a mount nobody else sees.
    let hierarchy = DetachedCgroup2::new();
    let mut tree = RootTree::at(&hierarchy.path());
    let ctr = tree.mkdir(&cilium_container());
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let _attached = Attached::new(&ctr, &prog, ALLOW_MULTI);
    let found = agent(&["audit", "--output", "json"]);
    assert_eq!(found.code, 1, "{}\n{}", found.stderr, found.stdout);
    let report = found.json();
    let below: Vec<_> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
    assert_eq!(below.len(), 1, "{report:#}");
    assert_eq!(below[0]["cgroup"], cilium_container());
    assert_eq!(below[0]["prog_id"], prog.id);
    let after = std::fs::read_to_string("/proc/1/mountinfo").unwrap();
    assert_eq!(cgroup2_mounts(&after), 0, "the audit left no mount behind:\n{after}");
}
