//! The pipelines: one-shot ones behind `scan`, `stamp` and `resolve` (walk → safe read →
//! language → scan → stamp or resolve → checked atomic replace), and the live one behind `watch`
//! and the server ([`LivePipeline`]: changed path → read → scan → stamp → ask).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::fsio::{self, ReadError, WriteError};
use crate::languages::{Language, LanguageTable};
use crate::scan::{Marker, Scanner};
use crate::stamp;
use crate::walk;
use crate::watch::GitWindow;

/// How often a stamp or resolve is tried again when the user's write gets in between.
pub const WRITE_ATTEMPTS: usize = 5;

/// The markers found in one file.
#[derive(Debug)]
pub struct FileMarkers {
    pub path: PathBuf,
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
}

/// The language of `path`: by name, or for extension-less files by the `#!` line.
pub fn detect_language<'t>(
    table: &'t LanguageTable,
    path: &Path,
    bytes: &[u8],
) -> Option<&'t Language> {
    if let Some(lang) = table.for_path(path) {
        return Some(lang);
    }
    let first_line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    table.for_shebang(first_line)
}

/// True if reading `path` may lead to a language: a known file type, or a name without an
/// extension (a script whose `#!` line may say). Saves reading images and archives.
pub fn may_have_language(table: &LanguageTable, path: &Path) -> bool {
    table.for_path(path).is_some()
        || path.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.contains('.'))
}

/// Reads and scans one file. `Ok(None)` means the file is in no known language.
pub fn scan_file(scanner: &Scanner, path: &Path) -> Result<Option<Vec<Marker>>, ReadError> {
    let source = fsio::read_source(path)?;
    let Some(lang) = detect_language(scanner.table(), path, &source.bytes) else {
        return Ok(None);
    };
    Ok(Some(scanner.scan(lang, &source.bytes)))
}

/// Scans every file under `paths` (files named directly are always scanned) on `threads`
/// threads.
pub fn scan_paths(scanner: &Scanner, paths: &[PathBuf], threads: usize) -> ScanReport {
    let threads = threads.max(1);
    let files = candidate_files(scanner.table(), paths, threads);
    let next = AtomicUsize::new(0);
    let report = Mutex::new(ScanReport::default());
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
pub fn candidate_files(table: &LanguageTable, paths: &[PathBuf], threads: usize) -> Vec<PathBuf> {
    let explicit: Vec<&PathBuf> =
        paths.iter().filter(|p| !std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())).collect();
    walk::files(paths, threads)
        .into_iter()
        .filter(|p| explicit.contains(&p) || may_have_language(table, p))
        .collect()
}

/// Why a file could not be stamped or resolved.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{path}: kept changing; gave up after {attempts} attempts")]
    Busy { path: PathBuf, attempts: usize },
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
        let Some(lang) = detect_language(scanner.table(), path, bytes) else {
            return Edit::Keep(Vec::new());
        };
        let markers = scanner.scan(lang, bytes);
        let stamps = stamp::plan(bytes, &markers, stamp::uuid_random);
        let untagged = markers.into_iter().filter(|m| !m.is_tagged());
        let asks: Vec<Marker> = untagged
            .zip(&stamps)
            .map(|(mut m, s)| {
                m.tag = Some(s.id.clone());
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
    id: &str,
    attempts: usize,
) -> Result<bool, EditError> {
    edit_file(path, attempts, |bytes| {
        if memchr::memmem::find(bytes, id.as_bytes()).is_none() {
            return Edit::Keep(false);
        }
        let Some(lang) = detect_language(scanner.table(), path, bytes) else {
            return Edit::Keep(false);
        };
        match stamp::resolve(bytes, &scanner.scan(lang, bytes), id) {
            Ok(resolved) => Edit::Write(resolved, true),
            Err(_) => Edit::Keep(false),
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
    id: &str,
    threads: usize,
) -> Result<Vec<PathBuf>, EditError> {
    let mut resolved = Vec::new();
    for path in candidate_files(scanner.table(), paths, threads) {
        match resolve_file(scanner, &path, id, WRITE_ATTEMPTS) {
            Ok(true) => resolved.push(path),
            Ok(false) => {}
            Err(EditError::Read(e)) if e.is_skip() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(resolved)
}

/// `fw-xxxxxxxx` from an id as a user may type it (`[fw-…]` brackets allowed).
pub fn parse_id(text: &str) -> Option<String> {
    let id = text.trim().trim_start_matches('[').trim_end_matches(']');
    let hex = id.strip_prefix("fw-")?;
    let ok =
        hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| id.to_string())
}

// ---- the live pipeline: changed path → read → scan → stamp → ask ------------------------------

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
    /// The id the ask is known by (`fw-…`), if it was stamped.
    pub fn id(&self) -> Option<&str> {
        self.marker.tag.as_deref()
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
    /// `root` must be canonical (as [`crate::watch::Watch`] reports paths).
    pub fn new(root: PathBuf, scanner: Scanner<'t>) -> Self {
        LivePipeline { root, scanner, last_seen: HashMap::new(), quiet: HashSet::new(), scanned: 0 }
    }

    /// How many changes were scanned; a change to bytes we left as they are is not.
    pub fn scanned(&self) -> usize {
        self.scanned
    }

    /// Handles one changed file; returns the asks to announce. `from_git` is set when git held
    /// its index lock while the file changed (see [`crate::watch::Change`]).
    pub fn process(&mut self, path: &Path, from_git: Option<&GitWindow>) -> Vec<Ask> {
        // Never act outside the root (symlinks are not followed, but be sure); and do not read
        // a file no language claims (an image, an archive) on every save.
        if !path.starts_with(&self.root) || !may_have_language(self.scanner.table(), path) {
            return Vec::new();
        }
        let source = match fsio::read_source(path) {
            Ok(s) => s,
            Err(e) => {
                if !e.is_skip() && path.exists() {
                    tracing::warn!("{e}");
                } else {
                    tracing::debug!("skipped {e}");
                }
                self.last_seen.remove(path);
                return Vec::new();
            }
        };
        let hash = content_hash(&source.bytes);
        if self.last_seen.get(path) == Some(&hash) {
            return Vec::new();
        }
        let Some(lang) = detect_language(self.scanner.table(), path, &source.bytes) else {
            return Vec::new();
        };
        self.scanned += 1;
        let markers = self.scanner.scan(lang, &source.bytes);
        let mut fresh: Vec<Marker> = markers.into_iter().filter(|m| !m.is_tagged()).collect();
        fresh.retain(|m| {
            !self.quiet.contains(&(path.to_path_buf(), line_of(&source.bytes, m).to_vec()))
        });
        if fresh.is_empty() {
            self.last_seen.insert(path.to_path_buf(), hash);
            return Vec::new();
        }
        // Markers that arrived through git are not the user's fresh asks: their line is in the
        // file at HEAD — or, when git was busy meanwhile, in the index or the stash it popped.
        let mut revs = vec!["HEAD".to_string()];
        if let Some(window) = from_git {
            revs.push(String::new()); // the index
            revs.extend(window.stash.clone());
        }
        let from_git_lines = git_lines(path, &revs);
        fresh.retain(|m| {
            let line = line_of(&source.bytes, m).to_vec();
            let arrived = from_git_lines.contains(&line);
            if arrived {
                tracing::info!("{}:{}: from git, not announced", path.display(), m.line);
                self.quiet.insert((path.to_path_buf(), line));
            }
            !arrived
        });
        if fresh.is_empty() {
            self.last_seen.insert(path.to_path_buf(), hash);
            return Vec::new();
        }
        let stamps = stamp::plan(&source.bytes, &fresh, stamp::uuid_random);
        let stamped = stamp::splice(&source.bytes, &stamps);
        let file = relative(&self.root, path);
        match fsio::replace_checked(path, &source.bytes, &stamped) {
            Ok(()) => {
                self.last_seen.insert(path.to_path_buf(), content_hash(&stamped));
                fresh
                    .into_iter()
                    .zip(stamps)
                    .map(|(mut marker, s)| {
                        marker.tag = Some(s.id);
                        Ask { path: path.to_path_buf(), file: file.clone(), marker, stamped: true }
                    })
                    .collect()
            }
            Err(WriteError::Conflict { .. }) => {
                tracing::debug!(
                    "{}: changed while stamping; its own event follows",
                    path.display()
                );
                Vec::new()
            }
            Err(e) => {
                tracing::warn!("{e}; announcing its asks once, untagged");
                self.last_seen.insert(path.to_path_buf(), hash);
                for m in &fresh {
                    self.quiet.insert((path.to_path_buf(), line_of(&source.bytes, m).to_vec()));
                }
                fresh
                    .into_iter()
                    .map(|marker| Ask {
                        path: path.to_path_buf(),
                        file: file.clone(),
                        marker,
                        stamped: false,
                    })
                    .collect()
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
fn line_of<'a>(src: &'a [u8], m: &Marker) -> &'a [u8] {
    let at = m.insert_at;
    let start = src[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let end = memchr::memchr(b'\n', &src[at..]).map_or(src.len(), |i| at + i);
    let line = &src[start..end];
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Every line of `path` in the given git revisions (`HEAD`, `""` for the index, a commit), empty
/// outside a repository or for a file git does not know. Asked only when a file holds untagged
/// markers, so ordinary saves never run git.
fn git_lines(path: &Path, revs: &[String]) -> HashSet<Vec<u8>> {
    let mut lines = HashSet::new();
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return lines;
    };
    for rev in revs {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["show", &format!("{rev}:./{name}")])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        let Ok(out) = out else { return lines }; // no git at all
        if out.status.success() {
            lines.extend(
                out.stdout
                    .split(|&b| b == b'\n')
                    .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec()),
            );
        }
    }
    lines
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
