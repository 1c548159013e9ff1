//! The worker's decisions on the fake kernel (`bpf::sys::fake`).

use super::*;
use crate::bpf::sys::fake;
use aya_obj::generated::bpf_cmd;

/// A worker whose picture is a node with one pod (root 1, /kubepods 2,
/// /kubepods/burstable 3, the pod 4), its changes from `source`.
fn worker(source: Source) -> Worker {
    let config = Config {
        scan: ScanOptions::node("/proc".into()),
        policy: Policy::default(),
        interval: Duration::from_secs(300),
        remediate: Remediate::Off,
        source,
        max_cgroups: 1000,
    };
    let mut w = Worker::new(config, Arc::new(Shared::new("6.18")));
    w.picture = Some(Picture::new(crate::fixtures::one_pod_tree()));
    // Its start-up pass made that picture.
    let now = Instant::now();
    w.schedule.pass_started(now);
    w.schedule.pass_done(now, Duration::ZERO, false, w.config.interval);
    w
}

/// Past the least gap between two full passes.
const GAP: Duration = Duration::from_secs(6);

/// What the schedule offers at `now` once the round's other work is
/// offered: a full pass, or the wait (reads not taken stay due: then
/// `Due::Read`).
fn after_round(w: &mut Worker, now: Instant) -> Due {
    for _ in 0..16 {
        if let d @ (Due::FullPass(_) | Due::Wait(_)) = w.schedule.due(now) {
            return d;
        }
    }
    Due::Read
}

/// An event's reading that needs no check is folded into the batch's;
/// the programs it named that the picture does not know are asked of
/// the kernel and named.
#[test]
fn a_reading_an_event_asks_for_is_folded_and_its_programs_named() {
    let mut w = worker(Source::Fexit);
    let _k = fake::Kernel::new(|cmd, attr| match cmd {
        bpf_cmd::BPF_PROG_GET_FD_BY_ID if fake::asked_id(attr) == 90 => fake::new_fd(),
        bpf_cmd::BPF_PROG_GET_FD_BY_ID => fake::errno(libc::ENOENT),
        bpf_cmd::BPF_OBJ_GET_INFO_BY_FD => fake::answer_prog_info(attr, 90, 18, "cil_sock4_conne"),
        other => panic!("unexpected {other:?}"),
    });
    let effect = Effect::Reread { cgroup_id: 4, programs: vec![90, 91], check: Check::None };
    assert_eq!(w.follow(effect.clone(), None), (Outcome::Reread, false));
    assert_eq!(w.follow(effect, None), (Outcome::Reread, false));
    assert_eq!(w.pending_rereads.iter().copied().collect::<Vec<_>>(), [4], "one reading per batch");
    let programs = &w.picture.as_ref().unwrap().last().programs;
    assert_eq!(programs.get(&90).map(|p| p.name.as_str()), Some("cil_sock4_conne"));
    assert!(!programs.contains_key(&91), "unloaded meanwhile: nothing to name");
}

/// A change the picture cannot place is a full pass, as soon as the gap
/// allows; a new cgroup is read again a second later, under the reading
/// fallback and with cgroup events alike.
#[test]
fn what_the_picture_cannot_place_is_a_full_pass_and_a_new_cgroup_is_read_again() {
    for source in [Source::Reading, Source::Fexit] {
        let mut w = worker(source);
        let now = Instant::now();
        let _k = fake::Kernel::new(|cmd, _| panic!("no bpf(2) expected: {cmd:?}"));
        assert!(!matches!(after_round(&mut w, now + GAP), Due::FullPass(_)));
        assert_eq!(w.follow(Effect::Made { cgroup_id: 5, findings: true }, None), (Outcome::Picture, true));
        let later = now + Duration::from_secs(2);
        let read = match source {
            Source::Reading => w.schedule.take_new_cgroup(later),
            _ => w.schedule.take_populated(later),
        };
        assert_eq!(read, Some(5), "{source:?}");
        assert_eq!(w.follow(Effect::Unplaced, None), (Outcome::FullPass, false));
        assert_eq!(after_round(&mut w, now + GAP), Due::FullPass(Trigger::Unplaced), "{source:?}");
    }
}

/// With cgroup events, new cgroups past what the schedule queues cannot
/// be read one by one: a full pass tells.
#[test]
fn new_cgroups_past_the_queue_are_a_full_pass() {
    let mut w = worker(Source::Fexit);
    let now = Instant::now() + GAP;
    let mut id = 5;
    while !matches!(after_round(&mut w, now), Due::FullPass(_)) {
        w.follow(Effect::Made { cgroup_id: id, findings: false }, None);
        id += 1;
        assert!(id < 100_000, "never asked for a full pass");
    }
    assert!(id > 60_000, "{id}: the queue holds tens of thousands");
}

#[test]
fn a_worker_without_progress_for_two_minutes_is_stuck() {
    let shared = Shared::new("6.18");
    let now = unix_now();
    assert_eq!(shared.stuck(now), None);
    shared.heartbeat.store(now - 119, Ordering::Relaxed);
    assert_eq!(shared.stuck(now), None);
    shared.heartbeat.store(now - 121, Ordering::Relaxed);
    assert!(shared.stuck(now).unwrap().contains("no progress for 121 s"));
}

#[test]
fn the_jitter_stays_within_ten_percent_and_never_overflows() {
    for _ in 0..100 {
        let j = jittered(Duration::from_secs(30));
        assert!(j >= Duration::from_secs(27) && j <= Duration::from_secs(33), "{j:?}");
    }
    let huge = jittered(Duration::MAX);
    assert!(huge > Duration::from_secs(1 << 40));
}

#[test]
fn the_jitter_differs_from_pass_to_pass() {
    let seen: std::collections::BTreeSet<Duration> = (0..50).map(|_| jittered(Duration::from_secs(30))).collect();
    assert!(seen.len() > 10, "{seen:?}");
}
