//! The watch thread: it sorts each event's paths ([`classify`]) and acts on each kind, keeps
//! the parts of the watch up to date — the tree ([`Tree`]), the repositories ([`Repos`]), the
//! renames waiting for their second half ([`Renames`]) and the files waiting for quiet
//! ([`Waiting`]) — and sends each file once it is quiet, unless git is writing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use notify::event::EventKind;

use crate::error::Problem;
use crate::git::{GitDir, GitWindow};
use crate::walk;

use super::events::{classify, PathEvent};
use super::pending::Waiting;
use super::renames::Renames;
use super::repos::Repos;
use super::tree::Tree;
use super::{Change, Input};

/// What the watch thread keeps: the parts of the watch, and whether the root is there.
pub(super) struct State {
    pub tree: Tree,
    pub repos: Repos,
    renames: Renames,
    waiting: Waiting,
    /// The root was deleted or moved away: its parent is watched until it is made again.
    root_gone: bool,
    /// Nothing is left to watch (the root and its parent are gone): the thread ends.
    stopping: bool,
    /// Events delivered so far (see [`super::Watch::events_seen`]).
    events_seen: Arc<AtomicU64>,
}

impl State {
    pub fn new(tree: Tree, waiting: Waiting, events_seen: Arc<AtomicU64>) -> State {
        let repos = Repos::of_root(&tree.root);
        let renames = Renames::default();
        State { tree, repos, renames, waiting, root_gone: false, stopping: false, events_seen }
    }

    /// Watches the tree at start-up: the root, every directory the rules let through, the root
    /// repository's git directory; with `since`, lists the files modified since as a rescan.
    pub fn start(&mut self, since: Option<SystemTime>) -> notify::Result<()> {
        self.tree.watch_root()?;
        self.watch_tree(&self.tree.root.clone(), false);
        if let Some(git) = self.repos.first() {
            self.tree.watch_git_dir(&git);
        }
        if let Some(since) = since {
            self.list_modified_since(since);
        }
        Ok(())
    }

    /// Waits for events, and wakes on its own only when a pending file falls due (or a held
    /// git lock turns stale): nothing happens, nothing runs.
    pub fn run(mut self, events: Receiver<Input>) {
        loop {
            let input = match self.next_wake() {
                None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(at) => events.recv_timeout(at.saturating_duration_since(Instant::now())),
            };
            if matches!(input, Ok(Input::Event(_))) {
                self.events_seen.fetch_add(1, Ordering::Relaxed);
            }
            match input {
                Ok(Input::Event(Ok(event))) => self.on_event(&event),
                Ok(Input::Event(Err(err))) => self.tree.on_error(err),
                Ok(Input::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.stopping || self.flush_due().is_err() {
                break; // nothing to watch, or nobody listens any more
            }
        }
    }

    /// When the thread must wake without an event, if ever.
    fn next_wake(&self) -> Option<Instant> {
        if self.waiting.is_empty() {
            return None;
        }
        if let Some(stale) = self.repos.stale_at() {
            return Some(stale); // git's lock is held: its removal is an event
        }
        self.waiting.next_due()
    }

    /// Sends the files whose quiet time is over; while git holds an index lock (of any of the
    /// repositories), waits.
    fn flush_due(&mut self) -> Result<(), mpsc::SendError<Change>> {
        if self.waiting.is_empty() || self.repos.git_writing() {
            return Ok(());
        }
        self.waiting.send_due(Instant::now())
    }

    /// One event: each of its paths sorted into a kind, then acted on.
    fn on_event(&mut self, event: &notify::Event) {
        if event.need_rescan() {
            self.rescan();
            return;
        }
        for (i, path) in event.paths.iter().enumerate() {
            self.renames.done();
            let kind = classify(event, (i, path), &self.tree.root, self.root_gone, &self.repos);
            match kind {
                PathEvent::InGitDir { repo, moved_away } => {
                    self.on_git_event(repo, &event.kind, path, moved_away);
                }
                PathEvent::ParentGone => return self.give_up(),
                PathEvent::Outside => {}
                PathEvent::Root { moved_away: true } if !self.root_gone => self.lose_root(),
                PathEvent::Root { .. } if self.root_gone => self.find_root(),
                PathEvent::Root { .. } => {}
                PathEvent::DotGit { moved_away: false } => {
                    if let Some(dir) = path.parent() {
                        self.add_repo(dir); // `git init`, `git clone`: a repository from now on
                    }
                }
                PathEvent::DotGit { moved_away: true } => {}
                PathEvent::Gone { renamed } => self.gone(event, (i, path), renamed),
                PathEvent::Changed { written } => self.changed(event, (i, path), written),
            }
        }
        self.renames.done();
    }

    /// The OS dropped events (queue overflow): every file is looked at again — as a rescan, so
    /// that only what changed during the run is announced.
    fn rescan(&mut self) {
        Problem::EventsLost.log();
        self.repos.after_lost_events();
        self.renames.lost_events();
        self.waiting.rescanning = Some(self.waiting.started);
        self.watch_tree(&self.tree.root.clone(), true);
        self.waiting.rescanning = None;
    }

    /// An event in a git directory: its index lock, or the exclude file.
    fn on_git_event(&mut self, repo: usize, kind: &EventKind, path: &Path, moved_away: bool) {
        // Reads are not changes: reloading `info/exclude` reads it, and that must not bring
        // another reload.
        if matches!(kind, EventKind::Access(_)) {
            return;
        }
        self.repos.on_event(repo, kind, path, moved_away);
        if self.tree.rules.is_rules_file(path) {
            tracing::debug!("{} changed; ignore rules reloaded", path.display());
            self.tree.rules.reload_exclude();
            self.rewalk(&self.tree.root.clone());
        }
    }

    /// A path deleted or renamed away inside the root: what waited there goes with a rename
    /// (to its second half), and a directory is no longer watched.
    fn gone(&mut self, event: &notify::Event, (i, path): (usize, &PathBuf), renamed: bool) {
        let _ = self.renames.moved_here(event, i, path); // a first half without a cookie ends
        if renamed {
            let pending = self.waiting.take_below(path);
            self.renames.moved_away(path, pending, event.attrs.tracker());
        }
        if self.tree.watched.contains(path) {
            self.unwatch_tree(path);
        }
    }

    /// A path made, written or renamed here inside the root: a new directory is watched (and
    /// what is in it listed), an ignore file reloaded, a file scheduled. A rename's second half
    /// keeps what its first half had.
    fn changed(&mut self, event: &notify::Event, (i, path): (usize, &PathBuf), written: bool) {
        let away = self.renames.moved_here(event, i, path);
        self.renames.arrive(away, path);
        if !self.tree.covers(path) || !written {
            return; // under an ignored directory (only a recursive watch reports those), or read
        }
        let meta = std::fs::symlink_metadata(path);
        if meta.as_ref().is_ok_and(|m| m.is_dir()) {
            if !self.tree.watched.contains(path) && !self.tree.rules.is_ignored(path, true) {
                // A new directory: watch it, and scan what was created in it before the watch
                // existed.
                self.watch_tree(path, true);
            }
            return;
        }
        if self.tree.rules.is_rules_file(path) {
            if let Some(dir) = path.parent() {
                self.tree.rules.load_dir(dir);
                self.rewalk(dir);
            }
            return;
        }
        if !self.tree.rules.is_ignored(path, false) {
            self.schedule(path.clone());
        }
    }

    /// `path` changed: it waits for quiet (with git's window and where it was renamed from).
    fn schedule(&mut self, path: PathBuf) {
        let window = self.repos.window_of(&path);
        let moved = self.renames.was(&path);
        self.waiting.schedule(path, window, moved);
    }

    /// Watches the repository whose `.git` is in `dir`, found in the walk or just created (a
    /// `git init`, a clone), in place of what was known there before.
    fn add_repo(&mut self, dir: &Path) {
        let Some(git) = GitDir::find(dir).filter(|g| g.top() == dir) else { return };
        if self.repos.has_git(&git) {
            return; // known (an event on a submodule's `.git` file): its lock state stands
        }
        tracing::debug!("a repository at {}: its index lock holds its files", dir.display());
        self.tree.watch_git_dir(&git);
        self.repos.add(dir, git);
    }

    /// The root itself was deleted or moved away (`rm -rf R`): nothing under it is watched any
    /// more. Says so, and watches the root's parent for the root to be made again (a script
    /// regenerating the project, a clone in place); it may be back already.
    fn lose_root(&mut self) {
        let root = self.tree.root.clone();
        Problem::RootGone { root: root.clone() }.log();
        self.root_gone = true;
        let parent_watched = self.tree.lose_root();
        self.waiting.forget_below(&root);
        self.repos.forget_under(&root);
        if !parent_watched {
            return self.give_up();
        }
        self.find_root();
    }

    /// While the root is gone: if it is a directory again, watches it anew and looks at every
    /// file in it, as in a directory just made.
    fn find_root(&mut self) {
        let root = self.tree.root.clone();
        if !std::fs::symlink_metadata(&root).is_ok_and(|m| m.is_dir()) {
            return;
        }
        self.root_gone = false;
        tracing::warn!("{}: made again; watching it anew", root.display());
        self.tree.find_root();
        self.add_repo(&root);
        self.watch_tree(&root, true);
    }

    /// The root and its parent are gone: nothing is left to watch, and the watch ends (the
    /// program with it), saying so.
    fn give_up(&mut self) {
        Problem::RootLost { root: self.tree.root.clone() }.log();
        self.stopping = true;
    }

    /// Watches `dir` and every directory below it that the rules let through; with
    /// `scan_files`, schedules the files found there too. Files are listed in a second pass,
    /// after every watch exists: a file created meanwhile is either listed or brings an event.
    fn watch_tree(&mut self, dir: &Path, scan_files: bool) {
        self.watch_dirs(dir);
        if scan_files {
            self.schedule_files(dir);
        }
    }

    /// Watches `dir` and every directory below it that the rules let through, and the
    /// repositories found there.
    fn watch_dirs(&mut self, dir: &Path) {
        for entry in walked(dir) {
            let path = entry.path();
            if !entry.file_type().is_some_and(|t| t.is_dir()) {
                continue;
            }
            self.tree.rules.load_dir(path);
            if path != self.tree.root && self.tree.rules.is_ignored(path, true) {
                continue;
            }
            self.tree.add_watch(path);
            // A repository inside the root: its git directory is not walked.
            if !self.repos.has_top(path) && std::fs::symlink_metadata(path.join(".git")).is_ok() {
                self.add_repo(path);
            }
        }
    }

    /// Schedules every file under `dir` the rules let through.
    fn schedule_files(&mut self, dir: &Path) {
        for entry in walked(dir) {
            let path = entry.path();
            if entry.file_type().is_some_and(|t| t.is_file())
                && !self.tree.rules.is_ignored(path, false)
            {
                self.schedule(path.to_path_buf());
            }
        }
    }

    /// Schedules, as a rescan, every file the rules let through that was modified at or after
    /// `since` (its metadata only is read here; the pipeline checks again). Each is marked as
    /// possibly git's: the old owner saw git's index lock come and go, this process did not, so
    /// a marker in any version git could have written (a checkout, merge, rebase, stash) stays
    /// quiet, as it did for the old owner.
    fn list_modified_since(&mut self, since: SystemTime) {
        let windows: HashMap<PathBuf, GitWindow> = self.repos.windows();
        self.waiting.rescanning = Some(since);
        for entry in walk::builder(&self.tree.root.clone()).build() {
            let Ok(entry) = entry else { continue }; // logged by the walk that watched
            let path = entry.path();
            let recent = || entry.metadata().ok().and_then(|m| m.modified().ok()) >= Some(since);
            if entry.file_type().is_some_and(|t| t.is_file())
                && !self.tree.rules.is_ignored(path, false)
                && recent()
            {
                self.schedule(path.to_path_buf());
                let window = self.repos.top_of(path).and_then(|t| windows.get(t)).cloned();
                self.waiting.maybe_git(path, window);
            }
        }
        self.waiting.rescanning = None;
    }

    /// Stops watching `dir` and below, and forgets the files waiting there.
    fn unwatch_tree(&mut self, dir: &Path) {
        self.tree.unwatch(dir);
        self.waiting.forget_below(dir);
    }

    /// After an ignore file changed: watch what is no longer ignored, drop what now is.
    fn rewalk(&mut self, dir: &Path) {
        for d in self.tree.now_ignored(dir) {
            self.unwatch_tree(&d);
        }
        self.watch_tree(dir, false);
        self.waiting.forget_ignored(&self.tree.rules);
    }
}

/// The entries of a walk from `dir` under the root's rules; an entry the walk cannot read is
/// logged and passed over.
fn walked(dir: &Path) -> impl Iterator<Item = ignore::DirEntry> {
    walk::builder(dir)
        .build()
        .filter_map(|entry| entry.map_err(|err| Problem::Walk(err).log()).ok())
}
