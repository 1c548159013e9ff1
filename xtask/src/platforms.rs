//! docs/kernels.md's "Supported platforms" table, written from what the kernel
//! matrix measured (each guest's `cgaudit-platform:` lines), never by hand.
//! A full matrix run rewrites it; under CI a page that says otherwise
//! fails the run.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::guest::KernelResult;
use crate::kernels::MATRIX;

const BEGIN: &str = "<!-- platforms: written by `cargo xtask test` from the kernel matrix's results; do not edit -->";
const END: &str = "<!-- /platforms -->";

/// The columns: (header, key in the guests' lines).
const COLUMNS: &[(&str, &str)] = &[
    ("Walk", "walk"),
    ("Event source (auto)", "events"),
    ("fexit", "fexit"),
    ("kprobe", "kprobe"),
    ("syscalls", "syscalls"),
    ("Remount", "remount"),
    ("net_cls in use (v1)", "net_cls"),
    ("Pod interfaces read", "datapath"),
];

/// The table for `results`, one row per kernel in the matrix's order.
pub fn table(results: &[KernelResult]) -> Result<String> {
    let mut out = String::from("| Architecture | Kernel |");
    for (header, _) in COLUMNS {
        out.push_str(&format!(" {header} |"));
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|".repeat(COLUMNS.len()));
    out.push('\n');
    for k in MATRIX {
        let r = results.iter().find(|r| r.label == k.label).with_context(|| format!("no results for {}", k.label))?;
        let release = k.label.split('-').next().unwrap_or(k.label);
        let arch = match r.arch {
            crate::arch::Arch::X86_64 => "x86_64",
            crate::arch::Arch::Aarch64 => "arm64",
        };
        out.push_str(&format!("| {arch} | {release} |"));
        for (header, key) in COLUMNS {
            let v =
                r.platform.get(*key).with_context(|| format!("{}: no `{key}` ({header}) from its guests", k.label))?;
            out.push_str(&format!(" {v} |"));
        }
        out.push('\n');
    }
    Ok(out)
}

/// `readme` with its table replaced by `table`.
pub fn replaced(readme: &str, table: &str) -> Result<String> {
    let (Some(b), Some(e)) = (readme.find(BEGIN), readme.find(END)) else {
        bail!("docs/kernels.md has no generated platforms table ({BEGIN} ... {END})");
    };
    Ok(format!("{}{BEGIN}\n{table}{}", &readme[..b], &readme[e..]))
}

/// Writes the table into docs/kernels.md; under CI, fails instead when
/// the page says something else than the matrix measured.
pub fn update(readme: &Path, results: &[KernelResult]) -> Result<()> {
    let text = std::fs::read_to_string(readme).with_context(|| format!("read {}", readme.display()))?;
    let new = replaced(&text, &table(results)?)?;
    if new == text {
        eprintln!("xtask: docs/kernels.md's platforms table matches the matrix");
        return Ok(());
    }
    if std::env::var_os("CI").is_some() {
        bail!(
            "docs/kernels.md's \"Supported platforms\" table is not what the kernel matrix measured; run `cargo xtask \
             test` and commit docs/kernels.md. Measured:\n{}",
            table(results)?
        );
    }
    std::fs::write(readme, new).with_context(|| format!("write {}", readme.display()))?;
    eprintln!("xtask: docs/kernels.md's platforms table rewritten from the matrix's results");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_marked_table_is_replaced() {
        let readme = format!("# x\n\n{BEGIN}\n| old |\n{END}\n\nrest\n");
        let new = replaced(&readme, "| new |\n").unwrap();
        assert_eq!(new, format!("# x\n\n{BEGIN}\n| new |\n{END}\n\nrest\n"));
        assert!(replaced("no table", "| new |\n").is_err());
    }
}
