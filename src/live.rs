//! The live pipeline behind `watch` and the server: a changed file is read, its fresh markers
//! are found, those git brought or the user already asked are dropped, a paragraph is cut to
//! the lines written with it, and the rest are stamped (or, with `--tag never`, only recorded)
//! and handed on as [`Ask`]s — by one worker, [`Live`], that both front ends run.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crate::asks::{self, AskRecord, Asks, TagMode};
use crate::error::{Problem, StartError};
use crate::fsio::{self, Source, WriteError};
use crate::git::{self, GitLines, GitWindow};
use crate::id::{uuid_random, MarkerId};
use crate::languages::{Language, LanguageTable};
use crate::pipeline::{is_recorded, relative};
use crate::scan::{Marker, Scanner, TreeCache};
use crate::stamp::{self, Stamp};
use crate::sys;
use crate::watch::{Change, Watch, WatchStats};

/// The previous bytes of recently changed files are kept up to this total: what tells the lines
/// a user just wrote from those that were already there.
const PREVIOUS_BYTES: usize = 32 * 1024 * 1024;

/// A new ask: a marker the user just wrote, with its id.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The file, absolute.
    pub path: PathBuf,
    /// The file relative to the root, `/`-separated.
    pub file: String,
    /// The marker as announced (a paragraph cut to the lines written with it); `tag` holds the
    /// ask's id, unless the file could not be written in `--tag file` mode.
    pub marker: Marker,
    /// True when the id is written into the file as a tag.
    pub stamped: bool,
}

impl Ask {
    /// The id the ask is known by: `None` only for a file that could not be stamped.
    pub fn id(&self) -> Option<MarkerId> {
        self.marker.tag
    }

    /// The id for logs, or `untagged`.
    pub fn label(&self) -> String {
        self.id().map_or_else(|| "untagged".to_string(), |id| id.to_string())
    }
}

/// Turns changed paths into asks, exactly once each: a marker is recorded and stamped first and
/// announced only once its tag is on disk; a stamp that loses a race with the user's write
/// announces nothing (that write brings its own change); a marker that matches an ask already
/// announced (an editor's stale copy) is that ask, and is left alone.
pub struct LivePipeline<'t> {
    root: PathBuf,
    scanner: Scanner<'t>,
    mode: TagMode,
    asks: Asks,
    /// Content hash of each file as we last left it: a change event for bytes we have already
    /// handled (our own stamp's rename, a touch) costs one read and a hash.
    last_seen: HashMap<PathBuf, u64>,
    /// The bytes of recently changed files as we last saw them.
    previous: Previous,
    /// The syntax trees of recently scanned files: a save re-parses only what it changed.
    trees: TreeCache,
    /// What git could have written into a file: no process spawned per save.
    git: GitLines,
    /// Untagged markers that git brought, by file and line text: not announced this run.
    from_git: HashSet<(PathBuf, Vec<u8>)>,
    /// Files read and scanned (not skipped as unchanged): for logs and tests.
    scanned: usize,
    /// The directory of the file at hand, held since it was read.
    here: Option<Here>,
    /// Runs between the read and the stamp's write: tests change the file there.
    #[cfg(test)]
    before_stamp: Option<Hook>,
}

impl<'t> LivePipeline<'t> {
    /// A pipeline that stamps files and remembers its asks for this run. `root` must be
    /// canonical (as [`Watch`] reports paths).
    pub fn new(root: PathBuf, scanner: Scanner<'t>) -> Self {
        LivePipeline::with_asks(root, scanner, TagMode::File, Asks::in_memory())
    }

    /// A pipeline that records its asks in `asks`, stamping files or not as `mode` says.
    pub fn with_asks(root: PathBuf, scanner: Scanner<'t>, mode: TagMode, asks: Asks) -> Self {
        LivePipeline {
            root,
            scanner,
            mode,
            asks,
            last_seen: HashMap::new(),
            previous: Previous::default(),
            trees: TreeCache::new(),
            git: GitLines::new(),
            from_git: HashSet::new(),
            scanned: 0,
            here: None,
            #[cfg(test)]
            before_stamp: None,
        }
    }

    /// How many changes were scanned; a change to bytes we left as they are is not.
    pub fn scanned(&self) -> usize {
        self.scanned
    }

    /// Handles one changed file; returns the asks to announce. `from_git` is set when git held
    /// its index lock while the file changed (see [`Change`]).
    pub fn process(&mut self, path: &Path, from_git: Option<&GitWindow>) -> Vec<Ask> {
        let change = Change { path: path.to_path_buf(), from_git: from_git.cloned(), rescan: None };
        self.process_change(&change, &mut |_| true)
    }

    /// Handles one change from the watcher, stamping only when `room(n)` says `n` more asks
    /// can be delivered: a marker whose ask could not go out is left untagged (it is still there
    /// the next time its file changes), never tagged and dropped. A file listed by a rescan
    /// after lost events is handled only if it changed during the run (its bytes differ from
    /// the ones last seen, or, never seen, it was modified after watching began) — a rescan
    /// never fires markers nobody saved (a vendored file's, a dormant one).
    pub fn process_change(
        &mut self,
        change: &Change,
        room: &mut dyn FnMut(usize) -> bool,
    ) -> Vec<Ask> {
        let path = change.path.as_path();
        let Some(source) = self.read(path) else { return Vec::new() };
        let hash = content_hash(&source.bytes);
        if self.last_seen.get(path) == Some(&hash) {
            tracing::debug!("{}: unchanged since we left it", path.display());
            return Vec::new(); // bytes we already handled: our own stamp, a touch
        }
        if let Some(since) = change.rescan {
            // Seen before: its bytes differ, so it changed. Never seen: only if modified since.
            let modified = source.metadata.modified().ok();
            if !self.last_seen.contains_key(path) && modified.is_none_or(|m| m < since) {
                tracing::debug!("{}: unchanged across lost events; not announced", path.display());
                return Vec::new();
            }
        }
        let bytes = &source.bytes;
        let Some(lang) = self.scanner.table().detect(path, bytes) else { return Vec::new() };
        let file = relative(&self.root, path);
        let mut fresh = self.fresh_markers(lang, path, &file, bytes);
        if !fresh.is_empty() {
            let old_lines = self.old_lines(path, change.from_git.as_ref());
            fresh = self.drop_git_lines(path, bytes, fresh, &old_lines.git);
            fresh = cut_to_new_lines(lang, bytes, fresh, &old_lines);
        }
        if fresh.is_empty() {
            self.remember(path, bytes);
            return Vec::new();
        }
        if !room(fresh.len()) {
            tracing::debug!("{}: asks not deliverable now; left untagged", path.display());
            self.last_seen.remove(path); // so that any next event looks again
            return Vec::new();
        }
        self.announce(lang, path, &file, &source, fresh)
    }

    /// The file's bytes, if it is ours to read: inside the root (symlinks are not followed,
    /// but be sure), of a type some language may claim, and a readable regular file.
    fn read(&mut self, path: &Path) -> Option<Source> {
        self.here = None;
        let rel = path.strip_prefix(&self.root).ok()?;
        if !self.scanner.table().may_claim(path) {
            return None;
        }
        // Reached without following a symlink in any directory of the path, and held: what
        // is read and stamped is in the root, whatever happens to the path meanwhile.
        let (rel_dir, name) = (rel.parent().unwrap_or(Path::new("")), path.file_name()?);
        let beneath = match sys::dir_beneath(&self.root, rel_dir) {
            Ok(beneath) => beneath,
            Err(e) => {
                tracing::debug!(
                    "{}: not read: its directory is gone or a symlink ({e})",
                    path.display()
                );
                self.last_seen.remove(path);
                return None;
            }
        };
        let real = beneath.path(name);
        let here = Here { beneath, real, rel_dir: rel_dir.to_path_buf() };
        match fsio::read_source(&here.real) {
            Ok(source) => {
                self.here = Some(here);
                Some(source)
            }
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

    /// The untagged markers of the file that are neither git's nor an ask already announced;
    /// and the asks of this file whose marker is gone are settled.
    fn fresh_markers(
        &mut self,
        lang: &Language,
        path: &Path,
        file: &str,
        bytes: &[u8],
    ) -> Vec<Marker> {
        self.scanned += 1;
        let markers = self.scanner.scan_incremental(lang, bytes, &mut self.trees, path);
        tracing::debug!("{}: {} marker(s)", path.display(), markers.len());
        if markers.is_empty() && !self.asks.may_have_pending(file) {
            return Vec::new(); // nothing to ask, nothing asked here to settle
        }
        let records = self.asks.update(|records| {
            settle_gone(lang, bytes, file, &markers, records);
            records.iter().filter(|r| r.file == file).cloned().collect::<Vec<_>>()
        });
        let is_git = |m: &Marker| self.from_git.contains(&(path.to_path_buf(), line_of(bytes, m)));
        markers
            .into_iter()
            .filter(|m| !m.is_tagged() && !is_git(m))
            .filter(|m| {
                let known = known(lang, bytes, file, m, &records);
                if let Some(r) = known {
                    tracing::debug!("{}:{}: already asked as {}", path.display(), m.line, r.id);
                }
                known.is_none()
            })
            .collect()
    }

    /// The lines the file held before: in git (see [`git::lines_git_could_write`]) and in the
    /// version we last saw.
    fn old_lines(&mut self, path: &Path, from_git: Option<&GitWindow>) -> OldLines {
        let git = self.git.lines(path, from_git);
        let seen = match self.previous.get(path) {
            Some(previous) => previous.split(|&b| b == b'\n').map(git::normalize_line).collect(),
            None => HashSet::new(),
        };
        OldLines { git, seen }
    }

    /// Drops the markers that arrived through git rather than from the user's hands: their
    /// trigger line is in a version of the file git could have written. They stay quiet for
    /// the rest of the run.
    fn drop_git_lines(
        &mut self,
        path: &Path,
        bytes: &[u8],
        mut fresh: Vec<Marker>,
        git_lines: &HashSet<Vec<u8>>,
    ) -> Vec<Marker> {
        fresh.retain(|m| {
            let line = line_of(bytes, m);
            let arrived = git_lines.contains(&git::normalize_line(&line));
            if arrived {
                tracing::debug!("{}:{}: from git, not announced", path.display(), m.line);
                self.from_git.insert((path.to_path_buf(), line));
            }
            !arrived
        });
        fresh
    }

    /// Records the fresh markers as asks with new ids (unless another server on the root just
    /// did), then, with `--tag file`, stamps them. If the user wrote the file meanwhile, nothing
    /// (their write brings its own change); if the file cannot be written, the asks go out
    /// untagged — recorded, so once.
    fn announce(
        &mut self,
        lang: &Language,
        path: &Path,
        file: &str,
        source: &Source,
        fresh: Vec<Marker>,
    ) -> Vec<Ask> {
        let bytes = &source.bytes;
        let claimed = self.asks.update(|records| claim(lang, bytes, file, fresh, records));
        let ask = |marker, stamped| Ask {
            path: path.to_path_buf(),
            file: file.to_string(),
            marker,
            stamped,
        };
        if claimed.is_empty() || self.mode == TagMode::Never {
            self.remember(path, bytes);
            return claimed.into_iter().map(|m| ask(m, false)).collect();
        }
        let stamps: Vec<Stamp> = claimed
            .iter()
            .filter_map(|m| Some(Stamp { insert_at: m.insert_at, id: m.tag? }))
            .collect();
        let stamped = stamp::splice(bytes, &stamps);
        if stamped.len() as u64 > fsio::MAX_FILE_SIZE {
            // Our tag would take the file past the size every reader accepts: it could no
            // longer be listed or resolved. Deliver the asks untagged instead (recorded: once).
            tracing::debug!("{}: a tag would pass the size limit; not stamped", path.display());
            self.remember(path, bytes);
            return claimed.into_iter().map(|m| ask(Marker { tag: None, ..m }, false)).collect();
        }
        #[cfg(test)]
        if let Some(hook) = self.before_stamp.as_mut() {
            hook(path);
        }
        let target = self.here.as_ref().map_or_else(|| path.to_path_buf(), |h| h.real.clone());
        let moved =
            self.here.as_ref().is_some_and(|h| !sys::same_dir(&h.beneath, &self.root, &h.rel_dir));
        let written = if moved {
            // A directory of the path was swapped (for a symlink out of the root, say): the
            // path no longer names what was read. Its new state brings its own event.
            Err(WriteError::Conflict { path: path.to_path_buf() })
        } else {
            fsio::replace_checked(&target, bytes, &stamped)
        };
        match written {
            Ok(()) => {
                tracing::debug!("{}: stamped {} ask(s)", path.display(), stamps.len());
                self.remember(path, &stamped);
                claimed.into_iter().map(|m| ask(m, true)).collect()
            }
            Err(e) if is_conflict(&e) => {
                tracing::debug!("{e}; its own event follows");
                let ids: Vec<MarkerId> = stamps.iter().map(|s| s.id).collect();
                self.asks.update(|records| records.retain(|r| !ids.contains(&r.id)));
                // Whatever caused it brings the next change, which must look again even if the
                // bytes are the same: a writer still open (Busy) closes; an open for writing
                // that wrote nothing (`touch`) broke the lease; a directory was swapped for a
                // copy. Nor are these bytes "seen": their ask was not announced, so its lines
                // are not old lines the next time.
                self.last_seen.remove(path);
                Vec::new()
            }
            Err(e) => {
                Problem::Write(e).log();
                self.remember(path, bytes);
                claimed.into_iter().map(|m| ask(Marker { tag: None, ..m }, false)).collect()
            }
        }
    }

    fn remember(&mut self, path: &Path, bytes: &[u8]) {
        self.last_seen.insert(path.to_path_buf(), content_hash(bytes));
        self.previous.insert(path, bytes);
    }
}

/// A write that lost to the user: the file changed, is still being written (open for writing
/// by another program), or is gone from its path (deleted, renamed away with its directory,
/// replaced by a directory or a symlink). Its new state brings its own event (a writer's close
/// does); nothing is announced for the old one.
fn is_conflict(e: &WriteError) -> bool {
    match e {
        WriteError::Conflict { .. } | WriteError::Busy { .. } | WriteError::NotRegular { .. } => {
            true
        }
        WriteError::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// The file at hand: its directory, reached beneath the root and held open, and the name
/// that reaches the file through it.
struct Here {
    beneath: sys::Beneath,
    real: PathBuf,
    /// The directory relative to the root, to check that it is still the one held.
    rel_dir: PathBuf,
}

/// A test's hook into the pipeline.
#[cfg(test)]
type Hook = Box<dyn FnMut(&Path) + Send>;

/// What a file held before this change.
struct OldLines {
    /// Lines git could have written (shared with git's cache: not copied per save).
    git: git::Lines,
    /// The lines of the version we last saw.
    seen: HashSet<Vec<u8>>,
}

impl OldLines {
    fn is_empty(&self) -> bool {
        self.git.is_empty() && self.seen.is_empty()
    }

    /// True if the file held `line` (normalized) before.
    fn contains(&self, line: &[u8]) -> bool {
        self.git.contains(line) || self.seen.contains(line)
    }
}

/// The recorded ask (pending, or resolved within the window) that untagged marker `m` is a
/// copy of, if any.
fn known<'r>(
    lang: &Language,
    src: &[u8],
    file: &str,
    m: &Marker,
    records: &'r [AskRecord],
) -> Option<&'r AskRecord> {
    let now = asks::now();
    let window = asks::RESOLVED_WINDOW.as_secs();
    records.iter().find(|r| {
        r.file == file
            && r.resolved.is_none_or(|at| now.saturating_sub(at) < window)
            && is_recorded(lang, src, m, r)
    })
}

/// Pending asks of `file` whose marker is gone (resolved by hand, deleted) are resolved now, so
/// a stale buffer that brings them back within the window does not ask again.
fn settle_gone(
    lang: &Language,
    src: &[u8],
    file: &str,
    markers: &[Marker],
    records: &mut [AskRecord],
) {
    for r in records.iter_mut().filter(|r| r.file == file && r.is_pending()) {
        if !markers.iter().any(|m| is_recorded(lang, src, m, r)) {
            tracing::debug!("{file}: {} is gone; settled", r.id);
            r.resolved = Some(asks::now());
        }
    }
}

/// Gives each fresh marker a new id and records it — unless, looked at under the ledger's
/// lock, another server on the root has just recorded it. Returns the markers claimed, with
/// their ids as tags.
fn claim(
    lang: &Language,
    src: &[u8],
    file: &str,
    fresh: Vec<Marker>,
    records: &mut Vec<AskRecord>,
) -> Vec<Marker> {
    let mut taken: HashSet<MarkerId> = records.iter().map(|r| r.id).collect();
    let mut claimed = Vec::new();
    for m in fresh {
        if known(lang, src, file, &m, records).is_some() {
            continue;
        }
        let id = MarkerId::fresh(src, &taken, uuid_random);
        taken.insert(id);
        records.push(AskRecord {
            id,
            file: file.to_string(),
            text: m.text.clone(),
            lines: m.end_line - m.line + 1,
            announced: asks::now(),
            resolved: None,
        });
        claimed.push(Marker { tag: Some(id), ..m });
    }
    claimed
}

/// A paragraph ask ends before the first of its continuation lines that the file already held
/// (a `// SAFETY:` note, a licence header, a doc comment the ask was written above): only the
/// lines written with the ask are the ask. A paragraph whose first line is old too was there
/// before (a dormant ask) and is kept whole.
fn cut_to_new_lines(
    lang: &Language,
    src: &[u8],
    fresh: Vec<Marker>,
    old: &OldLines,
) -> Vec<Marker> {
    fresh
        .into_iter()
        .map(|m| {
            if old.is_empty()
                || !stamp::is_paragraph(lang, src, &m)
                || old.contains(&git::normalize_line(&line_of(src, &m)))
            {
                return m;
            }
            let start = line_start(src, m.comment.start);
            let lines = src[start..m.comment.end].split(|&b| b == b'\n');
            let new = lines.skip(1).take_while(|l| !old.contains(&git::normalize_line(l))).count();
            stamp::first_lines(lang, src, &m, new + 1)
        })
        .collect()
}

/// The bytes of recently changed files, bounded by [`PREVIOUS_BYTES`]: the oldest go first.
#[derive(Default)]
struct Previous {
    files: HashMap<PathBuf, Box<[u8]>>,
    order: VecDeque<PathBuf>,
    total: usize,
}

impl Previous {
    fn get(&self, path: &Path) -> Option<&[u8]> {
        self.files.get(path).map(|b| &b[..])
    }

    fn insert(&mut self, path: &Path, bytes: &[u8]) {
        if let Some(old) = self.files.insert(path.to_path_buf(), bytes.into()) {
            self.total -= old.len();
            self.order.retain(|p| p != path);
        }
        self.total += bytes.len();
        self.order.push_back(path.to_path_buf());
        while self.total > PREVIOUS_BYTES {
            let Some(oldest) = self.order.pop_front() else { break };
            if let Some(gone) = self.files.remove(&oldest) {
                self.total -= gone.len();
            }
        }
    }
}

fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn line_start(src: &[u8], offset: usize) -> usize {
    src[..offset].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

/// The whole line holding the marker's trigger, without its line ending: what git's versions
/// of the file are searched for (a multi-line ask is known by its first line).
fn line_of(src: &[u8], m: &Marker) -> Vec<u8> {
    let at = m.insert_at;
    let start = line_start(src, at);
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
    /// Where an ask's id goes: into the file, or only into the ledger.
    pub tag: TagMode,
}

/// Where the live worker's asks go: the terminal, or the MCP server's announcer.
pub trait Sink: Send + 'static {
    /// True if `n` more asks can be delivered now. Markers are stamped only then: a tag on
    /// disk means its ask was delivered or is queued for delivery.
    fn has_room(&mut self, _n: usize) -> bool {
        true
    }

    /// Hands one ask on, in order; [`ControlFlow::Break`] when nobody listens any more.
    fn deliver(&mut self, ask: Ask) -> ControlFlow<()>;
}

/// A closure is a sink with room for anything (the terminal: a write waits for the reader).
impl<F: FnMut(Ask) -> ControlFlow<()> + Send + 'static> Sink for F {
    fn deliver(&mut self, ask: Ask) -> ControlFlow<()> {
        self(ask)
    }
}

/// How long [`Live::stop`] waits for the worker to finish the file at hand. A stamp takes
/// milliseconds; a worker still busy after this is blocked on a sink nobody reads, and is left.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// A running watch and the worker that turns its changes into asks, handing them to the
/// [`Sink`] given to [`Live::start`]; when the sink stops listening, the worker ends.
pub struct Live {
    asks: Asks,
    watch: Option<Watch>,
    worker: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    finished: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Closed (sender dropped) when the worker ends.
    ended: Receiver<()>,
}

impl Live {
    /// Watches the root and starts the worker; returns once every directory is watched.
    pub fn start(options: &LiveOptions, sink: impl Sink) -> Result<Live, StartError> {
        Live::launch(options, None, None, sink)
    }

    /// [`Live::start`] for a process taking the root over from its previous owner (see
    /// [`crate::owner`]): the files modified since `since` are looked at first, as after lost
    /// events, so that a save the owner never handled is handled now; what it stamped is
    /// tagged and stays quiet. `asks`, if given, is the record to share (the server's tools
    /// already use it).
    pub fn take_over(
        options: &LiveOptions,
        asks: Option<Asks>,
        since: SystemTime,
        sink: impl Sink,
    ) -> Result<Live, StartError> {
        Live::launch(options, asks, Some(since), sink)
    }

    fn launch(
        options: &LiveOptions,
        asks: Option<Asks>,
        since: Option<SystemTime>,
        sink: impl Sink,
    ) -> Result<Live, StartError> {
        let scanner = Scanner::new(LanguageTable::builtin(), &options.trigger)?;
        let (watch, changes) = match since {
            None => Watch::start(&options.root, options.debounce)?,
            Some(since) => Watch::start_after(&options.root, options.debounce, since)?,
        };
        let root = watch.root().to_path_buf();
        let asks = match asks {
            Some(asks) => asks,
            None => Asks::for_mode(options.tag, &root)?,
        };
        let mut live = LivePipeline::with_asks(root, scanner, options.tag, asks.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let (end, ended) = std::sync::mpsc::channel::<()>();
        let worker = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("pipeline".into())
                .spawn(move || {
                    run_live(&mut live, &changes, &stop, sink);
                    drop((done, end)); // tells `finished` and `stop`
                })
                .map_err(StartError::Thread)?
        };
        let finished = Some(finished);
        Ok(Live { asks, watch: Some(watch), worker: Some(worker), stop, finished, ended })
    }

    /// The asks this run records (shared with the worker).
    pub fn asks(&self) -> &Asks {
        &self.asks
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
    /// half-done, so no temp file stays behind) and waits for it — at most [`STOP_GRACE`]: a
    /// worker blocked on a sink nobody reads (a client that stopped reading) is left behind.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(watch) = self.watch.take() {
            watch.stop(); // ends the stream of changes: the worker's wait returns
        }
        if let Some(worker) = self.worker.take() {
            match self.ended.recv_timeout(STOP_GRACE) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    tracing::debug!("the pipeline is blocked on its output; not waiting for it");
                }
                _ => {
                    let _ = worker.join();
                }
            }
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
    mut sink: impl Sink,
) {
    while let Ok(change) = changes.recv() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        tracing::debug!("changed: {}", change.path.display());
        let mut room = |n| sink.has_room(n);
        let asks = live.process_change(&change, &mut room);
        for ask in asks {
            tracing::debug!("ask {}:{} {}", ask.file, ask.marker.line, ask.label());
            if sink.deliver(ask).is_break() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::DEFAULT_TRIGGER;
    use crate::test_support::git_in;

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
        crate::test_support::write(&p, "# @claude one\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        assert_eq!(live.scanned(), 1);
        assert!(live.process(&p, None).is_empty());
        assert_eq!(live.scanned(), 1, "the stamped bytes were scanned again");
        crate::test_support::write(
            &p,
            format!("{}# @claude two\n", std::fs::read_to_string(&p).unwrap()),
        )
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
        let git = |args: &[&str]| git_in(&root, args);
        git(&["init", "-q"]);
        let p = root.join("a.rs");
        crate::test_support::write(&p, "/* @claude committed\n   over two lines */\nfn a() {}\n")
            .unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "x"]);
        crate::test_support::write(
            &p,
            "/* @claude committed\n   over two lines */\nfn a() {}\n// @claude new\n",
        )
        .unwrap();
        let asks = live.process(&p, None);
        let texts: Vec<&str> = asks.iter().map(|a| a.marker.text.as_str()).collect();
        assert_eq!(texts, ["@claude new"]);
    }

    /// A stamp does not cost the file its syntax tree: the tree kept is that of the untagged
    /// bytes, which our tag leaves as they were, so the user's next save is parsed from it.
    #[test]
    fn a_save_after_a_stamp_is_parsed_incrementally() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        let body: String = (0..200).map(|i| format!("def f{i}():\n    return {i}\n")).collect();
        crate::test_support::write(&p, format!("{body}# @claude one\n")).unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        let stamped = std::fs::read_to_string(&p).unwrap();
        assert!(stamped.contains("@claude[fw-"), "not stamped: {stamped}");
        crate::test_support::write(&p, format!("x = 0\n{stamped}# @claude two\n")).unwrap();
        let asks = live.process(&p, None);
        let texts: Vec<&str> = asks.iter().map(|a| a.marker.text.as_str()).collect();
        assert_eq!(texts, ["@claude two"]);
        let counts = live.trees.counts();
        assert_eq!((counts.full, counts.incremental), (1, 1), "{counts:?}");
    }

    /// A repository deleted and cloned again at the same place: its files' markers are the
    /// clone's commits, not the user's, although the reader started for the old repository is
    /// still running (in a directory that is gone).
    #[test]
    fn a_repository_cloned_again_in_place_is_read_anew() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let sub = live.root.join("sub");
        std::fs::create_dir(&sub).unwrap();
        git_in(&sub, &["init", "-q"]);
        let p = sub.join("a.py");
        crate::test_support::write(&p, "x = 1\n").unwrap();
        git_in(&sub, &["add", "."]);
        git_in(&sub, &["commit", "-qm", "one"]);
        crate::test_support::write(&p, "x = 1\n# @claude mine\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        assert_eq!(live.git.readers_started(), 1);

        let upstream = tempfile::tempdir().unwrap();
        let theirs = upstream.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        git_in(&theirs, &["init", "-q"]);
        crate::test_support::write(theirs.join("a.py"), "# @claude injected\n").unwrap();
        git_in(&theirs, &["add", "."]);
        git_in(&theirs, &["commit", "-qm", "theirs"]);
        std::fs::remove_dir_all(&sub).unwrap();
        git_in(&live.root, &["clone", "-q", theirs.to_str().unwrap(), "sub"]);
        let texts: Vec<String> =
            live.process(&p, None).into_iter().map(|a| a.marker.text).collect();
        assert!(texts.is_empty(), "a marker of the clone's commit was announced: {texts:?}");
    }

    /// Saves in a repository start one git process in all, not one each; the lines at `HEAD`
    /// follow `HEAD` as it moves: a commit, refs packed, a detached `HEAD`, a linked worktree.
    #[test]
    fn saves_spawn_no_git_and_follow_head() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let root = live.root.clone();
        git_in(&root, &["init", "-q"]);
        let p = root.join("a.py");
        crate::test_support::write(&p, "x = 1\n").unwrap();
        git_in(&root, &["add", "."]);
        git_in(&root, &["commit", "-qm", "one"]);
        for i in 0..5 {
            crate::test_support::write(&p, format!("x = 1\n# @claude ask {i}\n")).unwrap();
            assert_eq!(live.process(&p, None).len(), 1, "save {i}");
        }
        assert_eq!(live.git.readers_started(), 1, "a git process per save");
        // Untracked, with a space in its name: git answers `HEAD:b c.py missing`.
        let spaced = root.join("b c.py");
        for i in 0..3 {
            crate::test_support::write(&spaced, format!("# @claude spaced {i}\n")).unwrap();
            assert_eq!(live.process(&spaced, None).len(), 1, "spaced save {i}");
        }
        assert_eq!(live.git.readers_started(), 1, "a git process per save of a spaced name");
        let mut head_moves = |commit: &str, setup: &dyn Fn()| {
            crate::test_support::write(&p, format!("# @claude {commit}\n")).unwrap();
            git_in(&root, &["commit", "-qam", commit]);
            setup();
            crate::test_support::write(&p, format!("# @claude {commit}\ny = 2\n")).unwrap();
            assert!(live.process(&p, None).is_empty(), "{commit}: git's marker announced");
        };
        head_moves("committed", &|| {});
        head_moves("packed", &|| drop(git_in(&root, &["pack-refs", "--all", "--prune"])));
        git_in(&root, &["checkout", "-q", "--detach"]);
        head_moves("detached", &|| {});
        assert_eq!(live.git.readers_started(), 1);
        // A linked worktree: its own HEAD, refs in the main repository's git directory.
        let other = tempfile::tempdir().unwrap();
        let wt = other.path().canonicalize().unwrap().join("wt");
        git_in(&root, &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
        let mut in_wt = live_at(&wt);
        let q = wt.join("a.py");
        crate::test_support::write(&q, "# @claude detached\n# @claude in the worktree\n").unwrap();
        git_in(&wt, &["commit", "-qam", "side"]);
        git_in(&wt, &["pack-refs", "--all", "--prune"]);
        crate::test_support::write(
            &q,
            "# @claude detached\n# @claude in the worktree\n# @claude new\n",
        )
        .unwrap();
        let texts: Vec<String> =
            in_wt.process(&q, None).into_iter().map(|a| a.marker.text).collect();
        assert_eq!(texts, ["@claude new"]);
    }

    fn live_at(root: &Path) -> LivePipeline<'static> {
        LivePipeline::new(root.to_path_buf(), scanner())
    }

    fn scanner() -> Scanner<'static> {
        Scanner::new(LanguageTable::builtin(), DEFAULT_TRIGGER).unwrap()
    }

    fn resolve(live: &LivePipeline, id: MarkerId) {
        let record = live.asks.by_id(id).expect("a recorded ask");
        assert!(crate::pipeline::resolve_recorded(&live.scanner, &live.root, &record).unwrap());
        live.asks.resolve(id);
    }

    /// An editor's stale buffer writes the marker back without its tag (with another edit),
    /// and saves again; the ask is resolved; the stale buffer is saved once more. One ask, one
    /// id, the stale copies never re-stamped, and the file ends as the user's bytes minus the
    /// ask.
    #[test]
    fn a_stale_buffer_is_the_same_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.rs");
        crate::test_support::write(&p, "fn a() {}\n// @claude why?\nfn b() {}\n").unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        let id = asks[0].id().unwrap();
        assert!(asks[0].stamped);
        let stale = "fn a() { 1 }\n// @claude why?\nfn b() {}\n";
        for _ in 0..2 {
            crate::test_support::write(&p, stale).unwrap();
            assert!(live.process(&p, None).is_empty(), "a stale copy asked again");
            assert_eq!(
                std::fs::read_to_string(&p).unwrap(),
                stale,
                "the stale copy was re-stamped"
            );
        }
        resolve(&live, id);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "fn a() { 1 }\nfn b() {}\n");
        crate::test_support::write(&p, stale).unwrap();
        assert!(live.process(&p, None).is_empty(), "a resolved ask came back from a stale buffer");
        // The same place, new words: a new ask.
        crate::test_support::write(&p, "fn a() { 1 }\n// @claude why not?\nfn b() {}\n").unwrap();
        let again = live.process(&p, None);
        assert_eq!(again.len(), 1);
        assert_ne!(again[0].id(), Some(id));
    }

    /// The same words in another file are another ask.
    #[test]
    fn the_same_text_in_another_file_is_another_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        for name in ["a.py", "b.py"] {
            let p = live.root.join(name);
            crate::test_support::write(&p, "# @claude add tests\n").unwrap();
            assert_eq!(live.process(&p, None).len(), 1, "{name}");
        }
    }

    /// An ask is its place and its text: the same words typed above another function, while
    /// the first is still pending (tagged), are a second ask; saved again, neither fires.
    #[test]
    fn the_same_words_in_another_place_are_another_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude add a docstring\ndef f(): pass\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        let tagged = std::fs::read_to_string(&p).unwrap();
        assert!(tagged.contains("@claude[fw-"), "{tagged}");
        let both = format!("{tagged}\n# @claude add a docstring\ndef g(): pass\n");
        crate::test_support::write(&p, &both).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1, "the ask above g() was taken for the one above f()");
        assert_eq!(asks[0].marker.line, 4);
        crate::test_support::write(&p, format!("{}x = 1\n", std::fs::read_to_string(&p).unwrap()))
            .unwrap();
        assert!(live.process(&p, None).is_empty());
    }

    /// `--tag never`: two identical markers saved together are two asks, each with its own id,
    /// and neither fires again.
    #[test]
    fn tag_never_two_identical_markers_are_two_asks() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let asks = Asks::with_ledger_in(state.path(), &root).unwrap();
        let mut live = LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks);
        let p = root.join("a.py");
        let text = "# @claude add a docstring\ndef f(): pass\n\n# @claude add a docstring\ndef g(): pass\n";
        crate::test_support::write(&p, text).unwrap();
        let asks = live.process(&p, None);
        let lines: Vec<usize> = asks.iter().map(|a| a.marker.line).collect();
        assert_eq!(lines, [1, 4], "two identical markers");
        assert_ne!(asks[0].id(), asks[1].id());
        crate::test_support::write(&p, format!("{text}x = 1\n")).unwrap();
        assert!(live.process(&p, None).is_empty(), "announced again");
    }

    /// A marker removed by hand (not through `resolve_ask`) is settled too.
    #[test]
    fn a_marker_deleted_by_hand_does_not_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude one\nx = 1\n").unwrap();
        let id = live.process(&p, None)[0].id().unwrap();
        crate::test_support::write(&p, "x = 1\n").unwrap();
        assert!(live.process(&p, None).is_empty());
        assert!(!live.asks.by_id(id).unwrap().is_pending());
        crate::test_support::write(&p, "# @claude one\nx = 1\n").unwrap();
        assert!(live.process(&p, None).is_empty());
    }

    /// An ask written right above comments that were already there is only its own lines:
    /// it is announced so, and resolving it gives back the original file, byte for byte.
    #[test]
    fn an_ask_is_only_the_lines_written_with_it() {
        let originals = [
            (
                "safety.rs",
                "fn f() {\n    // SAFETY: the pointer is valid\n    unsafe { g() }\n}\n",
                1,
                "    // @claude is this sound?\n    // think about aliasing\n",
            ),
            (
                "licence.py",
                "# Copyright 2024 Alice\n# SPDX-License-Identifier: MIT\nimport os\n",
                0,
                "# @claude check the licence year\n",
            ),
            (
                "doc.rs",
                "/// Adds one.\n/// Panics never.\nfn inc(x: u8) -> u8 { x + 1 }\n",
                0,
                "// @claude overflow?\n// at 255\n",
            ),
            (
                "todo.go",
                "package a\n\n// TODO(alice): remove\nvar x = 1\n",
                2,
                "// @claude who is alice?\n",
            ),
        ];
        for (name, original, at, ask) in originals {
            let dir = tempfile::tempdir().unwrap();
            let mut live = live(dir.path());
            let p = live.root.join(name);
            crate::test_support::write(&p, original).unwrap();
            assert!(live.process(&p, None).is_empty(), "{name}: no ask yet");
            let mut lines: Vec<&str> = original.split_inclusive('\n').collect();
            lines.insert(at, ask);
            crate::test_support::write(&p, lines.concat()).unwrap();
            let asks = live.process(&p, None);
            assert_eq!(asks.len(), 1, "{name}");
            let want: Vec<&str> =
                ask.lines().map(|l| l.trim_start().trim_start_matches(['/', '#']).trim()).collect();
            assert_eq!(asks[0].marker.text, want.join("\n"), "{name}");
            assert_eq!(
                asks[0].marker.end_line - asks[0].marker.line + 1,
                ask.lines().count(),
                "{name}"
            );
            resolve(&live, asks[0].id().unwrap());
            assert_eq!(std::fs::read_to_string(&p).unwrap(), original, "{name}: resolve took more");
        }
    }

    /// `--tag never`: no byte of the file changes; the ledger remembers the ask across a
    /// restart, and resolve is the only write.
    #[test]
    fn tag_never_writes_nothing_and_remembers_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let start = || {
            let asks = Asks::with_ledger_in(state.path(), &root).unwrap();
            LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks)
        };
        let mut live = start();
        let p = root.join("a.py");
        let text = "x = 1\n# @claude rename x\n";
        crate::test_support::write(&p, text).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(!asks[0].stamped);
        let id = asks[0].id().expect("an id from the ledger");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text, "the file was written");
        crate::test_support::write(&p, format!("{text}y = 2\n")).unwrap();
        assert!(live.process(&p, None).is_empty());
        drop(live);
        let mut restarted = start();
        crate::test_support::write(&p, format!("{text}y = 3\n")).unwrap();
        assert!(restarted.process(&p, None).is_empty(), "announced again after a restart");
        resolve(&restarted, id);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x = 1\ny = 3\n");
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1, "nothing else in the tree");
    }

    /// A file that vanishes (or turns into a directory) between the read and the stamp is a
    /// conflict: nothing is announced for it, and its ask is not recorded.
    #[test]
    fn a_file_gone_before_the_stamp_announces_nothing() {
        for replace_with_dir in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut live = live(dir.path());
            let p = live.root.join("a.py");
            crate::test_support::write(&p, "# @claude one\n").unwrap();
            live.before_stamp = Some(Box::new(move |path: &Path| {
                std::fs::remove_file(path).unwrap();
                if replace_with_dir {
                    std::fs::create_dir(path).unwrap();
                }
            }));
            assert!(live.process(&p, None).is_empty(), "dir: {replace_with_dir}");
            assert!(live.asks.snapshot().is_empty());
        }
    }

    /// Our tag never takes a file past the size limit: such a file's ask goes out untagged,
    /// once, and the file stays readable.
    #[test]
    fn a_tag_never_crosses_the_size_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("big.py");
        let mut text = "# @claude too big to tag\n".to_string();
        while text.len() < fsio::MAX_FILE_SIZE as usize - 5 {
            text.push_str("x = 1\n");
        }
        text.truncate(fsio::MAX_FILE_SIZE as usize - 5);
        crate::test_support::write(&p, &text).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(!asks[0].stamped && asks[0].id().is_none());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        crate::test_support::write(&p, &text).unwrap();
        live.last_seen.clear();
        assert!(live.process(&p, None).is_empty(), "announced twice");
    }

    /// A file with several names cannot be stamped safely: its ask goes out untagged, once,
    /// and both names keep the user's bytes.
    #[cfg(unix)]
    #[test]
    fn a_hard_linked_file_is_announced_once_unstamped() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude linked\n").unwrap();
        std::fs::hard_link(&p, live.root.join("b.txt")).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(!asks[0].stamped && asks[0].id().is_none());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude linked\n");
        crate::test_support::write(&p, "# @claude linked\n").unwrap();
        live.last_seen.clear();
        assert!(live.process(&p, None).is_empty(), "announced twice");
    }

    /// A file another program still has open for writing is left alone and nothing is
    /// announced; the change its close brings stamps it — even with no byte written since.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_being_written_is_stamped_when_its_writer_closes() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        let mut writer = std::fs::File::create(&p).unwrap();
        writer.write_all(b"# @claude slow\n").unwrap();
        assert!(live.process(&p, None).is_empty(), "announced while being written");
        assert!(live.asks.snapshot().is_empty());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude slow\n");
        drop(writer);
        // The close that ends the writing: ours, or that of a copy a fork elsewhere made.
        crate::test_support::wait_closed(&p);
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(asks[0].stamped);
        assert!(std::fs::read_to_string(&p).unwrap().starts_with("# @claude[fw-"));
    }

    /// No room to deliver: the marker stays untagged, unrecorded, and is found next time.
    #[test]
    fn no_room_no_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude later\n").unwrap();
        let change = Change { path: p.clone(), from_git: None, rescan: None };
        assert!(live.process_change(&change, &mut |_| false).is_empty());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude later\n");
        assert!(live.asks.snapshot().is_empty());
        assert_eq!(live.process(&p, None).len(), 1, "found when there is room again");
    }

    /// A rescan after lost events lists every file; only those that changed during the run
    /// may fire.
    #[test]
    fn a_rescan_fires_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let dormant = live.root.join("vendored.py");
        crate::test_support::write(&dormant, "# @claude from a vendored file\n").unwrap();
        let seen = live.root.join("seen.py");
        crate::test_support::write(&seen, "x = 1\n").unwrap();
        assert!(live.process(&seen, None).is_empty());
        let since = std::time::SystemTime::now();
        std::thread::sleep(Duration::from_millis(20)); // mtimes after `since`, on coarse clocks too
        crate::test_support::write(&seen, "x = 1\n# @claude saved while events were lost\n")
            .unwrap();
        let fresh = live.root.join("new.py");
        crate::test_support::write(&fresh, "# @claude new while events were lost\n").unwrap();
        let mut texts = Vec::new();
        for path in [&dormant, &seen, &fresh] {
            let change = Change { path: path.clone(), from_git: None, rescan: Some(since) };
            texts.extend(
                live.process_change(&change, &mut |_| true).into_iter().map(|a| a.marker.text),
            );
        }
        texts.sort();
        assert_eq!(
            texts,
            ["@claude new while events were lost", "@claude saved while events were lost"]
        );
        // Saved later, the dormant marker is the user's to fire, as always.
        crate::test_support::write(&dormant, "# @claude from a vendored file\n\n").unwrap();
        assert_eq!(live.process(&dormant, None).len(), 1);
    }

    /// A directory of the path swapped for a symlink out of the root — before the read, or
    /// between the read and the stamp: the outside file is never read or written, and nothing
    /// is announced.
    #[cfg(unix)] // std::os::unix::fs::symlink
    #[test]
    fn a_directory_swapped_for_a_symlink_is_not_followed_out_of_the_root() {
        for when in ["before the read", "before the stamp"] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            let secret = outside.path().join("a.py");
            crate::test_support::write(&secret, "# @claude outside the root\n").unwrap();
            let mut live = live(dir.path());
            let sub = live.root.join("sub");
            std::fs::create_dir(&sub).unwrap();
            let p = sub.join("a.py");
            crate::test_support::write(&p, "# @claude outside the root\n").unwrap();
            let outside_dir = outside.path().to_path_buf();
            let swap = move |sub: &Path| {
                std::fs::rename(sub, sub.with_file_name("sub.old")).unwrap();
                std::os::unix::fs::symlink(&outside_dir, sub).unwrap();
            };
            if when == "before the read" {
                swap(&sub);
            } else {
                live.before_stamp = Some(Box::new(move |path: &Path| swap(path.parent().unwrap())));
            }
            assert!(live.process(&p, None).is_empty(), "{when}: announced");
            assert_eq!(
                std::fs::read_to_string(&secret).unwrap(),
                "# @claude outside the root\n",
                "{when}: the outside file was written"
            );
        }
    }

    /// A stamp undone by a conflict that left the same bytes at the path (here a directory of
    /// the path swapped for a copy of itself; on Linux also a lease broken by an open for
    /// writing that writes nothing, like `touch`): the next change must look again, not find
    /// the file "unchanged since we left it" and drop its ask.
    #[cfg(unix)] // Windows: the directory held beneath the root cannot be renamed (sharing)
    #[test]
    fn a_conflict_that_changed_no_byte_still_brings_the_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let sub = live.root.join("sub");
        std::fs::create_dir(&sub).unwrap();
        let p = sub.join("a.py");
        crate::test_support::write(&p, "# @claude after a conflict\n").unwrap();
        let mut once = true;
        live.before_stamp = Some(Box::new(move |path: &Path| {
            if std::mem::take(&mut once) {
                let sub = path.parent().unwrap();
                std::fs::rename(sub, sub.with_file_name("sub.old")).unwrap();
                std::fs::create_dir(sub).unwrap();
                crate::test_support::write(path, "# @claude after a conflict\n").unwrap();
            }
        }));
        assert!(live.process(&p, None).is_empty(), "announced through a conflict");
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1, "the ask was dropped after the conflict");
        assert!(std::fs::read_to_string(&p).unwrap().contains("@claude[fw-"));
    }
}

#[cfg(test)]
mod takeover_tests {
    use super::*;
    use crate::test_support::git_in as git;
    use std::sync::mpsc;

    /// Taking a root over looks at the files modified since the standby began: an untagged
    /// marker saved then fires (once); one the old owner tagged, those git brought (in `HEAD`,
    /// or from another branch: the old owner saw git's lock, the new one did not) and one in a
    /// file untouched since before stay quiet.
    #[test]
    fn a_takeover_fires_only_the_saves_the_owner_missed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        git(&root, &["init", "-q"]);
        let old = root.join("old.py");
        crate::test_support::write(&old, "# @claude dormant, untouched since before\n").unwrap();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&old).unwrap().set_modified(hour_ago).unwrap();
        crate::test_support::write(root.join("committed.py"), "# @claude from a commit\n").unwrap();
        git(&root, &["add", "committed.py"]);
        git(&root, &["commit", "-qm", "x"]);
        // A marker on another branch, which a checkout of that file brings while nobody
        // watches the git lock: git's too, though not in HEAD.
        git(&root, &["checkout", "-qb", "other"]);
        crate::test_support::write(root.join("branch.py"), "# @claude from another branch\n")
            .unwrap();
        git(&root, &["add", "branch.py"]);
        git(&root, &["commit", "-qm", "y"]);
        git(&root, &["checkout", "-q", "-"]);
        let since = SystemTime::now() - Duration::from_secs(1);
        git(&root, &["checkout", "other", "--", "branch.py"]);
        // Saved while the old owner ran (it tagged the first), or after it died.
        crate::test_support::write(
            root.join("tagged.py"),
            "# @claude[fw-0000abcd] handled by the owner\n",
        )
        .unwrap();
        crate::test_support::write(root.join("missed.py"), "# @claude saved as the owner died\n")
            .unwrap();
        crate::test_support::write(root.join("committed.py"), "# @claude from a commit\nx = 1\n")
            .unwrap();

        let options = LiveOptions {
            root: root.clone(),
            debounce: Duration::from_millis(20),
            trigger: crate::scan::DEFAULT_TRIGGER.to_string(),
            tag: TagMode::File,
        };
        let (tx, rx) = mpsc::channel();
        let live = Live::take_over(&options, None, since, move |ask: Ask| {
            let _ = tx.send(ask.file);
            ControlFlow::Continue(())
        })
        .unwrap();
        // Changes come in the order files fell quiet: the sentinel's ask comes after the rest.
        crate::test_support::write(root.join("sentinel.py"), "# @claude sentinel\n").unwrap();
        let mut files = Vec::new();
        while files.last().map(String::as_str) != Some("sentinel.py") {
            files.push(rx.recv_timeout(Duration::from_secs(20)).expect("the sentinel's ask"));
        }
        live.stop();
        assert_eq!(files, ["missed.py", "sentinel.py"]);
    }
}
