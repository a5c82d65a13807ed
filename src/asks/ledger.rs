//! The ledger of one root and trigger in the state directory: a lock file, and a log of JSON
//! lines — a header, then one line per change (`{"ask": {…}}` for a record as it now is,
//! `{"drop": "fw-…"}` for one forgotten). A change appends its own lines and reads only the
//! lines other servers appended since: its cost does not grow with the ledger. A line torn by
//! a server killed while writing is never applied and is cut before the next append; once the
//! log holds twice the lines it has records, it is rewritten whole (atomically: a temp file
//! renamed over it), and the other servers read the new one. Beside the log, its spare
//! ([`super::spare`]) holds the same records, so that damage to one file loses no id.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::spare::{self, Replay, Spare};
use super::{now, prune, AskRecord};
use crate::error::{Problem, StartError};
use crate::id::MarkerId;
use crate::relpath;
use crate::state::{self, Place};
use crate::sys;

/// Ledgers over this size are not read: one this program wrote holds a few hundred bytes per
/// ask, and is compacted at twice what it holds.
pub(super) const MAX_LEDGER_BYTES: u64 = 256 << 20;

/// The log is rewritten once it holds this many lines more than twice its records: a rewrite
/// costs what the ledger holds, so it comes once per that many changes.
#[cfg(not(test))]
pub(super) const COMPACT_SLACK: usize = 4096;
#[cfg(test)]
pub(super) const COMPACT_SLACK: usize = 8;

/// The ledger of one root and trigger: its lock file and its log.
pub(super) struct Ledger {
    lock_path: PathBuf,
    lock: LockFile,
    log: Log,
}

impl Ledger {
    /// Opens (or makes) the ledger at `place` and reads it, under its lock.
    pub(super) fn open(
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
        let opened = Log::open(place, root, trigger).map_err(|e| match TooLarge::of(&e) {
            Some(big) => StartError::LedgerTooLarge { path: big.path.clone(), size: big.size },
            None => error(path)(e),
        });
        drop(held);
        let (log, records) = opened?;
        Ok((Ledger { lock_path, lock, log }, records))
    }
}

impl Ledger {
    /// Runs `change` on `records` brought up to date with the log first, and appends what it
    /// changed after, under the lock: two servers on one root see each other's asks. `change`
    /// is told how many times others' lines have been read in so far (see [`Log::others`]),
    /// `None` if the log could not be read.
    pub(super) fn update<T>(
        &mut self,
        records: &mut Vec<AskRecord>,
        change: impl FnOnce(&mut Vec<AskRecord>, Option<u64>) -> T,
    ) -> T {
        self.locked(records, change, |log, records, _| log.record(records))
    }

    /// [`Ledger::update`] for a change that only marks the records with these ids (sent,
    /// heard, resolved): only they are looked at for what to append, so that marking each ask
    /// of a file of thousands as it goes out costs what it marks, not what the ledger holds.
    pub(super) fn mark(
        &mut self,
        records: &mut Vec<AskRecord>,
        ids: &[MarkerId],
        flush: Flush,
        mut mark: impl FnMut(&mut AskRecord),
    ) {
        let marked = |records: &mut Vec<AskRecord>, _| {
            let at = positions(records, ids);
            for &i in &at {
                mark(&mut records[i]);
            }
            at
        };
        self.locked(records, marked, |log, records, at| log.record_some(records, at, flush));
    }

    /// Under the lock, with `records` brought up to date with the log first: runs `change`
    /// (told the count of others' changes, see [`Ledger::update`]), then `write`, which
    /// appends what it changed — only when the records were up to date: a change made on a
    /// stale view would undo others'.
    fn locked<T>(
        &mut self,
        records: &mut Vec<AskRecord>,
        change: impl FnOnce(&mut Vec<AskRecord>, Option<u64>) -> T,
        write: impl FnOnce(&mut Log, &[AskRecord], &T) -> io::Result<()>,
    ) -> T {
        let Ledger { lock_path, lock, log } = self;
        let held = match lock.hold(lock_path) {
            Ok(held) => Some(held),
            Err(source) => {
                Problem::Ledger { path: lock_path.clone(), source }.log();
                None
            }
        };
        let fresh = held.is_some() && log.refresh(records).map_err(|e| log.problem(e)).is_ok();
        // Not up to date: nothing is known of others.
        let out = change(records, fresh.then_some(log.others));
        if fresh {
            if let Err(e) = write(log, records, &out) {
                log.problem(e);
            }
        }
        drop(held);
        out
    }

    /// Brings `records` up to date with the log, under the lock; changes nothing.
    pub(super) fn refresh(&mut self, records: &mut Vec<AskRecord>) {
        let Ledger { lock_path, lock, log } = self;
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
    /// The second copy, written in step with the log.
    spare: Spare,
    /// How many times lines other servers wrote were read in (or the log read anew): a change
    /// that sees the same count as an earlier one knows no record another server made since.
    others: u64,
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
        let bytes = read_whole(&mut file, &path, MAX_LEDGER_BYTES)?;
        let id = sys::file_id(&file)?;
        let prefix = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let spare = Spare::of(&path);
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
            spare,
            others: 0,
        };
        log.remove_stale_temps(place);
        let spare_bytes = log.spare.read(MAX_LEDGER_BYTES).map_err(|e| match TooLarge::of(&e) {
            Some(_) => e,
            // Said by the spare's name: the error is about that file.
            None => io::Error::new(e.kind(), format!("{}: {e}", log.spare.path().display())),
        })?;
        let (mut records, mended) = log.read_both(&bytes, &spare_bytes);
        let old = place.file("json");
        let imported = records.is_empty() && log.import(&old, &mut records);
        // A pending ask whose file is gone will not be resolved; a resolved one, not typed back.
        records.retain(|r| relpath::resolve(root, &r.file).is_some_and(|p| p.exists()));
        prune(&mut records, now());
        log.written = fingerprints(&records);
        if bytes.is_empty() {
            log.fill(&records)?;
        } else {
            let long = log.lines > 2 * records.len() + COMPACT_SLACK;
            let rewritten = (mended.log_stale || long) && log.compact(&records)?;
            if mended.spare_stale && !rewritten {
                log.write_spare(&records);
            }
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
    ///
    /// The log cut short or emptied under us is damage: what it lost is in the spare.
    fn reload(&mut self, records: &mut Vec<AskRecord>) -> io::Result<()> {
        let mut file = state::open(&self.path)?;
        let bytes = read_whole(&mut file, &self.path, MAX_LEDGER_BYTES)?;
        self.id = sys::file_id(&file)?;
        self.file = file;
        (self.read_to, self.lines) = (0, 0);
        self.others += 1;
        let spare_bytes = self.spare.read(MAX_LEDGER_BYTES).unwrap_or_else(|e| {
            self.spare_problem(e);
            Vec::new()
        });
        if bytes.is_empty() && spare_bytes.is_empty() {
            return self.fill(records);
        }
        let (mended, how) = self.read_both(&bytes, &spare_bytes);
        *records = mended;
        self.written = fingerprints(records);
        if bytes.is_empty() {
            return self.fill(records);
        }
        let rewritten = how.log_stale && self.compact(records)?;
        if how.spare_stale && !rewritten {
            self.write_spare(records);
        }
        Ok(())
    }

    /// The records of the log's `bytes` and the spare's, mended together; the log is read to
    /// its last complete line. Damage found is said, with what was restored.
    fn read_both(&mut self, bytes: &[u8], spare_bytes: &[u8]) -> (Vec<AskRecord>, Flags) {
        let mut records = Vec::new();
        let read = replay(bytes, &mut records);
        self.read_to += read.complete as u64;
        self.lines += read.lines;
        let bad = read.bad;
        let log = Replay { records, lines: read.lines, bad };
        let mut records = Vec::new();
        let read = replay(spare_bytes, &mut records);
        let spare_bad = read.bad;
        let spare = Replay { records, lines: read.lines, bad: spare_bad };
        let spare_lines = spare.lines;
        let mended = spare::mend(log, spare);
        let flags = Flags { log_stale: mended.log_stale, spare_stale: mended.spare_stale };
        if bad > 0 || mended.restored > 0 {
            let what = match bad {
                0 => "lost records".to_string(),
                1 => "1 line is no ledger entry".to_string(),
                n => format!("{n} lines are no ledger entries"),
            };
            self.problem(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "damaged ({what}); {} ask(s) restored from {}, and the log written anew",
                    mended.restored,
                    self.spare.path().display()
                ),
            ));
        } else if spare_bad > 0 || (mended.spare_stale && spare_lines > 0) {
            let e = io::Error::new(io::ErrorKind::InvalidData, "damaged or behind; written anew");
            self.spare_problem(e);
        }
        (mended.records, flags)
    }

    fn spare_problem(&self, source: io::Error) {
        Problem::Ledger { path: self.spare.path().to_path_buf(), source }.log();
    }

    /// Writes the spare whole, holding `records` (a failure is said: the log still has them).
    fn write_spare(&self, records: &[AskRecord]) {
        if let Err(e) = self.spare.write(|w| self.write_lines(w, records)) {
            self.spare_problem(e);
        }
    }

    /// Appends `bytes` (what was just appended to the log) to the spare; one that is empty,
    /// missing or without a complete line is written whole, holding `records`.
    fn append_spare(&self, bytes: &[u8], records: &[AskRecord], flush: Flush) {
        match self.spare.append(bytes, flush) {
            Ok(true) => {}
            Ok(false) => self.write_spare(records),
            Err(e) => self.spare_problem(e),
        }
    }

    /// Applies the complete lines of `bytes` (the log from `read_to` on) to `records`. A line
    /// that does not parse is skipped, said once; a last line without its newline is a write
    /// torn by a server killed meanwhile: not applied, and cut before the next append.
    fn apply(&mut self, bytes: &[u8], records: &mut Vec<AskRecord>) {
        let read = replay(bytes, records);
        self.read_to += read.complete as u64;
        self.lines += read.lines;
        self.others += u64::from(read.lines > 0);
        if read.bad > 0 {
            let e = io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} lines are no ledger entries; skipped", read.bad),
            );
            self.problem(e);
        }
        if read.applied {
            // What the log holds now (another server's lines): rare, so hashed whole.
            self.written = fingerprints(records);
        }
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
        self.append(&out, Flush::Now)?;
        self.lines += changed.len() + gone.len();
        self.written = now;
        self.after_append(&out, records, Flush::Now)
    }

    /// After `out` was appended to the log: the log rewritten if it has grown to twice what it
    /// holds, else the same lines appended to the spare.
    fn after_append(&mut self, out: &[u8], records: &[AskRecord], flush: Flush) -> io::Result<()> {
        let rewritten = self.lines > 2 * records.len() + COMPACT_SLACK && self.compact(records)?;
        if !rewritten {
            // The spare takes the same lines; a rewrite put off (Windows) takes them too.
            self.append_spare(out, records, flush);
        }
        Ok(())
    }

    /// [`Log::record`] when only the records at `at` may have changed: only they are hashed
    /// and compared with what the log has. The lock is held and the log read to its end.
    fn record_some(&mut self, records: &[AskRecord], at: &[usize], flush: Flush) -> io::Result<()> {
        let mut out = Vec::new();
        let mut changed = 0;
        for &i in at {
            let r = &records[i];
            // The log's entry of the record: at the same place unless records moved.
            let slot = match self.written.get(i) {
                Some((id, _)) if *id == r.id => Some(i),
                _ => self.written.iter().position(|(id, _)| *id == r.id),
            };
            let Some(slot) = slot else {
                return self.record(records); // not in the log yet: the whole pass
            };
            let hash = fingerprint(r);
            if self.written[slot].1 != hash {
                self.written[slot].1 = hash;
                line(&mut out, &EntryOut::Ask(r))?;
                changed += 1;
            }
        }
        if changed == 0 {
            return Ok(());
        }
        self.append(&out, flush)?;
        self.lines += changed;
        self.after_append(&out, records, flush)
    }

    /// Writes `bytes` (whole lines) at the end of what was read, and syncs them (see [`Flush`]). Whatever lies
    /// past that end is a line torn by a writer killed meanwhile (only a writer holding the lock
    /// writes, and the lock is ours): it is cut, never glued to.
    fn append(&mut self, bytes: &[u8], flush: Flush) -> io::Result<()> {
        if self.file.metadata()?.len() != self.read_to {
            self.file.set_len(self.read_to)?;
        }
        self.file.seek(SeekFrom::Start(self.read_to))?;
        // A failure here leaves a torn line past `read_to`: cut by the next append.
        self.file.write_all(bytes)?;
        if flush == Flush::Now {
            self.file.sync_data()?;
        }
        self.read_to += bytes.len() as u64;
        Ok(())
    }

    /// Writes an empty log's lines (the header, then `records`) by appending them: the lock is
    /// held and nobody reads the log meanwhile, so no rewrite (no rename) is needed. The spare
    /// is written whole, in step.
    fn fill(&mut self, records: &[AskRecord]) -> io::Result<()> {
        let mut out = Vec::new();
        self.write_lines(&mut out, records)?;
        self.append(&out, Flush::Now)?;
        self.lines = records.len() + 1;
        self.written = fingerprints(records);
        self.write_spare(records);
        Ok(())
    }

    /// The whole log for `records`, as a rewrite or [`Log::fill`] writes it.
    fn write_lines(&self, w: &mut (impl Write + ?Sized), records: &[AskRecord]) -> io::Result<()> {
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

    /// Rewrites the log to hold `records` only: a temp file beside it, synced, renamed over it;
    /// then the spare. Returns false if the rewrite was put off (below). A server killed meanwhile leaves the old log (and a temp file the next
    /// open removes), or the new log and the old spare (which then has what the log forgot).
    ///
    /// Windows renames over no file that is open: this server lets go of the log first, and
    /// while another server holds it the rename is refused. The log then stays as it is (it is
    /// still whole and right, only longer) and the rewrite is tried again once as many lines
    /// more have been appended; the spare, not rewritten either, is the caller's to keep in
    /// step.
    fn compact(&mut self, records: &[AskRecord]) -> io::Result<bool> {
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
        if let Err(e) = rename_over(&tmp_path, &self.path) {
            self.file = state::open(&self.path)?; // the old log, where it was
            let _ = std::fs::remove_file(&tmp_path);
            if held_elsewhere(&e) {
                self.lines = records.len() + 1; // for when to try again, not what the log holds
                return Ok(false);
            }
            return Err(e);
        }
        self.id = sys::file_id(&self.file)?;
        self.read_to = self.file.metadata()?.len();
        self.lines = records.len() + 1;
        self.written = fingerprints(records);
        self.write_spare(records); // in step: both hold what they hold in as many lines
        Ok(true)
    }
}

/// Renames the rewritten log over the old one.
fn rename_over(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(test)]
    if REFUSE_REWRITES.with(|r| r.get()) {
        return Err(io::ErrorKind::PermissionDenied.into());
    }
    std::fs::rename(from, to)
}

/// True if a rename over the log failed because another server holds it open: Windows's rule
/// (seen under Wine: "Access denied", os error 5), simulated in tests elsewhere.
fn held_elsewhere(e: &io::Error) -> bool {
    #[cfg(test)]
    if REFUSE_REWRITES.with(|r| r.get()) {
        return true;
    }
    cfg!(windows) && e.kind() == io::ErrorKind::PermissionDenied
}

#[cfg(test)]
thread_local! {
    static REFUSE_REWRITES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Until the guard is dropped, this thread's rewrites of a log are refused as Windows refuses
/// them while another server holds the log open.
#[cfg(test)]
pub(super) fn refuse_rewrites() -> impl Drop {
    struct Refusing;
    impl Drop for Refusing {
        fn drop(&mut self) {
            REFUSE_REWRITES.with(|r| r.set(false));
        }
    }
    REFUSE_REWRITES.with(|r| r.set(true));
    Refusing
}

/// Where the records with these ids are, newest first. The search runs from the end, where
/// the asks just recorded are (those being marked, most often), and stops once all are found;
/// a few ids are compared as they are, which is cheaper than hashing each record's.
fn positions(records: &[AskRecord], ids: &[MarkerId]) -> Vec<usize> {
    let mut at = Vec::with_capacity(ids.len());
    for (i, r) in records.iter().enumerate().rev() {
        if at.len() == ids.len() {
            break; // ids are unique among the records
        }
        if ids.contains(&r.id) {
            at.push(i);
        }
    }
    at
}

/// When an append reaches the disk. Either way it is written before the change returns, so a
/// server killed after it loses nothing; only the machine's crash can lose what is not synced.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Flush {
    /// Synced before the change returns.
    Now,
    /// Synced with the next append that is: for a mark whose loss costs at most an ask said
    /// again after the machine crashed (sent), not worth a sync for each ask of a big file.
    Later,
}

/// What [`replay`] found in some bytes of a ledger file.
struct Replayed {
    /// The bytes its complete lines take.
    complete: usize,
    /// Its complete lines.
    lines: usize,
    /// The lines that are no ledger entry (skipped).
    bad: usize,
    /// True if a line changed or forgot a record.
    applied: bool,
}

/// Applies the complete lines of `bytes` to `records`. A last line without its newline is a
/// write torn by a server killed meanwhile: not applied.
fn replay(bytes: &[u8], records: &mut Vec<AskRecord>) -> Replayed {
    let mut complete = 0;
    let mut entries = Vec::new();
    let (mut lines, mut bad) = (0, 0);
    while let Some(n) = memchr::memchr(b'\n', &bytes[complete..]) {
        match serde_json::from_slice::<Entry>(&bytes[complete..complete + n]) {
            Ok(entry) => entries.push(entry),
            Err(_) => bad += 1,
        }
        complete += n + 1;
        lines += 1;
    }
    let applied = !entries.iter().all(|e| matches!(e, Entry::Ledger(_)));
    if applied {
        apply_entries(entries, records);
    }
    Replayed { complete, lines, bad, applied }
}

/// Applies log entries to `records`, in order.
fn apply_entries(entries: Vec<Entry>, records: &mut Vec<AskRecord>) {
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
}

/// How the log and its spare stand after they were read together.
struct Flags {
    /// The log must be written whole.
    log_stale: bool,
    /// The spare must be written whole.
    spare_stale: bool,
}

/// A ledger file over the size limit: this program never writes one so large.
#[derive(Debug)]
struct TooLarge {
    path: PathBuf,
    size: u64,
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes, over the {MAX_LEDGER_BYTES}-byte limit", self.size)
    }
}

impl std::error::Error for TooLarge {}

impl TooLarge {
    /// The file `e` says is too large, if that is what it says.
    fn of(e: &io::Error) -> Option<&TooLarge> {
        e.get_ref().and_then(|inner| inner.downcast_ref::<TooLarge>())
    }
}

/// The whole of the ledger file `file` (at `path`), if it is at most `max` bytes: a larger one
/// is not read at all.
pub(super) fn read_whole(file: &mut File, path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let size = file.metadata()?.len();
    if size > max {
        let big = TooLarge { path: path.to_path_buf(), size };
        return Err(io::Error::new(io::ErrorKind::InvalidData, big));
    }
    state::read_at_most(file, max)
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
