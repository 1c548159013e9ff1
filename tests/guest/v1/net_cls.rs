//! cgroup v1 `net_cls`/`net_prio` and cgroup-v2 socket programs, with real
//! traffic, on each kernel. Before commit 8520e224f547 (mainline 5.15, 5.10.y
//! from 5.10.226), writing `net_cls.classid` (or `net_prio.ifpriomap`, or a
//! task joining a net_prio cgroup) makes every new socket belong to the v2
//! root for the rest of the boot: programs at the hierarchy's real root keep
//! running for everyone, programs below it stop running. What the kernel
//! does is measured here, and `cgroup_v1_net_controller_conflict` must fire
//! exactly when programs stop running.
//!
//! The classid write is for the whole boot: this is one test, its phases in
//! order.

use std::path::{Path, PathBuf};

use integration_tests::guest::{self, RootTree};
use integration_tests::lb::{Resident, load_socket_lb, probe};
use integration_tests::*;
use serde_json::Value;

const CILIUM_PATH: &str = "/run/cilium/cgroupv2";
const NET_CLS: &str = "/sys/fs/cgroup/net_cls,net_prio";

/// cgroup2 mounted where Cilium mounts it on a v1 node (from PID 1's
/// namespaces: the real root); detached on drop.
struct Cgroup2At(PathBuf);

impl Cgroup2At {
    fn mount(path: &str) -> Cgroup2At {
        std::fs::create_dir_all(path).unwrap();
        nix::mount::mount(Some("none"), path, Some("cgroup2"), nix::mount::MsFlags::empty(), None::<&str>)
            .expect("mount cgroup2");
        Cgroup2At(PathBuf::from(path))
    }
}

impl Drop for Cgroup2At {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

fn conflict(report: &Value) -> Option<&Value> {
    report["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "cgroup_v1_net_controller_conflict")
}

fn audit() -> Value {
    let run = agent(&["audit", "--output", "json"]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    run.json()
}

/// (translated with the programs below the root, at X; translated with
/// them at the real root, from Y; the audits of both).
fn phase(tree: &RootTree, x: &Path, y: &Path) -> (bool, bool, Value, Value) {
    let lb = load_socket_lb();
    // Held by Cilium's agent: Cilium's, wherever they are attached.
    let _cilium = Holder::cilium_all(&lb);
    let below: Vec<Attached> = lb.iter().map(|p| Attached::new(x, p, ALLOW_MULTI)).collect();
    let from_x = probe(x).translated();
    let below_report = audit();
    drop(below);
    let at_root: Vec<Attached> = lb.iter().map(|p| Attached::new(&tree.root, p, ALLOW_MULTI)).collect();
    let from_y = probe(y).translated();
    let root_report = audit();
    drop(at_root);
    (from_x, from_y, below_report, root_report)
}

#[test]
fn net_cls_in_use_stops_programs_below_the_real_root_only_where_the_kernel_lacks_the_fix() {
    let g = guest::require("v1");
    assert!(Path::new(NET_CLS).join("net_cls.classid").exists(), "this boot mounts net_cls,net_prio");
    let _cilium = Cgroup2At::mount(CILIUM_PATH);
    let mut tree = RootTree::at(Path::new(CILIUM_PATH));
    let x = tree.mkdir(&cilium_container());
    let y = tree.mkdir(&systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER));
    let _residents = (Resident::new(&x), Resident::new(&y));
    let lacks_fix =
        std::fs::read_to_string("/proc/kallsyms").unwrap().lines().any(|l| l.ends_with(" cgroup_sk_alloc_disable"));

    let (x_before, y_before, below_before, root_before) = phase(&tree, &x, &y);
    eprintln!("{}: before net_cls.classid is written: below the root {x_before}, at the root {y_before}", g.label);
    assert!(x_before && y_before, "both translate while net_cls is not in use");
    assert!(conflict(&below_before).is_none() && conflict(&root_before).is_none(), "{below_before:#}");

    // Something uses net_cls (a v1 container runtime writes classids).
    let classed = Path::new(NET_CLS).join("cgaudit-test-classid");
    std::fs::create_dir_all(&classed).unwrap();
    std::fs::write(classed.join("net_cls.classid"), "0x100001").unwrap();

    let (x_after, y_after, below_after, root_after) = phase(&tree, &x, &y);
    eprintln!(
        "{}: after (kernel {} the fix): below the root {x_after}, at the root {y_after}",
        g.label,
        if lacks_fix { "without" } else { "with" }
    );
    guest::platform(
        "net_cls",
        if x_after { "below-root programs keep applying" } else { "below-root programs stop (finding raised)" },
    );
    assert!(y_after, "programs at the real root keep running for everyone");
    assert_eq!(x_after, !lacks_fix, "programs below the real root stop running exactly where the kernel lacks the fix");
    // The finding fires exactly when they stopped.
    assert_eq!(conflict(&below_after).is_some(), !x_after, "{below_after:#}");
    assert!(conflict(&root_after).is_none(), "nothing is voided at the real root: {root_after:#}");
    if let Some(f) = conflict(&below_after) {
        assert_eq!(f["severity"], "critical");
        let m = f["message"].as_str().unwrap();
        assert!(m.contains("cgroup_sk_alloc_disable") && m.contains("net_cls.classid"), "{m}");
    }
    let _ = std::fs::remove_dir(&classed);
}
