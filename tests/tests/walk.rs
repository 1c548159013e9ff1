//! The two ways of reading the tree (`--walk bpf-iter`: one in-kernel pass
//! of an iter/cgroup program; `--walk syscalls`: a directory walk with
//! BPF_PROG_QUERY per hook) give the same report, and the in-kernel pass
//! leaves nothing loaded behind.

use integration_tests::*;
use serde_json::Value;

const POD: &str =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podf8371831_8021_4722_af27_93c925d25a14.slice";
const CTR: &str = "cri-containerd-fbbef81081fd1fdf7653041c79cf8969be138b5bbd57db50de28cba35fd65910.scope";
const OTHER_POD: &str =
    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0d1f4a52_77c3_4a8e_9d2b_5f6e7a8b9c0d.slice";

fn audit(t: &TestCgroup, walk: &str) -> Value {
    let run = agent(&["audit", "--output", "json", "--walk", walk, "--cgroup-root", t.path.to_str().unwrap()]);
    assert!(run.code == 0 || run.code == 1, "--walk {walk}: {run:?}");
    run.json()
}

/// The report without the line that says how it was read.
fn answer(mut report: Value) -> Value {
    report.as_object_mut().unwrap().remove("walk");
    report
}

#[test]
fn both_walks_give_the_same_report_on_a_busy_tree() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("walks");
    let ctr = t.mkdir(&format!("{POD}/{CTR}"));
    let other_ctr = t.mkdir(&format!("{OTHER_POD}/cri-containerd-{OTHER_CONTAINER}.scope"));
    let slice = t.path.join("kubepods.slice");
    // Socket LB at the root, half by bpf_link; the same programs misattached
    // to a container (the seed's failure); runtime device programs with both
    // exclusive-override and multi flags; and eight more connect4 programs
    // on kubepods.slice, so each pod has nine effective connect4 programs:
    // more than the in-kernel record carries, which sends the agent to
    // BPF_F_QUERY_EFFECTIVE for them.
    let lb = load_cilium_socket_lb();
    let (legacy, linked) = lb.split_at(5);
    let _root: Vec<Attached> = legacy.iter().map(|p| Attached::new(&t.path, p, ALLOW_MULTI)).collect();
    let _links: Vec<Link> = linked.iter().map(|p| Link::new(&t.path, p)).collect();
    let _below: Vec<Attached> = lb.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();
    let dev = Prog::load("", "device");
    let _dev = Attached::new(&ctr, &dev, ALLOW_OVERRIDE);
    let _dev2 = Attached::new(&other_ctr, &dev, ALLOW_MULTI);
    let extra: Vec<Prog> = (0..8).map(|i| Prog::load(&format!("lb_extra_{i}"), "connect4")).collect();
    let _extra: Vec<Attached> = extra.iter().map(|p| Attached::new(&slice, p, ALLOW_MULTI)).collect();
    let egress = Prog::load("sd_fw_egress", "egress");
    let _egress = Link::new(&other_ctr, &egress);

    let before = loaded_program_ids();
    let iter = audit(&t, "bpf-iter");
    assert_eq!(loaded_program_ids(), before, "the iterator program is unloaded once the audit is done");
    let syscalls = audit(&t, "syscalls");
    assert_eq!(iter["walk"]["method"], "bpf_iter", "{:#}", iter["walk"]);
    assert!(iter["walk"]["fallback_reason"].is_null());
    assert_eq!(syscalls["walk"]["method"], "syscalls");
    assert_eq!(iter["attachments"].as_array().unwrap().len(), 10 + 10 + 2 + 8 + 1, "{iter:#}");
    assert_eq!(iter["cgroups_scanned"], syscalls["cgroups_scanned"]);
    assert_eq!(answer(iter.clone()), answer(syscalls.clone()), "the walks disagree");

    // The misattachment is found by both, with its link ids and flags.
    let kinds: Vec<&str> = iter["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"socket_lb_below_root"), "{kinds:?}");
    assert!(!kinds.contains(&"pods_without_socket_lb"), "the pods inherit the root's programs: {kinds:?}");
    let dev_flags: Vec<&str> = iter["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["prog_id"] == dev.id)
        .map(|a| a["attach_flags"].as_str().unwrap())
        .collect();
    assert_eq!(dev_flags.len(), 2);
    assert!(dev_flags.contains(&"override") && dev_flags.contains(&"multi"), "{dev_flags:?}");
}

#[test]
fn a_missing_root_program_is_seen_the_same_way_by_both() {
    if !can_run(&[]) {
        return;
    }
    // Only below the root: pods have no effective connect program.
    let t = TestCgroup::new("walks-missing");
    let ctr = t.mkdir(&format!("{POD}/{CTR}"));
    t.mkdir(&format!("{OTHER_POD}/cri-containerd-{OTHER_CONTAINER}.scope"));
    let lb = load_cilium_socket_lb();
    let _below: Vec<Attached> = lb.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();
    let iter = audit(&t, "bpf-iter");
    let syscalls = audit(&t, "syscalls");
    assert_eq!(answer(iter.clone()), answer(syscalls), "the walks disagree");
    let pods = iter["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "pods_without_socket_lb");
    // Programs on a container cgroup do not reach its pod's cgroup.
    assert_eq!(pods.unwrap_or_else(|| panic!("{iter:#}"))["count"], 2);
}

#[test]
fn the_default_walk_is_the_in_kernel_one_on_this_kernel() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("walks-default");
    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["walk"]["method"], "bpf_iter", "auto fell back: {:#}", report["walk"]);
    let table = agent(&["audit", "--walk", "syscalls", "--cgroup-root", t.path.to_str().unwrap()]);
    assert!(!table.stdout.contains("not in one kernel pass"), "an explicit choice is not a fallback: {}", table.stdout);
}
