//! Everything that knows git: where a tree's git directory is, when git holds its index lock
//! (and so may be writing the work tree), and which lines git could have written into a file.
//! Nothing else in the crate runs `git` or reads `.git/`.
//!
//! A save holding a new marker asks for the file's lines at `HEAD` ([`GitLines`]): `HEAD` is
//! resolved by reading the ref files, the blob is read by one long-lived `git cat-file --batch`
//! per repository, and the lines are kept per file by the commit they came from — so repeated
//! saves of a file cost no git work at all, and none costs a process spawn. (The pure-Rust `gix`,
//! even with minimal features, adds ~120 crates and ~100 CPU-seconds to a build from scratch,
//! and would still leave `git log --all -- <path>`, with git's history simplification, to git.)

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Problem;

/// An index lock older than this is stale (a crashed git leaves one behind): stop holding.
const STALE_LOCK: Duration = Duration::from_secs(10);

/// The git directory of a repository (`.git/`, or where a worktree's `.git` file points).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDir {
    path: PathBuf,
    /// The top of the work tree (the directory holding `.git`).
    top: PathBuf,
}

impl GitDir {
    /// The git directory of the repository holding `dir`, looking upwards.
    pub fn find(dir: &Path) -> Option<GitDir> {
        let mut d = Some(dir);
        while let Some(cur) = d {
            let dot_git = cur.join(".git");
            if dot_git.is_dir() {
                return Some(GitDir { path: dot_git, top: cur.to_path_buf() });
            }
            if dot_git.is_file() {
                let text = std::fs::read_to_string(&dot_git).ok()?;
                let target = cur.join(text.strip_prefix("gitdir:")?.trim());
                // Canonical, as every path the watcher compares with it is (`../x` targets,
                // and `C:/…` against `\\?\C:\…` on Windows).
                let path = target.canonicalize().unwrap_or(target);
                return Some(GitDir { path, top: cur.to_path_buf() });
            }
            d = cur.parent();
        }
        None
    }

    /// The top of its work tree.
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// The git directory itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True for paths inside the git directory.
    pub fn contains(&self, path: &Path) -> bool {
        path.starts_with(&self.path)
    }

    /// The directories whose events tell what git does: the git directory (its index lock)
    /// and `info/` (the exclude file), each watched without recursion.
    pub fn dirs_to_watch(&self) -> Vec<PathBuf> {
        let info = self.path.join("info");
        let mut dirs = vec![self.path.clone()];
        if info.is_dir() {
            dirs.push(info);
        }
        dirs
    }

    /// `info/exclude`: ignore rules that live in the git directory.
    pub fn exclude_file(&self) -> PathBuf {
        self.path.join("info/exclude")
    }

    /// True if `path` is this repository's index lock.
    pub fn is_index_lock(&self, path: &Path) -> bool {
        path == self.path.join("index.lock")
    }

    /// True while git's index lock file is there.
    pub fn index_lock_exists(&self) -> bool {
        self.path.join("index.lock").exists()
    }

    /// The commit `HEAD` names, read from the ref files as git keeps them (a worktree's own
    /// `HEAD`, refs in the common directory, loose or packed). `None` where that cannot be
    /// read so (an unborn branch, the `reftable` format): the caller asks git then.
    fn head_commit(&self) -> Option<String> {
        let common = match std::fs::read_to_string(self.path.join("commondir")) {
            Ok(text) => self.path.join(text.trim()),
            Err(_) => self.path.clone(),
        };
        if common.join("reftable").is_dir() {
            return None;
        }
        let mut text = std::fs::read_to_string(self.path.join("HEAD")).ok()?;
        for _ in 0..5 {
            let text_now = text.trim();
            let Some(name) = text_now.strip_prefix("ref:").map(str::trim) else {
                let is_id = matches!(text_now.len(), 40 | 64)
                    && text_now.bytes().all(|b| b.is_ascii_hexdigit());
                return is_id.then(|| text_now.to_string());
            };
            if name.contains("..") || !name.starts_with("refs/") {
                return None;
            }
            let name = name.to_string();
            let loose = std::fs::read_to_string(self.path.join(&name))
                .or_else(|_| std::fs::read_to_string(common.join(&name)));
            text = match loose {
                Ok(text) => text,
                Err(_) => {
                    let packed = std::fs::read_to_string(common.join("packed-refs")).ok()?;
                    let suffix = format!(" {name}");
                    packed.lines().find_map(|l| l.strip_suffix(suffix.as_str()))?.to_string()
                }
            };
        }
        None
    }

    /// What a change seen from now on may have been written from: every stash entry, newest
    /// first, read from the ref files (no git process per lock).
    pub fn window(&self) -> GitWindow {
        let mut stashes: Vec<String> = std::fs::read_to_string(self.path.join("logs/refs/stash"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
            .collect();
        stashes.reverse();
        if stashes.is_empty() {
            let newest = std::fs::read_to_string(self.path.join("refs/stash")).ok().or_else(|| {
                let packed = std::fs::read_to_string(self.path.join("packed-refs")).ok()?;
                packed.lines().find_map(|l| l.strip_suffix(" refs/stash").map(str::to_string))
            });
            stashes.extend(newest.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
        }
        GitWindow { stashes }
    }

    /// The commits of an operation git has in progress or just did: `ORIG_HEAD` (before a
    /// merge, pull, rebase, reset), `MERGE_HEAD` (the other side of a merge that stopped),
    /// `CHERRY_PICK_HEAD`, `REVERT_HEAD` and its parent (the lines a revert brings back),
    /// `REBASE_HEAD`, `AUTO_MERGE`.
    fn operation_heads(&self) -> Vec<String> {
        let mut revs = Vec::new();
        for name in [
            "ORIG_HEAD",
            "MERGE_HEAD",
            "CHERRY_PICK_HEAD",
            "REVERT_HEAD",
            "REBASE_HEAD",
            "AUTO_MERGE",
        ] {
            let text = std::fs::read_to_string(self.path.join(name)).unwrap_or_default();
            for sha in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                revs.push(sha.to_string());
                if name == "REVERT_HEAD" {
                    revs.push(format!("{sha}^"));
                }
            }
        }
        revs
    }
}

/// What we knew when git took its index lock: what a change made while it held the lock
/// may have been written from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitWindow {
    /// Every stash entry then, newest first: `git stash pop stash@{N}` writes one of them.
    pub stashes: Vec<String>,
}

impl GitWindow {
    /// The window of the repository holding `dir`, as the watcher takes it when git takes its
    /// index lock (empty outside a repository).
    pub fn capture(dir: &Path) -> GitWindow {
        GitDir::find(dir).map(|g| g.window()).unwrap_or_default()
    }
}

/// Git's index lock as the watcher sees it, by events: git is fast, and the lock may be gone
/// by the time anyone looks, but events come in order, so every file event between the lock's
/// creation and its removal may be git's.
#[derive(Debug, Default)]
pub struct IndexLock {
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    window: GitWindow,
    since: Instant,
    stale_warned: bool,
}

impl IndexLock {
    /// Git created its index lock.
    pub fn taken(&mut self, git: &GitDir) {
        let window = git.window();
        self.held = Some(Held { window, since: Instant::now(), stale_warned: false });
    }

    /// Git removed (renamed away) its index lock.
    pub fn released(&mut self) {
        self.held = None;
    }

    /// The window a change seen now belongs to, `None` while git holds no lock.
    pub fn window(&self) -> Option<GitWindow> {
        self.held.as_ref().map(|h| h.window.clone())
    }

    /// True while saves must wait for git: the lock is held and not stale. A lock whose file is
    /// gone is released here (its removal event may still be queued).
    pub fn holds(&mut self, git: Option<&GitDir>) -> bool {
        let Some(held) = &mut self.held else { return false };
        if !git.is_some_and(GitDir::index_lock_exists) {
            self.held = None;
            return false;
        }
        if held.since.elapsed() < STALE_LOCK {
            return true;
        }
        if !held.stale_warned {
            held.stale_warned = true;
            let lock = git.map_or_else(PathBuf::new, |g| g.path.join("index.lock"));
            Problem::StaleGitLock { lock, secs: STALE_LOCK.as_secs() }.log();
        }
        false
    }

    /// When a held lock turns stale, if one is held: the watcher wakes then.
    pub fn stale_at(&self) -> Option<Instant> {
        self.held.as_ref().filter(|h| !h.stale_warned).map(|h| h.since + STALE_LOCK)
    }
}

/// How many of the newest commits (on any ref) that touched a file are searched for lines a
/// `git restore --source=<rev>` or `git checkout <rev> -- <path>` may have written: neither
/// leaves a trace of the revision it used.
const RECENT_COMMITS: usize = 50;

/// A set of lines as git's versions are compared ([`normalize_line`]), shared.
pub type Lines = Arc<HashSet<Vec<u8>>>;

/// How many files' lines at `HEAD` [`GitLines`] keeps.
const HEAD_LINES_FILES: usize = 64;

/// [`lines_git_could_write`] for the live path, with no process spawned per save: the lines of a
/// file at `HEAD` are read through one long-lived `git cat-file --batch` per repository and kept
/// by the `HEAD` commit they were read from (a commit's files never change), so saving a file
/// again costs two small ref-file reads. Changes made while git held its lock (a `window`) are
/// rare and need git's own revision walk: they run [`lines_git_could_write`] as it is.
#[derive(Default)]
pub struct GitLines {
    /// One reader per work tree top, started on first use.
    readers: HashMap<PathBuf, CatFile>,
    /// Per file: the `HEAD` commit and the lines of the file in it.
    head: HashMap<PathBuf, (String, Lines)>,
    /// The files of `head`, oldest first.
    order: VecDeque<PathBuf>,
    /// Readers started, for tests: a save must not start one.
    started: usize,
}

impl GitLines {
    /// Nothing read yet.
    pub fn new() -> GitLines {
        GitLines::default()
    }

    /// How many `git cat-file` processes were started so far.
    #[cfg(test)]
    pub fn readers_started(&self) -> usize {
        self.started
    }

    /// Every line git could have written into `path`: see [`lines_git_could_write`], which
    /// this equals.
    pub fn lines(&mut self, path: &Path, window: Option<&GitWindow>) -> Lines {
        if window.is_some() {
            return Arc::new(lines_git_could_write(path, window));
        }
        let Some((git, rel)) = repo_path(path) else { return Arc::default() };
        // A name with a line break cannot be asked of a batch reader, one name per line.
        let Some(commit) = git.head_commit().filter(|_| !rel.contains('\n')) else {
            return Arc::new(lines_git_could_write(path, None));
        };
        if let Some((at, lines)) = self.head.get(path) {
            if *at == commit {
                return lines.clone();
            }
        }
        let Some(blob) = self.read_blob(&git.top, &commit, &rel) else {
            return Arc::new(lines_git_could_write(path, None)); // git is gone or failed: as before
        };
        let lines: HashSet<Vec<u8>> =
            blob.unwrap_or_default().split(|&b| b == b'\n').map(normalize_line).collect();
        let lines = Arc::new(lines);
        self.keep(path, commit, lines.clone());
        lines
    }

    fn keep(&mut self, path: &Path, commit: String, lines: Lines) {
        if self.head.insert(path.to_path_buf(), (commit, lines)).is_none() {
            self.order.push_back(path.to_path_buf());
        }
        while self.order.len() > HEAD_LINES_FILES {
            if let Some(oldest) = self.order.pop_front() {
                self.head.remove(&oldest);
            }
        }
    }

    /// The file `rel` in `commit` through the repository's reader (started, or restarted once
    /// if it died or went stale): `Some(None)` when the commit has no such file, `None` when
    /// git cannot answer.
    fn read_blob(&mut self, top: &Path, commit: &str, rel: &str) -> Option<Option<Vec<u8>>> {
        for _ in 0..2 {
            if !self.readers.contains_key(top) {
                let reader = CatFile::start(top)?;
                self.started += 1;
                self.readers.insert(top.to_path_buf(), reader);
            }
            let reader = self.readers.get_mut(top)?;
            // Objects never change, so a reader can be wrong only by calling one missing: a
            // file the commit lacks is missing only if the commit itself is known. A reader
            // that does not know the commit is stale (started in a repository since deleted
            // and cloned again, its directory gone) and would call every file of the new
            // commits missing: untracked, so their markers the user's.
            let answer = match reader.read(&format!("{commit}:{rel}")) {
                Ok(Some(blob)) => return Some(Some(blob)),
                Ok(None) => reader.read(commit),
                Err(e) => Err(e),
            };
            match answer {
                Ok(Some(_)) => return Some(None),
                Ok(None) => tracing::debug!("git cat-file in {}: no {commit}", top.display()),
                Err(e) => tracing::debug!("git cat-file in {}: {e}", top.display()),
            }
            self.readers.remove(top);
        }
        None
    }
}

/// A `git cat-file --batch` kept running: a name in, a blob out, no process per question.
/// Only names of immutable objects (`<commit>:<path>`) are asked, so nothing it may cache
/// (the index, refs) can go stale.
struct CatFile {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    fn start(top: &Path) -> Option<CatFile> {
        let mut child = cat_file_batch(top).spawn().ok()?; // no git at all
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take()?);
        Some(CatFile { child, stdin, stdout })
    }

    /// The blob named `object` (one line, no line break), `None` if it does not exist.
    fn read(&mut self, object: &str) -> std::io::Result<Option<Vec<u8>>> {
        let stdin = self.stdin.as_mut().ok_or(std::io::ErrorKind::BrokenPipe)?;
        stdin.write_all(format!("{object}\n").as_bytes())?;
        stdin.flush()?;
        let mut header = String::new();
        if self.stdout.read_line(&mut header)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let Some(size) = batch_header(&header)? else { return Ok(None) };
        read_blob(&mut self.stdout, size).map(Some)
    }
}

/// The size in a `git cat-file --batch` header: `<oid> <type> <size>`, followed by the content
/// and a newline; `None` for `<name> missing` (or `ambiguous`), a line alone — whatever spaces
/// the name holds.
fn batch_header(header: &str) -> std::io::Result<Option<usize>> {
    let header = header.trim_end_matches('\n');
    if header.ends_with(" missing") || header.ends_with(" ambiguous") {
        return Ok(None);
    }
    match header.split(' ').collect::<Vec<_>>().as_slice() {
        [_, _, size] => size.parse().map(Some).map_err(|_| std::io::ErrorKind::InvalidData.into()),
        _ => Err(std::io::ErrorKind::InvalidData.into()),
    }
}

/// Blobs larger than this are read past, not kept: their lines count as none. No file the
/// watcher reads is this large ([`crate::fsio::MAX_FILE_SIZE`]), so a marker in one cannot
/// have come from such a blob unchanged.
const MAX_BLOB: usize = 4 * crate::fsio::MAX_FILE_SIZE as usize;

/// The `size` bytes of a blob and the newline after them, from `cat-file --batch`'s output.
fn read_blob(out: &mut impl Read, size: usize) -> std::io::Result<Vec<u8>> {
    if size > MAX_BLOB {
        std::io::copy(&mut out.take(size as u64 + 1), &mut std::io::sink())?;
        return Ok(Vec::new());
    }
    let mut blob = vec![0; size + 1];
    out.read_exact(&mut blob)?;
    blob.pop();
    Ok(blob)
}

impl Drop for CatFile {
    fn drop(&mut self) {
        drop(self.stdin.take()); // end of input: git exits
        let _ = self.child.kill(); // or, if it is stuck (a slow disk), it is made to
        let _ = self.child.wait();
    }
}

/// Every line git could have written into `path`, compared as git's filters leave them
/// alike: without line endings (`eol`, `autocrlf`) and with `$Id…$` keywords collapsed
/// (`ident`). (`cat-file --filters` would apply them exactly, but in batch mode it reports the
/// unfiltered size, so its output cannot be read reliably.) Always the file at `HEAD`. When it changed while git held its lock (`window`):
/// also every index stage (a conflict's base, ours, theirs), the heads of the operation in
/// progress (merge, cherry-pick, revert, rebase, `ORIG_HEAD`), every stash entry, and the file
/// in its newest commits on any ref. Empty outside a repository or without git.
pub fn lines_git_could_write(path: &Path, window: Option<&GitWindow>) -> HashSet<Vec<u8>> {
    let Some((git, rel)) = repo_path(path) else { return HashSet::new() };
    let mut objects = vec![format!("HEAD:{rel}")];
    if let Some(window) = window {
        objects.extend((0..=3).map(|stage| format!(":{stage}:{rel}")));
        let revs = git.operation_heads().into_iter().chain(window.stashes.iter().cloned());
        let revs = revs.chain(recent_commits(&git.top, &rel));
        objects.extend(revs.map(|rev| format!("{rev}:{rel}")));
    }
    let mut lines = HashSet::new();
    for text in cat_files(&git.top, &objects) {
        lines.extend(text.split(|&b| b == b'\n').map(normalize_line));
    }
    lines
}

/// A work-tree line as git's versions are compared with it: no `\r`, keywords collapsed
/// (`$Id: 3e1f… $` → `$Id$`), since `ident` expands them on checkout.
pub fn normalize_line(line: &[u8]) -> Vec<u8> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(start) = memchr::memmem::find(line, b"$Id:") else { return line.to_vec() };
    let Some(len) = memchr::memchr(b'$', &line[start + 4..]) else { return line.to_vec() };
    let mut out = line[..start].to_vec();
    out.extend_from_slice(b"$Id$");
    out.extend_from_slice(&line[start + 4 + len + 1..]);
    normalize_line(&out)
}

/// The repository of `path` and the path relative to its work tree, `/`-separated.
fn repo_path(path: &Path) -> Option<(GitDir, String)> {
    let git = GitDir::find(path.parent()?)?;
    let rel = path.strip_prefix(&git.top).ok()?;
    let rel: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    Some((git, rel.join("/")))
}

/// The newest commits on any ref that touched `rel`.
fn recent_commits(top: &Path, rel: &str) -> Vec<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(crate::sys::plain_path(top).as_ref())
        .args(["log", "--all", "--format=%H", &format!("-n{RECENT_COMMITS}"), "--", rel])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => {
            String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
        }
        _ => Vec::new(),
    }
}

/// `git cat-file --batch` in the repository at `top`, its input and output ours. It never
/// waits on a person or the network: no credential prompt, no lazy fetch of a partial clone's
/// missing blobs (those count as missing).
fn cat_file_batch(top: &Path) -> Command {
    let mut git = Command::new("git");
    git.arg("-C").arg(crate::sys::plain_path(top).as_ref()).args(["cat-file", "--batch"]);
    git.env("GIT_TERMINAL_PROMPT", "0").env("GIT_NO_LAZY_FETCH", "1");
    git.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    git
}

/// The contents of the blobs named by `objects` (`<rev>:<path>`, `:<stage>:<path>`), in one
/// `git cat-file --batch`; objects that do not exist are left out.
fn cat_files(top: &Path, objects: &[String]) -> Vec<Vec<u8>> {
    let child = cat_file_batch(top).spawn();
    let Ok(mut child) = child else { return Vec::new() }; // no git at all
    let input: String = objects.iter().map(|o| format!("{o}\n")).collect();
    let mut stdin = child.stdin.take();
    // Written from another thread: git answers as it reads, and a pipe holds only so much.
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            let _ = stdin.write_all(input.as_bytes());
        }
    });
    let mut texts = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        let mut out = BufReader::new(stdout);
        for _ in objects {
            let mut header = String::new();
            if out.read_line(&mut header).unwrap_or(0) == 0 {
                break;
            }
            let Ok(size) = batch_header(&header) else { break };
            let Some(size) = size else { continue }; // missing
            match read_blob(&mut out, size) {
                Ok(blob) => texts.push(blob),
                Err(_) => break,
            }
        }
    }
    let _ = writer.join();
    let _ = child.wait();
    texts
}
