//! `pod_network_unreadable`: on a node configured for an eBPF per-endpoint
//! datapath (or whose network policy agent pins each pod's programs:
//! `endpoint_program_stale`), pods whose network could not be read, so whether they are in
//! it (`pod_outside_datapath`) is not known. Never silently dropped: a pod
//! with CAP_NET_ADMIN can make its own network unreadable (a renamed
//! `eth0`, a namespace that will not answer), and without a user namespace
//! can reach other pods' through the node's namespace ids (issue 47, M1).
//! One finding for the node, naming up to `NODE_SHOWN` pods.

use super::outside_datapath::{NODE_SHOWN, datapaths, pod_named};
use super::*;
use crate::snapshot::net::Net;

pub(super) const EXPLANATION: &str = "these pods' networks could not be read, so whether the CNI's datapath covers them is not known: a pod with CAP_NET_ADMIN can cause this for itself, and without a user namespace for other pods.";

pub(super) fn network_unreadable(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    // A node whose per-pod programs are pinned per pod (the AWS network
    // policy agent's) judges each pod's too: a pod that renames its eth0
    // must not hide a stale program that way (red team 51, S1).
    let Some(owner) = datapaths(snap).first().copied().or_else(|| super::stale_program::pinning_owner(snap)) else {
        return;
    };
    let unread: Vec<(&crate::snapshot::net::PodNet, String)> = snap
        .pod_networks
        .pods
        .iter()
        .filter_map(|p| match &p.net {
            Net::Unreadable { reason } => Some((p, reason.clone())),
            Net::Interfaces { interfaces, .. } => {
                interfaces.iter().find_map(|i| i.errors.first().map(|e| format!("{}: {e}", i.name))).map(|why| (p, why))
            }
            _ => None,
        })
        .collect();
    let Some((first, why)) = unread.first() else { return };
    let n = unread.len();
    let message = format!(
        "the network of {n} pod{s} could not be read, so whether {title}'s datapath covers {them} is not known \
         (pod {uid}: {why}{more}).",
        s = if n == 1 { "" } else { "s" },
        title = owner.title(),
        them = if n == 1 { "it" } else { "them" },
        uid = first.pod_uid,
        why = why.chars().take(200).collect::<String>(),
        more = if n > 1 { format!("; and {} more: datapath.pods[].reason says why", n - 1) } else { String::new() },
    );
    let remediation = "read why in `agent audit --output json | jq '.datapath.pods[] | select(.network==\"unreadable\")'`. \
        A pod needs CAP_NET_ADMIN to rename its eth0 or to make its network namespace fail to answer, and without a user \
        namespace it reaches other pods' namespaces through the node's: run pods with `hostUsers: false`, or deny \
        CAP_NET_ADMIN by policy (Pod Security baseline). Once the network can be read, the pods are judged again."
        .to_owned();
    let mut f = Finding::new(Kind::PodNetworkUnreadable, Severity::Warning, message, remediation);
    f.owner = Some(owner);
    f.count = Some(n as u64);
    for (p, _) in unread.iter().take(NODE_SHOWN) {
        f.pods.extend(pod_named(snap, &p.pod_uid));
    }
    out.push(f);
}
