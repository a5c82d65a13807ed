//! The asks a root has announced: pending until resolved, then remembered for a while, so that
//! an editor's stale buffer writing a marker back (without its tag, or after it was resolved)
//! is recognised as the same ask and never fires twice. Kept in a ledger per root and trigger
//! in the user's state directory ([`crate::state`]), shared under a lock by every server on
//! the root and kept across restarts and takeovers; in memory only where there is no ledger.
//!
//! The ledger is a log of JSON lines: a header, then one line per change (`{"ask": {…}}` for
//! a record as it now is, `{"drop": "fw-…"}` for one forgotten). A change appends its own lines
//! and reads only the lines other servers appended since: its cost does not grow with the
//! ledger. A line torn by a server killed while writing is never applied and is cut before the
//! next append; once the log holds twice the lines it has records, it is rewritten whole
//! (atomically: a temp file renamed over it), and the other servers read the new one.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Problem, StartError};
use crate::id::MarkerId;
use crate::state::{self, Place};
use crate::sys;

/// How long a resolved ask is remembered. A buffer left open in an editor is written back
/// minutes after the marker was removed, not hours; after this, the same text typed again is a
/// new ask.
pub const RESOLVED_WINDOW: Duration = Duration::from_secs(15 * 60);

/// Where an ask's id lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TagMode {
    /// In the file: the marker is rewritten to `@claude[fw-…]` (the default).
    #[default]
    File,
    /// Nowhere in the user's files: the ledger remembers it. Only resolving writes a file.
    Never,
}

/// One announced ask. Stored as serde writes it (fields added later need `#[serde(default)]`,
/// so that older ledgers still read), and hashed to tell which records a change touched.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AskRecord {
    /// Its id (`replyTo`).
    pub id: MarkerId,
    /// The file, relative to the root, `/`-separated.
    pub file: String,
    /// The ask's text as announced.
    pub text: String,
    /// How many lines the ask took when it was announced: resolving removes exactly these.
    pub lines: usize,
    /// Its line when last seen (1-based; 0 if unknown): with the text, what the ask is. The
    /// same words in another place are another ask.
    #[serde(default)]
    pub line: usize,
    /// What the ask was written at, when last seen (a hash of the code before it on its line
    /// and of the next line that is not blank): an editor's stale copy of a resolved ask has
    /// it too, the same words typed at another function do not.
    #[serde(default)]
    pub anchor: u64,
    /// When it was announced, in seconds since the Unix epoch.
    pub announced: u64,
    /// When it was resolved (or its marker disappeared), if it was.
    pub resolved: Option<u64>,
}

impl AskRecord {
    /// True until the ask is resolved or its marker is gone.
    pub fn is_pending(&self) -> bool {
        self.resolved.is_none()
    }
}

/// The asks of one root, shared by the live worker and the server's tools.
#[derive(Clone)]
pub struct Asks {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    records: Vec<AskRecord>,
    ledger: Option<Ledger>,
}

impl Asks {
    /// Asks remembered for this run only.
    pub fn in_memory() -> Asks {
        Asks { inner: Arc::new(Mutex::new(Inner { records: Vec::new(), ledger: None })) }
    }

    /// The asks of `root` (canonical) for `trigger`, in their ledger in the user's state
    /// directory, loaded now: the ledger in both modes — what one session announced is known
    /// to the next owner of the root, and to a standby, even before its tag is written. With
    /// `--tag never` the ledger is the only record of what was
    /// announced, so a state directory that cannot hold it (none set, not writable, a FIFO or
    /// a symlink where the ledger or its lock belongs) is an error: starting anyway would
    /// announce every ask again in each session and after each restart. With `--tag file` the
    /// tags in the files still keep an ask from firing twice: the asks are kept in memory for
    /// this run, with a warning that says why.
    pub fn for_mode(mode: TagMode, root: &Path, trigger: &str) -> Result<Asks, StartError> {
        let opened = match state::state_dir() {
            Some(dir) => Asks::with_ledger_in(&dir, root, trigger),
            None => Err(StartError::NoStateDir),
        };
        match (opened, mode) {
            (Ok(asks), _) => Ok(asks),
            (Err(e), TagMode::Never) => Err(e),
            (Err(e), TagMode::File) => {
                Problem::AsksInMemory(e.to_string()).log();
                Ok(Asks::in_memory())
            }
        }
    }

    /// The asks of `root` for `trigger` in their ledger in `state_dir`, loaded now.
    pub fn with_ledger_in(
        state_dir: &Path,
        root: &Path,
        trigger: &str,
    ) -> Result<Asks, StartError> {
        let place = Place::new(state_dir, root, trigger);
        let (ledger, records) = Ledger::open(&place, root, trigger)?;
        Ok(Asks { inner: Arc::new(Mutex::new(Inner { records, ledger: Some(ledger) })) })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the records, with the ledger (if any) brought up to date first and what `f`
    /// changed appended after, under the ledger's lock: two servers on one root see each
    /// other's asks.
    pub fn update<T>(&self, f: impl FnOnce(&mut Vec<AskRecord>) -> T) -> T {
        let mut inner = self.lock();
        let Inner { records, ledger } = &mut *inner;
        let Some(Ledger { lock_path, lock, log }) = ledger else {
            let out = f(records);
            prune(records, now());
            return out;
        };
        let held = match lock.hold(lock_path) {
            Ok(held) => Some(held),
            Err(source) => {
                Problem::Ledger { path: lock_path.clone(), source }.log();
                None
            }
        };
        let fresh = held.is_some() && log.refresh(records).map_err(|e| log.problem(e)).is_ok();
        let out = f(records);
        prune(records, now());
        // Written only when up to date: a change made on a stale view would undo others'.
        if fresh {
            if let Err(e) = log.record(records) {
                log.problem(e);
            }
        }
        drop(held);
        out
    }

    /// Runs `f` on the records as the ledger now has them, changing nothing: [`Asks::update`]
    /// without looking for changes to append (a pass over every record), for what only reads.
    pub fn view<T>(&self, f: impl FnOnce(&[AskRecord]) -> T) -> T {
        let mut inner = self.lock();
        let Inner { records, ledger } = &mut *inner;
        if let Some(Ledger { lock_path, lock, log }) = ledger {
            match lock.hold(lock_path) {
                Ok(held) => {
                    if let Err(e) = log.refresh(records) {
                        log.problem(e);
                    }
                    drop(held);
                }
                Err(source) => Problem::Ledger { path: lock_path.clone(), source }.log(),
            }
        }
        prune(records, now());
        f(records)
    }

    /// True if, as last read, a pending ask lives in `file`: a save of a file without markers
    /// and without pending asks need not lock or read the ledger at all. (An ask another server
    /// recorded since is settled at that file's next save after this server reads the ledger.)
    pub fn may_have_pending(&self, file: &str) -> bool {
        self.lock().records.iter().any(|r| r.file == file && r.is_pending())
    }

    /// A copy of every record (for `list_asks`).
    pub fn snapshot(&self) -> Vec<AskRecord> {
        self.view(|records| records.to_vec())
    }

    /// The record of the ask with this id, pending or resolved.
    pub fn by_id(&self, id: MarkerId) -> Option<AskRecord> {
        self.view(|records| records.iter().find(|r| r.id == id).cloned())
    }

    /// Marks the ask resolved now.
    pub fn resolve(&self, id: MarkerId) {
        self.update(|records| {
            for r in records.iter_mut().filter(|r| r.id == id && r.is_pending()) {
                r.resolved = Some(now());
            }
        });
    }
}

/// Drops what is no longer worth remembering: resolved asks past the window.
fn prune(records: &mut Vec<AskRecord>, now: u64) {
    records
        .retain(|r| r.resolved.is_none_or(|at| now.saturating_sub(at) < RESOLVED_WINDOW.as_secs()));
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

// ---- the ledger ------------------------------------------------------------------------------

/// Ledgers over this size are not read: one this program wrote holds a few hundred bytes per
/// ask, and is compacted at twice what it holds.
const MAX_LEDGER_BYTES: u64 = 256 << 20;

/// The log is rewritten once it holds this many lines more than twice its records: a rewrite
/// costs what the ledger holds, so it comes once per that many changes.
#[cfg(not(test))]
const COMPACT_SLACK: usize = 4096;
#[cfg(test)]
const COMPACT_SLACK: usize = 8;

/// The ledger of one root and trigger: its lock file and its log.
struct Ledger {
    lock_path: PathBuf,
    lock: LockFile,
    log: Log,
}

impl Ledger {
    /// Opens (or makes) the ledger at `place` and reads it, under its lock.
    fn open(
        place: &Place,
        root: &Path,
        trigger: &str,
    ) -> Result<(Ledger, Vec<AskRecord>), StartError> {
        let error = |path: PathBuf| move |source| StartError::Ledger { path, source };
        place.make_dir().map_err(error(place.dir().to_path_buf()))?;
        let lock_path = place.file("asks.lock");
        let mut lock = LockFile::open(&lock_path).map_err(error(lock_path.clone()))?;
        let held = lock.hold(&lock_path).map_err(error(lock_path.clone()))?;
        let path = place.file("asks.jsonl");
        let opened = Log::open(place, root, trigger).map_err(error(path));
        drop(held);
        let (log, records) = opened?;
        Ok((Ledger { lock_path, lock, log }, records))
    }
}

/// A lock file, kept open; locked for each change.
struct LockFile {
    file: File,
}

/// The lock held; let go when dropped (a panic in a change too).
struct Held<'a>(&'a File);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl LockFile {
    fn open(path: &Path) -> io::Result<LockFile> {
        Ok(LockFile { file: state::open(path)? })
    }

    /// Waits for the lock. A lock file removed or replaced meanwhile (a state directory
    /// cleaned up under a running server) is the one the others lock no longer: the one now
    /// at the path is opened and locked instead.
    fn hold(&mut self, path: &Path) -> io::Result<Held<'_>> {
        for _ in 0..3 {
            self.file.lock()?;
            let now = sys::path_file_id(path).ok().flatten();
            if now.is_some() && now == Some(sys::file_id(&self.file)?) {
                return Ok(Held(&self.file));
            }
            self.file.unlock()?;
            self.file = state::open(path)?;
        }
        Err(io::Error::other("the lock file is replaced again and again"))
    }
}

/// The log, as far as this server has read it.
struct Log {
    path: PathBuf,
    /// The state directory's name for this ledger (temp files of its rewrites start with it).
    prefix: String,
    root: PathBuf,
    trigger: String,
    file: File,
    /// What makes `file` the file it is: a log rewritten by another server is another file.
    id: (u64, u64),
    /// Bytes read and applied: always the end of a complete line.
    read_to: u64,
    /// Lines in the log, for when to rewrite it.
    lines: usize,
    /// Each record's id and hash as the log last had it, in the order of the records: what a
    /// change touched is what differs, found in one pass in order (see [`Log::record`]).
    written: Vec<(MarkerId, u64)>,
}

/// One line of the log, as read.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Entry {
    /// The header: what the ledger belongs to (for people reading the state directory).
    Ledger(serde::de::IgnoredAny),
    /// A record as it now is.
    Ask(AskRecord),
    /// A record forgotten.
    Drop(MarkerId),
}

/// One line of the log, as written.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum EntryOut<'a> {
    Ledger { version: u32, root: &'a Path, trigger: &'a str },
    Ask(&'a AskRecord),
    Drop(MarkerId),
}

/// The ledger file of the version before (one JSON document, rewritten whole on each change):
/// read once, into the log.
#[derive(Deserialize)]
struct OldLedger {
    asks: Vec<AskRecord>,
}

impl Log {
    /// Opens the log at `place` (made if missing) and reads it whole; the lock is held.
    fn open(place: &Place, root: &Path, trigger: &str) -> io::Result<(Log, Vec<AskRecord>)> {
        let path = place.file("asks.jsonl");
        let mut file = state::open(&path)?;
        let bytes = state::read_at_most(&mut file, MAX_LEDGER_BYTES)?;
        let id = sys::file_id(&file)?;
        let prefix = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut log = Log {
            path,
            prefix,
            root: root.to_path_buf(),
            trigger: trigger.to_string(),
            file,
            id,
            read_to: 0,
            lines: 0,
            written: Vec::new(),
        };
        log.remove_stale_temps(place);
        let mut records = Vec::new();
        log.apply(&bytes, &mut records);
        let old = place.file("json");
        let imported = bytes.is_empty() && log.import(&old, &mut records);
        // A pending ask whose file is gone will not be resolved; a resolved one, not typed back.
        records.retain(|r| root.join(&r.file).exists());
        prune(&mut records, now());
        log.written = fingerprints(&records);
        if bytes.is_empty() {
            log.fill(&records)?;
        } else if log.lines > 2 * records.len() + COMPACT_SLACK {
            log.compact(&records)?;
        }
        if imported {
            // In the log now, and synced there: the old file would only be read again.
            let _ = std::fs::remove_file(&old);
        }
        Ok((log, records))
    }

    /// Removes what a rewrite killed halfway left (its temp file). Only this ledger's: the
    /// lock held says no rewrite of it is running.
    fn remove_stale_temps(&self, place: &Place) {
        let Ok(entries) = std::fs::read_dir(place.dir()) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(&self.prefix) && name.ends_with(".tmp") && name != self.prefix {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Reads the ledger the version before wrote at `old`, if there is one, into `records`.
    fn import(&self, old: &Path, records: &mut Vec<AskRecord>) -> bool {
        let read = state::open_existing(old)
            .and_then(|mut f| state::read_at_most(&mut f, MAX_LEDGER_BYTES));
        let parsed = read.and_then(|bytes| {
            serde_json::from_slice::<OldLedger>(&bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        });
        match parsed {
            Ok(ledger) => {
                tracing::debug!(
                    "{}: {} asks read into {}",
                    old.display(),
                    ledger.asks.len(),
                    self.path.display()
                );
                records.extend(ledger.asks);
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(source) => {
                Problem::Ledger { path: old.to_path_buf(), source }.log();
                false
            }
        }
    }

    fn problem(&self, source: io::Error) {
        Problem::Ledger { path: self.path.clone(), source }.log();
    }

    /// Brings `records` up to date with the log: the lines appended since it was last read, or
    /// all of it if it was rewritten (or removed) meanwhile. The lock is held.
    fn refresh(&mut self, records: &mut Vec<AskRecord>) -> io::Result<()> {
        let same = sys::path_file_id(&self.path).ok().flatten() == Some(self.id);
        let len = self.file.metadata()?.len();
        if !same || len < self.read_to {
            return self.reload(records);
        }
        if len == self.read_to {
            return Ok(()); // nobody wrote: the common case
        }
        if len > MAX_LEDGER_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("over {MAX_LEDGER_BYTES} bytes"),
            ));
        }
        self.file.seek(SeekFrom::Start(self.read_to))?;
        let mut tail = Vec::new();
        (&self.file).take(len - self.read_to).read_to_end(&mut tail)?;
        self.apply(&tail, records);
        Ok(())
    }

    /// Reads the log at the path anew: another server rewrote it, or it was removed (then it is
    /// made again, holding what this server knows).
    fn reload(&mut self, records: &mut Vec<AskRecord>) -> io::Result<()> {
        let mut file = state::open(&self.path)?;
        let bytes = state::read_at_most(&mut file, MAX_LEDGER_BYTES)?;
        self.id = sys::file_id(&file)?;
        self.file = file;
        (self.read_to, self.lines) = (0, 0);
        if bytes.is_empty() {
            return self.fill(records);
        }
        records.clear();
        self.apply(&bytes, records);
        self.written = fingerprints(records);
        Ok(())
    }

    /// Applies the complete lines of `bytes` (the log from `read_to` on) to `records`. A line
    /// that does not parse is skipped, said once; a last line without its newline is a write
    /// torn by a server killed meanwhile: not applied, and cut before the next append.
    fn apply(&mut self, bytes: &[u8], records: &mut Vec<AskRecord>) {
        let mut at = 0;
        let mut entries = Vec::new();
        let mut bad = 0;
        while let Some(n) = memchr::memchr(b'\n', &bytes[at..]) {
            match serde_json::from_slice::<Entry>(&bytes[at..at + n]) {
                Ok(entry) => entries.push(entry),
                Err(_) => bad += 1,
            }
            at += n + 1;
            self.lines += 1;
        }
        self.read_to += at as u64;
        if bad > 0 {
            let e = io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{bad} lines are no ledger entries; skipped"),
            );
            self.problem(e);
        }
        if entries.iter().all(|e| matches!(e, Entry::Ledger(_))) {
            return;
        }
        let mut at: HashMap<MarkerId, usize> =
            records.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
        let mut dropped = HashSet::new();
        for entry in entries {
            match entry {
                Entry::Ledger(_) => {}
                Entry::Ask(r) => {
                    dropped.remove(&r.id);
                    match at.get(&r.id) {
                        Some(&i) => records[i] = r,
                        None => {
                            at.insert(r.id, records.len());
                            records.push(r);
                        }
                    }
                }
                Entry::Drop(id) => {
                    dropped.insert(id);
                }
            }
        }
        if !dropped.is_empty() {
            records.retain(|r| !dropped.contains(&r.id));
        }
        // What the log holds now (another server's lines): rare, so hashed whole.
        self.written = fingerprints(records);
    }

    /// Appends what differs between `records` and the log (records new or changed, records
    /// gone), then rewrites the log if it has grown to twice what it holds. The lock is held
    /// and the log read to its end.
    ///
    /// One pass over the records in order, beside `written` (the ids and hashes the log has, in
    /// the same order): a record changed in place or pushed at the end (what a save does) is
    /// found without any lookup; only past a record removed or moved are the rest matched by
    /// id. Each record is hashed once (a fast hash of its fields), nothing is cloned.
    fn record(&mut self, records: &[AskRecord]) -> io::Result<()> {
        let mut now = Vec::with_capacity(records.len());
        let mut changed = Vec::new();
        let mut gone = Vec::new();
        let same = records.iter().zip(&self.written).take_while(|(r, (id, _))| r.id == *id).count();
        for (r, &(id, was)) in records[..same].iter().zip(&self.written) {
            let hash = fingerprint(r);
            if hash != was {
                changed.push(r);
            }
            now.push((id, hash));
        }
        // Past the aligned part: matched by id (all new, if nothing was removed or moved).
        let mut rest: HashMap<MarkerId, u64> = self.written[same..].iter().copied().collect();
        for r in &records[same..] {
            let hash = fingerprint(r);
            if rest.remove(&r.id) != Some(hash) {
                changed.push(r);
            }
            now.push((r.id, hash));
        }
        gone.extend(rest.into_keys());
        if changed.is_empty() && gone.is_empty() {
            return Ok(()); // most changes only look
        }
        let mut out = Vec::new();
        for r in &changed {
            line(&mut out, &EntryOut::Ask(r))?;
        }
        for &id in &gone {
            line(&mut out, &EntryOut::Drop(id))?;
        }
        self.append(&out)?;
        self.lines += changed.len() + gone.len();
        self.written = now;
        if self.lines > 2 * records.len() + COMPACT_SLACK {
            self.compact(records)?;
        }
        Ok(())
    }

    /// Writes `bytes` (whole lines) at the end of what was read, and syncs them. Whatever lies
    /// past that end is a line torn by a writer killed meanwhile (only a writer holding the lock
    /// writes, and the lock is ours): it is cut, never glued to.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.file.metadata()?.len() != self.read_to {
            self.file.set_len(self.read_to)?;
        }
        self.file.seek(SeekFrom::Start(self.read_to))?;
        // A failure here leaves a torn line past `read_to`: cut by the next append.
        self.file.write_all(bytes)?;
        self.file.sync_data()?;
        self.read_to += bytes.len() as u64;
        Ok(())
    }

    /// Writes an empty log's lines (the header, then `records`) by appending them: the lock is
    /// held and nobody reads the log meanwhile, so no rewrite (no rename) is needed.
    fn fill(&mut self, records: &[AskRecord]) -> io::Result<()> {
        let mut out = Vec::new();
        self.write_lines(&mut out, records)?;
        self.append(&out)?;
        self.lines = records.len() + 1;
        self.written = fingerprints(records);
        Ok(())
    }

    /// The whole log for `records`, as a rewrite or [`Log::fill`] writes it.
    fn write_lines(&self, w: &mut impl Write, records: &[AskRecord]) -> io::Result<()> {
        let header = EntryOut::Ledger { version: 1, root: &self.root, trigger: &self.trigger };
        let mut buf = Vec::new();
        line(&mut buf, &header)?;
        for r in records {
            line(&mut buf, &EntryOut::Ask(r))?;
            if buf.len() > 64 * 1024 {
                w.write_all(&buf)?;
                buf.clear();
            }
        }
        w.write_all(&buf)
    }

    /// Rewrites the log to hold `records` only: a temp file beside it, synced, renamed over it.
    /// A server killed meanwhile leaves the old log (and a temp file the next open removes).
    ///
    /// Windows renames over no file that is open: this server lets go of the log first, and
    /// while another server holds it the rename is refused. The log then stays as it is (it is
    /// still whole and right, only longer) and the rewrite is tried again once as many lines
    /// more have been appended.
    fn compact(&mut self, records: &[AskRecord]) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!("{}.", self.prefix))
            .suffix(".tmp")
            .tempfile_in(dir)?;
        {
            let mut w = BufWriter::new(tmp.as_file_mut());
            self.write_lines(&mut w, records)?;
            w.flush()?;
        }
        tmp.as_file().sync_all()?;
        let (file, tmp_path) = tmp.keep().map_err(|e| e.error)?;
        // Our handle of the old log goes first (Windows); whoever else holds it on Unix keeps
        // reading it and notices the new file by its id.
        drop(std::mem::replace(&mut self.file, file));
        if let Err(e) = std::fs::rename(&tmp_path, &self.path) {
            self.file = state::open(&self.path)?; // the old log, where it was
            let _ = std::fs::remove_file(&tmp_path);
            if cfg!(windows) && e.kind() == io::ErrorKind::PermissionDenied {
                self.lines = records.len() + 1; // for when to try again, not what the log holds
                return Ok(());
            }
            return Err(e);
        }
        self.id = sys::file_id(&self.file)?;
        self.read_to = self.file.metadata()?.len();
        self.lines = records.len() + 1;
        self.written = fingerprints(records);
        Ok(())
    }
}

/// `entry` as one JSON line at the end of `out`.
fn line(out: &mut Vec<u8>, entry: &EntryOut<'_>) -> io::Result<()> {
    serde_json::to_writer(&mut *out, entry)?;
    out.push(b'\n');
    Ok(())
}

/// A hash of everything in the record: two records that hash alike are (but for a 2^-64
/// chance) the same. Not SipHash: nobody chooses these inputs to collide, and every change
/// hashes every record.
fn fingerprint(r: &AskRecord) -> u64 {
    let mut h = Fast(0);
    r.hash(&mut h);
    h.finish()
}

/// Each record's id and [`fingerprint`], in order.
fn fingerprints(records: &[AskRecord]) -> Vec<(MarkerId, u64)> {
    records.iter().map(|r| (r.id, fingerprint(r))).collect()
}

/// A multiply-rotate hash, eight bytes at a time (rustc's FxHash, with a final mix).
struct Fast(u64);

impl Fast {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for Fast {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.add(u64::from_le_bytes(last) ^ ((bytes.len() as u64) << 56));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // A final mix (murmur3's): the multiply alone leaves the low bits weak.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::DEFAULT_TRIGGER;

    fn record(id: &str, file: &str, text: &str) -> AskRecord {
        AskRecord {
            id: id.parse().unwrap(),
            file: file.into(),
            text: text.into(),
            lines: 1,
            line: 1,
            anchor: 0,
            announced: now(),
            resolved: None,
        }
    }

    #[test]
    fn resolved_asks_are_remembered_for_the_window_then_pruned() {
        let asks = Asks::in_memory();
        asks.update(|r| r.push(record("fw-00000001", "a.py", "@claude x")));
        let id = "fw-00000001".parse().unwrap();
        assert!(asks.by_id(id).unwrap().is_pending());
        asks.resolve(id);
        assert!(!asks.by_id(id).unwrap().is_pending(), "remembered within the window");
        asks.update(|r| r[0].resolved = Some(now() - RESOLVED_WINDOW.as_secs() - 1));
        assert!(asks.snapshot().is_empty(), "pruned after the window");
    }

    #[test]
    fn the_ledger_is_shared_and_survives_a_restart() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let open = || Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
        let (one, two) = (open(), open());
        one.update(|r| r.push(record("fw-00000001", "a.py", "@claude x")));
        assert_eq!(two.snapshot().len(), 1, "another server sees it");
        let restarted = open();
        assert_eq!(restarted.by_id("fw-00000001".parse().unwrap()).unwrap().file, "a.py");
        // A pending ask whose file is gone is dropped.
        std::fs::remove_file(root.path().join("a.py")).unwrap();
        assert!(open().snapshot().is_empty());
        let files: Vec<_> = std::fs::read_dir(state.path()).unwrap().collect();
        assert!(files.len() <= 2, "the ledger and its lock file only");
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none(), "nothing in the tree");
    }

    /// The ledger file in `state` (the one that is not a lock).
    fn ledger_file(state: &Path) -> PathBuf {
        let mut files: Vec<PathBuf> = std::fs::read_dir(state)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_none_or(|x| x != "lock"))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files.pop().unwrap()
    }

    fn many(from: u32, n: u32) -> Vec<AskRecord> {
        (from..from + n)
            .map(|i| record(&format!("fw-{i:08x}"), "a.py", &format!("@claude {i}")))
            .collect()
    }

    /// A change costs what it changes, not what the ledger holds: it is appended, and the
    /// bytes already there stay where they are (same file, same bytes).
    #[test]
    fn a_change_appends_to_the_ledger_instead_of_rewriting_it() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let asks = Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
        asks.update(|r| r.extend(many(1, 1000)));
        let path = ledger_file(state.path());
        let (before, id) = (std::fs::read(&path).unwrap(), sys::path_file_id(&path).unwrap());
        asks.update(|r| r.extend(many(5000, 1)));
        let (after, now) = (std::fs::read(&path).unwrap(), sys::path_file_id(&path).unwrap());
        assert_eq!(now, id, "the ledger was replaced");
        assert!(after.starts_with(&before), "the ledger was rewritten");
        assert!(
            after.len() - before.len() < 1000,
            "{} bytes written for one ask",
            after.len() - before.len()
        );
        assert_eq!(
            Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER)
                .unwrap()
                .snapshot()
                .len(),
            1001
        );
    }

    /// A server killed while it appends leaves a torn last line: that line is lost, nothing
    /// else, and the next change is not glued to it.
    #[test]
    fn a_torn_last_line_loses_nothing_else() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let open = || Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER);
        let asks = open().unwrap();
        for r in many(1, 3) {
            asks.update(|records| records.push(r));
        }
        let path = ledger_file(state.path());
        let whole = std::fs::read(&path).unwrap();
        let torn = &whole[..whole.len() - 20];
        std::fs::write(&path, torn).unwrap();
        let reopened = open().expect("a torn ledger opens");
        let ids: Vec<String> = reopened.snapshot().iter().map(|r| r.id.to_string()).collect();
        assert_eq!(ids, ["fw-00000001", "fw-00000002"], "only the torn record is lost");
        reopened.update(|r| r.extend(many(10, 1)));
        let ids: Vec<String> =
            open().unwrap().snapshot().iter().map(|r| r.id.to_string()).collect();
        assert_eq!(ids, ["fw-00000001", "fw-00000002", "fw-0000000a"]);
    }

    /// Issue 30 (5): damage to the log that leaves each record somewhere loses no id — any one
    /// line made unreadable, the log cut to half, emptied or removed, at rest or under a
    /// running server — and the ledger is whole again after it.
    #[test]
    fn damage_to_the_ledger_loses_no_id() {
        let damages: &[(&str, fn(&[u8]) -> Vec<u8>)] = &[
            ("header", |b| unreadable_line(b, 0)),
            ("first record", |b| unreadable_line(b, 1)),
            ("second record", |b| unreadable_line(b, 2)),
            ("last record", |b| unreadable_line(b, 3)),
            ("half", |b| b[..b.len() / 2].to_vec()),
            ("empty", |_| Vec::new()),
        ];
        for (what, damage) in damages {
            for running in [false, true] {
                let state = tempfile::tempdir().unwrap();
                let root = tempfile::tempdir().unwrap();
                std::fs::write(root.path().join("a.py"), "").unwrap();
                let open =
                    || Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
                let asks = open();
                for r in many(1, 3) {
                    asks.update(|records| records.push(r));
                }
                let path = ledger_file(state.path());
                std::fs::write(&path, damage(&std::fs::read(&path).unwrap())).unwrap();
                if running {
                    asks.update(|r| r.extend(many(10, 1))); // reads the log, appends to it
                } else {
                    drop(asks);
                }
                let ids: HashSet<String> =
                    open().snapshot().iter().map(|r| r.id.to_string()).collect();
                for i in [1, 2, 3] {
                    assert!(
                        ids.contains(&format!("fw-{i:08x}")),
                        "{what}, running {running}: {ids:?}"
                    );
                }
                assert_eq!(ids.len(), if running { 4 } else { 3 }, "{what}, running {running}");
            }
        }
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let asks = Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
        asks.update(|r| r.extend(many(1, 3)));
        drop(asks);
        std::fs::remove_file(ledger_file(state.path())).unwrap();
        let again = Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
        assert_eq!(again.snapshot().len(), 3, "the log removed");
    }

    /// `bytes` with line `n` (0-based) made unreadable: one byte of its first key changed.
    fn unreadable_line(bytes: &[u8], n: usize) -> Vec<u8> {
        let mut lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        lines[n][3] = b'#';
        lines.join(&b'\n')
    }

    /// A ledger over the size limit is not read, and the error says which file to move.
    #[test]
    fn a_ledger_over_the_limit_names_the_file_to_move() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        drop(Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap());
        let path = ledger_file(state.path());
        // Sparse: no disk and no time.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(MAX_LEDGER_BYTES + 1)
            .unwrap();
        let Err(e) = Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER) else {
            panic!("a ledger over the limit was opened");
        };
        let said = e.to_string();
        assert!(said.starts_with(&format!("{}: ", path.display())), "{said}");
        assert!(said.contains("move it away"), "{said}");
        assert!(!said.contains("make the state directory usable"), "{said}");
    }

    /// A server alone on its ledger rewrites it once it has grown, on every system (on Windows
    /// by letting go of the log before the rename), and reads it back whole after a restart.
    #[test]
    fn a_lone_server_rewrites_its_ledger() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let open = || Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
        let one = open();
        one.update(|r| r.extend(many(1, 5)));
        let path = ledger_file(state.path());
        for i in 0..40 {
            one.update(|r| r[0].lines = i + 2);
        }
        // 41 changes appended would be 42 lines. (Not the file's id: a rewrite's temp file
        // may get the inode of the log two rewrites before.)
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 2 * 5 + COMPACT_SLACK + 1, "{lines} lines for 5 records: never rewritten");
        one.update(|r| r[1].lines = 9); // appended to the new log
        let want = one.snapshot();
        drop(one);
        assert_eq!(open().snapshot(), want);
        assert_eq!(want[0].lines, 41);
    }

    /// Two servers on one root: each sees what the other changed and forgot, also once one of
    /// them has rewritten the log (which then holds its records only, not every change).
    #[test]
    fn two_servers_see_each_others_changes_across_a_rewrite() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let open = || Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
        let (one, two) = (open(), open());
        one.update(|r| r.extend(many(1, 5)));
        let path = ledger_file(state.path());
        let first = sys::path_file_id(&path).unwrap();
        for i in 0..40 {
            one.update(|r| r[0].lines = i + 2);
        }
        if cfg!(windows) {
            // Windows renames over no open file: while `two` holds the log it is not rewritten,
            // only longer (seen under Wine: "Access denied", os error 5, for every rewrite).
            assert_eq!(sys::path_file_id(&path).unwrap(), first, "rewritten under another server");
        } else {
            assert_ne!(sys::path_file_id(&path).unwrap(), first, "never rewritten");
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            assert!(lines <= 2 * 5 + COMPACT_SLACK + 1, "{lines} lines for 5 records");
        }
        assert_eq!(two.snapshot(), one.snapshot(), "the other server after the rewrite");
        assert_eq!(two.snapshot()[0].lines, 41);
        // What one forgets, the other forgets; what it adds, the other sees.
        two.update(|r| r.retain(|r| r.id != "fw-00000002".parse().unwrap()));
        two.update(|r| r.extend(many(100, 1)));
        let ids =
            |asks: &Asks| asks.snapshot().iter().map(|r| r.id.to_string()).collect::<Vec<_>>();
        let want = ["fw-00000001", "fw-00000003", "fw-00000004", "fw-00000005", "fw-00000064"];
        assert_eq!(ids(&one), want);
        assert_eq!(ids(&open()), want, "after a restart");
    }

    /// The ledger of the version before (one JSON document per root) is read into the log
    /// once, then removed: the asks it knew stay known.
    #[test]
    fn the_ledger_of_the_version_before_is_read_in() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let place = Place::new(state.path(), root.path(), DEFAULT_TRIGGER);
        // Made once: a record holds the second it was made in, and a second may pass.
        let known = many(1, 2);
        let old = serde_json::json!({ "root": root.path(), "asks": known });
        std::fs::write(place.file("json"), old.to_string()).unwrap();
        let asks = Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
        assert_eq!(asks.snapshot(), known);
        assert!(!place.file("json").exists(), "the old ledger is still there");
        let again = Asks::with_ledger_in(state.path(), root.path(), DEFAULT_TRIGGER).unwrap();
        assert_eq!(again.snapshot(), known);
        // Another trigger has a ledger of its own.
        let bob = Asks::with_ledger_in(state.path(), root.path(), "@bob").unwrap();
        assert!(bob.snapshot().is_empty());
    }
}
