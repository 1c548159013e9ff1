//! CONTRIBUTING.md's "Project layout" is checked against the tree: a file or
//! directory it names that does not exist fails `cargo test -p xtask`.
//!
//! A name counts as found when it is a path from the workspace root, from
//! the top-level directory of the line it is on (`agent/`, `tests/`, ...),
//! or the end of some path below that directory (`query.rs` in
//! `src/bpf/`). Only names that look like files (`.rs`, `.md`, `.yaml`,
//! `.toml`) or directories (a trailing `/`) are checked. And every source
//! directory of the agent (`agent/src/*/`) must be on it: the map shows
//! every room.

use std::path::{Path, PathBuf};

/// The lines of the fenced block under `## Project layout`.
fn layout_block(readme: &str) -> Vec<&str> {
    let Some(start) = readme.find("\n## Project layout") else { return Vec::new() };
    readme[start..]
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect()
}

/// The names a layout line mentions that must exist.
fn names(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || ",;:()`'".contains(c)).filter(|w| {
        !w.is_empty()
            && !w.starts_with('/')
            && w.chars().all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c))
            && (w.ends_with('/') || [".rs", ".md", ".yaml", ".toml"].iter().any(|e| w.ends_with(e)))
    })
}

fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if e.file_name() == "target" || e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            out.push(path.clone());
            files_below(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// What the layout names that is not in the tree below `root`.
fn missing(readme: &str, root: &Path) -> Vec<String> {
    let mut all = Vec::new();
    files_below(root, &mut all);
    let mut top = root.to_path_buf();
    let mut missing = Vec::new();
    for line in layout_block(readme) {
        // A line that starts at the left names its top-level directory.
        if let Some(first) = line.split_whitespace().next().filter(|_| !line.starts_with(' '))
            && first.ends_with('/')
        {
            top = root.join(first);
        }
        for name in names(line) {
            let trimmed = name.trim_end_matches('/');
            let found = root.join(trimmed).exists()
                || top.join(trimmed).exists()
                || all.iter().any(|p| p.starts_with(&top) && p.ends_with(trimmed));
            if !found {
                missing.push(format!("{name} (under {})", top.strip_prefix(root).unwrap_or(&top).display()));
            }
        }
    }
    missing
}

/// The directories of `agent/src` that the layout never names (nor a path
/// inside them).
fn unnamed_dirs(readme: &str, root: &Path) -> Vec<String> {
    let src = root.join("agent/src");
    let named: Vec<PathBuf> = layout_block(readme)
        .iter()
        .flat_map(|l| names(l))
        .filter_map(|n| n.strip_prefix("src/"))
        .map(|n| src.join(n.trim_end_matches('/')))
        .collect();
    let Ok(entries) = std::fs::read_dir(&src) else { return vec!["agent/src (unreadable)".into()] };
    let mut out: Vec<String> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|d| d.is_dir() && !named.iter().any(|n| n.starts_with(d)))
        .map(|d| format!("agent/src/{}/", d.file_name().unwrap_or_default().to_string_lossy()))
        .collect();
    out.sort();
    out
}

/// Where the layout says `unsafe` may be: the bpf(2) boundary and `os`.
#[cfg(test)]
const UNSAFE_HOMES: &[&str] = &["agent/src/bpf/sys.rs", "agent/src/bpf/sys/", "agent/src/os.rs"];

/// `file:line` of each `unsafe` block, fn or impl (not in a comment) in
/// `files` outside `UNSAFE_HOMES`; paths relative to `root`.
#[cfg(test)]
fn unsafe_elsewhere(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap_or(f).to_string_lossy().into_owned();
        if UNSAFE_HOMES.iter().any(|h| rel.starts_with(h)) || !rel.ends_with(".rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern"].iter().any(|k| code.contains(k)) {
                out.push(format!("{rel}:{}", n + 1));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CONTRIBUTING.md and lib.rs say the agent's only `unsafe` is in
    /// `bpf::sys` and `os`: held, not only written.
    #[test]
    fn the_agents_unsafe_code_is_only_where_the_layout_says() {
        let root = crate::workspace_root();
        let readme = std::fs::read_to_string(root.join("CONTRIBUTING.md")).expect("CONTRIBUTING.md");
        assert!(readme.contains("the only unsafe code"), "the claim this test holds is gone: drop the test too");
        let mut files = Vec::new();
        files_below(&root.join("agent/src"), &mut files);
        assert!(files.len() > 50, "the agent's sources: {}", files.len());
        let found = unsafe_elsewhere(&root, &files);
        assert!(found.is_empty(), "unsafe outside bpf::sys and os: {found:?}");
        // And it sees one where there is one.
        let dir = std::env::temp_dir().join(format!("xtask-unsafe-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("agent/src/daemon")).unwrap();
        std::fs::write(dir.join("agent/src/daemon/x.rs"), "// unsafe { in a comment }\nlet a = unsafe { f() };\n")
            .unwrap();
        std::fs::write(dir.join("agent/src/os.rs"), "let a = unsafe { f() };\n").unwrap();
        let planted = vec![dir.join("agent/src/daemon/x.rs"), dir.join("agent/src/os.rs")];
        assert_eq!(unsafe_elsewhere(&dir, &planted), ["agent/src/daemon/x.rs:2"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_project_layout_names_only_what_exists() {
        let root = crate::workspace_root();
        let readme = std::fs::read_to_string(root.join("CONTRIBUTING.md")).expect("CONTRIBUTING.md");
        assert!(layout_block(&readme).len() > 10, "CONTRIBUTING.md has a Project layout block");
        let gone = missing(&readme, &root);
        assert!(gone.is_empty(), "CONTRIBUTING.md's Project layout names what does not exist: {gone:?}");
        let unnamed = unnamed_dirs(&readme, &root);
        assert!(unnamed.is_empty(), "CONTRIBUTING.md's Project layout leaves out: {unnamed:?}");
    }

    #[test]
    fn a_source_directory_left_off_the_layout_is_caught() {
        let root = crate::workspace_root();
        let readme = "\n## Project layout\n\n```\nagent/   the agent\n  src/bpf/  src/cgroup/tree.rs\n```\n";
        let unnamed = unnamed_dirs(readme, &root);
        assert!(unnamed.contains(&"agent/src/daemon/".to_string()), "{unnamed:?}");
        assert!(
            !unnamed.contains(&"agent/src/bpf/".to_string()) && !unnamed.contains(&"agent/src/cgroup/".to_string())
        );
    }

    #[test]
    fn a_renamed_file_is_caught() {
        let root = crate::workspace_root();
        let readme = "\n## Project layout\n\n```\nagent/   the agent\n  src/cli.rs  flags\n  src/gone.rs  what was\n  src/bpf/   query.rs, vanished.rs; iter/cgroup\nxtask/  runner.rs\n```\n";
        assert_eq!(missing(readme, &root), ["src/gone.rs (under agent)", "vanished.rs (under agent)"]);
    }
}
