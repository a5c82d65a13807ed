//! The platform seam from outside, on whatever OS runs it (Linux natively, Windows under Wine
//! in `.ci/cross.sh`): the checked replace's guarantees, the odd files it refuses, and paths in
//! asks written with `/` everywhere. OS-specific cases are gated and say what they stand for.

mod common;

use std::path::{Path, PathBuf};

use common::temp_files;
use filewatch_mcp::{read_source, relative, replace_checked, ReadError, WriteError};

fn write(dir: &Path, rel: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn paths_in_asks_use_forward_slashes() {
    let root = Path::new("project");
    let nested = root.join("src").join("deep").join("a.py");
    assert_eq!(relative(root, &nested), "src/deep/a.py");
}

#[test]
fn replace_writes_exactly_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = b"\xef\xbb\xbfline\r\n// @claude x\r\nno newline";
    let p = write(dir.path(), "a.rs", bytes);
    replace_checked(&p, bytes, b"stamped\r\n").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"stamped\r\n");
    assert!(temp_files(dir.path()).is_empty(), "{:?}", temp_files(dir.path()));
    // And again, over the file we wrote ourselves.
    replace_checked(&p, b"stamped\r\n", b"again").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"again");
    assert!(temp_files(dir.path()).is_empty());
}

#[test]
fn a_changed_file_is_a_conflict_and_keeps_the_users_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.py", b"the user's newer bytes");
    let err = replace_checked(&p, b"what was scanned", b"stamped").unwrap_err();
    assert!(matches!(err, WriteError::Conflict { .. }), "{err}");
    assert_eq!(std::fs::read(&p).unwrap(), b"the user's newer bytes");
    assert!(temp_files(dir.path()).is_empty());
}

#[test]
fn read_only_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "ro.py", b"old");
    let mut perms = std::fs::metadata(&p).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&p, perms).unwrap();
    let err = replace_checked(&p, b"old", b"new").unwrap_err();
    assert!(matches!(err, WriteError::ReadOnly { .. }), "{err}");
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    // Let the temp dir go on Windows, where read-only files cannot be deleted.
    let mut perms = std::fs::metadata(&p).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&p, perms).unwrap();
}

/// A file with several names is never written: a new file would split the names, and a
/// rewrite in place could leave it short (a full disk) or padded (a racing truncate).
#[test]
fn hard_linked_files_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.py", b"old");
    let b = dir.path().join("b.py");
    if let Err(e) = std::fs::hard_link(&a, &b) {
        eprintln!("skipped: no hard links on this file system ({e})");
        return;
    }
    let err = replace_checked(&a, b"old", b"new").unwrap_err();
    assert!(matches!(err, WriteError::Untaggable { .. }), "{err}");
    assert_eq!(std::fs::read(&a).unwrap(), b"old");
    assert_eq!(std::fs::read(&b).unwrap(), b"old");
    assert!(temp_files(dir.path()).is_empty());
}

#[test]
fn directories_and_missing_files_are_not_read_or_written() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(read_source(dir.path()), Err(ReadError::NotRegular { .. })));
    let err = replace_checked(dir.path(), b"", b"x").unwrap_err();
    assert!(matches!(err, WriteError::NotRegular { kind: "directory", .. }), "{err}");
    let missing = dir.path().join("missing.py");
    assert!(matches!(read_source(&missing), Err(ReadError::Io { .. })));
    assert!(replace_checked(&missing, b"", b"x").is_err());
    assert!(!missing.exists());
}

/// Creates a symlink to a file, or says why it cannot (Windows needs a privilege for them).
fn symlink_file(target: &Path, link: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    return std::os::windows::fs::symlink_file(target, link);
}

/// Symlinks (on Windows: symlink reparse points) are never read through or written through.
#[test]
fn symlinks_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let target = write(dir.path(), "target.py", b"# @claude hi\n");
    let link = dir.path().join("link.py");
    if let Err(e) = symlink_file(&target, &link) {
        eprintln!("skipped: cannot make a symlink here ({e})");
        return;
    }
    if std::fs::symlink_metadata(&link).is_err() {
        // Wine 8 reports success but makes no link.
        eprintln!("skipped: the symlink was not made");
        return;
    }
    let err = read_source(&link).unwrap_err();
    assert!(matches!(err, ReadError::NotRegular { kind: "symlink", .. }), "{err}");
    let err = replace_checked(&link, b"# @claude hi\n", b"stamped").unwrap_err();
    assert!(matches!(err, WriteError::NotRegular { kind: "symlink", .. }), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"# @claude hi\n");
}

/// Linux: the owner's extended attributes (and with them POSIX ACLs) go with the stamped file.
#[cfg(target_os = "linux")]
#[test]
fn extended_attributes_are_carried() {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.py", b"old");
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let value = b"kept";
    // SAFETY: valid NUL-terminated strings and a buffer of the given length.
    let rc = unsafe {
        libc::setxattr(c.as_ptr(), c"user.fw-test".as_ptr(), value.as_ptr().cast(), 4, 0)
    };
    if rc != 0 {
        eprintln!("skipped: no user xattrs here ({})", std::io::Error::last_os_error());
        return;
    }
    replace_checked(&p, b"old", b"new").unwrap();
    let mut buf = [0u8; 16];
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: as above.
    let n = unsafe {
        libc::getxattr(c.as_ptr(), c"user.fw-test".as_ptr(), buf.as_mut_ptr().cast(), buf.len())
    };
    assert_eq!(n, 4, "{}", std::io::Error::last_os_error());
    assert_eq!(&buf[..4], value);
}

/// Windows: a file another program holds open without `FILE_SHARE_DELETE` cannot be replaced;
/// that is a conflict (tried again on its next change) and the file is left exactly as it is.
#[cfg(windows)]
#[test]
fn a_file_held_open_without_share_delete_is_a_conflict() {
    use std::os::windows::fs::OpenOptionsExt;
    const FILE_SHARE_READ: u32 = 1;
    const FILE_SHARE_WRITE: u32 = 2;
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "held.py", b"# @claude x\n");
    let held = std::fs::OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
        .open(&p)
        .unwrap();
    let err = replace_checked(&p, b"# @claude x\n", b"stamped").unwrap_err();
    assert!(matches!(err, WriteError::Conflict { .. }), "{err}");
    drop(held);
    assert_eq!(std::fs::read(&p).unwrap(), b"# @claude x\n");
    assert!(temp_files(dir.path()).is_empty(), "{:?}", temp_files(dir.path()));
    // Once it is let go, the same replace goes through.
    replace_checked(&p, b"# @claude x\n", b"stamped").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"stamped");
}

/// Windows: the file's attributes (hidden here) survive the replace; tempfile's "temporary"
/// attribute does not leak onto the user's file.
#[cfg(windows)]
#[test]
fn attributes_are_kept() {
    use std::os::windows::fs::MetadataExt;
    const HIDDEN: u32 = 0x2;
    const TEMPORARY: u32 = 0x100;
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "h.py", b"old");
    let status = std::process::Command::new("attrib").arg("+h").arg(&p).status();
    let hidden = std::fs::metadata(&p).unwrap().file_attributes() & HIDDEN != 0;
    if !status.is_ok_and(|s| s.success()) || !hidden {
        eprintln!("skipped: cannot set the hidden attribute here");
        return;
    }
    if under_wine() {
        // Wine's ReplaceFileW drops the replaced file's attributes; Windows merges them in.
        eprintln!("skipped: Wine's ReplaceFileW does not keep attributes");
        return;
    }
    replace_checked(&p, b"old", b"new").unwrap();
    let attrs = std::fs::metadata(&p).unwrap().file_attributes();
    assert_ne!(attrs & HIDDEN, 0, "hidden kept: {attrs:#x}");
    assert_eq!(attrs & TEMPORARY, 0, "not temporary: {attrs:#x}");
}

/// True when the Windows tests run under Wine (`.ci/cross.sh`), which has its own registry key.
#[cfg(windows)]
fn under_wine() -> bool {
    std::process::Command::new("reg")
        .args(["query", r"HKLM\Software\Wine"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Windows: device names are never opened as files (a console would block a read forever).
#[cfg(windows)]
#[test]
fn devices_are_never_read() {
    for name in [r"\\.\NUL", r"\\.\CONIN$"] {
        let got = read_source(Path::new(name));
        assert!(got.is_err(), "{name} was read");
    }
}
