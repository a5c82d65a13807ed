//! The asks a root has announced: pending until resolved, then remembered for a while, so that
//! an editor's stale buffer writing a marker back (without its tag, or after it was resolved)
//! is recognised as the same ask and never fires twice. Kept in memory with `--tag file`; with
//! `--tag never`, in a ledger file in the user's state directory, shared by every server on the
//! root and kept across restarts.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Problem, StartError};
use crate::id::MarkerId;

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

/// One announced ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Asks remembered for this run only (`--tag file`: the tags in the files are the record
    /// that outlives the run).
    pub fn in_memory() -> Asks {
        Asks { inner: Arc::new(Mutex::new(Inner { records: Vec::new(), ledger: None })) }
    }

    /// Asks kept in the root's ledger (`--tag never`) in the user's state directory, loaded now.
    pub fn with_ledger(root: &Path) -> Result<Asks, StartError> {
        Asks::with_ledger_in(&state_dir().ok_or(StartError::NoStateDir)?, root)
    }

    /// Asks kept in the root's ledger in `state_dir`, loaded now.
    pub fn with_ledger_in(state_dir: &Path, root: &Path) -> Result<Asks, StartError> {
        let ledger = Ledger::for_root(state_dir, root)?;
        let records = ledger
            .load(root)
            .map_err(|source| StartError::Ledger { path: ledger.path.clone(), source })?;
        Ok(Asks { inner: Arc::new(Mutex::new(Inner { records, ledger: Some(ledger) })) })
    }

    /// The asks for `mode` on `root`: the root's ledger in both modes — what one session
    /// announced is known to the next owner of the root, and to a standby, even before its
    /// tag is written — except that with `--tag file` a state directory that cannot be used
    /// costs only that (the tags in the files remain), with a warning.
    pub fn for_mode(mode: TagMode, root: &Path) -> Result<Asks, StartError> {
        match mode {
            TagMode::File => Ok(Asks::with_ledger(root).unwrap_or_else(|e| {
                tracing::warn!("{e}; asks are remembered by this session only");
                Asks::in_memory()
            })),
            TagMode::Never => Asks::with_ledger(root),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the records, with the ledger (if any) re-read first and written after,
    /// under its file lock: two servers on one root see each other's asks.
    pub fn update<T>(&self, f: impl FnOnce(&mut Vec<AskRecord>) -> T) -> T {
        let mut inner = self.lock();
        let Inner { records, ledger } = &mut *inner;
        let Some(ledger) = ledger else {
            let out = f(records);
            prune(records, now());
            return out;
        };
        let guard = match ledger.lock_file() {
            Ok(g) => Some(g),
            Err(source) => {
                Problem::Ledger { path: ledger.path.clone(), source }.log();
                None
            }
        };
        if guard.is_some() {
            match ledger.load(&ledger.root) {
                Ok(fresh) => *records = fresh,
                Err(source) => Problem::Ledger { path: ledger.path.clone(), source }.log(),
            }
        }
        let before = records.clone();
        let out = f(records);
        prune(records, now());
        // Written only when something changed: most saves only look.
        if guard.is_some() && *records != before {
            if let Err(source) = ledger.save(records) {
                Problem::Ledger { path: ledger.path.clone(), source }.log();
            }
        }
        out
    }

    /// True if, as last read, a pending ask lives in `file`: a save of a file without markers
    /// and without pending asks need not lock or read the ledger at all. (An ask another server
    /// recorded since is settled at that file's next save after this server reads the ledger.)
    pub fn may_have_pending(&self, file: &str) -> bool {
        self.lock().records.iter().any(|r| r.file == file && r.is_pending())
    }

    /// A copy of every record (for `list_asks`).
    pub fn snapshot(&self) -> Vec<AskRecord> {
        self.update(|records| records.clone())
    }

    /// The record of the ask with this id, pending or resolved.
    pub fn by_id(&self, id: MarkerId) -> Option<AskRecord> {
        self.update(|records| records.iter().find(|r| r.id == id).cloned())
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

/// The `--tag never` ledger: `<state dir>/filewatch-mcp/<hash of the canonical root>.json`,
/// never inside the working tree, written atomically (temp file and rename) under a lock file.
struct Ledger {
    root: PathBuf,
    path: PathBuf,
}

/// The ledger file as written.
#[derive(Serialize, Deserialize)]
struct LedgerFile {
    /// The root it belongs to (for people reading the state directory).
    root: PathBuf,
    asks: Vec<AskRecord>,
}

impl Ledger {
    fn for_root(dir: &Path, root: &Path) -> Result<Ledger, StartError> {
        std::fs::create_dir_all(dir)
            .map_err(|source| StartError::Ledger { path: dir.to_path_buf(), source })?;
        let path = dir.join(format!("{:016x}.json", stable_hash(root)));
        Ok(Ledger { root: root.to_path_buf(), path })
    }

    fn lock_file(&self) -> std::io::Result<File> {
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.path.with_extension("lock"))?;
        lock.lock()?;
        Ok(lock) // unlocked when dropped
    }

    /// The records, without pending asks whose file is gone.
    fn load(&self, root: &Path) -> std::io::Result<Vec<AskRecord>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let file: LedgerFile = serde_json::from_slice(&bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let mut asks = file.asks;
        asks.retain(|r| root.join(&r.file).exists());
        Ok(asks)
    }

    fn save(&self, records: &[AskRecord]) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        let file = LedgerFile { root: self.root.clone(), asks: records.to_vec() };
        serde_json::to_writer_pretty(&mut tmp, &file)?;
        tmp.write_all(b"\n")?;
        tmp.as_file().sync_all()?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// `$FILEWATCH_STATE_DIR`, else the platform's state directory: `$XDG_STATE_HOME` or
/// `~/.local/state` on Unix, `%LOCALAPPDATA%` on Windows; with `filewatch-mcp` appended.
pub(crate) fn state_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("FILEWATCH_STATE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .or_else(|| std::env::var_os("LOCALAPPDATA").map(PathBuf::from))?;
    Some(base.join("filewatch-mcp"))
}

/// A hash of the root's path that is the same in every run and every build (FNV-1a), so a
/// restarted server finds its ledger.
/// (std's `DefaultHasher` may change its output between Rust versions.)
pub(crate) fn stable_hash(root: &Path) -> u64 {
    root.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let open = || Asks::with_ledger_in(state.path(), root.path()).unwrap();
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
        use std::os::unix::fs::MetadataExt;
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let asks = Asks::with_ledger_in(state.path(), root.path()).unwrap();
        asks.update(|r| r.extend(many(1, 1000)));
        let path = ledger_file(state.path());
        let (before, meta) = (std::fs::read(&path).unwrap(), std::fs::metadata(&path).unwrap());
        asks.update(|r| r.extend(many(5000, 1)));
        let (after, now) = (std::fs::read(&path).unwrap(), std::fs::metadata(&path).unwrap());
        assert_eq!((now.dev(), now.ino()), (meta.dev(), meta.ino()), "the ledger was replaced");
        assert!(after.starts_with(&before), "the ledger was rewritten");
        assert!(
            after.len() - before.len() < 1000,
            "{} bytes written for one ask",
            after.len() - before.len()
        );
        assert_eq!(Asks::with_ledger_in(state.path(), root.path()).unwrap().snapshot().len(), 1001);
    }

    /// A server killed while it appends leaves a torn last line: that line is lost, nothing
    /// else, and the next change is not glued to it.
    #[test]
    fn a_torn_last_line_loses_nothing_else() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.py"), "").unwrap();
        let open = || Asks::with_ledger_in(state.path(), root.path());
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
}
