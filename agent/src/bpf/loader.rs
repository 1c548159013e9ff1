//! One aya `EbpfLoader` for the process.
//!
//! aya 0.14's `EbpfLoader::new()` parses all of the kernel's vmlinux BTF
//! (~70 ms and ~28 MB of transient heap here) for CO-RE relocations, which
//! neither of our objects has. Making one loader, told to use no BTF, and
//! loading both objects (the tracepoints and the cgroup iterator) through it
//! pays that once per process: the daemon's peak RSS stays that of one parse.

use std::sync::Mutex;

use aya::EbpfLoader;

static LOADER: Mutex<Option<EbpfLoader<'static>>> = Mutex::new(None);

/// Runs `f` with the process's loader. Globals set on it persist across
/// loads; each object's are set with `must_exist = false`, so the other
/// object's globals are ignored.
pub fn with_loader<R>(f: impl FnOnce(&mut EbpfLoader<'static>) -> R) -> R {
    let mut slot = LOADER.lock().unwrap_or_else(|e| e.into_inner());
    let loader = slot.get_or_insert_with(|| {
        let mut loader = EbpfLoader::new();
        loader.btf(None);
        super::sys::release_free_heap();
        loader
    });
    f(loader)
}
