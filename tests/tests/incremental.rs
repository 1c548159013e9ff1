//! `agent run` keeps its picture of the node with kernel events instead of
//! re-reading the tree: what changed is applied, and the picture stays equal
//! to a fresh full audit; no caller can make it walk the tree or log without
//! end; and a misattachment is still reported while containers churn.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use integration_tests::*;
use serde_json::Value;

const MISATTACHED: &str = r#"cgaudit_socket_lb_misattached{attach_type="connect4",owner="cilium"}"#;

fn ready(d: &Daemon) {
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
}

/// Full passes the daemon ran, whatever triggered them.
fn full_passes(d: &Daemon) -> f64 {
    let m = d.get("/metrics").1;
    ["startup", "interval", "events_lost", "unplaced"]
        .iter()
        .filter_map(|t| metric_value(&m, &format!(r#"cgaudit_audits_total{{trigger="{t}"}}"#)))
        .sum()
}

#[test]
fn an_unprivileged_flood_of_failing_bpf_calls_costs_no_audit_and_hides_nothing() {
    if !can_run(&["setpriv"]) {
        return;
    }
    let t = TestCgroup::new("flood");
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    ready(&d);
    assert_eq!(d.metric("cgaudit_event_tracing_active"), Some(1.0), "{}", d.logs());
    let fixture = agent_bin().with_file_name("fixture");
    let log_lines = d.logs().lines().count();
    // uid 65534 in a loop: bpf(BPF_LINK_DETACH) on a zeroed attr, 1,000 a
    // second for 4 s. Every call fails.
    let mut flood = Command::new("setpriv");
    flood.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(&fixture).args([
        "bpf-flood",
        "4",
        "1000",
    ]);
    let flood = flood.stdout(std::process::Stdio::piped()).spawn().expect("flood");
    // Meanwhile, a real misattachment, as root.
    std::thread::sleep(Duration::from_secs(1));
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let start = Instant::now();
    let attached = Attached::new(&ctr, &prog, ALLOW_MULTI);
    let seen = wait_until(Duration::from_secs(3), || d.metric(MISATTACHED) == Some(1.0));
    let latency = start.elapsed();
    let out = flood.wait_with_output().expect("flood ran");
    let calls: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    assert!(calls >= 3_000, "the flood made {calls} calls");
    assert!(seen, "the misattachment made during the flood was not reported:\n{}", d.logs());
    eprintln!("misattachment reported after {latency:?}, during a flood of {calls} failing bpf() calls");
    assert!(latency < Duration::from_secs(2), "{latency:?}");
    // The failing calls triggered nothing: the one full pass is the
    // startup's, no event was counted but the real ones, and the log did
    // not grow with the flood.
    assert_eq!(full_passes(&d), 1.0, "{}", d.get("/metrics").1);
    assert_eq!(d.metric(r#"cgaudit_bpf_attach_events_total{command="link_detach",attach_type="none"}"#), Some(0.0));
    assert_eq!(d.metric("cgaudit_bpf_events_lost_total"), Some(0.0));
    let grown = d.logs().lines().count() - log_lines;
    assert!(grown < 10, "{grown} log lines during the flood:\n{}", d.logs());
    drop(attached);
}

fn audit_json(t: &TestCgroup) -> Value {
    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    run.json()
}

/// What must agree between the daemon's picture and a fresh audit.
fn answer(report: &Value) -> (BTreeSet<String>, BTreeSet<String>, Value, Value) {
    let attachments = report["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{} {} {} prog {} ({}) link {} owner {}",
                a["cgroup"],
                a["attach_type"],
                a["attach_flags"],
                a["prog_id"],
                a["prog_name"],
                a["link_id"],
                a["owner"]
            )
        })
        .collect();
    let findings = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{} {} {} {} {} {}",
                f["kind"], f["severity"], f["cgroup"], f["attach_type"], f["prog_id"], f["link_id"]
            )
        })
        .collect();
    (attachments, findings, report["cgroups_scanned"].clone(), report["status"].clone())
}

#[test]
fn the_picture_equals_a_fresh_audit_after_churn_and_attach_detach_link_pin_sequences() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("picture");
    // The CNI's programs at the top: links, one pinned.
    let lb = load_cilium_socket_lb();
    let root_links: Vec<Link> = lb[..4].iter().map(|p| Link::new(&t.path, p)).collect();
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    ready(&d);
    let updates = || d.metric("cgaudit_incremental_updates_total").unwrap_or(0.0);
    let dev = Prog::load("", "device");

    // Churn: containers made with a device program, some removed again.
    let mut kept = Vec::new();
    for i in 0..30 {
        let c = t.mkdir(&format!("{}/c{i}", cgroupfs_pod("burstable", OTHER_POD_UID)));
        let a = Attached::new(&c, &dev, ALLOW_MULTI);
        if i % 3 == 0 {
            kept.push(a);
        } else {
            drop(a);
            std::fs::remove_dir(&c).unwrap();
        }
    }
    // A misattachment by BPF_PROG_ATTACH, and one by a link, below the root.
    let ctr = t.mkdir(&cgroupfs_container("besteffort", SEED_POD_UID, SEED_CONTAINER));
    let _legacy = Attached::new(&ctr, &lb[4], ALLOW_MULTI);
    let below_link = Link::new(&ctr, &lb[5]);
    // A link pinned, then detached: defunct while the pin holds it.
    let fs = BpfFs::new();
    let pinned = Link::new(&ctr, &lb[6]);
    fs.pin("pinned", std::os::fd::AsFd::as_fd(&pinned.fd));
    agent::bpf::sys::link_detach(std::os::fd::AsFd::as_fd(&pinned.fd)).unwrap();
    drop(pinned);
    // A link ended by closing its last fd: no bpf() call (the sweep sees it).
    drop(below_link);
    // A program detached from the root's links by its link's fd closing too.
    drop(root_links.into_iter().next());
    // An exclusive (override) hook on a pod, so pods' effective sets differ.
    let pod = t.path.join(cgroupfs_pod("besteffort", SEED_POD_UID).trim_start_matches('/'));
    let over = Prog::load("lb_override", "connect4");
    let _over = Attached::new(&pod, &over, ALLOW_OVERRIDE);

    // Quiet: the picture has taken everything in (the link sweep runs
    // every 5 s), with no full pass beyond the startup's.
    let mut last = -1.0;
    let settled = wait_until(Duration::from_secs(20), || {
        std::thread::sleep(Duration::from_millis(5500));
        let now = updates();
        let quiet = now == last;
        last = now;
        quiet
    });
    assert!(settled, "the daemon never settled:\n{}", d.logs());
    assert!(updates() >= 40.0, "the changes were applied as events: {}", updates());
    assert_eq!(full_passes(&d), 1.0, "{}", d.get("/metrics").1);

    let picture: Value = serde_json::from_str(&d.get("/audit").1).unwrap();
    let fresh = audit_json(&t);
    let (pa, pf, pc, ps) = answer(&picture);
    let (fa, ff, fc, fs_) = answer(&fresh);
    let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| a.difference(b).cloned().collect::<Vec<_>>();
    assert!(
        pa == fa,
        "attachments differ:\nonly in the picture: {:#?}\nonly in the audit: {:#?}",
        only(&pa, &fa),
        only(&fa, &pa)
    );
    assert!(
        pf == ff,
        "findings differ:\nonly in the picture: {:#?}\nonly in the audit: {:#?}",
        only(&pf, &ff),
        only(&ff, &pf)
    );
    assert_eq!((pc, ps), (fc, fs_), "cgroups and status");
    let kinds: BTreeSet<&str> =
        picture["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains("socket_lb_below_root") && kinds.contains("defunct_link"), "{kinds:?}");
    drop(kept);
}

#[test]
fn a_misattachment_made_during_heavy_churn_is_reported() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("churn-misattach");
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    ready(&d);
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (stop, base) = (stop.clone(), t.path.clone());
        std::thread::spawn(move || {
            let dev = Prog::load("", "device");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let dir = base.join(format!("kubepods/burstable/pod{OTHER_POD_UID}/churn-{n}"));
                std::fs::create_dir_all(&dir).unwrap();
                let a = Attached::new(&dir, &dev, ALLOW_MULTI);
                drop(a);
                std::fs::remove_dir(&dir).unwrap();
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let ctr = t.mkdir(&cgroupfs_container("burstable", SEED_POD_UID, SEED_CONTAINER));
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let start = Instant::now();
    let attached = Attached::new(&ctr, &prog, ALLOW_MULTI);
    let seen = wait_until(Duration::from_secs(10), || d.metric(MISATTACHED) == Some(1.0));
    let latency = start.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let starts = churn.join().unwrap();
    assert!(seen, "not reported during churn:\n{}", d.logs());
    eprintln!("reported after {latency:?}; {starts} container starts meanwhile");
    assert!(starts > 100, "the churn was not heavy: {starts}");
    drop(attached);
    assert!(wait_until(Duration::from_secs(10), || d.metric(MISATTACHED).is_none()), "{}", d.logs());
}
