//! What this kernel takes, as cilium/ebpf's `features` finds it: by trying
//! each thing once (a query, a load, an attach, a mapping), never from the
//! version string, and keeping the answer for the life of the process.
//!
//! Each probe stays next to the code that needs it (the attach-type query
//! in `bpf::query`, the iterator in `cgroup::iter`, the event programs in
//! `daemon::trace`, the memory accounting in `bpf::memlock`, the BTF
//! mapping in `bpf::btf`) and records its verdict here the first time it
//! is decided. The daemon logs them once, when its first full pass has
//! tried them all; every report shows them (`kernel_features` in the JSON
//! of `agent audit` and `/audit`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Serialize;

/// A kernel feature the agent tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Feature {
    /// `BPF_PROG_QUERY` of every cgroup attach type the agent knows, on
    /// the audit root: the verdict names those the kernel rejects.
    AttachTypes,
    /// An `iter/cgroup` program loaded and run (the in-kernel walk).
    IterCgroup,
    /// fexit/fentry programs attached to the kernel's cgroup attach functions.
    Fexit,
    /// kprobes on the same functions.
    Kprobe,
    /// How BPF memory is charged: to memory cgroups (5.11+) or to
    /// `RLIMIT_MEMLOCK`.
    MemlockAccounting,
    /// `/sys/kernel/btf/vmlinux` mapped rather than copied (6.16+).
    BtfMmap,
    /// Each program's own flags (`bpf_prog_list.flags`, 6.15+, read by the
    /// in-kernel walk; `BPF_PROG_QUERY` gives a cgroup hook's flags only):
    /// what shows `BPF_F_PREORDER`.
    ProgramFlags,
    /// A hook's revision on `BPF_PROG_QUERY` of a cgroup (6.16+).
    QueryRevision,
    /// `BPF_PROG_QUERY` of an interface's tcx hooks (6.6+): where Cilium
    /// 1.16+ and Calico 3.31+ attach their per-endpoint programs.
    Tcx,
    /// The same of a netkit device's hooks (6.7+).
    Netkit,
}

impl Feature {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What trying a feature found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub works: bool,
    /// How it works where there is more than one answer ("memcg"), or why
    /// not, as the kernel or the loader said.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Verdict {
    pub fn yes() -> Verdict {
        Verdict { works: true, detail: String::new() }
    }

    pub fn yes_as(how: impl Into<String>) -> Verdict {
        Verdict { works: true, detail: how.into() }
    }

    pub fn no(why: impl std::fmt::Display) -> Verdict {
        Verdict { works: false, detail: why.to_string() }
    }
}

static FOUND: Mutex<BTreeMap<Feature, Verdict>> = Mutex::new(BTreeMap::new());

/// Records what trying `feature` found, unless it was already decided: the
/// first answer stands for the life of the process.
pub fn record(feature: Feature, verdict: Verdict) {
    FOUND.lock().unwrap_or_else(|e| e.into_inner()).entry(feature).or_insert(verdict);
}

/// What is decided so far: a feature never tried (kprobe, when fexit
/// worked; the event sources in `agent audit`) is absent.
pub fn found() -> BTreeMap<Feature, Verdict> {
    FOUND.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// One line for the log: `iter_cgroup yes; fexit no (...); ...`.
pub fn summary(found: &BTreeMap<Feature, Verdict>) -> String {
    found
        .iter()
        .map(|(f, v)| match (v.works, v.detail.is_empty()) {
            (true, true) => format!("{} yes", f.as_str()),
            (true, false) => format!("{} yes ({})", f.as_str(), v.detail),
            (false, _) => format!("{} no ({})", f.as_str(), v.detail),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_answer_stands_and_the_summary_names_each_once() {
        let mut found = BTreeMap::new();
        found.insert(Feature::Fexit, Verdict::no("this kernel's BTF has no function cgroup_bpf_replace"));
        found.insert(Feature::IterCgroup, Verdict::yes());
        found.insert(Feature::MemlockAccounting, Verdict::yes_as("memcg"));
        assert_eq!(
            summary(&found),
            "iter_cgroup yes; fexit no (this kernel's BTF has no function cgroup_bpf_replace); memlock_accounting yes (memcg)"
        );
        record(Feature::BtfMmap, Verdict::yes());
        record(Feature::BtfMmap, Verdict::no("later"));
        assert_eq!(found_now(Feature::BtfMmap), Some(Verdict::yes()));
        let json = serde_json::to_value(super::found()).unwrap();
        assert_eq!(json["btf_mmap"], serde_json::json!({"works": true}));
    }

    fn found_now(f: Feature) -> Option<Verdict> {
        super::found().get(&f).cloned()
    }
}
