//! Stand-ins for every owner in the registry (`agent::owner::registry`):
//! programs with the owner's names, types and hooks, attached the way it
//! attaches them. Where the registry knows a name by its prefix only, the
//! stand-in's name is the prefix and its hook.

use agent::bpf::{AttachType, ProgType};
use agent::owner::{Attach, Owner, registry};

use crate::bpf::{Prog, prog_type_for};

/// One program an owner makes, as a stand-in loads it.
#[derive(Debug, Clone)]
pub struct StandIn {
    pub name: String,
    pub prog_type: ProgType,
    /// The cgroup hook it goes on; `None` for a sockmap's (sk_msg).
    pub hook: Option<AttachType>,
    pub attach: Attach,
}

impl StandIn {
    /// Loads it (allow-all: harmless wherever attached).
    pub fn load(&self) -> Prog {
        let t = self.prog_type.kernel_value().expect("a known program type");
        match self.hook {
            Some(h) => Prog::load_insns(&self.name, t, h, &[0xb7u64 | (1u64 << 32), 0x95]),
            None => Prog::load_detached_type(&self.name, t),
        }
    }

    /// The `BPF_PROG_ATTACH` flags its owner attaches it with; `None`:
    /// through a bpf_link.
    pub fn flags(&self) -> Option<u32> {
        match self.attach {
            Attach::Link | Attach::LinkOrMulti => None,
            Attach::Multi => Some(crate::ALLOW_MULTI),
            Attach::Override => Some(crate::ALLOW_OVERRIDE),
            Attach::Exclusive => Some(0),
        }
    }
}

/// The stand-ins of `owner`: one program per name and hook of its entry
/// (the first program type listed for a hook; one per name for sk_msg).
pub fn stand_ins(owner: Owner) -> Vec<StandIn> {
    let spec = registry::spec(owner).unwrap_or_else(|| panic!("{owner} has no registry entry"));
    let mut out: Vec<StandIn> = Vec::new();
    for p in spec.programs {
        if p.hooks.is_empty() {
            out.push(StandIn { name: concrete(p.name, "msg"), prog_type: p.prog_type, hook: None, attach: p.attach });
            continue;
        }
        for h in p.hooks {
            let hook = AttachType::from_name(h).expect("a registry hook");
            // Cilium's prefixes list several types per hook: one program a hook.
            if out.iter().any(|s| s.hook == Some(hook)) {
                continue;
            }
            // The type must be one that runs at the hook.
            let t = p.prog_type.kernel_value().expect("known type");
            if !runs_at(t, h) {
                continue;
            }
            out.push(StandIn { name: concrete(p.name, h), prog_type: p.prog_type, hook: Some(hook), attach: p.attach });
        }
    }
    out
}

fn runs_at(t: u32, hook: &str) -> bool {
    t == prog_type_for(hook)
}

/// A name for a stand-in: the registry's, or its prefix and the hook.
fn concrete(name: registry::Name, hook: &str) -> String {
    match name {
        registry::Name::Exact(n) => n.to_owned(),
        registry::Name::Prefix(p) => format!("{p}{hook}"),
        registry::Name::Unnamed => String::new(),
        registry::Name::Any => format!("gadget_{hook}"),
    }
}

/// `fixture socket-lb-agent --owner`: an owner's agent that attached its
/// stand-ins; killed on drop, and what it attached with `BPF_PROG_ATTACH`
/// detached from where it attached it.
pub struct OwnerAgent {
    child: std::process::Child,
    pub pid: u32,
    /// How many programs the kernel took, and the refusals it printed.
    pub attached: usize,
    pub refused: Vec<String>,
    /// The cgroup it attached to, as this process reaches it.
    target: std::path::PathBuf,
}

impl OwnerAgent {
    /// Starts `owner`'s agent attaching at `dir`; `flags` are more of the
    /// fixture's (`--join CGROUP --private-cgroupns --private-mountns`, or
    /// `--use-mount`). `target` is the cgroup the attachments land on, as
    /// this process reaches it (for the cleanup).
    pub fn start(owner: Owner, dir: &std::path::Path, flags: &[&str], target: &std::path::Path) -> OwnerAgent {
        use std::io::BufRead;
        let mut child = std::process::Command::new(crate::spawn::fixture_bin())
            .arg("socket-lb-agent")
            .arg(dir)
            .args(["--owner", owner.as_str()])
            .args(flags)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn fixture socket-lb-agent --owner");
        let pid = child.id();
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let (mut attached, mut refused) = (None, Vec::new());
        let mut line = String::new();
        while attached.is_none() {
            line.clear();
            if out.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                panic!("{owner}'s stand-in agent ended before attaching: {refused:?}");
            }
            match line.trim().split_once(' ') {
                Some(("attached", n)) => attached = n.parse().ok(),
                Some(("refused", why)) => refused.push(why.to_owned()),
                _ => {}
            }
        }
        OwnerAgent { child, pid, attached: attached.unwrap_or(0), refused, target: target.to_owned() }
    }
}

impl Drop for OwnerAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        crate::bpf::detach_all(&self.target);
    }
}
