use super::*;
use crate::bpf::btf::raw::*;

/// A kernel whose `struct cgroup_bpf` holds `progs` hlist_heads and
/// `flags` u8s, for an enum of 38 hooks.
fn kernel(progs: u32, flags: u32) -> Vec<u8> {
    let mut b = Raw::new();
    let u8_id = b.ty("unsigned char", KIND_INT, 0, 1, &[8]);
    let u32_id = b.ty("unsigned int", KIND_INT, 0, 4, &[32]);
    let ptr = b.ty("", KIND_PTR, 0, u8_id, &[]);
    let head = b.compound("hlist_head", KIND_STRUCT, 8, &[("first", ptr, 0)]);
    let effective = b.ty("", KIND_ARRAY, 0, 0, &[ptr, u32_id, 38]);
    let progs_t = b.ty("", KIND_ARRAY, 0, 0, &[head, u32_id, progs]);
    let flags_t = b.ty("", KIND_ARRAY, 0, 0, &[u8_id, u32_id, flags]);
    let bpf_size = 8 * 38 + 8 * progs + flags;
    let bpf = b.compound(
        "cgroup_bpf",
        KIND_STRUCT,
        bpf_size,
        &[("effective", effective, 0), ("progs", progs_t, 8 * 8 * 38), ("flags", flags_t, 8 * (8 * 38 + 8 * progs))],
    );
    b.compound(
        "cgroup",
        KIND_STRUCT,
        8 + bpf_size + 4,
        &[("kn", ptr, 0), ("bpf", bpf, 64), ("nr_populated_csets", u32_id, 8 * (8 + bpf_size))],
    );
    let (connect, max) = (b.s("CGROUP_INET4_CONNECT"), b.s("MAX_CGROUP_BPF_ATTACH_TYPE"));
    b.ty("cgroup_bpf_attach_type", KIND_ENUM, 2, 4, &[connect, 4, max, 38]);
    let uapi = b.s("BPF_CGROUP_INET4_CONNECT");
    b.ty("bpf_attach_type", KIND_ENUM, 1, 4, &[uapi, 10]);
    b.bytes()
}

#[test]
fn arrays_larger_than_the_iterators_buffers_are_refused_at_load() {
    // What this kernel has: 38 hooks, arrays well inside the buffers.
    // The layout gets past the size checks (and stops at what this
    // little kernel lacks).
    let fits = kernel(38, 38);
    let err = kernel_layout(&Types::parse(&fits).unwrap()).unwrap_err().to_string();
    assert!(!err.contains("buffer"), "{err}");
    // A kernel whose progs or flags outgrow the fixed reads.
    for (progs, flags, what) in [(MAX_ATYPES as u32 + 1, 38, "progs"), (38, 8 * (MAX_ATYPES as u32 / 2) + 1, "flags")] {
        let data = kernel(progs, flags);
        let err = kernel_layout(&Types::parse(&data).unwrap()).unwrap_err().to_string();
        assert!(err.contains(&format!("cgroup_bpf.{what} of at most")), "{err}");
        assert!(err.contains("the iterator's buffer is smaller"), "{err}");
    }
}

#[test]
fn buffer_sizes_are_powers_of_two_and_bounded() {
    assert_eq!(buffer_size(1), 256 << 10);
    assert_eq!(buffer_size(10_000), 1 << 20);
    assert_eq!(buffer_size(50_000), 4 << 20);
    assert_eq!(buffer_size(u64::MAX), 4 << 20);
}

#[test]
fn records_decode_field_by_field() {
    let mut b = vec![0u8; CGROUP_RECORD_HEADER + 3];
    b[0..4].copy_from_slice(&KIND_CGROUP.to_ne_bytes());
    b[4..8].copy_from_slice(&3u32.to_ne_bytes());
    b[8..16].copy_from_slice(&77u64.to_ne_bytes());
    b[16..24].copy_from_slice(&1u64.to_ne_bytes());
    b[24..28].copy_from_slice(&1u32.to_ne_bytes());
    b[CGROUP_RECORD_HEADER..].copy_from_slice(b"pod");
    let c = decode_cgroup(&b).unwrap();
    assert_eq!((c.id, c.parent_id, &c.name[..], c.populated), (77, 1, &b"pod"[..], true));
    assert!(decode_cgroup(&b[..CGROUP_RECORD_HEADER + 2]).is_none(), "a short record is not read past its end");
}

#[test]
fn only_a_refusal_counts_as_the_kernel_lacking_the_iterator() {
    let call = |errno| {
        IterError::Syscall(sys::SyscallError {
            call: "BPF_LINK_CREATE",
            io_error: std::io::Error::from_raw_os_error(errno),
        })
    };
    assert!(call(libc::EPERM).kernel_lacks_it(), "a seccomp profile's refusal lasts");
    assert!(call(libc::EINVAL).kernel_lacks_it());
    assert!(!call(libc::ENOMEM).kernel_lacks_it(), "the next pass may get the memory");
    assert!(!call(libc::EINTR).kernel_lacks_it());
    assert!(IterError::NoCgroupIterator.kernel_lacks_it());
    assert!(!IterError::KernelRead(3).kernel_lacks_it(), "one pass that went wrong");
    assert!(!IterError::Overflow(1 << 20).kernel_lacks_it());
}
