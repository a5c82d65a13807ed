//! The watched tree: which directories are watched (one watch each, or covered by one recursive
//! watch on the root), the ignore rules that decide, and the OS's watch limit.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use notify::{RecursiveMode, Watcher as _};

use crate::error::Problem;
use crate::git::GitDir;
use crate::sys::{self, WatchMode};
use crate::walk::IgnoreRules;

/// Start-up progress is logged every this many directories.
const PROGRESS_EVERY: usize = 10_000;

/// The directories watched under the root, and the rules that chose them.
pub(super) struct Tree {
    pub root: PathBuf,
    /// One watch per directory, or one recursive watch on the root.
    pub mode: WatchMode,
    pub rules: IgnoreRules,
    watcher: sys::Watcher,
    /// Directories watched, or with a recursive watch: covered (walked, not ignored).
    pub watched: HashSet<PathBuf>,
    /// Directories left unwatched at the watch limit.
    pub unwatched: usize,
    limit_logged: bool,
}

impl Tree {
    pub fn new(root: PathBuf, mode: WatchMode, watcher: sys::Watcher) -> Tree {
        let rules = IgnoreRules::new(&root);
        Tree {
            root,
            mode,
            rules,
            watcher,
            watched: HashSet::new(),
            unwatched: 0,
            limit_logged: false,
        }
    }

    /// With a recursive watch, the one watch on the root, before the walk: a file created while
    /// the tree is walked brings an event that waits in the channel.
    pub fn watch_root(&mut self) -> notify::Result<()> {
        if self.mode != WatchMode::Recursive {
            return Ok(());
        }
        self.watcher.watch(&self.root, RecursiveMode::Recursive)
    }

    /// Watches `dir` (with a recursive watch: counts it as covered).
    pub fn add_watch(&mut self, dir: &Path) {
        if self.watched.contains(dir) {
            return;
        }
        if self.mode == WatchMode::Recursive {
            self.watched.insert(dir.to_path_buf()); // covered by the root's watch
            return;
        }
        match self.watcher.watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                self.watched.insert(dir.to_path_buf());
                if self.watched.len().is_multiple_of(PROGRESS_EVERY) {
                    tracing::info!("{} directories watched so far…", self.watched.len());
                }
            }
            Err(err) if matches!(err.kind, notify::ErrorKind::MaxFilesWatch) => {
                self.unwatched += 1;
                self.log_limit();
            }
            Err(err) if is_enospc(&err) => {
                self.unwatched += 1;
                self.log_limit();
            }
            Err(source) => Problem::NotWatched { dir: dir.to_path_buf(), source }.log(),
        }
    }

    /// Stops watching `dir` and every directory below it, and forgets their ignore rules.
    pub fn unwatch(&mut self, dir: &Path) {
        let gone: Vec<PathBuf> =
            self.watched.iter().filter(|d| d.starts_with(dir)).cloned().collect();
        for d in gone {
            if self.mode == WatchMode::PerDirectory {
                let _ = self.watcher.unwatch(&d);
            }
            self.watched.remove(&d);
        }
        self.rules.forget_dir(dir);
    }

    /// The watched directories under `dir` that the rules now ignore.
    pub fn now_ignored(&self, dir: &Path) -> Vec<PathBuf> {
        self.watched
            .iter()
            .filter(|d| d.starts_with(dir) && *d != &self.root && self.rules.is_ignored(d, true))
            .cloned()
            .collect()
    }

    /// With a recursive watch, events come from ignored directories too: a path counts only if
    /// its directory was let through by the walk (or is the root). Per-directory watches only
    /// exist on such directories.
    pub fn covers(&self, path: &Path) -> bool {
        self.mode == WatchMode::PerDirectory
            || path == self.root
            || path.parent().is_some_and(|dir| self.watched.contains(dir))
    }

    /// A git directory is outside the tree walk (hard-excluded), but its index lock tells
    /// when git is writing the work tree: watch the directories that say so, not recursively.
    pub fn watch_git_dir(&mut self, git: &GitDir) {
        for dir in git.dirs_to_watch() {
            if self.mode == WatchMode::Recursive && dir.starts_with(&self.root) {
                continue; // the root's watch reports it already
            }
            if let Err(source) = self.watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Problem::GitNotWatched { dir, source }.log();
            }
        }
    }

    /// The root is gone: nothing under it is watched any more, and its parent is, for the root
    /// to be made again. False if the parent cannot be watched (or there is none).
    pub fn lose_root(&mut self) -> bool {
        let root = self.root.clone();
        if self.mode == WatchMode::Recursive {
            let _ = self.watcher.unwatch(&root);
        }
        self.unwatch(&root);
        let Some(parent) = root.parent() else { return false };
        self.watcher.watch(parent, RecursiveMode::NonRecursive).is_ok()
    }

    /// The root is a directory again: its parent is no longer watched, its rules are read
    /// anew, and (with a recursive watch) it is watched again.
    pub fn find_root(&mut self) {
        if let Some(parent) = self.root.parent() {
            let _ = self.watcher.unwatch(parent);
        }
        self.rules = IgnoreRules::new(&self.root);
        if let Err(e) = self.watch_root() {
            Problem::Watcher(e).log();
        }
    }

    /// An error from the OS's watcher.
    pub fn on_error(&mut self, err: notify::Error) {
        if matches!(err.kind, notify::ErrorKind::MaxFilesWatch) {
            self.log_limit();
        } else {
            Problem::Watcher(err).log();
        }
    }

    /// The watch limit is logged once: every further directory would say the same.
    fn log_limit(&mut self) {
        if !self.limit_logged {
            self.limit_logged = true;
            Problem::WatchLimit.log();
        }
    }
}

/// inotify's watch limit shows as `ENOSPC`.
fn is_enospc(err: &notify::Error) -> bool {
    matches!(&err.kind, notify::ErrorKind::Io(e) if sys::is_watch_limit(e))
}
