//! The daemon's kernel events: a change to the cgroup tree or its programs
//! (`Change`), who made it (`Event`), and what the call's event says of its
//! own fields (`Hints`). The trace reader decodes them from the eBPF
//! programs' records; the picture applies them; `/events` shows them.

use serde::Serialize;

use crate::bpf::{AttachType, BpfCommand};

/// A change to the cgroup tree or its programs, as the daemon's event
/// programs reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// A bpf(2) call that attaches, detaches or replaces a cgroup program
    /// succeeded. What it named (read as it was made) is a hint: the daemon
    /// reads the cgroup again.
    BpfCall {
        command: BpfCommand,
        /// The cgroup its target fd opened (for link calls: the link's);
        /// `None` when that was not a cgroup-v2 directory or not readable.
        cgroup_id: Option<u64>,
        /// The hook it named, when a cgroup hook.
        attach_type: Option<AttachType>,
        prog_id: Option<u32>,
        /// The link created, updated or detached.
        link_id: Option<u32>,
        /// The call's flags, as `/events` names them (`allow_multi`,
        /// `replace`, the mprog API's `before`, `after`, `id`, `link`,
        /// `preorder`); a bit this agent does not know is shown in hex and
        /// never refuses the call's event.
        #[serde(serialize_with = "serialize_call_flags")]
        flags: u32,
        /// Which fields came through the caller's file descriptors, or
        /// that its arguments could not be read at all (`Hints`).
        #[serde(skip_serializing_if = "Hints::is_empty")]
        hints: Hints,
    },
    CgroupMade {
        cgroup_id: u64,
        parent_id: u64,
        /// As the kernel holds it (shown with any byte that is not UTF-8
        /// as `\xNN`).
        #[serde(serialize_with = "serialize_name")]
        name: Vec<u8>,
    },
    CgroupRemoved {
        cgroup_id: u64,
    },
}

/// What a call's event says about its own fields: which came through the
/// caller's file descriptors, which another of its threads may swap while
/// the call runs (`cgroup`, `prog`, `link`), or `unread`: the call's
/// arguments could not be read at all. The bits are the eBPF programs'
/// (`agent_common::cgroup_events::HINT_*`, `UNREAD`); `/events` shows
/// their names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hints(u32);

impl Hints {
    pub const CGROUP: Hints = Hints(agent_common::cgroup_events::HINT_CGROUP);
    pub const PROG: Hints = Hints(agent_common::cgroup_events::HINT_PROG);
    pub const LINK: Hints = Hints(agent_common::cgroup_events::HINT_LINK);
    pub const UNREAD: Hints = Hints(agent_common::cgroup_events::UNREAD);
    const NAMES: [(Hints, &'static str); 4] =
        [(Hints::CGROUP, "cgroup"), (Hints::PROG, "prog"), (Hints::LINK, "link"), (Hints::UNREAD, "unread")];

    /// The bits a record carries; unknown ones are dropped.
    pub fn from_wire(bits: u32) -> Hints {
        Hints(bits & Hints::NAMES.iter().fold(0, |all, (h, _)| all | h.0))
    }

    pub fn contains(self, other: Hints) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The names of the bits set, as `/events` shows them.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Hints::NAMES.into_iter().filter(move |(h, _)| self.contains(*h)).map(|(_, n)| n)
    }
}

impl std::ops::BitOr for Hints {
    type Output = Hints;
    fn bitor(self, other: Hints) -> Hints {
        Hints(self.0 | other.0)
    }
}

impl Serialize for Hints {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.names())
    }
}

/// The names of an attach call's flag bits.
pub fn call_flag_names(flags: u32) -> Vec<String> {
    const NAMES: [(u32, &str); 8] = [
        (1, "allow_override"),
        (1 << 1, "allow_multi"),
        (1 << 2, "replace"),
        (1 << 3, "before"),
        (1 << 4, "after"),
        (1 << 5, "id"),
        (crate::bpf::query::BPF_F_PREORDER, "preorder"),
        (1 << 13, "link"),
    ];
    let known = NAMES.iter().fold(0, |all, (b, _)| all | b);
    let mut out: Vec<String> = NAMES.iter().filter(|(b, _)| flags & b != 0).map(|(_, n)| (*n).to_owned()).collect();
    if flags & !known != 0 {
        out.push(format!("{:#x}", flags & !known));
    }
    out
}

fn serialize_call_flags<S: serde::Serializer>(flags: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(call_flag_names(*flags))
}

fn serialize_name<S: serde::Serializer>(name: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::text::shown(name))
}

impl Change {
    /// The bpf(2) command that made this change.
    pub fn command(&self) -> Option<BpfCommand> {
        match self {
            Change::BpfCall { command, .. } => Some(*command),
            _ => None,
        }
    }

    /// The cgroup the change is on, when known.
    pub fn cgroup_id(&self) -> Option<u64> {
        match *self {
            Change::BpfCall { cgroup_id, .. } => cgroup_id,
            Change::CgroupMade { cgroup_id, .. } | Change::CgroupRemoved { cgroup_id } => Some(cgroup_id),
        }
    }

    pub fn attach_type(&self) -> Option<AttachType> {
        match *self {
            Change::BpfCall { attach_type, .. } => attach_type,
            _ => None,
        }
    }
}

/// One change and who made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The daemon's number for it, in the order received (0 until then).
    pub seq: u64,
    /// When, in milliseconds since the Unix epoch.
    pub time_unix_ms: u64,
    #[serde(flatten)]
    pub change: Change,
    /// The task whose call made the change (for a link released by its last
    /// fd closing: whoever closed it).
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// cgroup id of that task.
    pub caller_cgroup_id: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_common::cgroup_events as wire;

    #[test]
    fn hints_show_their_names_and_drop_unknown_bits() {
        let h = Hints::from_wire(wire::HINT_CGROUP | wire::UNREAD | 1 << 20);
        assert!(h.contains(Hints::CGROUP) && h.contains(Hints::UNREAD) && !h.contains(Hints::PROG));
        assert_eq!(serde_json::to_value(h).unwrap(), serde_json::json!(["cgroup", "unread"]));
        assert_eq!(Hints::from_wire(1 << 20), Hints::default());
        assert!((Hints::PROG | Hints::LINK).contains(Hints::LINK));
    }
}

#[cfg(test)]
mod call_flags {
    use super::call_flag_names;

    #[test]
    fn known_bits_are_named_and_unknown_ones_shown_not_refused() {
        assert_eq!(call_flag_names(0), Vec::<String>::new());
        assert_eq!(call_flag_names(2), ["allow_multi"]);
        assert_eq!(call_flag_names(2 | 8 | 32 | 64), ["allow_multi", "before", "id", "preorder"]);
        assert_eq!(call_flag_names(1 << 13 | 1 << 30), ["link", "0x40000000"]);
    }
}
