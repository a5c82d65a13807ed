//! Reading files safely: regular files only (never a FIFO, socket, device or symlink), with
//! size and binary checks, so one odd file in a tree can never block or crash a scan.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Files larger than this are skipped: nobody writes asks into generated megabyte blobs, and
/// it bounds the memory and parse time one save can cost.
pub const MAX_FILE_SIZE: u64 = 1024 * 1024;

/// A NUL byte in this many leading bytes marks a file as binary (the heuristic git and
/// ripgrep use).
pub const BINARY_SNIFF_LEN: usize = 8 * 1024;

/// Why a file was not read. Skips are normal in a tree walk; they are not errors.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: not a regular file ({kind})")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path}: {size} bytes is over the {MAX_FILE_SIZE}-byte limit")]
    TooLarge { path: PathBuf, size: u64 },
    #[error("{path}: binary file (NUL byte in the first {BINARY_SNIFF_LEN} bytes)")]
    Binary { path: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl ReadError {
    /// True for the skips a walk expects (odd file types, big or binary files), false for
    /// real I/O failures worth a warning.
    pub fn is_skip(&self) -> bool {
        !matches!(self, ReadError::Io { .. })
    }

    pub fn path(&self) -> &Path {
        match self {
            ReadError::NotRegular { path, .. }
            | ReadError::TooLarge { path, .. }
            | ReadError::Binary { path }
            | ReadError::Io { path, .. } => path,
        }
    }
}

/// A file's bytes as read, with the metadata of the very file descriptor they came from.
#[derive(Debug)]
pub struct Source {
    pub bytes: Vec<u8>,
    pub metadata: Metadata,
}

fn file_kind(meta: &Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return "symlink";
    }
    if ft.is_dir() {
        return "directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "fifo";
        }
        if ft.is_socket() {
            return "socket";
        }
        if ft.is_block_device() || ft.is_char_device() {
            return "device";
        }
    }
    "other"
}

/// Reads `path` if it is a regular file of at most [`MAX_FILE_SIZE`] bytes that does not look
/// binary. Never follows a symlink and never blocks on a FIFO: the type is checked with
/// `symlink_metadata` before opening, the open itself refuses symlinks and does not wait for
/// a FIFO writer (`O_NOFOLLOW | O_NONBLOCK`), and the opened descriptor is checked again in
/// case the path was swapped in between.
pub fn read_source(path: &Path) -> Result<Source, ReadError> {
    let io_err = |source: io::Error| ReadError::Io { path: path.to_path_buf(), source };
    let meta = std::fs::symlink_metadata(path).map_err(io_err)?;
    check_metadata(path, &meta)?;
    let file = open_no_follow(path).map_err(|e| {
        if is_symlink_refusal(&e) {
            ReadError::NotRegular { path: path.to_path_buf(), kind: "symlink" }
        } else {
            io_err(e)
        }
    })?;
    let meta = file.metadata().map_err(io_err)?;
    check_metadata(path, &meta)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    // Read one byte past the limit: a file that grew since the stat is caught here.
    file.take(MAX_FILE_SIZE + 1).read_to_end(&mut bytes).map_err(io_err)?;
    if bytes.len() as u64 > MAX_FILE_SIZE {
        return Err(ReadError::TooLarge { path: path.to_path_buf(), size: bytes.len() as u64 });
    }
    if looks_binary(&bytes) {
        return Err(ReadError::Binary { path: path.to_path_buf() });
    }
    Ok(Source { bytes, metadata: meta })
}

/// True if the first [`BINARY_SNIFF_LEN`] bytes hold a NUL.
pub fn looks_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(BINARY_SNIFF_LEN)]).is_some()
}

fn check_metadata(path: &Path, meta: &Metadata) -> Result<(), ReadError> {
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular { path: path.to_path_buf(), kind: file_kind(meta) });
    }
    if meta.len() > MAX_FILE_SIZE {
        return Err(ReadError::TooLarge { path: path.to_path_buf(), size: meta.len() });
    }
    Ok(())
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// `open(O_NOFOLLOW)` on a symlink fails with ELOOP.
fn is_symlink_refusal(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_regular_files_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("a.py"), "# @claude hi\n").unwrap();
        assert_eq!(read_source(&p.join("a.py")).unwrap().bytes, b"# @claude hi\n");

        std::fs::write(p.join("bin.py"), b"x\0y").unwrap();
        assert!(matches!(read_source(&p.join("bin.py")), Err(ReadError::Binary { .. })));

        std::fs::write(p.join("big.py"), vec![b'a'; MAX_FILE_SIZE as usize + 1]).unwrap();
        assert!(matches!(read_source(&p.join("big.py")), Err(ReadError::TooLarge { .. })));

        std::fs::write(p.join("ok.py"), vec![b'a'; MAX_FILE_SIZE as usize]).unwrap();
        assert!(read_source(&p.join("ok.py")).is_ok());

        std::fs::write(p.join("bad-utf8.py"), b"# \xff\xfe @claude x\n").unwrap();
        assert!(read_source(&p.join("bad-utf8.py")).is_ok());

        assert!(matches!(read_source(p), Err(ReadError::NotRegular { kind: "directory", .. })));
        let missing = read_source(&p.join("missing.py")).unwrap_err();
        assert!(!missing.is_skip());
        assert!(missing.to_string().contains("missing.py"), "{missing}");
    }

    #[cfg(unix)]
    #[test]
    fn never_follows_symlinks_or_opens_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("target.py"), "# @claude hi\n").unwrap();
        std::os::unix::fs::symlink(p.join("target.py"), p.join("link.py")).unwrap();
        assert!(matches!(
            read_source(&p.join("link.py")),
            Err(ReadError::NotRegular { kind: "symlink", .. })
        ));

        let fifo = p.join("pipe.py");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        // Would block forever if opened; must come back at once.
        assert!(matches!(read_source(&fifo), Err(ReadError::NotRegular { kind: "fifo", .. })));
    }
}
