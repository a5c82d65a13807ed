//! The one-shot pipelines behind `scan`, `stamp`, `resolve` and the server's tools: walk → safe
//! read → language → scan → stamp or resolve → checked atomic replace. The live one is in
//! [`crate::live`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::asks::AskRecord;
use crate::error::Problem;
use crate::fsio::{self, ReadError, WriteError};
use crate::id::{uuid_random, MarkerId};
use crate::languages::{Language, LanguageTable};
use crate::scan::{Marker, Scanner};
use crate::stamp::{self, ResolveError};
use crate::walk::{self, Listing};

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

/// Removes the recorded ask `record` from its file under `root`: found by its id's tag, or —
/// when an editor's stale buffer wrote the marker back without its tag, or with `--tag never` —
/// by its recorded text; and exactly the lines that were announced, never one more.
/// `Ok(false)` if the file no longer holds it.
pub fn resolve_recorded(
    scanner: &Scanner,
    root: &Path,
    record: &AskRecord,
) -> Result<bool, EditError> {
    // Reached without following a symlink in any directory of its path, as the live pipeline
    // reads it.
    let rel = Path::new(&record.file);
    let (Some(rel_dir), Some(name)) = (rel.parent(), rel.file_name()) else { return Ok(false) };
    let Ok(beneath) = crate::sys::dir_beneath(root, rel_dir) else { return Ok(false) };
    let path = beneath.path(name);
    edit_file(&path, WRITE_ATTEMPTS, |bytes| {
        let Some(lang) = scanner.table().detect(&path, bytes) else {
            return Edit::Keep(false);
        };
        let markers = scanner.scan(lang, bytes);
        let found: Vec<Marker> = markers
            .iter()
            .filter(|m| is_recorded(lang, bytes, m, record))
            .map(|m| stamp::first_lines(lang, bytes, m, record.lines))
            .collect();
        if found.is_empty() {
            return Edit::Keep(false);
        }
        Edit::Write(stamp::remove(bytes, &found.iter().collect::<Vec<_>>()), true)
    })
}

/// True if marker `m` of `src` is the recorded ask: it carries the ask's tag, or it is untagged
/// and its first `record.lines` lines read as the ask's text.
pub fn is_recorded(lang: &Language, src: &[u8], m: &Marker, record: &AskRecord) -> bool {
    match m.tag {
        Some(tag) => tag == record.id,
        None => stamp::first_lines(lang, src, m, record.lines).text == record.text,
    }
}

/// The markers of `path` (as a scan found them) with the recorded asks they are: a tagged
/// marker is its tag's ask; an untagged one is a recorded ask if its text matches one of
/// `records` (an editor's stale copy, or `--tag never`), and is then cut to the recorded lines.
pub fn with_records(
    scanner: &Scanner,
    path: &Path,
    markers: &[Marker],
    records: &[&AskRecord],
) -> Vec<(Marker, Option<MarkerId>)> {
    let untagged = markers.iter().any(|m| !m.is_tagged());
    let source = (untagged && !records.is_empty()).then(|| fsio::read_source(path).ok()).flatten();
    let lang = source.as_ref().and_then(|s| scanner.table().detect(path, &s.bytes));
    markers
        .iter()
        .map(|m| {
            let (Some(source), Some(lang), None) = (&source, lang, m.tag) else {
                return (m.clone(), m.tag);
            };
            match records.iter().find(|r| is_recorded(lang, &source.bytes, m, r)) {
                Some(r) => (stamp::first_lines(lang, &source.bytes, m, r.lines), Some(r.id)),
                None => (m.clone(), None),
            }
        })
        .collect()
}

/// `path` relative to `root`, `/`-separated (as asks name their file).
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}
