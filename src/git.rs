//! Everything that knows git: where a tree's git directory is, when git holds its index lock
//! (and so may be writing the work tree), and which lines git could have written into a file.
//! Nothing else in the crate runs `git` or reads `.git/`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::Problem;

/// An index lock older than this is stale (a crashed git leaves one behind): stop holding.
const STALE_LOCK: Duration = Duration::from_secs(10);

/// The git directory of a repository (`.git/`, or where a worktree's `.git` file points).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDir {
    path: PathBuf,
}

impl GitDir {
    /// The git directory of the repository holding `dir`, looking upwards.
    pub fn find(dir: &Path) -> Option<GitDir> {
        let mut d = Some(dir);
        while let Some(cur) = d {
            let dot_git = cur.join(".git");
            if dot_git.is_dir() {
                return Some(GitDir { path: dot_git });
            }
            if dot_git.is_file() {
                let text = std::fs::read_to_string(&dot_git).ok()?;
                let target = text.strip_prefix("gitdir:")?.trim();
                return Some(GitDir { path: cur.join(target) });
            }
            d = cur.parent();
        }
        None
    }

    /// True for paths inside the git directory.
    pub fn contains(&self, path: &Path) -> bool {
        path.starts_with(&self.path)
    }

    /// The directories whose events tell what git does: the git directory (its index lock)
    /// and `info/` (the exclude file), each watched without recursion.
    pub fn dirs_to_watch(&self) -> Vec<PathBuf> {
        let info = self.path.join("info");
        let mut dirs = vec![self.path.clone()];
        if info.is_dir() {
            dirs.push(info);
        }
        dirs
    }

    /// `info/exclude`: ignore rules that live in the git directory.
    pub fn exclude_file(&self) -> PathBuf {
        self.path.join("info/exclude")
    }

    /// True if `path` is this repository's index lock.
    pub fn is_index_lock(&self, path: &Path) -> bool {
        path == self.path.join("index.lock")
    }

    fn index_lock_exists(&self) -> bool {
        self.path.join("index.lock").exists()
    }

    /// The newest stash commit, read from the ref files (no git process per lock).
    fn stash_ref(&self) -> Option<String> {
        if let Ok(text) = std::fs::read_to_string(self.path.join("refs/stash")) {
            return Some(text.trim().to_string()).filter(|s| !s.is_empty());
        }
        let packed = std::fs::read_to_string(self.path.join("packed-refs")).ok()?;
        packed.lines().find_map(|l| l.strip_suffix(" refs/stash").map(str::to_string))
    }
}

/// What we knew when git took its index lock: what a change made while it held the lock
/// may have been written from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitWindow {
    /// The newest stash commit then: a `git stash pop` writes that commit's lines.
    pub stash: Option<String>,
}

/// Git's index lock as the watcher sees it, by events: git is fast, and the lock may be gone
/// by the time anyone looks, but events come in order, so every file event between the lock's
/// creation and its removal may be git's.
#[derive(Debug, Default)]
pub struct IndexLock {
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    window: GitWindow,
    since: Instant,
    stale_warned: bool,
}

impl IndexLock {
    /// Git created its index lock.
    pub fn taken(&mut self, git: &GitDir) {
        let window = GitWindow { stash: git.stash_ref() };
        self.held = Some(Held { window, since: Instant::now(), stale_warned: false });
    }

    /// Git removed (renamed away) its index lock.
    pub fn released(&mut self) {
        self.held = None;
    }

    /// The window a change seen now belongs to, `None` while git holds no lock.
    pub fn window(&self) -> Option<GitWindow> {
        self.held.as_ref().map(|h| h.window.clone())
    }

    /// True while saves must wait for git: the lock is held and not stale. A lock whose file is
    /// gone is released here (its removal event may still be queued).
    pub fn holds(&mut self, git: Option<&GitDir>) -> bool {
        let Some(held) = &mut self.held else { return false };
        if !git.is_some_and(GitDir::index_lock_exists) {
            self.held = None;
            return false;
        }
        if held.since.elapsed() < STALE_LOCK {
            return true;
        }
        if !held.stale_warned {
            held.stale_warned = true;
            let lock = git.map_or_else(PathBuf::new, |g| g.path.join("index.lock"));
            Problem::StaleGitLock { lock, secs: STALE_LOCK.as_secs() }.log();
        }
        false
    }

    /// When a held lock turns stale, if one is held: the watcher wakes then.
    pub fn stale_at(&self) -> Option<Instant> {
        self.held.as_ref().filter(|h| !h.stale_warned).map(|h| h.since + STALE_LOCK)
    }
}

/// Every line git could have written into `path`: the file's lines at HEAD, and when it
/// changed while git held its lock (`window`), also in the index and the stash git popped.
/// Empty outside a repository or for a file git does not know. Lines are compared without
/// their line ending.
pub fn lines_git_could_write(path: &Path, window: Option<&GitWindow>) -> HashSet<Vec<u8>> {
    let mut revs = vec!["HEAD".to_string()];
    if let Some(window) = window {
        revs.push(String::new()); // `:./name` is the index
        revs.extend(window.stash.clone());
    }
    let mut lines = HashSet::new();
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return lines;
    };
    for rev in revs {
        let out = Command::new("git")
            .arg("-C")
            .arg(crate::sys::plain_path(dir).as_ref())
            .args(["show", &format!("{rev}:./{name}")])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        let Ok(out) = out else { return lines }; // no git at all
        if out.status.success() {
            lines.extend(
                out.stdout
                    .split(|&b| b == b'\n')
                    .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec()),
            );
        }
    }
    lines
}
