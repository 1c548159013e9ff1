//! What each eBPF binary of this crate needs besides its programs: the
//! panic handler `no_std` requires (the programs avoid anything that could
//! reach it: its endless loop would not pass the verifier) and the license
//! section the kernel reads at load.

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
