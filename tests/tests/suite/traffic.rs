//! The verdict equals what the traffic does: real socket-LB programs (a
//! Service VIP rewritten to a backend on loopback, src/lb.rs) and real
//! connections from each pod's containers, beside every coverage
//! assertion. Each container of the tree holds a process, as a running
//! container's cgroup does.

use std::path::Path;
use std::time::Duration;

use integration_tests::lb::{Resident, Traffic, assert_verdict_is_traffic, load_socket_lb, probe};
use integration_tests::*;
use serde_json::Value;

const UIDS: [&str; 4] = [
    "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c01",
    "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c02",
    "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c03",
    "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c04",
];

/// Four pods under a test root, the first with two containers, each
/// container with a process in it.
struct Pods {
    t: TestCgroup,
    pods: Vec<String>,
    containers: Vec<String>,
    _residents: Vec<Resident>,
}

fn container(pod: usize, n: usize) -> String {
    cgroupfs_container("burstable", UIDS[pod], &format!("{n}{pod}").repeat(32))
}

impl Pods {
    fn new(tag: &str) -> Pods {
        let t = TestCgroup::new(tag);
        let pods: Vec<String> = (0..4).map(|p| cgroupfs_pod("burstable", UIDS[p])).collect();
        let containers: Vec<String> =
            [(0, 1), (0, 2), (1, 1), (2, 1), (3, 1)].iter().map(|&(p, n)| container(p, n)).collect();
        let residents = containers.iter().map(|c| Resident::new(&t.mkdir(c))).collect();
        Pods { t, pods, containers, _residents: residents }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.t.path.join(rel.trim_start_matches('/'))
    }

    fn audit(&self) -> Value {
        let run = agent(&["audit", "--output", "json", "--cgroup-root", self.t.path.to_str().unwrap()]);
        assert!(run.code == 0 || run.code == 1, "{run:?}");
        run.json()
    }

    fn containers(&self) -> Vec<&str> {
        self.containers.iter().map(String::as_str).collect()
    }

    /// The report's verdict equals every container's traffic.
    fn check(&self, report: &Value) {
        assert_verdict_is_traffic(&self.t.path, report, &self.containers());
    }
}

fn uncovered_pods(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "pods_without_socket_lb")
        .flat_map(|f| f["pods"].as_array().unwrap().iter().map(|p| p["uid"].as_str().unwrap().to_owned()))
        .collect()
}

/// How the CNI's programs are attached at the top.
#[derive(Debug, Clone, Copy)]
enum How {
    Links,
    Flags(u32),
}

/// The ten programs at `at`, attached `how`; dropped, they are gone.
#[expect(dead_code, reason = "held for their Drop, which detaches")]
enum Lb {
    Links(Vec<Link>),
    Attached(Vec<Attached>),
}

/// The load balancer attached at `at`, and the `cilium-agent` that holds
/// its programs (what proves them Cilium's wherever they are).
fn attach_lb(at: &Path, how: How) -> (Lb, Holder) {
    let progs = load_socket_lb();
    let holder = Holder::cilium_all(&progs);
    let lb = match how {
        How::Links => Lb::Links(progs.iter().map(|p| Link::new(at, p)).collect()),
        How::Flags(f) => Lb::Attached(progs.iter().map(|p| Attached::new(at, p, f)).collect()),
    };
    (lb, holder)
}

#[test]
fn the_probe_sees_translation_only_where_the_programs_are_in_effect() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("probe");
    let inside = t.mkdir("inside");
    let outside = t.mkdir("outside");
    assert_eq!(probe(&inside), Traffic::NONE, "nothing translates before the programs");
    let _lb = attach_lb(&inside, How::Flags(ALLOW_MULTI));
    assert_eq!(probe(&inside), Traffic::ALL);
    assert_eq!(probe(&outside), Traffic::NONE);
}

#[test]
fn lb_at_the_top_translates_every_container_however_it_is_attached() {
    if !can_run(&[]) {
        return;
    }
    let pods = Pods::new("lb-top");
    for how in [How::Links, How::Flags(ALLOW_MULTI), How::Flags(ALLOW_OVERRIDE), How::Flags(0)] {
        let _lb = attach_lb(&pods.t.path, how);
        let report = pods.audit();
        assert!(uncovered_pods(&report).is_empty(), "{how:?}: {report:#}");
        pods.check(&report);
        for c in pods.containers() {
            assert_eq!(probe(&pods.path(c)), Traffic::ALL, "{how:?}: {c}");
        }
    }
}

#[test]
fn lb_misattached_in_one_container_covers_only_that_container() {
    if !can_run(&[]) {
        return;
    }
    let pods = Pods::new("lb-one");
    let _lb = attach_lb(&pods.path(&pods.containers[0]), How::Flags(ALLOW_MULTI));
    let report = pods.audit();
    pods.check(&report);
    // Every pod lacks it somewhere; the first only in its second container.
    assert_eq!(uncovered_pods(&report), UIDS, "{report:#}");
    let f = report["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "pods_without_socket_lb").unwrap();
    let first = &f["pods"][0];
    assert_eq!(first["containers"].as_array().unwrap().len(), 1, "{first:#}");
    assert_eq!(first["containers"][0]["cgroup"], pods.containers[1]);
    assert_eq!(first["containers"][0]["id"], "20".repeat(32));
    assert!(f["message"].as_str().unwrap().contains("1 of them only in some containers"), "{}", f["message"]);
    assert_eq!(probe(&pods.path(&pods.containers[0])), Traffic::ALL);
}

/// A program of another owner below the CNI's (it allows every connect and
/// translates nothing): under an override root it replaces the CNI's where
/// it is attached (a pod's cgroup: all its
/// containers; one container's: that one only), under a multi root both run.
#[test]
fn another_program_below_replaces_an_override_root_and_runs_beside_a_multi_one() {
    if !can_run(&[]) {
        return;
    }
    let pods = Pods::new("lb-below");
    for (root_flags, replaced) in [(ALLOW_OVERRIDE, true), (ALLOW_MULTI, false)] {
        let _lb = attach_lb(&pods.t.path, How::Flags(root_flags));
        for (place, affected) in [(pods.pods[1].clone(), vec![2]), (pods.containers[3].clone(), vec![3])] {
            let other = Prog::load("mesh_connect4", "connect4");
            let _other = Attached::new(&pods.path(&place), &other, root_flags);
            let report = pods.audit();
            pods.check(&report);
            let tcp: Vec<bool> = pods.containers.iter().map(|c| probe(&pods.path(c)).tcp).collect();
            for (i, translated) in tcp.iter().enumerate() {
                let expected = !(replaced && affected.contains(&i));
                assert_eq!(*translated, expected, "root {root_flags:#x}, other program at {place}: container {i}");
            }
        }
    }
    // Under an exclusive root (no flag) nothing can be attached below.
    let _lb = attach_lb(&pods.t.path, How::Flags(0));
    let other = Prog::load("mesh_connect4", "connect4");
    let cg = open_dir(&pods.path(&pods.pods[1]));
    let refused = agent::bpf::sys::prog_attach(
        std::os::fd::AsFd::as_fd(&cg),
        std::os::fd::AsFd::as_fd(&other.fd),
        other.hook.kernel_value(),
        0,
    );
    assert_eq!(refused.unwrap_err().errno(), Some(libc::EPERM));
}

#[test]
fn a_pod_made_after_the_lb_was_attached_is_covered_in_the_audit_and_the_daemon() {
    if !can_run(&[]) {
        return;
    }
    let pods = Pods::new("lb-later");
    let _lb = attach_lb(&pods.t.path, How::Flags(ALLOW_OVERRIDE));
    let d = Daemon::start(&["--cgroup-root", pods.t.path.to_str().unwrap(), "--interval", "1h"]);
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
    let late = cgroupfs_container("besteffort", "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c05", &"5".repeat(64));
    let _resident = Resident::new(&pods.t.mkdir(&late));
    let report = pods.audit();
    assert!(uncovered_pods(&report).is_empty(), "{report:#}");
    assert_verdict_is_traffic(&pods.t.path, &report, &[late.as_str()]);
    // Another program at the new container: the daemon judges it there too.
    let other = Prog::load("mesh_connect4", "connect4");
    let _other = Attached::new(&pods.t.path.join(late.trim_start_matches('/')), &other, ALLOW_OVERRIDE);
    let listed = wait_until(sources::deadline("reading"), || {
        let picture: Value = serde_json::from_str(&d.get("/audit").1).unwrap();
        lb::uncovered_hooks(&picture).contains_key(&late)
    });
    assert!(listed, "the daemon never named the container:\n{}", d.get("/audit").1);
    let picture: Value = serde_json::from_str(&d.get("/audit").1).unwrap();
    assert_verdict_is_traffic(&pods.t.path, &picture, &[late.as_str()]);
    sources::assert_picture_is_a_fresh_audit(&d, &pods.t);
}
