//! Reading the node between full passes: single cgroups again (the ones
//! events asked for, new ones under the reading fallback), the cgroup links
//! under syscall tracing, and the reading fallback's attachment sweep. Each
//! puts what the kernel lists in the picture and says whether the findings
//! may have changed; what it cannot place asks for a full pass.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::Worker;
use crate::bpf::AttachType;
use crate::bpf::programs;
use crate::bpf::query::Support;
use crate::daemon::metrics::Work;
use crate::daemon::picture::{Check, Effect, ReleaseNext};
use crate::daemon::schedule::Trigger;
use crate::event::Event;
use crate::findings;
use crate::scan;
use crate::scan::visit::{self, WalkContext};

/// The hooks a new cgroup is read again on: the device filter runtimes
/// (runc, crun) attach right after the mkdir.
static NEW_CGROUP_HOOKS: std::sync::LazyLock<[AttachType; 1]> =
    std::sync::LazyLock::new(|| [AttachType::from_name("device").expect("the device hook")]);
/// The longest the worker reads new cgroups again before it looks at what
/// else is due.
const READ_BUDGET: Duration = Duration::from_millis(100);

impl Worker {
    /// Programs an event named that the picture does not know yet.
    pub(super) fn learn_programs(&mut self, ids: &[u32]) {
        let Some(picture) = self.picture.as_mut() else { return };
        let mut table: std::collections::BTreeMap<u32, programs::Program> =
            ids.iter().filter_map(|&id| programs::program_by_id(id).ok().flatten()).map(|p| (p.id, p)).collect();
        let found: Vec<u32> = table.keys().copied().collect();
        let skipped = programs::resolve_full_names(&mut table, found);
        self.shared.metrics.objects_skipped("btf", skipped);
        picture.add_programs(table.into_values());
    }

    /// The cgroup links the kernel lists now (those it would not describe
    /// counted as skipped); `None` when they cannot be listed.
    fn cgroup_links(&self) -> Option<Vec<crate::bpf::sys::CgroupLinkInfo>> {
        match programs::cgroup_links() {
            Ok(l) => {
                self.shared.metrics.objects_skipped("link", l.skipped);
                Some(l.cgroup)
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot list cgroup links");
                None
            }
        }
    }

    /// The id of the cgroup named `name` just made below `parent_id`: its
    /// event names the parent and the name (`cgroup_mkdir` returns only 0),
    /// and a cgroup's id is its directory's inode. `None` when the parent is
    /// outside the picture or the cgroup is gone already.
    pub(super) fn made_id(&self, parent_id: u64, name: &[u8]) -> Option<u64> {
        use std::os::unix::ffi::OsStrExt;
        let (picture, root) = (self.picture.as_ref()?, self.root.as_ref()?);
        let names = picture.names(parent_id)?;
        let parent = visit::open_by_id(root.as_fd(), parent_id, &names).ok()?;
        let st = nix::sys::stat::fstatat(
            parent.as_fd(),
            std::ffi::OsStr::from_bytes(name),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .ok()?;
        (st.st_mode & libc::S_IFMT == libc::S_IFDIR).then_some(st.st_ino)
    }

    /// Reads the cgroups events asked for in this batch; true when the
    /// findings may have changed.
    pub(super) fn reread_pending(&mut self) -> bool {
        if self.pending_rereads.is_empty() {
            return false;
        }
        let started = Instant::now();
        let mut findings = false;
        for id in std::mem::take(&mut self.pending_rereads) {
            findings |= self.reread(id, Check::None);
        }
        self.shared.metrics.busy(Work::Reread, started.elapsed());
        findings
    }

    /// Reads every hook of one cgroup again and puts what the kernel lists
    /// in the picture; true when the findings may have changed. When the
    /// reading does not bear out the event that asked for it (`check`), a
    /// full pass follows: the event was about another cgroup.
    pub(super) fn reread(&mut self, cgroup_id: u64, check: Check) -> bool {
        self.read_hooks(cgroup_id, check, None, true)
    }

    /// Reads `only` these hooks of one cgroup again (all when `None`), and
    /// its processes when `processes` asks and a socket-LB hook is read.
    pub(super) fn read_hooks(
        &mut self,
        cgroup_id: u64,
        check: Check,
        only: Option<&[AttachType]>,
        processes: bool,
    ) -> bool {
        let (Some(picture), Some(root)) = (self.picture.as_mut(), self.root.as_ref()) else { return false };
        let snap = picture.last();
        let hooks: Vec<AttachType> = snap.supported_hooks().filter(|t| only.is_none_or(|o| o.contains(t))).collect();
        let ctx = WalkContext { root_id: snap.root.cgroup_id, proc: &self.config.scan.proc };
        // By id (or name by name from the root): neither the path's length
        // nor its bytes stand in the way.
        let Some(names) = picture.names(cgroup_id) else {
            picture.releases_dropped(cgroup_id);
            return false;
        };
        // With its processes, whether it holds any (in it or below), as the
        // full pass reads it: a process moved into a cgroup makes no event.
        let read = visit::open_by_id(root.as_fd(), cgroup_id, &names).and_then(|fd| {
            let populated = processes.then(|| visit::populated(fd.as_fd()));
            visit::read_cgroup(fd.as_fd(), cgroup_id, &hooks, processes, &ctx, &mut self.revisions)
                .map(|(attached, procs)| (attached, procs, populated))
        });
        match read {
            Ok((attached, procs, populated)) => {
                // Programs attached by calls whose events named none (or
                // another): what the kernel lists must have a name too.
                let unknown = snap.to_learn(attached.iter().map(|a| a.prog_id));
                if !unknown.is_empty() {
                    self.learn_programs(&unknown);
                }
                let Some(picture) = self.picture.as_mut() else { return false };
                let populated_changed = populated.is_some_and(|p| picture.set_populated(cgroup_id, p));
                let reading = picture.set_hook(
                    cgroup_id,
                    &hooks,
                    &attached,
                    // Read with the socket-LB hooks only (see read_cgroup).
                    (processes && hooks.iter().any(|t| crate::owner::is_root_hook(*t))).then_some(procs),
                    check,
                );
                let snap = picture.last();
                let at_root = cgroup_id == snap.root.cgroup_id;
                let cx = findings::Ctx::new(snap, &self.config.policy);
                let path = picture.path(cgroup_id).unwrap_or_default();
                let removed = reading.removed.iter().map(|a| (a, -1));
                for (a, delta) in removed.chain(reading.added.iter().map(|a| (a, 1))) {
                    let owner = cx.owned_at(cgroup_id, &path, a.attach_type, a.prog_id).owner;
                    self.shared.metrics.attachment(a.attach_type, owner, at_root, delta);
                }
                for &(t, max) in &reading.hook_max {
                    self.shared.metrics.set_hook_programs_max(t, max as i64);
                }
                self.shared.metrics.incremental_update();
                match reading.then {
                    ReleaseNext::Done => {}
                    // The link's id is gone, yet the kernel has not taken
                    // it off the hook: read that hook again shortly.
                    ReleaseNext::Again(tries) => self.schedule.read_again(Instant::now(), cgroup_id, tries),
                    ReleaseNext::GiveUp => {
                        tracing::debug!(cgroup_id, ?check, "a re-read did not bear out its event; a full pass will");
                        self.ask_full_pass(Trigger::Unplaced);
                    }
                }
                reading.findings || populated_changed
            }
            // Removed meanwhile: its rmdir event follows.
            Err(err) if err.gone => {
                if let Some(p) = self.picture.as_mut() {
                    p.releases_dropped(cgroup_id);
                }
                false
            }
            Err(err) => {
                tracing::debug!(cgroup_id, error = %err.error, "cannot read a cgroup again; a full pass will");
                self.ask_full_pass(Trigger::Unplaced);
                false
            }
        }
    }

    /// Reads whether cgroup `id` holds processes (in it or below) into the
    /// picture; true when the findings may have changed.
    fn read_populated(&mut self, id: u64) -> bool {
        let (Some(picture), Some(root)) = (self.picture.as_mut(), self.root.as_ref()) else { return false };
        let Some(names) = picture.names(id) else { return false };
        match visit::open_by_id(root.as_fd(), id, &names) {
            Ok(fd) => picture.set_populated(id, visit::populated(fd.as_fd())),
            // Removed meanwhile: its rmdir event follows.
            Err(_) => false,
        }
    }

    /// Reads the pods' interfaces and the programs on them (tc filters,
    /// tcx and netkit links make no event this daemon hooks); true when the
    /// findings may have changed: what was read changed, or a pod is still
    /// within `--endpoint-grace` (its verdict comes with time).
    ///
    /// The read itself runs on a thread of its own: its answers come under
    /// RTNL, which a pod tearing down a namespace of many devices can hold
    /// for seconds, and the worker must not wait on that. While it runs it
    /// is looked at every `INTERFACES_POLL`; a read still running when the
    /// next is due is not started twice.
    pub(super) fn read_interfaces(&mut self) -> bool {
        let now = Instant::now();
        match self.interfaces_job.take() {
            Some(job) if job.is_finished() => {
                self.schedule.interfaces_read();
                match job.join() {
                    Ok(nets) => self.apply_interfaces(nets),
                    Err(_) => {
                        tracing::warn!("the interface reader panicked");
                        false
                    }
                }
            }
            Some(job) => {
                self.interfaces_job = Some(job);
                self.schedule.interfaces_pending(now);
                false
            }
            None => {
                let (Some(picture), Some(root)) = (self.picture.as_mut(), self.root.as_ref()) else { return false };
                let Ok(root) = root.try_clone() else { return false };
                let snap = picture.snapshot();
                let (pods, agents) = (snap.pods.clone(), snap.agents.clone());
                let (proc, cni_conf) = (self.config.scan.proc.clone(), self.config.scan.cni_conf_dir.clone());
                let spawned = std::thread::Builder::new().name("interfaces".into()).spawn(move || {
                    let budget = crate::scan::deadline::Budget::new(crate::scan::deadline::READ_DEADLINE);
                    crate::scan::net::read(&pods, &agents, root.as_fd(), &proc, &cni_conf, &budget)
                });
                match spawned {
                    Ok(job) => {
                        self.interfaces_job = Some(job);
                        self.schedule.interfaces_pending(now);
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot start the interface reader"),
                }
                false
            }
        }
    }

    /// Puts a finished interface read in the picture; true when the
    /// findings may have changed.
    fn apply_interfaces(&mut self, nets: crate::scan::net::Networks) -> bool {
        let started = Instant::now();
        let Some(picture) = self.picture.as_ref() else { return false };
        let snap = picture.last();
        let unknown = snap.to_learn(nets.pods.program_ids().chain(nets.devices.program_ids()));
        if !unknown.is_empty() {
            self.learn_programs(&unknown);
        }
        let Some(picture) = self.picture.as_mut() else { return false };
        let changed = picture.set_networks(nets);
        let waiting = picture.pods_within_grace(self.config.policy.endpoint_grace);
        self.shared.metrics.busy(Work::Reread, started.elapsed());
        changed || waiting
    }

    /// Lists the cgroup links and reads again the cgroups whose links
    /// changed; true when the findings may have changed.
    pub(super) fn sweep_links(&mut self) -> bool {
        let Some(links) = self.cgroup_links() else { return false };
        let Some(picture) = self.picture.as_mut() else { return false };
        let touched = picture.reconcile_links(links);
        let mut judge = false;
        for id in touched {
            judge |= self.reread(id, Check::None);
        }
        judge
    }

    /// The reading fallback: new cgroups whose moment has come are read
    /// again, and when the sweep is due every attachment is compared with
    /// the picture; what differs is read again. True when the findings may
    /// have changed.
    pub(super) fn read_what_is_due(&mut self, now: Instant, events: Option<&Receiver<Event>>) -> bool {
        let mut judge = false;
        let started = Instant::now();
        let mut read = false;
        // The releases not yet borne out first, within READ_BUDGET too: a
        // tenant releasing links without pause must not keep a due full
        // pass from its turn either.
        while started.elapsed() < READ_BUDGET {
            let Some(id) = self.schedule.take_read_again(now) else { break };
            let readings = self.picture.as_ref().map(|p| p.readings_again(id)).unwrap_or_default();
            for (check, hook) in readings {
                judge |= self.read_hooks(id, check, hook.as_ref().map(std::slice::from_ref), hook.is_none());
            }
            read = true;
        }
        // For at most READ_BUDGET at a time: a pod making cgroups without
        // pause (each read waits on the kernel's cgroup_mutex, which its
        // mkdirs hold) must not keep a due full pass from its turn.
        while started.elapsed() < READ_BUDGET {
            let Some(id) = self.schedule.take_new_cgroup(now) else { break };
            // What runtimes attach as they make a container's cgroup: one
            // query (each waits on cgroup_mutex), not one per hook; the
            // sweep reads the rest.
            judge |= self.read_hooks(id, Check::None, Some(&NEW_CGROUP_HOOKS[..]), true);
            read = true;
        }
        // With cgroup events: whether new cgroups hold processes now, as
        // the full pass reads it (cgroup.events; no cgroup_mutex).
        while started.elapsed() < READ_BUDGET {
            let Some(id) = self.schedule.take_populated(now) else { break };
            judge |= self.read_populated(id);
            read = true;
        }
        if read {
            self.shared.metrics.busy(Work::Reread, started.elapsed());
        }
        if self.schedule.sweep_due(now) {
            judge |= self.sweep_attachments(events);
        }
        judge
    }

    /// Applies the events waiting now (not those that keep coming: a pod
    /// making cgroups without pause must not hold the worker here); true
    /// when the findings may have changed.
    fn apply_waiting(&mut self, events: Option<&Receiver<Event>>) -> bool {
        let Some(rx) = events else { return false };
        let mut judge = false;
        for _ in 0..rx.len() {
            match rx.try_recv() {
                Ok(e) => judge |= self.on_event(e),
                Err(_) => break,
            }
        }
        judge
    }

    /// One sweep: the tree made what the kernel holds (cgroups made and
    /// removed, processes in each), then the cgroups whose own programs
    /// differ from the picture's are read again; a cgroup the picture
    /// cannot place asks for a full pass.
    fn sweep_attachments(&mut self, events: Option<&Receiver<Event>>) -> bool {
        let started = Instant::now();
        let (Some(picture), Some(root)) = (self.picture.as_ref(), self.root.as_ref()) else {
            self.schedule.swept(Instant::now(), Duration::ZERO);
            return false;
        };
        let snap = picture.last();
        let support = Support { supported: snap.supported_hooks().collect(), unsupported: Vec::new() };
        let in_kernel = self.config.scan.walk != scan::WalkMethod::Syscalls;
        // Without the tree nothing is placed: names are not needed.
        let names_after = picture.max_id().unwrap_or(u64::MAX);
        let swept = crate::daemon::sweep::sweep(root.as_fd(), snap.root.cgroup_id, names_after, &support, in_kernel);
        let tracked = picture.tracked();
        let mut judge = false;
        let mut drained = Duration::ZERO;
        match swept {
            Ok(sweep) => {
                self.shared.metrics.attachment_sweep();
                // Attach events that came while the sweep ran (syscall
                // tracing) are applied first: their time is the events',
                // not the sweep's. (Without the tree they would only ask
                // for the full pass the sweep decides on.)
                if tracked {
                    let applying = Instant::now();
                    judge |= self.apply_waiting(events);
                    drained = applying.elapsed();
                }
                // Links are named on their attachments: what the kernel
                // lists now.
                let links = self.cgroup_links();
                let Some(picture) = self.picture.as_mut() else { return judge };
                for effect in picture.after_sweep(&sweep, links) {
                    judge |= match effect {
                        // The sweep read every hook: no event to bear out.
                        Effect::Reread { cgroup_id, .. } => self.reread(cgroup_id, Check::None),
                        effect => self.follow(effect, None).1,
                    };
                }
            }
            Err(e) => tracing::debug!(error = %e, "the attachment sweep failed; the full pass on --interval remains"),
        }
        let cost = started.elapsed().saturating_sub(drained);
        if let Some(period) = self.schedule.swept(Instant::now(), cost) {
            self.shared.metrics.set_sweep_period(period);
        }
        self.shared.metrics.busy(Work::Sweep, cost);
        judge
    }
}
