//! Reads of kernel memory at addresses computed from the running kernel's
//! BTF offsets: each is checked by the helper and fails cleanly (`None`),
//! never faults.

use aya_ebpf::helpers::bpf_probe_read_kernel;

#[inline(always)]
pub fn read_u64(addr: u64) -> Option<u64> {
    // SAFETY: bpf_probe_read_kernel validates the address and fails cleanly.
    unsafe { bpf_probe_read_kernel(addr as *const u64) }.ok()
}

#[inline(always)]
pub fn read_u32(addr: u64) -> Option<u32> {
    // SAFETY: as above.
    unsafe { bpf_probe_read_kernel(addr as *const u32) }.ok()
}
