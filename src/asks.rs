//! The asks a root has announced: pending until resolved, then remembered for a while, so that
//! an editor's stale buffer writing a marker back (without its tag, or after it was resolved)
//! is recognised as the same ask and never fires twice. Kept in a ledger per root and trigger
//! in the user's state directory ([`crate::state`]), shared under a lock by every server on
//! the root and kept across restarts and takeovers; in memory only where there is no ledger
//! (see [`ledger`]: how it is kept on disk).

mod ledger;
mod spare;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use self::ledger::{Flush, Ledger};
use crate::error::{Problem, StartError};
use crate::id::MarkerId;
use crate::state::{self, Place};

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
    /// When there was first evidence that it entered Claude's context (a hook printed it, the
    /// session's transcript holds it, Claude named it in a tool call; `watch` printed it): only
    /// a heard ask is tagged. Records of the version before have none.
    #[serde(default)]
    pub heard: Option<u64>,
    /// Recorded, and not yet written to a client: set when the ask is recorded, cleared once
    /// the client got it. A pending ask still unsent when another owner looks at its file was
    /// recorded by an owner that died before sending it (SIGKILL): it is announced again,
    /// under its id. (Records of the versions before have none: sent.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unsent: bool,
}

impl AskRecord {
    /// True until the ask is resolved or its marker is gone.
    pub fn is_pending(&self) -> bool {
        self.resolved.is_none()
    }

    /// True once there is evidence the ask entered Claude's context.
    pub fn is_heard(&self) -> bool {
        self.heard.is_some()
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
    /// Untagged markers this run found not typed by the user, by file and place: why they
    /// were not announced (for `list_asks`).
    quiet: HashMap<(String, u64), String>,
}

/// How many markers found not typed [`Asks::not_announced`] keeps the reason of.
const QUIET_KEPT: usize = 65_536;

impl Asks {
    /// Asks remembered for this run only.
    pub fn in_memory() -> Asks {
        Asks {
            inner: Arc::new(Mutex::new(Inner {
                records: Vec::new(),
                ledger: None,
                quiet: HashMap::new(),
            })),
        }
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
        Ok(Asks {
            inner: Arc::new(Mutex::new(Inner {
                records,
                ledger: Some(ledger),
                quiet: HashMap::new(),
            })),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the records, with the ledger (if any) brought up to date first and what `f`
    /// changed appended after, under the ledger's lock: two servers on one root see each
    /// other's asks.
    pub fn update<T>(&self, f: impl FnOnce(&mut Vec<AskRecord>) -> T) -> T {
        self.update_knowing_others(|records, _| f(records))
    }

    /// [`Asks::update`], telling `f` how many times this run has read in what other servers
    /// on the root wrote: a change that is told the same count as an earlier one knows that no
    /// record of theirs came in between. `None` when the ledger could not be read (nothing is
    /// known of others); without a ledger there are no others: always 0.
    pub fn update_knowing_others<T>(
        &self,
        f: impl FnOnce(&mut Vec<AskRecord>, Option<u64>) -> T,
    ) -> T {
        let mut inner = self.lock();
        let Inner { records, ledger, .. } = &mut *inner;
        let Some(ledger) = ledger else {
            let out = f(records, Some(0));
            prune(records, now());
            return out;
        };
        ledger.update(records, |records, others| {
            let out = f(records, others);
            prune(records, now());
            out
        })
    }

    /// Runs `f` on the records as the ledger now has them, changing nothing: [`Asks::update`]
    /// without looking for changes to append (a pass over every record), for what only reads.
    pub fn view<T>(&self, f: impl FnOnce(&[AskRecord]) -> T) -> T {
        let mut inner = self.lock();
        let Inner { records, ledger, .. } = &mut *inner;
        if let Some(ledger) = ledger {
            ledger.refresh(records);
        }
        prune(records, now());
        f(records)
    }

    /// True if, as last read, a pending ask lives in `file`: a save of a file without markers
    /// and without pending asks need not lock or read the ledger at all. (An ask another server
    /// recorded since is closed at that file's next save after this server reads the ledger.)
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

    /// Runs `mark` on the records with these ids, as [`Asks::update`] does but looking only at
    /// them for what to append: a change that marks asks costs what it marks.
    fn mark(&self, ids: &[MarkerId], flush: Flush, mark: impl FnMut(&mut AskRecord)) {
        let mut inner = self.lock();
        let Inner { records, ledger, .. } = &mut *inner;
        match ledger {
            Some(ledger) => ledger.mark(records, ids, flush, mark),
            None => records.iter_mut().filter(|r| ids.contains(&r.id)).for_each(mark),
        }
    }

    /// The asks reached their client: no longer unsent ([`AskRecord::unsent`]).
    pub fn sent(&self, ids: &[MarkerId]) {
        self.mark(ids, Flush::Later, |r| r.unsent = false);
    }

    /// Marks the asks heard now (those not heard already).
    pub fn hear(&self, ids: &[MarkerId]) {
        let now = now();
        self.mark(ids, Flush::Now, |r| {
            r.heard.get_or_insert(now);
        });
    }

    /// The untagged marker of `file` at `place` ([`crate::lines::place_keys`]) was found not
    /// typed by the user, for the reason `why`: it is not announced.
    pub fn not_announced(&self, file: &str, place: [u64; 2], why: &str) {
        let mut inner = self.lock();
        if inner.quiet.len() >= QUIET_KEPT {
            inner.quiet.clear();
        }
        inner.quiet.extend(place.map(|k| ((file.to_string(), k), why.to_string())));
    }

    /// Why the untagged marker of `file` at `place` was not announced, if it was found not
    /// typed by the user.
    pub fn why_not_announced(&self, file: &str, place: [u64; 2]) -> Option<String> {
        let inner = self.lock();
        place.iter().find_map(|&k| inner.quiet.get(&(file.to_string(), k)).cloned())
    }

    /// True if some marker of `file` was found not typed by the user.
    pub fn has_quiet(&self, file: &str) -> bool {
        self.lock().quiet.keys().any(|(f, _)| f == file)
    }

    /// Marks the ask resolved now.
    pub fn resolve(&self, id: MarkerId) {
        let now = now();
        self.mark(&[id], Flush::Now, |r| {
            r.resolved.get_or_insert(now);
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::path::PathBuf;

    use super::ledger::{COMPACT_SLACK, MAX_LEDGER_BYTES};
    use super::*;
    use crate::scan::DEFAULT_TRIGGER;
    use crate::sys;

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
            heard: None,
            unsent: false,
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
        assert!(files.len() <= 3, "the ledger, its spare and its lock file only");
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none(), "nothing in the tree");
    }

    /// The ledger's log in `state` (not its lock, not its spare).
    fn ledger_file(state: &Path) -> PathBuf {
        let mut files: Vec<PathBuf> = std::fs::read_dir(state)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files.pop().unwrap()
    }

    fn many(from: u32, n: u32) -> Vec<AskRecord> {
        (from..from + n)
            .map(|i| record(&format!("fw-{i:08x}"), "a.py", &format!("@claude {i}")))
            .collect()
    }

    /// A state directory and a root holding `a.py`, for servers on that root.
    struct OneRoot {
        state: tempfile::TempDir,
        root: tempfile::TempDir,
    }

    impl OneRoot {
        fn new() -> OneRoot {
            let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            std::fs::write(root.path().join("a.py"), "").unwrap();
            OneRoot { state, root }
        }

        /// A server's asks, read from the ledger as a start does.
        fn open(&self) -> Asks {
            Asks::with_ledger_in(self.state.path(), self.root.path(), DEFAULT_TRIGGER).unwrap()
        }
    }

    /// The ids of the asks, in order.
    fn ids(asks: &Asks) -> Vec<String> {
        asks.snapshot().iter().map(|r| r.id.to_string()).collect()
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

    /// A server killed while it appends leaves a torn last line (in the log, and no line in
    /// its spare): that line is lost, nothing else, and the next change is not glued to it.
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
        let spare = path.with_extension("jsonl.copy");
        let copy = std::fs::read_to_string(&spare).unwrap();
        let lines: Vec<&str> = copy.lines().collect();
        std::fs::write(&spare, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
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
        type Damage = (&'static str, fn(&[u8]) -> Vec<u8>);
        let damages: &[Damage] = &[
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
        assert!(said.contains("Move it away"), "{said}");
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
        let want = ["fw-00000001", "fw-00000003", "fw-00000004", "fw-00000005", "fw-00000064"];
        assert_eq!(ids(&one), want);
        assert_eq!(ids(&open()), want, "after a restart");
    }

    /// Marking asks (sent, heard, resolved) appends a line for each record it changed and
    /// nothing for one it left as it was; the other server and a restart see the marks.
    #[test]
    fn marks_append_what_they_change_only() {
        let place = OneRoot::new();
        let (one, two) = (place.open(), place.open());
        one.update(|r| r.extend(many(1, 5)));
        let path = ledger_file(place.state.path());
        let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
        let before = lines();
        let id = |n: u32| format!("fw-{n:08x}").parse::<MarkerId>().unwrap();
        two.hear(&[id(2), id(3)]);
        two.resolve(id(4));
        assert_eq!(lines(), before + 3);
        two.hear(&[id(2)]); // heard already: no change, no line
        two.sent(&[id(5)]); // never unsent: the same
        assert_eq!(lines(), before + 3);
        let marks = |asks: &Asks| {
            let r = asks.snapshot();
            r.iter().map(|r| (r.heard.is_some(), r.resolved.is_some())).collect::<Vec<_>>()
        };
        let want = [(false, false), (true, false), (true, false), (false, true), (false, false)];
        assert_eq!(marks(&one), want);
        assert_eq!(marks(&place.open()), want, "after a restart");
    }

    /// Windows renames over no file another server holds open, so a rewrite of the log can be
    /// put off (simulated here); the change it was to write must reach the spare all the same,
    /// or the next start mends the log with a spare that lacks it: under Wine a record one
    /// server forgot came back after a restart.
    #[test]
    fn a_rewrite_put_off_keeps_the_spare_in_step() {
        let _refused = super::ledger::refuse_rewrites();
        let place = OneRoot::new();
        let one = place.open();
        one.update(|r| r.extend(many(1, 5)));
        for i in 0..30 {
            // One forgotten, one added: every change both drops and appends.
            one.update(|r| {
                r.remove(0);
                r.extend(many(100 + i, 1));
            });
            assert_eq!(ids(&place.open()), ids(&one), "after change {i}, a restart");
        }
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
