//! Windows: opens that never traverse a reparse point, `ReplaceFileW` as the exchange (it keeps
//! the replaced file's ACLs, alternate streams and attributes), sharing violations as "busy",
//! one recursive `ReadDirectoryChangesW` watch.

use std::ffi::OsString;
use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};

use windows_sys::Win32::Foundation::{
    ERROR_INVALID_FUNCTION, ERROR_INVALID_PARAMETER, ERROR_LOCK_VIOLATION, ERROR_NOT_SUPPORTED,
    ERROR_SHARING_VIOLATION, ERROR_UNABLE_TO_MOVE_REPLACEMENT, ERROR_UNABLE_TO_MOVE_REPLACEMENT_2,
    ERROR_UNABLE_TO_REMOVE_REPLACED,
};
use windows_sys::Win32::Storage::FileSystem::{
    GetFileInformationByHandle, GetFileType, MoveFileExW, ReplaceFileW, SetFileAttributesW,
    BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_ARCHIVE, FILE_ATTRIBUTE_HIDDEN,
    FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_NOT_CONTENT_INDEXED, FILE_ATTRIBUTE_REPARSE_POINT,
    FILE_ATTRIBUTE_SYSTEM, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
    FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_TYPE_DISK, REPLACEFILE_WRITE_THROUGH,
};

use crate::sys::WatchMode;

/// `ReadDirectoryChangesW` watches a whole tree with one handle and has no watch limit.
pub const WATCH_MODE: WatchMode = WatchMode::Recursive;

/// An open that refused to go through what the path names (the error's payload).
#[derive(Debug)]
struct Refused(&'static str);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a regular file ({})", self.0)
    }
}

impl std::error::Error for Refused {}

fn refused(kind: &'static str) -> io::Error {
    io::Error::other(Refused(kind))
}

/// Opens `path` for reading without traversing a symlink or junction at it (the handle is the
/// reparse point itself, refused as a symlink) and only if it is a disk file (a console or
/// other device is refused, so nothing can block). Reparse points that are not links (cloud
/// placeholders, deduplicated files) are opened as the file they are, after checking the second
/// handle is the same file as the first.
pub fn open_read(path: &Path) -> io::Result<File> {
    open(path, false)
}

/// Opens `path` for reading and writing (never made) with the same care as [`open_read`].
pub fn open_read_write(path: &Path) -> io::Result<File> {
    open(path, true)
}

/// Opens `path` for reading and writing, created if missing, with the same care as
/// [`open_read`]: a reparse point is not followed, and only a disk file is opened.
pub fn open_state(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    open_with(path, options)
}

/// Opens `path` for appending, created if missing, with the same care as [`open_read`]; the
/// caller checks that what it got is a regular file.
pub fn open_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.append(true).create(true);
    open_with(path, options)
}

/// Makes a new file at `path` for reading and writing; an error if anything is there already.
/// (It is the user's as its directory's inherited ACL says: no mode bits here.)
pub fn create_new_private(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).create_new(true).open(path)
}

/// Makes `dir` and its parents where missing (their ACL inherited, as for any new directory).
pub fn create_dir_private(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).create(dir)
}

fn open(path: &Path, write: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(write);
    open_with(path, options)
}

fn open_with(path: &Path, options: OpenOptions) -> io::Result<File> {
    let file = options.clone().custom_flags(FILE_FLAG_OPEN_REPARSE_POINT).open(path)?;
    // SAFETY: the handle is open for the duration of the call.
    if unsafe { GetFileType(file.as_raw_handle()) } != FILE_TYPE_DISK {
        return Err(refused("device"));
    }
    let meta = file.metadata()?;
    if meta.file_type().is_symlink() {
        return Err(refused("symlink"));
    }
    if meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT == 0 {
        return Ok(file);
    }
    let through = options.open(path)?;
    if volume_and_index(&through)? != volume_and_index(&file)? {
        return Err(refused("symlink")); // swapped between the two opens
    }
    Ok(through)
}

/// `ReplaceFileW` documents that the replacement "assumes the name of the replaced file and
/// its identity": the displaced file's id is not relied on (its content is checked instead).
pub const SWAP_KEEPS_FILE_IDS: bool = false;

/// What makes an open file the file it is: the volume and the file index.
pub fn file_id(file: &File) -> io::Result<(u64, u64)> {
    let (volume, high, low) = volume_and_index(file)?;
    Ok((volume.into(), (u64::from(high) << 32) | u64::from(low)))
}

/// [`file_id`] of what is at `path` (not followed), or `None` if that is no regular file.
pub fn path_file_id(path: &Path) -> io::Result<Option<(u64, u64)>> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_file() || meta.file_type().is_symlink() {
        return Ok(None);
    }
    match open_read(path) {
        Ok(file) => file_id(&file).map(Some),
        Err(e) if refusal_kind(&e).is_some() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Windows has no leases; a program that holds the file open without sharing delete makes
/// the replace fail with a sharing violation, which is "busy" already (see [`is_busy`]).
pub fn take_lease(_file: &File) -> crate::sys::Lease {
    crate::sys::Lease::Unavailable
}

/// Never held, never broken.
pub fn lease_broken(_file: &File) -> bool {
    false
}

/// Never held.
pub fn release_lease(_file: &File) {}

/// Windows has no leases: a reader is never held back (see `fsio::replace_checked`).
pub fn take_write_lease(_file: &File) -> crate::sys::Lease {
    crate::sys::Lease::Unavailable
}

/// Windows has no unnamed files: temp files are made with a name (see `fsio`).
pub fn unnamed_file_in(_dir: &Path) -> io::Result<Option<File>> {
    Ok(None)
}

/// Never called: [`unnamed_file_in`] makes no unnamed file.
pub fn name_unnamed(_file: &File, _path: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Moves `from` to `to` only if nothing is at `to` (`MoveFileExW` without
/// `MOVEFILE_REPLACE_EXISTING`).
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    // SAFETY: valid NUL-terminated wide paths.
    if unsafe { MoveFileExW(wide(from).as_ptr(), wide(to).as_ptr(), 0) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// True if a process `pid` is running (it may be another program that got the number since):
/// it can be opened and has no exit code yet, or it exists but is not ours to open.
pub fn process_alive(pid: u32) -> bool {
    use windows_sys::Win32::Foundation::{CloseHandle, GetLastError, ERROR_ACCESS_DENIED};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    const STILL_ACTIVE: u32 = 259;
    // SAFETY: plain calls; the handle is closed before returning.
    unsafe {
        let handle = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if handle.is_null() {
            return GetLastError() == ERROR_ACCESS_DENIED;
        }
        let mut code = 0u32;
        let running = GetExitCodeProcess(handle, &mut code) != 0 && code == STILL_ACTIVE;
        CloseHandle(handle);
        running
    }
}

/// A directory for this user alone, outside the state directory, for what must work when that
/// one cannot be used (the owner lock): `filewatch-mcp` in the user's temp directory
/// (`%TEMP%`, under the user's profile). A reparse point there is refused.
pub fn private_dir() -> io::Result<PathBuf> {
    let dir = std::env::temp_dir().join("filewatch-mcp");
    std::fs::create_dir_all(&dir)?;
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.file_type().is_symlink() {
        let e = io::Error::new(io::ErrorKind::PermissionDenied, "not a plain directory");
        return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display())));
    }
    Ok(dir)
}

/// A file name made of `bytes`, if they are UTF-8 (a name with an unpaired surrogate, which is
/// not, cannot be made again from its bytes without trusting them to be WTF-8).
pub fn os_string_from_bytes(bytes: Vec<u8>) -> Option<OsString> {
    String::from_utf8(bytes).ok().map(OsString::from)
}

/// Files are not told apart by owner here (ACLs decide who may write them).
pub fn owned_by_me(_meta: &Metadata) -> bool {
    true
}

/// The volume and file index: what makes a file the same file on Windows.
fn volume_and_index(file: &File) -> io::Result<(u32, u32, u32)> {
    let info = handle_info(file)?;
    Ok((info.dwVolumeSerialNumber, info.nFileIndexHigh, info.nFileIndexLow))
}

fn handle_info(file: &File) -> io::Result<BY_HANDLE_FILE_INFORMATION> {
    // SAFETY: a zeroed struct of plain integers is valid; the handle is open.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid for writes; the handle is open for the duration of the call.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// The kind of file an open refused to go through.
pub fn refusal_kind(e: &io::Error) -> Option<&'static str> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<Refused>()).map(|r| r.0)
}

/// Windows' file types are files, directories and links; nothing else to name.
pub fn special_kind(_ft: &FileType) -> Option<&'static str> {
    None
}

/// How many names the file has (NTFS hard links).
pub fn link_count(path: &Path, _meta: &Metadata) -> io::Result<u64> {
    Ok(handle_info(&open_read(path)?)?.nNumberOfLinks.into())
}

/// True unless opening `path` for writing is denied (ACLs). A sharing violation — another
/// program has the file open — is not "read-only": the replace will say "busy" and be retried.
pub fn writable(path: &Path) -> bool {
    let open = OpenOptions::new().write(true).custom_flags(FILE_FLAG_OPEN_REPARSE_POINT).open(path);
    !matches!(open, Err(e) if e.kind() == io::ErrorKind::PermissionDenied)
}

/// Gives `to` (a new file beside `from`) `from`'s attributes (hidden, system, archive, not
/// indexed; never tempfile's "temporary"). ACLs and alternate streams are carried by
/// `ReplaceFileW` itself.
pub fn copy_metadata(_from: &File, meta: &Metadata, _to: &File, to_path: &Path) -> io::Result<()> {
    let keep = FILE_ATTRIBUTE_ARCHIVE
        | FILE_ATTRIBUTE_HIDDEN
        | FILE_ATTRIBUTE_SYSTEM
        | FILE_ATTRIBUTE_NOT_CONTENT_INDEXED;
    let attributes = match meta.file_attributes() & keep {
        0 => FILE_ATTRIBUTE_NORMAL,
        a => a,
    };
    // SAFETY: a valid NUL-terminated wide path.
    if unsafe { SetFileAttributesW(wide(to_path).as_ptr(), attributes) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts `a`'s file at `b` and returns where `b`'s file now is: `ReplaceFileW(b, a, backup)`
/// moves what was at `b` to a backup name beside `a` in the same call, so whatever was there
/// at that instant — the scanned file or a user's newer one — is still in hand to check and,
/// if need be, put back. `a` itself is gone afterwards.
pub fn exchange(a: &Path, b: &Path) -> io::Result<PathBuf> {
    let backup = backup_name(a);
    // SAFETY: valid NUL-terminated wide paths; the two reserved pointers must be null.
    let ok = unsafe {
        ReplaceFileW(
            wide(b).as_ptr(),
            wide(a).as_ptr(),
            wide(&backup).as_ptr(),
            REPLACEFILE_WRITE_THROUGH,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if ok != 0 {
        return Ok(backup);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(ERROR_UNABLE_TO_MOVE_REPLACEMENT_2 as i32) {
        // The file at `b` was moved to the backup name but ours could not take its place: put
        // it back unless something new is there already (then that is the newest write).
        // SAFETY: valid NUL-terminated wide paths.
        unsafe { MoveFileExW(wide(&backup).as_ptr(), wide(b).as_ptr(), 0) };
    }
    Err(err)
}

/// `.a.py.XXXX.fw-tmp` → `.a.py.XXXX.was.fw-tmp`: beside the temp file, and still one of the
/// names the tree walk never reads.
fn backup_name(a: &Path) -> PathBuf {
    let name = a.file_name().unwrap_or_default().to_string_lossy();
    let stem = name.strip_suffix(".fw-tmp").unwrap_or(&name);
    let mut n = 0u32;
    loop {
        let candidate = a.with_file_name(OsString::from(format!("{stem}.was{n}.fw-tmp")));
        if std::fs::symlink_metadata(&candidate).is_err() {
            return candidate;
        }
        n += 1;
    }
}

/// The process that started this one, from a process snapshot.
pub fn parent_pid() -> Option<u32> {
    process_parent(std::process::id())
}

/// A background hook (`asyncRewake`) of `SessionStart` holds up Claude Code's start on Windows
/// (anthropics/claude-code#89960): there the hook looks once and returns.
pub const BACKGROUND_HOOKS_BLOCK: bool = true;

/// The parent of process `pid`, from a snapshot of the processes (Toolhelp).
pub fn process_parent(pid: u32) -> Option<u32> {
    use windows_sys::Win32::Foundation::{CloseHandle, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::System::Diagnostics::ToolHelp::{
        CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W,
        TH32CS_SNAPPROCESS,
    };
    // SAFETY: plain calls on a snapshot handle that is closed before returning; the entry is
    // plain data with its size set as the API requires.
    unsafe {
        let snapshot = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
        if snapshot == INVALID_HANDLE_VALUE {
            return None;
        }
        let mut entry: PROCESSENTRY32W = std::mem::zeroed();
        entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
        let mut parent = None;
        let mut more = Process32FirstW(snapshot, &mut entry) != 0;
        while more {
            if entry.th32ProcessID == pid {
                parent = Some(entry.th32ParentProcessID).filter(|&p| p != 0);
                break;
            }
            more = Process32NextW(snapshot, &mut entry) != 0;
        }
        CloseHandle(snapshot);
        parent
    }
}

/// The processes above this one, nearest first, at most `max`.
pub fn ancestors(max: usize) -> Vec<u32> {
    let mut chain = Vec::new();
    let mut pid = std::process::id();
    while chain.len() < max {
        match process_parent(pid) {
            Some(parent) if !chain.contains(&parent) => {
                chain.push(parent);
                pid = parent;
            }
            _ => break,
        }
    }
    chain
}

/// This process's stdout as a file (to compare with another), if it has one.
pub fn stdout_file() -> Option<File> {
    use std::os::windows::io::AsHandle;
    std::io::stdout().as_handle().try_clone_to_owned().ok().map(File::from)
}

/// A waiting process keeps its pages on Windows (its working set is trimmed by the OS).
pub fn release_file_pages() {}

/// A process's command line: not read on Windows (it lives in the other process's memory).
pub fn command_line(_pid: u32) -> Option<Vec<String>> {
    None
}

/// A path as people and JSON see it: `/`-separated on every OS, without the `\\?\` prefix
/// that canonical paths carry (`\\?\C:\p\a.py` → `C:/p/a.py`). A `\` is never part of a
/// file name on Windows, so every one is a separator.
pub fn slash_path(path: &Path) -> String {
    plain_path(path).to_string_lossy().replace('\\', "/")
}

/// The path without the verbatim prefix canonical paths carry, which some programs (git's
/// `-C`, a child's working directory) refuse: `\\?\C:\p` → `C:\p`, `\\?\UNC\s\x` →
/// `\\s\x`. Left as it is when it needs the prefix (over `MAX_PATH`).
pub fn plain_path(path: &Path) -> std::borrow::Cow<'_, Path> {
    use std::borrow::Cow;
    const MAX_PATH: usize = 260;
    let s = path.to_string_lossy();
    let plain = if let Some(rest) = s.strip_prefix(r"\\?\UNC\") {
        format!(r"\\{rest}")
    } else if let Some(rest) = s.strip_prefix(r"\\?\").filter(|r| r.get(1..2) == Some(":")) {
        rest.to_string()
    } else {
        return Cow::Borrowed(path);
    };
    if plain.len() >= MAX_PATH {
        return Cow::Borrowed(path);
    }
    Cow::Owned(PathBuf::from(plain))
}

fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str().encode_wide().chain(std::iter::once(0)).collect()
}

fn os_error_in(e: &io::Error, codes: &[u32]) -> bool {
    e.raw_os_error().is_some_and(|c| codes.iter().any(|&k| k as i32 == c))
}

/// True if `e` says the volume cannot replace files (some network or FAT drives): then a checked
/// `MoveFileExW(MOVEFILE_REPLACE_EXISTING)` is used.
pub fn exchange_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
        || os_error_in(e, &[ERROR_NOT_SUPPORTED, ERROR_INVALID_FUNCTION, ERROR_INVALID_PARAMETER])
}

/// True if `e` says another program holds the file open without sharing delete (an editor, an
/// indexer, a virus scanner): the replace did not happen and may be tried again later.
pub fn is_busy(e: &io::Error) -> bool {
    os_error_in(
        e,
        &[
            ERROR_SHARING_VIOLATION,
            ERROR_LOCK_VIOLATION,
            ERROR_UNABLE_TO_REMOVE_REPLACED,
            ERROR_UNABLE_TO_MOVE_REPLACEMENT,
            ERROR_UNABLE_TO_MOVE_REPLACEMENT_2,
        ],
    )
}

/// `ReadDirectoryChangesW` has no watch limit.
pub fn is_watch_limit(_e: &io::Error) -> bool {
    false
}

/// Ctrl-C, Ctrl-Break, or the console closing.
pub async fn shutdown_signal() {
    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
    let (Ok(mut c), Ok(mut brk), Ok(mut close)) = (ctrl_c(), ctrl_break(), ctrl_close()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = c.recv() => {}
        _ = brk.recv() => {}
        _ = close.recv() => {}
    }
}

/// Why watching `root` may hear nothing, if it may: nothing known on Windows.
pub fn watch_caveat(_root: &Path) -> Option<String> {
    None
}

/// `ReadDirectoryChangesW` has no per-user watch limit: one recursive watch covers the tree.
pub fn watch_limits() -> Option<super::WatchLimits> {
    None
}

/// `rel` (a directory under `root`) opened one component at a time, each the directory itself
/// (`FILE_FLAG_OPEN_REPARSE_POINT`: a symlink or junction is refused, not followed), and held
/// without `FILE_SHARE_DELETE`, with every directory above it up to the root: while they are
/// open that way none of them can be renamed or deleted, so the path names the directory that
/// was checked for as long as it is held.
pub fn dir_beneath(root: &Path, rel: &Path) -> io::Result<super::Beneath> {
    let mut path = root.to_path_buf();
    let mut held = open_dir(&path)?;
    let mut above = Vec::new();
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a plain relative path"));
        };
        path.push(name);
        above.push(std::mem::replace(&mut held, open_dir(&path)?));
    }
    Ok(super::Beneath { dir: Some(held), above, shown: path.clone(), base: path })
}

fn open_dir(path: &Path) -> io::Result<File> {
    let dir = OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    let meta = dir.metadata()?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a reparse point or no directory"));
    }
    Ok(dir)
}

/// True if `rel` under `root` is still the directory `held` was opened as (same file id).
pub fn same_dir(held: &super::Beneath, root: &Path, rel: &Path) -> bool {
    let (Some(a), Ok(now)) = (held.dir.as_ref(), dir_beneath(root, rel)) else { return false };
    let (Ok(a), Some(Ok(b))) = (file_id(a), now.dir.as_ref().map(file_id)) else { return false };
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory reached by `dir_beneath` cannot be renamed away while it is held.
    #[test]
    fn a_held_directory_cannot_be_swapped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a").join("b")).unwrap();
        let rel = Path::new("a").join("b");
        let held = dir_beneath(root, &rel).unwrap();
        assert!(std::fs::rename(root.join(&rel), root.join("a").join("c")).is_err());
        assert!(std::fs::rename(root.join("a"), root.join("z")).is_err());
        assert!(same_dir(&held, root, &rel));
        drop(held);
        std::fs::rename(root.join(&rel), root.join("a").join("c")).unwrap();
    }
}
