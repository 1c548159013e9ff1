//! Cilium's own datapath objects, compiled from its source
//! (`tests/third_party/cilium`, v1.18.3's `bpf/`) with its own Makefile rule
//! by `cargo xtask test` (`make -C bpf bpf_host.o bpf_overlay.o bpf_lxc.o`
//! with Debian's clang-14), loaded and attached the way cilium-agent's
//! loader does (pkg/datapath/loader, v1.18):
//!
//! - every map pinned by name in `<bpffs>/tc/globals` (LIBBPF_PIN_BY_NAME;
//!   an existing pin is reused), the tail-call map `cilium_calls` made new,
//!   filled from the object's `tail:cilium_calls/<slot>` declarations, and
//!   pinned under its local name once the entry programs are attached
//!   (CILIUM_PIN_REPLACE, `commitMapPins`);
//! - each entry program attached by a tcx link pinned at
//!   `<bpffs>/cilium/devices/<dev>/links/<program>` (`paths.go`), or, where
//!   that pin exists, the pinned link updated to run the new program
//!   (`UpdateLink`), or by a legacy tc filter (priority, handle 1,
//!   `<program>-<dev>`);
//! - and no fd kept: the caller (`fixture cilium-loader`) exits.
//!
//! aya loads what cilium/ebpf loads but for two spellings, rewritten here
//! and nothing else: the program sections (`tc/entry`, `tc/tail`; aya knows
//! `classifier/...`), in the ELF and in `.BTF.ext`; and a PROG_ARRAY's
//! `values` member (its initial programs, `__array(values, int())`), which
//! libbpf and cilium/ebpf take as a 4-byte value and aya as map-in-map.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use aya::programs::tc::{TcAttachOptions, TcAttachType};
use aya::programs::{LinkOrder, SchedClassifier, links::FdLink};

/// Where `cargo xtask test` leaves the objects (`CGAUDIT_CILIUM_OBJECTS`,
/// else the workspace's `target/cilium/bpf`).
pub fn objects() -> PathBuf {
    std::env::var_os("CGAUDIT_CILIUM_OBJECTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace().join("target/cilium/bpf"))
}

fn u32_at(d: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(d[o..o + 4].try_into().expect("4 bytes"))
}

fn put_u32(d: &mut [u8], o: usize, v: u32) {
    d[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

/// The object at `path`, its program sections and PROG_ARRAY maps spelt as
/// aya reads them; and its tail calls: (program, slot) of each
/// `tail:cilium_calls/<slot>` declaration.
pub fn prepare(path: &Path) -> (Vec<u8>, Vec<(String, u32)>) {
    let elf =
        std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e} (built by `cargo xtask test`)", path.display()));
    retarget(&elf)
}

/// BTF's types, walked: each type's header offset in `btf`, kind and vlen
/// (type 0, void, first).
fn btf_types(btf: &[u8]) -> Vec<(usize, u32, usize)> {
    let hdr = u32_at(btf, 4) as usize;
    let (toff, tlen) = (u32_at(btf, 8) as usize, u32_at(btf, 12) as usize);
    let (mut p, end) = (hdr + toff, hdr + toff + tlen);
    let mut out = vec![(0, 0, 0)];
    while p < end {
        let info = u32_at(btf, p + 4);
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        out.push((p, kind, vlen));
        p += 12
            + match kind {
                1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
                3 => 12,                      // ARRAY
                4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
                6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
                _ => 0,
            };
    }
    out
}

/// The string at `off` of BTF's string section.
fn btf_string(btf: &[u8], off: u32) -> String {
    let start = u32_at(btf, 4) as usize + u32_at(btf, 16) as usize + off as usize;
    let end = btf[start..].iter().position(|c| *c == 0).map_or(btf.len(), |e| start + e);
    String::from_utf8_lossy(&btf[start..end]).into_owned()
}

/// See the module's header.
fn retarget(elf: &[u8]) -> (Vec<u8>, Vec<(String, u32)>) {
    use object::build::elf::{Builder, SectionData};
    let rename = |n: &str| n.strip_prefix("tc/").map(|r| format!("classifier/{r}"));
    // SHT_LLVM_ADDRSIG, which the builder does not read (nor aya need):
    // marked PROGBITS, then left out.
    let mut elf = elf.to_vec();
    let shoff = u64::from_le_bytes(elf[0x28..0x30].try_into().expect("e_shoff")) as usize;
    let shentsize = u16::from_le_bytes(elf[0x3a..0x3c].try_into().expect("e_shentsize")) as usize;
    let shnum = u16::from_le_bytes(elf[0x3c..0x3e].try_into().expect("e_shnum")) as usize;
    for i in 0..shnum {
        let at = shoff + i * shentsize + 4;
        if u32_at(&elf, at) == 0x6fff_4c03 {
            put_u32(&mut elf, at, object::elf::SHT_PROGBITS);
        }
    }
    let mut b = Builder::read(&elf[..]).expect("read the object");
    let data_of = |b: &Builder<'_>, name: &[u8]| {
        b.sections.iter().find(|s| s.name.as_slice() == name).and_then(|s| match &s.data {
            SectionData::Data(d) => Some((s.id(), d.to_vec())),
            _ => None,
        })
    };
    let (btf_id, mut btf) = data_of(&b, b".BTF").expect(".BTF");
    let (ext_id, mut ext) = data_of(&b, b".BTF.ext").expect(".BTF.ext");
    let hdr = u32_at(&btf, 4) as usize;
    let str_off = u32_at(&btf, 16) as usize;
    assert_eq!(hdr + str_off + u32_at(&btf, 20) as usize, btf.len(), "BTF's strings come last");
    // .BTF.ext's records name their sections by BTF string: new names.
    let mut added: HashMap<String, u32> = HashMap::new();
    let ehdr = u32_at(&ext, 4) as usize;
    let mut subsections = vec![(u32_at(&ext, 8), u32_at(&ext, 12)), (u32_at(&ext, 16), u32_at(&ext, 20))];
    if ehdr >= 32 {
        subsections.push((u32_at(&ext, 24), u32_at(&ext, 28)));
    }
    for (off, len) in subsections.into_iter().filter(|(_, len)| *len > 0) {
        let (start, end) = (ehdr + off as usize, ehdr + off as usize + len as usize);
        let record = u32_at(&ext, start) as usize;
        let mut p = start + 4;
        while p < end {
            let (name, n) = (btf_string(&btf, u32_at(&ext, p)), u32_at(&ext, p + 4) as usize);
            if let Some(new) = rename(&name) {
                let at = *added.entry(new.clone()).or_insert_with(|| {
                    let at = (btf.len() - hdr - str_off) as u32;
                    btf.extend_from_slice(new.as_bytes());
                    btf.push(0);
                    at
                });
                put_u32(&mut ext, p, at);
            }
            p += 8 + n * record;
        }
    }
    let strings = (btf.len() - hdr - str_off) as u32;
    put_u32(&mut btf, 20, strings);
    let tails = fix_btf(&mut btf);
    b.sections.get_mut(btf_id).data = SectionData::Data(btf.into());
    b.sections.get_mut(ext_id).data = SectionData::Data(ext.into());
    for s in b.sections.iter_mut() {
        if s.name.as_slice() == b".llvm_addrsig" {
            s.delete = true;
        } else if let Some(new) = rename(&String::from_utf8_lossy(s.name.as_slice())) {
            s.name = new.into_bytes().into();
        }
    }
    // Section names in a table of their own (clang shares .strtab).
    let names = b.sections.add();
    names.name = b".shstrtab".to_vec().into();
    names.sh_type = object::elf::SHT_STRTAB;
    names.sh_addralign = 1;
    names.data = SectionData::SectionString;
    let mut out = Vec::new();
    b.write(&mut out).expect("write the object");
    (out, tails)
}

/// A PROG_ARRAY's `values` member made `value_size` (a pointer to an array
/// of 4, at the last member's offset so that it fits), in place; and the
/// tail calls the BTF declares.
fn fix_btf(btf: &mut [u8]) -> Vec<(String, u32)> {
    let types = btf_types(btf);
    let hdr = u32_at(btf, 4) as usize;
    let soff = hdr + u32_at(btf, 16) as usize;
    let slen = u32_at(btf, 20) as usize;
    let find = |btf: &[u8], want: &[u8]| -> Option<u32> {
        let mut i = 0;
        while i < slen {
            let e = btf[soff + i..].iter().position(|c| *c == 0)?;
            if &btf[soff + i..soff + i + e] == want {
                return Some(i as u32);
            }
            i += e + 1;
        }
        None
    };
    // `__uint(x, N)`: a pointer to an array of N.
    let uint_of = |btf: &[u8], id: u32| -> Option<u32> {
        let (p, kind, _) = *types.get(id as usize)?;
        let (a, akind, _) = *types.get(u32_at(btf, p + 8) as usize).filter(|_| kind == 2)?;
        (akind == 3).then(|| u32_at(btf, a + 20))
    };
    let mut tails = Vec::new();
    for &(p, kind, _) in &types {
        // DECL_TAG 'tail:cilium_calls/<slot>' on a FUNC.
        if kind == 17 {
            let tag = btf_string(btf, u32_at(btf, p));
            if let Some(slot) = tag.strip_prefix("tail:cilium_calls/").and_then(|s| s.parse().ok()) {
                let (func, _, _) = types[u32_at(btf, p + 8) as usize];
                tails.push((btf_string(btf, u32_at(btf, func)), slot));
            }
        }
    }
    let (Some(values), Some(value_size), Some(typ)) =
        (find(btf, b"values"), find(btf, b"value_size"), find(btf, b"type"))
    else {
        return tails;
    };
    let Some(four) = (0..types.len() as u32).find(|id| uint_of(btf, *id) == Some(4)) else { return tails };
    for &(p, kind, vlen) in &types {
        if kind != 4 {
            continue;
        }
        let members: Vec<usize> = (0..vlen).map(|m| p + 12 + 12 * m).collect();
        let prog_array = members.iter().any(|&m| u32_at(btf, m) == typ && uint_of(btf, u32_at(btf, m + 4)) == Some(3));
        let patch: Vec<(usize, u32)> = members
            .iter()
            .filter(|&&m| prog_array && u32_at(btf, m) == values)
            .map(|&m| (m, members.iter().filter(|&&o| o != m).map(|&o| u32_at(btf, o + 8)).max().unwrap_or(0)))
            .collect();
        for (m, last) in patch {
            put_u32(btf, m, value_size);
            put_u32(btf, m + 4, four);
            put_u32(btf, m + 8, last);
        }
    }
    tails
}

/// Where an entry program goes on its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Ingress,
    Egress,
}

/// How the programs are attached: tcx links, or legacy tc filters at a
/// priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    Tcx,
    Tc(u16),
}

/// Loads `object`'s `entries` and its tail calls, and attaches them to
/// device `dev` of this thread's network namespace as cilium-agent does
/// (see the module's header), its maps pinned under `bpffs`; the entries'
/// program ids. `calls` is the local name of its tail-call map
/// (`cilium_calls_overlay_2`; `netdev`: a native device's,
/// `cilium_calls_netdev_<ifindex, 5 digits>`; `endpoint:<id>`: endpoint
/// `id`'s, `cilium_calls_<id, 5 digits>`, its links pinned under
/// `cilium/endpoints/<id>/links/`).
pub fn attach(object: &Path, dev: &str, entries: &[(&str, Hook)], how: Attach, bpffs: &Path, calls: &str) -> Vec<u32> {
    let (elf, tails) = prepare(object);
    let globals = bpffs.join("tc/globals");
    std::fs::create_dir_all(&globals).expect("mkdir tc/globals");
    let mut bpf = aya::EbpfLoader::new()
        .default_map_pin_directory(&globals)
        .allow_unsupported_maps()
        .load(&elf)
        .unwrap_or_else(|e| panic!("load {}: {e:?}", object.display()));
    // Tail calls first, as the loader fills the map before it attaches.
    let mut fds = Vec::new();
    for (name, slot) in &tails {
        let Some(p) = bpf.program_mut(name) else { continue };
        let p: &mut SchedClassifier = p.try_into().unwrap_or_else(|e| panic!("{name}: {e}"));
        p.load().unwrap_or_else(|e| panic!("load {name}: {e:?}"));
        fds.push((*slot, p.fd().expect("its fd").try_clone().expect("dup")));
    }
    {
        let map = bpf.map_mut("cilium_calls").expect("cilium_calls");
        let mut array = aya::maps::ProgramArray::try_from(map).expect("a program array");
        for (slot, fd) in &fds {
            array.set(*slot, fd, 0).unwrap_or_else(|e| panic!("cilium_calls[{slot}]: {e}"));
        }
    }
    // An endpoint's links go under its id (`endpoint:<id>`), a device's
    // under its name.
    let endpoint = calls.strip_prefix("endpoint:").map(|id| id.parse::<u16>().expect("an endpoint id"));
    let links = match endpoint {
        Some(id) => bpffs.join("cilium/endpoints").join(id.to_string()).join("links"),
        None => bpffs.join("cilium/devices").join(dev.replace('.', "-")).join("links"),
    };
    let ifindex = nix::net::if_::if_nametoindex(dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
    let mut ids = Vec::new();
    for (name, hook) in entries {
        let p: &mut SchedClassifier =
            bpf.program_mut(name).unwrap_or_else(|| panic!("no {name}")).try_into().expect("a tc program");
        p.load().unwrap_or_else(|e| panic!("load {name}: {e:?}"));
        ids.push(p.info().expect("its info").id());
        let at = match hook {
            Hook::Ingress => TcAttachType::Ingress,
            Hook::Egress => TcAttachType::Egress,
        };
        match how {
            Attach::Tcx => {
                std::fs::create_dir_all(&links).expect("mkdir the device's links");
                let pin = links.join(name);
                let c = CString::new(pin.as_os_str().as_encoded_bytes()).expect("path");
                match agent::bpf::sys::obj_get(&c) {
                    // UpdateLink: the pinned link runs the new program.
                    Ok(link) => agent::bpf::sys::link_update(link.as_fd(), p.fd().expect("fd").as_fd())
                        .unwrap_or_else(|e| panic!("update {}: {e}", pin.display())),
                    Err(_) => {
                        let id = p
                            .attach_with_options(dev, at, TcAttachOptions::TcxOrder(LinkOrder::default()))
                            .unwrap_or_else(|e| panic!("tcx {name} on {dev}: {e:?}"));
                        let link = FdLink::try_from(p.take_link(id).expect("the link")).expect("a tcx link");
                        link.pin(&pin).unwrap_or_else(|e| panic!("pin {}: {e:?}", pin.display()));
                    }
                }
            }
            Attach::Tc(prio) => {
                let parent = if *hook == Hook::Ingress { 0xfff2 } else { 0xfff3 };
                let fd = p.fd().expect("fd");
                crate::datapath::tc_filter(ifindex, dev, fd.as_fd(), name, parent, prio);
            }
        }
    }
    // commitMapPins: the local name points at this generation's map (a
    // native device's is named by its ifindex).
    let calls = match endpoint {
        Some(id) => format!("cilium_calls_{id:05}"),
        None if calls == "netdev" => format!("cilium_calls_netdev_{ifindex:05}"),
        None => calls.to_owned(),
    };
    let pin = globals.join(calls);
    let _ = std::fs::remove_file(&pin);
    bpf.map("cilium_calls").expect("cilium_calls").pin(&pin).unwrap_or_else(|e| panic!("pin {}: {e:?}", pin.display()));
    ids
}
