//! The bpf(2) commands that change cgroup attachments (and the one change
//! that needs no command: a cgroup link released).

use serde::Serialize;

/// A command of `bpf(2)` that attaches, replaces or detaches a cgroup program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum BpfCommand {
    ProgAttach,
    ProgDetach,
    LinkCreate,
    LinkUpdate,
    LinkDetach,
    /// Not a command: a cgroup link ended because its last fd was closed
    /// (or it was detached; the kernel reports both).
    LinkReleased,
}

impl BpfCommand {
    /// The command with this `enum bpf_cmd` value, if it is one of these.
    pub fn from_kernel(cmd: u32) -> Option<BpfCommand> {
        use aya_obj::generated::bpf_cmd::*;
        Some(match cmd {
            c if c == BPF_PROG_ATTACH as u32 => BpfCommand::ProgAttach,
            c if c == BPF_PROG_DETACH as u32 => BpfCommand::ProgDetach,
            c if c == BPF_LINK_CREATE as u32 => BpfCommand::LinkCreate,
            c if c == BPF_LINK_UPDATE as u32 => BpfCommand::LinkUpdate,
            c if c == BPF_LINK_DETACH as u32 => BpfCommand::LinkDetach,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether a successful call adds a program to the hook it names.
    pub fn attaches(self) -> bool {
        matches!(self, BpfCommand::ProgAttach | BpfCommand::LinkCreate)
    }

    /// Whether the call names its hook (the others act on a link).
    pub fn names_hook(self) -> bool {
        matches!(self, BpfCommand::ProgAttach | BpfCommand::ProgDetach | BpfCommand::LinkCreate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_values_and_names() {
        assert_eq!(BpfCommand::from_kernel(8), Some(BpfCommand::ProgAttach));
        assert_eq!(BpfCommand::from_kernel(34), Some(BpfCommand::LinkDetach));
        assert_eq!(BpfCommand::from_kernel(0), None, "BPF_MAP_CREATE is not one of them");
        assert_eq!(BpfCommand::LinkUpdate.as_str(), "link_update");
        assert_eq!(serde_json::to_value(BpfCommand::ProgDetach).unwrap(), "prog_detach");
    }
}
