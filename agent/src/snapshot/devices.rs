//! What a scan saw of the node's own devices (`scan::net::devices` reads
//! it; `findings::devices` judges it): every device of the node's network
//! namespace but the pods' host ends (the pods' section has those), and the
//! programs on each in the kernel's order: tcx and netkit in their
//! `BPF_PROG_QUERY` order, legacy tc by priority, XDP.

use serde::Serialize;

use super::net::{HookProof, IfHook, Via};
use crate::owner::Owner;

/// The node's devices, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostDevices {
    /// Why they could not be read at all.
    pub error: Option<String>,
    /// The daemon's: the latest read failed (why), and this is the last
    /// good one, kept for `net::KEPT_FOR`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_after: Option<String>,
    /// Devices of the node's namespace not read: past `DEVICES_MAX`, or
    /// left out of a dump that could not be decoded.
    pub not_read: u64,
    /// Devices with nothing on them (no XDP program, no tcx or netkit
    /// program or change, no qdisc legacy filters hang on) past the
    /// `DEVICES_MAX` listed: counted, and nothing to judge on them.
    pub idle_not_listed: u64,
    pub devices: Vec<Device>,
}

/// The most of the node's devices read (a pod with CAP_NET_ADMIN and no
/// user namespace can make thousands there).
pub const DEVICES_MAX: usize = 1024;

/// One device of the node's network namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Device {
    pub ifindex: u32,
    pub name: String,
    /// Its driver (`veth`, `vxlan`, `bond`, ...), empty for a physical NIC.
    pub driver: String,
    /// The device it is enslaved to (a bridge, a bond), by index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master: Option<u32>,
    /// Each hook's programs, in the order they run.
    pub programs: Vec<DeviceProgram>,
    /// The tcx revision of each hook read (it moves with every attach and
    /// detach: a hook re-linked again and again shows here).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<HookRevision>,
    /// Hooks that could not be read, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HookRevision {
    pub hook: IfHook,
    pub revision: u64,
}

/// A program on one of a device's hooks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceProgram {
    pub hook: IfHook,
    /// Its place on the hook, from 0: what runs first.
    pub position: u32,
    pub prog_id: u32,
    /// Its full name, once the scan has the node's programs.
    pub prog_name: String,
    #[serde(flatten)]
    pub via: Via,
    /// XDP only: `native`, `generic` or `offload`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<XdpMode>,
    /// The maps it uses, by id: what ties it to an owner's pinned maps.
    #[serde(skip)]
    pub map_ids: Vec<u32>,
    /// Whose it is, and what proves it (the report fills these in).
    pub owner: Option<Owner>,
    pub proof: Option<HookProof>,
    /// How many times it ran, when the kernel counts
    /// (`kernel.bpf_stats_enabled`; never turned on by the agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_cnt: Option<u64>,
}

/// How an XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum XdpMode {
    Native,
    Generic,
    Offload,
}

impl HostDevices {
    /// Every program on a device.
    pub fn program_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.devices.iter().flat_map(|d| d.programs.iter().map(|p| p.prog_id))
    }

    /// Names each program from the node's (full names where resolved).
    pub fn name_programs(&mut self, programs: &std::collections::BTreeMap<u32, crate::bpf::programs::Program>) {
        for p in self.devices.iter_mut().flat_map(|d| d.programs.iter_mut()) {
            if let Some(known) = programs.get(&p.prog_id) {
                p.prog_name = known.name.clone();
            }
        }
    }
}

impl Device {
    /// The programs of one hook, in order.
    pub fn on(&self, hook: IfHook) -> impl Iterator<Item = &DeviceProgram> {
        self.programs.iter().filter(move |p| p.hook == hook)
    }
}
