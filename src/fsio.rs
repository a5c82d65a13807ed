//! Reading files safely (regular files only — never a FIFO, socket, device or symlink — with
//! size and binary checks) and replacing them atomically without ever losing a user's write,
//! and without anyone seeing an older version than the one at the path.
//!
//! # The checked replace ([`replace_checked`])
//!
//! 1. The file at the path (X) is opened and held. If anyone has it open for writing (a read
//!    lease is refused, Linux), nothing is done: [`WriteError::Busy`].
//! 2. The new bytes go to a temp file of ours (N) in the same directory, with X's owner, mode
//!    and extended attributes, synced. On Linux N has no name until it is whole (`O_TMPFILE`);
//!    its name then carries our pid, its own inode number and a checksum of X's bytes, so that
//!    the next owner can tell it — and only it — from anything else if we are killed (see
//!    `temp.rs`). Names are cut to fit 255 bytes whatever the file's name.
//! 3. A read lease is taken on X, and X's bytes are compared with the ones scanned: a write to
//!    X from now on breaks the lease.
//! 4. A write lease is taken on N (Linux): from the moment N is at the path until we know it
//!    stays, whoever opens it waits in `open(2)`.
//! 5. The last look, just before the exchange: the path still names X (device and inode — a
//!    save renamed over the path during steps 2-4 is found here: no lease sees a rename), X's
//!    lease is unbroken, and (for a file reached through a directory held open) that directory
//!    is still where it was. Otherwise nothing is done: [`WriteError::Conflict`]. This is the
//!    exchange "not happening" whenever anything can tell it should not.
//! 6. The exchange: `renameat2(RENAME_EXCHANGE)` (Linux), `renamex_np(RENAME_SWAP)` (macOS),
//!    `ReplaceFileW` with a backup name (Windows). What was at the path is still in hand.
//! 7. If what came out is X, its lease unbroken and its directory in place, X is removed and
//!    N's lease given up: done. If it is a newer file of the user's (a save that slipped into
//!    the instant between 5 and 6 — in a burst of saves the next one follows within
//!    microseconds), N, which nobody has read yet, becomes that file: its bytes, owner, mode,
//!    extended attributes and times, synced; then that file's inode goes and the lease with it.
//!    There is no second rename for the next save to race, and whatever the user does to the
//!    path meanwhile (saves again, deletes, moves) happens to the right bytes. Anything else
//!    (a directory, a symlink, X with a writer waiting, a directory moved out of the root, a
//!    file with other links or open for writing, no lease) is put back by a second exchange —
//!    only if the path still holds N, or holds nothing (the user deleted N:
//!    theirs goes back, with `RENAME_NOREPLACE`); if the user put something newer there, what
//!    was displaced stays at our temp name, and the error says where. Whoever opened N while it
//!    was at the path is still waiting on its lease (and an `open` that looked the path up then
//!    may reach N later still): N first becomes a copy of the file put back, so that they read
//!    that one, as if they had opened it. Then the leases go.
//!
//! # What a reader can see
//!
//! On Linux, with leases (a local file system, a file of ours): the path holds X, then N (the
//! same bytes plus the tag) — never an older version than the last one written or renamed
//! there. A save made while the stamp runs makes step 5 fail; one made in the microsecond
//! between 5 and 6 is undone in step 7 before anyone who opened the path can read a byte.
//!
//! What remains, and why it cannot be closed from user space: a rename onto a path cannot be
//! conditional on what the path holds (no system call compares and exchanges directory
//! entries, and leases are broken by opens and truncates, never by a rename over the name), so
//! the instant between step 5 and step 6 exists. In that instant:
//! - a program that only looks at the path without opening it (`stat`, `ls`, `make`'s mtime
//!   check) can see N's size and times for the microseconds until the undo;
//! - an `open(O_NONBLOCK)` of N fails with `EWOULDBLOCK` instead of waiting;
//! - where the undo needs its second exchange, a program that opens the path *for writing* in
//!   those microseconds writes, once let go, into N, which has left the path: that write is
//!   lost (two races at once). Where N becomes the save, N stays and the write lands in it;
//! - a directory or symlink put at the path there is seen as N by anyone who opens it then,
//!   since there is no file to copy for them;
//! - where the undo needs its second exchange (a directory or symlink displaced, no lease), a
//!   save renamed over N in the instant between the undo's look at the path and that exchange
//!   puts the displaced thing back over it for the microseconds until it is swapped again.
//!
//! Without leases (macOS, Windows, network and FUSE file systems, `fs.leases-enable=0`) steps
//! 1, 3 and 4 tell nothing: the content
//! check, the last look and the undo still hold, and a reader that opens the path in the
//! microseconds between the exchange and its undo reads N. A write through a descriptor
//! opened before the exchange is caught by reading X once more after it is unlinked, and
//! restored.

use std::fs::{File, Metadata};
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sys;

mod in_place;
mod temp;

pub use in_place::shrink_in_place;
use temp::Temp;
pub use temp::{remove_leftovers_in, Leftovers};

/// Files larger than this are skipped: nobody writes asks into generated megabyte blobs, and
/// it bounds the memory and parse time one save can cost.
pub const MAX_FILE_SIZE: u64 = 1024 * 1024;

/// A NUL byte in this many leading bytes marks a file as binary (the heuristic git and
/// ripgrep use).
pub const BINARY_SNIFF_LEN: usize = 8 * 1024;

/// Why a file was not read. Skips are normal in a tree walk; they are not errors.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs)] // each variant's fields are the path and what its message says
pub enum ReadError {
    /// A directory, symlink, FIFO, socket or device.
    #[error("{path}: not a regular file ({kind})")]
    NotRegular { path: PathBuf, kind: &'static str },
    /// Over [`MAX_FILE_SIZE`].
    #[error("{path}: {size} bytes is over the {MAX_FILE_SIZE}-byte limit")]
    TooLarge { path: PathBuf, size: u64 },
    /// A NUL byte near the start.
    #[error("{path}: binary file (NUL byte in the first {BINARY_SNIFF_LEN} bytes)")]
    Binary { path: PathBuf },
    /// The OS said no.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl ReadError {
    /// True for the skips a walk expects (odd file types, big or binary files), false for
    /// real I/O failures worth a warning.
    pub fn is_skip(&self) -> bool {
        !matches!(self, ReadError::Io { .. })
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ReadError::NotRegular { path, .. }
            | ReadError::TooLarge { path, .. }
            | ReadError::Binary { path }
            | ReadError::Io { path, .. } => path,
        }
    }

    /// The error with its path as `shown` names it (the user's path for a file read through a
    /// held directory: see [`sys::Beneath::shown`]).
    pub fn shown_as(mut self, shown: impl Fn(&Path) -> PathBuf) -> ReadError {
        let (ReadError::NotRegular { path, .. }
        | ReadError::TooLarge { path, .. }
        | ReadError::Binary { path }
        | ReadError::Io { path, .. }) = &mut self;
        *path = shown(path);
        self
    }
}

/// A file's bytes as read, with the metadata of the very file descriptor they came from.
#[derive(Debug, Clone)]
pub struct Source {
    /// The whole file.
    pub bytes: Vec<u8>,
    /// Its metadata, from the descriptor the bytes were read through.
    pub metadata: Metadata,
}

/// What `meta` is, in a word: `symlink`, `directory`, `fifo`, `socket`, `device`, `other`.
pub(crate) fn file_kind(meta: &Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return "symlink";
    }
    if ft.is_dir() {
        return "directory";
    }
    sys::special_kind(&ft).unwrap_or("other")
}

/// Reads `path` if it is a regular file of at most [`MAX_FILE_SIZE`] bytes that does not look
/// binary. Never follows a symlink and never blocks on a FIFO: the type is checked with
/// `symlink_metadata` before opening, the open itself refuses symlinks and does not wait for
/// a FIFO writer (`O_NOFOLLOW | O_NONBLOCK`; on Windows it opens the reparse point itself and
/// only disk files), and the opened descriptor is checked again in case the path was swapped
/// in between.
pub fn read_source(path: &Path) -> Result<Source, ReadError> {
    let io_err = |source: io::Error| ReadError::Io { path: path.to_path_buf(), source };
    let meta = std::fs::symlink_metadata(path).map_err(io_err)?;
    check_metadata(path, &meta)?;
    let file = open_read_after_leases(path).map_err(|e| match sys::refusal_kind(&e) {
        Some(kind) => ReadError::NotRegular { path: path.to_path_buf(), kind },
        None => io_err(e),
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

/// How long a read waits for a write lease to be let go: a stamp holds one on its new file
/// from the exchange until it is finished (microseconds; longer on a loaded machine), and an
/// `open(O_NONBLOCK)` meanwhile fails with `EWOULDBLOCK` instead of waiting.
const LEASE_WAIT: Duration = Duration::from_millis(500);

/// [`sys::open_read`], tried again while another stamp holds a write lease on the file (another
/// filewatch process's, or this one's on another thread): such a file is not gone, and its save
/// must not be missed.
fn open_read_after_leases(path: &Path) -> io::Result<File> {
    let deadline = std::time::Instant::now() + LEASE_WAIT;
    loop {
        match sys::open_read(path) {
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            opened => return opened,
        }
    }
}

/// Files up to this size are read whole in one call; longer ones are searched this many
/// bytes at a time and read whole only when they hold what is looked for (ripgrep's buffer
/// size too).
const WINDOW: usize = 64 * 1024;

/// A read buffer kept across files: a tree scan reads thousands of files and keeps almost
/// none of their bytes, so it reads them all into one allocation (per thread), as ripgrep does.
#[derive(Debug, Default)]
pub struct ReadBuffer {
    /// Zeroed once as it grows, never shrunk: only the bytes of the last read are meaningful.
    buf: Vec<u8>,
}

impl ReadBuffer {
    /// Reads `path`, which a directory listing has just shown to be a regular file, if it
    /// holds `needle`: `Ok(None)` when it does not. [`read_source`]'s guarantees, with two of
    /// its steps left out: the listing's file type stands in for the `symlink_metadata` before
    /// the open (the open still refuses a symlink and does not wait for a FIFO, and the
    /// descriptor's own metadata is checked), and the binary check is the caller's, for the
    /// few files it keeps. A file longer than a window is searched a window at a time and read
    /// whole only when the needle is in it, so the buffer stays small however long the files
    /// without it are.
    pub fn read_listed_holding(
        &mut self,
        path: &Path,
        needle: &memchr::memmem::Finder<'_>,
    ) -> Result<Option<&[u8]>, ReadError> {
        let (mut file, size) = open_listed(path)?;
        if size > WINDOW {
            if !self.search_windows(path, &mut file, needle)? {
                return Ok(None);
            }
            file.rewind().map_err(|e| io_error(path, e))?;
        }
        let len = self.read_whole(path, &mut file, size)?;
        let bytes = &self.buf[..len];
        // Looked for again in a long file: the bytes kept are the ones that must hold it.
        Ok(needle.find(bytes).is_some().then_some(bytes))
    }

    /// Reads the rest of `file`, `size` bytes by its metadata, to the start of the buffer and
    /// returns the length read. One `read` call when the file is as long as `fstat` said: the
    /// size is taken as the end, without a second call to see 0 (a file that grows meanwhile
    /// is read as it was at the `fstat`).
    fn read_whole(
        &mut self,
        path: &Path,
        file: &mut File,
        size: usize,
    ) -> Result<usize, ReadError> {
        // One byte past the size: a file that grew since the `fstat` is read on to its end (or
        // to one byte past the limit, which makes it too large).
        let mut want = size + 1;
        let mut filled = 0;
        loop {
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let n = match file.read(&mut self.buf[filled..want]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(path, e)),
            };
            filled += n;
            if n == 0 || (filled == size && size > 0) {
                return Ok(filled);
            }
            if filled == want {
                if want as u64 > MAX_FILE_SIZE {
                    return Err(ReadError::TooLarge {
                        path: path.to_path_buf(),
                        size: want as u64,
                    });
                }
                want = (want * 2).min(MAX_FILE_SIZE as usize + 1);
            }
        }
    }

    /// True if `needle` is in the rest of `file`, read a window at a time into the buffer,
    /// the last `needle.len() - 1` bytes of each window kept before the next for a needle
    /// across the two.
    fn search_windows(
        &mut self,
        path: &Path,
        file: &mut File,
        needle: &memchr::memmem::Finder<'_>,
    ) -> Result<bool, ReadError> {
        let overlap = needle.needle().len().saturating_sub(1);
        if self.buf.len() < WINDOW + overlap {
            self.buf.resize(WINDOW + overlap, 0);
        }
        let (mut kept, mut total) = (0, 0u64);
        loop {
            let n = match file.read(&mut self.buf[kept..kept + WINDOW]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(path, e)),
            };
            if n == 0 {
                return Ok(false);
            }
            total += n as u64;
            if total > MAX_FILE_SIZE {
                return Err(ReadError::TooLarge { path: path.to_path_buf(), size: total });
            }
            let end = kept + n;
            if needle.find(&self.buf[..end]).is_some() {
                return Ok(true);
            }
            kept = overlap.min(end);
            self.buf.copy_within(end - kept..end, 0);
        }
    }
}

fn io_error(path: &Path, source: io::Error) -> ReadError {
    ReadError::Io { path: path.to_path_buf(), source }
}

/// Opens a file a listing showed to be regular, and checks the descriptor's metadata: the
/// file and its size.
fn open_listed(path: &Path) -> Result<(File, usize), ReadError> {
    let file = sys::open_read(path).map_err(|e| match sys::refusal_kind(&e) {
        Some(kind) => ReadError::NotRegular { path: path.to_path_buf(), kind },
        // Swapped for a directory since the listing, say (Windows cannot open one to read).
        None => match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_file() => {
                ReadError::NotRegular { path: path.to_path_buf(), kind: file_kind(&meta) }
            }
            _ => io_error(path, e),
        },
    })?;
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    check_metadata(path, &meta)?;
    Ok((file, meta.len() as usize))
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

// ---- writing ------------------------------------------------------------------------------

/// Why a checked replace did not happen.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs)] // each variant's fields are the path and what its message says
pub enum WriteError {
    /// The file no longer holds the bytes that were scanned: someone (the user) wrote it. The
    /// file on disk is the user's; nothing of ours is left.
    #[error("{path}: changed since it was read; left as it is")]
    Conflict { path: PathBuf },
    /// Another program has the file open for writing: it is still being written, and what
    /// it writes next would go into the file we replaced. Nothing was changed; its close brings
    /// another change, and that one is stamped.
    #[error("{path}: still open for writing by another program; left as it is")]
    Busy { path: PathBuf },
    /// Read-only, or not ours to write.
    #[error("{path}: read-only; not changed")]
    ReadOnly { path: PathBuf },
    /// The file cannot be replaced without losing something of the user's: it has several
    /// hard links (a new file would split them), or metadata a new file cannot be given.
    /// Nothing was changed.
    #[error("{path}: not stamped: {why}")]
    Untaggable { path: PathBuf, why: String },
    /// The path holds no regular file (any more).
    #[error("{path}: not a regular file ({kind}); not changed")]
    NotRegular { path: PathBuf, kind: &'static str },
    /// The OS said no.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl WriteError {
    /// The error with its path as `shown` names it (the user's path for a file written
    /// through a held directory: see [`sys::Beneath::shown`]).
    pub fn shown_as(mut self, shown: impl Fn(&Path) -> PathBuf) -> WriteError {
        let (WriteError::Conflict { path }
        | WriteError::Busy { path }
        | WriteError::ReadOnly { path }
        | WriteError::Untaggable { path, .. }
        | WriteError::NotRegular { path, .. }
        | WriteError::Io { path, .. }) = &mut self;
        *path = shown(path);
        self
    }

    fn io(path: &Path) -> impl Fn(io::Error) -> WriteError + '_ {
        move |source| {
            // Held open by another program (Windows sharing): not changed, tried again later.
            if sys::is_busy(&source) {
                WriteError::Conflict { path: path.to_path_buf() }
            } else if let Some(lost) = sys::metadata_lost(&source) {
                WriteError::Untaggable { path: path.to_path_buf(), why: lost.to_string() }
            } else if source.kind() == io::ErrorKind::PermissionDenied {
                WriteError::ReadOnly { path: path.to_path_buf() }
            } else {
                WriteError::Io { path: path.to_path_buf(), source }
            }
        }
    }
}

/// Replaces `path`, which must hold exactly `expected`, with `new`, atomically — only if
/// nothing of the user's can be lost by it, and without anyone ever seeing an older version
/// than the path's (see the module doc for how, and for what remains).
///
/// Files with several hard links are never written ([`WriteError::Untaggable`]): a new file
/// would split the links, and a rewrite in place can leave the file short (a full disk) or
/// padded (a racing truncate). Symlinks (and Windows reparse points that link) are never
/// written through; read-only files are left alone.
pub fn replace_checked(path: &Path, expected: &[u8], new: &[u8]) -> Result<(), WriteError> {
    replace_checked_in(path, expected, new, &|| true)
}

/// [`replace_checked`] for a file reached through a directory held open
/// ([`sys::dir_beneath`]): `in_place` says whether that directory is still where it was
/// reached from the root. It is asked just before the exchange (false: nothing is done) and
/// just after it (false: the exchange is undone), so that a directory moved out of the root
/// meanwhile is not written.
pub fn replace_checked_in(
    path: &Path,
    expected: &[u8],
    new: &[u8],
    in_place: &dyn Fn() -> bool,
) -> Result<(), WriteError> {
    replace(path, expected, new, in_place, &mut Hooks::default())
}

/// What [`cannot_replace`] says of a file with several hard links.
pub const SEVERAL_LINKS: &str = "several hard links";

/// Why [`replace_checked`] would refuse the file with metadata `meta` whatever its bytes —
/// read-only (or not ours to write), or several hard links — or `None`: a look before an ask
/// is announced, so that one that can never be tagged is announced as such.
pub fn cannot_replace(path: &Path, meta: &std::fs::Metadata) -> Option<&'static str> {
    if meta.permissions().readonly() || !sys::writable(path) {
        return Some("read-only");
    }
    match sys::link_count(path, meta) {
        Ok(1) => None,
        Ok(_) => Some(SEVERAL_LINKS),
        Err(_) => None, // the write says what is wrong
    }
}

/// Points inside [`replace_checked`] where tests write the file at the worst moment; empty
/// outside tests.
#[derive(Default)]
struct Hooks<'a> {
    /// Between the content check and the last look at the path before the exchange.
    before_swap: Option<&'a mut dyn FnMut()>,
    /// Between that last look and the exchange: the instant nothing can cover but the undo.
    in_window: Option<&'a mut dyn FnMut()>,
    /// Immediately after the exchange, before what it displaced is looked at.
    after_exchange: Option<&'a mut dyn FnMut()>,
    /// After the displaced file was found unchanged, before it is unlinked (without a lease).
    after_check: Option<&'a mut dyn FnMut()>,
    /// Use a plain rename even where an atomic exchange is available.
    plain_rename: bool,
    /// Take no lease even where leases are available.
    no_lease: bool,
}

impl Hooks<'_> {
    fn run(hook: &mut Option<&mut dyn FnMut()>) {
        if let Some(f) = hook.as_mut() {
            f();
        }
    }
}

/// Waits until nobody has `path` open for writing, looking every 10 ms until `deadline`: what
/// a [`WriteError::Busy`] waits for where no close event will tell (a one-shot stamp or
/// resolve). True once it is closed, or when it cannot be told (no leases here, no such file:
/// the next read says what is there); false if it is still being written at `deadline`.
pub fn wait_closed(path: &Path, deadline: std::time::Instant) -> bool {
    loop {
        let Ok(file) = sys::open_read(path) else { return true };
        match sys::take_lease(&file) {
            sys::Lease::Held => {
                sys::release_lease(&file);
                return true;
            }
            sys::Lease::Unavailable => return true,
            sys::Lease::Busy if std::time::Instant::now() >= deadline => return false,
            sys::Lease::Busy => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// How long a replace waits for another program to let go of a file before calling it busy.
const BUSY_WAIT: Duration = Duration::from_secs(1);

/// The file that was read, as the exchange must find it at the path.
struct Checked {
    /// Its device and inode (volume and index on Windows).
    id: (u64, u64),
    /// The descriptor holding its lease, kept open until the exchange is finished (closing it
    /// ends the lease); `None` where no lease could be taken.
    leased: Option<File>,
}

impl Checked {
    /// True if someone opened the file read for writing (or truncated it) since its lease.
    fn written(&self) -> bool {
        self.leased.as_ref().is_some_and(sys::lease_broken)
    }
}

fn replace(
    path: &Path,
    expected: &[u8],
    new: &[u8],
    in_place: &dyn Fn() -> bool,
    hooks: &mut Hooks,
) -> Result<(), WriteError> {
    let io_err = WriteError::io(path);
    let meta = std::fs::symlink_metadata(path).map_err(&io_err)?;
    if !meta.file_type().is_file() {
        return Err(WriteError::NotRegular { path: path.to_path_buf(), kind: file_kind(&meta) });
    }
    if meta.permissions().readonly() || !sys::writable(path) {
        return Err(WriteError::ReadOnly { path: path.to_path_buf() });
    }
    let mut held = sys::open_read(path).map_err(|e| match sys::refusal_kind(&e) {
        Some(kind) => WriteError::NotRegular { path: path.to_path_buf(), kind },
        None => io_err(e),
    })?;
    let held_meta = held.metadata().map_err(&io_err)?;
    if !held_meta.file_type().is_file() {
        let kind = file_kind(&held_meta);
        return Err(WriteError::NotRegular { path: path.to_path_buf(), kind });
    }
    // The links of the file held (the one the content check reads), not of whatever the path
    // named a moment before.
    if sys::link_count(path, &held_meta).map_err(&io_err)? > 1 {
        let why = "it has several hard links (a new file would split them; a rewrite in place \
                   could leave it short or padded)";
        return Err(WriteError::Untaggable { path: path.to_path_buf(), why: why.to_string() });
    }
    let no_lease = hooks.no_lease;
    let take_lease =
        |held: &File| if no_lease { sys::Lease::Unavailable } else { sys::take_lease(held) };
    // A file still being written is left before any temp file is made (each of its writer's
    // events would otherwise cost one, fsync included); the lease is not held meanwhile, so
    // no writer opening the file waits on our fsync.
    match take_lease(&held) {
        sys::Lease::Held => sys::release_lease(&held),
        sys::Lease::Busy => return Err(WriteError::Busy { path: path.to_path_buf() }),
        sys::Lease::Unavailable => {}
    }
    let mut temp = Temp::create(path, new, &held, &held_meta, Some(expected)).map_err(&io_err)?;
    // Taken again before the content check: from here on, a write to the held file breaks it.
    let lease = take_lease(&held);
    if lease == sys::Lease::Busy {
        return Err(WriteError::Busy { path: path.to_path_buf() });
    }
    if read_all(&mut held).map_err(&io_err)? != expected {
        return Err(WriteError::Conflict { path: path.to_path_buf() });
    }
    // Without a lease the descriptor is of no more use, and Windows (Wine) will not replace a
    // file we hold open.
    let read = Checked {
        id: sys::file_id(&held).map_err(&io_err)?,
        leased: (lease == sys::Lease::Held).then_some(held),
    };
    // Whoever opens our file once it is at the path waits until we know it stays there.
    temp.hold_back(!no_lease && !hooks.plain_rename);
    Hooks::run(&mut hooks.before_swap);
    // The last look: the path still names the file read, nobody opened that for writing, and
    // its directory is where it was. (A rename over the path is not seen by any lease: this is
    // where a save made while our temp file was written and synced is found.)
    let still_read =
        matches!(retry_busy(|| sys::path_file_id(path)), Ok(Some(id)) if id == read.id);
    if !still_read || read.written() || !in_place() {
        return Err(WriteError::Conflict { path: path.to_path_buf() });
    }
    if hooks.plain_rename {
        return rename_unleased(path, temp, read, expected);
    }
    Hooks::run(&mut hooks.in_window);
    match sys::exchange(&temp.path, path) {
        Ok(displaced) => {
            Hooks::run(&mut hooks.after_exchange);
            let exchanged = Exchanged { path, temp, displaced, read };
            finish_exchange(exchanged, expected, new, in_place, hooks)
        }
        Err(e) if sys::exchange_unsupported(&e) => rename_unleased(path, temp, read, expected),
        Err(e) if sys::is_busy(&e) => Err(WriteError::Conflict { path: path.to_path_buf() }),
        Err(e) => Err(io_err(e)),
    }
}

/// The plain-rename fallback (no atomic exchange here: exFAT, vfat, …) after a leased check. A
/// writer that opened the file since waits on our lease and would write into the replaced file
/// once it ends: the stamp is abandoned instead. Otherwise the lease is given up before the
/// rename, so that a writer opening the file now writes before our re-read of it, which finds
/// it.
fn rename_unleased(
    path: &Path,
    mut temp: Temp,
    read: Checked,
    expected: &[u8],
) -> Result<(), WriteError> {
    if read.written() {
        return Err(WriteError::Conflict { path: path.to_path_buf() });
    }
    drop(read);
    temp.release();
    rename_and_check(path, temp, expected)
}

/// An exchange done: our temp file is at `path`, and `displaced` holds what was there (`read`,
/// if nobody got in between).
struct Exchanged<'p> {
    path: &'p Path,
    temp: Temp,
    displaced: PathBuf,
    read: Checked,
}

/// After the exchange, keep ours only if what it displaced was the very file we read (its bytes
/// `expected`), nobody wrote it, and its directory did not move; otherwise undo.
fn finish_exchange(
    exchanged: Exchanged,
    expected: &[u8],
    new: &[u8],
    in_place: &dyn Fn() -> bool,
    hooks: &mut Hooks,
) -> Result<(), WriteError> {
    let Exchanged { path, mut temp, displaced, read } = exchanged;
    let displaced = displaced.as_path();
    let io_err = WriteError::io(path);
    // Until we know what came out of the path, it may be the user's only copy of something
    // (a newer file, a symlink, a directory): it is never removed, even on an error, unless it
    // is the file read, unchanged. A scanner may be looking at the backup name a moment
    // (Windows): wait for it.
    let is_read = match retry_busy(|| sys::path_file_id(displaced)) {
        Ok(Some(id)) => id == read.id || !sys::SWAP_KEEPS_FILE_IDS,
        Ok(None) | Err(_) => false, // a symlink, a directory, or gone
    };
    let here = in_place();
    if is_read && !read.written() && here {
        if read.leased.is_some() {
            // Nobody had it open for writing when the lease was taken, nobody opened it for
            // writing since, and its bytes were checked under the lease: nothing can be late.
            let _ = std::fs::remove_file(displaced);
            temp.release(); // whoever opened ours meanwhile reads it: it stays
            return Ok(());
        }
        temp.release();
        let mut file = retry_busy(|| sys::open_read(displaced)).map_err(&io_err)?;
        if read_all(&mut file).map_err(&io_err)? == expected {
            Hooks::run(&mut hooks.after_check);
            let _ = std::fs::remove_file(displaced); // our descriptor keeps it readable
            let late = read_all(&mut file).map_err(&io_err)?;
            if late == expected {
                return Ok(());
            }
            // Written through a descriptor opened before the swap: that write is the newest.
            write_atomically(path, &late)?;
            return Err(WriteError::Conflict { path: path.to_path_buf() });
        }
    }
    // A newer file of the user's, saved in the instant after our last look (typically one save
    // of a burst, the next following within microseconds): ours, held back so that nobody has
    // read it, becomes that file — its bytes, metadata and times — and the other inode goes.
    // No second rename, which the next save of the burst could race: whatever happens at the
    // path now (another save renamed over it, a delete, a move) happens to the right bytes.
    if !is_read && here && temp.become_file(displaced).is_ok() {
        let _ = std::fs::remove_file(displaced);
        temp.release();
        return Err(WriteError::Conflict { path: path.to_path_buf() });
    }
    undo_exchange(Exchanged { path, temp, displaced: displaced.to_path_buf(), read }, new)
}

/// Gives back its place to what the exchange displaced — a symlink or a directory put at the
/// path, another file ours could not become (no lease here, hard links, open for writing,
/// metadata), the file read if a writer opened it (that writer waits on our lease), or the
/// file read if its directory moved — and fails with [`WriteError::Conflict`].
/// Until it is back, it is the user's only copy: never removed, even if that fails.
fn undo_exchange(exchanged: Exchanged, new: &[u8]) -> Result<(), WriteError> {
    let Exchanged { path, mut temp, displaced, read } = exchanged;
    let displaced = displaced.as_path();
    let back = put_back(path, displaced, temp.id);
    // Whoever opened our file while it was at the path waits on it (Linux); and one whose
    // `open` looked the path up then but is not yet at the lease (a preempted thread) will
    // reach our file only after we let go. Both get what was there before ours instead, as if
    // they had opened it: our file becomes a copy of it, whether anyone is seen waiting or not.
    temp.become_copy_of(if back.is_ok() { path } else { displaced });
    let held_back = temp.release();
    drop(read.leased); // a writer waiting on the lease goes on, into the file back at its path
    let Some(ours) = back? else {
        return Err(WriteError::Conflict { path: path.to_path_buf() });
    };
    // Without a lease on ours, someone may have written into it while it was at the path:
    // that write is newer still, so it goes back to the path; what it was written over is the
    // older, and goes (a regular file only: anything else is kept where it is and said).
    if !held_back && read_exact_file(&ours).is_ok_and(|now| now != new) {
        let older = retry_busy(|| sys::exchange(&ours, path)).map_err(|e| kept(path, &ours, e))?;
        if !std::fs::symlink_metadata(&older).is_ok_and(|m| m.is_file()) {
            let why = io::Error::other("a newer write replaced it while a stamp was undone");
            return Err(kept(path, &older, why));
        }
        let _ = std::fs::remove_file(&older);
    } else if temp::holds(&ours, temp.id) {
        let _ = std::fs::remove_file(&ours);
    }
    Err(WriteError::Conflict { path: path.to_path_buf() })
}

/// Puts what an exchange displaced back at `path`, if `path` still holds our file `ours` — or
/// holds nothing: the user deleted it meanwhile, as they would have deleted theirs. Returns
/// where our file went (`None`: nowhere, it was deleted). If the user put something else at
/// the path meanwhile, that is newer: what was displaced stays where it is, and the error says
/// where.
fn put_back(
    path: &Path,
    displaced: &Path,
    ours: (u64, u64),
) -> Result<Option<PathBuf>, WriteError> {
    for _ in 0..3 {
        match retry_busy(|| sys::path_file_id(path)) {
            Ok(Some(id)) if id == ours || !sys::SWAP_KEEPS_FILE_IDS => {
                let went = retry_busy(|| sys::exchange(displaced, path))
                    .map_err(|e| kept(path, displaced, e))?;
                if temp::holds(&went, ours) {
                    return Ok(Some(went));
                }
                // The path changed in the instant between: what is there now is newer than
                // what was displaced; it goes back, and the other stays out.
                let older =
                    retry_busy(|| sys::exchange(&went, path)).map_err(|e| kept(path, &went, e))?;
                let why = io::Error::other("the path changed while a stamp was undone");
                return Err(kept(path, &older, why));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match sys::rename_noreplace(displaced, path) {
                    Ok(()) => return Ok(None),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(kept(path, displaced, e)),
                }
            }
            _ => break,
        }
    }
    let why = io::Error::other("something newer was put at the path while a stamp was undone");
    Err(kept(path, displaced, why))
}

/// Where the kernel or file system cannot exchange: rename, then check the old file (kept open)
/// for a write that slipped in between the check and the rename, and restore it if so. (A
/// writer that opens the file in the instant of the rename cannot be put back: that is what
/// the exchange is for.)
fn rename_and_check(path: &Path, mut temp: Temp, expected: &[u8]) -> Result<(), WriteError> {
    let io_err = WriteError::io(path);
    let mut old = sys::open_read(path).map_err(&io_err)?;
    match retry_busy(|| std::fs::rename(&temp.path, path)) {
        Ok(()) => temp.keep(),
        Err(e) if sys::is_busy(&e) => {
            return Err(WriteError::Conflict { path: path.to_path_buf() })
        }
        Err(e) => return Err(io_err(e)),
    }
    let old_now = read_all(&mut old).map_err(&io_err)?;
    if old_now != expected {
        write_atomically(path, &old_now)?;
        return Err(WriteError::Conflict { path: path.to_path_buf() });
    }
    Ok(())
}

/// Unconditional atomic replace (temp file + rename), used to put a user's bytes back. If the
/// rename cannot happen, the bytes stay in the temp file (named as one that is never removed
/// by the start-up clean-up) and the error says where.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let io_err = WriteError::io(path);
    let from = sys::open_read(path).map_err(&io_err)?;
    let meta = from.metadata().map_err(&io_err)?;
    let mut temp = Temp::create(path, bytes, &from, &meta, None).map_err(&io_err)?;
    drop(from); // Windows will not rename over a file we hold open
    temp.release();
    temp.keep();
    retry_busy(|| std::fs::rename(&temp.path, path)).map_err(|e| kept(path, &temp.path, e))
}

/// The error for a restore that could not happen: what was at the path is safe at `at`.
fn kept(path: &Path, at: &Path, e: io::Error) -> WriteError {
    let source = io::Error::new(
        e.kind(),
        format!("{e}; what was at the path (your newer version) is kept at {}", at.display()),
    );
    WriteError::Io { path: path.to_path_buf(), source }
}

/// Runs `op` again while another program holds the file (Windows sharing), for [`BUSY_WAIT`].
fn retry_busy<T>(mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_WAIT;
    loop {
        match op() {
            Err(e) if sys::is_busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn read_all(file: &mut File) -> io::Result<Vec<u8>> {
    file.rewind()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The bytes of `path` as they are now (no size limit: we compare, we do not parse).
fn read_exact_file(path: &Path) -> io::Result<Vec<u8>> {
    read_all(&mut sys::open_read(path)?)
}

/// [`replace_checked`] with test hooks.
#[cfg(test)]
fn replace_checked_with_hooks(
    path: &Path,
    expected: &[u8],
    new: &[u8],
    hooks: &mut Hooks,
) -> Result<(), WriteError> {
    replace(path, expected, new, &|| true, hooks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_regular_files_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        crate::test_support::write(p.join("a.py"), "# @claude hi\n").unwrap();
        assert_eq!(read_source(&p.join("a.py")).unwrap().bytes, b"# @claude hi\n");

        crate::test_support::write(p.join("bin.py"), b"x\0y").unwrap();
        assert!(matches!(read_source(&p.join("bin.py")), Err(ReadError::Binary { .. })));

        crate::test_support::write(p.join("big.py"), vec![b'a'; MAX_FILE_SIZE as usize + 1])
            .unwrap();
        assert!(matches!(read_source(&p.join("big.py")), Err(ReadError::TooLarge { .. })));

        crate::test_support::write(p.join("ok.py"), vec![b'a'; MAX_FILE_SIZE as usize]).unwrap();
        assert!(read_source(&p.join("ok.py")).is_ok());

        crate::test_support::write(p.join("bad-utf8.py"), b"# \xff\xfe @claude x\n").unwrap();
        assert!(read_source(&p.join("bad-utf8.py")).is_ok());

        assert!(matches!(read_source(p), Err(ReadError::NotRegular { kind: "directory", .. })));
        let missing = read_source(&p.join("missing.py")).unwrap_err();
        assert!(!missing.is_skip());
        assert!(missing.to_string().contains("missing.py"), "{missing}");
    }

    /// One buffer for many files: each read gives exactly that file's bytes (never a longer
    /// file's leftovers) if they hold the needle, wherever it is (across two windows of a long
    /// file too), with the size limit and the refusals of `read_source`.
    #[test]
    fn a_reused_buffer_reads_each_file_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let needle = memchr::memmem::Finder::new("@claude");
        let mut buf = ReadBuffer::default();
        let mut read = |name: &str| {
            buf.read_listed_holding(&p.join(name), &needle).map(|b| b.map(<[u8]>::to_vec))
        };
        let mut across = vec![b'x'; 100_000];
        across[WINDOW - 3..WINDOW + 4].copy_from_slice(b"@claude");
        crate::test_support::write(p.join("across.py"), &across).unwrap();
        let mut late = vec![b'x'; 300_000];
        late.extend_from_slice(b"# @claude at the end\n");
        crate::test_support::write(p.join("late.py"), &late).unwrap();
        crate::test_support::write(p.join("without.py"), vec![b'x'; 300_000]).unwrap();
        crate::test_support::write(p.join("short.py"), "# @claude hi\n").unwrap();
        crate::test_support::write(p.join("short-without.py"), "x = 1\n").unwrap();
        crate::test_support::write(p.join("empty.py"), "").unwrap();
        assert_eq!(read("across.py").unwrap().unwrap(), across);
        assert_eq!(read("short.py").unwrap().unwrap(), b"# @claude hi\n");
        assert_eq!(read("without.py").unwrap(), None);
        assert_eq!(read("late.py").unwrap().unwrap(), late);
        assert_eq!(read("short-without.py").unwrap(), None);
        assert_eq!(read("empty.py").unwrap(), None);
        assert_eq!(read("short.py").unwrap().unwrap(), b"# @claude hi\n");

        crate::test_support::write(p.join("big.py"), vec![b'a'; MAX_FILE_SIZE as usize + 1])
            .unwrap();
        let big = read("big.py");
        assert!(matches!(big, Err(ReadError::TooLarge { .. })), "{big:?}");
        let mut at_limit = vec![b'a'; MAX_FILE_SIZE as usize - 7];
        at_limit.extend_from_slice(b"@claude");
        crate::test_support::write(p.join("ok.py"), &at_limit).unwrap();
        assert_eq!(read("ok.py").unwrap().unwrap(), at_limit);

        // The binary check is the caller's: the bytes come back as they are.
        crate::test_support::write(p.join("bin.py"), b"@claude\0y").unwrap();
        assert_eq!(read("bin.py").unwrap().unwrap(), b"@claude\0y");

        let dir_err = buf.read_listed_holding(p, &needle).unwrap_err();
        assert!(matches!(dir_err, ReadError::NotRegular { kind: "directory", .. }), "{dir_err}");
        let missing = buf.read_listed_holding(&p.join("missing.py"), &needle).unwrap_err();
        assert!(!missing.is_skip(), "{missing}");
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".fw-tmp"))
            .collect()
    }

    #[cfg(unix)]
    #[test]
    fn replace_keeps_permissions_and_leaves_no_temp_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.sh");
        crate::test_support::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
        replace_checked(&p, b"old", b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o751);
        assert!(leftovers(dir.path()).is_empty());
    }

    /// A replace keeps the file's modification and access times, to the nanosecond, whichever
    /// way it goes (the exchange with leases, without, the plain rename): an editor that holds
    /// the file (VS Code: a save conflicts only with a file newer than the one it knows) never
    /// takes our tag for a newer version of its file (issue 34).
    #[test]
    fn replace_keeps_the_files_times() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.py");
        let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        let (mtime, atime) =
            (hour_ago + Duration::from_nanos(123_456_789), hour_ago + Duration::from_nanos(7));
        for how in ["exchange", "no lease", "plain rename"] {
            crate::test_support::write(&p, "# @claude x\n").unwrap();
            let times = std::fs::FileTimes::new().set_modified(mtime).set_accessed(atime);
            File::options().write(true).open(&p).unwrap().set_times(times).unwrap();
            let mut hooks = Hooks {
                no_lease: how == "no lease",
                plain_rename: how == "plain rename",
                ..Hooks::default()
            };
            let new = b"# @claude[fw-00000000] x\n";
            replace(&p, b"# @claude x\n", new, &|| true, &mut hooks).unwrap();
            let meta = std::fs::metadata(&p).unwrap(); // before a read moves the access time
            assert_eq!(meta.modified().unwrap(), mtime, "{how}: the modification time");
            assert_eq!(meta.accessed().unwrap(), atime, "{how}: the access time");
            assert_eq!(std::fs::read(&p).unwrap(), new, "{how}");
            assert!(leftovers(dir.path()).is_empty(), "{how}");
        }
    }

    #[test]
    fn replace_refuses_changed_files_and_leaves_them_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.py");
        crate::test_support::write(&p, "user's newer bytes").unwrap();
        let err = replace_checked(&p, b"what we scanned", b"stamped").unwrap_err();
        assert!(matches!(err, WriteError::Conflict { .. }), "{err}");
        assert_eq!(std::fs::read(&p).unwrap(), b"user's newer bytes");
        assert!(leftovers(dir.path()).is_empty());
    }

    /// A user's write between our check and our swap, in place or by rename: the swap must not
    /// win over it, with the atomic exchange and with the plain-rename fallback alike, with a
    /// lease and without.
    #[test]
    fn a_write_between_check_and_swap_survives() {
        for no_lease in [false, true] {
            for plain_rename in [false, true] {
                for by_rename in [false, true] {
                    write_between_check_and_swap(no_lease, plain_rename, by_rename);
                }
            }
        }
    }

    fn write_between_check_and_swap(no_lease: bool, plain_rename: bool, by_rename: bool) {
        let case = format!("no_lease={no_lease} plain_rename={plain_rename} by_rename={by_rename}");
        // A writer that opens the file under a lease waits for it (see below).
        let waits = !no_lease && !by_rename && leases_here();
        if plain_rename && by_rename {
            // A rename over the path just before a plain rename cannot be found afterwards;
            // that is why the exchange exists. (A writer that opens the file under the lease
            // breaks it, and the rename is not done.)
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.py");
        crate::test_support::write(&p, "v1 # @claude x\n").unwrap();
        let mut writer = None;
        let mut write = || {
            if by_rename {
                let staged = dir.path().join("staged");
                crate::test_support::write(&staged, "v2 by rename\n").unwrap();
                std::fs::rename(&staged, &p).unwrap();
            } else if waits {
                // Its open waits until our lease ends: write from another thread, and go on
                // once the kernel says the lease is being broken.
                let p = p.clone();
                writer = Some(std::thread::spawn(move || {
                    crate::test_support::write(p, "v2 in place\n")
                }));
                wait_for_lease_break(&dir.path().join("a.py"));
            } else {
                crate::test_support::write(&p, "v2 in place\n").unwrap();
            }
        };
        let mut hooks =
            Hooks { before_swap: Some(&mut write), plain_rename, no_lease, ..Hooks::default() };
        let err = replace_checked_with_hooks(&p, b"v1 # @claude x\n", b"stamped", &mut hooks)
            .unwrap_err();
        if let Some(writer) = writer {
            writer.join().unwrap().unwrap();
        }
        // Wine will not rename over a file we hold open (Windows does, with the share
        // modes std opens with): refused there, and the user's write survives all the same.
        let wine_refused = cfg!(windows) && plain_rename && is_read_only(&err);
        assert!(matches!(err, WriteError::Conflict { .. }) || wine_refused, "{case}: {err}");
        let want: &[u8] = if by_rename { b"v2 by rename\n" } else { b"v2 in place\n" };
        assert_eq!(std::fs::read(&p).unwrap(), want, "{case}");
        assert!(leftovers(dir.path()).is_empty(), "{case}");
    }

    /// True if this OS and file system give leases (Linux, a file of ours).
    fn leases_here() -> bool {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("probe");
        crate::test_support::write(&p, "").unwrap();
        sys::take_lease(&File::open(&p).unwrap()) == sys::Lease::Held
    }

    /// Waits until `/proc/locks` shows the lease on `path` being broken.
    fn wait_for_lease_break(path: &Path) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let ino = format!(":{} ", std::fs::metadata(path).unwrap().ino());
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while std::time::Instant::now() < deadline {
                let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
                if locks
                    .lines()
                    .any(|l| l.contains("LEASE") && l.contains("BREAK") && l.contains(&ino))
                {
                    return;
                }
                std::thread::yield_now();
            }
            panic!("the lease on {} was never broken", path.display());
        }
        #[cfg(not(unix))]
        let _ = path;
    }

    fn is_read_only(err: &WriteError) -> bool {
        matches!(err, WriteError::ReadOnly { .. })
    }

    /// A writer that opened the file before the swap and writes after it: the write lands in
    /// the displaced file, is found after the swap, and is put back.
    #[test]
    fn a_late_write_through_an_old_descriptor_is_restored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.py");
        crate::test_support::write(&p, "v1\n").unwrap();
        let held = std::cell::RefCell::new(None::<File>);
        let mut open = || {
            *held.borrow_mut() = Some(std::fs::OpenOptions::new().write(true).open(&p).unwrap());
        };
        let mut write = || {
            let mut f = held.borrow_mut().take().unwrap();
            f.set_len(0).unwrap();
            f.write_all(b"v2 late\n").unwrap();
        };
        // Without a lease: with one, the open itself would wait for the lease to end.
        let mut hooks = Hooks {
            before_swap: Some(&mut open),
            after_check: Some(&mut write),
            no_lease: true,
            ..Hooks::default()
        };
        let err = replace_checked_with_hooks(&p, b"v1\n", b"stamped\n", &mut hooks).unwrap_err();
        assert!(matches!(err, WriteError::Conflict { .. }), "{err}");
        assert_eq!(std::fs::read(&p).unwrap(), b"v2 late\n");
    }

    #[cfg(unix)]
    #[test]
    fn hard_linked_symlinks_and_read_only_files_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.py");
        let b = dir.path().join("b.py");
        crate::test_support::write(&a, "new").unwrap();
        std::fs::hard_link(&a, &b).unwrap();
        let err = replace_checked(&a, b"new", b"stamped").unwrap_err();
        assert!(matches!(err, WriteError::Untaggable { .. }), "{err}");
        assert_eq!(std::fs::read(&b).unwrap(), b"new");
        std::fs::remove_file(&b).unwrap();

        let link = dir.path().join("link.py");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let err = replace_checked(&link, b"new", b"newer").unwrap_err();
        assert!(matches!(err, WriteError::NotRegular { kind: "symlink", .. }), "{err}");
        assert_eq!(std::fs::read(&a).unwrap(), b"new");

        let ro = dir.path().join("ro.py");
        crate::test_support::write(&ro, "old").unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
        let err = replace_checked(&ro, b"old", b"new").unwrap_err();
        assert!(matches!(err, WriteError::ReadOnly { .. }), "{err}");
        assert!(err.to_string().contains("ro.py"), "{err}");
        assert_eq!(std::fs::read(&ro).unwrap(), b"old");
    }

    /// A program that writes a marker, pauses and writes more through the same descriptor (a
    /// shell's `( echo; sleep; echo ) > f`, a logger): the stamp must not send its later writes
    /// into an unlinked inode.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_writer_holding_its_descriptor_open_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.py");
        let mut writer = File::create(&p).unwrap();
        writer.write_all(b"# @claude x\n").unwrap();
        let _ = replace_checked(&p, b"# @claude x\n", b"# @claude[fw-00000000] x\n");
        writer.write_all(b"more\n").unwrap();
        drop(writer);
        let now = String::from_utf8(std::fs::read(&p).unwrap()).unwrap();
        assert!(
            now.ends_with("more\n") && now.starts_with("# @claude"),
            "the writer's second line was lost: the file holds {now:?}"
        );
        assert!(leftovers(dir.path()).is_empty());
    }

    /// A file still open for writing is left before any temp file is made beside it: its
    /// directory is not touched at all (each of a slow writer's events would cost a temp file
    /// and its fsync otherwise).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_being_written_costs_no_temp_file() {
        if !leases_here() {
            eprintln!("no leases on this file system; skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.py");
        let mut writer = File::create(&p).unwrap();
        writer.write_all(b"# @claude x\n").unwrap();
        let long_ago = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        File::open(dir.path()).unwrap().set_modified(long_ago).unwrap();
        let err = replace_checked(&p, b"# @claude x\n", b"# @claude[fw-00000000] x\n");
        assert!(matches!(err, Err(WriteError::Busy { .. })), "{err:?}");
        let touched = std::fs::metadata(dir.path()).unwrap().modified().unwrap();
        assert_eq!(touched, long_ago, "a temp file was made (and removed) beside a busy file");
        drop(writer);
    }

    /// Puts a `kind` ("file": a newer file renamed over it, as editors save; "directory";
    /// "symlink", to `other`) at `p`, which holds a file.
    #[cfg(unix)]
    fn put_at(kind: &str, p: &Path, other: &Path) {
        match kind {
            "file" => {
                let staged = p.with_file_name("staged");
                std::fs::write(&staged, "v2 renamed over\n").unwrap();
                std::fs::rename(&staged, p).unwrap();
            }
            "symlink" => {
                std::fs::remove_file(p).unwrap();
                std::os::unix::fs::symlink(other, p).unwrap();
            }
            _ => {
                std::fs::remove_file(p).unwrap();
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join("inside.txt"), "kept\n").unwrap();
            }
        }
    }

    /// Panics unless `p` holds what [`put_at`] put there, unchanged.
    #[cfg(unix)]
    fn assert_holds(kind: &str, p: &Path, other: &Path, case: &str) {
        let meta = std::fs::symlink_metadata(p)
            .unwrap_or_else(|e| panic!("{case}: nothing at the path any more: {e}"));
        match kind {
            "file" => {
                assert!(meta.is_file(), "{case}: the path holds {meta:?}");
                assert_eq!(std::fs::read(p).unwrap(), b"v2 renamed over\n", "{case}");
            }
            "symlink" => {
                assert!(meta.file_type().is_symlink(), "{case}: the path holds {meta:?}");
                assert_eq!(std::fs::read_link(p).unwrap(), other, "{case}");
                assert_eq!(std::fs::read(other).unwrap(), b"someone else's\n", "{case}");
            }
            _ => {
                assert!(meta.is_dir(), "{case}: the path holds {meta:?}");
                assert_eq!(std::fs::read(p.join("inside.txt")).unwrap(), b"kept\n", "{case}");
                assert_eq!(std::fs::read_dir(p).unwrap().count(), 1, "{case}");
            }
        }
    }

    /// A symlink or a directory put at the path between the check and the exchange — before
    /// the last look at the path, or in the instant after it — is what the path holds
    /// afterwards, unchanged, and none of our temp files stays.
    #[cfg(unix)]
    #[test]
    fn whatever_is_at_the_path_at_the_swap_is_put_back() {
        for kind in ["symlink", "directory"] {
            for in_window in [false, true] {
                let case = format!("{kind}, in the window: {in_window}");
                let dir = tempfile::tempdir().unwrap();
                let p = dir.path().join("a.py");
                let other = dir.path().join("other.py");
                crate::test_support::write(&p, "v1\n").unwrap();
                crate::test_support::write(&other, "someone else's\n").unwrap();
                let mut swap = || put_at(kind, &p, &other);
                let mut hooks = Hooks::default();
                if in_window {
                    hooks.in_window = Some(&mut swap);
                } else {
                    hooks.before_swap = Some(&mut swap);
                }
                let result = replace_checked_with_hooks(&p, b"v1\n", b"stamped\n", &mut hooks);
                assert!(result.is_err(), "{case}: a stamp over a {kind} must not succeed");
                assert_holds(kind, &p, &other, &case);
                assert!(leftovers(dir.path()).is_empty(), "{case}: {:?}", leftovers(dir.path()));
            }
        }
    }

    /// The user deletes or moves the path in the instant our exchange is visible there, while
    /// it is being undone for what they had put there just before (a newer file, a directory,
    /// a symlink). With a lease on ours, a newer file is undone by ours becoming it: their
    /// delete (made after that save) stands, and their move takes that save's bytes along.
    /// Otherwise (and for a directory or symlink) what they put there goes back to the path.
    /// None of our temp files stays.
    #[cfg(unix)]
    #[test]
    fn the_path_deleted_or_moved_while_an_exchange_is_undone_keeps_what_was_there() {
        for kind in ["file", "directory", "symlink"] {
            for action in ["delete", "move"] {
                let case = format!("{kind}, {action}");
                let dir = tempfile::tempdir().unwrap();
                let p = dir.path().join("a.py");
                let moved = dir.path().join("moved.py");
                let other = dir.path().join("other.py");
                crate::test_support::write(&p, "v1\n").unwrap();
                crate::test_support::write(&other, "someone else's\n").unwrap();
                let mut put = || put_at(kind, &p, &other);
                // What is at the path now is our stamped file.
                let mut act = || match action {
                    "delete" => std::fs::remove_file(&p).unwrap(),
                    _ => std::fs::rename(&p, &moved).unwrap(),
                };
                let mut hooks = Hooks {
                    in_window: Some(&mut put),
                    after_exchange: Some(&mut act),
                    ..Hooks::default()
                };
                let result = replace_checked_with_hooks(&p, b"v1\n", b"stamped\n", &mut hooks);
                assert!(result.is_err(), "{case}: a stamp over a {kind} must not succeed");
                if kind == "file" && leases_here() {
                    let at_path = std::fs::symlink_metadata(&p);
                    assert!(at_path.is_err(), "{case}: the path holds {at_path:?}");
                    if action == "move" {
                        assert_eq!(std::fs::read(&moved).unwrap(), b"v2 renamed over\n", "{case}");
                    }
                } else {
                    assert_holds(kind, &p, &other, &case);
                }
                assert!(leftovers(dir.path()).is_empty(), "{case}: {:?}", leftovers(dir.path()));
            }
        }
    }

    /// True if `/proc/locks` shows a lease on the file at `path` being broken (someone waits
    /// for its holder).
    fn lease_breaking(path: &Path) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let Ok(meta) = std::fs::symlink_metadata(path) else { return false };
            let ino = format!(":{} ", meta.ino());
            let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
            locks.lines().any(|l| l.contains("LEASE") && l.contains("BREAK") && l.contains(&ino))
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            false
        }
    }

    /// Reads `p` in another thread, as another program would: returns once the read is done,
    /// or waits in its `open` for a lease on what is at `p` (then its bytes come later).
    fn read_in_thread(p: &Path) -> std::thread::JoinHandle<Vec<u8>> {
        let path = p.to_path_buf();
        let reader = std::thread::spawn(move || std::fs::read(path).unwrap());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !reader.is_finished() && !lease_breaking(p) {
            assert!(std::time::Instant::now() < deadline, "the reader neither read nor waits");
            std::thread::yield_now();
        }
        reader
    }

    /// The first half of an `open` of `p`: its name looked up, the file not yet opened (Linux:
    /// an `O_PATH` descriptor, which breaks no lease). `None` elsewhere.
    fn looked_up(p: &Path) -> Option<File> {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(p).ok()
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = p;
            None
        }
    }

    /// The second half: the file [`looked_up`] found, opened and read now.
    fn late_open(looked_up: &File) -> String {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let by_fd = format!("/proc/self/fd/{}", looked_up.as_raw_fd());
            String::from_utf8(std::fs::read(by_fd).unwrap()).unwrap()
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = looked_up;
            unreachable!("looked_up gives None here")
        }
    }

    /// A save renamed over the path while a stamp is under way (an editor's atomic save): no
    /// reader ever gets the stamped older version, not even for an instant. Renamed in before
    /// the stamp's last look at the path, the exchange must not happen; renamed in the instant
    /// after that look, a reader that opens the path while the exchange is visible gets the
    /// newer file, and so does one whose open looked the path up then but reaches the file
    /// only after the exchange is undone.
    #[test]
    fn a_save_renamed_over_the_path_during_a_stamp_is_never_displaced() {
        // Only a lease on our new file can hold a reader back in the instant (Linux).
        // (renamed in the window, a reader opens at once or only looks the path up)
        let slots: &[(bool, bool)] = if leases_here() {
            &[(false, false), (true, false), (true, true)]
        } else {
            &[(false, false)]
        };
        for &(in_window, only_looked_up) in slots {
            let case =
                format!("renamed in the window: {in_window}, only looked up: {only_looked_up}");
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("a.py");
            crate::test_support::write(&p, "v1 # @claude x\n").unwrap();
            let staged = dir.path().join("staged");
            let saved_at = std::cell::Cell::new(None);
            let mut save = || {
                std::fs::write(&staged, "v2\n").unwrap();
                saved_at.set(std::fs::metadata(&staged).unwrap().modified().ok());
                std::fs::rename(&staged, &p).unwrap();
            };
            let readers = std::cell::RefCell::new(Vec::new());
            let late = std::cell::RefCell::new(None);
            let mut look = || {
                if only_looked_up {
                    *late.borrow_mut() = looked_up(&p);
                } else {
                    readers.borrow_mut().push(read_in_thread(&p));
                }
            };
            let mut hooks = Hooks { after_exchange: Some(&mut look), ..Hooks::default() };
            if in_window {
                hooks.in_window = Some(&mut save);
            } else {
                hooks.before_swap = Some(&mut save);
            }
            let result =
                replace_checked_with_hooks(&p, b"v1 # @claude x\n", b"stamped v1\n", &mut hooks);
            for reader in readers.take() {
                let got = String::from_utf8(reader.join().unwrap()).unwrap();
                assert_eq!(got, "v2\n", "{case}: a reader got an older version than the path's");
            }
            if let Some(late) = late.take() {
                let got = late_open(&late);
                assert_eq!(
                    got, "v2\n",
                    "{case}: an open that looked the path up in the instant \
                                         got an older version once it reached the file"
                );
            }
            assert!(matches!(result, Err(WriteError::Conflict { .. })), "{case}: {result:?}");
            assert_eq!(std::fs::read(&p).unwrap(), b"v2\n", "{case}");
            // An editor that compares the file's time with its own sees no change.
            let now = std::fs::metadata(&p).unwrap().modified().ok();
            assert_eq!(now, saved_at.get(), "{case}: the save's modification time was lost");
            assert!(leftovers(dir.path()).is_empty(), "{case}: {:?}", leftovers(dir.path()));
        }
    }

    /// Every name the file system allows can be stamped: our temp file's name (and Windows'
    /// backup name) beside it must fit the 255-byte limit (255 UTF-16 units on Windows) too,
    /// whatever the name is made of.
    #[test]
    fn names_up_to_the_longest_allowed_are_stamped() {
        let dir = tempfile::tempdir().unwrap();
        #[allow(unused_mut)] // one more on Unix
        let mut names: Vec<std::ffi::OsString> = vec![
            format!("{}.py", "a".repeat(238)).into(), // 241 bytes
            format!("{}.py", "b".repeat(252)).into(), // 255 bytes
            format!("{}.py", "é".repeat(126)).into(), // 255 bytes, 2 per character
            format!("{}.py", "🦀".repeat(63)).into(), // 255 bytes, 4 per character
        ];
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let mut bytes = vec![0xff; 252]; // not UTF-8
            bytes.extend_from_slice(b".py");
            names.push(std::ffi::OsString::from_vec(bytes));
        }
        for name in names {
            let p = dir.path().join(&name);
            crate::test_support::write(&p, "v1\n").unwrap();
            let result = replace_checked(&p, b"v1\n", b"stamped\n");
            assert!(result.is_ok(), "a {}-byte name: {result:?}", name.len());
            assert_eq!(std::fs::read(&p).unwrap(), b"stamped\n");
            assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
            std::fs::remove_file(&p).unwrap();
        }
    }

    /// Runs a tool; false if it is not installed.
    #[cfg(target_os = "linux")]
    fn run(tool: &str, args: &[&std::ffi::OsStr]) -> bool {
        match std::process::Command::new(tool).args(args).status() {
            Ok(status) => {
                assert!(status.success(), "{tool} {args:?} failed");
                true
            }
            Err(_) => false,
        }
    }

    /// Mode, owner, group and every extended attribute (`getfattr -m -`: `user.*`,
    /// `security.*`, `trusted.*`, the POSIX ACL).
    #[cfg(target_os = "linux")]
    fn metadata_of(p: &Path) -> (u32, u32, u32, String) {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(p).unwrap();
        let out = std::process::Command::new("getfattr")
            .args(["-d", "-m", "-", "-e", "hex", "--absolute-names"])
            .arg(p)
            .output()
            .unwrap();
        (m.mode(), m.uid(), m.gid(), String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Extended attributes, the ACL, setuid/setgid/sticky bits, owner and group: carried over
    /// to the stamped file, or the file is not stamped at all — never silently stripped.
    #[cfg(target_os = "linux")]
    #[test]
    fn file_metadata_survives_a_stamp_or_the_file_is_left_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.py");
        crate::test_support::write(&p, "# @claude x\n").unwrap();
        let os = |s: &'static str| std::ffi::OsStr::new(s);
        let has_tools =
            run("setfattr", &[os("-n"), os("user.x"), os("-v"), os("1"), p.as_os_str()])
                && run("setfacl", &[os("-m"), os("u:nobody:r"), p.as_os_str()])
                && run("getfattr", &[os("--version")]);
        if !has_tools {
            eprintln!("SKIPPED: setfattr/setfacl/getfattr missing (Debian attr, acl)");
            return;
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
            for name in ["security.fw_test", "trusted.fw_test"] {
                run("setfattr", &[os("-n"), os(name), os("-v"), os("1"), p.as_os_str()]);
            }
        } else {
            eprintln!("not root: owner, security.* and trusted.* not tested");
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o7755)).unwrap();
        let before = metadata_of(&p);
        match replace_checked(&p, b"# @claude x\n", b"# @claude[fw-00000000] x\n") {
            Ok(()) => {
                assert_eq!(std::fs::read(&p).unwrap(), b"# @claude[fw-00000000] x\n");
                assert_eq!(metadata_of(&p), before, "stamped, but metadata was lost");
            }
            Err(e) => {
                // Only metadata that cannot be carried over may keep a stamp from happening.
                assert!(matches!(e, WriteError::Untaggable { .. }), "{e}");
                assert_eq!(std::fs::read(&p).unwrap(), b"# @claude x\n");
                assert_eq!(metadata_of(&p), before, "not stamped, and metadata was lost");
            }
        }
        assert!(leftovers(dir.path()).is_empty());
    }

    /// A 1 MB tmpfs mounted for a test (root only), unmounted when dropped.
    #[cfg(target_os = "linux")]
    struct SmallDisk(tempfile::TempDir);

    #[cfg(target_os = "linux")]
    impl SmallDisk {
        fn mount() -> Option<SmallDisk> {
            let dir = tempfile::tempdir().ok()?;
            let status = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
                .arg(dir.path())
                .stderr(std::process::Stdio::null())
                .status()
                .ok()?;
            // Not `then_some`: that would make (and drop, unmounting) a SmallDisk either way.
            if status.success() {
                Some(SmallDisk(dir))
            } else {
                None
            }
        }

        /// Writes a file until the disk is full (never more than the disk's 1 MB and a bit:
        /// if the mount did not happen, this is not the place to fill).
        fn fill(&self) {
            let mut filler = File::create(self.0.path().join("filler")).unwrap();
            let chunk = vec![b'f'; 4096];
            for _ in 0..(2 * 1024 * 1024 / chunk.len()) {
                if filler.write_all(&chunk).is_err() {
                    return;
                }
            }
            panic!("2 MB written to a 1 MB disk: not the small tmpfs");
        }
    }

    #[cfg(target_os = "linux")]
    impl Drop for SmallDisk {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0.path()).status();
        }
    }

    /// On a full disk a stamp leaves every file exactly as the user left it (or stamped whole):
    /// a hard-linked one, and an ordinary one (and no temp file stays).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_never_leaves_a_file_short() {
        let Some(disk) = SmallDisk::mount() else {
            eprintln!("SKIPPED: cannot mount a small tmpfs (not root?)");
            return;
        };
        let dir = disk.0.path();
        // Just under one page, so that the stamp needs a page the full disk does not have.
        let mut old = b"# @claude x\n".to_vec();
        while old.len() < 4090 {
            old.extend_from_slice(b"y = 1\n");
        }
        let new = [b"# @claude[fw-00000000]".as_slice(), &old[b"# @claude".len()..]].concat();
        let (a, b, plain) = (dir.join("a.py"), dir.join("b.py"), dir.join("plain.py"));
        crate::test_support::write(&a, &old).unwrap();
        std::fs::hard_link(&a, &b).unwrap();
        crate::test_support::write(&plain, &old).unwrap();
        disk.fill();
        for p in [&a, &plain] {
            let result = replace_checked(p, &old, &new);
            let now = std::fs::read(p).unwrap();
            assert!(
                now == old || now == new,
                "{}: left with {} bytes, neither the user's {} nor the stamped {} ({result:?})",
                p.display(),
                now.len(),
                old.len(),
                new.len()
            );
        }
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert!(leftovers(dir).is_empty(), "{:?}", leftovers(dir));
    }

    #[cfg(unix)]
    #[test]
    fn never_follows_symlinks_or_opens_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        crate::test_support::write(p.join("target.py"), "# @claude hi\n").unwrap();
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
        // The same through the scan's reused buffer (which trusts the listing instead of an
        // lstat: the open and the descriptor's metadata still refuse both).
        let mut buf = ReadBuffer::default();
        let needle = memchr::memmem::Finder::new("@claude");
        let link = buf.read_listed_holding(&p.join("link.py"), &needle);
        assert!(matches!(link, Err(ReadError::NotRegular { kind: "symlink", .. })), "{link:?}");
        let pipe = buf.read_listed_holding(&fifo, &needle);
        assert!(matches!(pipe, Err(ReadError::NotRegular { kind: "fifo", .. })), "{pipe:?}");
    }

    /// A file whose write lease another program holds (a stamp finishing its exchange) is read
    /// once the lease is let go, not reported as a read failure. (Seen: `WouldBlock (os error
    /// 11)` reading a file a moment after its stamp, 1 run in 5 on a loaded machine.)
    #[test]
    #[cfg(target_os = "linux")]
    fn a_file_under_a_write_lease_is_read_once_it_is_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("held.py");
        crate::test_support::write(&p, "# @claude hi\n").unwrap();
        let script = "import fcntl, os, signal, sys, time\n\
            signal.signal(signal.SIGIO, signal.SIG_IGN)\n\
            fd = os.open(sys.argv[1], os.O_RDONLY)\n\
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)\n\
            print('held', flush=True)\n\
            time.sleep(0.3)\n";
        let Ok(mut holder) = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&p)
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            eprintln!("SKIPPED: no python3 to hold a lease");
            return;
        };
        let mut said = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
            &mut said,
        )
        .unwrap();
        assert_eq!(said.trim(), "held");
        let read = read_source(&p);
        holder.wait().unwrap();
        assert_eq!(read.unwrap().bytes, b"# @claude hi\n");
    }
}
