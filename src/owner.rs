//! Which process on a root watches and announces for a trigger: its owner. Two Claude Code
//! sessions in one repository start two servers on one root; without an owner each save would
//! go to whichever stamps first. The owner holds an exclusive lock on `<key>.owner.lock` in the
//! state directory ([`crate::state`]; the key is the root's and the trigger's: `watch --trigger
//! @bob` and a Claude session on one root are two audiences, each with its owner) for as long
//! as it runs; the OS drops the lock when the process ends, however it ends (SIGKILL too), and
//! a waiting process gets it: that is the takeover. The owner writes who it is next to the lock
//! (`<key>.owner.json`), for the others to say. Where the state directory cannot hold the lock
//! (not writable, a file at its path), the lock lives in a directory of the user's alone
//! instead ([`crate::sys::private_dir`]): sessions on the root still meet on one lock.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::asks::{self, TagMode};
use crate::error::{Problem, StartError};
use crate::state::{self, Place};

/// Owner records over this size are not read: one this program wrote is a few hundred bytes.
const MAX_RECORD_BYTES: u64 = 64 * 1024;

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
    /// The trigger it owns the root for (empty in records of the version before, which owned
    /// a root for every trigger).
    #[serde(default)]
    pub trigger: String,
    /// When it took the root, in seconds since the Unix epoch.
    pub since: u64,
    /// The root (canonical).
    pub root: PathBuf,
    /// When it let the root go, if it ended cleanly: asks saved after this, while no session
    /// ran, are looked for by the next owner.
    #[serde(default)]
    pub ended: Option<u64>,
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
    /// Where its record is, and the record, to say when it let the root go.
    record: Option<Box<(PathBuf, OwnerInfo)>>,
    /// The record of the owner before, as it left it.
    previous: Option<Box<OwnerInfo>>,
}

impl Owner {
    /// When the root was last watched before this process took it: the previous owner's end
    /// (its start, if it was killed), less the clock slack. `None` if it never was.
    pub fn last_watched(&self) -> Option<SystemTime> {
        let previous = self.previous.as_ref()?;
        let secs = previous.ended.unwrap_or(previous.since);
        Some(std::time::UNIX_EPOCH + Duration::from_secs(secs) - CLOCK_SLACK)
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some((path, info)) = self.record.take().map(|r| *r) {
            let info = OwnerInfo { ended: Some(asks::now()), ..info };
            if let Err(e) = write_info(&path, &info) {
                tracing::debug!("{}: not written: {e}", path.display());
            }
        }
    }
}

/// Another process owns the root: this one waits for its lock.
pub struct Standby {
    root: PathBuf,
    lock: File,
    place: Place,
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
    Standby(Box<Standby>),
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

/// Why the owner lock cannot be had.
#[derive(Debug)]
pub struct LockError {
    /// The lock file.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// Takes the root for `trigger` if nobody holds it; `command` is what this process runs
/// (`serve`, `watch`), for the others to say. Fails if the root is no directory we can watch.
/// If the owner lock cannot be used (no state directory, one this user cannot write, a FIFO
/// or a symlink where the lock belongs): with `--tag never` that is an error — nothing else
/// would keep a second session from announcing every ask again; with `--tag file` the root is
/// taken without a lock (the tags keep an ask from firing twice), with a warning.
pub fn claim(
    root: &Path,
    trigger: &str,
    command: &str,
    mode: TagMode,
) -> Result<Claim, StartError> {
    let root = crate::watch::check_root(root)?;
    let claimed = match state::state_dir() {
        Some(dir) => claim_in(&dir, &root, trigger, command),
        None if mode == TagMode::Never => return Err(StartError::NoStateDir),
        None => Err(LockError { path: root.clone(), source: state::no_state_dir() }),
    };
    let claimed = claimed.or_else(|failed| claim_elsewhere(&root, trigger, command, failed));
    match claimed {
        Ok(claim) => Ok(claim),
        Err(LockError { path, source }) if mode == TagMode::Never => {
            Err(StartError::OwnerLock { path, source })
        }
        Err(LockError { path, source }) => {
            Problem::OwnerLock { path, source }.log();
            Ok(Claim::Owner(Owner { root, lock: None, record: None, previous: None }))
        }
    }
}

/// [`claim`] with the lock in a directory of this user's alone outside the state directory
/// (see [`crate::sys::private_dir`]), when the state directory's lock `failed`: every session
/// on the root fails alike there and meets here, so the root still has one owner. `failed`
/// if that cannot be had either.
fn claim_elsewhere(
    root: &Path,
    trigger: &str,
    command: &str,
    failed: LockError,
) -> Result<Claim, LockError> {
    let nor = |what: String, kind| LockError {
        path: failed.path.clone(),
        source: std::io::Error::new(kind, format!("{}; nor {what}", failed.source)),
    };
    let elsewhere = crate::sys::private_dir().map_err(|e| nor(e.to_string(), e.kind()))?;
    let claim = claim_in(&elsewhere, root, trigger, command)
        .map_err(|e| nor(format!("{}: {}", e.path.display(), e.source), e.source.kind()))?;
    let lock = Place::new(&elsewhere, root, trigger).file("owner.lock");
    Problem::OwnerLockMoved { path: failed.path, source: failed.source, lock }.log();
    Ok(claim)
}

/// [`claim`] with the lock in the state directory `dir`, for a canonical `root`.
pub fn claim_in(dir: &Path, root: &Path, trigger: &str, command: &str) -> Result<Claim, LockError> {
    let place = Place::new(dir, root, trigger);
    let lock_path = place.file("owner.lock");
    let info = OwnerInfo {
        pid: std::process::id(),
        parent_pid: crate::sys::parent_pid(),
        command: command.to_string(),
        trigger: trigger.to_string(),
        since: asks::now(),
        root: root.to_path_buf(),
        ended: None,
    };
    let error = |source| LockError { path: lock_path.clone(), source };
    // Never truncated or removed: a process waiting on this file's lock must be waiting on the
    // one the next owner takes. Opened as every state file is: a FIFO there is an error, not
    // a wait for a writer that never comes.
    let lock = place.make_dir().and_then(|()| state::open(&lock_path)).map_err(error)?;
    match lock.try_lock() {
        Ok(()) => Ok(Claim::Owner(take(lock, &place, &info))),
        Err(std::fs::TryLockError::WouldBlock) => {
            let owner = read_info(&place.file("owner.json"));
            let since = SystemTime::now() - CLOCK_SLACK;
            let root = root.to_path_buf();
            Ok(Claim::Standby(Box::new(Standby { root, lock, place, info, owner, since })))
        }
        Err(std::fs::TryLockError::Error(source)) => Err(error(source)),
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
        Ok(take(self.lock, &self.place, &info))
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

/// The lock is ours: say who we are (after reading what the owner before said).
fn take(lock: File, place: &Place, info: &OwnerInfo) -> Owner {
    let path = place.file("owner.json");
    let previous = read_info(&path);
    if let Err(e) = write_info(&path, info) {
        tracing::debug!("{}: not written: {e}", path.display());
    }
    let root = info.root.clone();
    let (record, previous) = (Some(Box::new((path, info.clone()))), previous.map(Box::new));
    Owner { root, lock: Some(lock), record, previous }
}

/// Writes the record beside `path` and renames it over `path`: whatever was there (a FIFO, a
/// symlink) is replaced, never written through. A temp file a killed writer left is removed
/// (the lock is ours: no other writer of this record is running).
fn write_info(path: &Path, info: &OwnerInfo) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = format!("{name}.");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let n = entry.file_name();
            let n = n.to_string_lossy();
            if n.starts_with(&prefix) && n.ends_with(".tmp") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let mut tmp = tempfile::Builder::new().prefix(&prefix).suffix(".tmp").tempfile_in(dir)?;
    serde_json::to_writer_pretty(&mut tmp, info)?;
    tmp.write_all(b"\n")?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// What the owner of `root` (canonical) for `trigger` wrote of itself in the state directory
/// `dir`: the owner now, or the last one (see [`OwnerInfo::ended`], and whether its pid runs).
pub fn recorded(dir: &Path, root: &Path, trigger: &str) -> Option<OwnerInfo> {
    read_info(&Place::new(dir, root, trigger).file("owner.json"))
}

/// The owner's record, if it has written one that reads: it only says who the owner is, so a
/// record that cannot be read (a FIFO or a symlink planted there, garbage) is said and ignored.
fn read_info(path: &Path) -> Option<OwnerInfo> {
    let read =
        state::open_existing(path).and_then(|mut f| state::read_at_most(&mut f, MAX_RECORD_BYTES));
    let parsed = read.and_then(|bytes| {
        serde_json::from_slice(&bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    });
    match parsed {
        Ok(info) => Some(info),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            Problem::StateFile { path: path.to_path_buf(), source }.log();
            None
        }
    }
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
        let claim =
            |root: &Path, trigger, command| claim_in(state.path(), root, trigger, command).unwrap();
        let Claim::Owner(first) = claim(root.path(), "@claude", "serve") else {
            panic!("a free root not taken");
        };
        // flock locks belong to the open file: a second open in this process is another claimer.
        let Claim::Standby(second) = claim(root.path(), "@claude", "watch") else {
            panic!("a root owned twice");
        };
        let owner = second.owner.clone().expect("the owner said who it is");
        assert_eq!((owner.pid, owner.command.as_str()), (std::process::id(), "serve"));
        let other = tempfile::tempdir().unwrap();
        assert!(matches!(claim(other.path(), "@claude", "serve"), Claim::Owner(_)));
        // Another trigger on the same root is another audience, with its own owner.
        assert!(matches!(claim(root.path(), "@bob", "watch"), Claim::Owner(_)));
        let waiter = std::thread::spawn(move || second.wait().unwrap());
        drop(first);
        let _now_owner = waiter.join().unwrap();
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none(), "nothing in the tree");
    }
}
