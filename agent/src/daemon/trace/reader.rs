//! The reader thread: drains the event programs' ring buffer, decodes each
//! record (field by field, no unsafe) and hands it on as an `Event`.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_common::cgroup_events as wire;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::time::{ClockId, clock_gettime};

use super::Tracer;
use crate::bpf::{AttachType, BpfCommand, bytes};
use crate::event::{Change, Event, Hints};

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
    let hints = u32_at(92)?;
    let nonzero = |v: u32| (v != 0).then_some(v);
    let change = match kind {
        wire::EVENT_BPF => Change::BpfCall {
            command: if cmd == wire::LINK_RELEASED { BpfCommand::LinkReleased } else { BpfCommand::from_kernel(cmd)? },
            cgroup_id: (cgroup_id != 0).then_some(cgroup_id),
            attach_type: AttachType::from_kernel(attach_type),
            prog_id: nonzero(prog_id),
            link_id: nonzero(link_id),
            flags,
            hints: Hints::from_wire(hints),
        },
        wire::EVENT_MKDIR => {
            let name = b.get(wire::EVENT_HEADER..wire::EVENT_HEADER.checked_add(name_len)?)?;
            Change::CgroupMade { cgroup_id, parent_id, name: name.to_vec() }
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
    /// Of which: calls whose return the kprobe set never saw.
    MissedReturns(u64),
}

/// Records read per wake-up before the stop flag is looked at again: a
/// flood cannot keep the reader from stopping.
const DRAIN_BATCH: usize = 1024;

/// How often the kprobe set's calls in flight are looked at for returns
/// that never came.
const SWEEP_PENDING_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

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
        let mut missed = 0;
        let mut swept = std::time::Instant::now();
        let mut dropped_here = 0;
        while !stop.load(Ordering::Relaxed) {
            let ready = {
                let mut fds = [PollFd::new(tracer.events.as_fd(), PollFlags::POLLIN)];
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
            if swept.elapsed() >= SWEEP_PENDING_EVERY {
                tracer.sweep_pending();
                swept = std::time::Instant::now();
            }
            let now_missed = tracer.missed_returns();
            if now_missed != missed {
                missed = now_missed;
                send(TraceMessage::MissedReturns(missed));
            }
            let now = tracer.lost() + dropped_here;
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
        b[92..96].copy_from_slice(&wire::HINT_CGROUP.to_ne_bytes());
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
                hints: Hints::CGROUP,
            }
        );
        let made = decode(&record(wire::EVENT_MKDIR, 0, b"kubepods.slice")).unwrap();
        assert_eq!(made.change, Change::CgroupMade { cgroup_id: 4242, parent_id: 1, name: b"kubepods.slice".to_vec() });
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
