//! Releases: a cgroup link the kernel has begun to release is taken off
//! its hook a moment after the event says so (`bpf_link_free` frees the
//! id first). The picture keeps each release until a reading of its hook
//! bears it out, and says what follows each reading: done, read again
//! shortly, or a full pass.

use crate::bpf::AttachType;
use crate::bpf::query::Attached;

use super::Picture;

/// What re-reading a cgroup after an event must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing: the event's cgroup came from the kernel's own objects.
    None,
    /// The program the call attached, on the hook it named.
    Holds { prog_id: u32, hook: AttachType },
    /// Something gone that the picture had: what the call detached.
    Removes,
    /// A cgroup link the kernel has begun to release or detach (the
    /// programs see its entry, before the kernel takes cgroup_mutex): the
    /// reading must list fewer than `copies` copies of its program on its
    /// hook, the program's other copies staying. `copies` is what the
    /// picture held at the event, less the releases of the same program on
    /// the same hook still to be borne out (0: unknown to the picture). A
    /// link's id is freed before its release takes it off the hook
    /// (`bpf_link_free`), so a gone id does not say the release is done: a
    /// reading that still lists every copy is made again shortly
    /// (`Picture::release_read`).
    Released { prog_id: u32, hook: AttachType, link_id: u32, copies: u32 },
}

/// How many times a released link's hook is read again before a full pass
/// is asked for instead: with `Schedule::read_again`'s backoff, about 8 s.
pub const RELEASE_TRIES: u32 = 12;

/// What follows a reading (`Reading::then`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseNext {
    /// Borne out, or no longer pending: nothing.
    #[default]
    Done,
    /// A release not yet borne out: read its hook again, after this many
    /// tries.
    Again(u32),
    /// Not borne out (a release: after its tries): the event was about
    /// another cgroup, or the picture missed a change; a full pass tells.
    GiveUp,
}

/// A release the picture emitted a check for and no reading has borne out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) cgroup_id: u64,
    pub(super) check: Check,
    pub(super) tries: u32,
}

impl Check {
    /// The one hook a reading that must bear this check out reads now
    /// (`call_hook`: the hook the event's call named): the check's own, or
    /// for a detach the call's. `None`: every hook.
    pub fn hook(self, call_hook: Option<AttachType>) -> Option<AttachType> {
        match self {
            Check::Holds { hook, .. } | Check::Released { hook, .. } => Some(hook),
            Check::Removes => call_hook,
            Check::None => None,
        }
    }

    /// Whether a reading bears the event out: `before` is what the picture
    /// held on the hooks read, `now` what the kernel lists on them.
    pub fn holds(self, before: &[Attached], now: &[Attached]) -> bool {
        match self {
            Check::None => true,
            Check::Holds { prog_id, hook } => now.iter().any(|a| a.prog_id == prog_id && a.attach_type == hook),
            Check::Removes => !before.is_empty(),
            Check::Released { prog_id, hook, copies, .. } => {
                // Unknown to the picture: nothing it holds can be stale.
                copies == 0
                    || now.iter().filter(|a| a.prog_id == prog_id && a.attach_type == hook).count() < copies as usize
            }
        }
    }
}

impl Picture {
    /// The readings a cgroup read again (`Schedule::read_again`) gets:
    /// each release on it not yet borne out, of its own hook with its own
    /// check; with none, every hook and no check.
    pub fn readings_again(&self, cgroup_id: u64) -> Vec<(Check, Option<AttachType>)> {
        let releases: Vec<_> = self.releases_on(cgroup_id).into_iter().map(|c| (c, c.hook(None))).collect();
        if releases.is_empty() { vec![(Check::None, None)] } else { releases }
    }

    /// The releases on `cgroup_id` no reading has borne out yet.
    pub fn releases_on(&self, cgroup_id: u64) -> Vec<Check> {
        let mut v: Vec<_> = self.releasing.values().filter(|p| p.cgroup_id == cgroup_id).map(|p| p.check).collect();
        v.sort_by_key(|c| match c {
            Check::Released { link_id, .. } => *link_id,
            _ => 0,
        });
        v
    }

    /// A reading made for `check` (a release) did or did not bear it out
    /// (`borne`): what follows.
    pub(super) fn release_read(&mut self, check: Check, borne: bool) -> ReleaseNext {
        let Check::Released { link_id, .. } = check else { return ReleaseNext::Done };
        let Some(p) = self.releasing.get_mut(&link_id) else { return ReleaseNext::Done };
        if borne {
            self.releasing.remove(&link_id);
            return ReleaseNext::Done;
        }
        p.tries += 1;
        if p.tries >= RELEASE_TRIES {
            self.releasing.remove(&link_id);
            return ReleaseNext::GiveUp;
        }
        ReleaseNext::Again(p.tries)
    }

    /// `cgroup_id` could not be read (gone, or out of the picture): none of
    /// its releases can be borne out any more.
    pub fn releases_dropped(&mut self, cgroup_id: u64) {
        self.releasing.retain(|_, p| p.cgroup_id != cgroup_id);
    }
}
