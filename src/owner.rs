//! Which process on a root watches and announces: its owner. Two Claude Code sessions in one
//! repository start two servers on one root; without an owner each save would go to whichever
//! stamps first. The owner holds an exclusive lock on `<state dir>/<hash of the root>.owner.lock`
//! for as long as it runs (never in the working tree); the OS drops the lock when the process
//! ends, however it ends (SIGKILL too), and a waiting process gets it: that is the takeover.
//! The owner writes who it is next to the lock (`….owner.json`), for the others to say.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::asks::{self, stable_hash, state_dir};
use crate::error::{Problem, StartError};

/// How far before a standby's start its takeover looks for saves: file systems stamp
/// modification times with a coarse clock (a tick behind the one `SystemTime` reads).
const CLOCK_SLACK: Duration = Duration::from_secs(1);

/// Who owns a root, as the owner wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerInfo {
    /// The owning process (`filewatch-mcp`).
    pub pid: u32,
    /// Its parent: the Claude Code session (or shell) that started it, where the OS says.
    pub parent_pid: Option<u32>,
    /// What it runs: `serve` or `watch`.
    pub command: String,
    /// When it took the root, in seconds since the Unix epoch.
    pub since: u64,
    /// The root (canonical).
    pub root: PathBuf,
}

impl OwnerInfo {
    /// `filewatch-mcp pid 123, started by pid 45, owner since 2026-11-30 23:59:01 UTC`.
    pub fn describe(&self) -> String {
        let parent = self.parent_pid.map(|p| format!(", started by pid {p}")).unwrap_or_default();
        let command = if self.command == "watch" { "filewatch-mcp watch" } else { "filewatch-mcp" };
        format!("{command} pid {}{parent}, owner since {}", self.pid, utc(self.since))
    }
}

/// The lock held: this process owns the root until it ends (or drops this).
pub struct Owner {
    root: PathBuf,
    /// Held, never read: dropping it (or the process ending) lets another process take over.
    #[allow(dead_code)]
    lock: Option<File>,
}

/// Another process owns the root: this one waits for its lock.
pub struct Standby {
    root: PathBuf,
    lock: File,
    info_path: PathBuf,
    info: OwnerInfo,
    /// The owner as it said, if it has said (it writes right after taking the lock).
    pub owner: Option<OwnerInfo>,
    /// When this process started standing by (less a second of clock slack): on takeover, files
    /// modified since may hold saves the owner never handled.
    pub since: SystemTime,
}

/// What [`claim`] found.
pub enum Claim {
    /// The root is ours.
    Owner(Owner),
    /// The root is another process's; wait with [`Standby::wait`].
    Standby(Standby),
}

impl Claim {
    /// The root claimed, canonical.
    pub fn root(&self) -> &Path {
        match self {
            Claim::Owner(o) => &o.root,
            Claim::Standby(s) => &s.root,
        }
    }
}

/// Takes the root if nobody holds it; `command` is what this process runs (`serve`, `watch`),
/// for the others to say. Fails only if the root is no directory we can watch. Without a state
/// directory, or if the lock cannot be made, the root is taken without a lock (as before
/// owners existed), with a warning.
pub fn claim(root: &Path, command: &str) -> Result<Claim, StartError> {
    let root = crate::watch::check_root(root)?;
    let root = root.as_path();
    Ok(match state_dir() {
        Some(dir) => claim_in(&dir, root, command),
        None => {
            let source = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no state directory: neither FILEWATCH_STATE_DIR, XDG_STATE_HOME, HOME nor \
                 LOCALAPPDATA is set",
            );
            Problem::OwnerLock { path: root.to_path_buf(), source }.log();
            Claim::Owner(Owner { root: root.to_path_buf(), lock: None })
        }
    })
}

/// [`claim`] with the lock in `dir`, for a canonical `root`.
pub fn claim_in(dir: &Path, root: &Path, command: &str) -> Claim {
    let base = dir.join(format!("{:016x}", stable_hash(root)));
    let (lock_path, info_path) =
        (base.with_extension("owner.lock"), base.with_extension("owner.json"));
    let info = OwnerInfo {
        pid: std::process::id(),
        parent_pid: crate::sys::parent_pid(),
        command: command.to_string(),
        since: asks::now(),
        root: root.to_path_buf(),
    };
    let opened = std::fs::create_dir_all(dir).and_then(|()| {
        // Never truncated or removed: a process waiting on this file's lock must be waiting on
        // the one the next owner takes.
        File::options().create(true).truncate(false).write(true).open(&lock_path)
    });
    let lock = match opened {
        Ok(lock) => lock,
        Err(source) => {
            Problem::OwnerLock { path: lock_path, source }.log();
            return Claim::Owner(Owner { root: root.to_path_buf(), lock: None });
        }
    };
    match lock.try_lock() {
        Ok(()) => Claim::Owner(take(lock, &info_path, &info)),
        Err(std::fs::TryLockError::WouldBlock) => {
            let owner = read_info(&info_path);
            let since = SystemTime::now() - CLOCK_SLACK;
            let root = root.to_path_buf();
            Claim::Standby(Standby { root, lock, info_path, info, owner, since })
        }
        Err(std::fs::TryLockError::Error(source)) => {
            Problem::OwnerLock { path: lock_path, source }.log();
            Claim::Owner(Owner { root: root.to_path_buf(), lock: None })
        }
    }
}

impl Standby {
    /// The root, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Blocks until the owner ends (the OS hands its lock over), then owns the root. No
    /// polling: the thread sleeps in the lock call.
    pub fn wait(self) -> std::io::Result<Owner> {
        self.lock.lock()?;
        let info = OwnerInfo { since: asks::now(), ..self.info };
        Ok(take(self.lock, &self.info_path, &info))
    }

    /// [`Standby::wait`] on a thread of its own, which the process may end without joining (a
    /// thread blocked in a lock call cannot be woken otherwise).
    pub fn wait_in_background(self) -> tokio::sync::oneshot::Receiver<std::io::Result<Owner>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let root = self.root.clone();
        let spawned = std::thread::Builder::new().name("standby".into()).spawn(move || {
            let _ = tx.send(self.wait());
        });
        if let Err(source) = spawned {
            Problem::Takeover { root, source }.log();
        }
        rx
    }
}

/// The lock is ours: say who we are.
fn take(lock: File, info_path: &Path, info: &OwnerInfo) -> Owner {
    if let Err(e) = write_info(info_path, info) {
        tracing::debug!("{}: not written: {e}", info_path.display());
    }
    let root = info.root.clone();
    Owner { root, lock: Some(lock) }
}

fn write_info(path: &Path, info: &OwnerInfo) -> std::io::Result<()> {
    let mut tmp = tempfile::NamedTempFile::new_in(path.parent().unwrap_or(Path::new(".")))?;
    serde_json::to_writer_pretty(&mut tmp, info)?;
    tmp.write_all(b"\n")?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn read_info(path: &Path) -> Option<OwnerInfo> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// `2026-11-30 23:59:01 UTC` for seconds since the Unix epoch.
fn utc(secs: u64) -> String {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rest / 3600, rest % 3600 / 60, rest % 60);
    // Days to a civil date (Howard Hinnant's algorithm), for years after 1970.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_796_083_141), "2026-11-30 23:59:01 UTC");
    }

    /// One owner per root; the second waits, and owns once the first lets go.
    #[test]
    fn one_owner_and_a_takeover() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let Claim::Owner(first) = claim_in(state.path(), root.path(), "serve") else {
            panic!("a free root not taken");
        };
        // flock locks belong to the open file: a second open in this process is another claimer.
        let Claim::Standby(second) = claim_in(state.path(), root.path(), "watch") else {
            panic!("a root owned twice");
        };
        let owner = second.owner.clone().expect("the owner said who it is");
        assert_eq!((owner.pid, owner.command.as_str()), (std::process::id(), "serve"));
        let other = tempfile::tempdir().unwrap();
        assert!(matches!(claim_in(state.path(), other.path(), "serve"), Claim::Owner(_)));
        let waiter = std::thread::spawn(move || second.wait().unwrap());
        drop(first);
        let _now_owner = waiter.join().unwrap();
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none(), "nothing in the tree");
    }
}
