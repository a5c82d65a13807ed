//! Linux: `renameat2(RENAME_EXCHANGE)`, extended attributes by `f*xattr`, inotify per directory.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::{c_path, check};
use crate::sys::WatchMode;

/// inotify watches one directory per watch and costs nothing for the directories it skips.
pub const WATCH_MODE: WatchMode = WatchMode::PerDirectory;

/// Atomically exchanges two paths (both must exist); `a` then holds what was at `b`.
pub fn exchange(a: &Path, b: &Path) -> io::Result<PathBuf> {
    let (ca, cb) = (c_path(a)?, c_path(b)?);
    // SAFETY: both are valid NUL-terminated paths; the raw syscall avoids needing a glibc new
    // enough to wrap renameat2.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    check(rc as libc::c_int).map(|()| a.to_path_buf())
}

/// Copies the extended attributes a file's owner may set: `user.*` and `system.*` (POSIX ACLs).
/// `security.*` (SELinux labels, capabilities) and `trusted.*` are the policy's and root's: the
/// new file gets what the policy gives any editor's save.
pub fn copy_xattrs(from: &File, to: &File) -> io::Result<()> {
    for name in list(from)? {
        let bytes = name.to_bytes();
        if !(bytes.starts_with(b"user.") || bytes.starts_with(b"system.")) {
            continue;
        }
        let Some(value) = get(from, &name)? else { continue };
        // SAFETY: `name` is NUL-terminated, `value` is a valid buffer of its length.
        let rc = unsafe {
            libc::fsetxattr(to.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0)
        };
        check(rc).map_err(|e| xattr_error(e, &name))?;
    }
    Ok(())
}

fn xattr_error(e: io::Error, name: &std::ffi::CStr) -> io::Error {
    io::Error::new(e.kind(), format!("extended attribute {}: {e}", name.to_string_lossy()))
}

fn list(file: &File) -> io::Result<Vec<std::ffi::CString>> {
    let fd = file.as_raw_fd();
    loop {
        // SAFETY: a null buffer of size 0 asks for the size.
        let size = unsafe { libc::flistxattr(fd, std::ptr::null_mut(), 0) };
        if size < 0 {
            let e = io::Error::last_os_error();
            return if unsupported(&e) { Ok(Vec::new()) } else { Err(e) };
        }
        let mut buf = vec![0u8; size as usize];
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        let got = unsafe { libc::flistxattr(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if got < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) {
                continue; // grew in between
            }
            return Err(e);
        }
        buf.truncate(got as usize);
        return Ok(split_names(&buf));
    }
}

fn get(file: &File, name: &std::ffi::CStr) -> io::Result<Option<Vec<u8>>> {
    let fd = file.as_raw_fd();
    loop {
        // SAFETY: a null buffer of size 0 asks for the size.
        let size = unsafe { libc::fgetxattr(fd, name.as_ptr(), std::ptr::null_mut(), 0) };
        if size < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ENODATA) { Ok(None) } else { Err(e) };
        }
        let mut buf = vec![0u8; size as usize];
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        let got = unsafe { libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if got < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) {
                continue;
            }
            return if e.raw_os_error() == Some(libc::ENODATA) { Ok(None) } else { Err(e) };
        }
        buf.truncate(got as usize);
        return Ok(Some(buf));
    }
}

fn unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(c) if c == libc::ENOTSUP || c == libc::EOPNOTSUPP)
}

/// The names in a `listxattr` buffer (each NUL-terminated).
fn split_names(buf: &[u8]) -> Vec<std::ffi::CString> {
    buf.split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .filter_map(|n| std::ffi::CString::new(n).ok())
        .collect()
}
