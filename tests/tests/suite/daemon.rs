//! `agent run` against the real kernel: a misattachment reaches /metrics
//! through the kernel's events (and through polling alone), the finding
//! names who made it, readiness waits for the first audit, and SIGTERM stops
//! the daemon cleanly with its programs detached.

use std::time::{Duration, Instant};

use integration_tests::*;
use serde_json::Value;

/// The series of the misattachment these tests make (pod OTHER_POD_UID).
const MISATTACHED: &str = r#"cgaudit_socket_lb_misattached{attach_type="connect4",owner="cilium",pod_uid="0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d"}"#;

fn ctr() -> String {
    cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER)
}
const BELOW_ROOT: &str = r#"cgaudit_findings{kind="socket_lb_below_root",severity="critical"}"#;

fn ready(d: &Daemon) -> bool {
    wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200)
}

/// Attaches a Cilium connect4 program below the root and checks the metric
/// appears, then detaches it and checks it clears. Returns the /audit report
/// seen while it was attached.
fn misattach_and_clear(d: &Daemon, t: &TestCgroup) -> Value {
    assert!(ready(d), "{}", d.logs());
    assert_eq!(d.metric(BELOW_ROOT), Some(0.0), "clean before");
    assert_eq!(d.metric(MISATTACHED), None);
    let ctr = t.mkdir(&ctr());
    let prog = Prog::load("cil_sock4_connect", "connect4");
    // Cilium's agent holds it: what proves it Cilium's.
    let _cilium = Holder::cilium(&[&prog]);
    let attached = Attached::new(&ctr, &prog, ALLOW_MULTI);
    let start = Instant::now();
    let seen = wait_until(Duration::from_secs(10), || d.metric(MISATTACHED) == Some(1.0));
    assert!(seen, "the misattachment never reached /metrics:\n{}", d.logs());
    eprintln!("misattachment visible in /metrics after {:?}", start.elapsed());
    assert_eq!(d.metric(BELOW_ROOT), Some(1.0));
    let report: Value = serde_json::from_str(&d.get("/audit").1).expect("/audit is JSON");

    drop(attached);
    let cleared = wait_until(Duration::from_secs(10), || d.metric(MISATTACHED).is_none());
    assert!(cleared, "the series outlived the attachment:\n{}", d.logs());
    assert_eq!(d.metric(BELOW_ROOT), Some(0.0));
    report
}

#[test]
fn attach_events_update_the_picture_and_name_who_attached() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("daemon-ev");
    // An hour between polls: anything seen sooner came through the events.
    // Syscall tracing, the one source that sees calls on any kernel
    // (fexit and kprobes run the same in the guests: tests/guest/v2/events.rs).
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h", "--events", "syscalls"]);
    assert!(ready(&d));
    assert_eq!(d.metric("cgaudit_event_tracing_active"), Some(1.0), "{}", d.logs());
    let report = misattach_and_clear(&d, &t);

    let f =
        report["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "socket_lb_below_root").expect("finding");
    let by = &f["attached_by"];
    assert_eq!(by["pid"], std::process::id(), "the attaching process is named: {f:#}");
    assert_eq!(by["command"], "prog_attach");
    assert!(!by["comm"].as_str().unwrap().is_empty());
    assert!(d.metric(r#"cgaudit_bpf_attach_events_total{command="prog_attach",attach_type="connect4"}"#) >= Some(1.0));
    assert!(d.metric(r#"cgaudit_bpf_attach_events_total{command="prog_detach",attach_type="connect4"}"#) >= Some(1.0));
    // The attach and the detach updated the picture; the tree was read
    // once, at start.
    assert!(d.metric("cgaudit_incremental_updates_total") >= Some(2.0), "{}", d.get("/metrics").1);
    assert_eq!(d.metric(r#"cgaudit_audits_total{trigger="startup"}"#), Some(1.0));
    for trigger in ["interval", "events_lost", "unplaced"] {
        assert_eq!(d.metric(&format!(r#"cgaudit_audits_total{{trigger="{trigger}"}}"#)), Some(0.0), "{trigger}");
    }
}

#[test]
fn polling_alone_finds_and_clears_a_misattachment() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("daemon-poll");
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1s", "--no-tracing"]);
    assert!(ready(&d));
    assert_eq!(d.metric("cgaudit_event_tracing_active"), Some(0.0));
    assert_eq!(d.metric(r#"cgaudit_event_source{source="none"}"#), Some(1.0));
    assert!(d.logs().contains("event source: none"), "{}", d.logs());
    let report = misattach_and_clear(&d, &t);
    let f = report["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "socket_lb_below_root").unwrap();
    assert!(f["attached_by"].is_null(), "no events, no actor");
    assert!(d.metric(r#"cgaudit_audits_total{trigger="interval"}"#) >= Some(2.0));
    assert_eq!(d.metric("cgaudit_incremental_updates_total"), Some(0.0));
}

#[test]
fn not_ready_until_the_first_audit_completes() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("daemon-ready");
    let later = t.path.join("not-yet");
    let d = Daemon::start(&["--cgroup-root", later.to_str().unwrap(), "--no-tracing"]);
    // The root does not exist yet: alive, not ready, and saying why.
    assert_eq!(d.get("/healthz").0, 200);
    let failing = wait_until(Duration::from_secs(5), || {
        d.metric(r#"cgaudit_audit_errors_total{reason="scan_failed"}"#) >= Some(1.0)
    });
    assert!(failing, "{}", d.logs());
    assert_eq!(d.get("/readyz").0, 503);
    assert_eq!(d.get("/audit").0, 503);
    assert!(d.logs().contains("audit failed"), "{}", d.logs());
    std::fs::create_dir(&later).unwrap();
    assert!(ready(&d), "never became ready once the root existed:\n{}", d.logs());
    let report: Value = serde_json::from_str(&d.get("/audit").1).unwrap();
    assert_eq!(report["status"], "ok");
}

#[test]
fn not_ready_once_full_passes_stop_completing() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("daemon-stale");
    let root = t.mkdir("root");
    let d = Daemon::start(&["--cgroup-root", root.to_str().unwrap(), "--interval", "1s", "--no-tracing"]);
    assert!(ready(&d));
    // Every pass fails from now on; /readyz must not keep vouching for the
    // last report (stale after three intervals, at least 10 s).
    std::fs::remove_dir(&root).unwrap();
    let stale = wait_until(Duration::from_secs(20), || d.get("/readyz").0 == 503);
    assert!(stale, "/readyz kept answering 200 with no pass completing:\n{}", d.logs());
    assert!(d.get("/readyz").1.contains("the last completed audit is"), "{}", d.get("/readyz").1);
    assert_eq!(d.get("/healthz").0, 200, "alive, only not ready");
}

#[test]
fn sigterm_stops_cleanly_and_detaches_its_programs() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("daemon-term");
    let before = loaded_program_ids();
    // A source that loads programs on any kernel (`reading`, auto's pick
    // where fexit and kprobes are refused, loads none; fexit and kprobe
    // are stopped alike in the guests).
    let mut d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--events", "syscalls"]);
    assert!(ready(&d));
    let during = loaded_program_ids();
    let its_own: Vec<u32> = during.iter().copied().filter(|id| !before.contains(id)).collect();
    assert!(!its_own.is_empty(), "its syscall tracing program is loaded: {its_own:?}");

    let start = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.child.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    let mut status = None;
    let exited = wait_until(Duration::from_secs(10), || {
        status = d.child.try_wait().unwrap();
        status.is_some()
    });
    assert!(exited, "still running after SIGTERM:\n{}", d.logs());
    eprintln!("stopped {:?} after SIGTERM", start.elapsed());
    assert_eq!(status.unwrap().code(), Some(0), "{}", d.logs());
    // The kernel frees a program after its last fd closes, asynchronously
    // (deferred work, then RCU): gone within moments, not at exit.
    let mut left = Vec::new();
    let gone = wait_until(Duration::from_secs(5), || {
        let after = loaded_program_ids();
        left = its_own.iter().copied().filter(|id| after.contains(id)).collect();
        left.is_empty()
    });
    assert!(gone, "programs left loaded after SIGTERM: {left:?}");
    assert!(d.logs().contains("stopped"));
}

/// The scrape's names, types, help and label sets, pinned; values and
/// run-specific label values are placeholders.
fn normalise_scrape(scrape: &str, t: &TestCgroup) -> String {
    let name = t.path.file_name().unwrap().to_str().unwrap();
    scrape
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                return l.to_owned();
            }
            let (head, _) = l.rsplit_once(' ').unwrap();
            let mut head = head.replace(name, "<T>");
            for key in ["kernel", "attached_by", "version", "revision", "release", "build_date", "works"] {
                if let Some(i) = head.find(&format!("{key}=\"")) {
                    let start = i + key.len() + 2;
                    let end = start + head[start..].find('"').unwrap();
                    head.replace_range(start..end, "<v>");
                }
            }
            format!("{head} <value>")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn scrape_passes_promtool_and_matches_the_golden_file() {
    if !can_run(&["promtool"]) {
        return;
    }
    let t = TestCgroup::new("daemon-scrape");
    let ctr = t.mkdir(&ctr());
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let _cilium = Holder::cilium(&[&prog]);
    let _a = Attached::new(&ctr, &prog, ALLOW_MULTI);
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    assert!(ready(&d));
    let scrape = d.get("/metrics").1;
    assert_eq!(metric_value(&scrape, MISATTACHED), Some(1.0), "{scrape}");

    let mut check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), scrape.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    let lint = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && lint.trim().is_empty(), "promtool check metrics:\n{lint}\n{scrape}");

    let got = normalise_scrape(&scrape, &t);
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/metrics.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    assert!(got == want, "scrape differs from {} (UPDATE_GOLDEN=1 to accept):\n{got}", golden.display());
}
