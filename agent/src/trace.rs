//! Event tracing: the embedded `cgroup-events` programs (agent-ebpf), which
//! report each successful `bpf(2)` call that attaches, detaches or replaces
//! a cgroup program, and each cgroup made or removed, loaded and read by a
//! dedicated thread that forwards each as an `Event`.
//!
//! The programs are BTF-typed raw tracepoints (`raw_syscalls` sys_enter and
//! sys_exit, `cgroup_mkdir`, `cgroup_rmdir`) attached with
//! `BPF_RAW_TRACEPOINT_OPEN`: no tracefs mount. Fds are resolved to cgroups,
//! programs and links in the kernel, never through `/proc/<pid>/fd`. Needs
//! kernel BTF, CAP_BPF and CAP_PERFMON. Events are hints that keep the
//! daemon's picture current; the full pass every `--interval` stays the
//! safety net. Dropping the `Tracer` detaches and unloads the programs.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_common::cgroup_events as wire;
use aya::maps::{Map, MapData, PerCpuArray, RingBuf};
use aya_log::EbpfLogger;
use aya_obj::generated::{bpf_attach_type, bpf_prog_type};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::time::{ClockId, clock_gettime};

use crate::bpf::btf::{BtfError, KernelBtf, Types};
use crate::bpf::object::{self, Loaded, Program, Spec};
use crate::bpf::{AttachType, BpfCommand, bytes, sys};
use crate::snapshot::{Change, Event};

/// The eBPF object built by build.rs, embedded so one binary is all a node needs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/cgroup-events"));

/// (program, the raw tracepoint's BTF typedef)
const PROGRAMS: [(&str, &str); 4] = [
    ("syscall_entered", "btf_trace_sys_enter"),
    ("syscall_exited", "btf_trace_sys_exit"),
    ("cgroup_made", "btf_trace_cgroup_mkdir"),
    ("cgroup_removed", "btf_trace_cgroup_rmdir"),
];

/// This architecture's `bpf(2)` numbers (native, 32-bit compat) and the
/// `struct pt_regs` members holding the syscall number at exit and its
/// first two arguments.
#[cfg(target_arch = "x86_64")]
const SYSCALL: (u32, u32, &str, &str, &str) = (321, 357, "orig_ax", "di", "si");
#[cfg(target_arch = "aarch64")]
const SYSCALL: (u32, u32, &str, &str, &str) = (280, 0, "syscallno", "orig_x0", "regs");

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{0}")]
    Btf(String),
    #[error("loading the event programs (kernel BTF, CAP_BPF and CAP_PERFMON): {0}")]
    Load(#[from] object::LoadError),
    #[error("attaching {program}: {error}")]
    Attach { program: &'static str, error: sys::SyscallError },
    #[error("eBPF map {name}: {message}")]
    Map { name: &'static str, message: String },
}

/// Where the programs find what they read, from the running kernel's BTF.
pub fn events_layout(types: &Types<'_>) -> Result<wire::EventsLayout, BtfError> {
    let off = |s: &str, m: &str| types.offset_of(s, m).map(|(o, _)| o);
    let (nr_bpf, nr_bpf_compat, nr, arg0, arg1) = SYSCALL;
    Ok(wire::EventsLayout {
        nr_bpf,
        nr_bpf_compat,
        regs_nr: off("pt_regs", nr)?,
        regs_arg0: off("pt_regs", arg0)?,
        regs_arg1: off("pt_regs", arg1)?,
        task_files: off("task_struct", "files")?,
        files_fdt: off("files_struct", "fdt")?,
        fdt_max_fds: off("fdtable", "max_fds")?,
        fdt_fd: off("fdtable", "fd")?,
        file_inode: off("file", "f_inode")?,
        file_private: off("file", "private_data")?,
        inode_ino: off("inode", "i_ino")?,
        inode_sb: off("inode", "i_sb")?,
        sb_magic: off("super_block", "s_magic")?,
        prog_aux: off("bpf_prog", "aux")?,
        aux_id: off("bpf_prog_aux", "id")?,
        link_id: off("bpf_link", "id")?,
        link_type: off("bpf_link", "type")?,
        cgroup_link_link: off("bpf_cgroup_link", "link")?,
        cgroup_link_cgroup: off("bpf_cgroup_link", "cgroup")?,
        cgroup_kn: off("cgroup", "kn")?,
        kn_id: off("kernfs_node", "id")?,
        kn_parent: off("kernfs_node", "__parent|parent")?,
        kn_name: off("kernfs_node", "name")?,
    })
}

/// The named types the layout and the programs' attach targets look up,
/// indexed in one pass over the kernel's BTF.
const KERNEL_NAMES: &[&str] = &[
    "btf_trace_sys_enter",
    "btf_trace_sys_exit",
    "btf_trace_cgroup_mkdir",
    "btf_trace_cgroup_rmdir",
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

/// The loaded and attached programs and the maps they write.
pub struct Tracer {
    events: RingBuf<MapData>,
    status: PerCpuArray<MapData, u64>,
    logger: Option<EbpfLogger<&'static dyn log::Log>>,
    /// One attachment per program; dropping them detaches.
    _links: Vec<OwnedFd>,
    _loaded: Loaded,
}

fn map_err(name: &'static str) -> impl Fn(aya::maps::MapError) -> TraceError {
    move |e| TraceError::Map { name, message: crate::bpf::one_line(&e) }
}

impl Tracer {
    /// Loads the programs and attaches each.
    pub fn start() -> Result<Tracer, TraceError> {
        let data = KernelBtf::read().map_err(|e| TraceError::Btf(e.to_string()))?;
        let types = Types::parse_indexed(&data, KERNEL_NAMES).map_err(|e| TraceError::Btf(e.to_string()))?;
        let layout = events_layout(&types).map_err(|e| TraceError::Btf(e.to_string()))?;
        let mut programs = Vec::new();
        for (name, target) in PROGRAMS {
            programs.push(Program {
                name,
                prog_type: bpf_prog_type::BPF_PROG_TYPE_TRACING as u32,
                expected_attach_type: bpf_attach_type::BPF_TRACE_RAW_TP as u32,
                attach_btf_id: types.typedef_id(target).map_err(|e| TraceError::Btf(e.to_string()))?,
            });
        }
        drop(types);
        drop(data);
        let tgid = std::process::id();
        let mut loaded = object::load(
            OBJECT,
            &Spec {
                programs: &programs,
                globals: &[("LAYOUT", sys::pod_bytes(&layout)), ("AGENT_TGID", &tgid.to_ne_bytes())],
                max_entries: &[],
            },
        )?;
        let mut links = Vec::new();
        for (name, _) in PROGRAMS {
            let prog = loaded.prog(name).ok_or_else(|| TraceError::Map { name, message: "not loaded".into() })?;
            links.push(sys::tracing_attach(prog).map_err(|error| TraceError::Attach { program: name, error })?);
        }
        // The programs' aya-log records (kernel reads that failed), by
        // program id; without the logger the events still flow.
        let logger = loaded
            .prog(PROGRAMS[0].0)
            .and_then(|fd| sys::prog_info(fd).ok())
            .and_then(|info| EbpfLogger::init_from_id(info.id).ok());
        let take = |loaded: &mut Loaded, name: &'static str| {
            loaded.take_map(name).ok_or_else(|| TraceError::Map { name, message: "missing from the object".into() })
        };
        let events = RingBuf::try_from(Map::RingBuf(take(&mut loaded, "EVENTS")?)).map_err(map_err("EVENTS"))?;
        let status =
            PerCpuArray::try_from(Map::PerCpuArray(take(&mut loaded, "STATUS")?)).map_err(map_err("STATUS"))?;
        Ok(Tracer { events, status, logger, _links: links, _loaded: loaded })
    }

    fn status(&self, slot: u32) -> u64 {
        self.status.get(&slot, 0).map(|v| v.iter().sum()).unwrap_or(0)
    }

    /// Events dropped in the kernel so far (ring buffer full, or a CPU over
    /// its budget).
    pub fn lost(&self) -> u64 {
        self.status(wire::STATUS_LOST)
    }

    /// Kernel reads that failed inside the programs so far.
    pub fn read_failures(&self) -> u64 {
        self.status(wire::STATUS_READ_FAILED)
    }
}

/// Decodes one ring-buffer record (field by field, no unsafe).
fn decode(b: &[u8]) -> Option<Event> {
    let u32_at = |o| bytes::u32_at(b, o);
    let u64_at = |o| bytes::u64_at(b, o);
    let (kind, cmd, attach_type, flags) = (u32_at(0)?, u32_at(4)?, u32_at(8)?, u32_at(12)?);
    let (cgroup_id, parent_id, ktime_ns, pid_tgid, caller) =
        (u64_at(16)?, u64_at(24)?, u64_at(32)?, u64_at(40)?, u64_at(48)?);
    let (prog_id, link_id) = (u32_at(64)?, u32_at(68)?);
    let comm = b.get(72..88)?;
    let name_len = u32_at(88)? as usize;
    let nonzero = |v: u32| (v != 0).then_some(v);
    let change = match kind {
        wire::EVENT_BPF => Change::BpfCall {
            command: BpfCommand::from_kernel(cmd)?,
            cgroup_id: (cgroup_id != 0).then_some(cgroup_id),
            attach_type: AttachType::from_kernel(attach_type),
            prog_id: nonzero(prog_id),
            link_id: nonzero(link_id),
            flags,
        },
        wire::EVENT_MKDIR => {
            let name = b.get(wire::EVENT_HEADER..wire::EVENT_HEADER.checked_add(name_len)?)?;
            Change::CgroupMade { cgroup_id, parent_id, name: String::from_utf8_lossy(name).into_owned() }
        }
        wire::EVENT_RMDIR => Change::CgroupRemoved { cgroup_id },
        _ => return None,
    };
    // CLOCK_MONOTONIC (bpf_ktime_get_ns) to wall-clock time.
    let mono = clock_gettime(ClockId::CLOCK_MONOTONIC).map(Duration::from).unwrap_or_default();
    let age = mono.saturating_sub(Duration::from_nanos(ktime_ns));
    let when = SystemTime::now().checked_sub(age).unwrap_or_else(SystemTime::now);
    let comm_len = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
    Some(Event {
        seq: 0,
        time_unix_ms: when.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
        change,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        comm: String::from_utf8_lossy(&comm[..comm_len]).into_owned(),
        caller_cgroup_id: caller,
    })
}

/// What the reader thread reports.
pub enum TraceMessage {
    Event(Event),
    /// Total events lost in the kernel so far.
    Lost(u64),
}

/// Records read per wake-up before the stop flag is looked at again: a
/// flood cannot keep the reader from stopping.
const DRAIN_BATCH: usize = 1024;

/// Runs the reader on its own thread until `stop` is set, then drops the
/// tracer (detaching the programs) before the thread ends. `send` returns
/// false when the receiver has no room: the event is counted as lost.
pub fn spawn_reader(
    mut tracer: Tracer,
    stop: Arc<AtomicBool>,
    send: impl Fn(TraceMessage) -> bool + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("cgaudit-trace".into()).spawn(move || {
        let mut lost = 0;
        let mut dropped_here = 0;
        while !stop.load(Ordering::Relaxed) {
            let ready = {
                let mut fds = vec![PollFd::new(tracer.events.as_fd(), PollFlags::POLLIN)];
                if let Some(l) = &tracer.logger {
                    fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
                }
                match poll(&mut fds, PollTimeout::from(100u16)) {
                    Ok(n) => n > 0,
                    Err(nix::Error::EINTR) => false,
                    Err(e) => {
                        tracing::error!(error = %e, "poll on the event ring buffer failed; event tracing stops");
                        break;
                    }
                }
            };
            if ready {
                if let Some(l) = &mut tracer.logger {
                    l.flush();
                }
                let mut n = 0;
                while n < DRAIN_BATCH {
                    let Some(item) = tracer.events.next() else { break };
                    n += 1;
                    if let Some(e) = decode(&item)
                        && !send(TraceMessage::Event(e))
                    {
                        dropped_here += 1;
                    }
                }
            }
            // An event the kernel could not read whole is as good as lost.
            let now = tracer.lost() + tracer.read_failures() + dropped_here;
            if now != lost {
                lost = now;
                send(TraceMessage::Lost(now));
            }
        }
        drop(tracer);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, cmd: u32, name: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; wire::EVENT_HEADER + name.len()];
        b[0..4].copy_from_slice(&kind.to_ne_bytes());
        b[4..8].copy_from_slice(&cmd.to_ne_bytes());
        b[8..12].copy_from_slice(&10u32.to_ne_bytes()); // connect4
        b[12..16].copy_from_slice(&2u32.to_ne_bytes()); // BPF_F_ALLOW_MULTI
        b[16..24].copy_from_slice(&4242u64.to_ne_bytes());
        b[24..32].copy_from_slice(&1u64.to_ne_bytes());
        b[40..48].copy_from_slice(&((100u64 << 32) | 101).to_ne_bytes());
        b[48..56].copy_from_slice(&77u64.to_ne_bytes());
        b[64..68].copy_from_slice(&9u32.to_ne_bytes());
        b[72..78].copy_from_slice(b"cilium");
        b[88..92].copy_from_slice(&(name.len() as u32).to_ne_bytes());
        b[wire::EVENT_HEADER..].copy_from_slice(name);
        b
    }

    #[test]
    fn records_decode_as_the_programs_write_them() {
        use std::mem::offset_of;
        assert_eq!(offset_of!(wire::CgroupEvent, name), wire::EVENT_HEADER);
        assert_eq!(offset_of!(wire::CgroupEvent, cgroup_id), 16);
        assert_eq!(offset_of!(wire::CgroupEvent, ret), 56);
        assert_eq!(offset_of!(wire::CgroupEvent, prog_id), 64);
        assert_eq!(offset_of!(wire::CgroupEvent, comm), 72);
        assert_eq!(offset_of!(wire::CgroupEvent, name_len), 88);
        let e = decode(&record(wire::EVENT_BPF, wire::BPF_PROG_ATTACH, b"")).unwrap();
        assert_eq!((e.pid, e.tid, e.comm.as_str(), e.caller_cgroup_id), (100, 101, "cilium", 77));
        assert_eq!(
            e.change,
            Change::BpfCall {
                command: BpfCommand::ProgAttach,
                cgroup_id: Some(4242),
                attach_type: AttachType::from_name("connect4"),
                prog_id: Some(9),
                link_id: None,
                flags: 2,
            }
        );
        let made = decode(&record(wire::EVENT_MKDIR, 0, b"kubepods.slice")).unwrap();
        assert_eq!(made.change, Change::CgroupMade { cgroup_id: 4242, parent_id: 1, name: "kubepods.slice".into() });
    }

    #[test]
    fn short_and_unknown_records_are_refused() {
        let b = record(wire::EVENT_MKDIR, 0, b"abc");
        assert!(decode(&b[..wire::EVENT_HEADER + 2]).is_none(), "a name past the record's end");
        assert!(decode(&b[..40]).is_none());
        assert!(decode(&record(99, 0, b"")).is_none());
        assert!(decode(&record(wire::EVENT_BPF, 0, b"")).is_none(), "not a command that changes attachments");
    }
}
