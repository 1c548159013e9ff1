//! `agent run`'s event sources that this machine allows: `reading` (its
//! default here: this kernel refuses fexit and has no kprobes) and
//! `syscalls` (opt-in). The kernel-side ones (fexit, kprobe) run the same
//! scenarios in the kernel-matrix guests (tests/guest/v2/events.rs).

use integration_tests::*;

#[test]
fn changes_reach_the_picture_by_reading() {
    if !can_run(&[]) {
        return;
    }
    sources::changes_reach_the_picture("reading");
}

#[test]
fn changes_reach_the_picture_by_syscall_tracing() {
    if !can_run(&[]) {
        return;
    }
    sources::changes_reach_the_picture("syscalls");
}

#[test]
fn a_flood_of_failing_calls_costs_the_reading_fallback_nothing() {
    if !can_run(&[]) {
        return;
    }
    sources::a_flood_of_failing_calls_costs_nothing("reading");
}

#[test]
fn a_flood_of_failing_calls_costs_syscall_tracing_nothing() {
    if !can_run(&[]) {
        return;
    }
    sources::a_flood_of_failing_calls_costs_nothing("syscalls");
}

/// This kernel refuses fexit (EPERM) and has no kprobes: the default is
/// the reading fallback, and the log says why each better source was not.
#[test]
fn auto_falls_back_to_reading_here_and_says_why() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("src-auto");
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap()]);
    assert!(wait_until(std::time::Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
    assert_eq!(d.metric(r#"cgaudit_event_source{source="reading"}"#), Some(1.0), "{}", d.logs());
    assert_eq!(d.metric("cgaudit_event_tracing_active"), Some(0.0));
    let logs = d.logs();
    let line = logs.lines().find(|l| l.contains("event source: reading")).expect("one line names the source");
    assert!(line.contains("fexit refused: ") && line.contains("kprobe refused: "), "{line}");
    // A source asked for by name that cannot run refuses to start.
    let refused =
        agent(&["run", "--listen", "127.0.0.1:0", "--events", "fexit", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--events cannot run here"), "{}", refused.stderr);
}

#[test]
fn who_attached_survives_a_flood_of_syscall_traced_events() {
    if !can_run(&[]) {
        return;
    }
    sources::who_attached_survives_a_flood_of_events("syscalls");
}

#[test]
fn a_busy_cgroup_cannot_put_syscall_tracing_behind() {
    if !can_run(&[]) {
        return;
    }
    sources::a_busy_cgroup_cannot_put_the_daemon_behind("syscalls", 1_000);
}

/// Issue 36, M1, with the source on this kernel that sees a link end
/// (`BPF_LINK_DETACH`); fexit and kprobe (its release) in the guests.
#[test]
fn ending_a_link_hides_no_other_copy_of_its_program_with_syscall_tracing() {
    if !can_run(&[]) {
        return;
    }
    sources::ending_a_link_hides_no_other_copy("syscalls");
}
