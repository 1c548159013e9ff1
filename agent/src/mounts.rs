//! Pure mountinfo handling: parse `/proc/<pid>/mountinfo` text and pick out
//! cgroup2 mounts.
//!
//! Field 4 (the mount's root) is relative to the *reader's* cgroup namespace
//! for cgroup2, so it is evidence, not a verdict: the audit judges a mount by
//! the cgroup id of its top directory and uses field 4 only when the reader is
//! known to sit in the host's cgroup namespace.

use std::path::PathBuf;

use crate::owner::Cni;

/// One line of mountinfo, with its octal escapes (`\040`) decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub mount_id: i32,
    pub parent_id: i32,
    /// Major:minor of the filesystem (all cgroup2 mounts share one superblock).
    pub majmin: String,
    /// Field 4: the directory of the filesystem mounted here.
    pub root: String,
    pub mount_point: PathBuf,
    pub fs_type: String,
}

#[derive(Debug, thiserror::Error)]
#[error("mountinfo line {line_no} is malformed: {line:?}")]
pub struct MountinfoError {
    pub line_no: usize,
    pub line: String,
}

/// Decodes the kernel's `\ooo` escapes (space, tab, newline, backslash) that
/// `show_mountinfo` applies to paths. procfs leaves them encoded.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') as u32 * 64 + (b[i + 2] - b'0') as u32 * 8 + (b[i + 3] - b'0') as u32;
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text. Empty lines are ignored; a malformed line is an
/// error naming it (a truncated read is better reported than half-trusted).
pub fn parse_mountinfo(text: &str) -> Result<Vec<Mount>, MountinfoError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let m = procfs::process::MountInfo::from_line(line)
                .map_err(|_| MountinfoError { line_no: i + 1, line: line.to_owned() })?;
            Ok(Mount {
                mount_id: m.mnt_id,
                parent_id: m.pid,
                majmin: m.majmin,
                root: unescape(&m.root),
                mount_point: PathBuf::from(unescape(&m.mount_point.to_string_lossy())),
                fs_type: m.fs_type,
            })
        })
        .collect()
}

impl Mount {
    pub fn is_cgroup2(&self) -> bool {
        self.fs_type == "cgroup2"
    }

    /// The CNI that attaches through a mount at this path.
    pub fn cni_owner(&self) -> Option<Cni> {
        Cni::from_mount_point(&self.mount_point)
    }
}

/// The mount on top at `path` (others may be stacked below it): the one no
/// other mount at the same point is mounted on.
pub fn top_mount_at<'a>(mounts: &'a [Mount], path: &std::path::Path) -> Option<&'a Mount> {
    let at: Vec<&Mount> = mounts.iter().filter(|m| m.mount_point == path).collect();
    at.iter().copied().find(|m| !at.iter().any(|o| o.parent_id == m.mount_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:10 - cgroup cgroup rw,cpu
";

    #[test]
    fn hybrid_host_has_one_cgroup2_mount_at_unified() {
        let m = parse_mountinfo(HYBRID).unwrap();
        let cg2: Vec<_> = m.iter().filter(|m| m.is_cgroup2()).collect();
        assert_eq!(cg2.len(), 1);
        assert_eq!(cg2[0].mount_point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(cg2[0].root, "/");
        assert_eq!(cg2[0].majmin, "0:38");
    }

    #[test]
    fn optional_fields_of_any_number_are_skipped() {
        let line = "900 27 0:38 / /run/cilium/cgroupv2 rw,relatime shared:1 master:2 propagate_from:3 unbindable - cgroup2 none rw";
        let m = &parse_mountinfo(line).unwrap()[0];
        assert_eq!(m.fs_type, "cgroup2");
        assert_eq!(m.cni_owner(), Some(Cni::Cilium));
    }

    #[test]
    fn no_optional_fields_at_all() {
        let m = &parse_mountinfo("5 1 0:38 / /x rw - cgroup2 cgroup2 rw").unwrap()[0];
        assert_eq!(m.mount_point, PathBuf::from("/x"));
    }

    #[test]
    fn escaped_spaces_tabs_and_backslashes_are_decoded() {
        let line = r"77 27 0:38 /kube\040pods /mnt/my\040dir\011x\134y rw - cgroup2 none rw";
        let m = &parse_mountinfo(line).unwrap()[0];
        assert_eq!(m.root, "/kube pods");
        assert_eq!(m.mount_point, PathBuf::from("/mnt/my dir\tx\\y"));
    }

    #[test]
    fn namespaced_roots_are_kept_verbatim() {
        // A mount made inside a container's cgroupns, read from the host, and the
        // host's mount read from inside a private cgroupns.
        let text = "\
88 27 0:38 /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podf8371831_8021_4722_af27_93c925d25a14.slice/docker-fbbef81081fd.scope /run/cilium/cgroupv2 rw - cgroup2 none rw
89 27 0:38 /../.. /sys/fs/cgroup rw - cgroup2 cgroup2 rw
";
        let m = parse_mountinfo(text).unwrap();
        assert!(m[0].root.ends_with("docker-fbbef81081fd.scope"));
        assert_eq!(m[1].root, "/../..");
        assert_eq!(m[1].cni_owner(), None);
    }

    #[test]
    fn truncated_line_is_an_error_naming_it() {
        let err = parse_mountinfo("41 31 0:38 / /sys/fs/cgroup/unified rw\n").unwrap_err();
        assert_eq!(err.line_no, 1);
        assert!(err.to_string().contains("malformed"));
    }

    #[test]
    fn top_of_stacked_mounts_is_the_one_mounted_last_on_the_point() {
        let text = "\
27 1 254:0 / / rw - ext4 /dev/vda rw
90 27 0:40 / /run rw - tmpfs tmpfs rw
91 90 0:38 / /run/cilium/cgroupv2 rw - cgroup2 none rw
92 91 0:38 /kubepods/pod1/ctr /run/cilium/cgroupv2 rw - cgroup2 none rw
";
        let m = parse_mountinfo(text).unwrap();
        let top = top_mount_at(&m, std::path::Path::new("/run/cilium/cgroupv2")).unwrap();
        assert_eq!(top.mount_id, 92);
        assert!(top_mount_at(&m, std::path::Path::new("/run/calico/cgroup")).is_none());
    }

    #[test]
    fn backslash_without_octal_is_literal() {
        assert_eq!(unescape(r"a\b\12"), r"a\b\12");
        assert_eq!(unescape(r"\777"), r"\777");
    }
}
