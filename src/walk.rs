//! Lists the files of a tree the way a developer thinks of "my code": nested `.gitignore`,
//! `.ignore`, `.git/info/exclude` and the global gitignore are honoured (via ripgrep's `ignore`
//! crate), plus a few hard excludes that are never source anyone writes asks into.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use ignore::overrides::{Override, OverrideBuilder};
use ignore::{WalkBuilder, WalkState};

/// Directories never walked, wherever they are, and file globs never read.
pub const HARD_EXCLUDES: &[&str] =
    &[".git/", "node_modules/", "dist/", "build/", "target/", ".venv/", "*.swp", "*.tmp", "*.lock"];

/// The hard excludes as an `ignore` override (each glob negated, i.e. "ignore this").
fn hard_excludes(root: &Path) -> Override {
    let mut builder = OverrideBuilder::new(root);
    for glob in HARD_EXCLUDES {
        builder.add(&format!("!{glob}")).expect("hard-exclude globs are valid");
    }
    builder.build().expect("hard-exclude globs are valid")
}

/// A walker over `root` with the project's ignore rules.
pub fn builder(root: &Path) -> WalkBuilder {
    let mut b = WalkBuilder::new(root);
    b.hidden(false) // `.github/`, `.config/` hold real code; `.git/` is a hard exclude
        .parents(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .ignore(true)
        .require_git(false) // a `.gitignore` means the same before `git init`
        .follow_links(false)
        .overrides(hard_excludes(root));
    b
}

/// Every regular file under the given paths, sorted. A path that is a file is listed as is,
/// even if an ignore rule or a hard exclude would skip it: the user named it.
pub fn files(paths: &[PathBuf], threads: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in paths {
        let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if !is_dir {
            out.push(path.clone());
            continue;
        }
        let (tx, rx) = mpsc::channel();
        builder(path).threads(threads).build_parallel().run(|| {
            let tx = tx.clone();
            Box::new(move |entry| {
                match entry {
                    Ok(e) if e.file_type().is_some_and(|t| t.is_file()) => {
                        let _ = tx.send(e.into_path());
                    }
                    Ok(_) => {}
                    Err(err) => tracing::warn!("walking: {err}"),
                }
                WalkState::Continue
            })
        });
        drop(tx);
        let mut found: Vec<PathBuf> = rx.into_iter().collect();
        found.sort();
        out.extend(found);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn honours_gitignore_and_hard_excludes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "a.py",
            "sub/b.py",
            "sub/skip.py",
            "node_modules/m.js",
            "deep/target/t.rs",
            ".github/ci.yml",
            "x.swp",
            "notes/n.md",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        std::fs::write(root.join("sub/.gitignore"), "skip.py\n").unwrap();
        std::fs::write(root.join(".ignore"), "notes/\n").unwrap();
        let got: Vec<String> = files(&[root.to_path_buf()], 2)
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(got, [".github/ci.yml", ".ignore", "a.py", "sub/.gitignore", "sub/b.py"]);

        // A file named explicitly is always listed.
        let named = root.join("node_modules/m.js");
        assert_eq!(files(std::slice::from_ref(&named), 1), vec![named]);
    }
}
