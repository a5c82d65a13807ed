//! The repositories whose work trees hold watched files — the root's own (which may start above
//! the root) and every one found inside it (a folder of projects, a nested checkout, a
//! submodule, a clone made while watching) — each with its index lock as events tell it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use notify::event::EventKind;

use crate::git::{GitDir, GitWindow, IndexLock};

/// A repository and its index lock as events tell it.
pub(super) struct Repo {
    pub git: GitDir,
    pub lock: IndexLock,
}

impl Repo {
    fn new(git: GitDir) -> Repo {
        let lock = IndexLock::new(&git);
        Repo { git, lock }
    }
}

/// The repositories of the watched tree.
pub(super) struct Repos(Vec<Repo>);

impl Repos {
    /// The repository of `root`, if it is in one.
    pub fn of_root(root: &Path) -> Repos {
        Repos(GitDir::find(root).map(Repo::new).into_iter().collect())
    }

    /// The root's own repository's git directory.
    pub fn first(&self) -> Option<GitDir> {
        self.0.first().map(|r| r.git.clone())
    }

    /// True if a repository's work tree starts at `top`.
    pub fn has_top(&self, top: &Path) -> bool {
        self.0.iter().any(|r| r.git.top() == top)
    }

    /// The repository whose work tree holds `path` (the innermost).
    fn of(&self, path: &Path) -> Option<&Repo> {
        let tops = self.0.iter().filter(|r| path.starts_with(r.git.top()));
        tops.max_by_key(|r| r.git.top().as_os_str().len())
    }

    /// git's window over `path` while its repository's index lock is held.
    pub fn window_of(&self, path: &Path) -> Option<GitWindow> {
        self.of(path).and_then(|r| r.lock.window())
    }

    /// The git directory that holds `path`, if any (the innermost: a submodule's lives in its
    /// parent's), as an index for [`Repos::on_event`].
    pub fn git_dir_holding(&self, path: &Path) -> Option<usize> {
        (0..self.0.len())
            .filter(|&i| self.0[i].git.contains(path))
            .max_by_key(|&i| self.0[i].git.path().as_os_str().len())
    }

    /// True if `git` is known.
    pub fn has_git(&self, git: &GitDir) -> bool {
        self.0.iter().any(|r| &r.git == git)
    }

    /// Adds the repository `git` found at `dir`, in place of what was known there before.
    pub fn add(&mut self, dir: &Path, git: GitDir) {
        self.0.retain(|r| r.git.top() != dir);
        let mut repo = Repo::new(git);
        // Found while git works in it (a clone checking out): its lock came before the watch.
        if repo.git.index_lock_exists() {
            repo.lock.taken(&repo.git);
        }
        self.0.push(repo);
    }

    /// Forgets the repositories whose work tree is under `dir` (it is gone).
    pub fn forget_under(&mut self, dir: &Path) {
        self.0.retain(|r| !r.git.top().starts_with(dir));
    }

    /// An event on `path` in the git directory of repository `repo`: its index lock taken, or
    /// released (`moved_away`: deleted or renamed over the index).
    pub fn on_event(&mut self, repo: usize, kind: &EventKind, path: &Path, moved_away: bool) {
        let Repo { git, lock } = &mut self.0[repo];
        if git.is_index_lock(path) {
            if matches!(kind, EventKind::Create(_)) {
                lock.taken(git);
            } else if moved_away {
                lock.released(git);
            }
        }
    }

    /// True while git holds an index lock of any of the repositories.
    pub fn git_writing(&mut self) -> bool {
        let mut writing = false;
        for repo in &mut self.0 {
            writing |= repo.lock.holds(&repo.git);
        }
        writing
    }

    /// When a held lock turns stale first, if one is held.
    pub fn stale_at(&self) -> Option<Instant> {
        self.0.iter().filter_map(|r| r.lock.stale_at()).min()
    }

    /// The OS dropped events: what each lock is is looked at anew.
    pub fn after_lost_events(&mut self) {
        for repo in &mut self.0 {
            repo.lock.after_lost_events(&repo.git);
        }
    }

    /// Each repository's window as it is now, by work tree (see [`GitDir::window`]).
    pub fn windows(&self) -> HashMap<PathBuf, GitWindow> {
        self.0.iter().map(|r| (r.git.top().to_path_buf(), r.git.window())).collect()
    }

    /// The work tree of the repository holding `path` (see [`Repos::windows`]).
    pub fn top_of(&self, path: &Path) -> Option<&Path> {
        self.of(path).map(|r| r.git.top())
    }
}
