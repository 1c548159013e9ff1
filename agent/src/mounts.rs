//! Pure mountinfo handling: parse `/proc/<pid>/mountinfo` and pick out
//! cgroup2 mounts.
//!
//! The format is the kernel's `show_mountinfo`: fields separated by single
//! spaces; in paths only space, tab, newline and backslash are escaped
//! (`\ooo`); anything else, other whitespace and non-UTF-8 bytes included,
//! appears as is. A path is chosen by whoever makes the mount (a pod's
//! `subPath` is bind-mounted in the host's namespace under its own name),
//! so the parser splits on the space byte only, keeps paths as bytes, and
//! skips (and reports) a line it cannot read instead of failing the file.
//!
//! Field 4 (the mount's root) is relative to the *reader's* cgroup namespace
//! for cgroup2, so it is evidence, not a verdict: the audit judges a mount by
//! the cgroup id of its top directory and uses field 4 only when the reader is
//! known to sit in the host's cgroup namespace.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// One line of mountinfo, with its octal escapes (`\040`) decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub mount_id: i32,
    pub parent_id: i32,
    /// Major:minor of the filesystem (all cgroup2 mounts share one superblock).
    pub majmin: String,
    /// Field 4: the directory of the filesystem mounted here (lossy UTF-8,
    /// for display and prefix tests).
    pub root: String,
    pub mount_point: PathBuf,
    pub fs_type: String,
    /// The last field: the filesystem's own options (for cgroup v1, its
    /// controllers: `rw,net_cls,net_prio`).
    pub super_options: String,
}

/// A line the parser could not read (skipped; the others stand).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mountinfo line {line_no} is malformed ({why}), skipped: {line:?}")]
pub struct MountinfoError {
    pub line_no: usize,
    pub why: &'static str,
    pub line: String,
}

/// A parsed mountinfo file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mountinfo {
    pub mounts: Vec<Mount>,
    pub skipped: Vec<MountinfoError>,
}

/// Decodes the kernel's `\ooo` escapes (space, tab, newline, backslash).
pub fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' && i + 3 < s.len() && s[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (s[i + 1] - b'0') as u32 * 64 + (s[i + 2] - b'0') as u32 * 8 + (s[i + 3] - b'0') as u32;
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

fn parse_line(line: &[u8]) -> Result<Mount, &'static str> {
    let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    // 6 fixed fields, optional fields, "-", fstype, source, super options.
    let sep = fields.iter().skip(6).position(|f| *f == b"-").map(|i| i + 6).ok_or("no separator")?;
    if fields.len() < sep + 3 || fields[..6].iter().any(|f| f.is_empty()) {
        return Err("too few fields");
    }
    let text = |f: &[u8]| String::from_utf8_lossy(f).into_owned();
    let number = |f: &[u8]| std::str::from_utf8(f).ok().and_then(|s| s.parse::<i32>().ok());
    Ok(Mount {
        mount_id: number(fields[0]).ok_or("bad mount id")?,
        parent_id: number(fields[1]).ok_or("bad parent id")?,
        majmin: text(fields[2]),
        root: String::from_utf8_lossy(&unescape(fields[3])).into_owned(),
        mount_point: PathBuf::from(OsString::from_vec(unescape(fields[4]))),
        fs_type: String::from_utf8_lossy(&unescape(fields[sep + 1])).into_owned(),
        super_options: fields
            .get(sep + 3)
            .map(|f| String::from_utf8_lossy(&unescape(f)).into_owned())
            .unwrap_or_default(),
    })
}

/// Parses mountinfo. Empty lines are ignored; a line that is not in the
/// kernel's format is skipped and named in `skipped`.
pub fn parse_mountinfo(text: &[u8]) -> Mountinfo {
    let mut out = Mountinfo::default();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(m) => out.mounts.push(m),
            Err(why) => out.skipped.push(MountinfoError {
                line_no: i + 1,
                why,
                line: String::from_utf8_lossy(line).chars().take(200).collect(),
            }),
        }
    }
    out
}

impl Mount {
    pub fn is_cgroup2(&self) -> bool {
        self.fs_type == "cgroup2"
    }
}

/// The mount that hides `m` (the last one mounted over its mount point or
/// over a directory above it, later than `m`), if one does: then what is at
/// `m`'s path is that mount's, not `m`'s. A mount is later than `m` when it
/// is not one `m` sits on (its parent chain).
pub fn shadowing<'a>(mounts: &'a [Mount], m: &Mount) -> Option<&'a Mount> {
    let by_id: std::collections::HashMap<i32, &Mount> = mounts.iter().map(|x| (x.mount_id, x)).collect();
    let mut below = std::collections::HashSet::new();
    let mut at = m.parent_id;
    // Bounded by the table: a loop (which no kernel makes) ends it.
    for _ in 0..mounts.len() {
        if !below.insert(at) {
            break;
        }
        match by_id.get(&at) {
            Some(p) if p.parent_id != p.mount_id => at = p.parent_id,
            _ => break,
        }
    }
    mounts
        .iter()
        .filter(|y| y.mount_id != m.mount_id && !below.contains(&y.mount_id))
        .rfind(|y| m.mount_point.starts_with(&y.mount_point))
}

/// A bpffs mount of PID 1's namespace hidden by a later one over its path
/// (`mount -a` with a bpffs line in fstab while the CNI runs: cilium#47847):
/// the pins in it are out of every reader's reach, the owner's agent's
/// included, which then attaches again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HiddenBpffs {
    /// Where it is mounted, and its mount id.
    pub mount_point: String,
    pub mount_id: i32,
    /// The mount that hides it: its id, where and what.
    pub hidden_by: i32,
    pub hidden_by_point: String,
    pub hidden_by_fs: String,
}

/// Every bpffs of `mounts` that another mount hides (`shadowing`).
pub fn hidden_bpffs(mounts: &[Mount]) -> Vec<HiddenBpffs> {
    mounts
        .iter()
        .filter(|m| m.fs_type == "bpf")
        .filter_map(|m| {
            let top = shadowing(mounts, m)?;
            Some(HiddenBpffs {
                mount_point: m.mount_point.display().to_string(),
                mount_id: m.mount_id,
                hidden_by: top.mount_id,
                hidden_by_point: top.mount_point.display().to_string(),
                hidden_by_fs: top.fs_type.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cilium#47847: a second bpffs over /sys/fs/bpf hides the first; one
    /// bpffs alone, or one at another path, hides nothing.
    #[test]
    fn a_second_bpffs_over_the_first_hides_it() {
        let sys = line(20, 1, "/", "/sys", "sysfs");
        let first = line(30, 20, "/", "/sys/fs/bpf", "bpf");
        let second = line(40, 30, "/", "/sys/fs/bpf", "bpf");
        let other = line(50, 1, "/", "/run/cilium/bpffs", "bpf");
        assert!(hidden_bpffs(&[sys.clone(), first.clone(), other.clone()]).is_empty());
        let hidden = hidden_bpffs(&[sys, first, other, second]);
        let [h] = &hidden[..] else { panic!("{hidden:?}") };
        assert_eq!((h.mount_id, h.hidden_by, h.hidden_by_point.as_str()), (30, 40, "/sys/fs/bpf"));
    }

    fn line(id: i32, parent: i32, root: &str, mp: &str, fs: &str) -> Mount {
        Mount {
            mount_id: id,
            parent_id: parent,
            majmin: "0:1".into(),
            root: root.into(),
            mount_point: mp.into(),
            fs_type: fs.into(),
            super_options: String::new(),
        }
    }

    #[test]
    fn a_mount_is_shadowed_by_one_made_over_it_or_over_a_directory_above_it_later() {
        let root = line(1, 0, "/", "/", "ext4");
        let run = line(2, 1, "/", "/run", "tmpfs");
        let cg = line(3, 2, "/kubepods/ctr", "/run/cilium/cgroupv2", "cgroup2");
        let below = line(4, 3, "/", "/run/cilium/cgroupv2/x", "tmpfs");
        let sibling = line(5, 2, "/", "/run/other", "tmpfs");
        let prefix = line(6, 2, "/", "/run/cilium/cgroup", "tmpfs");
        let mut table = vec![root.clone(), run.clone(), cg.clone(), below, sibling, prefix];
        assert_eq!(shadowing(&table, &cg), None, "mounts it sits on, below it, beside it do not hide it");
        let over = line(7, 3, "/", "/run/cilium/cgroupv2", "tmpfs");
        table.push(over.clone());
        assert_eq!(shadowing(&table, &cg), Some(&over), "stacked on it");
        table.pop();
        let above = line(8, 2, "/", "/run/cilium", "tmpfs");
        table.push(above.clone());
        assert_eq!(shadowing(&table, &cg), Some(&above), "over a directory above it");
        assert_eq!(shadowing(&table, &run), None);
    }

    const HYBRID: &str = "\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:10 - cgroup cgroup rw,cpu
";

    #[test]
    fn hybrid_host_has_one_cgroup2_mount_at_unified() {
        let m = parse_mountinfo(HYBRID.as_bytes()).mounts;
        let cg2: Vec<_> = m.iter().filter(|m| m.is_cgroup2()).collect();
        assert_eq!(cg2.len(), 1);
        assert_eq!(cg2[0].mount_point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(cg2[0].root, "/");
        assert_eq!(cg2[0].majmin, "0:38");
    }

    #[test]
    fn optional_fields_of_any_number_are_skipped() {
        let line = "900 27 0:38 / /run/cilium/cgroupv2 rw,relatime shared:1 master:2 propagate_from:3 unbindable - cgroup2 none rw";
        let m = &parse_mountinfo(line.as_bytes()).mounts[0];
        assert_eq!(m.fs_type, "cgroup2");
        assert_eq!(crate::owner::Owner::from_mount_point(&m.mount_point), Some(crate::owner::Owner::Cilium));
    }

    #[test]
    fn no_optional_fields_at_all() {
        let m = &parse_mountinfo(b"5 1 0:38 / /x rw - cgroup2 cgroup2 rw").mounts[0];
        assert_eq!(m.mount_point, PathBuf::from("/x"));
    }

    #[test]
    fn escaped_spaces_tabs_and_backslashes_are_decoded() {
        let line = r"77 27 0:38 /kube\040pods /mnt/my\040dir\011x\134y rw - cgroup2 none rw";
        let m = &parse_mountinfo(line.as_bytes()).mounts[0];
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
        let m = parse_mountinfo(text.as_bytes()).mounts;
        assert!(m[0].root.ends_with("docker-fbbef81081fd.scope"));
        assert_eq!(m[1].root, "/../..");
        assert_eq!(crate::owner::Owner::from_mount_point(&m[1].mount_point), None);
    }

    #[test]
    fn a_malformed_line_is_skipped_and_named_the_others_stand() {
        let text = "41 31 0:38 / /sys/fs/cgroup/unified rw\n42 31 0:38 / /x rw - cgroup2 cgroup2 rw\n";
        let m = parse_mountinfo(text.as_bytes());
        assert_eq!(m.mounts.len(), 1);
        assert_eq!(m.mounts[0].mount_point, PathBuf::from("/x"));
        assert_eq!(m.skipped.len(), 1);
        assert_eq!(m.skipped[0].line_no, 1);
        assert!(m.skipped[0].to_string().contains("malformed"));
    }

    /// Paths a pod can choose (a subPath's directory name), which the kernel
    /// does not escape: other whitespace, non-breaking and line separators,
    /// carriage returns, invalid UTF-8. procfs' parser split on Unicode
    /// whitespace: one such line failed the whole file, and the U+00A0 one
    /// below read as a cgroup2 mount at /run/cilium/cgroupv2.
    #[test]
    fn paths_a_pod_chooses_cannot_fail_the_file_or_fake_a_mount() {
        let fake = "/e\u{a0}/run/cilium/cgroupv2\u{a0}rw\u{a0}-\u{a0}cgroup2\u{a0}cgroup2\u{a0}rw";
        let mut text = String::new();
        for (i, name) in ["/v\u{b}t", "/f\u{c}f", "/c\rr", "/l\u{2028}s", fake].iter().enumerate() {
            text.push_str(&format!(
                "{} 27 0:40 {name} /var/lib/kubelet/pods/x/volume-subpaths/v{i} rw,relatime - tmpfs tmpfs rw\n",
                100 + i
            ));
        }
        text.push_str("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n");
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"106 27 0:40 /bad\xff\xfe /mnt/b\xffd rw - tmpfs tmpfs rw\n");
        let m = parse_mountinfo(&bytes);
        assert!(m.skipped.is_empty(), "{:?}", m.skipped);
        assert_eq!(m.mounts.len(), 7);
        let cg2: Vec<&Mount> = m.mounts.iter().filter(|m| m.is_cgroup2()).collect();
        assert_eq!(cg2.len(), 1, "the only cgroup2 mount is the real one");
        assert_eq!(cg2[0].mount_point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(m.mounts[4].root, fake, "the crafted name stays one field");
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(m.mounts[6].mount_point.as_os_str().as_bytes(), b"/mnt/b\xffd", "bytes kept as they are");
    }

    #[test]
    fn backslash_without_octal_is_literal() {
        assert_eq!(unescape(br"a\b\12"), br"a\b\12");
        assert_eq!(unescape(br"\777"), br"\777");
    }
}
