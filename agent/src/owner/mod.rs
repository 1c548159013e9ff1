//! Who owns a program: the registry of owners (`registry`, as data) and the
//! pure rules that name a program's owner from what proves it.
//!
//! A program's name is chosen by whoever loads it: it never makes a program
//! an owner's on its own. A program counts as an owner's when its agent
//! holds it (an fd of that process), it is pinned in the owner's pin
//! directory, the call that attached it was the agent's, the agent runs in
//! the very cgroup it is attached to (its own container: the seed), the
//! owner's cgroup2 mount is rooted there, or it sits where the owner means
//! it to be (the root) with the owner's name, type and hook. Anything else
//! is `unknown`, with the owner it is named like. The benign owners
//! (systemd, the runtimes), which attach anywhere, are known by name, type
//! and hook: a benign name on a hook its owner never uses is no cover.

pub mod hooks;
pub mod registry;

use serde::Serialize;
use strum::IntoEnumIterator;

use crate::bpf::{AttachType, ProgType};
pub use registry::{Attach, Intends, Runs, Spec};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, strum::IntoStaticStr, strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Owner {
    Cilium,
    Calico,
    /// The AWS network policy agent (aws-node's `aws-network-policy-agent`
    /// container, EKS).
    AwsNetworkPolicy,
    Kmesh,
    Merbridge,
    Loxilb,
    /// OpenTelemetry eBPF Instrumentation (formerly Grafana Beyla).
    Obi,
    InspektorGadget,
    DatadogCws,
    Tracee,
    Keploy,
    Systemd,
    /// runc/crun device-cgroup programs.
    Runtime,
    /// Matched the user's `--allow` list.
    Allowed,
    Unknown,
}

impl Owner {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Its registry entry (none for `allowed` and `unknown`).
    pub fn spec(self) -> Option<&'static Spec> {
        registry::spec(self)
    }

    /// As people name it (`Cilium`, `Kmesh`).
    pub fn title(self) -> &'static str {
        self.spec().map_or(self.as_str(), |s| s.title)
    }

    /// Means its programs to be at the root cgroup, for every socket.
    pub fn intends_root(self) -> bool {
        self.spec().is_some_and(|s| s.intends == Intends::Root)
    }

    /// A socket load balancer, whose coverage of each pod is judged (Cilium,
    /// Calico).
    pub fn balances_sockets(self) -> bool {
        self.spec().is_some_and(|s| s.balances_sockets)
    }

    /// Attaches anywhere by design (systemd, the runtimes) or was allowed:
    /// never flagged, never touched.
    pub fn is_benign(self) -> bool {
        self == Owner::Allowed || self.spec().is_some_and(|s| s.intends == Intends::Anywhere)
    }

    /// The owner whose agent has this command name.
    pub fn from_agent_comm(comm: &str) -> Option<Owner> {
        registry::OWNERS.iter().find(|s| s.agents.contains(&comm)).map(|s| s.owner)
    }

    /// The owner that mounts cgroup2 at `path` to attach there.
    pub fn from_mount_point(path: &std::path::Path) -> Option<Owner> {
        registry::OWNERS.iter().find(|s| s.mount_points.iter().any(|m| path.as_os_str() == *m)).map(|s| s.owner)
    }

    /// Its first mount point, when it has one.
    pub fn mount_point(self) -> Option<&'static str> {
        self.spec()?.mount_points.first().copied()
    }

    /// The command name of its agent (its first).
    pub fn agent_comm(self) -> Option<&'static str> {
        self.spec()?.agents.first().copied()
    }

    /// How to restart its agent on one node, so it attaches again.
    pub fn restart_command(self, node: &str) -> Option<String> {
        let (ns, selector) = self.spec()?.restart?;
        let other = if self == Owner::Calico { " (kube-system for a manifest install)" } else { "" };
        Some(format!("kubectl -n {ns} delete pod -l {selector} --field-selector spec.nodeName={node}{other}"))
    }

    /// Where its agent says whether socket LB is on and attached.
    pub fn status_hint(self) -> Option<&'static str> {
        match self {
            Owner::Cilium => Some("`cilium-dbg status --verbose`, \"Socket LB\""),
            Owner::Calico => Some(
                "felix's log for connect-time load balancing; `bpftool cgroup show /run/calico/cgroup` in calico-node",
            ),
            _ => None,
        }
    }

    /// Owners with a registry entry.
    pub fn known() -> impl Iterator<Item = Owner> {
        Owner::iter().filter(|o| o.spec().is_some())
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the user told the rules about owners.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Program-name prefixes that are benign wherever they are attached.
    pub allow: Vec<String>,
    /// How long a new pod may go without its CNI's per-endpoint programs
    /// before it is outside the datapath (`--endpoint-grace`).
    pub endpoint_grace: std::time::Duration,
}

/// The default `--endpoint-grace`: the CNI adds a pod's endpoint a moment
/// after its sandbox exists (Cilium within seconds).
pub const ENDPOINT_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

impl Default for Policy {
    fn default() -> Policy {
        Policy { allow: Vec::new(), endpoint_grace: ENDPOINT_GRACE }
    }
}

/// Why a program counts as its owner's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Proof {
    /// The owner's agent holds it (a program or link fd of that process).
    Held,
    /// It is pinned in the owner's pin directory.
    Pinned,
    /// The call that attached it was the agent's (the daemon saw it).
    AttachedByAgent,
    /// The owner's agent runs in the cgroup it is attached to.
    AgentInCgroup,
    /// The owner's cgroup2 mount is rooted at the cgroup it is attached to.
    MountRooted,
    /// At the root, with the owner's name, type and hook.
    AtRoot,
    /// A benign owner's name, type and hook.
    Named,
    /// The user's `--allow`.
    Allowed,
}

impl Proof {
    /// Whether a tenant below node-level privilege can make it: where a
    /// program is attached (a pod with CAP_BPF and CAP_NET_ADMIN attaches
    /// to any cgroup it can open: its own, the CNI agent's through a
    /// hostPath of the cgroup tree, the root's), or its name. A critical
    /// finding, a page or a fix that restarts or deletes something never
    /// rests on one alone (docs/security.md, "Proofs").
    pub fn forgeable(self) -> bool {
        matches!(self, Proof::AgentInCgroup | Proof::AtRoot | Proof::Named)
    }
}

/// A program's owner, and why (`None` for `unknown`), and the owner its
/// name claims when that is not proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owned {
    pub owner: Owner,
    pub proof: Option<Proof>,
    /// The owner it is named like, when unknown.
    pub named_like: Option<Owner>,
}

impl Owned {
    pub fn unknown(named_like: Option<Owner>) -> Owned {
        Owned { owner: Owner::Unknown, proof: None, named_like }
    }

    /// Proven its owner's by what no tenant below node-level privilege can
    /// make (`Proof::forgeable`).
    pub fn proven_strongly(&self) -> bool {
        self.proof.is_some_and(|p| !p.forgeable())
    }
}

/// Whether an owner means programs on `hook` to be at the root: where one
/// below the root is misplaced, and the processes of a cgroup holding one
/// are read (the seed's agent is among them).
pub fn is_root_hook(hook: AttachType) -> bool {
    static HOOKS: std::sync::LazyLock<Vec<AttachType>> = std::sync::LazyLock::new(|| {
        registry::OWNERS
            .iter()
            .filter(|s| s.intends == Intends::Root)
            .flat_map(|s| s.programs.iter().flat_map(|p| p.hooks.iter()))
            .filter_map(|h| AttachType::from_name(h))
            .collect()
    });
    HOOKS.contains(&hook)
}

/// Whether `owner` makes a program named `name` of `prog_type` for `hook`
/// (`None`: loaded, not attached), by its registry entry.
pub fn makes(owner: Owner, name: &str, prog_type: ProgType, hook: Option<AttachType>) -> bool {
    owner.spec().is_some_and(|s| {
        s.programs.iter().any(|p| {
            p.prog_type == prog_type && p.name.matches(name) && hook.is_none_or(|h| p.hooks.contains(&h.name()))
        })
    })
}

/// The owner a program's name, type and hook are like (an entry that
/// knows its programs by name: not one whose programs have any name).
pub fn named_like(name: &str, prog_type: ProgType, hook: Option<AttachType>) -> Option<Owner> {
    named_like_all(name, prog_type, hook).next()
}

/// Every owner a program's name, type and hook are like, in the registry's
/// order (a kernel name of 15 bytes can be the truncation of two owners').
fn named_like_all(name: &str, prog_type: ProgType, hook: Option<AttachType>) -> impl Iterator<Item = Owner> {
    registry::OWNERS
        .iter()
        .filter(move |s| {
            s.programs.iter().any(|p| {
                p.name != registry::Name::Any
                    && p.prog_type == prog_type
                    && p.name.matches(name)
                    && hook.is_none_or(|h| p.hooks.contains(&h.name()))
            })
        })
        .map(|s| s.owner)
}

/// The owner a program's name alone claims, whatever its type and hook: to
/// say "its name claims systemd" of a program that systemd never attaches
/// there.
pub fn claimed_by_name(name: &str) -> Option<Owner> {
    registry::OWNERS
        .iter()
        .find(|s| {
            s.programs.iter().any(|p| p.name != registry::Name::Any && p.name.matches(name))
                || (!name.is_empty() && s.claims.iter().any(|c| name.starts_with(c)))
        })
        .map(|s| s.owner)
}

/// What proves a program an owner's, gathered from the node (`findings`
/// builds it from the snapshot).
#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence {
    /// The owner whose agent holds it.
    pub held_by: Option<Owner>,
    /// The owner in whose pin directory it is, while that owner's agent
    /// runs (a pin alone is no proof: whoever can write the node's bpffs
    /// can pin there).
    pub pinned_by: Option<Owner>,
    /// The owner whose agent's call attached it.
    pub attached_by: Option<Owner>,
    /// The owner whose agent runs in the cgroup it is on.
    pub agent_in_cgroup: Option<Owner>,
    /// The owner whose cgroup2 mount is rooted at the cgroup it is on.
    pub mount_rooted: Option<Owner>,
    /// It is at the root.
    pub at_root: bool,
}

/// A program's owner: the user's allow list, then what proves an owner
/// (the program must still be one the owner makes: its type and hook, and
/// its name where the owner names its programs), then, for the owners that
/// attach anywhere, its name, type and hook. Else unknown, with the owner
/// it is named like.
pub fn judge(name: &str, prog_type: ProgType, hook: Option<AttachType>, e: &Evidence, policy: &Policy) -> Owned {
    if !name.is_empty() && policy.allow.iter().any(|p| name.starts_with(p.as_str())) {
        return Owned { owner: Owner::Allowed, proof: Some(Proof::Allowed), named_like: None };
    }
    // The proofs no tenant can make first (`Proof::forgeable`): the one a
    // program is judged by is the strongest it has.
    let proven = [
        (e.held_by, Proof::Held),
        (e.pinned_by, Proof::Pinned),
        (e.attached_by, Proof::AttachedByAgent),
        (e.mount_rooted, Proof::MountRooted),
        (e.agent_in_cgroup, Proof::AgentInCgroup),
    ];
    for (owner, proof) in proven {
        if let Some(owner) = owner
            && makes(owner, name, prog_type, hook)
        {
            return Owned { owner, proof: Some(proof), named_like: None };
        }
    }
    let mut all = named_like_all(name, prog_type, hook);
    let like = all.next();
    // Only a name that is like one owner's alone says whose it is.
    let alone = all.next().is_none();
    match like {
        Some(owner) if alone && owner.is_benign() => Owned { owner, proof: Some(Proof::Named), named_like: None },
        Some(owner) if alone && e.at_root && owner.intends_root() => {
            Owned { owner, proof: Some(Proof::AtRoot), named_like: None }
        }
        _ => Owned::unknown(like.or_else(|| claimed_by_name(name))),
    }
}

#[cfg(test)]
mod tests;
