//! Guests booted with cgroup2 at /sys/fs/cgroup.

mod daemon;
mod datapath;
mod devices;
mod events;
mod owners;
mod remount;
mod seed;
