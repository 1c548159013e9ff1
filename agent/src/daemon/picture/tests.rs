//! The picture's rules, one scenario each, on literal trees and events.
//! (Over 500 lines: one test per rule of `picture` and its submodules,
//! sharing the builders at the top.)

use super::releases::RELEASE_TRIES;
use super::*;
use crate::bpf::AttachFlags;
use crate::bpf::BpfCommand;
use crate::bpf::ProgType;
use crate::bpf::programs::Program;
use crate::bpf::sys::CgroupLinkInfo;
use crate::daemon::sweep::Sweep;
use crate::event::{Change, Hints};
use crate::fixtures::*;
use crate::snapshot::Effective;
use std::time::Duration;

fn ev(change: Change) -> Event {
    Event { seq: 1, time_unix_ms: 1, change, pid: 7, tid: 7, comm: "runc".into(), caller_cgroup_id: 1 }
}

fn t(n: &str) -> AttachType {
    AttachType::from_name(n).unwrap()
}

fn connect4(e: &Effective) -> Vec<u32> {
    e.get(&t("connect4")).cloned().unwrap_or_default()
}

fn picture() -> Picture {
    Picture::new(one_pod_tree())
}

fn made(id: u64, parent: u64, name: &str) -> Event {
    ev(Change::CgroupMade { cgroup_id: id, parent_id: parent, name: name.as_bytes().to_vec() })
}

/// What is in effect for the pod (or its first container).
fn pod_effective(p: &mut Picture) -> Effective {
    (*p.snapshot().pods[0].effective).clone()
}

/// cgroups made one by one between full passes count against
/// --max-cgroups too: past it the tree goes, and a full pass is asked for.
#[test]
fn cgroups_made_past_the_limit_let_the_tree_go() {
    let mut p = picture();
    p.limit_tree(6);
    assert_eq!(p.apply(&made(5, 4, "c1")), Effect::Made { cgroup_id: 5, findings: true });
    assert_eq!(p.apply(&made(6, 4, "c2")), Effect::Made { cgroup_id: 6, findings: true });
    assert!(p.tracked());
    assert_eq!(p.apply(&made(7, 4, "c3")), Effect::Unplaced, "a 7th cgroup");
    assert!(!p.tracked());
}

/// Past --max-cgroups: no tree. A call about a cgroup asks for a full
/// pass (it cannot be placed); cgroups made and removed wait for one.
#[test]
fn without_the_tree_a_cgroup_call_asks_for_a_full_pass() {
    let mut p = picture();
    p.drop_tree();
    assert!(!p.tracked());
    let call = |cgroup_id| {
        ev(Change::BpfCall {
            command: BpfCommand::ProgAttach,
            cgroup_id,
            attach_type: Some(t("connect4")),
            prog_id: Some(9),
            link_id: None,
            flags: 0,
            hints: Hints::default(),
        })
    };
    assert_eq!(p.apply(&call(Some(4))), Effect::Unplaced);
    assert_eq!(p.apply(&call(None)), Effect::Unplaced);
    assert_eq!(p.apply(&made(9, 4, "x")), Effect::Nothing);
    assert_eq!(p.path(4), None);
    assert_eq!(p.cgroups(), p.last().cgroups_scanned);
}

fn multi(hook: &str, prog_id: u32) -> Attached {
    Attached { attach_type: t(hook), flags: AttachFlags::Multi, prog_id, prog_flags: None }
}

fn call(command: BpfCommand, cgroup_id: Option<u64>, hook: &str, prog_id: u32, link_id: Option<u32>) -> Change {
    Change::BpfCall {
        command,
        cgroup_id,
        attach_type: AttachType::from_name(hook),
        prog_id: Some(prog_id),
        link_id,
        flags: 2,
        hints: Hints::CGROUP,
    }
}

fn all() -> Vec<AttachType> {
    AttachType::all().collect()
}

#[test]
fn a_new_container_is_placed_by_its_parent_and_an_attach_asks_to_read_it_again() {
    let mut p = picture();
    let e = p.apply(&made(5, 4, "ctr"));
    assert_eq!(e, Effect::Made { cgroup_id: 5, findings: true }, "a new container may lack what the pod has");
    // Empty when made: a container once it holds processes, as the full
    // pass reads it (cgroup.events), and one no more when they leave.
    assert!(p.snapshot().pods[0].containers.is_empty());
    assert!(p.set_populated(5, true));
    assert_eq!(p.snapshot().pods[0].containers.iter().map(|c| c.cgroup_id).collect::<Vec<_>>(), [5]);
    assert!(!p.set_populated(5, true), "nothing changed");
    assert!(p.set_populated(5, false));
    assert!(p.snapshot().pods[0].containers.is_empty());
    p.set_populated(5, true);
    let path = format!("/kubepods/burstable/pod{POD_UID}/ctr");
    assert_eq!(p.path(5).as_deref(), Some(path.as_str()));
    let e = p.apply(&ev(call(BpfCommand::ProgAttach, Some(5), "device", 90, None)));
    let check = Check::Holds { prog_id: 90, hook: t("device") };
    assert_eq!(e, Effect::Reread { cgroup_id: 5, programs: vec![90], check });
    let HookRead { removed, added, findings, .. } = p.set_hook(5, &all(), &[multi("device", 90)], None, Check::None);
    assert!(removed.is_empty() && added.len() == 1 && !findings, "a device program changes no finding");
    assert_eq!(p.snapshot().attachments.len(), 1);
    // Removed with its cgroup.
    assert_eq!(p.apply(&ev(Change::CgroupRemoved { cgroup_id: 5 })), Effect::Applied { findings: true });
    assert!(p.snapshot().pods[0].containers.is_empty());
    assert!(p.snapshot().attachments.is_empty());
    assert_eq!(p.path(5), None);
}

#[test]
fn a_link_the_kernel_releases_asks_for_a_reading_once_it_is_off_its_hook() {
    let mut p = picture();
    // A link made on the pod's cgroup, then its last fd closed: the
    // release's event arrives before the kernel has taken it off the
    // hook; the reading waits for that, naming the link.
    assert!(matches!(
        p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", 90, Some(7)))),
        Effect::Reread { .. }
    ));
    let released = Change::BpfCall {
        command: BpfCommand::LinkReleased,
        cgroup_id: None,
        attach_type: None,
        prog_id: None,
        link_id: Some(7),
        flags: 0,
        hints: Hints::default(),
    };
    // The reading never listed it: no copy in the picture, nothing stale.
    let check = Check::Released { prog_id: 90, hook: t("connect4"), link_id: 7, copies: 0 };
    assert_eq!(p.apply(&ev(released)), Effect::Reread { cgroup_id: 4, programs: vec![], check });
    assert!(check.holds(&[], &[multi("connect4", 90)]), "the program may have another copy on the hook");
    assert_eq!(p.release_read(check, true), ReleaseNext::Done);
}

fn release(link: u32) -> Event {
    ev(Change::BpfCall {
        command: BpfCommand::LinkReleased,
        cgroup_id: None,
        attach_type: None,
        prog_id: None,
        link_id: Some(link),
        flags: 0,
        hints: Hints::default(),
    })
}

/// The kernel frees a link's id before its release takes it off the hook
/// (`bpf_link_free`): a reading made in between lists every copy still, and
/// does not bear the release out (6.1 arm64, kprobes: the picture kept the
/// released link's program). One copy fewer than the picture held at the
/// event does, whatever stays, and whatever a reading put in the picture
/// meanwhile.
#[test]
fn a_release_is_borne_out_by_one_copy_fewer_than_at_its_event() {
    let mut p = picture();
    // Two links of program 90 on the pod's connect4 hook, as read.
    for link in [7, 8] {
        p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", 90, Some(link))));
    }
    let two = [multi("connect4", 90), multi("connect4", 90)];
    let one = [multi("connect4", 90)];
    p.set_hook(4, &[t("connect4")], &two, None, Check::None);
    let Effect::Reread { check, .. } = p.apply(&release(7)) else { panic!("a release asks for a reading") };
    assert_eq!(check, Check::Released { prog_id: 90, hook: t("connect4"), link_id: 7, copies: 2 });
    assert!(!check.holds(&[], &two), "still on the hook: not yet released");
    assert!(check.holds(&[], &one), "its other copy stays");
    assert!(check.holds(&[], &[]));
    // Another program or hook is no copy of it.
    assert!(!check.holds(&[], &[multi("connect4", 90), multi("connect4", 90), multi("connect6", 90)]));
    // A reading that put one copy fewer in the picture meanwhile (the
    // batch's own) does not move the baseline: the check still holds.
    p.set_hook(4, &[t("connect4")], &one, None, Check::None);
    assert!(check.holds(&[], &one));
    assert_eq!(p.release_read(check, true), ReleaseNext::Done);
    assert!(p.releases_on(4).is_empty());
}

/// Two releases of copies of one program on one hook, before any reading:
/// the second must see the copy the first takes away, or a reading that
/// lists one copy would bear both out and the picture keep the second.
#[test]
fn two_releases_of_one_program_each_need_their_own_copy_gone() {
    let mut p = picture();
    for link in [7, 8] {
        p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", 90, Some(link))));
    }
    p.set_hook(4, &[t("connect4")], &[multi("connect4", 90), multi("connect4", 90)], None, Check::None);
    let Effect::Reread { check: first, .. } = p.apply(&release(7)) else { panic!() };
    let Effect::Reread { check: second, .. } = p.apply(&release(8)) else { panic!() };
    assert!(matches!(second, Check::Released { copies: 1, link_id: 8, .. }), "{second:?}");
    let one = [multi("connect4", 90)];
    assert!(first.holds(&[], &one) && !second.holds(&[], &one));
    assert_eq!(p.releases_on(4), vec![first, second]);
    let c4 = Some(t("connect4"));
    assert_eq!(p.readings_again(4), [(first, c4), (second, c4)], "each of its own hook");
    assert_eq!(p.readings_again(3), [(Check::None, None)], "every hook");
    assert_eq!(p.release_read(first, true), ReleaseNext::Done);
    assert_eq!(p.releases_on(4), vec![second]);
}

/// A release not borne out is read again, up to RELEASE_TRIES times, then
/// left to a full pass; a cgroup that cannot be read drops its releases,
/// and a full pass's new picture holds none.
#[test]
fn a_release_never_borne_out_is_given_up_after_its_tries() {
    let mut p = picture();
    p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", 90, Some(7))));
    p.set_hook(4, &[t("connect4")], &[multi("connect4", 90)], None, Check::None);
    let Effect::Reread { check, .. } = p.apply(&release(7)) else { panic!() };
    for n in 1..RELEASE_TRIES {
        assert_eq!(p.release_read(check, false), ReleaseNext::Again(n));
    }
    assert_eq!(p.release_read(check, false), ReleaseNext::GiveUp);
    assert!(p.releases_on(4).is_empty());
    assert_eq!(p.release_read(check, false), ReleaseNext::Done, "nothing pending any more");
    // Dropped with its cgroup.
    p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", 90, Some(9))));
    p.apply(&release(9));
    assert_eq!(p.releases_on(4).len(), 1);
    p.releases_dropped(4);
    assert!(p.releases_on(4).is_empty());
}

#[test]
fn what_the_call_named_is_a_hint_what_the_kernel_lists_is_the_answer() {
    let mut p = picture();
    // The call said device; the kernel lists a connect4 program: the
    // picture holds what the kernel lists.
    let e = p.apply(&ev(call(BpfCommand::ProgAttach, Some(4), "device", 90, None)));
    assert!(matches!(e, Effect::Reread { cgroup_id: 4, .. }));
    let HookRead { added, findings, .. } = p.set_hook(4, &all(), &[multi("connect4", 91)], Some(vec![]), Check::None);
    assert_eq!(added[0].attach_type, t("connect4"));
    assert!(findings, "a socket-LB hook may change findings");
}

#[test]
fn a_cgroup_call_that_cannot_be_placed_asks_for_a_full_pass() {
    let mut p = picture();
    assert_eq!(p.apply(&ev(call(BpfCommand::ProgAttach, None, "connect4", 1, None))), Effect::Unplaced);
    // Not a cgroup hook and no cgroup: an XDP or TCX call.
    let xdp = Change::BpfCall {
        command: BpfCommand::LinkCreate,
        cgroup_id: None,
        attach_type: None,
        prog_id: Some(1),
        link_id: Some(9),
        flags: 0,
        hints: Hints::default(),
    };
    assert_eq!(p.apply(&ev(xdp)), Effect::Nothing);
}

#[test]
fn events_outside_the_audited_tree_change_nothing() {
    let mut p = picture();
    let g = p.generation();
    assert_eq!(p.apply(&made(50, 49, "x")), Effect::Nothing);
    assert_eq!(p.apply(&ev(call(BpfCommand::ProgAttach, Some(51), "connect4", 1, None))), Effect::Nothing);
    assert_eq!(p.apply(&ev(Change::CgroupRemoved { cgroup_id: 52 })), Effect::Nothing);
    assert_eq!(p.generation(), g);
}

#[test]
fn effective_programs_follow_the_kernels_inheritance_rule() {
    let mut p = picture();
    let c4 = [t("connect4")];
    // connect4 at the root (multi) and on /kubepods (multi): both run.
    p.set_hook(1, &c4, &[multi("connect4", 10)], None, Check::None);
    p.set_hook(2, &c4, &[multi("connect4", 20)], None, Check::None);
    assert_eq!(connect4(&pod_effective(&mut p)), [20, 10], "the pod was placed again");
    // /kubepods exclusive, an override program on /kubepods/burstable:
    // the nearest runs; /kubepods (not multi) is skipped once one is
    // found; the root (multi) adds its own.
    let none = Attached { attach_type: t("connect4"), flags: AttachFlags::None, prog_id: 20, prog_flags: None };
    let over = Attached { attach_type: t("connect4"), flags: AttachFlags::Override, prog_id: 30, prog_flags: None };
    p.set_hook(2, &c4, &[none], None, Check::None);
    p.set_hook(3, &c4, &[over], None, Check::None);
    assert_eq!(connect4(&pod_effective(&mut p)), [30, 10]);
    // Nothing on the hooks: nothing in effect.
    for cg in [1, 2, 3] {
        p.set_hook(cg, &c4, &[], None, Check::None);
    }
    assert!(pod_effective(&mut p).is_empty());
}

#[test]
fn a_new_pod_is_judged_by_what_is_in_effect_for_it() {
    let mut p = picture();
    p.snap.programs.insert(10, Program::new(10, "cil_sock4_connect", ProgType::CgroupSockAddr));
    p.set_hook(1, &[t("connect4")], &[multi("connect4", 10)], None, Check::None);
    let uid = "11111111-2222-4333-8444-555555555555";
    let e = p.apply(&made(6, 3, &format!("pod{uid}")));
    assert_eq!(e, Effect::Made { cgroup_id: 6, findings: true });
    let pod = p.snapshot().pods.iter().find(|q| q.pod_uid == uid).unwrap();
    assert_eq!(connect4(&pod.effective), [10]);
    // Its container's set is the pod's own (judging reads each set once).
    p.apply(&made(7, 6, "ctr"));
    p.set_populated(7, true);
    let pod = p.snapshot().pods.iter().find(|q| q.pod_uid == uid).unwrap();
    assert!(std::sync::Arc::ptr_eq(&pod.effective, &pod.containers[0].effective));
}

#[test]
fn links_are_named_go_defunct_on_detach_and_are_reconciled_by_a_sweep() {
    let mut p = picture();
    p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", 10, Some(3))));
    p.set_hook(4, &all(), &[multi("connect4", 10)], Some(vec![]), Check::None);
    assert_eq!(p.snapshot().attachments[0].link_id, Some(3), "the link is named on its attachment");
    // LINK_DETACH names the link; its cgroup comes from the picture.
    let detach = Change::BpfCall {
        command: BpfCommand::LinkDetach,
        cgroup_id: None,
        attach_type: None,
        prog_id: None,
        link_id: Some(3),
        flags: 0,
        hints: Hints::default(),
    };
    assert!(matches!(p.apply(&ev(detach)), Effect::Reread { cgroup_id: 4, .. }));
    assert_eq!(p.snapshot().cgroup_links[0].cgroup_id, 0, "defunct while something holds it");
    // The sweep finds it gone (its last fd closed): nothing to re-read,
    // its cgroup was already.
    assert!(p.reconcile_links(vec![]).is_empty());
    assert!(p.snapshot().cgroup_links.is_empty());
    // A link the picture never saw made (its last fd closed before any
    // event): the sweep names its cgroup to read again.
    let seen = CgroupLinkInfo { link_id: 8, prog_id: 10, cgroup_id: 4, attach_type: t("connect4").kernel_value() };
    assert_eq!(p.reconcile_links(vec![seen]), vec![4]);
    assert!(p.reconcile_links(vec![seen]).is_empty(), "no change, nothing to read");
}

#[test]
fn socket_lb_below_the_root_keeps_its_processes_and_may_change_findings() {
    let mut p = picture();
    let procs = vec![ProcessRef { pid: 9, comm: "cilium-agent".into() }];
    let HookRead { findings, .. } = p.set_hook(4, &all(), &[multi("connect4", 10)], Some(procs.clone()), Check::None);
    assert!(findings);
    let path = format!("/kubepods/burstable/pod{POD_UID}");
    assert_eq!(p.snapshot().processes.get(&path), Some(&procs));
    let HookRead { removed, findings, .. } = p.set_hook(4, &all(), &[], None, Check::None);
    assert!(findings && removed.len() == 1);
    assert!(!p.snapshot().processes.contains_key(&path));
}

/// A reading says what follows it: a release not borne out is read again
/// until its tries run out, another check not borne out is a full pass, and
/// a reading that bears its event out is the end of it.
#[test]
fn a_reading_says_what_follows_it() {
    let mut p = picture();
    let (c4, prog) = (t("connect4"), 90);
    p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", prog, Some(7))));
    p.set_hook(4, &[c4], &[multi("connect4", prog)], None, Check::None);
    let Effect::Reread { check, .. } = p.apply(&release(7)) else { panic!("a release asks for a reading") };
    let still = p.set_hook(4, &[c4], &[multi("connect4", prog)], None, check);
    assert!(still.unconfirmed);
    assert_eq!(still.then, ReleaseNext::Again(1), "still on its hook: read again");
    let gone = p.set_hook(4, &[c4], &[], None, check);
    assert_eq!((gone.unconfirmed, gone.then), (false, ReleaseNext::Done));
    assert_eq!(gone.removed, [multi("connect4", prog)]);
    // An attach the reading does not show: the event was about another
    // cgroup (the caller swapped its fd).
    let holds = Check::Holds { prog_id: 91, hook: c4 };
    let other = p.set_hook(4, &[c4], &[], None, holds);
    assert_eq!((other.unconfirmed, other.then), (true, ReleaseNext::GiveUp));
    let borne = p.set_hook(4, &[c4], &[multi("connect4", 91)], None, holds);
    assert_eq!((borne.unconfirmed, borne.then), (false, ReleaseNext::Done));
    // A detach of what the picture did not hold.
    let nothing = p.set_hook(3, &[c4], &[], None, Check::Removes);
    assert_eq!(nothing.then, ReleaseNext::GiveUp);
}

/// The largest count of programs one cgroup holds on a hook (the
/// `hook_programs_max` gauge) rises at once, and is counted again over the
/// tree only when the cgroup that held it shrank.
#[test]
fn the_largest_count_on_a_hook_rises_at_once_and_falls_to_the_next_largest() {
    let mut p = picture();
    let c4 = t("connect4");
    let n = |k: u32| (0..k).map(|i| multi("connect4", 100 + i)).collect::<Vec<_>>();
    assert_eq!(p.set_hook(3, &[c4], &n(2), None, Check::None).hook_max, [(c4, 2)]);
    assert_eq!(p.set_hook(4, &[c4], &n(5), None, Check::None).hook_max, [(c4, 5)]);
    assert_eq!(p.set_hook(3, &[c4], &n(3), None, Check::None).hook_max, [], "below the largest");
    assert_eq!(p.set_hook(3, &[c4], &n(1), None, Check::None).hook_max, [], "not the cgroup that held it");
    assert_eq!(p.set_hook(4, &[c4], &n(4), None, Check::None).hook_max, [(c4, 4)], "it shrank");
    assert_eq!(p.set_hook(4, &[c4], &[], None, Check::None).hook_max, [(c4, 1)], "the next largest");
    // Other hooks read with it are untouched.
    let r = p.set_hook(4, &[c4, t("sendmsg4")], &[multi("sendmsg4", 7)], None, Check::None);
    assert_eq!(r.hook_max, [(t("sendmsg4"), 1)]);
}

fn swept(seen: &[(u64, u64, Option<bool>)], named: &[(u64, &str)], attached: &[(u64, Attached)]) -> Sweep {
    use crate::daemon::sweep::Seen;
    let mut s = Sweep::new(4);
    s.cgroups = seen.len() as u64;
    s.seen = seen.iter().map(|&(id, parent, populated)| Seen { id, parent, populated }).collect();
    s.named = named.iter().map(|(id, n)| (*id, n.as_bytes().to_vec())).collect();
    for (id, a) in attached {
        s.attached.entry(*id).or_default().push(*a);
    }
    s
}

/// Issue 36, H3: the sources without cgroup events learn of the tree from
/// the sweep: what it no longer sees is removed, what it names is added
/// below its parent, whether processes are in each is taken as seen; a
/// cgroup it sees but cannot name asks for a full pass.
#[test]
fn a_sweep_makes_the_tree_what_the_kernel_holds() {
    let mut p = picture();
    assert_eq!(p.max_id(), Some(4));
    assert_eq!(p.apply(&made(5, 4, "old")), Effect::Made { cgroup_id: 5, findings: true });
    let up = |id, parent, populated| (id, parent, Some(populated));
    // 5 went; 6 (a container of the pod, with processes) came; the pod
    // itself now holds none.
    let tree = [up(1, 0, false), up(2, 1, false), up(3, 2, false), up(4, 3, false), up(6, 4, true)];
    let sweep = swept(&tree, &[(6, "ctr")], &[]);
    let effects = p.after_sweep(&sweep, None);
    assert_eq!(effects, [Effect::Applied { findings: true }, Effect::Made { cgroup_id: 6, findings: true }]);
    assert_eq!(p.path(6).as_deref(), Some(format!("/kubepods/burstable/pod{POD_UID}/ctr").as_str()));
    assert_eq!(p.path(5), None, "removed");
    let snap = p.snapshot();
    assert_eq!(snap.pods[0].containers.len(), 1, "the new container holds the pod's processes: {:?}", snap.pods);
    // The same sweep again changes nothing.
    assert_eq!(p.after_sweep(&sweep, None), []);
    // Processes left the container: taken as seen.
    let emptied = [up(1, 0, false), up(2, 1, false), up(3, 2, false), up(4, 3, false), up(6, 4, false)];
    assert_eq!(p.after_sweep(&swept(&emptied, &[], &[]), None), [Effect::Applied { findings: true }]);
    assert!(p.snapshot().pods[0].containers.is_empty());
    // A cgroup the picture does not know and the sweep did not name.
    let unknown = [up(1, 0, false), up(2, 1, false), up(3, 2, false), up(4, 3, false), up(6, 4, false), up(7, 6, true)];
    assert_eq!(p.after_sweep(&swept(&unknown, &[], &[]), None), [Effect::Unplaced]);
}

/// The syscall walk does not read whether processes are in a cgroup: a
/// cgroup it names is added as holding some (its read a moment later
/// says), and a known cgroup keeps what the picture held.
#[test]
fn a_sweep_that_did_not_read_processes_changes_none() {
    let mut p = picture();
    let unread = [(1, 0, None), (2, 1, None), (3, 2, None), (4, 3, None), (5, 4, None)];
    assert_eq!(
        p.after_sweep(&swept(&unread, &[(5, "ctr")], &[]), None),
        [Effect::Made { cgroup_id: 5, findings: true }]
    );
    assert_eq!(p.snapshot().pods[0].containers.len(), 1);
    assert_eq!(p.after_sweep(&swept(&unread, &[], &[]), None), []);
}

/// What a sweep lists on each cgroup is compared with the picture's: a
/// cgroup whose programs differ, or whose links changed, is read again; the
/// same programs in another order are the same.
#[test]
fn a_sweep_reads_again_the_cgroups_whose_programs_or_links_differ() {
    let mut p = picture();
    p.set_hook(1, &all(), &[multi("connect4", 10), multi("sendmsg4", 11)], None, Check::None);
    let tree = [(1, 0, None), (2, 1, None), (3, 2, None), (4, 3, None)];
    let same = swept(&tree, &[], &[(1, multi("sendmsg4", 11)), (1, multi("connect4", 10))]);
    assert_eq!(p.after_sweep(&same, Some(Vec::new())), [], "the same programs, listed in another order");
    // One more on the pod; one gone from the root.
    let moved = swept(&tree, &[], &[(1, multi("connect4", 10)), (4, multi("connect4", 12))]);
    let reread = |cgroup_id| Effect::Reread { cgroup_id, programs: Vec::new(), check: Check::None };
    assert_eq!(p.after_sweep(&moved, None), [reread(1), reread(4)]);
    // A link made on cgroup 3 (its attachment unchanged in the picture).
    let link = CgroupLinkInfo { link_id: 7, prog_id: 10, cgroup_id: 3, attach_type: t("connect4").kernel_value() };
    assert_eq!(p.after_sweep(&same, Some(vec![link])), [reread(3)]);
    assert_eq!(p.after_sweep(&same, Some(vec![link])), [], "taken once");
}

/// Without the tree nothing can be read again by path: any difference is a
/// full pass. A count of cgroups that did not move proves nothing: the
/// programs are compared too.
#[test]
fn a_sweep_without_the_tree_asks_for_a_full_pass_on_any_difference() {
    let mut p = picture();
    p.set_hook(1, &all(), &[multi("connect4", 10)], None, Check::None);
    let cgroups = p.cgroups();
    p.drop_tree();
    assert!(!p.tracked());
    let tree: Vec<_> = (1..=cgroups).map(|id| (id, id - 1, None)).collect();
    let same = swept(&tree, &[], &[(1, multi("connect4", 10))]);
    assert_eq!(p.after_sweep(&same, Some(Vec::new())), []);
    let other_program = swept(&tree, &[], &[(1, multi("connect4", 11))]);
    assert_eq!(p.after_sweep(&other_program, None), [Effect::Unplaced], "the count did not move");
    let more: Vec<_> = (1..=cgroups + 1).map(|id| (id, id - 1, None)).collect();
    assert_eq!(p.after_sweep(&swept(&more, &[], &[(1, multi("connect4", 10))]), None), [Effect::Unplaced]);
    let link = CgroupLinkInfo { link_id: 7, prog_id: 10, cgroup_id: 1, attach_type: t("connect4").kernel_value() };
    assert_eq!(p.after_sweep(&same, Some(vec![link])), [Effect::Unplaced], "a link more");
}

#[test]
fn a_check_reads_its_own_hook_or_the_detach_calls() {
    let (c4, s4) = (t("connect4"), t("sendmsg4"));
    assert_eq!(Check::Holds { prog_id: 1, hook: c4 }.hook(Some(s4)), Some(c4));
    assert_eq!(Check::Released { prog_id: 1, hook: c4, link_id: 2, copies: 1 }.hook(None), Some(c4));
    assert_eq!(Check::Removes.hook(Some(s4)), Some(s4));
    assert_eq!(Check::Removes.hook(None), None);
    assert_eq!(Check::None.hook(Some(s4)), None);
}

/// Issue 38's red team: a read that fails, or a pod it could not read,
/// must not clear what the last good read saw (a gap every 2 minutes would
/// keep the alert's `for:` from ever passing), nor what the pods' interfaces
/// had.
#[test]
fn a_failed_interface_read_keeps_the_last_good_reading() {
    use crate::snapshot::net::{IfHook, Interface, Net, PodNet, PodNetworks, ProgramOn, Via};
    let mut p = picture();
    p.snap.programs.insert(9, Program::new(9, "cil_from_container", ProgType::SchedCls));
    let pod = |uid: &str, programs: Vec<ProgramOn>, errors: Vec<String>| PodNet {
        pod_uid: uid.into(),
        namespace: None,
        name: None,
        cgroup: format!("/kubepods/pod{uid}"),
        started: Some(1),
        net: Net::Interfaces {
            other_links_into_node: 0,
            addresses: Vec::new(),
            interfaces: vec![Interface {
                ifindex: 5,
                name: format!("veth{uid}"),
                driver: "veth".into(),
                programs,
                errors,
                netkit_peer_policy: None,
                master: None,
                bridge: None,
            }],
        },
    };
    let cilium = || vec![ProgramOn::new(IfHook::TcxIngress, 9, Via::Link { link_id: 3 })];
    // Proven Cilium's: its link pinned where Cilium pins its endpoints'.
    p.snap.pins.push(crate::snapshot::OwnerPin {
        owner: crate::owner::Owner::Cilium,
        path: "/sys/fs/bpf/cilium/endpoints/1/links/cil_from_container".into(),
        prog_id: 9,
        link_id: Some(3),
        target: Some(crate::bpf::sys::LinkTarget::Tcx {
            ifindex: 5,
            attach_type: aya_obj::generated::bpf_attach_type::BPF_TCX_INGRESS as u32,
        }),
    });
    let configured = vec![crate::snapshot::net::Configured {
        owner: crate::owner::Owner::Cilium,
        source: "cilium-agent runs (pid 7)".into(),
    }];
    let good = PodNetworks {
        pods: vec![pod("a", cilium(), vec![]), pod("b", vec![], vec![])],
        configured: configured.clone(),
        ..Default::default()
    };
    assert!(p.set_pod_networks(good.clone()));
    // Started at 1 s, read at 0 s: within any grace, on a node configured
    // for Cilium's datapath.
    assert!(p.pods_within_grace(Duration::ZERO));
    let later = PodNetworks { read_at: 1 + 30 + crate::daemon::schedule::INTERFACES.as_secs(), ..good.clone() };
    p.set_pod_networks(later.clone());
    assert!(p.pods_within_grace(Duration::from_secs(30)), "grace and one read after");
    assert!(!p.pods_within_grace(Duration::from_secs(29)));
    let no_datapath = PodNetworks { pods: vec![pod("b", vec![], vec![])], read_at: 0, ..Default::default() };
    p.set_pod_networks(no_datapath);
    assert!(!p.pods_within_grace(Duration::from_secs(30)), "nothing to be outside of");
    p.set_pod_networks(good.clone());
    let named =
        |p: &Picture| p.last().pod_networks.pods[0].interfaces()[0].programs.first().map(|p| p.prog_name.clone());
    assert_eq!(named(&p).as_deref(), Some("cil_from_container"), "named from the picture's programs");
    // The whole read failed: the pods stay as read last.
    assert!(p.set_pod_networks(PodNetworks { error: Some("RTM_GETLINK: EBUSY".into()), ..Default::default() }));
    assert_eq!(p.last().pod_networks.pods.len(), 2);
    let seen =
        crate::snapshot::net::EndpointSeen { pod_uid: "a".into(), owner: crate::owner::Owner::Cilium, ifindex: 5 };
    assert!(p.last().pod_networks.had_programs.contains(&seen));
    // One interface unread: that pod stays as read last.
    let partial = |read_at| PodNetworks {
        read_at,
        pods: vec![pod("a", vec![], vec!["tc_ingress: EBUSY".into()]), pod("b", vec![], vec![])],
        configured: configured.clone(),
        ..Default::default()
    };
    p.set_pod_networks(partial(10));
    let a = &p.last().pod_networks.pods[0];
    assert!(a.interfaces()[0].programs.len() == 1 && a.interfaces()[0].errors.is_empty(), "{a:?}");
    // Issue 47, M1: for KEPT_FOR at most, counted from the reading kept;
    // then the pod is unread, and says so.
    p.set_pod_networks(partial(crate::snapshot::net::KEPT_FOR));
    assert!(!p.last().pod_networks.pods[0].unread(), "still within KEPT_FOR of the reading kept (read at 0)");
    p.set_pod_networks(partial(crate::snapshot::net::KEPT_FOR + 1));
    let a = &p.last().pod_networks.pods[0];
    assert!(a.unread(), "aged out: {a:?}");
    let found = crate::findings::evaluate(p.snapshot(), &crate::findings::Policy::default());
    let unread: Vec<_> = found.iter().filter(|f| f.kind == crate::findings::Kind::PodNetworkUnreadable).collect();
    assert_eq!(unread.len(), 1, "{found:#?}");
    assert!(unread[0].message.contains("tc_ingress: EBUSY"), "{}", unread[0].message);
    // A failed read, long after: every pod is unread, none kept.
    p.set_pod_networks(PodNetworks { read_at: 1000, error: Some("setns: EPERM".into()), ..Default::default() });
    assert!(p.last().pod_networks.pods.iter().all(|p| p.unread()), "{:?}", p.last().pod_networks.pods);
    assert!(crate::findings::incomplete(p.snapshot()).is_some_and(|why| why.contains("setns: EPERM")));
}
