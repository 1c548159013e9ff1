//! The name of one BTF type, read from a program's BTF blob.
//!
//! The kernel truncates program names to 15 bytes (`cil_sock4_conne`); the
//! full name is the name of the entry point's `BTF_KIND_FUNC`, which is what
//! bpftool prints. aya-obj parses BTF but keeps its by-id lookup crate-private
//! (`Btf::type_by_id` is `pub(crate)` in 0.3), so this walks the type section
//! itself: only the record sizes per kind are needed to reach a type id.

const BTF_MAGIC: u16 = 0xeb9f;

fn u32_at(data: &[u8], off: usize) -> Option<u32> {
    data.get(off..off + 4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// Bytes that follow the 12-byte common header of a type of this kind.
fn trailing_len(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
        2 | 7..=12 | 16 | 18 => 0,    // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
        3 => 12,                      // ARRAY
        4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
        6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
        _ => return None,             // a kind newer than this reader
    })
}

/// The name of type `type_id` in a raw BTF blob, or `None` if the blob is
/// malformed, the id is out of range, or the type is anonymous.
pub fn type_name(data: &[u8], type_id: u32) -> Option<String> {
    let magic = data.get(0..2).map(|b| u16::from_ne_bytes([b[0], b[1]]))?;
    if magic != BTF_MAGIC || type_id == 0 {
        return None;
    }
    let hdr_len = u32_at(data, 4)? as usize;
    let type_off = u32_at(data, 8)? as usize;
    let type_len = u32_at(data, 12)? as usize;
    let str_off = u32_at(data, 16)? as usize;
    let str_len = u32_at(data, 20)? as usize;
    let types = data.get(hdr_len + type_off..hdr_len + type_off + type_len)?;
    let strings = data.get(hdr_len + str_off..hdr_len + str_off + str_len)?;

    let mut off = 0usize;
    let mut id = 1u32;
    while off + 12 <= types.len() {
        let name_off = u32_at(types, off)? as usize;
        let info = u32_at(types, off + 4)?;
        if id == type_id {
            let rest = strings.get(name_off..)?;
            let end = rest.iter().position(|&b| b == 0)?;
            let name = std::str::from_utf8(&rest[..end]).ok()?;
            return (!name.is_empty()).then(|| name.to_owned());
        }
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        off += 12 + trailing_len(kind, vlen)?;
        id += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use aya_obj::btf::{Btf, BtfEnum, BtfParam, BtfType, Enum, Func, FuncLinkage, FuncProto, Int, IntEncoding};

    fn blob() -> (Vec<u8>, u32, u32) {
        let mut btf = Btf::new();
        let int = btf.add_string("int");
        let int_id = btf.add_type(BtfType::Int(Int::new(int, 4, IntEncoding::Signed, 0)));
        let ctx = btf.add_string("ctx");
        // An enum with members shifts later types by its trailing records.
        let ename = btf.add_string("verdict");
        let (a, b) = (btf.add_string("DROP"), btf.add_string("PASS"));
        let _ = btf.add_type(BtfType::Enum(Enum::new(ename, false, vec![BtfEnum::new(a, 0), BtfEnum::new(b, 1)])));
        let proto = btf.add_type(BtfType::FuncProto(FuncProto::new(
            vec![BtfParam { name_offset: ctx, btf_type: int_id }],
            int_id,
        )));
        let fname = btf.add_string("cil_sock4_connect");
        let func = btf.add_type(BtfType::Func(Func::new(fname, proto, FuncLinkage::Global)));
        (btf.to_bytes(), func, proto)
    }

    #[test]
    fn func_name_is_found_past_variable_length_records() {
        let (data, func, _) = blob();
        assert_eq!(type_name(&data, func).as_deref(), Some("cil_sock4_connect"));
    }

    #[test]
    fn anonymous_and_missing_types_have_no_name() {
        let (data, func, proto) = blob();
        assert_eq!(type_name(&data, proto), None);
        assert_eq!(type_name(&data, func + 1), None);
        assert_eq!(type_name(&data, 0), None);
    }

    #[test]
    fn garbage_is_not_btf() {
        assert_eq!(type_name(b"not btf at all, definitely not", 1), None);
        assert_eq!(type_name(&[], 1), None);
    }
}
