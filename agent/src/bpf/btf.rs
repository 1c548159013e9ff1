//! Reading raw BTF: the name of one type in a program's blob, and struct
//! member offsets, enum values and function ids in the kernel's own.
//!
//! The kernel truncates program names to 15 bytes (`cil_sock4_conne`); the
//! full name is the name of the entry point's `BTF_KIND_FUNC`, which is what
//! bpftool prints. aya-obj parses BTF but keeps its by-id lookup crate-private
//! (`Btf::type_by_id` is `pub(crate)` in 0.3), so this walks the type section
//! itself: only the record sizes per kind are needed to reach a type id.

const BTF_MAGIC: u16 = 0xeb9f;

use std::os::fd::AsFd;

use super::bytes::u32_at;
use super::sys;

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

/// The kernel's own BTF: mapped where the kernel allows it (6.16+; only
/// the pages read are touched, nothing is copied), else one copy through
/// bpf(2), else the sysfs file read 4 KiB at a time (~1,350 reads).
pub enum KernelBtf {
    Mapped(sys::KernelBtfMap),
    Copied(Vec<u8>),
}

impl std::ops::Deref for KernelBtf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            KernelBtf::Mapped(m) => m,
            KernelBtf::Copied(v) => v,
        }
    }
}

/// Why the kernel's BTF could not be read.
#[derive(Debug, thiserror::Error)]
#[error("reading {path}: {0}", path = sys::KERNEL_BTF)]
pub struct NoKernelBtf(String);

impl KernelBtf {
    pub fn read() -> Result<KernelBtf, NoKernelBtf> {
        match sys::map_kernel_btf() {
            Ok(m) => {
                crate::features::record(crate::features::Feature::BtfMmap, crate::features::Verdict::yes());
                return Ok(KernelBtf::Mapped(m));
            }
            Err(e) => crate::features::record(
                crate::features::Feature::BtfMmap,
                crate::features::Verdict::no(format!("mmap {}: {e}", sys::KERNEL_BTF)),
            ),
        }
        if let Some(copied) = Self::copy_through_bpf() {
            return Ok(KernelBtf::Copied(copied));
        }
        std::fs::read(sys::KERNEL_BTF).map(KernelBtf::Copied).map_err(|e| NoKernelBtf(e.to_string()))
    }

    /// One copy of vmlinux's BTF object through bpf(2), when the kernel
    /// can say which object that is: `bpf_btf_info`'s name and kernel_btf
    /// came in 5.11, and before that the kernel refuses the query (E2BIG).
    /// `None` sends the caller to the sysfs file, which every kernel with
    /// BTF has.
    fn copy_through_bpf() -> Option<Vec<u8>> {
        for id in sys::ids(sys::Objects::Btf) {
            let Ok(fd) = sys::btf_fd_by_id(id.ok()?) else { continue };
            if sys::btf_is_vmlinux(fd.as_fd()).ok()? {
                return sys::btf_data(fd.as_fd()).ok();
            }
        }
        None
    }
}

/// The NUL-terminated string at `off` of a string section.
fn str_in(strings: &[u8], off: u32) -> &[u8] {
    let rest = strings.get(off as usize..).unwrap_or(&[]);
    &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
}

/// Where the name of type `type_id` is, from a prefix of a BTF blob that
/// holds at least its header and type section: the name's byte offset in
/// the whole blob. `None` if that prefix is too short, the blob malformed,
/// or the id out of range.
pub fn name_offset(prefix: &[u8], type_id: u32) -> Option<usize> {
    let magic = prefix.get(0..2).map(|b| u16::from_ne_bytes([b[0], b[1]]))?;
    if magic != BTF_MAGIC {
        return None;
    }
    let field = |off| u32_at(prefix, off).map(|v| v as usize);
    let (hdr_len, type_off, type_len, str_off) = (field(4)?, field(8)?, field(12)?, field(16)?);
    let types = prefix.get(hdr_len.checked_add(type_off)?..hdr_len.checked_add(type_off)?.checked_add(type_len)?)?;
    let mut off = 0usize;
    for _ in 1..type_id {
        let info = u32_at(types, off + 4)?;
        off += 12 + trailing_len((info >> 24) & 0x1f, (info & 0xffff) as usize)?;
    }
    let name_off = u32_at(types, off)? as usize;
    hdr_len.checked_add(str_off)?.checked_add(name_off)
}

/// How many bytes of a BTF blob hold its header and type section (what
/// `name_offset` needs), from its first 24 bytes.
pub fn types_end(header: &[u8]) -> Option<usize> {
    let field = |off| u32_at(header, off).map(|v| v as usize);
    field(4)?.checked_add(field(8)?)?.checked_add(field(12)?)
}

/// The NUL-terminated name at `at` in a prefix of a blob.
pub fn name_at(prefix: &[u8], at: usize) -> Option<String> {
    let rest = prefix.get(at..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    let name = std::str::from_utf8(&rest[..end]).ok()?;
    (!name.is_empty()).then(|| name.to_owned())
}

/// The name of type `type_id` in a raw BTF blob, or `None` if the blob is
/// malformed, the id is out of range, or the type is anonymous.
#[cfg(test)]
pub fn type_name(data: &[u8], type_id: u32) -> Option<String> {
    let types = Types::parse(data).ok()?;
    let name = std::str::from_utf8(types.str_at(types.header(type_id)?.0)).ok()?;
    (!name.is_empty()).then(|| name.to_owned())
}

/// An index over one BTF blob: where each type's record starts, and the
/// ids of the named types asked for when it was made.
pub struct Types<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// Byte offset in `types` of type id `i + 1`.
    offsets: Vec<u32>,
    /// (kind, name) -> first id, for the names given to `parse_indexed`.
    named: std::collections::HashMap<(u32, &'a [u8]), u32>,
}

pub(crate) const KIND_INT: u32 = 1;
pub(crate) const KIND_PTR: u32 = 2;
pub(crate) const KIND_ARRAY: u32 = 3;
pub(crate) const KIND_STRUCT: u32 = 4;
pub(crate) const KIND_UNION: u32 = 5;
pub(crate) const KIND_ENUM: u32 = 6;
pub(crate) const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
pub(crate) const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// What a lookup in the kernel's BTF did not find.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtfError {
    #[error("not a BTF blob")]
    Malformed,
    #[error("no {0} in the kernel's BTF")]
    Missing(String),
}

impl<'a> Types<'a> {
    #[cfg(test)]
    pub fn parse(data: &'a [u8]) -> Result<Types<'a>, BtfError> {
        Types::parse_indexed(data, &[])
    }

    /// Parses, and in the same pass notes the ids of the structs, unions,
    /// enums and functions named in `names`: the kernel's BTF has ~150,000
    /// types, and a lookup by name is otherwise a walk over all of them.
    pub fn parse_indexed(data: &'a [u8], names: &[&str]) -> Result<Types<'a>, BtfError> {
        let bad = || BtfError::Malformed;
        let magic = data.get(0..2).map(|b| u16::from_ne_bytes([b[0], b[1]])).ok_or_else(bad)?;
        if magic != BTF_MAGIC {
            return Err(bad());
        }
        let hdr_len = u32_at(data, 4).ok_or_else(bad)? as usize;
        let field = |off| u32_at(data, off).map(|v| v as usize).ok_or_else(bad);
        let (type_off, type_len, str_off, str_len) = (field(8)?, field(12)?, field(16)?, field(20)?);
        let types = data.get(hdr_len + type_off..hdr_len + type_off + type_len).ok_or_else(bad)?;
        let strings = data.get(hdr_len + str_off..hdr_len + str_off + str_len).ok_or_else(bad)?;
        // The first bytes of the wanted names: most types are passed over on
        // one load, without finding the end of their name or hashing it.
        let mut first = [false; 256];
        for n in names {
            if let Some(&b) = n.as_bytes().first() {
                first[b as usize] = true;
            }
        }
        let mut named = std::collections::HashMap::new();
        let mut offsets = Vec::with_capacity(type_len / 24);
        let mut off = 0usize;
        while off + 12 <= types.len() {
            offsets.push(off as u32);
            let info = u32_at(types, off + 4).ok_or_else(bad)?;
            let kind = (info >> 24) & 0x1f;
            if matches!(kind, KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 | KIND_FUNC | KIND_TYPEDEF) {
                let at = u32_at(types, off).ok_or_else(bad)? as usize;
                if strings.get(at).is_some_and(|&b| first[b as usize]) {
                    let found = names
                        .iter()
                        .map(|n| n.as_bytes())
                        .find(|n| strings.get(at..at + n.len()) == Some(*n) && strings.get(at + n.len()) == Some(&0));
                    if let Some(n) = found {
                        named.entry((kind, &strings[at..at + n.len()])).or_insert(offsets.len() as u32);
                    }
                }
            }
            // A kind newer than this reader: the types before it are still
            // indexed, the ones after it cannot be reached.
            let Some(len) = trailing_len(kind, (info & 0xffff) as usize) else { break };
            off += 12 + len;
        }
        Ok(Types { types, strings, offsets, named })
    }

    fn str_at(&self, off: u32) -> &'a [u8] {
        str_in(self.strings, off)
    }

    /// (name offset, kind, vlen, kind_flag, size_or_type, byte offset of
    /// the trailing records) of type `id`.
    fn header(&self, id: u32) -> Option<(u32, u32, usize, bool, u32, usize)> {
        let off = *self.offsets.get((id as usize).checked_sub(1)?)? as usize;
        let info = u32_at(self.types, off + 4)?;
        Some((
            u32_at(self.types, off)?,
            (info >> 24) & 0x1f,
            (info & 0xffff) as usize,
            info >> 31 == 1,
            u32_at(self.types, off + 8)?,
            off + 12,
        ))
    }

    /// The id of the first type of `kind` named `name`.
    fn find(&self, kind: u32, name: &str) -> Option<u32> {
        if let Some(&id) = self.named.get(&(kind, name.as_bytes())) {
            return Some(id);
        }
        (1..=self.offsets.len() as u32)
            .find(|&id| self.header(id).is_some_and(|h| h.1 == kind && self.str_at(h.0) == name.as_bytes()))
    }

    /// The id of the `BTF_KIND_FUNC` named `name`.
    pub fn func_id(&self, name: &str) -> Result<u32, BtfError> {
        self.find(KIND_FUNC, name).ok_or_else(|| BtfError::Missing(format!("function {name}")))
    }

    /// How many arguments the function `name` takes (its `FUNC_PROTO`'s
    /// parameters): an fexit program reads the return value in the slot
    /// after the last one, so it is checked before loading.
    pub fn func_arity(&self, name: &str) -> Result<u32, BtfError> {
        let func = self.func_id(name)?;
        let proto = self.header(func).map(|h| h.4).ok_or(BtfError::Malformed)?;
        let h = self.header(proto).ok_or(BtfError::Malformed)?;
        if h.1 != KIND_FUNC_PROTO {
            return Err(BtfError::Malformed);
        }
        Ok(h.2 as u32)
    }

    /// The id of the `BTF_KIND_TYPEDEF` named `name` (`btf_trace_<event>`
    /// names a raw tracepoint's BTF target).
    pub fn typedef_id(&self, name: &str) -> Result<u32, BtfError> {
        self.find(KIND_TYPEDEF, name).ok_or_else(|| BtfError::Missing(format!("typedef {name}")))
    }

    fn find_struct(&self, name: &str) -> Result<u32, BtfError> {
        self.find(KIND_STRUCT, name).ok_or_else(|| BtfError::Missing(format!("struct {name}")))
    }

    /// Skips typedefs and qualifiers.
    fn resolve(&self, mut id: u32) -> Option<u32> {
        for _ in 0..32 {
            let h = self.header(id)?;
            match h.1 {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => id = h.4,
                _ => return Some(id),
            }
        }
        None
    }

    /// Size in bytes of a type.
    pub fn type_size(&self, id: u32) -> Option<u32> {
        let h = self.header(self.resolve(id)?)?;
        match h.1 {
            KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 => Some(h.4),
            KIND_PTR => Some(8),
            KIND_ARRAY => {
                let elem = u32_at(self.types, h.5)?;
                let n = u32_at(self.types, h.5 + 8)?;
                self.type_size(elem)?.checked_mul(n)
            }
            _ => None,
        }
    }

    /// Byte offset and type of member `name` of a struct or union, looking
    /// into anonymous members.
    fn member_in(&self, id: u32, name: &str) -> Option<(u32, u32)> {
        let h = self.header(self.resolve(id)?)?;
        if h.1 != KIND_STRUCT && h.1 != KIND_UNION {
            return None;
        }
        for i in 0..h.2 {
            let rec = h.5 + 12 * i;
            let (m_name, m_type, m_off) =
                (u32_at(self.types, rec)?, u32_at(self.types, rec + 4)?, u32_at(self.types, rec + 8)?);
            let bits = if h.3 { m_off & 0x00ff_ffff } else { m_off };
            if m_name == 0 {
                if let Some((inner, t)) = self.member_in(m_type, name) {
                    return Some((bits / 8 + inner, t));
                }
            } else if self.str_at(m_name) == name.as_bytes() {
                return Some((bits / 8, m_type));
            }
        }
        None
    }

    /// Byte offset of `path` (`"bpf.progs"`) in struct `strukt`, and the
    /// type of the last member. A step may name alternatives separated by
    /// `|`; the first that exists is used (`__parent|parent`: the member was
    /// `parent` before 6.15).
    pub fn offset_of(&self, strukt: &str, path: &str) -> Result<(u32, u32), BtfError> {
        let mut id = self.find_struct(strukt)?;
        let mut total = 0;
        for step in path.split('.') {
            let found = step.split('|').find_map(|name| self.member_in(id, name));
            let (off, t) = found.ok_or_else(|| BtfError::Missing(format!("member {path} of struct {strukt}")))?;
            total += off;
            id = t;
        }
        Ok((total, id))
    }

    /// Size of one element of the array type `id`.
    pub fn element_size(&self, id: u32) -> Result<u32, BtfError> {
        let h = self.header(self.resolve(id).ok_or(BtfError::Malformed)?).ok_or(BtfError::Malformed)?;
        if h.1 != KIND_ARRAY {
            return Err(BtfError::Missing("an array".into()));
        }
        let elem = u32_at(self.types, h.5).ok_or(BtfError::Malformed)?;
        self.type_size(elem).ok_or(BtfError::Malformed)
    }

    /// Name of the element type of the array type `id` (`hlist_head`).
    pub fn element_name(&self, id: u32) -> Option<String> {
        let h = self.header(self.resolve(id)?)?;
        if h.1 != KIND_ARRAY {
            return None;
        }
        let elem = self.header(self.resolve(u32_at(self.types, h.5)?)?)?;
        Some(String::from_utf8_lossy(self.str_at(elem.0)).into_owned())
    }

    /// Every (name, value) of enum `name`.
    pub fn enum_values(&self, name: &str) -> Result<Vec<(String, i64)>, BtfError> {
        let id = self
            .find(KIND_ENUM, name)
            .or_else(|| self.find(KIND_ENUM64, name))
            .ok_or_else(|| BtfError::Missing(format!("enum {name}")))?;
        let h = self.header(id).ok_or(BtfError::Malformed)?;
        let step = if h.1 == KIND_ENUM { 8 } else { 12 };
        (0..h.2)
            .map(|i| {
                let rec = h.5 + step * i;
                let name = String::from_utf8_lossy(self.str_at(u32_at(self.types, rec).ok_or(BtfError::Malformed)?));
                let lo = u32_at(self.types, rec + 4).ok_or(BtfError::Malformed)?;
                let value = if h.1 == KIND_ENUM {
                    lo as i32 as i64
                } else {
                    let hi = u32_at(self.types, rec + 8).ok_or(BtfError::Malformed)?;
                    ((hi as u64) << 32 | lo as u64) as i64
                };
                Ok((name.into_owned(), value))
            })
            .collect()
    }
}

/// Test-only: BTF written by hand, for layouts no kernel here has.
#[cfg(test)]
pub(crate) mod raw {
    pub(crate) use super::{KIND_ARRAY, KIND_ENUM, KIND_INT, KIND_PTR, KIND_STRUCT};

    /// A raw BTF writer: aya-obj keeps most of its type builders private.
    #[derive(Default)]
    pub struct Raw {
        types: Vec<u8>,
        strings: Vec<u8>,
        next: u32,
    }

    impl Raw {
        pub fn new() -> Raw {
            Raw { strings: vec![0], next: 1, ..Raw::default() }
        }
        pub fn s(&mut self, name: &str) -> u32 {
            if name.is_empty() {
                return 0;
            }
            let off = self.strings.len() as u32;
            self.strings.extend_from_slice(name.as_bytes());
            self.strings.push(0);
            off
        }
        pub fn ty(&mut self, name: &str, kind: u32, vlen: u32, size_or_type: u32, tail: &[u32]) -> u32 {
            let name = self.s(name);
            for w in [name, kind << 24 | vlen, size_or_type].iter().chain(tail) {
                self.types.extend_from_slice(&w.to_ne_bytes());
            }
            self.next += 1;
            self.next - 1
        }
        pub fn compound(&mut self, name: &str, kind: u32, size: u32, members: &[(&str, u32, u32)]) -> u32 {
            let mut tail = Vec::new();
            for &(m, ty, bits) in members {
                tail.extend([self.s(m), ty, bits]);
            }
            self.ty(name, kind, members.len() as u32, size, &tail)
        }
        pub fn bytes(&self) -> Vec<u8> {
            let mut out = Vec::new();
            let (tl, sl) = (self.types.len() as u32, self.strings.len() as u32);
            for w in [0xeb9f_u32 | 1 << 16, 24, 0, tl, tl, sl] {
                out.extend_from_slice(&w.to_ne_bytes());
            }
            out[0..4].copy_from_slice(&[0x9f, 0xeb, 1, 0]);
            out.extend_from_slice(&self.types);
            out.extend_from_slice(&self.strings);
            out
        }
    }
}

#[cfg(test)]
mod tests;
