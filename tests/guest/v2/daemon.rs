//! `agent run` as the DaemonSet runs it, at each kernel's real root: it
//! picks the best event source there, reports the seed at once, keeps a
//! picture equal to a fresh audit, and stops on SIGTERM with its programs
//! gone.

use std::time::{Duration, Instant};

use integration_tests::guest::{self, RootTree, StandInCni};
use integration_tests::*;

#[test]
fn the_daemon_at_the_real_root_reports_the_seed_and_stops_cleanly() {
    let g = guest::require("v2");
    let before = loaded_program_ids();
    let mut d = Daemon::start(&["--interval", "1h"]);
    assert!(wait_until(Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
    let best = ["fexit", "kprobe"].into_iter().find(|s| g.accepts(s)).unwrap_or("reading");
    assert_eq!(d.metric(&format!(r#"cgaudit_event_source{{source="{best}"}}"#)), Some(1.0), "{}", d.logs());
    // What this kernel takes, each tried once: shown in /audit, logged once.
    let report: serde_json::Value = serde_json::from_str(&d.get("/audit").1).expect("/audit is JSON");
    let f = &report["kernel_features"];
    assert_eq!(f["fexit"]["works"], g.accepts("fexit"), "{f}");
    if g.accepts("fexit") {
        assert!(f.get("kprobe").is_none(), "auto stops at the first source that starts: {f}");
    } else {
        assert_eq!(f["kprobe"]["works"], true, "{f}");
    }
    assert_eq!(f["iter_cgroup"]["works"], g.version() >= (6, 1), "the cgroup iterator came in 6.1: {f}");
    assert_eq!(f["btf_mmap"]["works"], false, "vmlinux BTF can be mapped from 6.16: {f}");
    let memlock = if g.version() >= (5, 11) { "memory cgroups" } else { "RLIMIT_MEMLOCK" };
    assert_eq!(f["memlock_accounting"]["detail"], memlock, "{f}");
    assert_eq!(f["attach_types"]["works"], true, "{f}");
    assert_eq!(d.logs().matches("kernel features:").count(), 1, "{}", d.logs());
    let below = r#"cgaudit_findings{kind="socket_lb_below_root",severity="critical"}"#;
    assert_eq!(d.metric(below), Some(0.0));
    let programs =
        format!(r#"cgaudit_socket_lb_misattached_programs{{cgroup="{}",owner="cilium"}}"#, cilium_container());

    let mut tree = RootTree::new();
    let ctr = tree.mkdir(&cilium_container());
    let start = Instant::now();
    let cni = StandInCni::start("/run/cilium/cgroupv2", &ctr, true, "links");
    let ten = || d.metric(below) == Some(1.0) && d.metric(&programs) == Some(10.0);
    assert!(wait_until(Duration::from_secs(3), ten), "{}", d.get("/metrics").1);
    eprintln!("the seed's ten links reached /metrics {:?} after the agent started", start.elapsed());
    let mount = r#"cgaudit_findings{kind="cgroup_mount_not_root",severity="critical"}"#;
    assert!(wait_until(Duration::from_secs(5), || d.metric(mount) == Some(1.0)), "the cause is named too");
    sources::assert_picture_is_an_audit(&d, &[]);
    drop(cni);
    assert!(wait_until(Duration::from_secs(3), || d.metric(below) == Some(0.0)), "{}", d.get("/metrics").1);
    sources::assert_picture_is_an_audit(&d, &[]);

    let its_own: Vec<u32> = programs_left_since(&before);
    assert!(!its_own.is_empty(), "its event programs are loaded");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.child.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    let mut status = None;
    assert!(wait_until(Duration::from_secs(5), || {
        status = d.child.try_wait().unwrap();
        status.is_some()
    }));
    assert_eq!(status.unwrap().code(), Some(0), "{}", d.logs());
    let gone = wait_until(Duration::from_secs(5), || {
        let now = loaded_program_ids();
        its_own.iter().all(|id| !now.contains(id))
    });
    assert!(gone, "its programs stay loaded after SIGTERM");
}
