//! Stand-ins for every owner in the registry (`agent::owner::registry`):
//! programs with the owner's names, types and hooks, attached the way it
//! attaches them. Where the registry knows a name by its prefix only, the
//! stand-in's name is the prefix and its hook.

use agent::bpf::{AttachType, ProgType};
use agent::owner::{Attach, Owner, registry};
use serde_json::Value;

use crate::bpf::{ALLOW_MULTI, Attached, Prog, prog_type_for};
use crate::cgroup::TestCgroup;
use crate::kubepods::{OTHER_CONTAINER, OTHER_POD_UID, SEED_CONTAINER, SEED_POD_UID, systemd_container, systemd_pod};
use crate::spawn::agent;

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

// The scenarios, run by the host suite (suite/owners.rs) and on every
// kernel of the matrix (guest v2/owners.rs).

fn audit(t: &TestCgroup, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let run = agent(&args);
    assert!(run.code == 0 || run.code == 1, "audit failed: {run:?}");
    (run.code, run.json())
}

fn of_kind<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == kind).collect()
}

/// The owners that mean their programs for the root and name them.
fn root_owners() -> Vec<Owner> {
    Owner::known().filter(|o| o.intends_root() && !stand_ins(*o).iter().all(|s| s.hook.is_none())).collect()
}

/// Every root owner's seed (below the root, through a cgroup2 mount its
/// agent made in a private cgroup namespace) is its own, critical on the
/// socket-address hooks, with its fix and its cause; at the root it is clean.
pub fn every_root_owners_seed_is_its_own_with_its_fix_and_at_the_root_is_clean() {
    let owners = root_owners();
    assert!(owners.len() >= 8, "the registry's root owners: {owners:?}");
    for owner in owners {
        let spec = registry::spec(owner).unwrap();
        let stand = stand_ins(owner);
        let socket = stand.iter().any(|s| s.hook.is_some_and(|h| h.is_socket_address()));
        let t = TestCgroup::new(&format!("owner-{owner}"));
        let ctr = t.mkdir(&systemd_container("burstable", SEED_POD_UID, SEED_CONTAINER));
        let mount = tempfile::tempdir().unwrap();

        // The seed: its agent in a container, in a cgroup namespace of its
        // own, mounting cgroup2 in a mount namespace of its own (as Kmesh's
        // start_kmesh.sh does, in no mountinfo of the node's).
        let seed = OwnerAgent::start(
            owner,
            mount.path(),
            &["--join", ctr.to_str().unwrap(), "--private-cgroupns", "--private-mountns"],
            &ctr,
        );
        assert!(seed.refused.is_empty(), "{owner}: {:?}", seed.refused);
        let (code, report) = audit(&t, &[]);
        let kind = if socket { "socket_lb_below_root" } else { "root_hook_below_root" };
        let below = of_kind(&report, kind);
        assert_eq!(below.len(), 1, "{owner}: {report:#}");
        let f = below[0];
        assert_eq!(f["owner"], owner.as_str(), "{owner}: {f:#}");
        assert_eq!(f["severity"], if socket { "critical" } else { "warning" }, "{owner}");
        assert_eq!(code, 1, "{owner}");
        let remediation = f["remediation"].as_str().unwrap();
        assert!(remediation.contains(spec.fix.trim_end_matches(',')), "{owner}'s own fix: {remediation}");
        // Every program by its full name.
        let names: Vec<&str> =
            f["programs"].as_array().unwrap().iter().map(|p| p["prog_name"].as_str().unwrap()).collect();
        for s in stand.iter().filter(|s| s.hook.is_some_and(|h| h.is_socket_address() == socket)) {
            assert!(names.contains(&s.name.as_str()), "{owner}: {} not named in {names:?}", s.name);
        }
        // The cause, named from its agent's cgroup namespace.
        let cause = of_kind(&report, "cni_agent_private_cgroupns");
        assert_eq!(cause.len(), 1, "{owner}: {report:#}");
        assert_eq!(cause[0]["owner"], owner.as_str());
        assert!(cause[0]["message"].as_str().unwrap().contains("in no mountinfo of PID 1's"), "{:#}", cause[0]);
        if owner.balances_sockets() {
            assert!(!of_kind(&report, "socket_lb_missing_at_root").is_empty(), "{owner}: {report:#}");
        } else {
            assert!(of_kind(&report, "pods_without_socket_lb").is_empty(), "{owner} balances no pod's sockets");
        }
        drop(seed);

        // Healthy: the same agent attaching at the (audited) root.
        let healthy = OwnerAgent::start(owner, &t.path, &["--use-mount"], &t.path);
        assert!(healthy.refused.is_empty(), "{owner}: {:?}", healthy.refused);
        let (code, report) = audit(&t, &[]);
        assert_eq!((code, report["status"].as_str()), (0, Some("ok")), "{owner} at the root: {report:#}");
        let atts = report["attachments"].as_array().unwrap();
        assert!(!atts.is_empty());
        assert!(atts.iter().all(|a| a["owner"] == owner.as_str()), "{owner}: {atts:#?}");
        drop(healthy);
    }
}

/// Merbridge attaches with no flags; beside Cilium's multi programs at the
/// root, the kernel refuses the second (here Cilium, on the hooks Merbridge
/// holds), and the audit names both owners and the flags.
pub fn merbridge_exclusive_at_the_root_beside_cilium_is_a_conflict_naming_both() {
    let t = TestCgroup::new("conflict");
    t.mkdir(&systemd_container("burstable", SEED_POD_UID, SEED_CONTAINER));
    let merbridge = OwnerAgent::start(Owner::Merbridge, &t.path, &["--use-mount"], &t.path);
    assert!(merbridge.refused.is_empty(), "{:?}", merbridge.refused);
    let cilium = OwnerAgent::start(Owner::Cilium, &t.path, &["--use-mount", "--skip-refused"], &t.path);
    // The kernel's own verdict: one mode per cgroup and hook.
    assert!(
        cilium.refused.iter().any(|r| r.starts_with("connect4 ") && r.contains("Operation not permitted")),
        "Cilium's connect4 link is refused: {:?}",
        cilium.refused
    );
    assert!(cilium.attached > 0, "Cilium's other hooks attach");
    let (code, report) = audit(&t, &[]);
    assert_eq!(code, 1);
    let conflicts = of_kind(&report, "root_hook_conflict");
    let c = conflicts.iter().find(|f| f["attach_type"] == "connect4").unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(
        (&c["owner"], &c["other_owner"], &c["attach_flags"]),
        (&"merbridge".into(), &"cilium".into(), &"none".into())
    );
    assert_eq!(c["severity"], "critical", "Cilium's socket LB is refused there");
    let m = c["message"].as_str().unwrap();
    assert!(m.contains("Merbridge") && m.contains("Cilium") && m.contains("exclusively (attach flags: none)"), "{m}");
}

/// Issue 36 round 4, M2: a do-nothing program named `cil_sock4_connect`,
/// attached by an ordinary pod to its own cgroup, beside a healthy Cilium,
/// raised three criticals about every pod.
pub fn a_program_named_like_ciliums_in_a_pod_raises_no_critical() {
    let t = TestCgroup::new("named-only");
    let pod = t.mkdir(&systemd_pod("besteffort", OTHER_POD_UID));
    let ctr = t.mkdir(&systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER));
    t.mkdir(&systemd_container("burstable", SEED_POD_UID, SEED_CONTAINER));
    let _cilium = OwnerAgent::start(Owner::Cilium, &t.path, &["--use-mount"], &t.path);
    // The pod's program: loaded and attached by this test process, named
    // like Cilium's, held by no Cilium agent.
    let fake = Prog::load("cil_sock4_connect", "connect4");
    let _att = Attached::new(&ctr, &fake, ALLOW_MULTI);
    let _ = pod;
    let (_, report) = audit(&t, &[]);
    let critical: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["severity"] == "critical").collect();
    assert!(critical.is_empty(), "{critical:#?}");
    let below = of_kind(&report, "socket_lb_below_root");
    assert_eq!(below.len(), 1, "{report:#}");
    assert_eq!(
        (&below[0]["owner"], &below[0]["named_like"], &below[0]["severity"]),
        (&"unknown".into(), &"cilium".into(), &"warning".into())
    );
    assert!(
        of_kind(&report, "pods_without_socket_lb").is_empty()
            && of_kind(&report, "socket_lb_missing_at_root").is_empty()
    );
    let run = agent(&["audit", "--cgroup-root", t.path.to_str().unwrap(), "--fail-on", "critical"]);
    assert_eq!(run.code, 0, "no critical: {}", run.stdout);
}
