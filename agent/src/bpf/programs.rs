//! Loaded programs and cgroup links, node-wide.
//!
//! Programs are enumerated with `BPF_PROG_GET_NEXT_ID` after the cgroup walk,
//! so every program the walk saw attached is in the table unless it was
//! unloaded meanwhile. Links come from `BPF_LINK_GET_NEXT_ID` (5.8).
//!
//! Any process with CAP_BPF makes objects here, and the kernel may refuse
//! to describe one of them for good (a uprobe_multi link on a file whose
//! path is longer than PATH_MAX fails `BPF_OBJ_GET_INFO_BY_FD` with
//! ENAMETOOLONG): no single object fails a pass. A link whose info the
//! kernel refuses is known by the type its fdinfo states, passed over when
//! it is not a cgroup link and counted when it is (or cannot be told); a
//! program is counted. Only what says the agent itself cannot read (an fd
//! refused by id) ends the pass.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsFd;

use serde::Serialize;

use super::ProgType;
use super::btf;
use super::fdinfo;
use super::sys::{self, CgroupLinkInfo, Objects, SyscallError};

/// A loaded program as the audit reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Program {
    pub id: u32,
    /// Full name: the BTF name of the entry function when the kernel's
    /// 15-byte name is a truncation of it, else the kernel name.
    pub name: String,
    pub prog_type: ProgType,
    /// The kernel's tag (hash of the instructions), as bpftool prints it.
    pub tag: String,
    /// The BTF object holding the full name, while `name` may be the
    /// kernel's truncation: 15 bytes (BPF_OBJ_NAME_LEN - 1) with func info.
    #[serde(skip)]
    btf: Option<u32>,
    /// When it was loaded, in milliseconds since the Unix epoch.
    #[serde(skip)]
    pub loaded_unix_ms: Option<u64>,
}

impl Program {
    /// A program known only by what rules look at (for fixtures and tests).
    pub fn new(id: u32, name: &str, prog_type: ProgType) -> Program {
        Program { id, name: name.to_owned(), prog_type, tag: String::new(), btf: None, loaded_unix_ms: None }
    }

    /// Whether `name` may be the kernel's 15-byte truncation, not yet
    /// resolved with `resolve_full_names`.
    pub fn name_unresolved(&self) -> bool {
        self.btf.is_some()
    }
}

/// Reads one program's kernel info by id. `Ok(None)`: it was unloaded
/// meanwhile. The name is the kernel's; see `resolve_full_names`.
pub fn program_by_id(id: u32) -> Result<Option<Program>, SyscallError> {
    match read_program(id) {
        Read::Found(p) => Ok(Some(p)),
        Read::Gone => Ok(None),
        Read::Refused(e) | Read::Unreadable(e) => Err(e),
    }
}

/// What asking the kernel for one object gave.
enum Read<T> {
    Found(T),
    /// It went between its id and its fd.
    Gone,
    /// Its fd was refused: the agent cannot read the node's objects.
    Refused(SyscallError),
    /// The kernel will not describe this one object.
    Unreadable(SyscallError),
}

fn read_program(id: u32) -> Read<Program> {
    let fd = match sys::prog_fd_by_id(id) {
        Ok(fd) => fd,
        Err(e) if e.errno() == Some(libc::ENOENT) => return Read::Gone,
        Err(e) => return Read::Refused(e),
    };
    let info = match sys::prog_info(fd.as_fd()) {
        Ok(info) => info,
        Err(e) => return Read::Unreadable(e),
    };
    let truncatable = info.name.len() == 15 && info.btf_id != 0 && info.nr_func_info > 0;
    Read::Found(Program {
        id,
        name: info.name,
        prog_type: ProgType::from_kernel(info.prog_type),
        tag: info.tag.iter().map(|b| format!("{b:02x}")).collect(),
        btf: truncatable.then_some(info.btf_id),
        loaded_unix_ms: unix_ms_of_boot_ns(info.load_time_ns),
    })
}

/// A CLOCK_BOOTTIME instant as wall-clock milliseconds since the epoch.
fn unix_ms_of_boot_ns(boot_ns: u64) -> Option<u64> {
    let now_boot = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    let now_boot_ns = now_boot.tv_sec() as u64 * 1_000_000_000 + now_boot.tv_nsec() as u64;
    let now_unix_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64;
    Some(now_unix_ms.saturating_sub(now_boot_ns.saturating_sub(boot_ns) / 1_000_000))
}

/// Replaces kernel-truncated names with the entry function's BTF name, for
/// the programs in `ids` only: a CNI node has hundreds of programs, each
/// with its own BTF object, and the audit names few of them.
///
/// BTF blobs are fetched once per object: Cilium's socket-LB programs share
/// one. A program unloaded meanwhile keeps its kernel name.
pub fn resolve_full_names(programs: &mut BTreeMap<u32, Program>, ids: impl IntoIterator<Item = u32>) -> u64 {
    // One BTF object at a time: Cilium's programs share one.
    let mut by_btf: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for id in ids {
        if let Some(btf_id) = programs.get_mut(&id).and_then(|p| p.btf.take()) {
            by_btf.entry(btf_id).or_default().push(id);
        }
    }
    let mut skipped = 0;
    for (btf_id, ids) in by_btf {
        // The entry function's BTF type of each program.
        let funcs: Vec<(u32, u32)> = ids
            .into_iter()
            .filter_map(|id| {
                let fd = sys::prog_fd_by_id(id).ok()?;
                Some((id, sys::prog_main_func_type_id(fd.as_fd()).ok()??))
            })
            .collect();
        match full_names(btf_id, &funcs) {
            Ok(names) => {
                for (id, full) in names {
                    if let Some(p) = programs.get_mut(&id).filter(|p| full.starts_with(&p.name)) {
                        p.name = full;
                    }
                }
            }
            Err(TooLarge) => skipped += funcs.len() as u64,
        }
    }
    skipped
}

/// The most of one program's BTF the audit reads to name it; a larger one
/// is not read, and the program keeps its kernel name. Real objects hold a
/// few hundred KiB at most; anyone who can load a program can pad its BTF
/// to the kernel's 16 MiB.
pub const MAX_PROGRAM_BTF: u32 = 4 << 20;

/// A BTF object past `MAX_PROGRAM_BTF`.
struct TooLarge;

/// The names of `funcs` (program id, BTF type id) in BTF object `btf_id`,
/// reading only what naming needs: the header and type section, then the
/// string section up to the last name wanted. Unreadable objects name none.
fn full_names(btf_id: u32, funcs: &[(u32, u32)]) -> Result<Vec<(u32, String)>, TooLarge> {
    let Ok(fd) = sys::btf_fd_by_id(btf_id) else { return Ok(Vec::new()) };
    let Ok((header, size)) = sys::btf_prefix(fd.as_fd(), 24) else { return Ok(Vec::new()) };
    if size > MAX_PROGRAM_BTF {
        return Err(TooLarge);
    }
    let Some(types_end) = btf::types_end(&header) else { return Ok(Vec::new()) };
    let Ok((types, _)) = sys::btf_prefix(fd.as_fd(), types_end.min(size as usize) as u32) else {
        return Ok(Vec::new());
    };
    let at: Vec<(u32, usize)> = funcs.iter().filter_map(|&(id, t)| Some((id, btf::name_offset(&types, t)?))).collect();
    drop(types);
    // Names are at most KSYM_NAME_LEN (512) bytes.
    let Some(last) = at.iter().map(|(_, a)| a + 512).max() else { return Ok(Vec::new()) };
    let Ok((prefix, _)) = sys::btf_prefix(fd.as_fd(), last.min(size as usize) as u32) else { return Ok(Vec::new()) };
    Ok(at.into_iter().filter_map(|(id, a)| Some((id, btf::name_at(&prefix, a)?))).collect())
}

/// The loaded programs, by id, with kernel names; and those the kernel
/// would not describe (their ids), which rules know by nothing else.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub table: BTreeMap<u32, Program>,
    pub unreadable: BTreeSet<u32>,
}

/// Every loaded program. Programs that disappear mid-walk are skipped;
/// programs the kernel will not describe are counted (`Loaded::unreadable`).
pub fn loaded_programs() -> Result<Loaded, SyscallError> {
    let mut out = Loaded::default();
    add_new_programs(&mut out)?;
    Ok(out)
}

/// Adds programs loaded since `loaded` was filled (ids only are walked;
/// info is read for new ids). Returns the ids added.
pub fn add_new_programs(loaded: &mut Loaded) -> Result<Vec<u32>, SyscallError> {
    let mut added = Vec::new();
    for id in sys::ids(Objects::Programs) {
        let id = id?;
        if loaded.table.contains_key(&id) || loaded.unreadable.contains(&id) {
            continue;
        }
        match read_program(id) {
            Read::Found(p) => {
                loaded.table.insert(id, p);
                added.push(id);
            }
            Read::Gone => {}
            Read::Refused(e) => return Err(e),
            Read::Unreadable(_) => {
                loaded.unreadable.insert(id);
            }
        }
    }
    Ok(added)
}

/// The cgroup bpf_links on the node, and how many could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    pub cgroup: Vec<CgroupLinkInfo>,
    /// Links still being made when asked, after retries: their ids are
    /// handed out before their attachment is settled, and the kernel answers
    /// EAGAIN until then (a process making links in a loop keeps some there).
    /// Their programs show in the hooks' queries anyway, without a link id.
    pub skipped: u64,
    /// Cgroup links (or links whose type could not be told) the kernel
    /// would not describe. Their programs show in the hooks' queries anyway,
    /// without a link id.
    pub unreadable: u64,
}

/// How often a link still being made is asked again, and how long apart.
const LINK_RETRIES: u32 = 3;
const LINK_RETRY_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// Every cgroup bpf_link on the node. Links that disappear mid-walk are
/// skipped; links still being made are retried, then skipped and counted.
pub fn cgroup_links() -> Result<Links, SyscallError> {
    let mut out = Links::default();
    for id in sys::ids(Objects::Links) {
        let id = id?;
        let mut tries = 0;
        let fd = loop {
            match sys::link_fd_by_id(id) {
                Ok(fd) => break Some(fd),
                Err(e) if e.errno() == Some(libc::ENOENT) => break None,
                Err(e) if e.errno() == Some(libc::EAGAIN) && tries < LINK_RETRIES => {
                    tries += 1;
                    std::thread::sleep(LINK_RETRY_WAIT);
                }
                Err(e) if e.errno() == Some(libc::EAGAIN) => {
                    out.skipped += 1;
                    break None;
                }
                Err(e) => return Err(e),
            }
        };
        let Some(fd) = fd else { continue };
        match sys::cgroup_link_info(fd.as_fd()) {
            Ok(Some(info)) => out.cgroup.push(info),
            Ok(None) => {}
            // The kernel will not describe this link: its fdinfo still says
            // what type it is. Only a cgroup link matters here.
            Err(_) => {
                if fdinfo::link_type(fd.as_fd()).is_none_or(|t| t == "cgroup") {
                    out.unreadable += 1;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::sys::fake;
    use aya_obj::generated::bpf_cmd;

    #[test]
    fn a_program_unloaded_between_its_id_and_its_fd_is_skipped() {
        let _k = fake::Kernel::new(|cmd, attr| match cmd {
            bpf_cmd::BPF_PROG_GET_NEXT_ID => {
                let next = [0, 4, 7, 12].windows(2).find(|w| w[0] == fake::start_id(attr)).map(|w| w[1]);
                fake::answer_next_id(attr, next)
            }
            // Program 7 is unloaded by the time its fd is asked for.
            bpf_cmd::BPF_PROG_GET_FD_BY_ID if fake::asked_id(attr) == 7 => fake::errno(libc::ENOENT),
            bpf_cmd::BPF_PROG_GET_FD_BY_ID => fake::new_fd(),
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD => fake::answer_prog_info(attr, 0, 18, "cil_sock4_conne"),
            other => panic!("unexpected {other:?}"),
        });
        let programs = loaded_programs().unwrap().table;
        assert_eq!(programs.keys().copied().collect::<Vec<_>>(), [4, 12]);
        assert_eq!(programs[&4].prog_type, ProgType::CgroupSockAddr);
        assert_eq!(programs[&4].name, "cil_sock4_conne", "no BTF: the kernel's name is kept");
    }

    /// Issue 36, H1: one object the kernel will not describe failed every
    /// pass. It is counted, and the others are read.
    #[test]
    fn a_program_the_kernel_will_not_describe_is_counted_and_the_rest_read() {
        let mut infos = 0;
        let _k = fake::Kernel::new(move |cmd, attr| match cmd {
            bpf_cmd::BPF_PROG_GET_NEXT_ID => {
                let next = [0, 4, 7, 12].windows(2).find(|w| w[0] == fake::start_id(attr)).map(|w| w[1]);
                fake::answer_next_id(attr, next)
            }
            bpf_cmd::BPF_PROG_GET_FD_BY_ID => fake::new_fd(),
            // Info is asked for 4, 7 and 12 in turn: 7's is refused, as a
            // path too long to format is.
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD => {
                infos += 1;
                if infos == 2 { fake::errno(libc::ENAMETOOLONG) } else { fake::answer_prog_info(attr, 0, 18, "x") }
            }
            other => panic!("unexpected {other:?}"),
        });
        let loaded = loaded_programs().unwrap();
        assert_eq!(loaded.table.keys().copied().collect::<Vec<_>>(), [4, 12]);
        assert_eq!(loaded.unreadable.iter().copied().collect::<Vec<_>>(), [7]);
    }

    #[test]
    fn a_link_the_kernel_will_not_describe_is_counted_when_it_may_be_a_cgroup_link() {
        let _k = fake::Kernel::new(|cmd, attr| match cmd {
            bpf_cmd::BPF_LINK_GET_NEXT_ID => {
                let next = [0, 5, 6].windows(2).find(|w| w[0] == fake::start_id(attr)).map(|w| w[1]);
                fake::answer_next_id(attr, next)
            }
            bpf_cmd::BPF_LINK_GET_FD_BY_ID => fake::new_fd(),
            // Neither link is described; their fdinfo (a stand-in fd's)
            // says no type, so each may be a cgroup link.
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD => fake::errno(libc::ENAMETOOLONG),
            other => panic!("unexpected {other:?}"),
        });
        let links = cgroup_links().unwrap();
        assert_eq!((links.cgroup.len(), links.unreadable, links.skipped), (0, 2, 0));
    }

    #[test]
    fn a_link_still_being_made_is_asked_again_then_skipped_and_counted() {
        use std::cell::Cell;
        use std::rc::Rc;
        let asked = Rc::new(Cell::new(0));
        let seen = asked.clone();
        let _k = fake::Kernel::new(move |cmd, attr| match cmd {
            bpf_cmd::BPF_LINK_GET_NEXT_ID => {
                let next = [0, 5, 6].windows(2).find(|w| w[0] == fake::start_id(attr)).map(|w| w[1]);
                fake::answer_next_id(attr, next)
            }
            // Link 5 is being made for good; link 6 settles on the second try.
            bpf_cmd::BPF_LINK_GET_FD_BY_ID if fake::asked_id(attr) == 5 => {
                seen.set(seen.get() + 1);
                fake::errno(libc::EAGAIN)
            }
            bpf_cmd::BPF_LINK_GET_FD_BY_ID => fake::new_fd(),
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD => Ok(0), // type 0: not a cgroup link
            other => panic!("unexpected {other:?}"),
        });
        let links = cgroup_links().unwrap();
        assert_eq!(links.skipped, 1);
        assert_eq!(asked.get(), LINK_RETRIES + 1);
    }

    #[test]
    fn any_other_error_is_the_audits() {
        let _k = fake::Kernel::new(|cmd, attr| match cmd {
            bpf_cmd::BPF_PROG_GET_NEXT_ID => fake::answer_next_id(attr, (fake::start_id(attr) == 0).then_some(4)),
            _ => fake::errno(libc::EPERM),
        });
        let e = loaded_programs().unwrap_err();
        assert_eq!(e.call, "BPF_PROG_GET_FD_BY_ID");
    }
}
