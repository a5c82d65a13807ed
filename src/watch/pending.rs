//! The files waiting for quiet: each changed file waits until no event came for it for the
//! debounce time, then goes out as one [`Change`], in the order files fell quiet.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SendError, Sender};
use std::time::{Duration, Instant, SystemTime};

use crate::git::GitWindow;
use crate::walk::IgnoreRules;

use super::Change;

/// How many earlier paths a [`Change`] carries: a file renamed again and again within one
/// debounce keeps the newest.
const RENAMES_KEPT: usize = 8;

/// A file waiting for quiet.
pub(super) struct Pending {
    due: Instant,
    from_git: Option<GitWindow>,
    /// Listed by a rescan only (see [`Change::rescan`]); an event of its own clears it.
    rescan: Option<SystemTime>,
    /// See [`Change::renamed_from`].
    renamed_from: Vec<PathBuf>,
}

/// Told of a file that starts waiting for quiet, the moment its first event comes: work the
/// file will need (compiling its language's queries) can begin during the debounce.
pub type HeadsUp = Box<dyn Fn(&Path) + Send>;

/// The files waiting for quiet, and where they go once quiet.
pub(super) struct Waiting {
    files: HashMap<PathBuf, Pending>,
    /// See [`HeadsUp`]; not for the files a rescan lists.
    pub heads_up: Option<HeadsUp>,
    debounce: Duration,
    out: Sender<Change>,
    /// When watching began. Events carry no write times, so after an overflow this is the
    /// only sure bound: a file modified since, whose change the pipeline never saw, changed
    /// during the run; one modified before was there already.
    pub started: SystemTime,
    /// Set while a rescan is listing files (see [`Change::rescan`]).
    pub rescanning: Option<SystemTime>,
}

impl Waiting {
    pub fn new(debounce: Duration, out: Sender<Change>) -> Waiting {
        let started = SystemTime::now();
        Waiting { files: HashMap::new(), heads_up: None, debounce, out, started, rescanning: None }
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// When the first file falls quiet.
    pub fn next_due(&self) -> Option<Instant> {
        self.files.values().map(|p| p.due).min()
    }

    /// `path` changed: it waits for quiet from now. `window`: git's, while its index lock is
    /// held; `moved`: where it was before a rename inside the root, and what of it waited there.
    pub fn schedule(
        &mut self,
        path: PathBuf,
        window: Option<GitWindow>,
        moved: Option<(PathBuf, Option<Pending>)>,
    ) {
        let due = Instant::now() + self.debounce;
        let rescan = self.rescanning;
        if let Some(heads_up) = self.heads_up.as_ref().filter(|_| rescan.is_none()) {
            if !self.files.contains_key(&path) {
                heads_up(&path);
            }
        }
        let entry = self.files.entry(path).or_insert(Pending {
            due,
            from_git: None,
            rescan,
            renamed_from: Vec::new(),
        });
        entry.due = due;
        if let Some((was, carried)) = moved {
            // Renamed here: it keeps what it had there, and what it had before that.
            let mut renamed_from = vec![was];
            if let Some(carried) = carried {
                renamed_from.extend(carried.renamed_from);
                entry.from_git = entry.from_git.take().or(carried.from_git);
            }
            renamed_from.append(&mut entry.renamed_from);
            let mut seen = HashSet::new();
            renamed_from.retain(|p| seen.insert(p.clone()));
            renamed_from.truncate(RENAMES_KEPT);
            entry.renamed_from = renamed_from;
        }
        if entry.from_git.is_none() {
            entry.from_git = window;
        }
        if rescan.is_none() {
            entry.rescan = None; // an event of its own: a real change
        }
    }

    /// Marks `path`, if waiting, as possibly git's (`window`), unless it is already.
    pub fn maybe_git(&mut self, path: &Path, window: Option<GitWindow>) {
        if let Some(pending) = self.files.get_mut(path) {
            pending.from_git = pending.from_git.take().or(window);
        }
    }

    /// Sends the files whose quiet time is over at `now`, in the order they fell quiet: a file
    /// saved after another is handled after it. An error: nobody listens any more.
    pub fn send_due(&mut self, now: Instant) -> Result<(), SendError<Change>> {
        let mut due: Vec<(Instant, PathBuf)> = self
            .files
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(path, p)| (p.due, path.clone()))
            .collect();
        due.sort();
        for (_, path) in due {
            if let Some(Pending { from_git, rescan, renamed_from, .. }) = self.files.remove(&path) {
                self.out.send(Change { path, from_git, rescan, renamed_from })?;
            }
        }
        Ok(())
    }

    /// Takes the files waiting at `dir` or below it, by their path relative to it (`""` for
    /// `dir` itself): they moved away with it.
    pub fn take_below(&mut self, dir: &Path) -> HashMap<PathBuf, Pending> {
        let below: Vec<PathBuf> =
            self.files.keys().filter(|p| p.starts_with(dir)).cloned().collect();
        let mut taken = HashMap::new();
        for p in below {
            if let (Some(waiting), Ok(rel)) = (self.files.remove(&p), p.strip_prefix(dir)) {
                taken.insert(rel.to_path_buf(), waiting);
            }
        }
        taken
    }

    /// Forgets the files waiting at `dir` or below it.
    pub fn forget_below(&mut self, dir: &Path) {
        self.files.retain(|p, _| !p.starts_with(dir));
    }

    /// Forgets the files the rules now ignore.
    pub fn forget_ignored(&mut self, rules: &IgnoreRules) {
        self.files.retain(|p, _| !rules.is_ignored(p, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The heads-up comes once a file, at its first event, and not for the files a rescan lists.
    #[test]
    fn a_file_is_announced_ahead_once_at_its_first_event() {
        let (tx, _rx) = std::sync::mpsc::channel();
        let mut waiting = Waiting::new(Duration::from_secs(60), tx);
        let told = Arc::new(Mutex::new(Vec::new()));
        let log = told.clone();
        waiting.heads_up = Some(Box::new(move |p: &Path| log.lock().unwrap().push(p.to_owned())));
        waiting.schedule(PathBuf::from("/r/a.py"), None, None);
        waiting.schedule(PathBuf::from("/r/a.py"), None, None);
        waiting.rescanning = Some(SystemTime::now());
        waiting.schedule(PathBuf::from("/r/listed.py"), None, None);
        waiting.rescanning = None;
        waiting.schedule(PathBuf::from("/r/b.rs"), None, None);
        assert_eq!(*told.lock().unwrap(), [PathBuf::from("/r/a.py"), PathBuf::from("/r/b.rs")]);
    }
}
