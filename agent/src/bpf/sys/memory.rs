//! Memory: the kernel's BTF mapped rather than copied, and freed heap
//! handed back to the kernel after a full pass.

use std::io;

/// The kernel's own BTF, `/sys/kernel/btf/vmlinux`, mapped read-only
/// (kernel 6.16+ lets it be mapped; before, reading it is the only way).
pub(crate) struct KernelBtfMap {
    ptr: std::ptr::NonNull<std::ffi::c_void>,
    len: std::num::NonZeroUsize,
}

pub(crate) const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Maps the kernel's BTF: no copy, and only the pages read are touched.
pub(crate) fn map_kernel_btf() -> io::Result<KernelBtfMap> {
    use nix::sys::mman::{MapFlags, ProtFlags, mmap};
    let file = std::fs::File::open(KERNEL_BTF)?;
    let len = std::num::NonZeroUsize::new(file.metadata()?.len() as usize)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "empty"))?;
    // SAFETY: a private read-only mapping of a whole file we opened; the
    // kernel's BTF never changes while the kernel runs, so the bytes the
    // slice sees cannot change under it (the hazard of file mappings).
    let ptr = unsafe { mmap(None, len, ProtFlags::PROT_READ, MapFlags::MAP_PRIVATE, &file, 0) }?;
    Ok(KernelBtfMap { ptr, len })
}

impl std::ops::Deref for KernelBtfMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is a live mapping of `len` readable bytes until drop.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr() as *const u8, self.len.get()) }
    }
}

impl Drop for KernelBtfMap {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no slice of it outlives `self`.
        let _ = unsafe { nix::sys::mman::munmap(self.ptr, self.len.get()) };
    }
}

/// Returns freed heap pages to the kernel (glibc's `malloc_trim`). aya's
/// loader parses all of vmlinux BTF (~30 MB of small allocations) and frees
/// it at once; without this, glibc keeps those pages and the audit's peak RSS
/// is that plus the walk. musl's allocator returns them by itself.
pub(crate) fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
