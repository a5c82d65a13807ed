//! The root's files as the live pipeline reads them: a changed file reached beneath the root
//! without following a symlink and held while it is handled, what each file held when we last
//! left it (its hash, its recent bytes), and its markers, scanned incrementally.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::autosave::LineDiff;
use crate::error::Problem;
use crate::fsio::{self, Source, WriteError};
use crate::languages::{Language, LanguageTable};
use crate::lines::content_hash;
use crate::pairing::InFile;
use crate::pipeline::relative;
use crate::scan::{Marker, Scanner, TreeCache};
use crate::sys;
use crate::watch::Change;

/// The previous bytes of recently changed files are kept up to this total: what tells the lines
/// a user just wrote from those that were already there.
const PREVIOUS_BYTES: usize = 32 * 1024 * 1024;

/// A file as one look read it: what the stages after the read work on.
#[derive(Clone)]
pub(super) struct Seen<'t> {
    /// The file, absolute.
    pub path: PathBuf,
    /// Its bytes and metadata.
    pub source: Source,
    /// Its language.
    pub lang: &'t Language,
    /// The file relative to the root, `/`-separated.
    pub file: String,
    /// Its markers, in file order: shared, not copied, by the rounds of a file of many asks.
    pub markers: Arc<[Marker]>,
    /// The count of others' changes its markers were reconciled with the records knowing
    /// ([`crate::asks::Asks::update_knowing_others`]); `None` if they were not.
    pub reconciled: Option<u64>,
}

impl Seen<'_> {
    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.source.bytes
    }

    /// Its markers, to be paired with the records ([`crate::pairing`]).
    pub fn found(&self) -> InFile<'_> {
        InFile::new(self.lang, &self.source.bytes, &self.file, &self.markers)
    }
}

/// The root's files: reading them, and what they held when we last left them.
pub(super) struct Files<'t> {
    pub(super) root: PathBuf,
    pub(super) scanner: Scanner<'t>,
    /// Content hash of each file as we last left it: a change event for bytes we have already
    /// handled (our own stamp's rename, a touch) costs one read and a hash.
    pub(super) last_seen: HashMap<PathBuf, u64>,
    /// The bytes of recently changed files as we last saw them.
    previous: Previous,
    /// The syntax trees of recently scanned files: a save re-parses only what it changed.
    pub(super) trees: TreeCache,
    /// The last file scanned: its path, the hash of its bytes, its markers.
    last_scan: Option<(PathBuf, u64, Arc<[Marker]>)>,
    /// The directory of the file at hand, held since it was read.
    here: Option<Here>,
    /// Files read and scanned (not skipped as unchanged): for logs and tests.
    scanned: usize,
}

impl<'t> Files<'t> {
    /// The files of `root` (canonical), scanned with `scanner`.
    pub fn new(root: PathBuf, scanner: Scanner<'t>) -> Self {
        Files {
            root,
            scanner,
            last_seen: HashMap::new(),
            previous: Previous::default(),
            trees: TreeCache::new(),
            last_scan: None,
            here: None,
            scanned: 0,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn table(&self) -> &'t LanguageTable {
        self.scanner.table()
    }

    /// How many changes were scanned; a change to bytes we left as they are is not.
    pub fn scanned(&self) -> usize {
        self.scanned
    }

    /// `path` relative to the root, `/`-separated (as asks name their file).
    pub fn relative(&self, path: &Path) -> String {
        relative(&self.root, path)
    }

    /// The file's bytes, if it is ours to read: inside the root (symlinks are not followed,
    /// but be sure), of a type some language may claim, and a readable regular file.
    pub fn read(&mut self, path: &Path) -> Option<Source> {
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
        match fsio::read_source(&here.real).map_err(|e| e.shown_as(|p| here.beneath.shown(p))) {
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

    /// Lets go of the directory held since the last read: an open directory keeps the kernel
    /// from reporting its deletion (the root's `rm -rf` would go unseen until the next save).
    pub fn let_go(&mut self) {
        self.here = None;
    }

    /// True if `source`, just read for `change`, is news: not the bytes we left the file with
    /// (our own stamp, a touch). A file listed by a rescan after lost events is news only if it
    /// changed during the run: its bytes differ from the ones last seen, or, never seen, it was
    /// modified after watching began.
    pub fn is_news(&self, change: &Change, source: &Source) -> bool {
        let path = change.path.as_path();
        if self.is_left_as(path, &source.bytes) {
            tracing::debug!("{}: unchanged since we left it", path.display());
            return false; // bytes we already handled: our own stamp, a touch
        }
        if let Some(since) = change.rescan {
            // Seen before: its bytes differ, so it changed. Never seen: only if modified since.
            let modified = source.metadata.modified().ok();
            if !self.last_seen.contains_key(path) && modified.is_none_or(|m| m < since) {
                tracing::debug!("{}: unchanged across lost events; not announced", path.display());
                return false;
            }
        }
        true
    }

    /// True if `bytes` are what we left `path` with.
    pub fn is_left_as(&self, path: &Path, bytes: &[u8]) -> bool {
        self.last_seen.get(path) == Some(&content_hash(bytes))
    }

    /// Forgets how we left `path`: its next change is looked at, whatever its bytes.
    pub fn look_again(&mut self, path: &Path) {
        self.last_seen.remove(path);
    }

    /// Remembers `bytes` as what we left `path` with.
    pub fn remember(&mut self, path: &Path, bytes: &[u8]) {
        self.last_seen.insert(path.to_path_buf(), content_hash(bytes));
        self.previous.insert(path, bytes);
    }

    /// Keeps `bytes` as what `path` held when we last saw it (the version its asks' places are
    /// in), without taking it as left (its next change is looked at, whatever its bytes).
    pub fn keep_previous(&mut self, path: &Path, bytes: &[u8]) {
        self.previous.insert(path, bytes);
    }

    /// The bytes `path` held when we last saw it, if still kept.
    pub fn previous(&self, path: &Path) -> Option<&[u8]> {
        self.previous.get(path)
    }

    /// How `bytes` differ, line by line, from what `path` held when we last saw it.
    pub fn diff(&self, path: &Path, bytes: &[u8]) -> Option<LineDiff> {
        self.previous.get(path).map(|old| LineDiff::between(old, bytes))
    }

    /// `path` was renamed from `from`: with nothing of its own, it keeps the bytes last seen
    /// there and their hash.
    pub fn inherit(&mut self, path: &Path, from: &Path) {
        if self.previous.get(path).is_none() {
            if let Some(bytes) = self.previous.get(from).map(<[u8]>::to_vec) {
                self.previous.insert(path, &bytes);
            }
        }
        if let (false, Some(&hash)) = (self.last_seen.contains_key(path), self.last_seen.get(from))
        {
            self.last_seen.insert(path.to_path_buf(), hash);
        }
    }

    /// Counts a change read and scanned.
    pub fn count_scan(&mut self) {
        self.scanned += 1;
    }

    /// The markers of `path`'s `bytes`: scanned (incrementally), or, for the very bytes scanned
    /// last, as found then — a file with thousands of asks is scanned once for all its rounds,
    /// not once a round.
    pub fn markers(&mut self, lang: &Language, path: &Path, bytes: &[u8]) -> Arc<[Marker]> {
        let hash = content_hash(bytes);
        if let Some((p, h, markers)) = &self.last_scan {
            if p == path && *h == hash {
                return markers.clone();
            }
        }
        let markers: Arc<[Marker]> =
            self.scanner.scan_incremental(lang, bytes, &mut self.trees, path).into();
        self.last_scan = Some((path.to_path_buf(), hash, markers.clone()));
        markers
    }

    /// Takes `markers` as what the scan of `path`'s bytes hashed `hash` found (scanned
    /// elsewhere): [`Files::markers`] gives them for those bytes.
    pub fn scanned_as(&mut self, path: &Path, hash: u64, markers: Vec<Marker>) {
        self.last_scan = Some((path.to_path_buf(), hash, markers.into()));
    }

    /// Replaces the file at hand, `path`, read as `old`, with `new`: through the directory held
    /// since the read, and only while that is still the directory at its path (checked just
    /// before and just after the exchange).
    pub fn replace(&self, path: &Path, old: &[u8], new: &[u8]) -> Result<(), WriteError> {
        let target = self.here.as_ref().map_or_else(|| path.to_path_buf(), |h| h.real.clone());
        let in_place =
            || self.here.as_ref().is_none_or(|h| sys::same_dir(&h.beneath, &self.root, &h.rel_dir));
        if !in_place() {
            // A directory of the path was swapped (for a symlink out of the root, say): the
            // path no longer names what was read. Its new state brings its own event.
            return Err(WriteError::Conflict { path: path.to_path_buf() });
        }
        fsio::replace_checked_in(&target, old, new, &in_place)
            .map_err(|e| e.shown_as(|p| self.shown(p)))
    }

    /// `path` (a name under the held directory of the file at hand) as the user knows it.
    fn shown(&self, path: &Path) -> PathBuf {
        self.here.as_ref().map_or_else(|| path.to_path_buf(), |h| h.beneath.shown(path))
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

#[cfg(test)]
mod tests {
    #[cfg(unix)] // the symlink test's
    use std::path::Path;
    use std::time::Duration;

    use crate::live::testing::live;
    use crate::watch::Change;

    /// Our own stamp's write comes back as a change: it costs a read and a hash, not a scan.
    #[test]
    fn own_writes_are_not_scanned_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.py");
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

    /// A stamp does not cost the file its syntax tree: the tree kept is that of the untagged
    /// bytes, which our tag leaves as they were, so the user's next save is parsed from it.
    #[test]
    fn a_save_after_a_stamp_is_parsed_incrementally() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.py");
        let body: String = (0..200).map(|i| format!("def f{i}():\n    return {i}\n")).collect();
        crate::test_support::write(&p, format!("{body}# @claude one\n")).unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        let stamped = std::fs::read_to_string(&p).unwrap();
        assert!(stamped.contains("@claude[fw-"), "not stamped: {stamped}");
        crate::test_support::write(&p, format!("x = 0\n{stamped}# @claude two\n")).unwrap();
        let asks = live.process(&p, None);
        let texts: Vec<&str> = asks.iter().map(|a| a.marker.text.as_str()).collect();
        assert_eq!(texts, ["@claude two"]);
        let counts = live.files.trees.counts();
        assert_eq!((counts.full, counts.incremental), (1, 1), "{counts:?}");
    }

    /// A rescan after lost events lists every file; only those that changed during the run
    /// may fire.
    #[test]
    fn a_rescan_fires_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let dormant = live.files.root.join("vendored.py");
        crate::test_support::write(&dormant, "# @claude from a vendored file\n").unwrap();
        let seen = live.files.root.join("seen.py");
        crate::test_support::write(&seen, "x = 1\n").unwrap();
        assert!(live.process(&seen, None).is_empty());
        let since = std::time::SystemTime::now();
        std::thread::sleep(Duration::from_millis(20)); // mtimes after `since`, on coarse clocks too
        crate::test_support::write(&seen, "x = 1\n# @claude saved while events were lost\n")
            .unwrap();
        let fresh = live.files.root.join("new.py");
        crate::test_support::write(&fresh, "# @claude new while events were lost\n").unwrap();
        let mut texts = Vec::new();
        for path in [&dormant, &seen, &fresh] {
            let change = Change {
                path: path.clone(),
                from_git: None,
                rescan: Some(since),
                renamed_from: vec![],
            };
            texts.extend(
                live.process_change(&change, usize::MAX).into_iter().map(|a| a.marker.text),
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
    /// between the read and the tag: the outside file is never read or written, and nothing
    /// of it is announced (what was read inside the root before the swap is).
    #[cfg(unix)] // std::os::unix::fs::symlink
    #[test]
    fn a_directory_swapped_for_a_symlink_is_not_followed_out_of_the_root() {
        for when in ["before the read", "before the stamp"] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            let secret = outside.path().join("a.py");
            crate::test_support::write(&secret, "# @claude outside the root\n").unwrap();
            let mut live = live(dir.path());
            let sub = live.files.root.join("sub");
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
            let asks = live.process(&p, None);
            let want = usize::from(when == "before the stamp");
            assert_eq!(asks.len(), want, "{when}: announced");
            assert!(asks.iter().all(|a| !a.stamped), "{when}: tagged");
            assert_eq!(
                std::fs::read_to_string(&secret).unwrap(),
                "# @claude outside the root\n",
                "{when}: the outside file was written"
            );
        }
    }
}
