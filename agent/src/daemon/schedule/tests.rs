use std::sync::LazyLock;

use super::*;

static T0: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The instant `ms` milliseconds after the start.
fn t(ms: u64) -> Instant {
    *T0 + Duration::from_millis(ms)
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

const HOUR: Duration = Duration::from_secs(3600);

/// A schedule whose start-up pass ran from 0 to 200 ms, tracked, with
/// the next interval pass an hour later.
fn after_startup(link_sweep: bool, reading: bool) -> Schedule {
    let mut s = Schedule::new(t(0), HOUR, link_sweep, reading);
    s.pass_started(t(0));
    s.pass_done(t(200), ms(200), false, HOUR);
    s
}

#[test]
fn the_start_up_pass_is_due_at_once() {
    let s = Schedule::new(t(0), HOUR, false, false);
    assert_eq!(s.next(t(0)), Next::FullPass(Trigger::Startup));
}

#[test]
fn after_a_pass_nothing_is_due_until_the_interval_and_the_wait_is_a_heartbeat_at_most() {
    let s = after_startup(false, false);
    assert_eq!(s.next(t(300)), Next::Wait(HEARTBEAT));
    let at = t(200) + HOUR;
    assert_eq!(s.next(at - ms(1)), Next::Wait(ms(1)));
    assert_eq!(s.next(at), Next::FullPass(Trigger::Interval));
}

#[test]
fn full_passes_asked_for_by_events_are_five_seconds_apart() {
    let mut s = after_startup(false, false);
    s.ask_full_pass(t(300), Trigger::Unplaced);
    assert_eq!(s.next(t(300)), Next::Wait(ms(4700)));
    assert_eq!(s.next(t(4999)), Next::Wait(ms(1)));
    assert_eq!(s.next(t(5000)), Next::FullPass(Trigger::Unplaced));
    // Long after the last pass, an ask is due at once.
    s.pass_started(t(5000));
    s.pass_done(t(5100), ms(100), false, HOUR);
    s.ask_full_pass(t(20_000), Trigger::EventsLost);
    assert_eq!(s.next(t(20_000)), Next::FullPass(Trigger::EventsLost));
}

#[test]
fn an_ask_that_stands_keeps_its_trigger_and_its_moment() {
    let mut s = after_startup(false, false);
    s.ask_full_pass(t(300), Trigger::Unplaced);
    s.ask_full_pass(t(400), Trigger::EventsLost);
    assert_eq!(s.next(t(5000)), Next::FullPass(Trigger::Unplaced));
    // The pass clears it.
    s.pass_started(t(5000));
    s.pass_done(t(5100), ms(100), false, HOUR);
    assert_eq!(s.next(t(5100)), Next::Wait(HEARTBEAT));
}

#[test]
fn without_the_tree_event_passes_are_twenty_times_their_cost_apart() {
    let mut s = Schedule::new(t(0), HOUR, false, false);
    s.pass_started(t(0));
    s.pass_done(t(1000), ms(1000), true, HOUR);
    s.ask_full_pass(t(1000), Trigger::Unplaced);
    assert_eq!(s.next(t(19_999)), Next::Wait(ms(1)));
    assert_eq!(s.next(t(20_000)), Next::FullPass(Trigger::Unplaced));
    // A cheap untracked pass still waits the five seconds.
    s.pass_started(t(20_000));
    s.pass_done(t(20_010), ms(10), true, HOUR);
    s.ask_full_pass(t(20_010), Trigger::Unplaced);
    assert_eq!(s.next(t(24_999)), Next::Wait(ms(1)));
    assert_eq!(s.next(t(25_000)), Next::FullPass(Trigger::Unplaced));
}

#[test]
fn a_failed_pass_is_retried_after_a_second_until_one_succeeds_then_on_the_interval() {
    let mut s = Schedule::new(t(0), HOUR, false, false);
    s.pass_started(t(0));
    s.pass_failed(t(100), ms(100), false, HOUR);
    assert_eq!(s.next(t(1099)), Next::Wait(ms(1)));
    assert_eq!(s.next(t(1100)), Next::FullPass(Trigger::Interval));
    s.pass_started(t(1100));
    s.pass_failed(t(1200), ms(100), true, ms(30_000));
    assert_eq!(s.next(t(31_199)), Next::Wait(ms(1)));
    assert_eq!(s.next(t(31_200)), Next::FullPass(Trigger::Interval));
    // An interval shorter than the retry is kept.
    let mut s = Schedule::new(t(0), ms(500), false, false);
    s.pass_started(t(0));
    s.pass_failed(t(100), ms(100), false, ms(500));
    assert_eq!(s.next(t(600)), Next::FullPass(Trigger::Interval));
}

/// Issue 36, H1: a start-up pass that keeps failing (one object the kernel
/// would not describe failed every pass) was tried every second, with a
/// warning each time. It backs off to once a minute.
#[test]
fn a_start_up_pass_that_keeps_failing_backs_off_to_once_a_minute() {
    let mut s = Schedule::new(t(0), HOUR, false, false);
    let mut at = 0;
    let mut retries = Vec::new();
    for _ in 0..9 {
        s.pass_started(t(at));
        s.pass_failed(t(at), ms(0), false, HOUR);
        let mut next = at;
        while !matches!(s.next(t(next)), Next::FullPass(_)) {
            next += 1000;
        }
        retries.push((next - at) / 1000);
        at = next;
    }
    assert_eq!(retries, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    // One success ends the backoff: a later failure (once ready) waits the
    // interval, and a new run of failures before readiness starts at 1 s.
    s.pass_started(t(at));
    s.pass_done(t(at), ms(0), false, HOUR);
    s.pass_started(t(at + 10));
    s.pass_failed(t(at + 10), ms(0), false, HOUR);
    assert_eq!(s.next(t(at + 1010)), Next::FullPass(Trigger::Interval));
}

#[test]
fn a_judgement_waits_fifty_times_the_last_ones_cost_and_never_more_than_200_ms() {
    let mut s = after_startup(false, false);
    // The first change after a quiet spell is judged at once.
    assert!(s.judge_soon(t(10_000)));
    s.judged(t(10_000), t(10_001));
    assert!(!s.judge_soon(t(10_010)));
    assert!(s.judgement_waiting());
    assert!(!s.judge_due(t(10_050)));
    assert_eq!(s.next(t(10_010)), Next::Wait(ms(41)));
    assert!(s.judge_due(t(10_051)));
    assert_eq!(s.next(t(10_051)), Next::Again);
    // A judgement that cost 10 ms is followed by one 200 ms later, not 500.
    s.judging(t(10_051));
    s.judged(t(10_051), t(10_061));
    assert!(!s.judgement_waiting());
    assert!(!s.judge_soon(t(10_100)));
    assert!(!s.judge_due(t(10_260)));
    assert!(s.judge_due(t(10_261)));
}

#[test]
fn the_node_state_is_read_at_most_every_two_seconds_and_a_judgement_sooner_comes_again() {
    let mut s = after_startup(false, false);
    // The full pass read it at 200 ms.
    assert!(!s.judging(t(1000)));
    assert!(!s.judge_due(t(2199)));
    assert_eq!(s.next(t(1000)), Next::Wait(ms(1200)));
    assert!(s.judge_due(t(2200)));
    assert!(s.judging(t(2200)));
    assert!(!s.judge_due(t(100_000)));
    assert!(!s.judging(t(4199)));
    assert!(s.judging(t(4200)));
}

#[test]
fn syscall_tracing_lists_the_links_every_five_seconds() {
    let mut s = after_startup(true, false);
    assert!(!s.link_sweep_due(t(4999)));
    assert_eq!(s.next(t(4999)), Next::Wait(ms(1)));
    assert!(s.link_sweep_due(t(5000)));
    assert!(!s.link_sweep_due(t(5001)));
    assert!(s.link_sweep_due(t(10_000)));
    // Other sources never do.
    let mut s = after_startup(false, true);
    assert!(!s.link_sweep_due(t(100_000)));
}

#[test]
fn the_reading_sweep_comes_a_hundred_times_its_cost_later_within_two_and_eight_seconds() {
    let mut s = after_startup(false, true);
    assert!(!s.sweep_due(t(1999)));
    assert!(s.sweep_due(t(2000)));
    assert_eq!(s.swept(t(2000), ms(1)), Some(ms(2000)));
    assert_eq!(s.swept(t(2000), ms(50)), Some(ms(5000)));
    assert!(!s.sweep_due(t(6999)) && s.sweep_due(t(7000)));
    assert_eq!(s.swept(t(2000), ms(1000)), Some(ms(8000)));
    assert_eq!(s.swept(t(2000), Duration::MAX), Some(ms(8000)));
    // Never longer than --interval.
    let mut s = Schedule::new(t(0), ms(3000), false, true);
    assert_eq!(s.swept(t(0), ms(1000)), Some(ms(3000)));
    // Without the reading fallback there is no sweep.
    assert_eq!(after_startup(false, false).swept(t(0), ms(1)), None);
}

#[test]
fn a_new_cgroup_is_read_again_a_second_later_and_the_ninth_in_a_second_brings_the_sweep_forward() {
    let mut s = after_startup(false, true);
    s.swept(t(0), ms(80)); // next sweep at 8 s
    for id in 1..=9 {
        s.new_cgroup(t(1000 + id), id);
    }
    assert!(!s.read_due(t(1999)));
    assert_eq!(s.take_new_cgroup(t(2000)), None);
    assert!(s.read_due(t(2001)));
    let read: Vec<u64> = std::iter::from_fn(|| s.take_new_cgroup(t(2008))).collect();
    assert_eq!(read, (1..=8).collect::<Vec<_>>());
    // The ninth is found by the sweep, brought forward to its moment
    // (never sooner than two seconds after the last sweep).
    assert!(!s.sweep_due(t(2008)));
    assert!(s.sweep_due(t(2009)));
    // A new second counts again.
    s.swept(t(2010), ms(80));
    s.new_cgroup(t(2100), 10);
    assert_eq!(s.take_new_cgroup(t(3100)), Some(10));
}

/// A cgroup read again for a release not yet borne out: 100 ms later, then
/// doubling up to 800 ms; queued once, at the sooner time; in time order.
#[test]
fn a_cgroup_read_again_backs_off_and_is_queued_once() {
    let mut s = after_startup(false, false);
    s.read_again(t(0), 1, 0);
    s.read_again(t(0), 2, 2);
    s.read_again(t(0), 3, 30);
    assert!(!s.read_due(t(99)));
    assert_eq!(s.take_read_again(t(99)), None);
    assert_eq!(s.take_read_again(t(100)), Some(1));
    assert_eq!(s.take_read_again(t(399)), None);
    assert_eq!(s.take_read_again(t(400)), Some(2));
    assert_eq!(s.take_read_again(t(800)), Some(3), "never more than 800 ms");
    // Queued once, at the sooner of the times asked.
    s.read_again(t(1000), 4, 3);
    s.read_again(t(1000), 4, 0);
    s.read_again(t(1000), 4, 3);
    assert_eq!(s.next(t(1000)), Next::Wait(ms(100)));
    assert_eq!(s.take_read_again(t(2000)), Some(4));
    assert_eq!(s.take_read_again(t(2000)), None);
}

/// While the node has pods, their interfaces are read every 5 s; without
/// pods, never.
#[test]
fn the_pods_interfaces_are_read_every_five_seconds_while_there_are_pods() {
    let mut s = after_startup(false, false);
    assert!(!s.interfaces_due(t(60_000)), "no pods seen yet");
    s.pods_seen(t(1000), true);
    assert_eq!(s.next(t(1000)), Next::Wait(ms(5000)));
    assert!(!s.interfaces_due(t(5999)));
    assert!(s.interfaces_due(t(6000)));
    assert!(!s.interfaces_due(t(6001)));
    assert!(s.interfaces_due(t(11_000)));
    // A read that runs is looked at every 100 ms until it is done.
    s.interfaces_pending(t(11_000));
    assert!(!s.interfaces_due(t(11_099)) && s.interfaces_due(t(11_100)));
    // Another pass with pods keeps the cadence; one without stops it.
    s.pods_seen(t(12_000), true);
    assert!(s.interfaces_due(t(16_100)));
    s.pods_seen(t(17_000), false);
    assert!(!s.interfaces_due(t(60_000)));
}

/// A pod that starts on a node that had none is read a second after its
/// cgroup appears, every 5 s from then on, and once more as its grace
/// ends: its verdict is not up to 5 s late. Pods starting within the same
/// second share that read.
#[test]
fn a_new_pod_is_read_as_it_starts_and_as_its_grace_ends() {
    let mut s = after_startup(false, false);
    s.pods_seen(t(0), false);
    assert!(!s.interfaces_due(t(60_000)), "no pods");
    let grace = Duration::from_secs(30);
    s.pod_started(t(60_000), grace);
    s.pod_started(t(60_400), grace);
    assert_eq!(s.next(t(60_400)), Next::Wait(ms(600)));
    assert!(!s.interfaces_due(t(60_999)) && s.interfaces_due(t(61_000)));
    for at in [66_000, 71_000, 76_000, 81_000, 86_000] {
        assert!(s.interfaces_due(t(at)), "every 5 s: {at}");
    }
    // The grace ends at 90 s: one read at 91 s, between 86 s and 96 s.
    assert_eq!(s.next(t(86_000)), Next::Wait(ms(5000)));
    assert!(!s.interfaces_due(t(90_999)) && s.interfaces_due(t(91_000)));
    assert!(!s.interfaces_due(t(91_400)), "the second pod's grace ends within that read's second");
    // The next pod's first read comes before the 5 s read at 96 s.
    s.pod_started(t(92_000), grace);
    assert!(!s.interfaces_due(t(92_999)) && s.interfaces_due(t(93_000)));
    // Without pods at a full pass, no read waits.
    s.pods_seen(t(94_000), false);
    assert!(!s.interfaces_due(t(200_000)));
}

#[test]
fn the_sweep_brought_forward_is_never_sooner_than_two_seconds_after_the_last() {
    let mut s = after_startup(false, true);
    s.swept(t(1000), ms(80)); // next at 9 s
    for id in 1..=9 {
        s.new_cgroup(t(1000), id);
    }
    // The ninth's moment is 2 s, the last sweep ended at 1 s: 3 s.
    assert!(!s.sweep_due(t(2999)));
    assert!(s.sweep_due(t(3000)));
}

#[test]
fn a_mount_is_remediated_at_most_once_in_five_minutes() {
    let mut s = after_startup(false, false);
    assert!(s.may_remediate("/run/cilium/cgroupv2", t(0)));
    assert!(!s.may_remediate("/run/cilium/cgroupv2", t(299_999)));
    assert!(s.may_remediate("/run/calico/cgroup", t(1000)));
    assert!(s.may_remediate("/run/cilium/cgroupv2", t(300_000)));
}

/// The worker's round: the link sweep, the interfaces, the reads and a
/// judgement, in that order, each once; then the full pass asked for. A
/// read still due after its turn (cut at its budget) waits for the next
/// round and never keeps the full pass from its turn; nothing due, the
/// wait.
#[test]
fn a_round_offers_each_kind_of_work_once_in_order_then_the_full_pass() {
    let mut s = after_startup(true, false);
    s.pods_seen(t(200), true);
    // At 10 s: the link sweep and the interfaces are due, a new cgroup's
    // cgroup.events, a judgement that waited for its gap, a full pass.
    s.new_cgroup(t(9000), 7);
    assert!(s.judge_soon(t(9000)));
    s.judged(t(9000), t(9001));
    assert!(!s.judge_soon(t(9002)));
    s.ask_full_pass(t(9500), Trigger::Unplaced);
    let now = t(10_000);
    assert_eq!(s.due(now), Due::LinkSweep);
    assert_eq!(s.due(now), Due::Interfaces);
    // The read is not done (its work stays due): it is not offered again
    // in this round.
    assert_eq!(s.due(now), Due::Read);
    assert_eq!(s.due(now), Due::Judge);
    s.judging(now);
    s.judged(now, now + ms(1));
    assert_eq!(s.due(now), Due::FullPass(Trigger::Unplaced));
    // The next round: what is still due comes again, the rest has its
    // next time.
    s.pass_started(now);
    s.pass_done(t(10_100), ms(100), false, HOUR);
    assert_eq!(s.due(t(10_100)), Due::Read);
    assert_eq!(s.take_populated(t(10_100)), Some(7));
    assert_eq!(s.due(t(10_100)), Due::Wait(ms(4900)), "the link sweep and the interfaces at 15 s");
}

/// A pod's read that comes due while a read of the interfaces runs (it
/// began before the pod's moment) comes once that read has ended, not at
/// the next 5 s read; meanwhile the worker only looks at the running read.
#[test]
fn a_pods_read_due_while_a_read_runs_comes_after_it() {
    let mut s = after_startup(false, false);
    s.pod_started(t(1000), ms(2000)); // its grace ends at 3 s: a read at 4 s
    assert!(s.interfaces_due(t(2000)));
    s.interfaces_pending(t(3990));
    assert!(!s.interfaces_due(t(4050)), "the pod's moment waits for the running read");
    assert_eq!(s.next(t(4050)), Next::Wait(ms(40)), "only the running read is looked at");
    assert!(s.interfaces_due(t(4090)));
    s.interfaces_read();
    assert!(s.interfaces_due(t(4091)), "the pod's read, now");
    assert!(!s.interfaces_due(t(4092)));
}

/// Each due time `next` reads, alone, is offered by `due` as its kind of
/// work, in the round it comes due or the next: `due` never falls through
/// to a zero wait.
#[test]
fn every_due_time_is_offered_by_a_round() {
    type Make = fn(&mut Schedule);
    let cases: [(&str, Make, Due); 8] = [
        (
            "a judgement",
            |s| {
                s.judged(t(299), t(300));
                assert!(!s.judge_soon(t(300)));
            },
            Due::Judge,
        ),
        (
            "the node state",
            |s| {
                s.judging(t(300));
                s.judged(t(300), t(301));
            },
            Due::Judge,
        ),
        ("the interfaces", |s| s.pods_seen(t(300), true), Due::Interfaces),
        ("a pod's read", |s| s.pod_started(t(300), ms(0)), Due::Interfaces),
        ("a cgroup read again", |s| s.read_again(t(300), 9, 0), Due::Read),
        ("a new cgroup's processes", |s| assert!(s.new_cgroup(t(300), 9)), Due::Read),
        ("a full pass asked", |s| s.ask_full_pass(t(300), Trigger::Unplaced), Due::FullPass(Trigger::Unplaced)),
        ("the interval", |_| {}, Due::FullPass(Trigger::Interval)),
    ];
    for (what, make, kind) in cases {
        let mut s = after_startup(false, false);
        make(&mut s);
        let at = if kind == Due::FullPass(Trigger::Interval) { t(3_600_300) } else { t(60_000) };
        // Each of the round's kinds is offered once before a new round.
        let offered: Vec<Due> = (0..5).map(|_| s.due(at)).collect();
        assert!(offered.contains(&kind), "{what}: {offered:?}");
        assert!(!offered.contains(&Due::Wait(Duration::ZERO)), "{what}: {offered:?}");
    }
    // The link sweep, and the reading fallback's sweep and new cgroups.
    let mut s = after_startup(true, true);
    assert!(s.new_cgroup(t(300), 9));
    let offered: Vec<Due> = (0..3).map(|_| s.due(t(60_000))).collect();
    assert_eq!(offered[..2], [Due::LinkSweep, Due::Read], "{offered:?}");
}

/// Issue 48: a link or tc change rtnetlink announces is read at once;
/// changes without pause (a pod churning devices in the node's namespace)
/// are read 2 s after the last read at the earliest.
#[test]
fn a_network_change_is_read_at_once_and_a_churn_two_seconds_apart() {
    let mut s = after_startup(false, false);
    s.pods_seen(t(0), true);
    s.network_changed(t(1000));
    assert!(s.interfaces_due(t(1000)), "read at once");
    s.network_changed(t(1200));
    assert!(!s.interfaces_due(t(2999)), "2 s after the last read");
    assert!(s.interfaces_due(t(3000)));
    // The periodic read is 5 s after that one; a change brings it forward.
    s.network_changed(t(3100));
    assert!(!s.interfaces_due(t(4999)));
    assert!(s.interfaces_due(t(5000)) && !s.interfaces_due(t(5000)));
    assert!(s.interfaces_due(t(10_000)), "and the periodic one follows");
}
