//! The report for people: the summary line, the one line
//! node-problem-detector shows, and the table (findings grouped, with
//! their fixes, then attachments per cgroup). Every name is escaped
//! (`text::Lines`).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{FailOn, ONE_LINE_MAX, Report, Status};
use crate::bpf::{AttachFlags, AttachType};
use crate::cgroup::RootKind;
use crate::findings::{self, Finding, Severity};
use crate::owner::Owner;
use crate::text::Lines;

impl Report {
    fn root_kind_text(&self) -> &'static str {
        match self.root_kind {
            RootKind::Hierarchy => "hierarchy root",
            RootKind::Pid1Namespace => "PID 1's cgroup-namespace root",
            RootKind::Given => "--cgroup-root",
            RootKind::Namespaced => "NAMESPACED VIEW, INCOMPLETE",
        }
    }

    /// The first line: what a person or an NPD message needs at a glance.
    pub fn summary(&self) -> String {
        let v = self.verdict();
        let verdict = match self.status {
            Status::Ok => "OK: no misplaced socket-LB programs".to_owned(),
            Status::Problem => format!("PROBLEM: {} finding(s), {} critical", v.findings, v.critical),
            Status::Incomplete => "INCOMPLETE: part of the node is out of view; not reporting clean".to_owned(),
        };
        let line = format!(
            "{verdict} | node {} | root {} (cgroup id {}, {}) | {} cgroups scanned, {} vanished, {} attachments",
            self.node,
            self.cgroup_root,
            self.root_cgroup_id,
            self.root_kind_text(),
            self.cgroups_scanned,
            self.cgroups_vanished,
            self.attachments.len()
        );
        crate::text::escape(&line).into_owned()
    }

    /// One line for node-problem-detector (`--output summary`): the
    /// verdict under `fail_on` and the top finding (kind, pod, container,
    /// hooks), most important first, at most `ONE_LINE_MAX` bytes, escaped.
    pub fn one_line(&self, fail_on: FailOn) -> String {
        let failing: Vec<&Finding> = self.failing(fail_on).collect();
        let line = if let Some(top) = failing.first() {
            let critical = failing.iter().filter(|f| f.severity == Severity::Critical).count();
            format!(
                "PROBLEM ({} finding{}, {critical} critical): {}",
                failing.len(),
                if failing.len() == 1 { "" } else { "s" },
                self.describe(top)
            )
        } else if let Some(reason) = &self.view.reason {
            format!("UNKNOWN: {reason}")
        } else {
            let at_root: BTreeSet<(Owner, AttachType)> = self
                .attachments
                .iter()
                .filter(|a| a.cgroup == "/" && a.owner.balances_sockets() && a.attach_type.is_socket_address())
                .map(|a| (a.owner, a.attach_type))
                .collect();
            let owners: BTreeSet<&str> = at_root.iter().map(|(o, _)| o.title()).collect();
            let mut line = if at_root.is_empty() {
                "OK: no socket-LB programs on this node, none misplaced".to_owned()
            } else {
                format!(
                    "OK: {} socket LB attached at the root cgroup ({} hook{}), none misplaced",
                    owners.into_iter().collect::<Vec<_>>().join(" and "),
                    at_root.len(),
                    if at_root.len() == 1 { "" } else { "s" }
                )
            };
            if !self.findings.is_empty() {
                let kinds: BTreeSet<&str> = self.findings.iter().map(|f| f.kind.as_str()).collect();
                line.push_str(&format!(
                    "; {} warning{}: {}",
                    self.findings.len(),
                    if self.findings.len() == 1 { "" } else { "s" },
                    kinds.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
            line
        };
        let line = crate::text::escape(&line).into_owned();
        if line.len() <= ONE_LINE_MAX {
            return line;
        }
        let mut cut = ONE_LINE_MAX - 3;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}...", &line[..cut])
    }

    /// A finding in a few words: its kind, where (pod and container, or
    /// cgroup), and the hooks of the findings of its kind there.
    fn describe(&self, f: &Finding) -> String {
        let mut s = f.kind.as_str().to_owned();
        let pod = match (&f.pod_namespace, &f.pod_name, &f.pod_uid) {
            (Some(ns), Some(name), _) => Some(format!("{ns}/{name}")),
            (_, _, Some(uid)) => Some(uid.clone()),
            _ => None,
        };
        let container =
            f.container_name.clone().or_else(|| f.container_id.as_ref().map(|c| c.chars().take(12).collect()));
        match (pod, container) {
            (Some(p), Some(c)) => s.push_str(&format!(" in pod {p} container {c}")),
            (Some(p), None) => s.push_str(&format!(" in pod {p}")),
            _ => {
                if let Some(m) = &f.mount_point {
                    s.push_str(&format!(" at {m}"));
                } else if let Some(c) = f.cgroup.as_deref().filter(|c| *c != "/") {
                    s.push_str(&format!(" at {c}"));
                }
            }
        }
        let hooks: BTreeSet<AttachType> = self
            .findings
            .iter()
            .filter(|g| g.kind == f.kind && g.cgroup == f.cgroup && g.owner == f.owner)
            .flat_map(|g| g.attach_type.into_iter().chain(g.hooks.iter().copied()))
            .collect();
        if !hooks.is_empty() {
            let owner = f.owner.map(|o| format!("{} ", o.as_str())).unwrap_or_default();
            let names: Vec<&str> = hooks.into_iter().map(AttachType::name).collect();
            s.push_str(&format!(": {owner}{}", names.join(",")));
        }
        // pod_outside_datapath: the owner and the pod's interface, or for
        // the node's one finding, its pods.
        if f.kind == findings::Kind::PodOutsideDatapath {
            let owner = f.owner.map_or("unknown", Owner::as_str);
            match f.interfaces.first() {
                Some(i) if f.pod_uid.is_some() => s.push_str(&format!(": {owner} not on {}", i.name)),
                _ => s.push_str(&format!(": {owner} down")),
            }
        }
        if f.kind == findings::Kind::PodsWithoutSocketLb
            || (f.kind == findings::Kind::PodOutsideDatapath && f.pod_uid.is_none())
        {
            let names: Vec<String> = f
                .pods
                .iter()
                .take(3)
                .map(|p| match (&p.namespace, &p.name) {
                    (Some(ns), Some(n)) => format!("{ns}/{n}"),
                    _ => p.uid.clone(),
                })
                .collect();
            s.push_str(&format!(
                ": {} pod{} ({})",
                f.count.unwrap_or(0),
                if f.count == Some(1) { "" } else { "s" },
                names.join(", ")
            ));
        }
        s
    }

    pub fn to_table(&self) -> String {
        let mut s = Lines::default();
        s.line(format_args!("{}", self.summary()));
        if let Some(note) = &self.root_note {
            s.line(format_args!("note: {note}"));
        }
        if let Some(reason) = self.view.reason.as_ref().filter(|r| Some(*r) != self.root_note.as_ref()) {
            s.line(format_args!("note: incomplete view: {reason}"));
        }
        if let Some(reason) = &self.walk.fallback_reason {
            s.line(format_args!("note: cgroups read by syscalls, not in one kernel pass: {reason}"));
        }
        if !self.unsupported_attach_types.is_empty() {
            let names: Vec<&str> = self.unsupported_attach_types.iter().map(|t| t.name()).collect();
            s.line(format_args!("note: attach types this kernel does not support (not queried): {}", names.join(", ")));
        }
        let skipped = self.objects_skipped.described();
        if !skipped.is_empty() {
            s.line(format_args!("note: went on without {}", skipped.join(", ")));
        }
        if !self.findings.is_empty() {
            s.blank();
            s.line(format_args!("FINDINGS"));
            // Findings of one kind on one cgroup share their explanation: show
            // it once, with the programs it covers listed.
            // One cause has one fix: printed under its first finding only.
            let mut fixes = Vec::new();
            let shown: Vec<Finding> = super::shown(&self.findings).cloned().collect();
            for group in shown.chunk_by(|a, b| a.kind == b.kind && a.cgroup == b.cgroup && a.owner == b.owner) {
                write_finding_group(&mut s, group, &mut fixes);
            }
            for (kind, n) in &self.findings_omitted {
                s.line(format_args!(
                    "... and {n} more {} finding{} (at most {} of a kind are listed)",
                    kind.as_str(),
                    if *n == 1 { "" } else { "s" },
                    super::FINDINGS_SHOWN
                ));
            }
        }
        if !self.errors.is_empty() {
            s.blank();
            s.line(format_args!("ERRORS (the audit went on without these)"));
            for e in &self.errors {
                s.line(format_args!("  {} {}: {}", e.op, e.path, e.message));
            }
        }
        s.blank();
        s.line(format_args!("ATTACHMENTS"));
        s.line(format_args!("CgroupPath"));
        s.line(format_args!("ID       AttachType      AttachFlags     Name                       Owner    Link"));
        let mut last: Option<&str> = None;
        for group in self.attachments.chunk_by(|a, b| a.cgroup_id == b.cgroup_id) {
            self.write_attachments(&mut s, group, &mut last);
            if group.len() > super::ATTACHMENTS_SHOWN {
                s.line(format_args!(
                    "    ... and {} more on this cgroup (at most {} of one cgroup are listed)",
                    group.len() - super::ATTACHMENTS_SHOWN,
                    super::ATTACHMENTS_SHOWN
                ));
            }
        }
        if self.attachments.is_empty() {
            s.line(format_args!("(no programs attached to any cgroup)"));
        }
        self.write_pod_interfaces(&mut s);
        self.write_host_devices(&mut s);
        // The verdict again where the eye ends up: after a long list of
        // attachments the first line has scrolled away.
        s.blank();
        s.line(format_args!("{}", self.summary()));
        s.into_string()
    }

    /// The node's own devices that carry programs, each hook's in the order
    /// they run, with owner and proof (`bpftool net show`, and whose).
    fn write_host_devices(&self, s: &mut Lines) {
        use crate::snapshot::net::Via;
        let d = &self.datapath.devices;
        if let Some(e) = &d.error {
            s.blank();
            s.line(format_args!("HOST DEVICES: not read: {e}"));
            return;
        }
        let with: Vec<_> = d.devices.iter().filter(|x| !x.programs.is_empty() || !x.errors.is_empty()).collect();
        if with.is_empty() && d.not_read == 0 {
            return;
        }
        s.blank();
        s.line(format_args!(
            "HOST DEVICES ({} with programs of the node's {} devices read{}{}{})",
            with.len(),
            d.devices.len(),
            if d.not_read > 0 { format!(", {} not read", d.not_read) } else { String::new() },
            if d.idle_not_listed > 0 {
                format!(", {} more with nothing on them", d.idle_not_listed)
            } else {
                String::new()
            },
            d.kept_after
                .as_ref()
                .map_or(String::new(), |e| format!("; the last good read, kept: the latest failed: {e}"))
        ));
        s.line(format_args!(
            "    Device           Driver  Hook            #  ID       Name                       Owner    Proof        Via"
        ));
        for dev in with {
            for p in &dev.programs {
                let via = match &p.via {
                    Via::Filter { prio, handle, .. } => format!("tc filter pref {prio} handle {handle:#x}"),
                    Via::Link { link_id } => format!("link {link_id}"),
                    Via::Attached => p.xdp_mode.map_or(String::new(), |m| format!("{m:?}").to_lowercase()),
                };
                let proof = p.proof.map_or("-", |p| p.as_str());
                s.line(format_args!(
                    "    {:<16} {:<7} {:<15} {:<2} {:<8} {:<26} {:<8} {:<12} {via}",
                    dev.name,
                    dev.driver,
                    p.hook.as_str(),
                    p.position,
                    p.prog_id,
                    p.prog_name,
                    p.owner.map_or("-", |o| o.as_str()),
                    proof,
                ));
            }
            for e in &dev.errors {
                s.line(format_args!("    {:<16} {:<7} not read: {e}", dev.name, dev.driver));
            }
        }
    }

    /// The pods' host-side interfaces and their programs: only on a node
    /// whose pods have interfaces of their own.
    fn write_pod_interfaces(&self, s: &mut Lines) {
        use crate::snapshot::net::{Net, Via};
        let d = &self.datapath;
        let with: Vec<_> = d.pods.iter().filter(|p| matches!(p.net, Net::Interfaces { .. })).collect();
        if let Some(e) = &d.error {
            s.blank();
            s.line(format_args!("POD INTERFACES: not read: {e}"));
            return;
        }
        if with.is_empty() {
            return;
        }
        let owners: Vec<String> = d
            .owners
            .iter()
            .map(|o| match d.configured.iter().find(|c| c.owner == *o) {
                Some(c) => format!("{} ({})", o.as_str(), c.source),
                None => o.as_str().to_owned(),
            })
            .collect();
        let host = d.pods.iter().filter(|p| p.net == Net::HostNetwork).count();
        let unread = d.pods.iter().filter(|p| matches!(p.net, Net::Unreadable { .. })).count();
        s.blank();
        s.line(format_args!(
            "POD INTERFACES (datapath: {}; {} pod{} with interfaces, {host} hostNetwork, not judged)",
            if owners.is_empty() { "none".to_owned() } else { owners.join(", ") },
            with.len(),
            if with.len() == 1 { "" } else { "s" },
        ));
        if unread > 0 {
            s.line(format_args!(
                "note: {unread} pod(s) not judged: their network could not be read (the JSON's datapath.pods say why)"
            ));
        }
        s.line(format_args!("Pod"));
        s.line(format_args!(
            "    Interface        Driver  Hook            ID       Name                       Owner    Via"
        ));
        for p in with {
            match (&p.namespace, &p.name) {
                (Some(ns), Some(n)) => s.line(format_args!("{ns}/{n} (uid {})", p.pod_uid)),
                _ => s.line(format_args!("pod {} ({})", p.pod_uid, p.cgroup)),
            }
            for i in p.interfaces() {
                if i.programs.is_empty() {
                    s.line(format_args!("    {:<16} {:<7} (no programs)", i.name, i.driver));
                }
                for prog in &i.programs {
                    let owner = prog.endpoint_owner().map_or("-", |o| o.as_str());
                    let via = match &prog.via {
                        Via::Filter { prio, handle, .. } => format!("tc filter pref {prio} handle {handle:#x}"),
                        Via::Link { link_id } => format!("link {link_id}"),
                        Via::Attached => String::new(),
                    };
                    s.line(format_args!(
                        "    {:<16} {:<7} {:<15} {:<8} {:<26} {:<8} {via}",
                        i.name,
                        i.driver,
                        prog.hook.as_str(),
                        prog.prog_id,
                        prog.prog_name,
                        owner
                    ));
                }
                for e in &i.errors {
                    s.line(format_args!("    {:<16} {:<7} not read: {e}", i.name, i.driver));
                }
            }
        }
    }

    fn write_attachments<'a>(&'a self, s: &mut Lines, group: &'a [super::AttachmentOut], last: &mut Option<&'a str>) {
        for a in group.iter().take(super::ATTACHMENTS_SHOWN) {
            if *last != Some(a.cgroup.as_str()) {
                // Full paths, as `bpftool cgroup tree` prints them.
                let full = if a.cgroup == "/" {
                    self.cgroup_root.clone()
                } else {
                    format!("{}{}", self.cgroup_root.trim_end_matches('/'), a.cgroup)
                };
                s.line(format_args!("{full}"));
                *last = Some(&a.cgroup);
            }
            // Where the order is not the default (attach order), say so:
            // a BPF_F_PREORDER program runs before the others.
            let flags = match (a.attach_flags, a.preorder == Some(true)) {
                (AttachFlags::None, false) => String::new(),
                (AttachFlags::None, true) => "preorder".to_owned(),
                (f, false) => f.as_str().to_owned(),
                (f, true) => format!("{},preorder", f.as_str()),
            };
            s.line(format_args!(
                "    {:<8} {:<15} {:<15} {:<26} {:<8} {}",
                a.prog_id,
                a.attach_type.name(),
                flags,
                a.prog_name.as_deref().unwrap_or("?"),
                a.owner.as_str(),
                a.link_id.map(|l| format!("link {l}")).unwrap_or_default()
            ));
        }
    }
}

fn item(f: &Finding) -> String {
    let mut item = String::new();
    if let Some(t) = f.attach_type {
        let _ = write!(item, " {t}");
    }
    if let Some(name) = &f.prog_name {
        let _ = write!(item, " {name}");
    }
    if let Some(id) = f.prog_id {
        let _ = write!(item, " (prog {id})");
    }
    item
}

fn write_finding_group<'a>(s: &mut Lines, group: &'a [Finding], fixes: &mut Vec<&'a str>) {
    let f = &group[0];
    let mut head = format!("[{}] {}", f.severity.as_str(), f.kind.as_str());
    if group.len() == 1 && f.programs.len() > 1 {
        let _ = write!(head, " x{}", f.count.unwrap_or(f.programs.len() as u64));
    } else if group.len() == 1 && f.programs.is_empty() && f.hooks.len() > 1 {
        let _ = write!(head, " x{}", f.hooks.len());
    } else if group.len() == 1 {
        head.push_str(&item(f));
    } else {
        let _ = write!(head, " x{}", group.len());
    }
    if let Some(c) = &f.cgroup {
        let _ = write!(head, " at {c}");
    }
    s.line(format_args!("{head}"));
    if group.len() > 1 {
        let items: Vec<String> = group.iter().map(|f| item(f).trim_start().to_owned()).collect();
        s.line(format_args!("    what:  {}", items.join(", ")));
    } else if f.programs.len() > 1 {
        let items: Vec<String> =
            f.programs.iter().map(|p| format!("{} {} (prog {})", p.attach_type, p.prog_name, p.prog_id)).collect();
        let more = f.count.unwrap_or(0).saturating_sub(items.len() as u64);
        let more = if more > 0 { format!(", and {more} more") } else { String::new() };
        s.line(format_args!("    what:  {}{more}", items.join(", ")));
    } else if f.programs.is_empty() && f.hooks.len() > 1 {
        let names: Vec<&str> = f.hooks.iter().map(|h| h.name()).collect();
        s.line(format_args!("    what:  {}", names.join(", ")));
    }
    let mut who = Vec::new();
    match (&f.pod_uid, &f.pod_namespace, &f.pod_name) {
        (Some(uid), Some(ns), Some(name)) => who.push(format!("pod {ns}/{name} (uid {uid})")),
        (Some(uid), _, _) => who.push(format!("pod {uid}")),
        _ => {}
    }
    match (&f.container_id, &f.container_name) {
        (Some(id), Some(name)) => {
            let runtime = f.runtime.map(|r| format!("{r} ")).unwrap_or_default();
            who.push(format!("container {name} ({runtime}{}…)", &id[..id.len().min(12)]));
        }
        (Some(id), None) => {
            who.push(format!("container {id}"));
            if let Some(r) = f.runtime {
                who.push(format!("runtime {r}"));
            }
        }
        (None, _) => {
            if let Some(r) = f.runtime {
                who.push(format!("runtime {r}"));
            }
        }
    }
    if let Some(q) = f.qos {
        who.push(format!("qos {q}"));
    }
    // A pod's finding (pod_outside_datapath): its containers, by name; the
    // node's: its pods.
    if f.kind == findings::Kind::PodOutsideDatapath && f.pod_uid.is_none() {
        let pods: Vec<String> = f
            .pods
            .iter()
            .map(|p| match (&p.namespace, &p.name) {
                (Some(ns), Some(n)) => format!("{ns}/{n}"),
                _ => p.uid.clone(),
            })
            .collect();
        let more = f.count.unwrap_or(0).saturating_sub(pods.len() as u64);
        who.push(format!(
            "pods {}{}",
            pods.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ));
    } else if f.kind == findings::Kind::PodOutsideDatapath
        && let Some(p) = f.pods.first()
    {
        let named: Vec<&str> = p.containers.iter().filter_map(|c| c.name.as_deref()).collect();
        if !named.is_empty() {
            who.push(format!("containers {}", named.join(", ")));
        }
    }
    if !f.processes.is_empty() {
        let procs: Vec<String> = f.processes.iter().take(5).map(|p| format!("{} ({})", p.comm, p.pid)).collect();
        who.push(format!("processes {}", procs.join(", ")));
    }
    if !who.is_empty() {
        s.line(format_args!("    where: {}", who.join("; ")));
    }
    let why = if group.len() == 1 { f.message.as_str() } else { f.kind.explanation() };
    s.line(format_args!("    why:   {why}"));
    if fixes.contains(&f.remediation.as_str()) {
        s.line(format_args!("    fix:   the same as above."));
    } else {
        s.line(format_args!("    fix:   {}", f.remediation));
        fixes.push(&f.remediation);
    }
}
