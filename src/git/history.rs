//! The history of one file in git: every version it had on any ref or reflog, searched for
//! the lines a change made while git held its lock may have come from (a `git restore
//! --source=<rev>` leaves no trace of the revision it used). Bounded per file.

use std::collections::HashSet;
use std::hash::Hash;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{git_command, is_object_id, GitDir, GitLines};
use crate::error::Problem;
use crate::lines::version_keys;

/// Bounds of the history searched for one file that changed while git held its lock. Past
/// any of them, the file's untagged markers count as git's (a warning says so).
const HISTORY_TIME: Duration = Duration::from_secs(10);
const HISTORY_VERSIONS: usize = 100_000;
const HISTORY_BYTES: usize = 256 * 1024 * 1024;

impl GitLines {
    /// Searches the history of `rel` on every ref and reflog, and the revisions `revs` (those
    /// no ref names: `FETCH_HEAD`, the operation heads, the stash entries of the window), for
    /// the lines still left in `search`, each version once (blobs in `seen` were read already).
    /// Bounded per file: past a bound, what is left counts as git's.
    pub(super) fn search_history(
        &mut self,
        git: &GitDir,
        path: &Path,
        rel: &str,
        revs: &[String],
        seen: &HashSet<String>,
        search: &mut Search,
    ) {
        let started = Instant::now();
        let fingerprint = {
            use std::hash::Hasher;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            revs.hash(&mut h);
            h.finish()
        };
        let key = (git.top.clone(), rel.to_string(), fingerprint);
        let versions = match self.histories.get(&key) {
            Some(versions) => Ok(versions.clone()),
            None => {
                self.started += 1;
                history_blobs(&git.top, rel, revs).map(Arc::new)
            }
        };
        let versions = match versions {
            Ok(versions) => versions,
            Err(why) => {
                Problem::GitHistory { path: path.to_path_buf(), why }.log();
                search.all_held();
                return;
            }
        };
        self.histories.insert(key, versions.clone(), versions.len().max(1));
        let mut bytes = 0;
        for blob in versions.iter().filter(|b| !seen.contains(*b)) {
            let lines = match self.blobs.get(blob) {
                Some(lines) => lines.clone(),
                None => {
                    let Some(content) = self.contents(git, blob) else { continue };
                    bytes += content.len();
                    let lines = Arc::new(version_keys(&content, self.trigger.as_ref()));
                    self.blobs.insert(blob.clone(), lines.clone(), lines.len().max(1));
                    lines
                }
            };
            search.take_held(&lines);
            if search.left.is_empty() {
                return;
            }
            let why = if bytes > HISTORY_BYTES {
                Some(format!("over {} MiB of its versions read", HISTORY_BYTES >> 20))
            } else if started.elapsed() > HISTORY_TIME {
                Some(format!("over {} s", HISTORY_TIME.as_secs()))
            } else {
                None
            };
            if let Some(why) = why {
                Problem::GitHistory { path: path.to_path_buf(), why }.log();
                search.all_held();
                return;
            }
        }
    }
}

/// A search for line keys in git's versions of a file: those still `left`, those `found`.
pub(super) struct Search {
    pub(super) left: HashSet<u64>,
    pub(super) found: HashSet<u64>,
}

impl Search {
    /// Moves the keys left that `lines` holds to the found ones.
    pub(super) fn take_held(&mut self, lines: &HashSet<u64>) {
        let found = &mut self.found;
        self.left.retain(|k| {
            let held = lines.contains(k);
            if held {
                found.insert(*k);
            }
            !held
        });
    }

    /// Counts every key left as found: the safe answer where git cannot say.
    pub(super) fn all_held(&mut self) {
        self.found.extend(self.left.drain());
    }
}

/// Every blob `rel` has had in a commit reachable from a ref, a reflog or `revs`: the versions
/// `git restore --source=<rev>` or `git checkout <rev> -- <path>` may have written (neither
/// leaves a trace of the revision it used). Each commit's change to the file, merges against
/// every parent, no history simplified away. Bounded by [`HISTORY_TIME`] and
/// [`HISTORY_VERSIONS`]: past them, an error saying which.
fn history_blobs(top: &Path, rel: &str, revs: &[String]) -> Result<Vec<String>, String> {
    let mut git = git_command(top);
    git.args(["--literal-pathspecs", "log", "--all", "--reflog", "--full-history", "-m"])
        .args(["--no-renames", "--format=", "--raw", "-z", "--no-abbrev", "--ignore-missing"])
        .args(["--stdin", "--", rel])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = git.spawn().map_err(|e| format!("git log: {e}"))?;
    let input: String = revs.iter().map(|r| format!("{r}\n")).collect();
    let mut stdin = child.stdin.take();
    // Written from another thread: git answers as it reads, and a pipe holds only so much.
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            let _ = stdin.write_all(input.as_bytes());
        }
    });
    let stdout = child.stdout.take();
    let child = Arc::new(std::sync::Mutex::new(child));
    // A watchdog ends a walk that takes too long (a history of millions of commits).
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let child = child.clone();
        std::thread::spawn(move || {
            let timed_out = matches!(
                finished.recv_timeout(HISTORY_TIME),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
            );
            if timed_out {
                let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
            }
            timed_out
        })
    };
    let mut blobs = Vec::new();
    let mut seen = HashSet::new();
    let mut too_many = false;
    if let Some(stdout) = stdout {
        // `:<mode> <mode> <old id> <new id> <status>\0<path>\0`, per commit and parent.
        for field in BufReader::new(stdout).split(0).map_while(Result::ok) {
            let Some(raw) = field.strip_prefix(b":") else { continue };
            let text = String::from_utf8_lossy(raw);
            for id in text.split(' ').skip(2).take(2) {
                if is_object_id(id) && id.bytes().any(|b| b != b'0') && seen.insert(id.to_string())
                {
                    blobs.push(id.to_string());
                }
            }
            if blobs.len() > HISTORY_VERSIONS {
                too_many = true;
                let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
                break;
            }
        }
    }
    let _ = done.send(());
    let timed_out = watchdog.join().unwrap_or(true);
    let _ = writer.join();
    let status = child.lock().unwrap_or_else(|e| e.into_inner()).wait();
    if too_many {
        return Err(format!("over {HISTORY_VERSIONS} versions"));
    }
    if timed_out {
        return Err(format!("over {} s", HISTORY_TIME.as_secs()));
    }
    // A repository with no commit yet has no history, and says so with success: a failure is
    // a history git could not read, which is no proof of none.
    match status {
        Ok(s) if s.success() => Ok(blobs),
        Ok(s) => Err(format!("git log failed ({s})")),
        Err(e) => Err(format!("git log: {e}")),
    }
}
