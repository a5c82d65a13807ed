//! The user's state directory, where each root and trigger keeps its owner lock, its owner
//! record and its ask ledger — never in the working tree. It is trusted no more than the tree:
//! its files are opened without following a symlink or waiting for a FIFO's writer, must be
//! regular files, and are read up to a size limit, so that a FIFO, a device or a symlink to
//! `/dev/zero` planted there is an error that names it, not a hang or a gigabyte read.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::lines::{fnv1a, fnv1a_from};
use crate::scan::DEFAULT_TRIGGER;
use crate::sys;

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

/// Why no state directory: the message [`no_state_dir`] gives.
const NO_STATE_DIR: &str =
    "no state directory: neither FILEWATCH_STATE_DIR, XDG_STATE_HOME, HOME nor LOCALAPPDATA is set";

/// The error for a process without a state directory.
pub(crate) fn no_state_dir() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, NO_STATE_DIR)
}

/// Where the state of one root and one trigger lives: `<dir>/<key>.<what>`. Two triggers on a
/// root are two audiences (`watch --trigger @bob` beside a Claude session), so each has its own
/// owner and ledger.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    dir: PathBuf,
    key: String,
}

impl Place {
    /// The place of `root` (canonical) and `trigger` in the state directory `dir`.
    pub(crate) fn new(dir: &Path, root: &Path, trigger: &str) -> Place {
        Place { dir: dir.to_path_buf(), key: format!("{:016x}", key_hash(root, trigger)) }
    }

    /// The place of what belongs to `root` whatever the trigger (the editor's habits).
    pub(crate) fn of_root(dir: &Path, root: &Path) -> Place {
        Place::new(dir, root, DEFAULT_TRIGGER)
    }

    /// The key of the root and trigger: what names their files (`<key>.owner.lock`, …).
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The state directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file `<key>.<what>` (`owner.lock`, `asks.jsonl`, …).
    pub(crate) fn file(&self, what: &str) -> PathBuf {
        self.dir.join(format!("{}.{what}", self.key))
    }

    /// Makes the state directory if it is missing (on Unix for this user alone, mode 0700).
    pub(crate) fn make_dir(&self) -> io::Result<()> {
        make_private_dir(&self.dir)
    }
}

/// Makes `dir` (and its parents) if it is missing, on Unix for this user alone (mode 0700).
pub(crate) fn make_private_dir(dir: &Path) -> io::Result<()> {
    sys::create_dir_private(dir)
}

/// A hash of the root's path and the trigger that is the same in every run and every build
/// (FNV-1a; std's `DefaultHasher` may change between Rust versions), so that a restarted
/// server finds its state. The default trigger's is the root's alone, as it was before
/// triggers had state of their own: a server of the version before shares its owner lock.
fn key_hash(root: &Path, trigger: &str) -> u64 {
    let h = fnv1a(root.as_os_str().as_encoded_bytes());
    if trigger == DEFAULT_TRIGGER {
        return h;
    }
    // A NUL is in no path: no root and trigger run into another pair's bytes.
    fnv1a_from(fnv1a_from(h, b"\0"), trigger.as_bytes())
}

/// Opens the state file at `path` for reading and writing, made (for this user alone) if
/// missing: never through a symlink, never waiting for a FIFO's writer, and only if it is a
/// regular file. Errors name what was found (`not a regular file (fifo)`).
pub(crate) fn open(path: &Path) -> io::Result<File> {
    regular(sys::open_state(path))
}

/// Opens the existing state file at `path` for reading, with [`open`]'s care; `NotFound` if
/// there is none.
pub(crate) fn open_existing(path: &Path) -> io::Result<File> {
    regular(sys::open_read(path))
}

/// The file an open gave, if it is a regular file; a refused open (a symlink, a FIFO) or
/// anything else found is an error naming what it was.
fn regular(opened: io::Result<File>) -> io::Result<File> {
    let file = opened.map_err(|e| match sys::refusal_kind(&e) {
        Some(kind) => not_regular(kind),
        None => e,
    })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(crate::fsio::file_kind(&meta)));
    }
    Ok(file)
}

/// The rest of `file`, at most `max` bytes: more is an error (a file this program did not
/// write), never read on.
pub(crate) fn read_at_most(file: &mut File, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("over {max} bytes: not a file this program wrote"),
        ));
    }
    Ok(bytes)
}

fn not_regular(kind: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({kind}); state files are never followed or read through"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_root_and_trigger_has_a_place_of_its_own() {
        let dir = Path::new("/state");
        let (a, b) = (Path::new("/src/a"), Path::new("/src/b"));
        let name = |root, trigger| Place::new(dir, root, trigger).file("owner.lock");
        assert_ne!(name(a, "@claude"), name(b, "@claude"));
        assert_ne!(name(a, "@claude"), name(a, "@bob"));
        assert_eq!(name(a, "@bob"), name(a, "@bob"));
        // The default trigger's key is the one the version before gave the root (FNV-1a).
        let fnv =
            a.as_os_str().as_encoded_bytes().iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        assert_eq!(name(a, DEFAULT_TRIGGER), dir.join(format!("{fnv:016x}.owner.lock")));
    }

    /// A FIFO, a symlink (to `/dev/zero`, say) or a directory where a state file belongs is
    /// refused at once, by name, and never read.
    #[cfg(unix)]
    #[test]
    fn odd_files_are_refused_without_waiting_or_reading() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        for (path, kind) in [(&fifo, "fifo"), (&zero, "symlink")] {
            for e in [open(path).unwrap_err(), open_existing(path).unwrap_err()] {
                assert!(e.to_string().contains(&format!("({kind})")), "{}: {e}", path.display());
            }
        }
        assert!(open(&sub).is_err());
        let e = open_existing(&sub).unwrap_err();
        assert!(e.to_string().contains("(directory)"), "{e}");
        let plain = dir.path().join("plain");
        std::fs::write(&plain, vec![b'x'; 100]).unwrap();
        let err = read_at_most(&mut open(&plain).unwrap(), 99).unwrap_err();
        assert!(err.to_string().contains("over 99 bytes"), "{err}");
        assert_eq!(read_at_most(&mut open(&plain).unwrap(), 100).unwrap().len(), 100);
    }
}
