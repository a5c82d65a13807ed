//! The ledger's spare: a second file beside the log (`<log>.copy`) that every line appended to
//! the log is appended to as well, and that is written whole whenever the log is. It is read
//! only when the ledger is opened or read anew, to tell what damage to one of the two files —
//! a line made unreadable, the log cut short, emptied or removed — took from it, and to mend
//! both: an ask's id survives any damage that leaves its record in either file.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::ledger::Flush;
use super::AskRecord;
use crate::id::MarkerId;
use crate::state;

/// The spare file of one ledger.
pub(super) struct Spare {
    path: PathBuf,
}

impl Spare {
    /// The spare of the log at `log`.
    pub(super) fn of(log: &Path) -> Spare {
        let mut name = log.as_os_str().to_owned();
        name.push(".copy");
        Spare { path: PathBuf::from(name) }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Its bytes; none if it is missing. The lock is held.
    pub(super) fn read(&self, max: u64) -> io::Result<Vec<u8>> {
        match state::open_existing(&self.path) {
            Ok(mut file) => super::ledger::read_whole(&mut file, &self.path, max),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Appends `bytes` (whole lines) after its last complete line — a line torn by a server
    /// killed while it appended is cut, never glued to — and syncs them. `Ok(false)` if it is
    /// empty or missing: it must then be written whole. The lock is held.
    pub(super) fn append(&self, bytes: &[u8], flush: Flush) -> io::Result<bool> {
        let mut file = state::open(&self.path)?;
        let end = end_of_last_line(&mut file)?;
        if end == 0 {
            return Ok(false);
        }
        if file.metadata()?.len() != end {
            file.set_len(end)?;
        }
        file.seek(SeekFrom::Start(end))?;
        file.write_all(bytes)?;
        if flush == Flush::Now {
            file.sync_data()?;
        }
        Ok(true)
    }

    /// Writes it whole: `write` fills a temp file beside it, which is synced and renamed over
    /// it. The lock is held.
    pub(super) fn write(
        &self,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let name = self.path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        // Named like the log's own temp files: the next open removes one a crash left.
        let mut tmp =
            tempfile::Builder::new().prefix(&format!("{name}.")).suffix(".tmp").tempfile_in(dir)?;
        {
            let mut w = BufWriter::new(tmp.as_file_mut());
            write(&mut w)?;
            w.flush()?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// The offset just past the last `\n` of `file` (0 if it has none).
fn end_of_last_line(file: &mut File) -> io::Result<u64> {
    const CHUNK: u64 = 4096;
    let mut end = file.metadata()?.len();
    let mut buf = vec![0; CHUNK as usize];
    while end > 0 {
        let from = end.saturating_sub(CHUNK);
        let chunk = &mut buf[..(end - from) as usize];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(chunk)?;
        if let Some(i) = memchr::memrchr(b'\n', chunk) {
            return Ok(from + i as u64 + 1);
        }
        end = from;
    }
    Ok(0)
}

/// What one file of the ledger holds, read whole.
pub(super) struct Replay {
    pub records: Vec<AskRecord>,
    /// Its complete lines.
    pub lines: usize,
    /// Complete lines that are no ledger entry: damage.
    pub bad: usize,
}

/// The ledger as the log and its spare hold it together, and what each of them lacks.
pub(super) struct Mended {
    pub records: Vec<AskRecord>,
    /// Records the log lacked (or held older than the spare), taken from the spare.
    pub restored: usize,
    /// The log must be written whole: it lacks records or holds unreadable lines.
    pub log_stale: bool,
    /// The spare must be written whole, for the same reasons.
    pub spare_stale: bool,
}

/// Both files' records together: every record either holds (a record one of them lost is
/// taken from the other); of a record both hold differently, the version of the file that is
/// ahead — no unreadable lines, then more lines (both are written in step, so the longer one
/// has a change the other missed) — the log's on a tie.
pub(super) fn mend(log: Replay, spare: Replay) -> Mended {
    let log_ahead =
        (log.bad, std::cmp::Reverse(log.lines)) <= (spare.bad, std::cmp::Reverse(spare.lines));
    let log_keys = keys(&log.records);
    let spare_keys = keys(&spare.records);
    let (first, second) = if log_ahead { (&log, &spare) } else { (&spare, &log) };
    let mut records = first.records.clone();
    let have: HashMap<MarkerId, usize> =
        records.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    records.extend(second.records.iter().filter(|r| !have.contains_key(&r.id)).cloned());
    let all = keys(&records);
    let restored = all.iter().filter(|(id, r)| log_keys.get(id) != Some(r)).count();
    Mended {
        restored,
        log_stale: log.bad > 0 || log_keys != all,
        spare_stale: spare.bad > 0 || spare_keys != all,
        records,
    }
}

/// Each record by its id.
fn keys(records: &[AskRecord]) -> HashMap<MarkerId, &AskRecord> {
    records.iter().map(|r| (r.id, r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: u32, line: usize) -> AskRecord {
        AskRecord {
            id: format!("fw-{n:08x}").parse().unwrap(),
            file: "a.py".into(),
            text: format!("@claude {n}"),
            lines: 1,
            line,
            anchor: 0,
            announced: 1,
            resolved: None,
            heard: None,
            unsent: false,
        }
    }

    fn replay(records: Vec<AskRecord>, lines: usize, bad: usize) -> Replay {
        Replay { records, lines, bad }
    }

    #[test]
    fn each_file_gives_what_the_other_lost() {
        let whole = vec![record(1, 1), record(2, 1), record(3, 1)];
        let cut = vec![record(1, 1)];
        let m = mend(replay(cut.clone(), 2, 0), replay(whole.clone(), 4, 0));
        assert_eq!(
            (m.records.clone(), m.restored, m.log_stale, m.spare_stale),
            (whole.clone(), 2, true, false)
        );
        let m = mend(replay(whole.clone(), 4, 0), replay(cut, 2, 0));
        assert_eq!(
            (m.records, m.restored, m.log_stale, m.spare_stale),
            (whole.clone(), 0, false, true)
        );
        let m = mend(replay(whole.clone(), 4, 0), replay(whole.clone(), 4, 0));
        assert!(!m.log_stale && !m.spare_stale && m.restored == 0);
    }

    #[test]
    fn of_two_versions_the_file_ahead_wins() {
        // The log lost the line that moved record 2 (its last change): the spare has it.
        let old = vec![record(1, 1), record(2, 1)];
        let new = vec![record(1, 1), record(2, 7)];
        let m = mend(replay(old.clone(), 3, 0), replay(new.clone(), 4, 0));
        assert_eq!((m.records, m.restored), (new.clone(), 1));
        // An unreadable line counts against a file, however long it is.
        let m = mend(replay(new.clone(), 5, 1), replay(old.clone(), 3, 0));
        assert_eq!(m.records, old);
        assert!(m.log_stale && !m.spare_stale);
    }

    #[test]
    fn a_torn_end_is_cut_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let spare = Spare::of(&dir.path().join("x.asks.jsonl"));
        assert!(!spare.append(b"{}\n", Flush::Now).unwrap(), "an empty spare is written whole");
        spare.write(|w| w.write_all(b"one\ntwo\n")).unwrap();
        std::fs::write(spare.path(), b"one\ntwo\nthr").unwrap();
        assert!(spare.append(b"three\n", Flush::Now).unwrap());
        assert_eq!(std::fs::read(spare.path()).unwrap(), b"one\ntwo\nthree\n");
        std::fs::write(spare.path(), "x".repeat(10_000)).unwrap();
        assert!(!spare.append(b"four\n", Flush::Now).unwrap(), "no complete line: written whole");
    }
}
