//! What Linux and macOS share: `open(2)` flags that neither follow nor block, link counts from
//! `stat`, `access(2)` for writability, owner and mode carried by `fchown`/`fchmod`, signals.
//! The exchange and the extended attributes differ and live in `linux.rs` / `macos.rs`.

use std::ffi::CString;
use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

#[cfg(any(target_os = "linux", target_os = "android"))]
#[path = "linux.rs"]
mod os;
#[cfg(target_os = "macos")]
#[path = "macos.rs"]
mod os;

pub use os::{
    command_line, exchange, lease_broken, name_unnamed, release_file_pages, release_lease,
    rename_noreplace, take_lease, take_write_lease, unnamed_file_in, watch_caveat, watch_limits,
    WATCH_MODE,
};

/// A background hook (`asyncRewake`) runs beside the session: Claude Code's start does not wait
/// for it.
pub const BACKGROUND_HOOKS_BLOCK: bool = false;

/// Opens `rel` (a directory under `root`) one component at a time, each relative to the one
/// before and with `O_NOFOLLOW | O_DIRECTORY`: a symlink anywhere below the root fails
/// (`ELOOP`/`ENOTDIR`), and a directory renamed or replaced meanwhile is not followed either.
pub fn dir_beneath(root: &Path, rel: &Path) -> io::Result<super::Beneath> {
    let mut dir = File::open(root)?;
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a plain relative path"));
        };
        let name = CString::new(name.as_bytes())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        dir = unsafe { File::from_raw_fd(fd) };
    }
    let base = os::fd_path(&dir).unwrap_or_else(|| root.join(rel));
    Ok(super::Beneath { dir: Some(dir), above: Vec::new(), base, shown: root.join(rel) })
}

/// True if `rel` under `root` still is the directory `held` was opened as (same device and
/// inode): nobody swapped it out from under us.
pub fn same_dir(held: &super::Beneath, root: &Path, rel: &Path) -> bool {
    let (Some(a), Ok(now)) = (held.dir.as_ref(), dir_beneath(root, rel)) else { return false };
    let (Ok(a), Some(Ok(b))) = (a.metadata(), now.dir.as_ref().map(File::metadata)) else {
        return false;
    };
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

/// Opens `path` for reading without following a symlink at its last component and without
/// waiting for a FIFO's writer (`O_NOFOLLOW | O_NONBLOCK`).
pub fn open_read(path: &Path) -> io::Result<File> {
    open(path, false)
}

/// Opens `path` for reading and writing (never made) with the same care as [`open_read`].
pub fn open_read_write(path: &Path) -> io::Result<File> {
    open(path, true)
}

/// Opens `path` for reading and writing, created (mode 0600, for this user alone) if missing,
/// with the same care as [`open_read`]: a symlink at its last component is refused and a FIFO
/// is not waited for. The caller checks that what it got is a regular file.
pub fn open_state(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

fn open(path: &Path, write: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Opens `path` for appending (made if missing) without following a symlink at it or waiting
/// for a FIFO's reader; anything but a regular file is refused.
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(file)
}

/// Makes a new file at `path` for reading and writing, for this user alone (mode 0600); an
/// error if anything is there already.
pub fn create_new_private(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path)
}

/// Makes `dir` and its parents where missing, for this user alone (mode 0700).
pub fn create_dir_private(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// The exchange moves names, never files: what it displaced has the device and inode it had.
pub const SWAP_KEEPS_FILE_IDS: bool = true;

/// What makes an open file the file it is: device and inode.
pub fn file_id(file: &File) -> io::Result<(u64, u64)> {
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

/// [`file_id`] of what is at `path` (not followed), or `None` if that is no regular file.
pub fn path_file_id(path: &Path) -> io::Result<Option<(u64, u64)>> {
    let meta = std::fs::symlink_metadata(path)?;
    Ok(meta.is_file().then(|| (meta.dev(), meta.ino())))
}

/// The kind of file an open refused to go through: `open(O_NOFOLLOW)` on a symlink fails with
/// `ELOOP`.
pub fn refusal_kind(e: &io::Error) -> Option<&'static str> {
    (e.raw_os_error() == Some(libc::ELOOP)).then_some("symlink")
}

/// Names the file types only Unix has.
pub fn special_kind(ft: &FileType) -> Option<&'static str> {
    if ft.is_fifo() {
        Some("fifo")
    } else if ft.is_socket() {
        Some("socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        Some("device")
    } else {
        None
    }
}

/// How many names the file has.
pub fn link_count(_path: &Path, meta: &Metadata) -> io::Result<u64> {
    Ok(meta.nlink())
}

/// True if this process may write `path` (mode bits, ACLs, read-only mounts: `access(W_OK)`).
pub fn writable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Gives `to` (a new file beside `from`, already written) all of `from`'s metadata: owner and
/// group, then the mode with its setuid/setgid/sticky bits (a `chown` clears setuid/setgid, so
/// it comes first), then the extended attributes (on Linux all of them: `user.*`, the POSIX
/// ACL, `security.*` and `trusted.*`; xattrs and ACLs via `fcopyfile` on macOS). Whatever
/// cannot be carried over (another owner when we are not root, a setgid bit for a group we
/// are not in, a `security.*` attribute the policy keeps) fails with [`super::MetadataLost`]:
/// a stamp must not strip it.
pub fn copy_metadata(from: &File, meta: &Metadata, to: &File, _to_path: &Path) -> io::Result<()> {
    let lost = |what: String| io::Error::other(super::MetadataLost(what));
    let now = to.metadata()?;
    if (now.uid(), now.gid()) != (meta.uid(), meta.gid()) {
        // Only root may give a file away; an owner may pick a group they are in.
        std::os::unix::fs::fchown(to, Some(meta.uid()), Some(meta.gid()))
            .map_err(|_| lost(format!("owner {}:{}", meta.uid(), meta.gid())))?;
    }
    let mode = meta.mode() & 0o7777;
    to.set_permissions(std::fs::Permissions::from_mode(mode))?;
    os::copy_xattrs(from, to)?;
    // The kernel drops a setgid bit it does not allow without an error: look.
    let got = to.metadata()?.mode() & 0o7777;
    if got != mode {
        return Err(lost(format!("mode {mode:o} (a new file gets {got:o})")));
    }
    Ok(())
}

/// True if `e` says the file system cannot exchange two names (then a checked rename is used).
pub fn exchange_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
        || matches!(e.raw_os_error(), Some(code) if code == libc::EINVAL || code == libc::ENOSYS || code == libc::ENOTSUP || code == libc::EOPNOTSUPP)
}

/// True if `e` says another program holds the file in a way that bars the replace for now.
/// Unix has no mandatory sharing modes: never.
pub fn is_busy(_e: &io::Error) -> bool {
    false
}

/// True if `e` says the OS watch limit was reached (inotify: `ENOSPC`).
pub fn is_watch_limit(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC)
}

/// A path as people and JSON see it: `/`-separated on every OS (here it already is).
pub fn slash_path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The path in the form other programs (git) take; on Unix, as it is.
pub fn plain_path(path: &Path) -> std::borrow::Cow<'_, Path> {
    std::borrow::Cow::Borrowed(path)
}

/// The path as a C string for the raw calls.
fn c_path(path: &Path) -> io::Result<CString> {
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// SIGINT, SIGTERM or SIGHUP (a terminal closed, an `ssh` session ended: its default action
/// would end the process in the middle of a stamp).
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = hup.recv() => {}
    }
}

/// True if a process `pid` is running (it may be another program that got the number since):
/// `kill(pid, 0)` succeeds, or says it is not ours to signal.
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only checks the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A directory for this user alone, outside the state directory, for what must work when that
/// one cannot be used (the owner lock): `$XDG_RUNTIME_DIR/filewatch-mcp` (a per-user tmpfs
/// where systemd makes one), else `filewatch-mcp-<uid>` in the temp directory. Made mode
/// 0700 if missing; one that is not a real directory of ours that only we can enter (another
/// user's planted in a shared `/tmp`, a symlink) is refused, and the next place is tried.
pub fn private_dir() -> io::Result<std::path::PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|p| p.join("filewatch-mcp"));
    let temp = std::env::temp_dir().join(format!("filewatch-mcp-{uid}"));
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no private directory");
    for dir in runtime.into_iter().chain([temp]) {
        match make_private(&dir, uid) {
            Ok(()) => return Ok(dir),
            Err(e) => last = io::Error::new(e.kind(), format!("{}: {e}", dir.display())),
        }
    }
    Err(last)
}

/// Makes `dir` (mode 0700) unless it exists, and checks that it is a directory (not a
/// symlink) that `uid` owns and nobody else may enter.
fn make_private(dir: &Path, uid: libc::uid_t) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not a directory of this user's alone; not used",
        ));
    }
    Ok(())
}

/// True if this process's user owns the file.
pub fn owned_by_me(meta: &Metadata) -> bool {
    // SAFETY: geteuid has no preconditions.
    meta.uid() == unsafe { libc::geteuid() }
}

/// [`rename_noreplace`] where the file system has no such rename: a look, then a rename (a
/// file put at `to` in between is replaced: that moment is the fallback's).
fn rename_if_absent(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(to) {
        Ok(_) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::rename(from, to),
        Err(e) => Err(e),
    }
}

/// A file name made of `bytes` (any but `/` and NUL make one here).
pub fn os_string_from_bytes(bytes: Vec<u8>) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    Some(std::ffi::OsString::from_vec(bytes))
}

/// This process's stdout as a file (to compare with another), if it has one.
pub fn stdout_file() -> Option<File> {
    use std::os::fd::AsFd;
    std::io::stdout().as_fd().try_clone_to_owned().ok().map(File::from)
}

/// The process that started this one (Claude Code, a shell): what a user recognises.
pub fn parent_pid() -> Option<u32> {
    Some(std::os::unix::process::parent_id())
}

/// The processes above this one, nearest first, at most `max` (init not counted): the Claude
/// Code session that started a server is among them, however many launchers are in between.
pub fn ancestors(max: usize) -> Vec<u32> {
    let mut chain = Vec::new();
    let mut pid = std::os::unix::process::parent_id();
    while pid > 1 && chain.len() < max && !chain.contains(&pid) {
        chain.push(pid);
        match os::process_parent(pid) {
            Some(parent) => pid = parent,
            None => break,
        }
    }
    chain
}

/// The result of a raw call that returns 0 or -1 with `errno`.
fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
