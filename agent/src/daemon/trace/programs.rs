//! What each event source loads from the embedded `cgroup-events` object
//! (agent-ebpf), where each program attaches, and the kernel layout they
//! read with, taken from the running kernel's BTF.

use std::os::fd::OwnedFd;

use agent_common::cgroup_events as wire;
use aya::maps::{Map, MapData, PerCpuArray, RingBuf};
use aya::programs::{KProbe, ProbeKind};
use aya_obj::generated::{bpf_attach_type, bpf_prog_type};

use super::Source;
use crate::bpf::btf::{BtfError, KernelBtf, Types};
use crate::bpf::object::{self, Loaded, Program, Spec};
use crate::bpf::sys;

/// The eBPF object built by build.rs, embedded so one binary is all a node needs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/cgroup-events"));

/// The kernel functions that change cgroup attachments, and how many
/// arguments the programs expect each to take (the same from 5.10 to 6.18;
/// a kernel that differs is refused, never read at the wrong slot). Static
/// helpers with one caller (`bpf_prog_attach`, `link_create`,
/// `__cgroup_bpf_replace`) are inlined on common builds and are not used.
const PROG_ATTACH: (&str, u32) = ("cgroup_bpf_prog_attach", 3);
const PROG_DETACH: (&str, u32) = ("cgroup_bpf_prog_detach", 2);
const LINK_ATTACH: (&str, u32) = ("cgroup_bpf_link_attach", 2);
const LINK_REPLACE: (&str, u32) = ("cgroup_bpf_replace", 3);
/// Reached through the cgroup link's ops, so never inlined away; both,
/// because some builds inline the release into the detach.
const LINK_RELEASE: (&str, u32) = ("bpf_cgroup_link_release", 1);
const LINK_DETACH: (&str, u32) = ("bpf_cgroup_link_detach", 1);

/// Where one program attaches.
enum Target {
    Fexit((&'static str, u32)),
    Fentry((&'static str, u32)),
    Kprobe((&'static str, u32)),
    /// One kretprobe program on several functions.
    Kretprobe(&'static [(&'static str, u32)]),
    /// A BTF raw tracepoint, by its `btf_trace_<event>` typedef.
    RawTp(&'static str),
}

/// The kernel functions that make and remove a cgroup directory: kernfs
/// calls them through its ops, so they are never inlined away. Not the
/// tracepoints of the same names, which make the kernel format every such
/// cgroup's whole path under cgroup_mutex for everyone (issue 36, H3).
const CGROUP_MKDIR: (&str, u32) = ("cgroup_mkdir", 3);
const CGROUP_RMDIR: (&str, u32) = ("cgroup_rmdir", 1);

const FEXIT: [(&str, Target); 8] = [
    ("prog_attach_exit", Target::Fexit(PROG_ATTACH)),
    ("prog_detach_exit", Target::Fexit(PROG_DETACH)),
    ("link_attach_exit", Target::Fexit(LINK_ATTACH)),
    ("link_replace_exit", Target::Fexit(LINK_REPLACE)),
    ("link_release_entry", Target::Fentry(LINK_RELEASE)),
    ("link_detach_entry", Target::Fentry(LINK_DETACH)),
    ("cgroup_mkdir_exit", Target::Fexit(CGROUP_MKDIR)),
    ("cgroup_rmdir_exit", Target::Fexit(CGROUP_RMDIR)),
];

const KPROBE: [(&str, Target); 9] = [
    ("prog_attach_entry", Target::Kprobe(PROG_ATTACH)),
    ("prog_detach_entry", Target::Kprobe(PROG_DETACH)),
    ("link_attach_entry", Target::Kprobe(LINK_ATTACH)),
    ("link_replace_entry", Target::Kprobe(LINK_REPLACE)),
    (
        "attach_return",
        Target::Kretprobe(&[PROG_ATTACH, PROG_DETACH, LINK_ATTACH, LINK_REPLACE, CGROUP_MKDIR, CGROUP_RMDIR]),
    ),
    ("link_release_probe", Target::Kprobe(LINK_RELEASE)),
    ("link_detach_probe", Target::Kprobe(LINK_DETACH)),
    ("cgroup_mkdir_entry", Target::Kprobe(CGROUP_MKDIR)),
    ("cgroup_rmdir_entry", Target::Kprobe(CGROUP_RMDIR)),
];

const SYSCALLS: [(&str, Target); 1] = [("syscall_exited", Target::RawTp("btf_trace_sys_exit"))];

/// The programs of `source`. `reading` loads none: it learns of the tree
/// and the attachments from the sweep.
fn programs(source: Source) -> impl Iterator<Item = &'static (&'static str, Target)> {
    let own: &'static [(&str, Target)] = match source {
        Source::Fexit => &FEXIT,
        Source::Kprobe => &KPROBE,
        Source::Syscalls => &SYSCALLS,
        Source::Reading | Source::None | Source::Auto => &[],
    };
    own.iter()
}

impl Target {
    /// The functions whose arity the program relies on.
    fn functions(&self) -> &[(&'static str, u32)] {
        match self {
            Target::Fexit(f) | Target::Fentry(f) | Target::Kprobe(f) => std::slice::from_ref(f),
            Target::Kretprobe(fs) => fs,
            Target::RawTp(_) => &[],
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{0}")]
    Btf(String),
    #[error("{function} takes {has} arguments in this kernel, not the {expected} the program reads")]
    Arity { function: &'static str, has: u32, expected: u32 },
    #[error("{0}")]
    Load(#[from] object::LoadError),
    #[error("attaching {program} to {target}: {error}")]
    Attach { program: &'static str, target: String, error: String },
    #[error("eBPF map {name}: {message}")]
    Map { name: &'static str, message: String },
    #[error(
        "{0} decodes x86_64's syscall ABI only (syscall numbers, pt_regs members, the ia32 table); this agent \
         runs on {arch}, where it is refused rather than read with another architecture's offsets: use fexit or \
         kprobe (--events auto)",
        arch = std::env::consts::ARCH
    )]
    Architecture(&'static str),
}

fn btf(e: impl std::fmt::Display) -> TraceError {
    TraceError::Btf(e.to_string())
}

/// `struct pt_regs` members of x86_64's syscall number and the first two
/// arguments of a 64-bit and of an ia32 syscall, and `bpf(2)`'s numbers in
/// each table.
#[cfg(target_arch = "x86_64")]
const SYSCALL_ABI: Option<(u32, u32, [&str; 5])> = Some((321, 357, ["orig_ax", "di", "si", "bx", "cx"]));
#[cfg(not(target_arch = "x86_64"))]
const SYSCALL_ABI: Option<(u32, u32, [&str; 5])> = None;

/// Where the programs find what they read, from the running kernel's BTF:
/// the tree's fields for every source, the call's for the sources that
/// see calls, the syscall ABI's for `syscalls`.
pub fn events_layout(types: &Types<'_>, source: Source) -> Result<wire::EventsLayout, TraceError> {
    let off = |s: &str, m: &str| types.offset_of(s, m).map(|(o, _)| o).map_err(btf);
    let mut l =
        wire::EventsLayout { cgroup_kn: off("cgroup", "kn")?, kn_id: off("kernfs_node", "id")?, ..Default::default() };
    if !source.traces_calls() {
        return Ok(l);
    }
    l.task_files = off("task_struct", "files")?;
    l.files_fdt = off("files_struct", "fdt")?;
    l.fdt_max_fds = off("fdtable", "max_fds")?;
    l.fdt_fd = off("fdtable", "fd")?;
    l.file_inode = off("file", "f_inode")?;
    l.file_private = off("file", "private_data")?;
    l.inode_ino = off("inode", "i_ino")?;
    l.inode_sb = off("inode", "i_sb")?;
    l.sb_magic = off("super_block", "s_magic")?;
    l.prog_aux = off("bpf_prog", "aux")?;
    l.aux_id = off("bpf_prog_aux", "id")?;
    l.link_id = off("bpf_link", "id")?;
    l.link_type = off("bpf_link", "type")?;
    l.link_prog = off("bpf_link", "prog")?;
    l.cgroup_link_link = off("bpf_cgroup_link", "link")?;
    l.cgroup_link_cgroup = off("bpf_cgroup_link", "cgroup")?;
    // The attach type moved from the cgroup link into every bpf_link (6.17).
    l.cgroup_link_type = off("bpf_cgroup_link", "type").or_else(|_| off("bpf_cgroup_link", "link.attach_type"))?;
    if source == Source::Syscalls {
        let (nr, nr_ia32, [regs_nr, arg0, arg1, ia32_arg0, ia32_arg1]) =
            SYSCALL_ABI.ok_or(TraceError::Architecture("syscall tracing"))?;
        l.nr_bpf = nr;
        l.nr_bpf_ia32 = nr_ia32;
        l.regs_nr = off("pt_regs", regs_nr)?;
        l.regs_arg0 = off("pt_regs", arg0)?;
        l.regs_arg1 = off("pt_regs", arg1)?;
        l.regs_ia32_arg0 = off("pt_regs", ia32_arg0)?;
        l.regs_ia32_arg1 = off("pt_regs", ia32_arg1)?;
        l.task_status = off("task_struct", "thread_info.status")?;
    }
    Ok(l)
}

/// The named types the layout and the programs' targets look up, indexed
/// in one pass over the kernel's BTF.
const KERNEL_NAMES: &[&str] = &[
    "btf_trace_sys_exit",
    "cgroup_mkdir",
    "cgroup_rmdir",
    "cgroup_bpf_prog_attach",
    "cgroup_bpf_prog_detach",
    "cgroup_bpf_link_attach",
    "cgroup_bpf_replace",
    "bpf_cgroup_link_release",
    "bpf_cgroup_link_detach",
    "pt_regs",
    "task_struct",
    "files_struct",
    "fdtable",
    "file",
    "inode",
    "super_block",
    "bpf_prog",
    "bpf_prog_aux",
    "bpf_link",
    "bpf_cgroup_link",
    "cgroup",
    "kernfs_node",
];

/// Calls in flight a kprobe set keeps between entry and return (one per
/// thread inside these functions at once).
const PENDING_CALLS: u32 = 1024;

/// A call noted at entry older than this has lost its return.
const STALE_AFTER_NS: u64 = 10_000_000_000;

/// PENDING's values, as bytes: only the time they were noted is read.
type Noted = [u8; std::mem::size_of::<wire::CgroupEvent>()];

/// The loaded and attached programs and the maps they write.
pub struct Tracer {
    pub(super) events: RingBuf<MapData>,
    status: PerCpuArray<MapData, u64>,
    /// The kprobe set's calls in flight.
    pending: Option<aya::maps::HashMap<MapData, u64, Noted>>,
    /// Noted calls found stale by `sweep_pending` and removed.
    stale: u64,
    /// One attachment per BTF-attached program; dropping them detaches.
    _links: Vec<OwnedFd>,
    /// kprobes keep their perf links; dropping them detaches.
    _kprobes: Vec<KProbe>,
    _loaded: Loaded,
    /// What the start-up log should say about how the programs were set up.
    pub notes: Vec<String>,
}

/// The kernel's symbol table (empty when unreadable: then nothing is taken
/// from it).
fn kallsyms() -> String {
    std::fs::read_to_string("/proc/kallsyms").unwrap_or_default()
}

/// Whether `kallsyms` lists the text symbol `function` itself (not only a
/// compiler's clone of it, `function.part.0`).
fn has_symbol(kallsyms: &str, function: &str) -> bool {
    kallsyms.lines().any(|l| {
        let mut f = l.split_whitespace();
        let (_, kind, name) = (f.next(), f.next(), f.next());
        matches!(kind, Some("t" | "T")) && name == Some(function)
    })
}

fn map_err(name: &'static str) -> impl Fn(aya::maps::MapError) -> TraceError {
    move |e| TraceError::Map { name, message: crate::bpf::one_line(&e) }
}

/// How a program of `target` is loaded: (type, expected attach type, BTF id).
fn load_as(types: &Types<'_>, target: &Target) -> Result<(u32, u32, u32), TraceError> {
    use bpf_attach_type::*;
    let tracing = bpf_prog_type::BPF_PROG_TYPE_TRACING as u32;
    Ok(match target {
        Target::Fexit((f, _)) => (tracing, BPF_TRACE_FEXIT as u32, types.func_id(f).map_err(btf)?),
        Target::Fentry((f, _)) => (tracing, BPF_TRACE_FENTRY as u32, types.func_id(f).map_err(btf)?),
        Target::RawTp(t) => (tracing, BPF_TRACE_RAW_TP as u32, types.typedef_id(t).map_err(btf)?),
        Target::Kprobe(_) | Target::Kretprobe(_) => (bpf_prog_type::BPF_PROG_TYPE_KPROBE as u32, 0, 0),
    })
}

impl Tracer {
    /// Loads the programs of `source` and attaches each; any refusal ends
    /// the attempt (what was attached is dropped again).
    pub fn start(source: Source) -> Result<Tracer, TraceError> {
        let data = KernelBtf::read().map_err(btf)?;
        let types = Types::parse_indexed(&data, KERNEL_NAMES).map_err(btf)?;
        let layout = events_layout(&types, source)?;
        let mut specs = Vec::new();
        let mut notes = Vec::new();
        let mut symbols: Option<String> = None;
        for (name, target) in programs(source) {
            for &(function, expected) in target.functions() {
                let has = match types.func_arity(function) {
                    Ok(has) => has,
                    // A kprobe needs only the symbol. Some builds' BTF
                    // leaves out a function the kernel has (Debian's arm64
                    // 5.10 lacks cgroup_bpf_replace): the kernel's symbol
                    // table says it is there, and its arguments are read
                    // as every kernel since it came (5.7) declares them.
                    Err(BtfError::Missing(_))
                        if matches!(target, Target::Kprobe(_) | Target::Kretprobe(_))
                            && has_symbol(symbols.get_or_insert_with(kallsyms), function) =>
                    {
                        let note = format!(
                            "{function} is missing from this kernel's BTF but in /proc/kallsyms: probed, its \
                             arguments read as declared since it came"
                        );
                        if !notes.contains(&note) {
                            notes.push(note);
                        }
                        expected
                    }
                    Err(BtfError::Missing(_)) => {
                        return Err(TraceError::Btf(format!("this kernel's BTF has no function {function}")));
                    }
                    Err(e) => return Err(btf(e)),
                };
                if has != expected {
                    return Err(TraceError::Arity { function, has, expected });
                }
            }
            let (prog_type, expected_attach_type, attach_btf_id) = load_as(&types, target)?;
            specs.push(Program { name, prog_type, expected_attach_type, attach_btf_id });
        }
        drop(types);
        drop(data);
        let tgid = std::process::id();
        let pending = if source == Source::Kprobe { PENDING_CALLS } else { 1 };
        let mut loaded = object::load(
            OBJECT,
            &Spec {
                programs: &specs,
                globals: &[("LAYOUT", sys::pod_bytes(&layout)), ("AGENT_TGID", &tgid.to_ne_bytes())],
                max_entries: &[("PENDING", pending)],
            },
        )?;
        let mut links = Vec::new();
        let mut kprobes = Vec::new();
        for (name, target) in programs(source) {
            let prog = loaded.prog(name).ok_or_else(|| TraceError::Map { name, message: "not loaded".into() })?;
            let attach_error =
                |target: &str, error: String| TraceError::Attach { program: name, target: target.into(), error };
            match target {
                Target::Fexit((f, _)) | Target::Fentry((f, _)) => {
                    links.push(sys::tracing_attach(prog).map_err(|e| attach_error(f, e.to_string()))?)
                }
                Target::RawTp(t) => links.push(sys::tracing_attach(prog).map_err(|e| attach_error(t, e.to_string()))?),
                Target::Kprobe((f, _)) => kprobes.push(kprobe(prog, name, ProbeKind::Entry, &[f])?),
                Target::Kretprobe(fs) => {
                    let fs: Vec<&str> = fs.iter().map(|(f, _)| *f).collect();
                    kprobes.push(kprobe(prog, name, ProbeKind::Return, &fs)?)
                }
            }
        }
        let take = |loaded: &mut Loaded, name: &'static str| {
            loaded.take_map(name).ok_or_else(|| TraceError::Map { name, message: "missing from the object".into() })
        };
        let events = RingBuf::try_from(Map::RingBuf(take(&mut loaded, "EVENTS")?)).map_err(map_err("EVENTS"))?;
        let status =
            PerCpuArray::try_from(Map::PerCpuArray(take(&mut loaded, "STATUS")?)).map_err(map_err("STATUS"))?;
        let pending = match source {
            Source::Kprobe => Some(
                aya::maps::HashMap::try_from(Map::HashMap(take(&mut loaded, "PENDING")?))
                    .map_err(map_err("PENDING"))?,
            ),
            _ => None,
        };
        Ok(Tracer { events, status, pending, stale: 0, _links: links, _kprobes: kprobes, _loaded: loaded, notes })
    }

    fn status(&self, slot: u32) -> u64 {
        self.status.get(&slot, 0).map(|v| v.iter().sum()).unwrap_or(0)
    }

    /// Events dropped in the kernel so far (ring buffer full, a CPU over
    /// its budget), and kernel reads that failed inside the programs: an
    /// event the kernel could not read whole is as good as lost.
    pub fn lost(&self) -> u64 {
        self.status(wire::STATUS_LOST) + self.status(wire::STATUS_READ_FAILED) + self.missed_returns()
    }

    /// kprobe set: calls whose return the kretprobe never saw (its
    /// instances ran out), so their events were lost; the programs count
    /// those the same thread calls again after, `sweep_pending` the rest.
    pub fn missed_returns(&self) -> u64 {
        self.status(wire::STATUS_RETURN_MISSED) + self.stale
    }

    /// Removes the calls noted more than 10 s ago (none of these functions
    /// runs that long: their return was missed) and counts them.
    pub fn sweep_pending(&mut self) {
        let Some(pending) = self.pending.as_mut() else { return };
        let Ok(now) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) else { return };
        let now = now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64;
        let at = std::mem::offset_of!(wire::CgroupEvent, ktime_ns);
        let stale: Vec<u64> = pending
            .iter()
            .filter_map(Result::ok)
            .filter(|(_, v)| {
                let noted = v.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes).unwrap_or(now);
                now.saturating_sub(noted) > STALE_AFTER_NS
            })
            .map(|(k, _)| k)
            .collect();
        for k in stale {
            // Gone meanwhile: its return came after all.
            if pending.remove(&k).is_ok() {
                self.stale += 1;
            }
        }
    }
}

/// Attaches the loaded kprobe program `prog` to each of `functions`
/// (aya's perf-event attach: the kprobe PMU, else tracefs).
fn kprobe(
    prog: std::os::fd::BorrowedFd<'_>,
    name: &'static str,
    kind: ProbeKind,
    functions: &[&str],
) -> Result<KProbe, TraceError> {
    let attach_error = |target: &str, error: String| TraceError::Attach { program: name, target: target.into(), error };
    let id = sys::prog_info(prog).map_err(|e| attach_error(functions[0], e.to_string()))?.id;
    // aya wraps a loaded program only from its ProgramInfo, which it makes
    // only while listing programs.
    let info = aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .find(|p| p.id() == id)
        .ok_or_else(|| attach_error(functions[0], format!("program {id} is not listed")))?;
    let mut kp =
        sys::kprobe_of_loaded(info, name, kind).map_err(|e| attach_error(functions[0], crate::bpf::one_line(&e)))?;
    for f in functions {
        kp.attach(f, 0).map_err(|e| attach_error(f, crate::bpf::one_line(&e)))?;
    }
    Ok(kp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36, H3: no source enables a tracepoint on cgroup mkdir or
    /// rmdir (the kernel then formats every such cgroup's path under
    /// cgroup_mutex, for everyone); fexit and kprobe learn of the tree from
    /// the functions, the others from the sweep.
    #[test]
    fn each_source_loads_only_its_own_programs_and_no_cgroup_tracepoint() {
        let names = |s| programs(s).map(|(n, _)| *n).collect::<Vec<_>>();
        assert!(names(Source::Reading).is_empty(), "the sweep reads the tree");
        for s in [Source::Fexit, Source::Kprobe] {
            assert!(names(s).iter().any(|n| n.starts_with("cgroup_mkdir")), "{s:?}");
            assert!(names(s).iter().any(|n| n.starts_with("cgroup_rmdir")), "{s:?}");
        }
        assert!(!names(Source::Fexit).contains(&"syscall_exited"), "no per-syscall program unless asked for");
        assert!(!names(Source::Kprobe).contains(&"syscall_exited"));
        assert_eq!(names(Source::Syscalls), ["syscall_exited"]);
        let raw_tps: Vec<&str> = [Source::Fexit, Source::Kprobe, Source::Syscalls, Source::Reading]
            .into_iter()
            .flat_map(programs)
            .filter_map(|(_, t)| match t {
                Target::RawTp(tp) => Some(*tp),
                _ => None,
            })
            .collect();
        assert_eq!(raw_tps, ["btf_trace_sys_exit"]);
    }

    #[test]
    fn a_symbol_counts_only_under_its_own_name() {
        // Debian's arm64 5.10, as its /proc/kallsyms lists them.
        let k = "ffffc6c3e0a3fe30 t cgroup_bpf_replace\nffffc6c3e0a41c80 t bpf_cgroup_link_release.part.0\n\
                 ffffc6c3e0a41d34 t bpf_cgroup_link_release\nffff000000000000 d cgroup_bpf_data\n";
        assert!(has_symbol(k, "cgroup_bpf_replace"));
        assert!(has_symbol(k, "bpf_cgroup_link_release"));
        assert!(!has_symbol(k, "bpf_cgroup_link_detach"), "a prefix of another name is not it");
        assert!(!has_symbol(k, "cgroup_bpf_data"), "data is no function");
        assert!(!has_symbol("", "cgroup_bpf_replace"));
    }
}
