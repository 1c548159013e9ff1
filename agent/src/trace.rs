//! Event tracing: the embedded eBPF tracepoints on bpf(2) (`agent-ebpf`),
//! loaded and read by a dedicated thread that forwards each attach-changing
//! call as an `AttachRecord`.
//!
//! Tracing is a hint that makes the daemon audit at once; the walk stays the
//! source of truth (a link dropped by closing its last fd makes no bpf()
//! call). Dropping the `Tracer` detaches and unloads the programs.

use std::fs;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aya::Ebpf;
use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::programs::TracePoint;
use aya_log::EbpfLogger;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::time::{ClockId, clock_gettime};

use crate::bpf::{AttachType, BpfCommand, bytes, one_line};
use crate::snapshot::AttachRecord;

use agent_common::bpf_calls as wire;

/// The eBPF object built by build.rs, embedded so one binary is all a node needs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf-calls"));

const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("tracefs is not available: {0}")]
    NoTracefs(String),
    #[error("loading the eBPF object failed (needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN): {0}")]
    Load(String),
    #[error("eBPF log map: {0}")]
    Log(String),
    #[error("tracepoint syscalls/{tracepoint}: {error}")]
    Attach { tracepoint: &'static str, error: String },
    #[error("eBPF map {name}: {message}")]
    Map { name: &'static str, message: String },
}

fn tracefs_ready() -> bool {
    TRACEFS.iter().any(|d| Path::new(d).join("events/syscalls").is_dir())
}

/// Makes tracefs visible to this process without changing the host: when it
/// is not mounted, the process moves to a private mount namespace (a slave
/// of the host's, so later host mounts still show) and mounts it there.
///
/// `unshare(CLONE_NEWNS)` fails with EINVAL in a multi-threaded process, so
/// this must run before any runtime or thread starts.
pub fn prepare_tracefs() -> Result<(), TraceError> {
    use nix::mount::{MsFlags, mount};
    if tracefs_ready() {
        return Ok(());
    }
    let err = |what: &str, e: nix::Error| TraceError::NoTracefs(format!("not mounted, and {what} failed: {e}"));
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(|e| err("unshare(CLONE_NEWNS)", e))?;
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_SLAVE, None::<&str>)
        .map_err(|e| err("making / a slave mount", e))?;
    mount(Some("tracefs"), TRACEFS[0], Some("tracefs"), MsFlags::empty(), None::<&str>)
        .map_err(|e| err("mount -t tracefs", e))?;
    if !tracefs_ready() {
        return Err(TraceError::NoTracefs("mounted, but has no syscalls events (CONFIG_FTRACE_SYSCALLS?)".into()));
    }
    Ok(())
}

/// The loaded and attached tracepoints and the maps they write.
pub struct Tracer {
    events: RingBuf<MapData>,
    lost: PerCpuArray<MapData, u64>,
    logger: EbpfLogger<&'static dyn log::Log>,
    /// Holds the programs; dropping it detaches them.
    _ebpf: Ebpf,
}

impl Tracer {
    /// Loads the object and attaches both tracepoints. Calls made by
    /// `own_tgid` (the agent) are not reported.
    pub fn start(own_tgid: u32) -> Result<Tracer, TraceError> {
        if !tracefs_ready() {
            return Err(TraceError::NoTracefs("no syscalls events under /sys/kernel/tracing".into()));
        }
        // The loader keeps the value for the process's life: 4 bytes, once
        // per tracer.
        let tgid: &'static u32 = Box::leak(Box::new(own_tgid));
        let mut ebpf = crate::bpf::loader::with_loader(|l| l.override_global("AGENT_TGID", tgid, false).load(OBJECT))
            .map_err(|e| TraceError::Load(one_line(&e)))?;
        // NB: the logger takes the log map; it must live as long as the
        // programs, or their log calls go nowhere.
        let logger = EbpfLogger::init(&mut ebpf).map_err(|e| TraceError::Log(one_line(&e)))?;
        for (name, tracepoint) in [("bpf_enter", "sys_enter_bpf"), ("bpf_exit", "sys_exit_bpf")] {
            let attach = |e: aya::programs::ProgramError| TraceError::Attach { tracepoint, error: one_line(&e) };
            let prog: &mut TracePoint = ebpf
                .program_mut(name)
                .ok_or_else(|| TraceError::Map {
                    name: "programs",
                    message: format!("{name} missing from the object"),
                })?
                .try_into()
                .map_err(attach)?;
            prog.load().map_err(attach)?;
            prog.attach("syscalls", tracepoint).map_err(attach)?;
        }
        let map = |name: &'static str, ebpf: &mut Ebpf| {
            ebpf.take_map(name).ok_or_else(|| TraceError::Map { name, message: "missing from the object".into() })
        };
        let events = RingBuf::try_from(map("EVENTS", &mut ebpf)?)
            .map_err(|e| TraceError::Map { name: "EVENTS", message: e.to_string() })?;
        let lost = PerCpuArray::try_from(map("LOST", &mut ebpf)?)
            .map_err(|e| TraceError::Map { name: "LOST", message: e.to_string() })?;
        Ok(Tracer { events, lost, logger, _ebpf: ebpf })
    }

    /// Events dropped in the kernel so far (ring buffer full).
    pub fn lost(&self) -> u64 {
        self.lost.get(&0, 0).map(|v| v.iter().sum()).unwrap_or(0)
    }
}

/// Decodes one ring-buffer record (no unsafe: field by field).
fn decode(b: &[u8]) -> Option<wire::BpfCallRecord> {
    let u64_at = |o| bytes::u64_at(b, o);
    let u32_at = |o| bytes::u32_at(b, o);
    let mut comm = [0u8; 16];
    comm.copy_from_slice(b.get(56..72)?);
    Some(wire::BpfCallRecord {
        ktime_ns: u64_at(0)?,
        caller_cgroup_id: u64_at(8)?,
        ret: u64_at(16)? as i64,
        pid_tgid: u64_at(24)?,
        cmd: u32_at(32)?,
        attach_type: u32_at(36)?,
        target_fd: u32_at(40)?,
        prog_fd: u32_at(44)?,
        flags: u32_at(48)?,
        _pad: 0,
        comm,
    })
}

/// The program id behind `fd` of process `tgid`, from its fdinfo.
fn prog_id_of(proc: &Path, tgid: u32, fd: u32) -> Option<u32> {
    let text = fs::read_to_string(proc.join(format!("{tgid}/fdinfo/{fd}"))).ok()?;
    text.lines().find_map(|l| l.strip_prefix("prog_id:")).and_then(|v| v.trim().parse().ok())
}

/// Turns a raw event into a record; `None` for attach types that are not
/// cgroup hooks (XDP, TCX, tracing links...).
fn record(ev: &wire::BpfCallRecord, proc: &Path) -> Option<AttachRecord> {
    let command = BpfCommand::from_kernel(ev.cmd)?;
    let attach_type = match ev.attach_type {
        wire::ATTACH_TYPE_NONE => None,
        t => Some(AttachType::from_kernel(t)?),
    };
    let tgid = (ev.pid_tgid >> 32) as u32;
    // CLOCK_MONOTONIC (bpf_ktime_get_ns) to wall-clock time.
    let mono = clock_gettime(ClockId::CLOCK_MONOTONIC).map(Duration::from).unwrap_or_default();
    let age = mono.saturating_sub(Duration::from_nanos(ev.ktime_ns));
    let when = SystemTime::now().checked_sub(age).unwrap_or_else(SystemTime::now);
    // Best effort: the caller may have closed its fds by now.
    let (target_cgroup_id, prog_id) = if attach_type.is_some() {
        let target =
            fs::metadata(proc.join(format!("{tgid}/fd/{}", ev.target_fd))).ok().filter(|m| m.is_dir()).map(|m| m.ino());
        (target, prog_id_of(proc, tgid, ev.prog_fd))
    } else {
        (None, None)
    };
    let comm_len = ev.comm.iter().position(|&c| c == 0).unwrap_or(16);
    Some(AttachRecord {
        time_unix_ms: when.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
        command,
        attach_type,
        result: ev.ret,
        pid: tgid,
        tid: ev.pid_tgid as u32,
        comm: String::from_utf8_lossy(&ev.comm[..comm_len]).into_owned(),
        caller_cgroup_id: ev.caller_cgroup_id,
        target_cgroup_id,
        prog_id,
    })
}

/// What the reader thread reports.
pub enum TraceMessage {
    Event(AttachRecord),
    /// Total events lost in the kernel so far.
    Lost(u64),
}

/// Runs the reader on its own thread until `stop` is set, then drops the
/// tracer (detaching the programs) before the thread ends.
pub fn spawn_reader(
    mut tracer: Tracer,
    proc: PathBuf,
    stop: Arc<AtomicBool>,
    send: impl Fn(TraceMessage) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("cgaudit-trace".into())
        .spawn(move || {
            let mut lost = 0;
            while !stop.load(Ordering::Relaxed) {
                let ready = {
                    let mut fds = [
                        PollFd::new(tracer.events.as_fd(), PollFlags::POLLIN),
                        PollFd::new(tracer.logger.as_fd(), PollFlags::POLLIN),
                    ];
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
                    tracer.logger.flush();
                    while let Some(item) = tracer.events.next() {
                        if let Some(r) = decode(&item).and_then(|ev| record(&ev, &proc)) {
                            send(TraceMessage::Event(r));
                        }
                    }
                }
                let now = tracer.lost();
                if now != lost {
                    lost = now;
                    send(TraceMessage::Lost(now));
                }
            }
            drop(tracer);
        })
        .expect("spawn the trace reader thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_matches_the_wire_layout() {
        assert_eq!(std::mem::size_of::<wire::BpfCallRecord>(), 72);
        let mut b = vec![0u8; 72];
        b[0..8].copy_from_slice(&7u64.to_ne_bytes());
        b[8..16].copy_from_slice(&4242u64.to_ne_bytes());
        b[16..24].copy_from_slice(&(-1i64).to_ne_bytes());
        b[24..32].copy_from_slice(&((100u64 << 32) | 101).to_ne_bytes());
        b[32..36].copy_from_slice(&wire::BPF_PROG_ATTACH.to_ne_bytes());
        b[36..40].copy_from_slice(&10u32.to_ne_bytes());
        b[56..62].copy_from_slice(b"cilium");
        let ev = decode(&b).unwrap();
        assert_eq!((ev.ktime_ns, ev.caller_cgroup_id, ev.ret, ev.cmd, ev.attach_type), (7, 4242, -1, 8, 10));
        let r = record(&ev, Path::new("/nonexistent")).unwrap();
        assert_eq!((r.command, r.pid, r.tid, r.comm.as_str()), (BpfCommand::ProgAttach, 100, 101, "cilium"));
        assert_eq!(r.attach_type.map(AttachType::name), Some("connect4"));
        assert!(!r.succeeded());
        assert!(decode(&b[..40]).is_none(), "short records are refused");
    }

    #[test]
    fn non_cgroup_attach_types_are_dropped() {
        let mut b = vec![0u8; 72];
        b[32..36].copy_from_slice(&wire::BPF_LINK_CREATE.to_ne_bytes());
        b[36..40].copy_from_slice(&37u32.to_ne_bytes()); // BPF_XDP
        assert!(record(&decode(&b).unwrap(), Path::new("/proc")).is_none());
        b[32..36].copy_from_slice(&wire::BPF_LINK_DETACH.to_ne_bytes());
        b[36..40].copy_from_slice(&wire::ATTACH_TYPE_NONE.to_ne_bytes());
        assert_eq!(record(&decode(&b).unwrap(), Path::new("/proc")).unwrap().command, BpfCommand::LinkDetach);
    }
}
