//! Watching a tree with the backend each OS does best (see [`WatchMode`]): on Linux one
//! non-recursive inotify watch per directory the ignore rules let through, so `node_modules/`
//! and `target/` cost nothing; on macOS (FSEvents) and Windows (`ReadDirectoryChangesW`) one
//! recursive watch on the root, with the same rules applied to each event. Either way, events
//! become debounced [`Change`]s, one per file after it has been quiet for the debounce time.
//! Nothing runs while nothing changes: the watch thread sleeps on its channel, with a timeout
//! only while a file waits for quiet; and on Linux the watches leave out reads
//! (`src/sys/inotify.rs`), so a build or a search reading the tree wakes nothing.
//!
//! Its parts: `events` sorts each event's paths into kinds, `state` (the watch thread) acts on
//! them over the `tree` of watched directories, the `repos` whose index locks hold files back,
//! the `renames` waiting for their second half and the files `pending` quiet.

mod events;
mod pending;
mod renames;
mod repos;
mod state;
mod tree;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use notify::Watcher as _;

use crate::error::StartError;
use crate::git::GitWindow;
use crate::sys::{self, WatchMode};

pub use pending::HeadsUp;
use pending::Waiting;
use state::State;
use tree::Tree;

/// A file that changed and has been quiet for the debounce time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The file, under the watched (canonical) root.
    pub path: PathBuf,
    /// Set when some event for it came while git held its index lock: git may have written it
    /// (checkout, pull, merge, rebase, stash) — or an editor's `git status` merely held the
    /// lock while the user saved. The pipeline tells the two apart by git's own content.
    pub from_git: Option<GitWindow>,
    /// Set when the file was listed by a rescan after lost events (queue overflow), not by an
    /// event of its own: it may not have changed at all. The time watching began: a file not
    /// modified since was there before, and is not a change.
    pub rescan: Option<SystemTime>,
    /// The paths the file had before it (or a directory above it) was renamed inside the root
    /// since its last change, newest first: what it held there it holds now. Empty for a file
    /// that was not moved, or was moved in from outside the root (a new file).
    pub renamed_from: Vec<PathBuf>,
}

/// What the watcher could watch.
#[derive(Debug, Clone, Default)]
pub struct WatchStats {
    /// Directories watched (with one recursive watch: directories the rules let through).
    pub dirs_watched: usize,
    /// Directories left unwatched because the OS watch limit was reached.
    pub dirs_unwatched: usize,
    /// How long watching every directory took.
    pub took: Duration,
}

/// What the watch thread waits for: file events, or the word to stop.
enum Input {
    Event(notify::Result<notify::Event>),
    Stop,
}

/// A running watch; dropping it (or [`Watch::stop`]) ends the thread, and with it the stream
/// of [`Change`]s.
pub struct Watch {
    input: Sender<Input>,
    thread: Option<JoinHandle<()>>,
    root: PathBuf,
    stats: WatchStats,
    events: Arc<AtomicU64>,
}

impl Watch {
    /// Watches `root` (made canonical) and sends debounced changes to the returned receiver.
    /// Returns once every directory is watched.
    pub fn start(root: &Path, debounce: Duration) -> Result<(Watch, Receiver<Change>), StartError> {
        Watch::start_in_mode(root, debounce, sys::WATCH_MODE, None, None)
    }

    /// [`Watch::start`], or with `since` [`Watch::start_after`], telling `heads_up` of each file
    /// at its first event, a debounce before its change is sent.
    pub fn start_with_heads_up(
        root: &Path,
        debounce: Duration,
        since: Option<SystemTime>,
        heads_up: HeadsUp,
    ) -> Result<(Watch, Receiver<Change>), StartError> {
        Watch::start_in_mode(root, debounce, sys::WATCH_MODE, since, Some(heads_up))
    }

    /// [`Watch::start`] for a process taking the root over from its previous owner (see
    /// `owner`): once every directory is watched, the files modified since `since` are listed
    /// as a rescan, for the saves the owner may never have handled. A save after that brings
    /// its own event; one before it is listed: none falls between.
    pub fn start_after(
        root: &Path,
        debounce: Duration,
        since: SystemTime,
    ) -> Result<(Watch, Receiver<Change>), StartError> {
        Watch::start_in_mode(root, debounce, sys::WATCH_MODE, Some(since), None)
    }

    /// [`Watch::start`] with a chosen backend mode (tests run the recursive one on Linux too).
    fn start_in_mode(
        root: &Path,
        debounce: Duration,
        mode: WatchMode,
        since: Option<SystemTime>,
        heads_up: Option<HeadsUp>,
    ) -> Result<(Watch, Receiver<Change>), StartError> {
        let root = check_root(root)?;
        if let Some(why) = sys::watch_caveat(&root) {
            tracing::warn!("{why}");
        }
        let (input, events) = mpsc::channel();
        let watcher = {
            let input = input.clone();
            sys::Watcher::new(
                move |res| {
                    let _ = input.send(Input::Event(res));
                },
                notify::Config::default(),
            )
            .map_err(StartError::Watcher)?
        };
        let (change_tx, change_rx) = mpsc::channel();
        let events_seen = Arc::new(AtomicU64::new(0));
        let tree = Tree::new(root.clone(), mode, watcher);
        let mut waiting = Waiting::new(debounce, change_tx);
        waiting.heads_up = heads_up;
        let mut state = State::new(tree, waiting, events_seen.clone());
        let started = Instant::now();
        state.start(since).map_err(StartError::Watcher)?;
        let stats = WatchStats {
            dirs_watched: state.tree.watched.len(),
            dirs_unwatched: state.tree.unwatched,
            took: started.elapsed(),
        };
        tracing::debug!(
            "watching {} directories under {} ({} ms, {} unwatched)",
            stats.dirs_watched,
            root.display(),
            stats.took.as_millis(),
            stats.dirs_unwatched,
        );
        let thread = std::thread::Builder::new()
            .name("watch".into())
            .spawn(move || state.run(events))
            .map_err(StartError::Thread)?;
        Ok((Watch { input, thread: Some(thread), root, stats, events: events_seen }, change_rx))
    }

    /// The watched root, canonical: every [`Change`] path is under it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What could be watched at start-up.
    pub fn stats(&self) -> &WatchStats {
        &self.stats
    }

    /// How many events the OS has delivered so far, changes or not: each one woke the watch
    /// thread. Reading a file must bring none.
    pub fn events_seen(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Ends the watch thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.input.send(Input::Stop);
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

/// The root, canonical, if it is a directory we can list: anything else would watch nothing
/// and deliver nothing, silently.
pub(crate) fn check_root(root: &Path) -> Result<PathBuf, StartError> {
    let error = |source| StartError::Root { path: root.to_path_buf(), source };
    let canonical = root.canonicalize().map_err(error)?;
    if !canonical.is_dir() {
        return Err(StartError::NotADirectory(root.to_path_buf()));
    }
    std::fs::read_dir(&canonical).map_err(error)?;
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::mpsc::RecvTimeoutError;

    use super::*;

    const DEADLINE: Duration = Duration::from_secs(20);

    fn write(root: &Path, rel: &str) -> PathBuf {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        crate::test_support::write(&p, "# @claude hi\n").unwrap();
        p
    }

    /// Every change up to `sentinel`'s (changes come in the order files fell quiet, so anything
    /// written before the sentinel has been reported by then).
    fn changes_until(rx: &Receiver<Change>, root: &Path, sentinel: &str) -> Vec<PathBuf> {
        write(root, sentinel);
        let mut got = Vec::new();
        loop {
            let c = rx.recv_timeout(DEADLINE).expect("a change within the deadline");
            if c.path == root.join(sentinel) {
                return got;
            }
            got.push(c.path);
        }
    }

    /// A rename inside the root, of a file or of a directory (with a file saved in it just
    /// before), says where each file was, and a file renamed twice where it was both times; one
    /// moved in from outside the root says nothing. In both watch modes.
    #[test]
    fn renames_say_where_a_file_was() {
        for mode in [WatchMode::Recursive, sys::WATCH_MODE] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            let outside = tempfile::tempdir().unwrap();
            for rel in ["a.py", "c.py", "pkg/x.py", "pkg/sub/y.py"] {
                write(&root, rel);
            }
            write(outside.path(), "z.py");
            let (watch, rx) =
                Watch::start_in_mode(&root, Duration::from_millis(50), mode, None, None).unwrap();
            std::fs::rename(root.join("a.py"), root.join("b.py")).unwrap();
            std::fs::rename(root.join("c.py"), root.join("d.py")).unwrap();
            std::fs::rename(root.join("d.py"), root.join("e.py")).unwrap();
            write(&root, "pkg/sub/y.py");
            std::fs::rename(root.join("pkg"), root.join("pkg2")).unwrap();
            std::fs::rename(outside.path().join("z.py"), root.join("z.py")).unwrap();
            write(&root, "s.py");
            let mut moved = HashMap::new();
            loop {
                let c = rx.recv_timeout(DEADLINE).expect("a change within the deadline");
                if c.path == root.join("s.py") {
                    break;
                }
                if c.path.exists() {
                    let rel = |p: &PathBuf| p.strip_prefix(&root).unwrap().to_path_buf();
                    moved.insert(rel(&c.path), c.renamed_from.iter().map(rel).collect::<Vec<_>>());
                }
            }
            let want: HashMap<PathBuf, Vec<PathBuf>> = [
                ("b.py", &["a.py"][..]),
                ("e.py", &["d.py", "c.py"]),
                ("pkg2/x.py", &["pkg/x.py"]),
                ("pkg2/sub/y.py", &["pkg/sub/y.py"]),
                ("z.py", &[]),
            ]
            .into_iter()
            .map(|(to, from)| (to.into(), from.iter().map(PathBuf::from).collect()))
            .collect();
            assert_eq!(moved, want, "{mode:?}");
            watch.stop();
        }
    }

    /// The one-recursive-watch mode (macOS, Windows) applies the ignore rules to events: run
    /// here with inotify's recursive emulation, it must report what per-directory watching
    /// reports and nothing from ignored trees.
    #[test]
    fn a_recursive_watch_applies_the_ignore_rules_to_events() {
        for mode in [WatchMode::Recursive, sys::WATCH_MODE] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            std::fs::write(root.join(".gitignore"), "out/\n*.log.py\n").unwrap();
            for d in ["src", "out/deep", "node_modules/pkg", "gone"] {
                std::fs::create_dir_all(root.join(d)).unwrap();
            }
            let (watch, rx) =
                Watch::start_in_mode(&root, Duration::from_millis(50), mode, None, None).unwrap();
            assert!(watch.stats().dirs_watched >= 3, "{:?}", watch.stats());
            let saved = write(&root, "src/a.py");
            write(&root, "out/deep/b.py");
            write(&root, "node_modules/pkg/c.py");
            write(&root, "src/d.log.py");
            assert_eq!(changes_until(&rx, &root, "s1.py"), vec![saved], "{mode:?}");

            // A directory made (or renamed in) later is covered; one renamed away is not.
            let new = write(&root, "fresh/sub/e.py");
            std::fs::rename(root.join("gone"), root.join("out/gone")).unwrap();
            write(&root, "out/gone/f.py");
            let mut got = changes_until(&rx, &root, "s2.py");
            // With a watch per directory, an event queued before the rename was seen can name
            // the directory's old path; such a path names nothing, and reading it finds nothing.
            got.retain(|p| p.exists());
            assert_eq!(got, vec![new], "{mode:?}");
            watch.stop();
        }
    }

    /// Builds, language servers and `rg` read thousands of files a second: reading (and listing)
    /// the watched tree must not wake the watcher at all, let alone schedule a change.
    #[test]
    fn reading_the_tree_brings_no_events() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut files = Vec::new();
        for d in 0..10 {
            for f in 0..10 {
                files.push(write(&root, &format!("d{d}/f{f}.py")));
            }
        }
        let (watch, rx) = Watch::start(&root, Duration::from_millis(50)).unwrap();
        let mut reads = 0;
        for _ in 0..3 {
            for d in 0..10 {
                reads += std::fs::read_dir(root.join(format!("d{d}"))).unwrap().count();
            }
            for f in &files {
                assert!(!std::fs::read(f).unwrap().is_empty());
                reads += 1;
            }
        }
        // Events come in order: by the sentinel's change, the reads' events have been counted.
        assert_eq!(changes_until(&rx, &root, "sentinel.py"), Vec::<PathBuf>::new());
        let seen = watch.events_seen();
        // The sentinel's own save brings a few events (create, modify, close-write); the
        // reads, hundreds, must bring none.
        assert!(seen < 10, "{seen} events for {reads} reads and one save");
        watch.stop();
    }

    /// The root deleted and made again is watched again, in both modes; once its parent is
    /// gone too, nothing is left to watch and the stream of changes ends. Linux semantics: under
    /// Wine (.ci/cross.sh), as on Windows, a directory the watch holds open is only marked for
    /// deletion, and making it again fails with "already exists" (os error 183).
    #[test]
    #[cfg_attr(not(target_os = "linux"), ignore = "a watched directory is not gone while held")]
    fn a_root_made_again_is_watched_again_and_one_gone_for_good_ends_the_watch() {
        for mode in [WatchMode::Recursive, sys::WATCH_MODE] {
            let dir = tempfile::tempdir().unwrap();
            let parent = dir.path().canonicalize().unwrap().join("parent");
            let root = parent.join("R");
            std::fs::create_dir_all(&root).unwrap();
            let (watch, rx) =
                Watch::start_in_mode(&root, Duration::from_millis(50), mode, None, None).unwrap();
            assert_eq!(changes_until(&rx, &root, "s1.py"), Vec::<PathBuf>::new(), "{mode:?}");
            std::fs::remove_dir_all(&root).unwrap();
            std::fs::create_dir(&root).unwrap();
            let new = write(&root, "sub/x.py");
            let mut got = changes_until(&rx, &root, "s2.py");
            got.retain(|p| p.exists());
            assert_eq!(got, vec![new], "{mode:?}");

            std::fs::remove_dir_all(&parent).unwrap();
            loop {
                match rx.recv_timeout(DEADLINE) {
                    Ok(_) => continue,
                    Err(RecvTimeoutError::Disconnected) => break,
                    Err(RecvTimeoutError::Timeout) => panic!("{mode:?}: the watch goes on"),
                }
            }
            watch.stop();
        }
    }
}
