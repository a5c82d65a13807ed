//! The only operating-system-specific code in the crate: opening without following or blocking,
//! the atomic exchange, link counts, writability, metadata copies, how the tree is watched, and
//! how a stop is asked for. One file per OS family below; the rest of the crate calls the
//! functions re-exported here and never tests `cfg(target_os)` itself.
//!
//! | | Linux | macOS | Windows |
//! |---|---|---|---|
//! | open, no follow, no block | `O_NOFOLLOW \| O_NONBLOCK` | same | `FILE_FLAG_OPEN_REPARSE_POINT`, disk files only |
//! | atomic exchange | `renameat2(RENAME_EXCHANGE)` | `renamex_np(RENAME_SWAP)` | `ReplaceFileW` with a backup name |
//! | metadata carried | mode, owner, xattrs (ACLs) | mode, owner, xattrs (`com.apple.*`, ACLs) | `ReplaceFileW` keeps ACLs, streams, attributes |
//! | watching | one inotify watch per directory, no read events (our own reader) | one recursive FSEvents stream | one recursive `ReadDirectoryChangesW` |
//! | a file's directory, held | `openat(O_NOFOLLOW)` per component, named by `/proc/self/fd` | same, named by path (checked by inode) | handles without `FILE_SHARE_DELETE` up to the root |
//! | busy (retry later) | never | never | sharing violations |
//! | stop | SIGINT, SIGTERM | same | Ctrl-C, Ctrl-Break, console close |

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
    copy_metadata, dir_beneath, exchange, exchange_unsupported, is_busy, is_watch_limit,
    link_count, open_read, open_read_write, plain_path, refusal_kind, same_dir, slash_path,
    special_kind, watch_caveat, writable, WATCH_MODE,
};

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
}

impl Beneath {
    /// `name` in this directory.
    pub fn path(&self, name: &std::ffi::OsStr) -> std::path::PathBuf {
        self.base.join(name)
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

/// Resolves when the user or the client asks the process to stop: SIGINT or SIGTERM on Unix,
/// Ctrl-C (or Ctrl-Break, console close) on Windows. Never resolves if no handler can be
/// installed.
pub async fn shutdown_signal() {
    imp::shutdown_signal().await
}
