//! What cgaudit's eBPF programs and the agent exchange, defined once: the
//! records the programs write to ring buffers and the layouts the agent
//! hands them as read-only globals. Plain `#[repr(C)]` data with explicit
//! padding, `no_std` so the eBPF crate can use it; the agent enables the
//! `user` feature, which makes each type `aya::Pod`.

#![no_std]

pub mod cgroup_events;
pub mod cgroup_iter;
