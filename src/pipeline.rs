//! The pipelines: one-shot ones behind `scan`, `stamp` and `resolve` (walk → safe read →
//! language → scan → stamp or resolve → checked atomic replace), and the live one behind `watch`
//! and the server ([`LivePipeline`]: read → fresh markers → drop what git brought → stamp →
//! asks), run by one worker, [`Live`].

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Problem, StartError};
use crate::fsio::{self, ReadError, Source, WriteError};
use crate::git::{self, GitWindow};
use crate::id::{uuid_random, MarkerId};
use crate::languages::LanguageTable;
use crate::scan::{Marker, Scanner};
use crate::stamp::{self, ResolveError};
use crate::walk::{self, Listing};
use crate::watch::{Change, Watch, WatchStats};

/// How often a stamp or resolve is tried again when the user's write gets in between.
pub const WRITE_ATTEMPTS: usize = 5;

/// The markers found in one file.
#[derive(Debug)]
pub struct FileMarkers {
    /// The file, as the walk found it.
    pub path: PathBuf,
    /// Its markers, in file order.
    pub markers: Vec<Marker>,
}

/// What a batch scan found, and the files it could not read.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// Files with at least one marker, sorted by path.
    pub files: Vec<FileMarkers>,
    /// Files scanned (read and matched to a language).
    pub scanned: usize,
    /// Files skipped or failed, with the reason.
    pub errors: Vec<ReadError>,
    /// Parts of the tree that could not be listed (unreadable directories).
    pub unlisted: Vec<ignore::Error>,
}

/// Reads and scans one file. `Ok(None)` means the file is in no known language.
pub fn scan_file(scanner: &Scanner, path: &Path) -> Result<Option<Vec<Marker>>, ReadError> {
    let source = fsio::read_source(path)?;
    let Some(lang) = scanner.table().detect(path, &source.bytes) else {
        return Ok(None);
    };
    Ok(Some(scanner.scan(lang, &source.bytes)))
}

/// Scans every file under `paths` (files named directly are always scanned) on `threads`
/// threads.
pub fn scan_paths(scanner: &Scanner, paths: &[PathBuf], threads: usize) -> ScanReport {
    let threads = threads.max(1);
    let Listing { files, unlisted } = candidate_files(scanner.table(), paths, threads);
    let next = AtomicUsize::new(0);
    let report = Mutex::new(ScanReport { unlisted, ..ScanReport::default() });
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                let result = scan_file(scanner, path);
                let mut report = report.lock().unwrap_or_else(|e| e.into_inner());
                match result {
                    Ok(Some(markers)) => {
                        report.scanned += 1;
                        if !markers.is_empty() {
                            report.files.push(FileMarkers { path: path.clone(), markers });
                        }
                    }
                    Ok(None) => {}
                    Err(e) => report.errors.push(e),
                }
            });
        }
    });
    let mut report = report.into_inner().unwrap_or_else(|e| e.into_inner());
    report.files.sort_by(|a, b| a.path.cmp(&b.path));
    report.errors.sort_by(|a, b| a.path().cmp(b.path()));
    report
}

/// The files under `paths` that may be in a known language; files named directly always count.
pub fn candidate_files(table: &LanguageTable, paths: &[PathBuf], threads: usize) -> Listing {
    let explicit: Vec<&PathBuf> =
        paths.iter().filter(|p| !std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())).collect();
    let mut listing = walk::files(paths, threads);
    listing.files.retain(|p| explicit.contains(&p) || table.may_claim(p));
    listing
}

/// Why a file could not be stamped or resolved.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The file could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The new bytes could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The user kept writing the file: every attempt lost the race (as it should).
    #[error("{path}: kept changing; gave up after {attempts} attempts")]
    Busy {
        /// The file.
        path: PathBuf,
        /// How often it was tried.
        attempts: usize,
    },
}

/// Stamps every untagged marker of `path` and returns them with their new ids (`tag`), or,
/// with `dry_run`, the ids they would get. If the user writes the file meanwhile, the stamp is
/// abandoned and tried again on the new bytes, up to `attempts` times: the user's write always
/// wins, and a marker still untagged in it is stamped there.
pub fn stamp_file(
    scanner: &Scanner,
    path: &Path,
    dry_run: bool,
    attempts: usize,
) -> Result<Vec<Marker>, EditError> {
    edit_file(path, attempts, |bytes| {
        let Some(lang) = scanner.table().detect(path, bytes) else {
            return Edit::Keep(Vec::new());
        };
        let markers = scanner.scan(lang, bytes);
        let stamps = stamp::plan(bytes, &markers, uuid_random);
        let untagged = markers.into_iter().filter(|m| !m.is_tagged());
        let asks: Vec<Marker> = untagged
            .zip(&stamps)
            .map(|(mut m, s)| {
                m.tag = Some(s.id);
                m
            })
            .collect();
        if stamps.is_empty() || dry_run {
            return Edit::Keep(asks);
        }
        Edit::Write(stamp::splice(bytes, &stamps), asks)
    })
}

/// Removes the marker(s) tagged `id` from `path`; `Ok(false)` if the file has none.
pub fn resolve_file(
    scanner: &Scanner,
    path: &Path,
    id: MarkerId,
    attempts: usize,
) -> Result<bool, EditError> {
    let tag = id.tag();
    edit_file(path, attempts, |bytes| {
        if memchr::memmem::find(bytes, tag.as_bytes()).is_none() {
            return Edit::Keep(false);
        }
        let Some(lang) = scanner.table().detect(path, bytes) else {
            return Edit::Keep(false);
        };
        match stamp::resolve(bytes, &scanner.scan(lang, bytes), id) {
            Ok(resolved) => Edit::Write(resolved, true),
            // The tag's bytes are there but not as a marker (inside a string, say).
            Err(ResolveError::UnknownId(_)) => Edit::Keep(false),
        }
    })
}

/// What an edit of a file's bytes decided.
enum Edit<T> {
    /// Nothing to write.
    Keep(T),
    /// Replace the file with these bytes.
    Write(Vec<u8>, T),
}

/// Reads `path`, lets `edit` decide, and writes its bytes with the checked atomic replace. When
/// the user writes the file meanwhile, the edit is done again on their bytes (their write wins),
/// up to `attempts` times.
fn edit_file<T>(
    path: &Path,
    attempts: usize,
    mut edit: impl FnMut(&[u8]) -> Edit<T>,
) -> Result<T, EditError> {
    for _ in 0..attempts {
        let source = fsio::read_source(path)?;
        let (new, result) = match edit(&source.bytes) {
            Edit::Keep(result) => return Ok(result),
            Edit::Write(new, result) => (new, result),
        };
        match fsio::replace_checked(path, &source.bytes, &new) {
            Ok(()) => return Ok(result),
            Err(WriteError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(EditError::Busy { path: path.to_path_buf(), attempts })
}

/// Removes the marker(s) tagged `id` from every file under `paths` that holds it; returns those
/// files (none: the id is unknown). Files that cannot be read are skipped; a failed write stops.
pub fn resolve_in_tree(
    scanner: &Scanner,
    paths: &[PathBuf],
    id: MarkerId,
    threads: usize,
) -> Result<Vec<PathBuf>, EditError> {
    let mut resolved = Vec::new();
    let listing = candidate_files(scanner.table(), paths, threads);
    for err in listing.unlisted {
        Problem::Walk(err).log();
    }
    for path in listing.files {
        match resolve_file(scanner, &path, id, WRITE_ATTEMPTS) {
            Ok(true) => resolved.push(path),
            Ok(false) => {}
            Err(EditError::Read(e)) if e.is_skip() => Problem::Read(e).log(),
            Err(e) => return Err(e),
        }
    }
    Ok(resolved)
}

// ---- the live pipeline: read → fresh markers → drop what git brought → stamp → asks ---------

/// A new ask: a marker the user just wrote, stamped with its id (unless the file could not be
/// written).
#[derive(Debug, Clone)]
pub struct Ask {
    /// The file, absolute.
    pub path: PathBuf,
    /// The file relative to the root, `/`-separated.
    pub file: String,
    /// The marker as found; `tag` holds the new id when `stamped`.
    pub marker: Marker,
    /// False when the file could not be written (read-only, permissions): the ask is announced
    /// once per run, untagged.
    pub stamped: bool,
}

impl Ask {
    /// The id the ask is known by, if it was stamped.
    pub fn id(&self) -> Option<MarkerId> {
        self.marker.tag
    }

    /// The id for logs, or `untagged`.
    pub fn label(&self) -> String {
        self.id().map_or_else(|| "untagged".to_string(), |id| id.to_string())
    }
}

/// Turns changed paths into asks, exactly once each: a marker is stamped first and announced
/// only once its tag is on disk; a stamp that loses a race with the user's write announces
/// nothing (that write brings its own change).
pub struct LivePipeline<'t> {
    root: PathBuf,
    scanner: Scanner<'t>,
    /// Content hash of each file as we last left it: a change event for bytes we have already
    /// handled (our own stamp's rename, a touch) costs one read and a hash.
    last_seen: HashMap<PathBuf, u64>,
    /// Untagged markers we decided not to announce again this run, by file and line text:
    /// those that came from git, and those announced unstamped because the file is read-only.
    quiet: HashSet<(PathBuf, Vec<u8>)>,
    /// Files read and scanned (not skipped as unchanged): for logs and tests.
    scanned: usize,
}

impl<'t> LivePipeline<'t> {
    /// `root` must be canonical (as [`Watch`] reports paths).
    pub fn new(root: PathBuf, scanner: Scanner<'t>) -> Self {
        LivePipeline { root, scanner, last_seen: HashMap::new(), quiet: HashSet::new(), scanned: 0 }
    }

    /// How many changes were scanned; a change to bytes we left as they are is not.
    pub fn scanned(&self) -> usize {
        self.scanned
    }

    /// Handles one changed file; returns the asks to announce. `from_git` is set when git held
    /// its index lock while the file changed (see [`Change`]).
    pub fn process(&mut self, path: &Path, from_git: Option<&GitWindow>) -> Vec<Ask> {
        let Some(source) = self.read(path) else { return Vec::new() };
        let hash = content_hash(&source.bytes);
        if self.last_seen.get(path) == Some(&hash) {
            tracing::debug!("{}: unchanged since we left it", path.display());
            return Vec::new(); // bytes we already handled: our own stamp, a touch
        }
        let mut fresh = self.fresh_markers(path, &source.bytes);
        if !fresh.is_empty() {
            fresh = self.drop_git_lines(path, &source.bytes, fresh, from_git);
        }
        if fresh.is_empty() {
            self.last_seen.insert(path.to_path_buf(), hash);
            return Vec::new();
        }
        self.stamp(path, &source, fresh)
    }

    /// The file's bytes, if it is ours to read: inside the root (symlinks are not followed,
    /// but be sure), of a type some language may claim, and a readable regular file.
    fn read(&mut self, path: &Path) -> Option<Source> {
        if !path.starts_with(&self.root) || !self.scanner.table().may_claim(path) {
            return None;
        }
        match fsio::read_source(path) {
            Ok(source) => Some(source),
            Err(e) => {
                if path.exists() {
                    Problem::Read(e).log();
                } else {
                    tracing::debug!("{e}"); // deleted or renamed away: its new path says so
                }
                self.last_seen.remove(path);
                None
            }
        }
    }

    /// The untagged markers of the file that were not already settled this run.
    fn fresh_markers(&mut self, path: &Path, bytes: &[u8]) -> Vec<Marker> {
        let Some(lang) = self.scanner.table().detect(path, bytes) else { return Vec::new() };
        self.scanned += 1;
        let markers = self.scanner.scan(lang, bytes);
        tracing::debug!("{}: {} marker(s)", path.display(), markers.len());
        let settled = |m: &Marker| self.quiet.contains(&(path.to_path_buf(), line_of(bytes, m)));
        markers.into_iter().filter(|m| !m.is_tagged() && !settled(m)).collect()
    }

    /// Drops the markers that arrived through git rather than from the user's hands: their
    /// line is in a version of the file git could have written (see
    /// [`git::lines_git_could_write`]). They stay quiet for the rest of the run.
    fn drop_git_lines(
        &mut self,
        path: &Path,
        bytes: &[u8],
        mut fresh: Vec<Marker>,
        from_git: Option<&GitWindow>,
    ) -> Vec<Marker> {
        let git_lines = git::lines_git_could_write(path, from_git);
        fresh.retain(|m| {
            let line = line_of(bytes, m);
            let arrived = git_lines.contains(&line);
            if arrived {
                tracing::debug!("{}:{}: from git, not announced", path.display(), m.line);
                self.quiet.insert((path.to_path_buf(), line));
            }
            !arrived
        });
        fresh
    }

    /// Stamps the fresh markers with new ids and returns them as asks. If the user wrote the
    /// file meanwhile, nothing (their write brings its own change); if the file cannot be
    /// written, the asks untagged, once per run.
    fn stamp(&mut self, path: &Path, source: &Source, fresh: Vec<Marker>) -> Vec<Ask> {
        let bytes = &source.bytes;
        let stamps = stamp::plan(bytes, &fresh, uuid_random);
        let stamped = stamp::splice(bytes, &stamps);
        let ask = |marker, stamped| Ask {
            path: path.to_path_buf(),
            file: relative(&self.root, path),
            marker,
            stamped,
        };
        match fsio::replace_checked(path, bytes, &stamped) {
            Ok(()) => {
                tracing::debug!("{}: stamped {} ask(s)", path.display(), stamps.len());
                self.last_seen.insert(path.to_path_buf(), content_hash(&stamped));
                let ids = stamps.into_iter().map(|s| Some(s.id));
                fresh.into_iter().zip(ids).map(|(m, tag)| ask(Marker { tag, ..m }, true)).collect()
            }
            Err(WriteError::Conflict { .. }) => {
                tracing::debug!(
                    "{}: changed while stamping; its own event follows",
                    path.display()
                );
                Vec::new()
            }
            Err(e) => {
                Problem::Write(e).log();
                self.last_seen.insert(path.to_path_buf(), content_hash(bytes));
                let lines: Vec<Vec<u8>> = fresh.iter().map(|m| line_of(bytes, m)).collect();
                self.quiet.extend(lines.into_iter().map(|l| (path.to_path_buf(), l)));
                fresh.into_iter().map(|m| ask(m, false)).collect()
            }
        }
    }
}

/// `path` relative to `root`, `/`-separated (as asks name their file).
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// The whole line holding the marker's trigger, without its line ending: what git's versions
/// of the file are searched for (a multi-line ask is known by its first line).
fn line_of(src: &[u8], m: &Marker) -> Vec<u8> {
    let at = m.insert_at;
    let start = src[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let end = memchr::memchr(b'\n', &src[at..]).map_or(src.len(), |i| at + i);
    let line = &src[start..end];
    line.strip_suffix(b"\r").unwrap_or(line).to_vec()
}

// ---- the one live worker: watch → pipeline → asks, for `watch` and the server --------------

/// How a live run is set up.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The directory to watch.
    pub root: PathBuf,
    /// Quiet time after a file's last event before it is read.
    pub debounce: Duration,
    /// The word that starts an ask.
    pub trigger: String,
}

/// A running watch and the worker that turns its changes into asks. Every ask goes to the
/// sink given to [`Live::start`], in order; the sink answers [`ControlFlow::Break`] when
/// nobody listens any more, and the worker ends.
pub struct Live {
    watch: Option<Watch>,
    worker: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    finished: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Live {
    /// Watches the root and starts the worker; returns once every directory is watched.
    pub fn start(
        options: &LiveOptions,
        on_ask: impl FnMut(Ask) -> ControlFlow<()> + Send + 'static,
    ) -> Result<Live, StartError> {
        let scanner = Scanner::new(LanguageTable::builtin(), &options.trigger)?;
        let (watch, changes) = Watch::start(&options.root, options.debounce)?;
        let mut live = LivePipeline::new(watch.root().to_path_buf(), scanner);
        let stop = Arc::new(AtomicBool::new(false));
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let worker = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("pipeline".into())
                .spawn(move || {
                    run_live(&mut live, &changes, &stop, on_ask);
                    drop(done); // tells `finished`
                })
                .map_err(StartError::Thread)?
        };
        Ok(Live { watch: Some(watch), worker: Some(worker), stop, finished: Some(finished) })
    }

    /// The watched root, canonical.
    pub fn root(&self) -> &Path {
        self.watch.as_ref().map_or(Path::new(""), Watch::root)
    }

    /// What could be watched at start-up.
    pub fn stats(&self) -> WatchStats {
        self.watch.as_ref().map(|w| w.stats().clone()).unwrap_or_default()
    }

    /// Resolves when the worker has ended on its own (its sink stopped listening).
    pub async fn finished(&mut self) {
        if let Some(finished) = self.finished.as_mut() {
            let _ = finished.await;
        }
    }

    /// Stops watching, lets the worker finish the file at hand (a stamp is never left
    /// half-done, so no temp file stays behind) and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(watch) = self.watch.take() {
            watch.stop(); // ends the stream of changes: the worker's wait returns
        }
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The worker's loop: each change as it comes (no polling), until the changes end, `stop` is
/// set, or the sink breaks.
fn run_live(
    live: &mut LivePipeline,
    changes: &Receiver<Change>,
    stop: &AtomicBool,
    mut on_ask: impl FnMut(Ask) -> ControlFlow<()>,
) {
    while let Ok(change) = changes.recv() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        tracing::debug!("changed: {}", change.path.display());
        for ask in live.process(&change.path, change.from_git.as_ref()) {
            tracing::debug!("ask {}:{} {}", ask.file, ask.marker.line, ask.label());
            if on_ask(ask).is_break() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::DEFAULT_TRIGGER;

    fn live(root: &Path) -> LivePipeline<'static> {
        let scanner = Scanner::new(LanguageTable::builtin(), DEFAULT_TRIGGER).unwrap();
        LivePipeline::new(root.canonicalize().unwrap(), scanner)
    }

    /// Our own stamp's write comes back as a change: it costs a read and a hash, not a scan.
    #[test]
    fn own_writes_are_not_scanned_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        std::fs::write(&p, "# @claude one\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        assert_eq!(live.scanned(), 1);
        assert!(live.process(&p, None).is_empty());
        assert_eq!(live.scanned(), 1, "the stamped bytes were scanned again");
        std::fs::write(&p, format!("{}# @claude two\n", std::fs::read_to_string(&p).unwrap()))
            .unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        assert_eq!(live.scanned(), 2);
    }

    /// A multi-line ask committed in HEAD is git's, known by its first line.
    #[test]
    fn multi_line_asks_from_head_are_not_announced() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let root = live.root.clone();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .arg("-C")
                .arg(&root)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .is_ok_and(|o| o.status.success());
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        let p = root.join("a.rs");
        std::fs::write(&p, "/* @claude committed\n   over two lines */\nfn a() {}\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "x"]);
        std::fs::write(
            &p,
            "/* @claude committed\n   over two lines */\nfn a() {}\n// @claude new\n",
        )
        .unwrap();
        let asks = live.process(&p, None);
        let texts: Vec<&str> = asks.iter().map(|a| a.marker.text.as_str()).collect();
        assert_eq!(texts, ["@claude new"]);
    }
}
