//! The seed fixed on each kernel, at the real root: `agent remount --apply
//! --detach-misattached --unpin-stale-links` replaces the namespaced mount
//! (beneath it from 6.5, `MOVE_MOUNT_BENEATH`; detaching it first before),
//! detaches what landed below the root, and a CNI agent restarting through
//! the repaired mount puts socket LB back for every pod: the traffic says
//! so, container by container, before and after.

use std::os::unix::fs::MetadataExt;

use integration_tests::guest::{self, RootTree, StandInCni};
use integration_tests::lb::{Resident, assert_verdict_is_traffic, probe};
use integration_tests::*;

const CILIUM_PATH: &str = "/run/cilium/cgroupv2";

fn seed_fixed(attach: &str) {
    let g = guest::require("v2");
    let mut tree = RootTree::new();
    let ctr_rel = cilium_container();
    let ctr = tree.mkdir(&ctr_rel);
    let others: Vec<String> =
        [(OTHER_POD_UID, OTHER_CONTAINER), ("0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0e", &"e".repeat(64))]
            .iter()
            .map(|(uid, id)| systemd_container("besteffort", uid, id))
            .collect();
    let _residents: Vec<Resident> = others.iter().map(|c| Resident::new(&tree.mkdir(c))).collect();
    let cni = StandInCni::start_with(CILIUM_PATH, &ctr, true, attach, &["--real-lb"]);
    let _detach = (DetachAll(ctr.clone()), DetachAll(tree.root.clone()));
    let mut containers: Vec<&str> = others.iter().map(String::as_str).collect();
    containers.push(&ctr_rel);

    // Before: translated in the agent's own container only, and the audit
    // says exactly that.
    let before = agent(&["audit", "--output", "json"]);
    assert_eq!(before.code, 1, "{}", before.stderr);
    assert_verdict_is_traffic(&tree.root, &before.json(), &containers);
    assert!(probe(&ctr).translated());
    assert!(!probe(&tree.root.join(others[0].trim_start_matches('/'))).translated());

    let fix = agent(&["remount", "--apply", "--detach-misattached", "--unpin-stale-links", "--output", "json"]);
    assert_eq!(fix.code, 0, "{}\n{}", fix.stderr, fix.stdout);
    let report = fix.json();
    let expected = if g.version() >= (6, 5) { "beneath" } else { "detached_first" };
    assert_eq!(report["replaced"], expected, "{report:#}");
    guest::platform("remount", expected);
    let detached = report["detach"].as_array().unwrap();
    assert_eq!(detached.iter().filter(|d| d["result"] == "done").count(), 10, "{report:#}");
    assert_eq!(std::fs::metadata(CILIUM_PATH).unwrap().ino(), 1, "now rooted at the root");
    assert!(!probe(&ctr).translated(), "nothing translates between the fix and the agent's restart");

    // The agent restarts (in its pod's namespaces as before) and attaches
    // through the repaired mount.
    drop(cni);
    let _restarted = StandInCni::start_with(CILIUM_PATH, &ctr, true, "links", &["--real-lb", "--use-mount"]);
    let after = agent(&["audit", "--output", "json"]);
    let report = after.json();
    let kinds: Vec<&str> = report["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert!(!kinds.contains(&"socket_lb_below_root") && !kinds.contains(&"pods_without_socket_lb"), "{report:#}");
    assert_verdict_is_traffic(&tree.root, &report, &containers);
    for c in &containers {
        assert!(probe(&tree.root.join(c.trim_start_matches('/'))).translated(), "{c} after the fix");
    }
    // The repaired mount is the node's now: remove it with the test.
    let _ = nix::mount::umount2(CILIUM_PATH, nix::mount::MntFlags::MNT_DETACH);
}

#[test]
fn the_seed_through_links_is_fixed_and_traffic_restored() {
    seed_fixed("links");
}

#[test]
fn the_seed_through_prog_attach_is_fixed_and_traffic_restored() {
    seed_fixed("multi");
}
