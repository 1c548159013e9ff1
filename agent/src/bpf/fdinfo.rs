//! What `/proc/self/fdinfo/<fd>` says of a BPF object the agent holds: the
//! kernel prints it from the object itself (`bpf_link_show_fdinfo`), so it
//! answers where `BPF_OBJ_GET_INFO_BY_FD` refuses (a uprobe_multi link whose
//! file path is longer than PATH_MAX). Only the link's type is read.

use std::os::fd::{AsRawFd, BorrowedFd};

/// The link's type as the kernel names it (`cgroup`, `uprobe_multi`,
/// `tcx`, ...), or `None` when its fdinfo cannot be read or does not say.
pub fn link_type(fd: BorrowedFd<'_>) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    field(&text, "link_type").map(str::to_owned)
}

/// What kind of BPF object an fd is, as its anonymous inode is named
/// (`anon_inode:bpf-link`, `bpf-prog`, `bpf-map`): `BPF_OBJ_GET_INFO_BY_FD`
/// answers for any of them with that object's own info, so a program's
/// read as a link's gives a link of the program's type (SCHED_CLS, 3, is
/// BPF_LINK_TYPE_CGROUP) and ids from its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Object {
    Link,
    Program,
    Map,
}

pub fn object(fd: BorrowedFd<'_>) -> Option<Object> {
    let target = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    match target.to_str()? {
        "anon_inode:bpf-link" => Some(Object::Link),
        "anon_inode:bpf-prog" => Some(Object::Program),
        "anon_inode:bpf-map" => Some(Object::Map),
        _ => None,
    }
}

/// The value of `key` in fdinfo text (`key:\tvalue` lines).
fn field<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')).map(str::trim).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_type_is_read_from_its_own_line() {
        let text = "pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t2069\nlink_type:\tuprobe_multi\nlink_id:\t7\n\
                    prog_tag:\t6a2f0e1ab6c4b3a9\nprog_id:\t41\n";
        assert_eq!(field(text, "link_type"), Some("uprobe_multi"));
        assert_eq!(field(text, "link_id"), Some("7"));
        assert_eq!(field("link_type_x:\tcgroup\n", "link_type"), None, "a key is matched whole");
        assert_eq!(field("link_type:\t\n", "link_type"), None);
        assert_eq!(field("", "link_type"), None);
    }

    #[test]
    fn an_fd_says_which_object_it_is() {
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(object(std::os::fd::AsFd::as_fd(&f)), None);
        let m = crate::bpf::sys::map_create(1, 4, 4, 1, "t").expect("BPF_MAP_CREATE");
        assert_eq!(object(std::os::fd::AsFd::as_fd(&m)), Some(Object::Map));
    }

    #[test]
    fn a_real_link_fd_names_its_type() {
        // An fd of another kind says no link type.
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(link_type(std::os::fd::AsFd::as_fd(&f)), None);
    }
}
