//! Everything the agent asks the kernel about BPF objects.

pub mod attach_type;
pub mod btf;
pub mod iter;
pub mod loader;
pub mod programs;
pub mod query;
pub mod sys;

pub use attach_type::{AttachFlags, AttachType};
