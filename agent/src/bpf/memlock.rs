//! BPF memory accounting on kernels before 5.11.
//!
//! Until 5.11 the kernel charges every BPF map and program to the locked
//! memory (`locked_vm`) of the user who made it, and checks that user's
//! total against the `RLIMIT_MEMLOCK` of whoever makes the next one. A
//! daemon holding a few hundred KiB as root would leave every other root
//! process with Debian 11's default limit (64 KiB) unable to load a program.
//! Since 5.11 memory cgroups account for it and the limit is not checked.
//!
//! Which of the two the kernel does is found by trying (as cilium/ebpf's
//! `rlimit` package does): with `RLIMIT_MEMLOCK` at 0 for a moment, the
//! smallest map is refused only where the limit is checked. There, the
//! daemon raises its own limit (CAP_SYS_RESOURCE) and makes its long-lived
//! BPF objects on a thread whose real uid is `CHARGE_UID`, which nothing
//! else uses: they count against that uid, never against root's budget.

use std::sync::OnceLock;

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use super::sys;

/// The uid the daemon's BPF objects are charged to on rlimit-accounting
/// kernels: one no account or container uses (the last below 2^31).
pub const CHARGE_UID: u32 = 0x7fff_fffe;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accounting {
    /// Memory cgroups (5.11+): nothing to do.
    Memcg,
    /// `RLIMIT_MEMLOCK` of the creating user (before 5.11).
    Rlimit,
}

static ACCOUNTING: OnceLock<Accounting> = OnceLock::new();

/// How this kernel accounts BPF memory, found once. The probe lowers the
/// process's own `RLIMIT_MEMLOCK` for the time of one `bpf()` call: call it
/// first, while nothing else in the process creates BPF objects.
pub fn accounting() -> Accounting {
    *ACCOUNTING.get_or_init(|| {
        let found = probe_accounting();
        let how = match found {
            Accounting::Memcg => "memory cgroups",
            Accounting::Rlimit => "RLIMIT_MEMLOCK",
        };
        crate::features::record(crate::features::Feature::MemlockAccounting, crate::features::Verdict::yes_as(how));
        found
    })
}

fn probe_accounting() -> Accounting {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_MEMLOCK) else { return Accounting::Memcg };
    if setrlimit(Resource::RLIMIT_MEMLOCK, 0, hard).is_err() {
        return Accounting::Memcg;
    }
    let probe = sys::tiny_map();
    let _ = setrlimit(Resource::RLIMIT_MEMLOCK, soft, hard);
    match probe {
        Err(e) if e.errno() == Some(libc::EPERM) => Accounting::Rlimit,
        _ => Accounting::Memcg,
    }
}

/// On rlimit-accounting kernels, raises this process's `RLIMIT_MEMLOCK` so
/// that its own loads fit; what it could not do, as a sentence for the log.
pub fn prepare() -> Option<String> {
    if accounting() == Accounting::Memcg {
        return None;
    }
    let infinity = nix::sys::resource::RLIM_INFINITY;
    match setrlimit(Resource::RLIMIT_MEMLOCK, infinity, infinity) {
        Ok(()) => None,
        Err(e) => Some(format!(
            "this kernel charges BPF memory to RLIMIT_MEMLOCK (before 5.11) and the limit could not be raised ({e}; \
             needs CAP_SYS_RESOURCE): the event programs may not fit"
        )),
    }
}

/// Runs `f`, whose BPF objects must not count against root's locked
/// memory, on a thread of its own whose real uid is `CHARGE_UID` (only on
/// rlimit-accounting kernels; elsewhere `f` runs here). The objects keep
/// their charge on that uid until they are freed, wherever they are used.
/// `Err` when the thread could not take that uid (no CAP_SETUID): `f` then
/// ran as root anyway, and its result is in the `Err`.
pub fn charged_apart<R: Send>(f: impl FnOnce() -> R + Send) -> Result<R, (R, String)> {
    if accounting() == Accounting::Memcg {
        return Ok(f());
    }
    std::thread::scope(|s| {
        s.spawn(|| match crate::os::set_thread_real_uid(CHARGE_UID) {
            Ok(()) => Ok(f()),
            Err(e) => Err((f(), format!("setresuid({CHARGE_UID}, -1, -1): {e} (needs CAP_SETUID)"))),
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
