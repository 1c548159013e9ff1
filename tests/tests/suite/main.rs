//! The integration suite against the real kernel of this machine: one test
//! binary (one link, not eighteen), a module per behaviour area. Run one
//! thread at a time (`--test-threads=1`): the tests share the kernel, and
//! some audit the whole node, which another test's programs would disturb.

mod attachments;
mod bad_input;
mod churn;
mod cri;
mod daemon;
mod deploy;
mod docker;
mod docs;
mod family;
mod hostile;
mod incremental;
mod node;
mod owners;
mod podman;
mod remount;
mod seed;
mod ship;
mod sources;
mod traffic;
mod walk;
