//! The owners' agents running on the node: found by command name, taken
//! for their owner's only when they run with what it runs with
//! (`not_an_agent`), with the programs they hold and (Cilium's, Calico's)
//! what their configuration says, read under the deadline of untrusted
//! reads.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::host::{CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN, capeff, ns_inode, proc_cgroup};
use super::{deadline, intent};
use crate::owner::Owner;
use crate::snapshot::{AgentProcess, Intent, ScanError};

/// The programs process `dir` holds open: the `prog_id` of each of its
/// program and link descriptors (`/proc/<pid>/fdinfo/*`; the kernel writes
/// these, the process cannot make them block). At most `MAX_HELD`.
fn held(dir: &Path) -> Vec<u32> {
    let Ok(fds) = fs::read_dir(dir.join("fd")) else { return Vec::new() };
    let mut ids = Vec::new();
    for fd in fds.flatten() {
        // Only programs and links (`anon_inode:bpf-prog`,
        // `anon_inode:bpf_link`: the kernel's names), whose fdinfo says
        // `prog_id:`.
        let Ok(target) = fs::read_link(fd.path()) else { continue };
        if !matches!(target.as_os_str().as_encoded_bytes(), b"anon_inode:bpf-prog" | b"anon_inode:bpf_link") {
            continue;
        }
        let Ok(info) = fs::read_to_string(dir.join("fdinfo").join(fd.file_name())) else { continue };
        if let Some(id) = info.lines().find_map(|l| l.strip_prefix("prog_id:")).and_then(|v| v.trim().parse().ok()) {
            ids.push(id);
            if ids.len() >= MAX_HELD {
                break;
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The most programs read of one agent's descriptors: a CNI agent holds
/// a few hundred.
const MAX_HELD: usize = 4096;

/// The node's own user namespace: PID 1's, else (when PID 1's cannot be
/// looked at) the auditor's, which as a DaemonSet or on the host is the
/// initial one too.
fn initial_userns(proc: &Path) -> Option<(u64, u64)> {
    ns_id(proc, "user")
}

/// PID 1's namespace of `kind`, else (when PID 1's cannot be looked at)
/// the auditor's own: (device, inode).
fn ns_id(proc: &Path, kind: &str) -> Option<(u64, u64)> {
    let id = |p: &Path| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    id(&proc.join("1/ns").join(kind)).or_else(|| id(&Path::new("/proc/self/ns").join(kind)))
}

/// Why a process named like an owner's agent is not taken for it, if it is
/// not, by what the registry says the agent runs with (`owner::Runs`), in
/// the node's user namespace: for those that run with hostNetwork (CNI
/// agents: they configure the node's routes and devices) CAP_SYS_ADMIN or
/// CAP_BPF, and CAP_NET_ADMIN in the node's network namespace; for those
/// that run privileged in a network of their own (Kmesh), CAP_SYS_ADMIN and
/// CAP_NET_ADMIN: what Pod Security's privileged profile gives and a pod
/// granted CAP_BPF alone has not (issue 47, M2). Anyone can name a process;
/// a pod with CAP_BPF alone, or root in a user or network namespace of its
/// own, is not Cilium. Where the node's runtime names the process's pod,
/// `not_in_its_namespace` checks that too.
fn not_an_agent(
    dir: &Path,
    pid: u32,
    comm: &str,
    owner: Owner,
    userns: Option<(u64, u64)>,
    netns: Option<(u64, u64)>,
) -> Option<String> {
    let not = |why: &str| Some(format!("pid {pid} is named {comm} but {why}: not taken for {}'s agent", owner.title()));
    let own = |kind: &str| fs::metadata(dir.join("ns").join(kind)).ok().map(|m| (m.dev(), m.ino()));
    let caps = capeff(dir).unwrap_or(0);
    if caps & (1 << CAP_SYS_ADMIN | 1 << CAP_BPF) == 0 {
        return not("holds neither CAP_SYS_ADMIN nor CAP_BPF");
    }
    if userns.is_none() || own("user") != userns {
        return not("holds its capabilities only in a user namespace of its own");
    }
    match owner.spec().map(|s| s.runs) {
        Some(crate::owner::Runs::HostNetwork) => {
            if caps & (1 << CAP_NET_ADMIN) == 0 {
                return not("lacks CAP_NET_ADMIN, which it needs for the node's network");
            }
            if netns.is_none() || own("net") != netns {
                return not("runs in a network namespace other than the node's (its agent runs with hostNetwork)");
            }
        }
        Some(crate::owner::Runs::Privileged) => {
            let both = 1 << CAP_SYS_ADMIN | 1 << CAP_NET_ADMIN;
            if caps & both != both {
                return not("lacks CAP_SYS_ADMIN or CAP_NET_ADMIN, which its agent runs with (privileged)");
            }
        }
        None => {}
    }
    None
}

/// Why a process taken for `owner`'s agent by its privileges is not, for
/// an owner whose agent runs privileged in a network of its own (Kmesh:
/// nothing of the node's sets it apart from a tenant's privileged pod),
/// when the node's runtime names its pod (`pod_namespace`) and the
/// registry names the namespace the owner's DaemonSet runs in: a pod in
/// another namespace is a tenant's, whatever it holds (Pod Security's
/// privileged profile is granted per namespace).
pub fn not_in_its_namespace(
    owner: Owner,
    pid: u32,
    comm: &str,
    pod_namespace: impl FnOnce() -> Option<String>,
) -> Option<String> {
    let spec = owner.spec()?;
    let (want, _) = spec.restart.filter(|_| spec.runs == crate::owner::Runs::Privileged)?;
    let ns = pod_namespace()?;
    (ns != want).then(|| {
        format!(
            "pid {pid} is named {comm} but runs in a pod of namespace {ns}, not {want} where {}'s DaemonSet runs: \
             not taken for its agent",
            owner.title()
        )
    })
}

/// The namespace of the pod a process of cgroup `cgroup` is in, as the
/// node's runtime names it (`None`: not a pod's, or not named), for the
/// owners `not_in_its_namespace` checks.
fn pod_namespace(proc: &Path, cgroup: &str) -> Option<String> {
    let a = crate::attribution::attribute(cgroup);
    let uid = a.pod_uid.clone()?;
    let mut wanted = crate::snapshot::NamesWanted::default();
    wanted.pods.insert(uid.clone());
    if let Some(id) = &a.container_id {
        wanted.containers.insert(id.clone(), (Some(uid.clone()), a.runtime));
    }
    let names = super::names::Namer::new(proc).lookup(&wanted);
    names.pod(&uid, a.container_id.as_deref()).map(|p| p.namespace.clone())
}

/// The owners' agents running (by command name), their cgroup namespaces,
/// what they hold, and (Cilium's, Calico's) what their configuration says.
pub fn agent_processes(proc: &Path, budget: &deadline::Budget, errors: &mut Vec<ScanError>) -> Vec<AgentProcess> {
    let initial = initial_userns(proc);
    let netns = ns_id(proc, "net");
    let mut out = Vec::new();
    let entries = match fs::read_dir(proc) {
        Ok(e) => e,
        Err(e) => {
            errors.push(ScanError { op: "readdir".into(), path: proc.display().to_string(), message: e.to_string() });
            return out;
        }
    };
    // Each agent's configuration is read on a thread of its own, all at
    // once: its root and its memory are its own to make block, and one
    // that does costs only its own answer.
    let mut reading = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else { continue };
        let comm = comm.trim();
        let Some(owner) = Owner::from_agent_comm(comm) else { continue };
        // NB: the process may exit between reads; skip it then.
        let (Some(ns), Some(cgroup)) = (ns_inode(&entry.path().join("ns/cgroup")), proc_cgroup(proc, pid)) else {
            continue;
        };
        let pid: u32 = pid.parse().unwrap_or(0);
        let refused = not_an_agent(&entry.path(), pid, comm, owner, initial, netns)
            .or_else(|| not_in_its_namespace(owner, pid, comm, || pod_namespace(proc, &cgroup)));
        let privileged = refused.is_none();
        let holds = if privileged { held(&entry.path()) } else { Vec::new() };
        let intent = match refused {
            None if matches!(owner, Owner::Cilium | Owner::Calico) => {
                let proc = proc.to_owned();
                deadline::start(pid, move || intent::read(&proc, pid, owner)).map_err(|why| why.to_string())
            }
            None => Err(format!("{}'s configuration is not read", owner.title())),
            Some(why) => Err(why),
        };
        reading.push((
            AgentProcess {
                pid,
                owner,
                comm: comm.to_owned(),
                cgroupns: ns,
                cgroup,
                privileged,
                intent: Intent::unknown(""),
                holds,
            },
            intent,
        ));
    }
    for (mut p, intent) in reading {
        p.intent = match intent {
            Ok(pending) => pending.wait(budget).unwrap_or_else(|why| Intent::unknown(why.to_string())),
            Err(why) => Intent::unknown(why),
        };
        out.push(p);
    }
    out.sort_by_key(|p| p.pid);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 47, M2: a privileged pod in a tenant's namespace running a
    /// process named `kmesh-daemon` is not Kmesh's agent; in Kmesh's own
    /// namespace, or where the runtime does not name the pod, it is taken
    /// by its privileges alone. A CNI agent (hostNetwork) is not asked.
    #[test]
    fn a_privileged_agent_of_an_owner_is_in_its_owners_namespace() {
        let tenant = || Some("tenant-a".to_owned());
        let why = not_in_its_namespace(Owner::Kmesh, 7, "kmesh-daemon", tenant).expect("refused");
        assert!(why.contains("namespace tenant-a, not kmesh-system"), "{why}");
        assert_eq!(not_in_its_namespace(Owner::Kmesh, 7, "kmesh-daemon", || Some("kmesh-system".into())), None);
        assert_eq!(not_in_its_namespace(Owner::Kmesh, 7, "kmesh-daemon", || None), None);
        let mut asked = false;
        assert_eq!(
            not_in_its_namespace(Owner::Cilium, 7, "cilium-agent", || {
                asked = true;
                tenant()
            }),
            None
        );
        assert!(!asked, "names are looked up only for the owners it applies to");
    }
}
