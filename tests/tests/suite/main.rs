//! The integration suite against the real kernel of this machine: one test
//! binary (one link, not eighteen), a module per behaviour area. Run one
//! thread at a time (`--test-threads=1`): the tests share the kernel, and
//! some audit the whole node, which another test's programs would disturb.

// what the audit lists and judges, attachment by attachment
mod attachments;
// bad input and missing privileges: one clear line, exit 2
mod bad_input;
// cgroups made and removed while audits run
mod churn;
// the CNIs' program hygiene: duplicates, full hooks, configured but not attached, leftovers, foreign programs
mod cni_hygiene;
// pods made through containerd's CRI, named as an SRE acts on them
mod cri;
// `agent run`: metrics, health, the alert's series
mod daemon;
// pods outside the CNI's datapath: real CNI pods, tc and tcx, traffic
mod datapath;
// the chart, the rules, NPD and the Operator, as users deploy them
mod deploy;
// the node's own devices: the CNI's device programs, duplicates, leftovers, order
mod devices;
// Kubernetes on Docker (cri-dockerd), the seed's runtime
mod docker;
// every command block of the documentation runs as written
mod docs;
// one file per attack surface a pod controls
mod hostile;
// the daemon's picture kept by events equals a fresh audit
mod incremental;
// audits of the whole node (no --cgroup-root)
mod node;
// every owner of the registry judged by what it intends
mod owners;
// the seed through a real container runtime
mod podman;
// `agent remount` on sandbox nodes: plan, apply, verify
mod remount;
// the failure cgaudit exists for, end to end
mod seed;
// what ships: the static binary over ssh, the image as kubectl debug runs it
mod ship;
// `agent run`'s event sources this machine allows
mod sources;
// the verdict equals what socket-LB traffic does
mod traffic;
// the two walks agree
mod walk;
