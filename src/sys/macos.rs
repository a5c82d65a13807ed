//! macOS: `renamex_np(RENAME_SWAP)` (APFS and HFS+, 10.12+), extended attributes and ACLs by
//! `fcopyfile`, one recursive FSEvents stream.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::{c_path, check};
use crate::sys::WatchMode;

/// notify's FSEvents watcher keeps one stream and re-creates it, with every path, on each
/// `watch` call: one recursive watch on the root, and the ignore rules applied to events.
pub const WATCH_MODE: WatchMode = WatchMode::Recursive;

/// Atomically exchanges two paths (both must exist); `a` then holds what was at `b`: the same swap as Linux's
/// `renameat2(RENAME_EXCHANGE)`. File systems without it (exFAT, SMB) say `ENOTSUP`.
pub fn exchange(a: &Path, b: &Path) -> io::Result<PathBuf> {
    let (ca, cb) = (c_path(a)?, c_path(b)?);
    // SAFETY: both are valid NUL-terminated paths.
    check(unsafe { libc::renamex_np(ca.as_ptr(), cb.as_ptr(), libc::RENAME_SWAP) })
        .map(|()| a.to_path_buf())
}

/// Moves `from` to `to` only if nothing is at `to` (`renamex_np(RENAME_EXCL)`; where the
/// file system cannot, a look at `to` first).
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let (cf, ct) = (c_path(from)?, c_path(to)?);
    // SAFETY: both are valid NUL-terminated paths.
    match check(unsafe { libc::renamex_np(cf.as_ptr(), ct.as_ptr(), libc::RENAME_EXCL) }) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTSUP | libc::EINVAL)) => {
            super::rename_if_absent(from, to)
        }
        other => other,
    }
}

/// macOS has no `O_TMPFILE`: temp files are made with a name (see `fsio`).
pub fn unnamed_file_in(_dir: &Path) -> io::Result<Option<File>> {
    Ok(None)
}

/// Never called: [`unnamed_file_in`] makes no unnamed file.
pub fn name_unnamed(_file: &File, _path: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Copies extended attributes (`com.apple.quarantine`, Finder info, resource forks, tags) and
/// the ACL. Not `COPYFILE_STAT` (owner and mode are set before, the times after the last
/// write: see `sys::keep_times`).
pub fn copy_xattrs(from: &File, to: &File) -> io::Result<()> {
    // SAFETY: both descriptors are open for the duration of the call; a null state is allowed.
    let rc = unsafe {
        libc::fcopyfile(
            from.as_raw_fd(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            libc::COPYFILE_ACL | libc::COPYFILE_XATTR,
        )
    };
    match check(rc) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => Ok(()),
        other => other,
    }
}

/// macOS has no leases: whether another program is writing the file is not known (see
/// `fsio::replace_checked` for what is checked instead).
pub fn take_lease(_file: &File) -> crate::sys::Lease {
    crate::sys::Lease::Unavailable
}

/// Never held, never broken.
pub fn lease_broken(_file: &File) -> bool {
    false
}

/// Never held.
pub fn release_lease(_file: &File) {}

/// macOS has no leases: a reader is never held back (see `fsio::replace_checked`).
pub fn take_write_lease(_file: &File) -> crate::sys::Lease {
    crate::sys::Lease::Unavailable
}

/// Why watching `root` may hear nothing, if it may: nothing known on macOS.
pub fn watch_caveat(_root: &Path) -> Option<String> {
    None
}

/// FSEvents has no per-user watch limit: one recursive stream watches the whole tree.
pub fn watch_limits() -> Option<crate::sys::WatchLimits> {
    None
}

/// macOS has no path that names an open directory itself (`/dev/fd/N` is not traversable):
/// files are named by their path, checked component by component just before.
pub fn fd_path(_dir: &std::fs::File) -> Option<std::path::PathBuf> {
    None
}

/// The parent of process `pid`, as `ps` says (macOS keeps it behind `sysctl`; this runs once
/// per server start, never per save).
pub fn process_parent(pid: u32) -> Option<u32> {
    ps(pid, "ppid=")?.trim().parse().ok()
}

/// A waiting process keeps its pages: macOS has no equivalent of Linux's `/proc/self/smaps` to
/// tell which mappings hold no private copy.
pub fn release_file_pages() {}

/// The command line of process `pid`, as `ps` prints it (arguments split at spaces).
pub fn command_line(pid: u32) -> Option<Vec<String>> {
    Some(ps(pid, "command=")?.split_whitespace().map(str::to_string).collect())
}

fn ps(pid: u32, field: &str) -> Option<String> {
    let out = std::process::Command::new("ps")
        .args(["-o", field, "-p", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
