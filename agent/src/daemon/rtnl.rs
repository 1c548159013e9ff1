//! The node's network changing, as rtnetlink says it: the link and tc
//! multicast groups (`RTNLGRP_LINK`, `RTNLGRP_TC`) of PID 1's network
//! namespace, on a thread that joined it. A device made, removed or
//! renamed, an XDP program set, a legacy tc filter added or deleted: the
//! node's network is read at once (`Msg::NetworkChanged`), so that a device
//! finding reaches /metrics within seconds. tcx and netkit links make no
//! rtnetlink message: those are read every `schedule::INTERFACES`.
//!
//! Messages only wake the worker; nothing in them is believed (a pod with
//! CAP_NET_ADMIN and no user namespace can make the node's namespace
//! change as often as it likes): at most one wake-up per `QUIET`, and the
//! read itself is the schedule's to pace.

use std::path::PathBuf;
use std::time::Duration;

use netlink_sys::{Socket, protocols::NETLINK_ROUTE};

use super::worker::Msg;

/// rtnetlink's multicast groups: links, and tc (qdiscs and filters).
const RTNLGRP_LINK: u32 = 1;
const RTNLGRP_TC: u32 = 4;
/// After a wake-up, what comes within this is one change.
const QUIET: Duration = Duration::from_millis(250);

/// Watches PID 1's network namespace (`netns`, `<proc>/1/ns/net`) on a
/// thread of its own; `None` (and a log line saying why) where it cannot:
/// the periodic reads remain.
pub fn watch(netns: PathBuf, wake: crossbeam_channel::Sender<Msg>) -> Option<std::thread::JoinHandle<()>> {
    let spawned = std::thread::Builder::new().name("rtnl-watch".into()).spawn(move || {
        let socket = match subscribe(&netns) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "the node's link and tc changes are not watched: devices are read every {}s only",
                    super::schedule::INTERFACES.as_secs()
                );
                return;
            }
        };
        tracing::debug!("watching the node's links and tc filters");
        let mut buf = vec![0u8; 64 << 10];
        loop {
            // A message, or the kernel saying messages were lost (ENOBUFS):
            // either way the network changed.
            match socket.recv(&mut &mut buf[..], 0) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "the node's link and tc changes are no longer watched");
                    return;
                }
            }
            std::thread::sleep(QUIET);
            // What came meanwhile is the same change.
            while socket.recv(&mut &mut buf[..], libc::MSG_DONTWAIT).is_ok() {}
            match wake.try_send(Msg::NetworkChanged) {
                Ok(()) | Err(crossbeam_channel::TrySendError::Full(_)) => {}
                Err(crossbeam_channel::TrySendError::Disconnected(_)) => return,
            }
        }
    });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!(error = %e, "cannot start the rtnetlink watcher");
            None
        }
    }
}

/// A socket in the namespace at `netns` (this thread joins it, for good),
/// in the link and tc groups.
fn subscribe(netns: &std::path::Path) -> std::io::Result<Socket> {
    let ns = std::fs::File::open(netns)?;
    nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.add_membership(RTNLGRP_LINK)?;
    socket.add_membership(RTNLGRP_TC)?;
    Ok(socket)
}
