//! The one-shot pipeline behind `scan`: walk → safe read → language → scan, over many files
//! in parallel. Writes nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::fsio::{self, ReadError};
use crate::languages::{Language, LanguageTable};
use crate::scan::{Marker, Scanner};
use crate::walk;

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
    let explicit: Vec<&PathBuf> =
        paths.iter().filter(|p| !std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())).collect();
    let files: Vec<PathBuf> = walk::files(paths, threads)
        .into_iter()
        .filter(|p| explicit.contains(&p) || may_have_language(scanner.table(), p))
        .collect();
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
