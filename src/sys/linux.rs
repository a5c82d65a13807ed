//! Linux: `renameat2(RENAME_EXCHANGE)`, read leases for "nobody is writing it" and write
//! leases for "nobody reads it yet", `O_TMPFILE` for a temp file that has no name until it is
//! whole, extended attributes by `f*xattr`, inotify per directory.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};

use super::{c_path, check};
use crate::sys::{Lease, MetadataLost, WatchMode};

/// A name for files in the directory `dir` is open on that does not walk its path again:
/// `/proc/self/fd/N` (the kernel resolves it to the open directory itself).
pub fn fd_path(dir: &File) -> Option<PathBuf> {
    let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    path.is_dir().then_some(path)
}

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

/// Moves `from` to `to` only if nothing is at `to` (`renameat2(RENAME_NOREPLACE)`; where the
/// file system cannot, a look at `to` first).
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let (cf, ct) = (c_path(from)?, c_path(to)?);
    // SAFETY: both are valid NUL-terminated paths.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            cf.as_ptr(),
            libc::AT_FDCWD,
            ct.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    match check(rc as libc::c_int) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {
            super::rename_if_absent(from, to)
        }
        other => other,
    }
}

/// A new file in `dir`, open read-write, that has no name (`O_TMPFILE`): if the process dies
/// before [`name_unnamed`] names it, nothing of it is left. `None` where the file system or the
/// kernel cannot make one, or `/proc` (which names it) is not there.
pub fn unnamed_file_in(dir: &Path) -> io::Result<Option<File>> {
    if !Path::new("/proc/self/fd").is_dir() {
        return Ok(None);
    }
    let c = c_path(dir)?;
    let flags = libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC;
    // SAFETY: a valid NUL-terminated path; the mode is a plain integer.
    let fd = unsafe { libc::open(c.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(Some(unsafe { File::from_raw_fd(fd) }))
}

/// Gives the file [`unnamed_file_in`] made the name `path`, which must be free (`linkat` of
/// its `/proc/self/fd` entry).
pub fn name_unnamed(file: &File, path: &Path) -> io::Result<()> {
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let to = c_path(path)?;
    // SAFETY: both are valid NUL-terminated paths.
    check(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })
}

/// Installs the SIGIO handler a lease needs (see [`take_lease`]), once.
fn handle_sigio() {
    static SIGIO_HANDLED: std::sync::Once = std::sync::Once::new();
    SIGIO_HANDLED.call_once(ignore_sigio);
}

/// Takes a read lease on `file` (open read-only). A read lease, not a write lease: it is
/// refused (`EAGAIN`) only while someone has the file open for *writing*, and broken only by an
/// open for writing or a truncate — so an editor or a language server that merely keeps the
/// file open for reading never keeps it from being stamped, as a write lease's "nobody has it
/// open at all" would. Only the file's owner (or `CAP_LEASE`) may take one, and only where the
/// file system supports it (not NFS, not FUSE): otherwise [`Lease::Unavailable`].
///
/// A broken lease signals its holder with SIGIO, whose default action ends the process: a
/// handler that does nothing is installed first (the break is read with [`lease_broken`]).
pub fn take_lease(file: &File) -> Lease {
    set_lease(file, libc::F_RDLCK)
}

/// Takes a write lease on `file`, our own new file (open read-write, and by nobody else):
/// from then on whoever opens it — to read or to write — waits in `open(2)` until we give the
/// lease up (or the kernel's `lease-break-time`, 45 s, runs out). [`Lease::Busy`] if another descriptor has it open.
pub fn take_write_lease(file: &File) -> Lease {
    set_lease(file, libc::F_WRLCK)
}

fn set_lease(file: &File, kind: libc::c_int) -> Lease {
    handle_sigio();
    // SAFETY: a plain fcntl on an open descriptor.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, kind) } == 0 {
        return Lease::Held;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => Lease::Busy,
        _ => Lease::Unavailable, // EACCES (not ours), EINVAL (file system), ENOLCK, ...
    }
}

/// Gives up the lease [`take_lease`] took on `file` (as closing it would).
pub fn release_lease(file: &File) {
    // SAFETY: a plain fcntl on an open descriptor.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
}

/// True if the lease [`take_lease`] took on `file` is being broken: someone is opening the
/// file for writing (and waits for us to close `file`) or truncating it.
pub fn lease_broken(file: &File) -> bool {
    // SAFETY: a plain fcntl on an open descriptor.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLEASE) != libc::F_RDLCK }
}

/// Installs a SIGIO handler that does nothing, unless the program has one already. A handler
/// rather than `SIG_IGN`: an ignored signal stays ignored in the programs we start (git).
fn ignore_sigio() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: zeroed `sigaction` structs are valid; `nothing` is async-signal-safe.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGIO, std::ptr::null(), &mut old) != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            return;
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGIO, &action, std::ptr::null_mut());
    }
}

/// Copies every extended attribute: `user.*`, the POSIX ACL (`system.posix_acl_access`),
/// `security.*` (SELinux labels, capabilities, IMA) and `trusted.*`. One the new file already
/// holds with the same value (a label the policy gave it) is left as it is; one that cannot be
/// set (`EPERM`: not root; `ENOTSUP`) is [`MetadataLost`], never silently dropped.
pub fn copy_xattrs(from: &File, to: &File) -> io::Result<()> {
    for name in list(from)? {
        let Some(value) = get(from, &name)? else { continue };
        if get(to, &name)?.as_ref() == Some(&value) {
            continue;
        }
        // SAFETY: `name` is NUL-terminated, `value` is a valid buffer of its length.
        let rc = unsafe {
            libc::fsetxattr(to.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0)
        };
        if let Err(e) = check(rc) {
            return Err(match e.raw_os_error() {
                Some(libc::EPERM | libc::EACCES | libc::ENOTSUP | libc::EINVAL) => {
                    let what = format!("extended attribute {}", name.to_string_lossy());
                    io::Error::other(MetadataLost(what))
                }
                _ => xattr_error(e, &name),
            });
        }
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

/// Why watching `root` may hear nothing, if it may: under WSL a Windows drive (`/mnt/c`) is a
/// 9p (WSL 2) or drvfs (WSL 1) mount, and what Windows programs write there brings no inotify
/// event. The same holds for other 9p shares (virtual machines' host folders).
pub fn watch_caveat(root: &Path) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let fstype = fstype_of(&mounts, root)?;
    matches!(fstype.as_str(), "9p" | "drvfs").then(|| {
        format!(
            "{} is on a {fstype} mount (a Windows drive under WSL?): changes made from outside \
             Linux bring no file events here. Keep the project in the Linux file system \
             (e.g. ~/src, opened from Windows as \\\\wsl$\\...), or run filewatch-mcp.exe on \
             Windows itself",
            root.display()
        )
    })
}

/// The file system type of the deepest mount holding `path`, from `/proc/self/mounts` text.
fn fstype_of(mounts: &str, path: &Path) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for line in mounts.lines() {
        let mut fields = line.split(' ');
        let (Some(_), Some(dir), Some(fstype)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let dir = dir.replace("\\040", " ");
        if path.starts_with(&dir) && best.is_none_or(|(len, _)| dir.len() >= len) {
            best = Some((dir.len(), fstype));
        }
    }
    best.map(|(_, fstype)| fstype.to_string())
}

/// inotify's limits (`/proc/sys/fs/inotify`) and what this user's processes hold of them: each
/// inotify descriptor in `/proc/<pid>/fd` of a process of this user's, and its `inotify wd:`
/// lines in `/proc/<pid>/fdinfo` (one a watch). `None` where the limits cannot be read.
pub fn watch_limits() -> Option<crate::sys::WatchLimits> {
    use std::os::unix::fs::MetadataExt;
    let limit = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/sys/fs/inotify/{name}")).ok()?.trim().parse().ok()
    };
    let (max_watches, max_instances) = (limit("max_user_watches")?, limit("max_user_instances")?);
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let (mut watches_in_use, mut instances_in_use) = (0, 0);
    for process in std::fs::read_dir("/proc").ok()?.flatten() {
        let ours = process.metadata().is_ok_and(|m| m.uid() == uid);
        let is_pid = process.file_name().to_str().is_some_and(|n| n.parse::<u32>().is_ok());
        if !ours || !is_pid {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            let is_inotify = std::fs::read_link(fd.path())
                .is_ok_and(|target| target.as_os_str() == "anon_inode:inotify");
            if !is_inotify {
                continue;
            }
            instances_in_use += 1;
            let info = process.path().join("fdinfo").join(fd.file_name());
            let info = std::fs::read_to_string(info).unwrap_or_default();
            watches_in_use += info.lines().filter(|l| l.starts_with("inotify wd:")).count() as u64;
        }
    }
    Some(crate::sys::WatchLimits { max_watches, max_instances, watches_in_use, instances_in_use })
}

/// The parent of process `pid`, from `/proc/<pid>/stat` (the field after the state, which
/// follows the last `)`: a command name may hold one).
pub fn process_parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    let fields = std::str::from_utf8(after).ok()?;
    fields.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Gives back this process's resident pages of files it maps read-only and never wrote (its
/// binary's code and constants, the libraries'): `madvise(MADV_DONTNEED)` drops them from the
/// process, not from the page cache, and a later access maps them again with a minor fault. A
/// mapping holding a private copy of any page (data the loader relocated: `Anonymous` above 0 in
/// `/proc/self/smaps`) is left alone, since dropping it would lose that copy. For a process
/// that is about to wait for hours (the background hook): starting touched megabytes of code
/// it will not run again until it wakes.
pub fn release_file_pages() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return };
    let mut candidate: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        let mut words = line.split_ascii_whitespace();
        let first = words.next().unwrap_or_default();
        if let Some((start, end)) = first.split_once('-') {
            // A mapping's header: `start-end perms offset device inode [path]`.
            let range =
                usize::from_str_radix(start, 16).ok().zip(usize::from_str_radix(end, 16).ok());
            let perms = words.next().unwrap_or_default().as_bytes();
            let path = words.nth(3).unwrap_or_default();
            let clean_file =
                perms.len() == 4 && perms[1] == b'-' && perms[3] == b'p' && path.starts_with('/');
            candidate = range.filter(|_| clean_file);
        } else if first == "Anonymous:" {
            if let (Some((start, end)), Some("0")) = (candidate.take(), words.next()) {
                // SAFETY: the range is one of this process's mappings, read-only, private and
                // without a private page: dropping its pages changes nothing it reads.
                unsafe {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED)
                };
            }
        }
    }
}

/// The command line of process `pid`, from `/proc/<pid>/cmdline`.
pub fn command_line(pid: u32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args = bytes.split(|&b| b == 0).filter(|a| !a.is_empty());
    Some(args.map(|a| String::from_utf8_lossy(a).into_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held directory names its files `/proc/self/fd/N/…`; messages name them from the root.
    #[test]
    fn a_held_directory_shows_the_users_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pkg")).unwrap();
        let held = crate::sys::dir_beneath(dir.path(), Path::new("pkg")).unwrap();
        let inside = held.path("a.py".as_ref());
        assert!(inside.starts_with("/proc/self/fd"), "{}", inside.display());
        assert_eq!(held.shown(&inside), dir.path().join("pkg/a.py"));
        assert_eq!(held.shown(held.dir_path()), dir.path().join("pkg"));
        assert_eq!(held.shown(Path::new("/elsewhere/b.py")), Path::new("/elsewhere/b.py"));
    }

    #[test]
    fn a_windows_drive_under_wsl_is_named() {
        let mounts = "none / ext4 rw 0 0\n\
                      C:\\134 /mnt/c 9p rw,dirsync,aname=drvfs 0 0\n\
                      tmpfs /mnt/c/tmp\\040dir tmpfs rw 0 0\n";
        assert_eq!(fstype_of(mounts, Path::new("/home/u/src")).as_deref(), Some("ext4"));
        assert_eq!(fstype_of(mounts, Path::new("/mnt/c/Users/u/proj")).as_deref(), Some("9p"));
        assert_eq!(fstype_of(mounts, Path::new("/mnt/c/tmp dir/x")).as_deref(), Some("tmpfs"));
        assert_eq!(fstype_of(mounts, Path::new("/mnt/cc")).as_deref(), Some("ext4"));
    }
}
