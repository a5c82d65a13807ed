//! Big files scanned beside the worker. Parsing and scanning a file of a megabyte takes the
//! better part of a second; on the worker, every other file's change would wait that long. A
//! file of at least [`ASIDE_BYTES`] with the trigger in it is therefore handed to a thread of
//! its own (with its own parser and tree cache: its next save is parsed incrementally there),
//! and waits, parked, while the worker goes on; when its markers are in, the worker is woken
//! and looks at the file again with them ready. `scan` is pure: only bytes go out and only
//! markers come back.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};

use crate::git::Waker;
use crate::languages::{Language, LanguageTable};
use crate::scan::{Marker, Scanner, TreeCache};

/// Files at least this big are scanned beside the worker: a 128 KiB file parses in about
/// 20 ms, below which the hand-over is not worth it (a 100 KB file's first save stays fast).
pub(super) const ASIDE_BYTES: usize = 128 * 1024;

/// What the scan of a file's bytes found: its markers, or `None` if the scan failed (then the
/// worker scans it itself).
type Found = Option<Vec<Marker>>;

/// The worker's end of the thread that scans big files.
pub(super) struct Aside {
    jobs: Sender<Job>,
    /// Scans done, by file: the hash of the bytes scanned and what was found.
    done: Arc<Mutex<HashMap<PathBuf, (u64, Found)>>>,
    /// Files sent and not taken back yet, with the hash of the bytes sent: a file whose
    /// bytes are being scanned is not sent again.
    pending: HashMap<PathBuf, u64>,
}

struct Job {
    path: PathBuf,
    language: String,
    bytes: Vec<u8>,
    hash: u64,
}

impl Aside {
    /// Starts the thread, which scans for `trigger` over the built-in languages and calls
    /// `wake` with each file it is done with. `None` if no thread could be started (then big
    /// files are scanned on the worker, as small ones are).
    pub fn start(trigger: &str, wake: Waker) -> Option<Aside> {
        let scanner = Scanner::new(LanguageTable::builtin(), trigger).ok()?;
        let (jobs, inbox) = mpsc::channel();
        let done = Arc::new(Mutex::new(HashMap::new()));
        let results = done.clone();
        let spawned = std::thread::Builder::new()
            .name("scan aside".into())
            .spawn(move || scan_jobs(&scanner, &inbox, &results, &*wake));
        if let Err(e) = spawned {
            tracing::warn!("cannot start a thread to scan big files: {e}; the worker scans them");
            return None;
        }
        Some(Aside { jobs, done, pending: HashMap::new() })
    }

    /// What the scan of `path`'s bytes (hashed `hash`) found, if it is done: `Some(None)` if
    /// the scan failed. Takes it out; a scan of other bytes of the file is dropped.
    pub fn take(&mut self, path: &Path, hash: u64) -> Option<Found> {
        let done = self.done.lock().unwrap_or_else(PoisonError::into_inner).remove(path);
        let (scanned, found) = done?;
        if self.pending.get(path) == Some(&scanned) {
            self.pending.remove(path); // else newer bytes are on their way
        }
        (scanned == hash).then_some(found)
    }

    /// Sends `bytes` of `path` (hashed `hash`, in `lang`) to be scanned, unless those very
    /// bytes are being scanned already.
    pub fn send(&mut self, path: &Path, lang: &Language, bytes: &[u8], hash: u64) {
        if self.pending.get(path) == Some(&hash) {
            return;
        }
        self.pending.insert(path.to_path_buf(), hash);
        let job = Job {
            path: path.to_path_buf(),
            language: lang.name.clone(),
            bytes: bytes.to_vec(),
            hash,
        };
        if self.jobs.send(job).is_err() {
            // The thread is gone (it cannot be, short of a bug): say so, and let the worker
            // scan the file itself when it looks again.
            tracing::warn!("{}: the thread scanning big files is gone", path.display());
            let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
            done.insert(path.to_path_buf(), (hash, None));
        }
    }
}

/// The thread's loop: the latest bytes of each file sent, scanned in turn, until the worker's
/// end is dropped.
fn scan_jobs(
    scanner: &Scanner,
    inbox: &Receiver<Job>,
    done: &Mutex<HashMap<PathBuf, (u64, Found)>>,
    wake: &(dyn Fn(&Path) + Send + Sync),
) {
    let mut trees = TreeCache::new();
    while let Ok(job) = inbox.recv() {
        // Of several versions of a file sent meanwhile, only the latest is worth a scan.
        let mut latest = vec![job];
        while let Ok(job) = inbox.try_recv() {
            latest.retain(|j| j.path != job.path);
            latest.push(job);
        }
        for job in latest {
            let found = scan(scanner, &job, &mut trees);
            if found.is_none() {
                trees = TreeCache::new(); // a panic may have left it half updated
            }
            done.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(job.path.clone(), (job.hash, found));
            wake(&job.path);
        }
    }
}

/// The markers of the job's bytes; `None` if its language is unknown here or the scan
/// panicked (said in the log): the worker then scans the file itself.
fn scan(scanner: &Scanner, job: &Job, trees: &mut TreeCache) -> Found {
    let lang = scanner.table().get(&job.language)?;
    let scanned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        scanner.scan_incremental(lang, &job.bytes, trees, &job.path)
    }));
    match scanned {
        Ok(markers) => Some(markers),
        Err(_) => {
            tracing::warn!("{}: scanning it beside the worker failed", job.path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::DEFAULT_TRIGGER;
    use std::time::Duration;

    /// A file changed while its bytes are scanned gets the markers of its latest bytes, never
    /// those of the bytes before; the same bytes sent twice are scanned once.
    #[test]
    fn a_file_changed_while_scanned_gets_the_markers_of_its_latest_bytes() {
        let (tx, woken) = mpsc::channel();
        let wake = Arc::new(move |p: &Path| {
            let _ = tx.send(p.to_path_buf());
        });
        let mut aside = Aside::start(DEFAULT_TRIGGER, wake).unwrap();
        let python = LanguageTable::builtin().get("python").unwrap();
        let path = Path::new("/nowhere/a.py");
        aside.send(path, python, b"# @claude one\n", 1);
        aside.send(path, python, b"# @claude two\nx = 1  # @claude three\n", 2);
        aside.send(path, python, b"# @claude two\nx = 1  # @claude three\n", 2);
        let mut wakes = 0;
        let found = loop {
            woken.recv_timeout(Duration::from_secs(30)).expect("no scan done in 30 s");
            wakes += 1;
            if let Some(found) = aside.take(path, 2) {
                break found.expect("the scan failed");
            }
        };
        let texts: Vec<&str> = found.iter().map(|m| m.text.as_str()).collect();
        assert_eq!(texts, ["@claude two", "@claude three"]);
        assert!(wakes <= 2, "woken {wakes} times for two versions");
        assert!(aside.pending.is_empty(), "still waiting for {:?}", aside.pending);
        assert_eq!(aside.take(path, 1), None, "the first version's markers, after the second's");
    }
}
