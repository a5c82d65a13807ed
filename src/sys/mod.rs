//! The only operating-system-specific code in the crate: opening without following or blocking,
//! the atomic exchange, link counts, writability, metadata copies, how the tree is watched, and
//! how a stop is asked for. One file per OS family below; the rest of the crate calls the
//! functions re-exported here and never tests `cfg(target_os)` itself.
//!
//! | | Linux | macOS | Windows |
//! |---|---|---|---|
//! | open, no follow, no block | `O_NOFOLLOW \| O_NONBLOCK` | same | `FILE_FLAG_OPEN_REPARSE_POINT`, disk files only |
//! | atomic exchange | `renameat2(RENAME_EXCHANGE)` | `renamex_np(RENAME_SWAP)` | `ReplaceFileW` with a backup name |
//! | metadata carried | owner, mode (setuid/setgid/sticky), all xattrs (ACLs, `security.*`) | owner, mode, xattrs (`com.apple.*`, ACLs) | `ReplaceFileW` keeps ACLs, streams, attributes |
//! | times carried (a tag keeps the file's mtime) | atime, mtime: `futimens` | same | `SetFileTime` |
//! | "nobody is writing it" | read lease `F_SETLEASE F_RDLCK` (local fs) | not known | sharing violations |
//! | "nobody reads our new file yet" | write lease `F_SETLEASE F_WRLCK`: openers wait | not known | not known |
//! | a temp file with no name until whole | `O_TMPFILE`, named by `linkat` | no (named, then renamed to its id) | same as macOS |
//! | move only onto nothing | `renameat2(RENAME_NOREPLACE)` | `renamex_np(RENAME_EXCL)` | `MoveFileExW` |
//! | is a process running | `kill(pid, 0)` | same | `OpenProcess` + `GetExitCodeProcess` |
//! | watching | one inotify watch per directory, no read events (our own reader) | one recursive FSEvents stream | one recursive `ReadDirectoryChangesW` |
//! | a file's directory, held | `openat(O_NOFOLLOW)` per component, named by `/proc/self/fd` | same, named by path (checked by inode) | handles without `FILE_SHARE_DELETE` up to the root |
//! | busy (retry later) | never | never | sharing violations |
//! | a long wait's resident pages | clean read-only file mappings dropped (`MADV_DONTNEED`) | kept | kept |
//! | stop | SIGINT, SIGTERM, SIGHUP | same | Ctrl-C, Ctrl-Break, console close |
//! | a new file, a new directory of the user's alone | mode 0600, 0700 | same | the inherited ACL |
//! | a directory of the user's alone (the owner lock when the state directory fails) | `$XDG_RUNTIME_DIR/filewatch-mcp`, else `$TMPDIR/filewatch-mcp-<uid>` (0700, checked) | `$TMPDIR/filewatch-mcp-<uid>` | `%TEMP%\filewatch-mcp` |

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;

#[cfg(any(target_os = "linux", target_os = "android"))]
mod inotify;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

pub use imp::{
    ancestors, command_line, copy_metadata, create_dir_private, create_new_private, dir_beneath,
    exchange, exchange_unsupported, file_id, is_busy, is_watch_limit, lease_broken, link_count,
    name_unnamed, open_append, open_read, open_read_write, open_state, os_string_from_bytes,
    owned_by_me, parent_pid, path_file_id, plain_path, private_dir, process_alive, refusal_kind,
    release_file_pages, release_lease, rename_noreplace, same_dir, slash_path, special_kind,
    stdout_file, take_lease, take_write_lease, unnamed_file_in, watch_caveat, watch_limits,
    writable, BACKGROUND_HOOKS_BLOCK, SWAP_KEEPS_FILE_IDS, WATCH_MODE,
};

/// The OS's limits on watches, and what this user's processes use of them (inotify's are per
/// user: every program of the user's that watches files shares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// `fs.inotify.max_user_watches`.
    pub max_watches: u64,
    /// `fs.inotify.max_user_instances`.
    pub max_instances: u64,
    /// Watches held now by this user's processes (those whose file descriptors can be read).
    pub watches_in_use: u64,
    /// inotify instances open now in this user's processes.
    pub instances_in_use: u64,
}

/// What [`take_lease`] learnt about the other programs that have a file open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Nobody has the file open for writing, and whoever opens it for writing (or truncates
    /// it) from now on waits until the descriptor holding the lease is closed, and breaks the
    /// lease ([`lease_broken`]).
    Held,
    /// Someone has the file open for writing: it is still being written.
    Busy,
    /// The OS or file system has no leases, or not for this file (not ours: only a file's
    /// owner may take one).
    Unavailable,
}

/// Gives `to` (our new file, written) the access and modification times in `meta` (those of
/// the file it replaces), to the nanosecond where the file system keeps them: `futimens` on
/// Unix, `SetFileTime` on Windows (`to` is open for writing; an explicit time also stops the
/// handle's later writes from moving it). So a tag or a resolve leaves the file's times as
/// the user's last save set them, and an editor that compares them with the ones it knows
/// (VS Code refuses a save over a newer file) does not take our write for a newer version.
pub fn keep_times(to: &std::fs::File, meta: &std::fs::Metadata) -> std::io::Result<()> {
    let times =
        std::fs::FileTimes::new().set_accessed(meta.accessed()?).set_modified(meta.modified()?);
    to.set_times(times)
}

/// Metadata a new file could not be given (an owner, mode bits, an extended attribute): a
/// replace would strip it from the user's file.
#[derive(Debug)]
pub struct MetadataLost(pub String);

impl std::fmt::Display for MetadataLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "its {} cannot be carried over to a new file", self.0)
    }
}

impl std::error::Error for MetadataLost {}

/// The metadata `e` says could not be carried over, if that is what it says.
pub fn metadata_lost(e: &std::io::Error) -> Option<&MetadataLost> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<MetadataLost>())
}

/// A directory under the root, reached without following a symlink in any component, held
/// open so that it cannot be swapped for another one while we work in it: [`Beneath::path`]
/// names a file in that very directory (on Linux through `/proc/self/fd/N/`), whatever
/// happens to the path it was reached by.
pub struct Beneath {
    /// The directory, open (kept so its descriptor's path stays valid).
    #[allow(dead_code)] // held, not read, where the OS names it by path
    dir: Option<std::fs::File>,
    /// The directories above it, held too where that keeps them in place (Windows).
    #[allow(dead_code)] // held, never read
    above: Vec<std::fs::File>,
    /// How files in it are named.
    base: std::path::PathBuf,
    /// The directory as the user names it (the root joined with the relative path): what
    /// messages say instead of `base`, which on Linux is `/proc/self/fd/N`.
    shown: std::path::PathBuf,
}

impl Beneath {
    /// `name` in this directory.
    pub fn path(&self, name: &std::ffi::OsStr) -> std::path::PathBuf {
        self.base.join(name)
    }

    /// `path` as the user knows it: a path under the held directory's name (as
    /// [`Beneath::path`] gives them) named from the root again; any other path as it is.
    pub fn shown(&self, path: &std::path::Path) -> std::path::PathBuf {
        match path.strip_prefix(&self.base) {
            Ok(rest) if rest.as_os_str().is_empty() => self.shown.clone(),
            Ok(rest) => self.shown.join(rest),
            Err(_) => path.to_path_buf(),
        }
    }

    /// The directory itself (to list it).
    pub fn dir_path(&self) -> &std::path::Path {
        &self.base
    }
}

/// The watcher: on Linux our own inotify reader, whose mask leaves out reads (see
/// `src/sys/inotify.rs`); elsewhere notify's backend for the OS. Both implement
/// [`notify::Watcher`].
#[cfg(any(target_os = "linux", target_os = "android"))]
pub use self::inotify::Watcher;
/// The watcher: on Linux our own inotify reader, whose mask leaves out reads (see
/// `src/sys/inotify.rs`); elsewhere notify's backend for the OS. Both implement
/// [`notify::Watcher`].
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub type Watcher = notify::RecommendedWatcher;

/// How the tree is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// One non-recursive watch per directory the ignore rules let through (inotify: ignored
    /// trees such as `node_modules/` cost no watch at all; the kernel limits watches).
    PerDirectory,
    /// One recursive watch on the root; events under ignored directories arrive and are
    /// dropped by the rules (FSEvents restarts its stream on every added path, so thousands
    /// of per-directory watches would mean thousands of restarts; `ReadDirectoryChangesW` is
    /// recursive by nature).
    Recursive,
}

/// Resolves when the user or the client asks the process to stop: SIGINT, SIGTERM or SIGHUP on
/// Unix, Ctrl-C (or Ctrl-Break, console close) on Windows. Never resolves if no handler can be
/// installed.
pub async fn shutdown_signal() {
    imp::shutdown_signal().await
}
