//! The history of one file in git: every version it had on any ref or reflog, searched for
//! the lines a change made while git held its lock may have come from (a `git restore
//! --source=<rev>` leaves no trace of the revision it used). Bounded per file; a search a
//! bound cuts short leaves the rest git's only in a file that is a version git holds — git
//! wrote nothing else. For the live worker each search runs on a thread of its own, so that a
//! long history holds up no other file.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{git_command, is_object_id, GitDir, GitLines};
use crate::error::Problem;
use crate::lines::{content_hash, version_keys};

/// What the live worker is told when work on a file beside it is done (a search of its history,
/// the scan of a big file: [`crate::live`]): the file.
pub type Waker = Arc<dyn Fn(&Path) + Send + Sync>;

/// How many histories are searched at once in the background; more wait their turn.
const SEARCHES_AT_ONCE: usize = 2;

/// How many answers are kept (by repository and path).
const ANSWERS: usize = 4096;

/// Bounds of the history searched for one file that changed while git held its lock. Past
/// any of them, the file's untagged markers count as git's (a warning says so).
const HISTORY_TIME: Duration = Duration::from_secs(10);
const HISTORY_VERSIONS: usize = 100_000;
const HISTORY_BYTES: usize = 256 * 1024 * 1024;

/// A search of one file's history: all it needs, to run on a thread of its own.
#[derive(Clone)]
pub(super) struct Job {
    pub git: GitDir,
    /// The changed file, woken when the search is done.
    pub changed: PathBuf,
    /// The path searched (the changed file, or a path it was renamed from), and its name in
    /// the repository.
    pub path: PathBuf,
    pub rel: String,
    /// The revisions no ref names (see [`GitLines::search_history`]).
    pub revs: Vec<String>,
    /// The blobs read already (those of the refs and the index).
    pub seen: HashSet<String>,
    /// The line keys looked for.
    pub keys: HashSet<u64>,
    /// The changed file as read: whether it is a version git holds, if a bound cuts the
    /// search short.
    pub bytes: Arc<[u8]>,
}

/// What a search of a file's history found.
pub(super) struct Answer {
    /// Of the revisions it was read from.
    fingerprint: u64,
    asked: HashSet<u64>,
    found: HashSet<u64>,
    /// Cut short by a bound: the hash of the bytes the file had, and whether those are a
    /// version git holds.
    cut: Option<(u64, bool)>,
}

impl Answer {
    /// True if it answers for the keys `left`, in a history read from `revs`, the file now
    /// `bytes` (what a search cut short says depends on them).
    fn answers(&self, revs: &[String], left: &HashSet<u64>, bytes: &[u8]) -> bool {
        self.fingerprint == fingerprint(revs)
            && left.is_subset(&self.asked)
            && self.cut.is_none_or(|(hash, _)| hash == content_hash(bytes))
    }

    /// Moves what it found to the found keys of `search`; cut short in a file that is a
    /// version git holds, the rest too (the safe side: git may have written it whole).
    fn apply(&self, search: &mut Search) {
        search.take_held(&self.found);
        if self.cut.is_some_and(|(_, gits)| gits) {
            search.all_held();
        }
    }
}

/// The searches of files' histories: done at once, or, once a [`Waker`] is set (the live
/// worker), on threads of their own, the changed file woken when its answer is in.
#[derive(Default)]
pub(super) struct Searches {
    answers: HashMap<(PathBuf, String), Arc<Answer>>,
    running: HashSet<(PathBuf, String)>,
    queued: VecDeque<Job>,
    done: Option<(Sender<Done>, Receiver<Done>)>,
    wake: Option<Waker>,
}

impl Searches {
    /// True once searches run in the background.
    pub fn wakes(&self) -> bool {
        self.wake.is_some()
    }
}

/// A search done: its repository and path, and its answer.
type Done = ((PathBuf, String), Answer);

/// The fingerprint of the revisions a history is read from.
fn fingerprint(revs: &[String]) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    revs.hash(&mut h);
    h.finish()
}

impl GitLines {
    /// From now on, histories are searched in the background ([`GitLines::history_pending`]
    /// says so), and `wake` is told the changed file when its search is done.
    pub fn search_in_background(&mut self, wake: Waker) {
        self.searches.wake = Some(wake);
    }

    /// Takes the answers of the searches done in the background, and starts those waiting.
    pub fn poll_history(&mut self) {
        let done: Vec<Done> = match &self.searches.done {
            Some((_, rx)) => rx.try_iter().collect(),
            None => Vec::new(),
        };
        for (key, answer) in done {
            self.searches.running.remove(&key);
            if self.searches.answers.len() >= ANSWERS {
                self.searches.answers.clear();
            }
            self.searches.answers.insert(key, Arc::new(answer));
        }
        while self.searches.running.len() < SEARCHES_AT_ONCE {
            let Some(job) = self.searches.queued.pop_front() else { break };
            self.start(job);
        }
    }

    /// The history step of a lookup: moves what the history of `job.path` holds of the keys
    /// left in `search` to the found ones. `None` when `background` and no answer is in yet:
    /// the search runs (or waits its turn) on a thread of its own.
    pub(super) fn history(
        &mut self,
        job: Job,
        search: &mut Search,
        background: bool,
    ) -> Option<()> {
        self.poll_history();
        let key = (job.git.top.clone(), job.rel.clone());
        let known = self.searches.answers.get(&key);
        if let Some(answer) = known.filter(|a| a.answers(&job.revs, &search.left, &job.bytes)) {
            answer.apply(search);
            return Some(());
        }
        if background && self.searches.wake.is_some() {
            let queued =
                self.searches.queued.iter().any(|j| (&j.git.top, &j.rel) == (&key.0, &key.1));
            if !self.searches.running.contains(&key) && !queued {
                self.searches.queued.push_back(job);
                self.poll_history();
            }
            return None;
        }
        let answer = self.search(&job);
        answer.apply(search);
        self.searches.answers.insert(key, Arc::new(answer));
        Some(())
    }

    /// Starts `job` on a thread of its own, with readers of its own; done, it sends its answer
    /// and wakes its file. (If no thread can be had, it runs here.)
    fn start(&mut self, job: Job) {
        let key = (job.git.top.clone(), job.rel.clone());
        let (tx, _) = self.searches.done.get_or_insert_with(std::sync::mpsc::channel);
        let (tx, wake, trigger) = (tx.clone(), self.searches.wake.clone(), self.trigger.clone());
        self.searches.running.insert(key.clone());
        let ran = job.clone();
        let thread = std::thread::Builder::new().name("git history".into()).spawn(move || {
            let mut lines = GitLines { trigger, ..GitLines::new() };
            let answer = lines.search(&ran);
            if tx.send((key, answer)).is_ok() {
                if let Some(wake) = wake {
                    wake(&ran.changed);
                }
            }
        });
        if let Err(e) = thread {
            tracing::warn!(
                "{}: its history is searched at once (no thread: {e})",
                job.path.display()
            );
            let answer = self.search(&job);
            let key = (job.git.top.clone(), job.rel.clone());
            self.searches.running.remove(&key);
            self.searches.answers.insert(key, Arc::new(answer));
            if let Some(wake) = &self.searches.wake {
                wake(&job.changed);
            }
        }
    }

    /// Runs the search `job`. Cut short by a bound, its answer says whether the file is a
    /// version git holds, and the log says what was cut and what follows, with the file.
    fn search(&mut self, job: &Job) -> Answer {
        let mut search = Search { left: job.keys.clone(), found: HashSet::new() };
        let why = self.search_history(&job.git, &job.rel, &job.revs, &job.seen, &mut search).err();
        let cut = why.map(|why| {
            let gits = self.is_version(&job.git, &job.rel, &job.bytes);
            let path = job.path.clone();
            match gits {
                true => Problem::GitHistory { path, why }.log(),
                false => Problem::GitHistoryCut { path, why }.log(),
            }
            (content_hash(&job.bytes), gits)
        });
        let asked = job.keys.clone();
        Answer { fingerprint: fingerprint(&job.revs), asked, found: search.found, cut }
    }

    /// True if `bytes`, stored by git at `rel` (its clean filters applied: `hash-object
    /// --path`), are an object the repository has — a version git may have written whole.
    /// What cannot be told (no git, an error) is true: the safe side.
    fn is_version(&mut self, git: &GitDir, rel: &str, bytes: &[u8]) -> bool {
        let mut hash = git_command(&git.top);
        hash.args(["hash-object", "--stdin", "--path", rel]);
        hash.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let Ok(mut child) = hash.spawn() else { return true };
        let (mut stdin, input) = (child.stdin.take(), bytes.to_vec());
        // Written from another thread: a pipe holds only so much.
        let writer = std::thread::spawn(move || {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(&input);
            }
        });
        let out = child.wait_with_output();
        let _ = writer.join();
        let Ok(out) = out else { return true };
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || !is_object_id(&id) {
            return true;
        }
        !matches!(self.check(git, &id, false), Some(None))
    }

    /// Searches the history of `rel` on every ref and reflog, and the revisions `revs` (those
    /// no ref names: `FETCH_HEAD`, the operation heads, the stash entries of the window), for
    /// the lines still left in `search`, each version once (blobs in `seen` were read already).
    /// Bounded per file: past a bound (or where git cannot read it), an error saying which.
    fn search_history(
        &mut self,
        git: &GitDir,
        rel: &str,
        revs: &[String],
        seen: &HashSet<String>,
        search: &mut Search,
    ) -> Result<(), String> {
        let started = Instant::now();
        let key = (git.top.clone(), rel.to_string(), fingerprint(revs));
        let versions = match self.histories.get(&key) {
            Some(versions) => Ok(versions.clone()),
            None => {
                self.started += 1;
                history_blobs(&git.top, rel, revs).map(Arc::new)
            }
        };
        let versions = versions?;
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
                return Ok(());
            }
            let why = if bytes > HISTORY_BYTES {
                Some(format!("over {} MiB of its versions read", HISTORY_BYTES >> 20))
            } else if started.elapsed() > HISTORY_TIME {
                Some(format!("over {} s", HISTORY_TIME.as_secs()))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(why);
            }
        }
        Ok(())
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
