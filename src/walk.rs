//! Lists the files of a tree the way a developer thinks of "my code": nested `.gitignore`,
//! `.ignore`, `.git/info/exclude` and the global gitignore are honoured (via ripgrep's `ignore`
//! crate), plus a few hard excludes that are never source anyone writes asks into.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ignore::gitignore::Gitignore;
use ignore::overrides::{Override, OverrideBuilder};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};

use crate::error::Problem;
use crate::fsio::{self, Leftovers};
use crate::git::GitDir;
use crate::sys;

/// Directory names never walked or watched, wherever they are.
const HARD_EXCLUDED_DIRS: &[&str] = &[".git", "node_modules", "dist", "build", "target", ".venv"];

/// File names never read even inside watched directories: editor swap files, lock files, and
/// our own temp files (`fsio`'s `.fw-tmp` suffix).
const HARD_EXCLUDED_FILES: &[&str] = &["*.swp", "*.tmp", "*.lock", "*.fw-tmp"];

/// The hard excludes as an `ignore` override (each glob negated, i.e. "ignore this").
fn hard_excludes(root: &Path) -> Override {
    let mut builder = OverrideBuilder::new(root);
    let dirs = HARD_EXCLUDED_DIRS.iter().map(|d| format!("!{d}/"));
    let files = HARD_EXCLUDED_FILES.iter().map(|f| format!("!{f}"));
    for glob in dirs.chain(files) {
        // The globs are constants above; a bad one is a bug caught by every test.
        builder.add(&glob).expect("hard-exclude globs are valid");
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

/// Removes the temp files a killed process of ours left under `root` (the previous owner's,
/// SIGKILLed in the middle of a stamp), and only what is provably ours (see
/// [`fsio::remove_leftovers_in`]): in every directory this walk visits (the ignore rules' and
/// the watcher's: nothing is ever stamped elsewhere), reached from `root` without following a
/// symlink and named through the directory held open.
pub fn remove_leftovers(root: &Path) -> Leftovers {
    let mut done = Leftovers::default();
    for entry in builder(root).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else { continue };
        let Ok(dir) = sys::dir_beneath(root, rel) else { continue };
        fsio::remove_leftovers_in(&dir, entry.path(), &mut done);
    }
    done
}

/// [`remove_leftovers`] in a thread of its own, saying what it did in the log: the owner's
/// start does not wait for a walk of the tree, and a process of ours that is running (this
/// one, a `stamp` beside it) has its files left alone.
pub fn remove_leftovers_in_background(root: &Path) {
    let root = root.to_path_buf();
    let spawned = std::thread::Builder::new().name("leftovers".into()).spawn(move || {
        let done = remove_leftovers(&root);
        for path in &done.removed {
            tracing::debug!("{}: removed, a temp file a stopped process left", path.display());
        }
        for (path, why) in &done.kept {
            tracing::warn!("{}: named like a filewatch-mcp temp file, but {why}", path.display());
        }
        tracing::debug!("leftovers: {} removed, {} kept", done.removed.len(), done.kept.len());
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot look for leftover temp files: {e}");
    }
}

/// What a walk found: files, and the parts of the tree it could not list.
#[derive(Debug, Default)]
pub struct Listing {
    /// Regular files, sorted per path walked.
    pub files: Vec<PathBuf>,
    /// Directories (or entries) that could not be read.
    pub unlisted: Vec<ignore::Error>,
}

/// Every regular file under the given paths, sorted. A path that is a file is listed as is,
/// even if an ignore rule or a hard exclude would skip it: the user named it.
pub fn files(paths: &[PathBuf], threads: usize) -> Listing {
    let mut out = Listing::default();
    for path in paths {
        let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if !is_dir {
            out.files.push(path.clone());
            continue;
        }
        let parts = visit_files(path, threads, Listing::default, |part, entry| match entry {
            Ok(file) => part.files.push(file.into_path()),
            Err(err) => part.unlisted.push(err),
        });
        let mut found = Vec::new();
        for part in parts {
            found.extend(part.files);
            out.unlisted.extend(part.unlisted);
        }
        found.sort();
        out.files.extend(found);
    }
    out
}

/// Walks the directory `root` with the project's rules on `threads` threads (ripgrep's
/// parallel walker) and hands each regular file, and each part of the tree that could not be
/// listed, to `visit` with the state of the thread that found it (made by `init`). Returns
/// every thread's state once the walk is done: what to keep is the caller's to decide, so a
/// scan holds its hits, not a list of the whole tree.
pub fn visit_files<S, F>(root: &Path, threads: usize, init: impl Fn() -> S, visit: F) -> Vec<S>
where
    S: Send,
    F: Fn(&mut S, Result<DirEntry, ignore::Error>) + Sync,
{
    let done = Mutex::new(Vec::new());
    let mut threads_of = ThreadStates { init, visit: &visit, done: &done };
    builder(root).threads(threads).build_parallel().visit(&mut threads_of);
    done.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Makes each walker thread's [`ThreadState`].
struct ThreadStates<'a, I, F, S> {
    init: I,
    visit: &'a F,
    done: &'a Mutex<Vec<S>>,
}

/// One walker thread's state; handed back through `done` when the walker drops it, at the
/// end of its thread.
struct ThreadState<'a, F, S> {
    state: Option<S>,
    visit: &'a F,
    done: &'a Mutex<Vec<S>>,
}

impl<'a, I, F, S> ParallelVisitorBuilder<'a> for ThreadStates<'a, I, F, S>
where
    I: Fn() -> S,
    F: Fn(&mut S, Result<DirEntry, ignore::Error>) + Sync,
    S: Send,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(ThreadState { state: Some((self.init)()), visit: self.visit, done: self.done })
    }
}

impl<F, S> ParallelVisitor for ThreadState<'_, F, S>
where
    F: Fn(&mut S, Result<DirEntry, ignore::Error>) + Sync,
    S: Send,
{
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        let regular_or_error =
            entry.as_ref().map_or(true, |e| e.file_type().is_some_and(|t| t.is_file()));
        if let (true, Some(state)) = (regular_or_error, self.state.as_mut()) {
            (self.visit)(state, entry);
        }
        WalkState::Continue
    }
}

impl<F, S> Drop for ThreadState<'_, F, S> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            self.done.lock().unwrap_or_else(|e| e.into_inner()).push(state);
        }
    }
}

/// The ignore rules of a watched tree, answering "is this path ignored?" for single paths as
/// events arrive — the same rules the walker applies: hard excludes, then per directory `.ignore`
/// over `.gitignore` (deeper directories first), then `.git/info/exclude`, then the global
/// gitignore.
pub struct IgnoreRules {
    root: PathBuf,
    git: Option<GitDir>,
    per_dir: std::collections::HashMap<PathBuf, Vec<Gitignore>>,
    exclude: Gitignore,
    global: Gitignore,
    hard_files: globset::GlobSet,
}

impl IgnoreRules {
    /// Rules for the tree at `root` (canonical); per-directory files are added with
    /// [`IgnoreRules::load_dir`] as directories are watched.
    pub fn new(root: &Path) -> IgnoreRules {
        let mut hard = globset::GlobSetBuilder::new();
        for g in HARD_EXCLUDED_FILES {
            hard.add(globset::Glob::new(g).expect("valid glob"));
        }
        let git = GitDir::find(root);
        let exclude =
            git.as_ref().map_or_else(Gitignore::empty, |g| Gitignore::new(g.exclude_file()).0);
        IgnoreRules {
            root: root.to_path_buf(),
            git,
            per_dir: std::collections::HashMap::new(),
            exclude,
            global: Gitignore::global().0,
            hard_files: hard.build().expect("valid globs"),
        }
    }

    /// (Re)reads `dir/.ignore` and `dir/.gitignore`.
    pub fn load_dir(&mut self, dir: &Path) {
        let mut matchers = Vec::new();
        for name in [".ignore", ".gitignore"] {
            let file = dir.join(name);
            if file.is_file() {
                let (m, err) = Gitignore::new(&file);
                if let Some(source) = err {
                    Problem::RulesFile { path: file, source }.log();
                }
                matchers.push(m);
            }
        }
        if matchers.is_empty() {
            self.per_dir.remove(dir);
        } else {
            self.per_dir.insert(dir.to_path_buf(), matchers);
        }
    }

    /// Forgets the rules of `dir` and everything below it.
    pub fn forget_dir(&mut self, dir: &Path) {
        self.per_dir.retain(|d, _| !d.starts_with(dir));
    }

    /// Re-reads `.git/info/exclude`.
    pub fn reload_exclude(&mut self) {
        *self = IgnoreRules {
            per_dir: std::mem::take(&mut self.per_dir),
            ..IgnoreRules::new(&self.root)
        };
    }

    /// True if `path` (under the root) is ignored.
    pub fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        let Ok(rel) = path.strip_prefix(&self.root) else { return true };
        if rel.components().any(|c| HARD_EXCLUDED_DIRS.iter().any(|d| c.as_os_str() == *d)) {
            return true;
        }
        if !is_dir && path.file_name().is_some_and(|n| self.hard_files.is_match(n)) {
            return true;
        }
        // Deepest directory first: its rules override those of its parents.
        let mut dir = path.parent();
        while let Some(d) = dir {
            if let Some(matchers) = self.per_dir.get(d) {
                for m in matchers {
                    match m.matched(path, is_dir) {
                        ignore::Match::Ignore(_) => return true,
                        ignore::Match::Whitelist(_) => return false,
                        ignore::Match::None => {}
                    }
                }
            }
            if d == self.root {
                break;
            }
            dir = d.parent();
        }
        for m in [&self.exclude, &self.global] {
            if m.is_empty() {
                continue;
            }
            match m.matched_path_or_any_parents(rel, is_dir) {
                ignore::Match::Ignore(_) => return true,
                ignore::Match::Whitelist(_) => return false,
                ignore::Match::None => {}
            }
        }
        false
    }
}

impl IgnoreRules {
    /// True for the files whose change changes the ignore rules.
    pub fn is_rules_file(&self, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str());
        matches!(name, Some(".gitignore" | ".ignore"))
            || self.git.as_ref().is_some_and(|g| path == g.exclude_file())
    }
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
            .files
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(got, [".github/ci.yml", ".ignore", "a.py", "sub/.gitignore", "sub/b.py"]);

        // A file named explicitly is always listed.
        let named = root.join("node_modules/m.js");
        assert_eq!(files(std::slice::from_ref(&named), 1).files, vec![named]);
    }

    /// The walker and the event filter apply one list: a path one skips, the other skips.
    #[test]
    fn walker_and_event_rules_share_the_hard_excludes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let names = ["a.py.fw-tmp", "x.swp", "y.lock", "z.tmp", "build/b.py", "ok.py"];
        for f in names {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        let walked = files(std::slice::from_ref(&root), 1).files;
        let rules = IgnoreRules::new(&root);
        for f in names {
            let p = root.join(f);
            assert_eq!(walked.contains(&p), !rules.is_ignored(&p, false), "{f}");
        }
        assert_eq!(walked, vec![root.join("ok.py")]);
    }
}
