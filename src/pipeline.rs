//! The one-shot pipelines behind `scan`, `stamp`, `resolve` and the server's tools: walk → safe
//! read → language → scan → stamp or resolve → checked atomic replace. The live one is in
//! [`crate::live`].

use std::cell::LazyCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::asks::AskRecord;
use crate::error::Problem;
use crate::fsio::{self, ReadError, WriteError};
use crate::git;
use crate::id::{uuid_random, MarkerId};
use crate::languages::{Language, LanguageTable};
use crate::lines::HeldLines;
use crate::pairing::{self, InFile};
use crate::scan::{Marker, NearMiss, Scanner};
use crate::stamp::{self, ResolveError};
use crate::walk::{self, Listing};

/// How often a stamp or resolve is tried again when the user's write gets in between.
pub const WRITE_ATTEMPTS: usize = 5;

/// How long a stamp or resolve waits for another program to close a file it has open for
/// writing (an editor saving in several writes; a copy of a descriptor that lives in a forked
/// child until its exec) before it gives up with [`WriteError::Busy`].
const WRITER_CLOSE_WAIT: Duration = Duration::from_secs(2);

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
    /// Files read and searched for the trigger (walked files in no language count too: the
    /// trigger is looked for before the language).
    pub scanned: usize,
    /// Files skipped or failed, with the reason, sorted by path. Walked files are checked for
    /// being binary only when they hold the trigger, and the read failures of walked files no
    /// language claims are not reported.
    pub errors: Vec<ReadError>,
    /// Parts of the tree that could not be listed (unreadable directories).
    pub unlisted: Vec<ignore::Error>,
}

impl ScanReport {
    fn absorb(&mut self, other: ScanReport) {
        self.files.extend(other.files);
        self.scanned += other.scanned;
        self.errors.extend(other.errors);
        self.unlisted.extend(other.unlisted);
    }

    fn count(&mut self, path: &Path, result: Result<Option<Vec<Marker>>, ReadError>) {
        match result {
            Ok(Some(markers)) => {
                self.scanned += 1;
                if !markers.is_empty() {
                    self.files.push(FileMarkers { path: path.to_path_buf(), markers });
                }
            }
            Ok(None) => self.scanned += 1,
            Err(e) => self.errors.push(e),
        }
    }
}

/// Reads and scans one file. `Ok(None)` means the file is in no known language.
pub fn scan_file(scanner: &Scanner, path: &Path) -> Result<Option<Vec<Marker>>, ReadError> {
    let source = fsio::read_source(path)?;
    let Some(lang) = scanner.table().detect(path, &source.bytes) else {
        return Ok(None);
    };
    Ok(Some(scanner.scan(lang, &source.bytes)))
}

/// Scans one walked file the way ripgrep searches: read into the thread's reused buffer, the
/// trigger looked for in the bytes, and only a file that holds it checked for being binary,
/// matched to a language and parsed. `Ok(None)`: no trigger, or no language.
fn scan_listed(
    scanner: &Scanner,
    path: &Path,
    buf: &mut fsio::ReadBuffer,
) -> Result<Option<Vec<Marker>>, ReadError> {
    let bytes = match buf.read_listed_holding(path, scanner.finder()) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        // A file no language claims is none of the scan's business: that it cannot be read
        // (someone's private key, say) is no failure. Its name is looked at only then, so a
        // file is searched before any lookup of its language.
        Err(e) if !e.is_skip() && !scanner.table().may_claim(path) => return Ok(None),
        Err(e) => return Err(e),
    };
    if fsio::looks_binary(bytes) {
        return Err(ReadError::Binary { path: path.to_path_buf() });
    }
    let Some(lang) = scanner.table().detect(path, bytes) else {
        return Ok(None);
    };
    Ok(Some(scanner.scan(lang, bytes)))
}

/// One walker thread's share of a scan: its read buffer and what it found.
#[derive(Default)]
struct ScanPart {
    buf: fsio::ReadBuffer,
    report: ScanReport,
}

/// Scans every file under `paths` (files named directly are always scanned) on `threads`
/// threads. The tree is walked and scanned in one pass, each thread reading into its own
/// buffer; only the hits are kept, and sorted at the end.
pub fn scan_paths(scanner: &Scanner, paths: &[PathBuf], threads: usize) -> ScanReport {
    let threads = threads.max(1);
    let mut report = ScanReport::default();
    for path in paths {
        if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            report.count(path, scan_file(scanner, path));
            continue;
        }
        let parts =
            walk::visit_files(path, threads, ScanPart::default, |part, entry| match entry {
                Ok(file) => {
                    let result = scan_listed(scanner, file.path(), &mut part.buf);
                    part.report.count(file.path(), result);
                }
                Err(err) => part.report.unlisted.push(err),
            });
        for part in parts {
            report.absorb(part.report);
        }
    }
    report.files.sort_by(|a, b| a.path.cmp(&b.path));
    report.errors.sort_by(|a, b| a.path().cmp(b.path()));
    read_as_the_server_does(scanner, &mut report.files);
    report
}

/// The comments that almost hold an ask ([`Scanner::near_misses`]) in each file under `paths`
/// in a known language, for `scan --verbose`. A file that cannot be read is skipped: saying so
/// is the scan's part.
pub fn near_misses(
    scanner: &Scanner,
    paths: &[PathBuf],
    threads: usize,
) -> Vec<(PathBuf, Vec<NearMiss>)> {
    let listing = candidate_files(scanner.table(), paths, threads);
    let near = |path: &PathBuf| {
        let source = fsio::read_source(path).ok()?;
        if fsio::looks_binary(&source.bytes) {
            return None;
        }
        let lang = scanner.table().detect(path, &source.bytes)?;
        let misses = scanner.near_misses(lang, &source.bytes);
        (!misses.is_empty()).then(|| (path.clone(), misses))
    };
    listing.files.iter().filter_map(near).collect()
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

impl EditError {
    /// The error with its path as `shown` names it (see [`crate::sys::Beneath::shown`]).
    fn shown_as(self, shown: impl Fn(&Path) -> PathBuf) -> EditError {
        match self {
            EditError::Read(e) => EditError::Read(e.shown_as(shown)),
            EditError::Write(e) => EditError::Write(e.shown_as(shown)),
            EditError::Busy { path, attempts } => EditError::Busy { path: shown(&path), attempts },
        }
    }
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
    let committed = Committed::new(|| git::head_lines_of(path));
    edit_file(path, attempts, |bytes| {
        let Some(lang) = scanner.table().detect(path, bytes) else {
            return Edit::Keep(Vec::new());
        };
        let markers = scanner.scan(lang, bytes);
        let stamps = stamp::plan(bytes, &markers, uuid_random);
        let untagged = markers.iter().filter(|m| !m.is_tagged());
        let asks: Vec<Marker> = untagged
            .zip(&stamps)
            .map(|(m, s)| Marker {
                tag: Some(s.id),
                ..without_committed_lines(lang, bytes, m, &committed)
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
    let committed = Committed::new(|| git::head_lines_of(path));
    edit_file(path, attempts, |bytes| {
        if memchr::memmem::find(bytes, tag.as_bytes()).is_none() {
            return Edit::Keep(false);
        }
        let Some(lang) = scanner.table().detect(path, bytes) else {
            return Edit::Keep(false);
        };
        let markers: Vec<Marker> = scanner
            .scan(lang, bytes)
            .into_iter()
            .filter(|m| m.tag == Some(id))
            .map(|m| without_committed_lines(lang, bytes, &m, &committed))
            .collect();
        match stamp::resolve(bytes, &markers, id) {
            Ok(resolved) => Edit::Write(resolved, true),
            // The tag's bytes are there but not as a marker (inside a string, say).
            Err(ResolveError::UnknownId(_)) => Edit::Keep(false),
        }
    })
}

/// The lines of a file that git holds at `HEAD`, asked of git at most once, and only when a
/// paragraph is to be cut.
type Committed<F> = LazyCell<HeldLines, F>;

/// The marker as every one-shot path reads it (`scan`, `stamp`, `list_asks`, a resolve): only
/// the lines written with it ([`stamp::written_with`]), never a continuation line that is in
/// the file's `HEAD` (a licence header the ask was written above; a committed line that moved
/// up when the user deleted one of the ask's lines) — whatever a record says.
fn without_committed_lines(
    lang: &Language,
    src: &[u8],
    m: &Marker,
    committed: &Committed<impl FnOnce() -> HeldLines>,
) -> Marker {
    stamp::written_with(lang, src, m, |line| committed.contains(line))
}

/// The markers of `files` as the server reads them ([`without_committed_lines`]): a file with
/// a paragraph marker is read (and scanned) again and its lines at `HEAD` asked of git (its
/// readers started once per repository, for the whole scan); the others are as scanned.
fn read_as_the_server_does(scanner: &Scanner, files: &mut [FileMarkers]) {
    let mut git = git::GitLines::new();
    for f in files.iter_mut().filter(|f| f.markers.iter().any(|m| m.end_line > m.line)) {
        let Ok(source) = fsio::read_source(&f.path) else { continue };
        let Some(lang) = scanner.table().detect(&f.path, &source.bytes) else { continue };
        let committed = Committed::new(|| HeldLines::new(git.head_lines(&[f.path.as_path()])));
        let bytes = &source.bytes;
        let markers = scanner.scan(lang, bytes).into_iter();
        f.markers = markers.map(|m| without_committed_lines(lang, bytes, &m, &committed)).collect();
    }
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
/// up to `attempts` times. While another program has the file open for writing, it waits (up to
/// [`WRITER_CLOSE_WAIT`]) for the close, then reads the file again.
fn edit_file<T>(
    path: &Path,
    attempts: usize,
    mut edit: impl FnMut(&[u8]) -> Edit<T>,
) -> Result<T, EditError> {
    let busy_until = Instant::now() + WRITER_CLOSE_WAIT;
    let mut attempt = 0;
    while attempt < attempts {
        let source = fsio::read_source(path)?;
        let (new, result) = match edit(&source.bytes) {
            Edit::Keep(result) => return Ok(result),
            Edit::Write(new, result) => (new, result),
        };
        // One file under several names: taken out of in place (a new file would split them).
        let linked = crate::sys::link_count(path, &source.metadata).is_ok_and(|n| n > 1);
        let written = if linked && new.len() < source.bytes.len() {
            fsio::shrink_in_place(path, &source.bytes, &new)
        } else {
            fsio::replace_checked(path, &source.bytes, &new)
        };
        match written {
            Ok(()) => return Ok(result),
            Err(WriteError::Conflict { .. }) => attempt += 1,
            // No event tells a one-shot edit when the writer closes: wait for it, then read the
            // file again (the writer may have changed it).
            Err(WriteError::Busy { .. }) if fsio::wait_closed(path, busy_until) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(EditError::Busy { path: path.to_path_buf(), attempts })
}

/// Removes the marker(s) tagged `id` from every file under `paths` that holds it; returns those
/// files (none: the id is unknown). Files that cannot be read are skipped (and logged); a
/// failed write stops.
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
            // Someone else's file, a FIFO, a file too large: none of this ask's business.
            Err(EditError::Read(e)) => Problem::Read(e).log(),
            Err(e) => return Err(e),
        }
    }
    Ok(resolved)
}

/// Removes the recorded ask `record` from its file under `root`: found by its id's tag, or —
/// when an editor's stale buffer wrote the marker back without its tag, with `--tag never`, or
/// before its tag was written — by its recorded text, the copy nearest its recorded line (the
/// one rule of [`pairing`]); and exactly the lines that were announced, never one more.
/// `Ok(false)` if the file no longer holds it.
pub fn resolve_recorded(
    scanner: &Scanner,
    root: &Path,
    record: &AskRecord,
) -> Result<bool, EditError> {
    // Reached without following a symlink in any directory of its path, as the live pipeline
    // reads it.
    let Some(real) = crate::relpath::resolve(root, &record.file) else { return Ok(false) };
    let rel = real.strip_prefix(root).unwrap_or(&real);
    let (Some(rel_dir), Some(name)) = (rel.parent(), rel.file_name()) else { return Ok(false) };
    let Ok(beneath) = crate::sys::dir_beneath(root, rel_dir) else { return Ok(false) };
    let path = beneath.path(name);
    let real = root.join(rel); // what git knows the file by
    let committed = Committed::new(|| git::head_lines_of(&real));
    let edited = edit_file(&path, WRITE_ATTEMPTS, |bytes| {
        let Some(lang) = scanner.table().detect(&path, bytes) else {
            return Edit::Keep(false);
        };
        let markers = scanner.scan(lang, bytes);
        let found: Vec<Marker> =
            pairing::markers_of(&InFile::new(lang, bytes, &record.file, &markers), record)
                .into_iter()
                .map(|m| without_committed_lines(lang, bytes, &m, &committed))
                .collect();
        if found.is_empty() {
            return Edit::Keep(false);
        }
        Edit::Write(stamp::remove(bytes, &found.iter().collect::<Vec<_>>()), true)
    });
    // Said to Claude and the log: the user's path, not the held directory's.
    edited.map_err(|e| e.shown_as(|p| beneath.shown(p)))
}

/// The markers of `path` (as a scan found them; `file` is its name relative to the root) with
/// the recorded asks they are, paired with `records` by the one rule of [`pairing`]: a tagged
/// marker is its tag's ask; an untagged one that is a pending record's copy is that ask, cut
/// to the recorded lines.
pub fn with_records(
    scanner: &Scanner,
    path: &Path,
    file: &str,
    markers: &[Marker],
    records: &[AskRecord],
) -> Vec<(Marker, Option<MarkerId>)> {
    let untagged = markers.iter().any(|m| !m.is_tagged());
    let source = (untagged && !records.is_empty()).then(|| fsio::read_source(path).ok()).flatten();
    let lang = source.as_ref().and_then(|s| scanner.table().detect(path, &s.bytes));
    match (&source, lang) {
        (Some(source), Some(lang)) => {
            pairing::listed(&InFile::new(lang, &source.bytes, file, markers), records)
        }
        _ => markers.iter().map(|m| (m.clone(), m.tag)).collect(),
    }
}

/// `path` relative to `root`, `/`-separated (as asks name their file).
pub fn relative(root: &Path, path: &Path) -> String {
    crate::relpath::relative(root, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file another program has open for writing for a moment (an editor's save in several
    /// writes, a copy of a descriptor in a child between its fork and its exec) is resolved
    /// once it is closed, not refused; one held open for good is refused with a clear error
    /// and left as it is.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_resolve_waits_out_a_writer_that_closes_soon() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.py");
        let scanner = Scanner::new(LanguageTable::builtin(), crate::DEFAULT_TRIGGER).unwrap();
        let id: MarkerId = "fw-0000abcd".parse().unwrap();
        let tagged = "x = 1\n# @claude[fw-0000abcd] hi\n";
        let mut writer = std::fs::File::create(&p).unwrap();
        writer.write_all(tagged.as_bytes()).unwrap();
        let (held, release) = std::sync::mpsc::channel::<()>();
        let closer = std::thread::spawn(move || {
            let _ = release.recv_timeout(std::time::Duration::from_millis(200));
            drop(writer);
        });
        let resolved = resolve_file(&scanner, &p, id, WRITE_ATTEMPTS);
        drop(held);
        closer.join().unwrap();
        assert!(matches!(resolved, Ok(true)), "{resolved:?}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x = 1\n");

        crate::test_support::write(&p, tagged).unwrap();
        let _forever = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        let refused = resolve_file(&scanner, &p, id, WRITE_ATTEMPTS);
        assert!(matches!(refused, Err(EditError::Write(WriteError::Busy { .. }))), "{refused:?}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), tagged);
    }

    /// The committed file of the two resolve tests below: a licence header, then code.
    const LICENCE: &str = "# Copyright 2024 Alice\n# SPDX-License-Identifier: MIT\nx = 1\n";

    /// A repository whose `m.py` holds [`LICENCE`], committed: the temp dir, its root, the file.
    fn licence_repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
        use crate::test_support::{git_in, write};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        git_in(&root, &["init", "-q"]);
        let p = root.join("m.py");
        write(&p, LICENCE).unwrap();
        git_in(&root, &["add", "."]);
        git_in(&root, &["commit", "-qm", "licence"]);
        (dir, root, p)
    }

    /// An ask written right above a committed licence header, resolved where no record of it
    /// exists (another session, a restarted server, the CLI): only the ask goes, every line of
    /// `HEAD` stays.
    #[test]
    fn a_resolve_without_a_record_keeps_the_lines_of_head() {
        use crate::test_support::write;
        let (_dir, root, p) = licence_repo();
        let committed = LICENCE;
        let scanner = Scanner::new(LanguageTable::builtin(), crate::DEFAULT_TRIGGER).unwrap();
        write(&p, format!("# @claude explain the licence\n{committed}")).unwrap();
        let stamped = stamp_file(&scanner, &p, false, WRITE_ATTEMPTS).unwrap();
        let id = stamped[0].tag.unwrap();
        let files = resolve_in_tree(&scanner, std::slice::from_ref(&root), id, 1).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), committed, "a committed line went");
    }

    /// A two-line ask whose second line the user deleted afterwards: resolving by its record
    /// (two lines) must not take the committed line that moved up in its place.
    #[test]
    fn a_resolve_by_record_keeps_the_lines_of_head() {
        use crate::test_support::write;
        let (_dir, root, p) = licence_repo();
        let committed = LICENCE;
        let scanner = Scanner::new(LanguageTable::builtin(), crate::DEFAULT_TRIGGER).unwrap();
        let id: MarkerId = "fw-0000abcd".parse().unwrap();
        let record = AskRecord {
            id,
            file: "m.py".into(),
            text: "@claude explain\nthe licence".into(),
            lines: 2,
            line: 1,
            anchor: 0,
            announced: crate::asks::now(),
            resolved: None,
            heard: None,
            unsent: false,
        };
        // The user deleted the ask's second line after it was announced.
        write(&p, format!("# @claude[fw-0000abcd] explain\n{committed}")).unwrap();
        assert!(resolve_recorded(&scanner, &root, &record).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), committed, "a committed line went");
    }

    /// A tree scanned on several threads, each reusing one buffer: exactly the files with
    /// markers come back, sorted, each with its own markers (a long file read before a short
    /// one leaves nothing behind), and no hard-excluded, binary or language-less file is
    /// reported as a hit.
    #[test]
    fn a_parallel_scan_keeps_only_the_hits_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |rel: &str, bytes: &[u8]| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        };
        let mut want = Vec::new();
        for d in 0..20 {
            for f in 0..15 {
                let rel = format!("d{d:02}/f{f:02}.py");
                if (d * 15 + f) % 7 == 0 {
                    write(&rel, format!("x = 1\n# @claude ask {d} {f}\n").as_bytes());
                    want.push((rel, format!("@claude ask {d} {f}")));
                } else {
                    write(&rel, b"x = 1\n");
                }
            }
        }
        // Markers far into a long file: a buffer reused without care would show them again
        // in the short files read after it.
        let mut long = "x = 1\n".repeat(20_000);
        long.push_str("# @claude at the end\n");
        write("d05/long.py", long.as_bytes());
        want.push(("d05/long.py".into(), "@claude at the end".into()));
        want.sort();
        write("node_modules/dep/x.js", b"// @claude excluded\n");
        write("image.png", b"@claude in no language\n");
        write("bin.py", b"# @claude\0 binary\n");
        write("nul-no-trigger.py", b"\0\0\0");

        let table = LanguageTable::builtin();
        let scanner = Scanner::new(table, "@claude").unwrap();
        let report = scan_paths(&scanner, &[root.to_path_buf()], 4);
        let got: Vec<(String, String)> = report
            .files
            .iter()
            .flat_map(|f| {
                let rel = relative(root, &f.path);
                f.markers.iter().map(move |m| (rel.clone(), m.text.clone()))
            })
            .collect();
        assert_eq!(got, want);
        assert!(report.unlisted.is_empty(), "{:?}", report.unlisted);
        let errors: Vec<String> = report.errors.iter().map(|e| relative(root, e.path())).collect();
        assert_eq!(errors, ["bin.py"]);
        assert!(report.errors.iter().all(ReadError::is_skip));
    }
}
