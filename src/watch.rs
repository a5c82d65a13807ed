//! Watching a tree: one non-recursive inotify (FSEvents/kqueue) watch per directory the ignore
//! rules let through, so `node_modules/` and `target/` cost nothing; events become debounced
//! [`Change`]s, one per file after it has been quiet for the debounce time.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind, RenameMode};
use notify::{RecursiveMode, Watcher as _};

use crate::walk::{self, IgnoreRules};

/// Start-up progress is logged every this many directories.
const PROGRESS_EVERY: usize = 10_000;

/// An index lock older than this is stale (a crashed git leaves one behind): stop holding.
const STALE_GIT_LOCK: Duration = Duration::from_secs(10);

/// A file that changed and has been quiet for the debounce time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    /// Set when some event for it came while git held its index lock: git may have written it
    /// (checkout, pull, merge, rebase, stash) — or an editor's `git status` merely held the
    /// lock while the user saved. The pipeline tells the two apart by git's own content.
    pub from_git: Option<GitWindow>,
}

/// What we knew when git took its index lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitWindow {
    /// The newest stash commit then: a `git stash pop` writes that commit's lines.
    pub stash: Option<String>,
}

/// What the watcher could watch.
#[derive(Debug, Clone, Default)]
pub struct WatchStats {
    pub dirs_watched: usize,
    /// Directories left unwatched because the OS watch limit was reached.
    pub dirs_unwatched: usize,
    pub took: Duration,
}

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("{path}: cannot watch: {source}")]
    Root { path: PathBuf, source: std::io::Error },
    #[error(
        "cannot create a file watcher: {0}. If this says \"too many open files\", the inotify \
         instance limit is reached: raise it with `sudo sysctl fs.inotify.max_user_instances=512`"
    )]
    Create(notify::Error),
}

/// A running watch; dropping it (or [`Watch::stop`]) ends the thread.
pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The watched root, canonical: every [`Change`] path is under it.
    pub root: PathBuf,
    pub stats: WatchStats,
}

impl Watch {
    /// Watches `root` (made canonical) and sends debounced changes to the returned receiver.
    /// Returns once every directory is watched.
    pub fn start(root: &Path, debounce: Duration) -> Result<(Watch, Receiver<Change>), WatchError> {
        let root = root
            .canonicalize()
            .map_err(|source| WatchError::Root { path: root.to_path_buf(), source })?;
        let (event_tx, event_rx) = mpsc::channel();
        let watcher = notify::recommended_watcher(move |res| {
            let _ = event_tx.send(res);
        })
        .map_err(WatchError::Create)?;
        let (change_tx, change_rx) = mpsc::channel();
        let canonical_root = root.clone();
        let mut state = State {
            git_dir: walk::git_dir(&root),
            rules: IgnoreRules::new(&root),
            root,
            watcher,
            watched: HashSet::new(),
            unwatched: 0,
            limit_logged: false,
            pending: HashMap::new(),
            git_lock: None,
            debounce,
            out: change_tx,
        };
        let started = Instant::now();
        state.watch_tree(&state.root.clone(), false);
        state.watch_git_dir();
        let stats = WatchStats {
            dirs_watched: state.watched.len(),
            dirs_unwatched: state.unwatched,
            took: started.elapsed(),
        };
        tracing::info!(
            "watching {} directories under {} ({} ms{})",
            stats.dirs_watched,
            state.root.display(),
            stats.took.as_millis(),
            if stats.dirs_unwatched > 0 {
                format!(", {} left unwatched: inotify limit", stats.dirs_unwatched)
            } else {
                String::new()
            }
        );
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("watch".into())
                .spawn(move || state.run(event_rx, &stop))
                .expect("spawn the watch thread")
        };
        Ok((Watch { stop, thread: Some(thread), root: canonical_root, stats }, change_rx))
    }

    /// Ends the watch thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Git's index lock as we saw it taken.
struct GitLock {
    window: GitWindow,
    since: Instant,
    stale_warned: bool,
}

struct State {
    root: PathBuf,
    git_dir: Option<PathBuf>,
    rules: IgnoreRules,
    watcher: notify::RecommendedWatcher,
    watched: HashSet<PathBuf>,
    unwatched: usize,
    limit_logged: bool,
    /// Files waiting for quiet: when they are due, and whether git may have written them.
    pending: HashMap<PathBuf, (Instant, Option<GitWindow>)>,
    /// Set while git holds its index lock.
    git_lock: Option<GitLock>,
    debounce: Duration,
    out: Sender<Change>,
}

impl State {
    fn run(mut self, events: Receiver<notify::Result<notify::Event>>, stop: &AtomicBool) {
        // Wake at least this often to notice `stop`.
        const TICK: Duration = Duration::from_millis(100);
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let next_due = self.pending.values().map(|(due, _)| *due).min();
            let wait = match next_due {
                // While git holds its lock nothing is sent: wake on the tick, do not spin.
                Some(_) if self.git_lock.is_some() => TICK,
                Some(due) => due.saturating_duration_since(now).min(TICK),
                None => TICK,
            };
            match events.recv_timeout(wait) {
                Ok(Ok(event)) => self.on_event(event),
                Ok(Err(err)) => self.on_error(err),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self.flush_due().is_err() {
                break; // nobody listens any more
            }
        }
    }

    /// Sends the files whose quiet time is over; while git holds its index lock, waits.
    fn flush_due(&mut self) -> Result<(), mpsc::SendError<Change>> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if self.git_lock.is_some() && !self.git_lock_exists() {
            self.git_lock = None; // its removal event may still be queued
        }
        if let Some(lock) = &mut self.git_lock {
            if lock.since.elapsed() < STALE_GIT_LOCK {
                return Ok(());
            }
            if !lock.stale_warned {
                lock.stale_warned = true;
                tracing::warn!(
                    "{}/index.lock has been there for {} s; a crashed git left it? Not holding \
                     saves for it any more (remove it if no git command is running)",
                    self.git_dir.as_ref().map_or(String::new(), |g| g.display().to_string()),
                    STALE_GIT_LOCK.as_secs()
                );
            }
        }
        let now = Instant::now();
        let mut due: Vec<(Instant, PathBuf)> = self
            .pending
            .iter()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(p, (t, _))| (*t, p.clone()))
            .collect();
        // In the order they fell quiet: a file saved after another is handled after it.
        due.sort();
        for (_, path) in due {
            if let Some((_, from_git)) = self.pending.remove(&path) {
                self.out.send(Change { path, from_git })?;
            }
        }
        Ok(())
    }

    fn git_lock_exists(&self) -> bool {
        self.git_dir.as_ref().is_some_and(|g| g.join("index.lock").exists())
    }

    fn schedule(&mut self, path: PathBuf) {
        let due = Instant::now() + self.debounce;
        let entry = self.pending.entry(path).or_insert((due, None));
        entry.0 = due;
        if entry.1.is_none() {
            entry.1 = self.git_lock.as_ref().map(|l| l.window.clone());
        }
    }

    /// The newest stash commit, read from the ref files (no git process per lock).
    fn stash_ref(&self) -> Option<String> {
        let git = self.git_dir.as_ref()?;
        if let Ok(text) = std::fs::read_to_string(git.join("refs/stash")) {
            return Some(text.trim().to_string()).filter(|s| !s.is_empty());
        }
        let packed = std::fs::read_to_string(git.join("packed-refs")).ok()?;
        packed.lines().find_map(|l| l.strip_suffix(" refs/stash").map(str::to_string))
    }

    fn on_event(&mut self, event: notify::Event) {
        if event.need_rescan() {
            // The OS dropped events (queue overflow): look at every file again.
            tracing::warn!("file events were lost; rescanning the tree");
            self.watch_tree(&self.root.clone(), true);
            return;
        }
        let renamed_both =
            matches!(event.kind, EventKind::Modify(ModifyKind::Name(RenameMode::Both)));
        for (i, path) in event.paths.iter().enumerate() {
            // Deleted, or renamed away (a two-path rename names the old path first).
            let moved_away = matches!(event.kind, EventKind::Remove(_))
                || matches!(event.kind, EventKind::Modify(ModifyKind::Name(RenameMode::From)))
                || (renamed_both && i == 0);
            if self.git_dir.as_ref().is_some_and(|g| path.starts_with(g)) {
                // Reads are not changes: reloading `info/exclude` reads it, and that must not
                // bring another reload.
                if matches!(event.kind, EventKind::Access(_)) {
                    continue;
                }
                if path.file_name().is_some_and(|n| n == "index.lock") {
                    // By the event, not by looking: git is fast, and the lock may be gone by
                    // the time we read the event. Events come in order, so every file event
                    // between the lock's creation and its removal (renamed to `index`) is git's.
                    if matches!(event.kind, EventKind::Create(_)) {
                        let window = GitWindow { stash: self.stash_ref() };
                        self.git_lock =
                            Some(GitLock { window, since: Instant::now(), stale_warned: false });
                    } else if moved_away {
                        self.git_lock = None;
                    }
                }
                if path.ends_with("info/exclude") {
                    tracing::info!("{} changed; ignore rules reloaded", path.display());
                    self.rules.reload_exclude();
                    self.rewalk(&self.root.clone());
                }
                continue;
            }
            if !path.starts_with(&self.root) {
                continue;
            }
            if moved_away {
                if self.watched.contains(path) {
                    self.unwatch_tree(path);
                }
                continue;
            }
            match event.kind {
                EventKind::Create(_) | EventKind::Modify(_) | EventKind::Any | EventKind::Other => {
                }
                EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
                _ => continue,
            }
            let meta = std::fs::symlink_metadata(path);
            if meta.as_ref().is_ok_and(|m| m.is_dir()) {
                if !self.watched.contains(path) && !self.rules.is_ignored(path, true) {
                    // A new directory: watch it, and scan what was created in it before the
                    // watch existed.
                    self.watch_tree(&path.clone(), true);
                }
                continue;
            }
            if walk::is_ignore_file(path) {
                if let Some(dir) = path.parent() {
                    self.rules.load_dir(dir);
                    self.rewalk(dir);
                }
                continue;
            }
            if !self.rules.is_ignored(path, false) {
                self.schedule(path.clone());
            }
        }
    }

    fn on_error(&mut self, err: notify::Error) {
        if matches!(err.kind, notify::ErrorKind::MaxFilesWatch) {
            self.log_limit();
        } else {
            tracing::warn!("watch error: {err}");
        }
    }

    fn log_limit(&mut self) {
        if self.limit_logged {
            return;
        }
        self.limit_logged = true;
        let current = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        tracing::error!(
            "inotify watch limit reached (fs.inotify.max_user_watches = {current}): some \
             directories are not watched and saves in them go unseen. Raise the limit with \
             `sudo sysctl fs.inotify.max_user_watches=524288` (and add that line to \
             /etc/sysctl.conf to keep it), then restart"
        );
    }

    /// Watches `dir` and every directory below it that the rules let through; with
    /// `scan_files`, schedules the files found there too. Files are listed in a second pass,
    /// after every watch exists: a file created meanwhile is either listed or brings an event.
    fn watch_tree(&mut self, dir: &Path, scan_files: bool) {
        self.walk_tree(dir, false);
        if scan_files {
            self.walk_tree(dir, true);
        }
    }

    fn walk_tree(&mut self, dir: &Path, scan_files: bool) {
        for entry in walk::builder(dir).build() {
            let entry = match entry {
                Ok(e) => e,
                Err(err) => {
                    tracing::warn!("walking: {err}");
                    continue;
                }
            };
            let path = entry.path();
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if is_dir && !scan_files {
                self.rules.load_dir(path);
                if path != self.root && self.rules.is_ignored(path, true) {
                    continue;
                }
                self.add_watch(path);
            } else if scan_files
                && entry.file_type().is_some_and(|t| t.is_file())
                && !self.rules.is_ignored(path, false)
            {
                self.schedule(path.to_path_buf());
            }
        }
    }

    fn add_watch(&mut self, dir: &Path) {
        if self.watched.contains(dir) {
            return;
        }
        match self.watcher.watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                self.watched.insert(dir.to_path_buf());
                if self.watched.len() % PROGRESS_EVERY == 0 {
                    tracing::info!("watching… {} directories so far", self.watched.len());
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
            Err(err) => tracing::debug!("{}: not watched: {err}", dir.display()),
        }
    }

    fn unwatch_tree(&mut self, dir: &Path) {
        let gone: Vec<PathBuf> =
            self.watched.iter().filter(|d| d.starts_with(dir)).cloned().collect();
        for d in gone {
            let _ = self.watcher.unwatch(&d);
            self.watched.remove(&d);
        }
        self.rules.forget_dir(dir);
        self.pending.retain(|p, _| !p.starts_with(dir));
    }

    /// After an ignore file changed: watch what is no longer ignored, drop what now is.
    fn rewalk(&mut self, dir: &Path) {
        let now_ignored: Vec<PathBuf> = self
            .watched
            .iter()
            .filter(|d| d.starts_with(dir) && *d != &self.root && self.rules.is_ignored(d, true))
            .cloned()
            .collect();
        for d in now_ignored {
            self.unwatch_tree(&d);
        }
        self.watch_tree(dir, false);
        let pending: Vec<PathBuf> = self.pending.keys().cloned().collect();
        for p in pending {
            if self.rules.is_ignored(&p, false) {
                self.pending.remove(&p);
            }
        }
    }

    /// The git directory is outside the tree walk (hard-excluded), but its index lock tells
    /// when git is writing the work tree: watch that one directory, not recursively.
    fn watch_git_dir(&mut self) {
        if let Some(g) = self.git_dir.clone() {
            if let Err(err) = self.watcher.watch(&g, RecursiveMode::NonRecursive) {
                tracing::warn!(
                    "{}: not watched, git operations cannot be held: {err}",
                    g.display()
                );
            }
            let info = g.join("info");
            if info.is_dir() {
                let _ = self.watcher.watch(&info, RecursiveMode::NonRecursive);
            }
        }
    }
}

fn is_enospc(err: &notify::Error) -> bool {
    matches!(&err.kind, notify::ErrorKind::Io(e) if e.raw_os_error() == Some(libc::ENOSPC))
}
