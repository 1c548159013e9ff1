//! Guests booted with cgroup v1 controllers only: nothing mounts cgroup2,
//! as on a legacy node before a CNI mounts its own.

mod net_cls;
mod no_cgroup2;
