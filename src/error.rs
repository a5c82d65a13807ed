//! The two kinds of trouble: a [`StartError`] stops the program before it serves anything; a
//! [`Problem`] is one file or one directory going wrong while it runs — logged, never fatal.

use std::path::PathBuf;

use crate::fsio::{ReadError, WriteError};
use crate::scan::BadTrigger;

/// Why the server or `watch` could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The root cannot be resolved or listed.
    #[error("{path}: cannot watch: {source}")]
    Root {
        /// The root as given.
        path: PathBuf,
        /// Why it cannot be resolved.
        source: std::io::Error,
    },
    /// The root is a file (or something else that is no directory).
    #[error("{0}: cannot watch: not a directory (--root names the project directory)")]
    NotADirectory(PathBuf),
    /// The OS refused a file watcher.
    #[error(
        "cannot create a file watcher: {0}. If this says \"too many open files\", the inotify \
         instance limit is reached: raise it with `sudo sysctl fs.inotify.max_user_instances=512`"
    )]
    Watcher(notify::Error),
    /// A worker thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
    /// The trigger word is unusable.
    #[error(transparent)]
    Trigger(#[from] BadTrigger),
    /// The owner lock cannot be used, and with `--tag never` nothing else keeps a second
    /// session on the root from announcing every ask again.
    #[error(
        "{path}: cannot use the owner lock: {source}. With --tag never nothing in the files says \
         an ask was announced, so a second session on this root would announce it again: make \
         the state directory usable (writable by you, its files regular files), or point \
         FILEWATCH_STATE_DIR at one that is"
    )]
    OwnerLock {
        /// The lock file (or, without a state directory, the root).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No state directory for the owner lock and the ledger (`--tag never` needs both).
    #[error(
        "the owner lock and the ask ledger live in the user's state directory, but neither \
         FILEWATCH_STATE_DIR, XDG_STATE_HOME, HOME nor LOCALAPPDATA is set (--tag never needs \
         them: set FILEWATCH_STATE_DIR)"
    )]
    NoStateDir,
    /// The ask ledger cannot be read or made (with `--tag never`, a start-up error; with
    /// `--tag file`, the asks are kept in memory instead).
    #[error(
        "{path}: cannot use the ask ledger: {source}. With --tag never it is the only record of \
         which asks were announced: make the state directory usable (writable by you, its \
         files regular files), or point FILEWATCH_STATE_DIR at one that is"
    )]
    Ledger {
        /// The ledger or its directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A ledger file is larger than this program ever writes one: it is not read.
    #[error(
        "{path}: this ask ledger is {size} bytes, larger than filewatch-mcp ever writes one, so \
         it is not read. Move it away (the asks it recorded are then forgotten) and start again"
    )]
    LedgerTooLarge {
        /// The ledger file (the log or its spare).
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
    },
}

/// Something that went wrong with one file or directory while running. Each is logged once
/// where it happens, at the level its variant calls for, and the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// A changed file could not be read.
    #[error("{0}")]
    Read(#[from] ReadError),
    /// A stamp could not be written; its asks go out untagged, once.
    #[error("{0}; announcing its asks once, untagged")]
    Write(#[from] WriteError),
    /// The walker could not list part of the tree.
    #[error("walking: {0}")]
    Walk(#[from] ignore::Error),
    /// The file watcher reported an error.
    #[error("watch error: {0}")]
    Watcher(notify::Error),
    /// A directory could not be watched (other than by the watch limit).
    #[error("{dir}: not watched: {source}")]
    NotWatched {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: notify::Error,
    },
    /// The git directory could not be watched: git operations cannot be held.
    #[error("{dir}: not watched, git operations cannot be held: {source}")]
    GitNotWatched {
        /// The git directory (or its `info/`).
        dir: PathBuf,
        /// Why.
        source: notify::Error,
    },
    /// The OS watch limit is reached: some directories are not watched.
    #[error(
        "inotify watch limit reached (fs.inotify.max_user_watches = {}): some directories are \
         not watched and saves in them go unseen. Raise the limit with `sudo sysctl \
         fs.inotify.max_user_watches=524288` (and add that line to /etc/sysctl.conf to keep \
         it), then restart",
        watch_limit()
    )]
    WatchLimit,
    /// The ledger could not be read or written for one change; that change is kept in memory.
    #[error("{path}: ask ledger: {source}")]
    Ledger {
        /// The ledger.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The watched root was deleted or moved away; its parent is watched for its return.
    #[error(
        "{root}: the watched directory was deleted or moved away; nothing is heard until it is \
         made again (watching its parent for that)"
    )]
    RootGone {
        /// The root.
        root: PathBuf,
    },
    /// The root and its parent are gone (or the parent cannot be watched): the watch ends.
    #[error(
        "{root}: the watched directory was deleted, and its parent cannot be watched for its \
         return; stopping (start filewatch-mcp again once the directory exists)"
    )]
    RootLost {
        /// The root.
        root: PathBuf,
    },
    /// With `--tag file`, no ledger could be opened: the asks are remembered for this run only.
    #[error(
        "{0}; the asks are remembered in memory for this run only (the tags in the files still \
         keep each ask from firing twice)"
    )]
    AsksInMemory(String),
    /// A state file other than the ledger (the owner record) could not be read; ignored.
    #[error("{path}: {source}; ignored")]
    StateFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The OS dropped events (queue overflow): the tree is looked at again.
    #[error("file events were lost; rescanning the tree")]
    EventsLost,
    /// An ignore file could not be read or holds a bad line.
    #[error("{path}: {source}")]
    RulesFile {
        /// The `.gitignore` or `.ignore`.
        path: PathBuf,
        /// What is wrong.
        source: ignore::Error,
    },
    /// Git's index lock has been there too long to be a running git.
    #[error(
        "{lock} has been there for {secs} s; a crashed git left it? Not holding saves for it \
         any more (remove it if no git command is running)"
    )]
    StaleGitLock {
        /// The lock file.
        lock: PathBuf,
        /// How long it has been held.
        secs: u64,
    },
    /// A file git may have written (it changed while git held its index lock, or while no
    /// process watched the root) whose history is too long to search within the bounds, and
    /// which is a version git holds: its untagged markers not found in the part searched count
    /// as git's (not announced), as the safe side.
    #[error(
        "{path}: may have been written by git (it changed while git held its index lock, or \
         while no process watched the root), and its history is too long to search ({why}); \
         the file is a version git holds, so its untagged markers not found in the part \
         searched are taken as git's and not announced (save the ask again, changed, to send \
         it)"
    )]
    GitHistory {
        /// The file.
        path: PathBuf,
        /// Which bound was reached.
        why: String,
    },
    /// The same, for a file that is no version git holds: git wrote none of it (a `git status`
    /// merely held the lock while the user saved), so its new asks are the user's.
    #[error(
        "{path}: may have been written by git (it changed while git held its index lock, or \
         while no process watched the root), and its history is too long to search ({why}); \
         the file is no version git holds, so git did not write it: its new asks are announced"
    )]
    GitHistoryCut {
        /// The file.
        path: PathBuf,
        /// Which bound was reached.
        why: String,
    },
    /// A line from the client that is not JSON; answered with a parse error.
    #[error("malformed JSON-RPC line ({0} bytes) answered with a parse error")]
    MalformedLine(usize),
    /// A line from the client over the size limit; answered with a parse error.
    #[error("a {len}-byte line is over the {max}-byte limit; answered with a parse error")]
    LineTooLong {
        /// The line's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Reading the client's input failed: the session ends.
    #[error("reading stdin: {0}")]
    Stdin(std::io::Error),
    /// The client went away during the handshake.
    #[error("MCP session ended during initialization: {0}")]
    Handshake(String),
    /// The owner lock of a root cannot be used: this process takes the root without it.
    #[error(
        "{path}: cannot use the owner lock ({source}); a second session on this root would \
         announce the same asks"
    )]
    OwnerLock {
        /// The lock file (or, without a state directory, the root).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The owner lock of a root cannot be used in the state directory: it is taken in a
    /// directory of the user's alone instead, where every session on the root looks for it.
    #[error(
        "{path}: cannot use the owner lock ({source}); the root's owner lock is {lock} instead, \
         so a second session on this root still stands by"
    )]
    OwnerLockMoved {
        /// The lock file in the state directory (or, without a state directory, the root).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
        /// The lock taken instead.
        lock: PathBuf,
    },
    /// Waiting for a root's owner to exit failed: this process stands by for good.
    #[error("{root}: cannot wait for its owner to exit ({source}); not taking over")]
    Takeover {
        /// The root.
        root: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The hooks cannot reach this server: asks go out on the channel only, and a line
    /// written counts as heard.
    #[error(
        "{path}: hooks cannot reach this server ({source}): asks go out on the channel only, \
         and sessions without one will not hear them"
    )]
    Hooks {
        /// The endpoints directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A channel notification could not be sent.
    #[error("could not announce {file}:{line}: {reason}")]
    Announce {
        /// The ask's file.
        file: String,
        /// The ask's line.
        line: usize,
        /// Why.
        reason: String,
    },
}

impl Problem {
    /// Logs the problem at its level: what a user should act on is a warning or an error;
    /// what a tree walk expects (a binary file, a FIFO, a directory that vanished) is debug.
    pub fn log(&self) {
        match self {
            Problem::WatchLimit | Problem::RootLost { .. } => tracing::error!("{self}"),
            Problem::Read(e) if e.is_skip() => {
                tracing::debug!("skipped {e}")
            }
            Problem::NotWatched { .. } => tracing::debug!("{self}"),
            Problem::GitHistoryCut { .. } => tracing::info!("{self}"),
            _ => tracing::warn!("{self}"),
        }
    }
}

/// The current inotify watch limit, for the message that says it was reached.
fn watch_limit() -> String {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}
