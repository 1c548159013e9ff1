//! `agent run`'s event sources that run on any kernel: `reading` (what
//! `auto` picks where the kernel refuses fexit and has no kprobes, as the
//! CI host's kernel does) and `syscalls` (opt-in). The kernel-side ones
//! (fexit, kprobe) run the same scenarios in the kernel-matrix guests
//! (tests/guest/v2/events.rs), and `auto`'s pick is checked on whatever
//! kernel runs this suite.

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
fn containers_are_what_the_audit_calls_containers_by_reading() {
    if !can_run(&[]) {
        return;
    }
    sources::containers_are_what_the_audit_calls_containers("reading");
}

#[test]
fn containers_are_what_the_audit_calls_containers_by_syscall_tracing() {
    if !can_run(&[]) {
        return;
    }
    sources::containers_are_what_the_audit_calls_containers("syscalls");
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

/// `agent run` picks the best event source the kernel takes (fexit, then
/// kprobes, then reading), on whatever kernel runs the suite, and its one
/// log line names why each better source was not taken; each of those,
/// asked for by name, then refuses to start (exit 2), so the reasons are
/// the kernel's and not a guess.
#[test]
fn auto_picks_the_best_source_the_kernel_takes_and_names_each_refusal() {
    if !can_run(&["timeout"]) {
        return;
    }
    let t = TestCgroup::new("src-auto");
    let root = t.path.to_str().unwrap();
    let d = Daemon::start(&["--cgroup-root", root]);
    assert!(wait_until(std::time::Duration::from_secs(10), || d.get("/readyz").0 == 200), "{}", d.logs());
    let tiers = ["fexit", "kprobe", "reading"];
    let picked = tiers
        .into_iter()
        .find(|s| d.metric(&format!(r#"cgaudit_event_source{{source="{s}"}}"#)) == Some(1.0))
        .unwrap_or_else(|| panic!("no source reported: {}", d.logs()));
    let tracing = if picked == "reading" { 0.0 } else { 1.0 };
    assert_eq!(d.metric("cgaudit_event_tracing_active"), Some(tracing), "{}", d.logs());
    let logs = d.logs();
    let line = logs
        .lines()
        .find(|l| l.contains(&format!("event source: {picked}")))
        .unwrap_or_else(|| panic!("one line names the source: {logs}"));
    eprintln!("{line}");
    for better in tiers.into_iter().take_while(|s| *s != picked) {
        assert!(line.contains(&format!("{better} refused: ")), "the reason {better} was not taken: {line}");
        let mut c = std::process::Command::new("timeout");
        c.arg("20").arg(agent_bin()).args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--events",
            better,
            "--cgroup-root",
            root,
        ]);
        let refused = run(c);
        assert_eq!(refused.code, 2, "--events {better}, said refused, must not start: {refused:?}");
        assert!(refused.stderr.contains("--events cannot run here"), "{}", refused.stderr);
    }
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

/// Issue 36, M1, with the source that sees a link end on any kernel
/// (`BPF_LINK_DETACH`); fexit and kprobe (its release) in the guests.
#[test]
fn ending_a_link_hides_no_other_copy_of_its_program_with_syscall_tracing() {
    if !can_run(&[]) {
        return;
    }
    sources::ending_a_link_hides_no_other_copy("syscalls");
}
