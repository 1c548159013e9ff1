//! Guests booted with cgroup2 at /sys/fs/cgroup.

mod events;
mod seed;
