//! Native-endian integers at byte offsets of buffers the kernel or our
//! programs wrote (BTF blobs, ring-buffer records): bounds-checked, without
//! `unsafe` or alignment assumptions.

pub fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

pub fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u32_at(b, off)? as u64 | (u32_at(b, off.checked_add(4)?)? as u64) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stay_inside_the_buffer() {
        let b = [1u8, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(u32_at(&b, 4), Some(2));
        assert_eq!(u64_at(&b, 0), Some(1 | 2 << 32));
        assert_eq!(u32_at(&b, 5), None);
        assert_eq!(u32_at(&b, usize::MAX - 1), None, "no overflow");
    }
}
