//! The guest suite: what only a kernel of the matrix can prove, run by
//! `cargo xtask test` inside QEMU on Debian's 5.10, 6.1 and 6.12 (see
//! xtask/src/guest.rs). Each module is a boot profile: `v2` boots with
//! cgroup2 mounted as systemd's unified layout has it, `v1` with cgroup v1
//! controllers only. The tests use the real root cgroup, PID 1's namespaces
//! and real mounts, and refuse to run anywhere but in a guest.
//!
//! Not a default test target (`test = false` in Cargo.toml): `cargo test`
//! on a host never runs it.

mod v1;
mod v2;
