//! Loads one of the agent's own eBPF objects (embedded ELF) and its maps.
//!
//! aya's `EbpfLoader` parses all of the kernel's BTF when it is made (~20 ms
//! and ~28 MB here, for CO-RE relocations our objects do not have) and
//! probes kernel features on its first load: more than the one-shot audit's
//! whole walk. So the pieces are used directly: aya-obj parses the object and
//! relocates its map references and calls, aya creates the maps
//! (`MapData::create`, which the maps' readers then wrap), and `sys` loads
//! the program. What our objects do not use (map-in-map, pinning, CO-RE,
//! sanitizing for old kernels) is refused rather than half-done: a kernel
//! that lacks what they need fails the load, and the caller falls back.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use aya::maps::MapData;
use aya_obj::btf::BtfFeatures;
use aya_obj::generated::{bpf_insn, bpf_map_type};
use aya_obj::{EbpfSectionKind, Object};

use super::sys::{self, LoadFailure, ProgBtf, ProgLoad};

/// How to load an object: which of its programs, and its globals and maps.
pub struct Spec<'a> {
    pub programs: &'a [Program<'a>],
    /// Values of the object's read-only globals, by symbol name.
    pub globals: &'a [(&'a str, &'a [u8])],
    /// Map sizes to set at load time, by map name.
    pub max_entries: &'a [(&'a str, u32)],
}

/// One program to load.
pub struct Program<'a> {
    /// Its function name in the object.
    pub name: &'a str,
    pub prog_type: u32,
    pub expected_attach_type: u32,
    /// See `sys::ProgLoad::attach_btf_id`.
    pub attach_btf_id: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("parsing the object: {0}")]
    Parse(String),
    #[error("object BTF: {0}")]
    Btf(String),
    #[error("map {name}: {error}")]
    Map { name: String, error: String },
    #[error("relocating {0}")]
    Relocate(String),
    #[error("no program {0} in the object")]
    NoProgram(String),
    #[error("program {name}: {error}")]
    Program { name: String, error: LoadFailure },
}

/// Loaded programs and the maps they share.
pub struct Loaded {
    progs: HashMap<String, OwnedFd>,
    maps: HashMap<String, MapData>,
    /// The object's BTF: the program refers to it until unloaded.
    _btf: Option<OwnedFd>,
}

impl Loaded {
    /// A program, by its name in the object.
    pub fn prog(&self, name: &str) -> Option<BorrowedFd<'_>> {
        self.progs.get(name).map(|fd| fd.as_fd())
    }

    /// Hands a map to its reader (aya's typed maps wrap `MapData`).
    pub fn take_map(&mut self, name: &str) -> Option<MapData> {
        self.maps.remove(name)
    }
}

/// A `struct bpf_insn` as the kernel reads it: opcode, then the register
/// nibbles, offset and immediate, little-endian.
fn insn_word(i: &bpf_insn) -> u64 {
    let regs = (i.dst_reg() & 0xf) | (i.src_reg() & 0xf) << 4;
    i.code as u64 | (regs as u64) << 8 | (i.off as u16 as u64) << 16 | (i.imm as u32 as u64) << 32
}

/// Loads `spec.programs` from `data`.
pub fn load(data: &[u8], spec: &Spec<'_>) -> Result<Loaded, LoadError> {
    let mut obj = Object::parse(data).map_err(|e| LoadError::Parse(e.to_string()))?;
    let globals = spec.globals.iter().map(|&(name, value)| (name, (value, true))).collect();
    obj.patch_map_data(globals).map_err(|e| LoadError::Parse(e.to_string()))?;

    // The kernels this loads on (5.5+ for fexit, 6.1+ for the cgroup
    // iterator) know every BTF kind our objects have.
    let features = BtfFeatures::new(true, true, true, true, true, true, true, true);
    let btf = match obj.fixup_and_sanitize_btf(&features).map_err(|e| LoadError::Btf(e.to_string()))? {
        Some(btf) => Some(sys::btf_load(&btf.to_bytes()).map_err(|e| LoadError::Btf(e.to_string()))?),
        None => None,
    };

    let mut maps = HashMap::new();
    let mut defs = HashMap::new();
    for (name, mut def) in obj.maps.drain() {
        let map_err = |error: String| LoadError::Map { name: name.clone(), error };
        if let Some(&(_, n)) = spec.max_entries.iter().find(|(m, _)| *m == name) {
            def.set_max_entries(n);
        }
        if def.map_type() == bpf_map_type::BPF_MAP_TYPE_RINGBUF as u32 {
            def.set_value_size(0);
        }
        let map = MapData::create(def.clone(), &name, btf.as_ref().map(|fd| fd.as_fd()))
            .map_err(|e| map_err(super::one_line(&e)))?;
        // What aya's loader does once maps exist: globals get their values,
        // read-only ones are frozen so the verifier may rely on them.
        let fd = map.fd().as_fd();
        if !def.data().is_empty() {
            sys::array_map_set(fd, def.data()).map_err(|e| map_err(e.to_string()))?;
        }
        if def.section_kind() == EbpfSectionKind::Rodata {
            sys::map_freeze(fd).map_err(|e| map_err(e.to_string()))?;
        }
        defs.insert(name.clone(), def);
        maps.insert(name, map);
    }

    let text_sections: HashSet<usize> = obj.functions.keys().map(|&(section, _)| section).collect();
    let fds: Vec<(&str, i32, &aya_obj::Map)> = maps
        .iter()
        .filter_map(|(name, map)| Some((name.as_str(), map.fd().as_fd().as_raw_fd(), defs.get(name)?)))
        .collect();
    obj.relocate_maps(fds.into_iter(), &text_sections).map_err(|e| LoadError::Relocate(super::one_line(&e)))?;
    obj.relocate_calls(&text_sections).map_err(|e| LoadError::Relocate(super::one_line(&e)))?;

    let license = CString::new(obj.license.as_bytes()).unwrap_or_else(|_| c"GPL".to_owned());
    let mut progs = HashMap::new();
    for p in spec.programs {
        let missing = || LoadError::NoProgram(p.name.to_owned());
        let program = obj.programs.get(p.name).ok_or_else(missing)?;
        let function = obj.functions.get(&program.function_key()).ok_or_else(missing)?;
        let insns: Vec<u64> = function.instructions.iter().map(insn_word).collect();
        let fd = sys::prog_load(&ProgLoad {
            prog_type: p.prog_type,
            expected_attach_type: p.expected_attach_type,
            attach_btf_id: p.attach_btf_id,
            name: p.name,
            license: &license,
            insns: &insns,
            btf: btf.as_ref().map(|fd| ProgBtf {
                fd: fd.as_fd(),
                func_info: &function.func_info.func_info,
                line_info: &function.line_info.line_info,
            }),
        })
        .map_err(|e| LoadError::Program { name: p.name.to_owned(), error: e })?;
        progs.insert(p.name.to_owned(), fd);
    }
    Ok(Loaded { progs, maps, _btf: btf })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_encoded_as_the_kernel_reads_them() {
        // r1 = *(u64 *)(r10 - 8): code 0x79, dst 1, src 10, off -8.
        let mut i = bpf_insn { code: 0x79, _bitfield_align_1: [], _bitfield_1: Default::default(), off: -8, imm: 0 };
        i.set_dst_reg(1);
        i.set_src_reg(10);
        assert_eq!(insn_word(&i), 0x79 | 0xa1 << 8 | 0xfff8 << 16);
        // r0 = 1
        let mut i = bpf_insn { code: 0xb7, _bitfield_align_1: [], _bitfield_1: Default::default(), off: 0, imm: 1 };
        i.set_dst_reg(0);
        assert_eq!(insn_word(&i), 0xb7 | 1 << 32);
    }
}
