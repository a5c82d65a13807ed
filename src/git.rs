//! Everything that knows git: where a tree's git directory is, when git holds its index lock
//! (and so may be writing the work tree), and whether a line is one git could have written into
//! a file. Nothing else in the crate runs `git` or reads `.git/`.
//!
//! Provenance is by content, always ([`GitLines::held`]): a marker's line is git's when the same
//! line (normalised: [`crate::lines::normalize_line`]) is in a version of the file (or of a path it was moved
//! from) that git holds — `HEAD`, the index stages, every ref tip (branches, remote-tracking
//! branches, tags, pull-request refs), `FETCH_HEAD`, the heads of an operation in progress or
//! just done (`ORIG_HEAD`, `MERGE_HEAD`, …), the other worktrees' `HEAD`s, and every stash entry
//! with its index and untracked parts; and, for a file that changed while git held its index
//! lock, every version in its history on any ref or reflog (bounded per file: past the bounds,
//! the safe answer, git's). It costs no process per save: refs are read from the ref files,
//! objects through two long-lived `git cat-file` processes per repository (`--batch-check` maps
//! `<commit>:<path>` to a blob id, `--batch` reads a blob), and the answers are kept by object —
//! a commit's file is always the same blob, a blob always the same lines. The caller asks only
//! for files that hold an untagged marker. (The pure-Rust `gix`, even with minimal features,
//! adds ~120 crates and ~100 CPU-seconds to a build from scratch, and would still leave the
//! history walk, with git's own rules, to git.)

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::error::Problem;
use crate::lines::{version_keys, HeldLines, LineKeys};

mod history;

use history::Search;
pub use history::Waker;

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

    /// True while git's index lock file is there. Only for what no event can tell: whether
    /// git was already working when the watch began, or after events were lost.
    pub fn index_lock_exists(&self) -> bool {
        self.path.join("index.lock").exists()
    }

    /// The directory shared by every worktree of the repository (refs, objects, stash).
    fn common(&self) -> PathBuf {
        match std::fs::read_to_string(self.path.join("commondir")) {
            Ok(text) => self.path.join(text.trim()),
            Err(_) => self.path.clone(),
        }
    }

    /// Refs in the `reftable` format cannot be read from files: git is asked then.
    fn has_reftable(&self) -> bool {
        self.common().join("reftable").is_dir()
    }

    /// The object id `text` names, following symbolic refs (`ref: refs/heads/main`) through
    /// loose and packed refs, as git keeps them for this worktree.
    fn resolve(&self, mut text: String) -> Option<String> {
        let common = self.common();
        for _ in 0..5 {
            let text_now = text.trim();
            let Some(name) = text_now.strip_prefix("ref:").map(str::trim) else {
                return is_object_id(text_now).then(|| text_now.to_string());
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

    /// The commit `HEAD` names, read from the ref files as git keeps them (a worktree's own
    /// `HEAD`, refs in the common directory, loose or packed). `None` where that cannot be
    /// read so (an unborn branch, the `reftable` format).
    fn head_commit(&self) -> Option<String> {
        if self.has_reftable() {
            return None;
        }
        self.resolve(std::fs::read_to_string(self.path.join("HEAD")).ok()?)
    }

    /// Every stash entry, newest first, read from the stash's reflog (or its ref alone).
    fn stash_entries(&self) -> Vec<String> {
        let common = self.common();
        let mut stashes: Vec<String> = std::fs::read_to_string(common.join("logs/refs/stash"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
            .filter(|s| is_object_id(s))
            .collect();
        stashes.reverse();
        if stashes.is_empty() {
            stashes.extend(self.resolve("ref: refs/stash".to_string()));
        }
        stashes
    }

    /// What a change seen from now on may have been written from: every stash entry, newest
    /// first, read from the ref files (no git process per lock).
    pub fn window(&self) -> GitWindow {
        GitWindow { stashes: self.stash_entries() }
    }

    /// The commits of an operation git has in progress or just did: `ORIG_HEAD` (before a
    /// merge, pull, rebase, reset), `MERGE_HEAD` (the other side of a merge that stopped),
    /// `CHERRY_PICK_HEAD`, `REVERT_HEAD` and its parent (the lines a revert brings back),
    /// `REBASE_HEAD`; and `FETCH_HEAD`, what the last fetch brought (a pull request's head).
    fn operation_heads(&self) -> Vec<String> {
        let mut revs = Vec::new();
        for name in [
            "ORIG_HEAD",
            "MERGE_HEAD",
            "CHERRY_PICK_HEAD",
            "REVERT_HEAD",
            "REBASE_HEAD",
            "FETCH_HEAD",
        ] {
            let text = std::fs::read_to_string(self.path.join(name)).unwrap_or_default();
            // FETCH_HEAD: `<id>\t[not-for-merge]\t<what>`, one line per ref fetched.
            for id in text.lines().filter_map(|l| l.split_whitespace().next()) {
                if is_object_id(id) {
                    revs.push(id.to_string());
                    if name == "REVERT_HEAD" {
                        revs.push(format!("{id}^"));
                    }
                }
            }
        }
        revs
    }

    /// Every revision whose files git holds, named as immutable objects (ids, `<id>^2`), so that
    /// what they hold can be kept: see the module's documentation. The trees of the stash
    /// entries in `window` (taken when git's lock appeared: a `stash pop` drops its entry) count
    /// too. `None` for the `reftable` format, whose refs only git reads.
    fn held_revisions(&self, window: Option<&GitWindow>) -> Option<Vec<String>> {
        if self.has_reftable() {
            return None;
        }
        let common = self.common();
        let mut revs = Vec::new();
        // This worktree's HEAD, then the others' (and the main one's, from a linked worktree).
        revs.extend(self.head_commit());
        let mut heads = vec![common.join("HEAD")];
        if let Ok(dirs) = std::fs::read_dir(common.join("worktrees")) {
            heads.extend(dirs.flatten().map(|d| d.path().join("HEAD")));
        }
        for head in heads {
            if let Ok(text) = std::fs::read_to_string(&head) {
                let here =
                    GitDir { path: head.parent().unwrap_or(&common).into(), top: PathBuf::new() };
                revs.extend(here.resolve(text));
            }
        }
        loose_refs(&common.join("refs"), 0, &mut revs);
        if self.path != common {
            loose_refs(&self.path.join("refs"), 0, &mut revs); // per-worktree refs (bisect)
        }
        let packed = std::fs::read_to_string(common.join("packed-refs")).unwrap_or_default();
        for line in packed.lines().filter(|l| !l.starts_with(['#', '^'])) {
            revs.extend(line.split(' ').next().filter(|id| is_object_id(id)).map(str::to_string));
        }
        revs.extend(self.operation_heads());
        let stashes = self.stash_entries().into_iter();
        for stash in stashes.chain(window.into_iter().flat_map(|w| w.stashes.iter().cloned())) {
            // The work tree's state, the index's (`^2`) and the untracked files' (`^3`).
            revs.push(format!("{stash}^2"));
            revs.push(format!("{stash}^3"));
            revs.push(stash);
        }
        let mut seen = HashSet::new();
        revs.retain(|r| seen.insert(r.clone()));
        Some(revs)
    }
}

impl GitDir {
    /// The tree of a merge that stopped (`AUTO_MERGE`), as git wrote it to the work tree: a
    /// tree, not a commit, so no history is walked from it.
    fn auto_merge(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.path.join("AUTO_MERGE")).ok()?;
        Some(text.trim().to_string()).filter(|t| is_object_id(t))
    }
}

/// The object ids of the loose refs under `dir` (symbolic refs are left out: their targets are
/// listed themselves), not following symlinks.
fn loose_refs(dir: &Path, depth: usize, out: &mut Vec<String>) {
    const DEPTH: usize = 32; // refs/remotes/origin/… nest a few levels; this is plenty
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() && depth < DEPTH {
            loose_refs(&entry.path(), depth + 1, out);
        } else if kind.is_file() && !entry.file_name().to_string_lossy().ends_with(".lock") {
            if let Ok(text) = std::fs::read_to_string(entry.path()) {
                out.extend(Some(text.trim().to_string()).filter(|id| is_object_id(id)));
            }
        }
    }
}

/// A SHA-1 or SHA-256 object id in hex.
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
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

/// How many stash entries a repository's watcher remembers beyond those the stash holds now.
const STASHES_REMEMBERED: usize = 256;

/// Git's index lock as the watcher sees it, by events alone: git is fast, and the lock may be
/// gone from the disk long before its events are read (a busy machine, a paused watcher), but
/// inotify's events come in order on one descriptor: every event queued before the lock's
/// deletion was written while git held it. So the lock is held from its creation event to its
/// deletion (or rename) event, whatever the disk says meanwhile.
#[derive(Debug, Default)]
pub struct IndexLock {
    held: Option<Held>,
    /// Every stash entry seen when a lock was taken or let go, newest first: a window taken
    /// late (the watcher behind) still knows the entry a `stash pop` has already dropped.
    stashes: Vec<String>,
}

#[derive(Debug)]
struct Held {
    window: GitWindow,
    since: Instant,
    stale_warned: bool,
}

impl IndexLock {
    /// The lock of a repository as the watch begins: the stash entries it holds now.
    pub fn new(git: &GitDir) -> IndexLock {
        IndexLock { held: None, stashes: git.stash_entries() }
    }

    /// Git created its index lock.
    pub fn taken(&mut self, git: &GitDir) {
        self.remember_stashes(git);
        let window = GitWindow { stashes: self.stashes.clone() };
        self.held = Some(Held { window, since: Instant::now(), stale_warned: false });
    }

    /// Git removed (renamed away) its index lock.
    pub fn released(&mut self, git: &GitDir) {
        self.held = None;
        self.remember_stashes(git);
    }

    /// Events were lost: only the disk can say whether git still holds its lock.
    pub fn after_lost_events(&mut self, git: &GitDir) {
        if self.held.is_some() && !git.index_lock_exists() {
            self.released(git);
        }
    }

    fn remember_stashes(&mut self, git: &GitDir) {
        let mut all = git.stash_entries();
        all.append(&mut self.stashes);
        let mut seen = HashSet::new();
        all.retain(|s| seen.insert(s.clone()));
        all.truncate(STASHES_REMEMBERED);
        self.stashes = all;
    }

    /// The window a change seen now belongs to, `None` while git holds no lock.
    pub fn window(&self) -> Option<GitWindow> {
        self.held.as_ref().map(|h| h.window.clone())
    }

    /// True while saves must wait for git: the lock is held and not stale.
    pub fn holds(&mut self, git: &GitDir) -> bool {
        let Some(held) = &mut self.held else { return false };
        if held.since.elapsed() < STALE_LOCK {
            return true;
        }
        if !held.stale_warned {
            held.stale_warned = true;
            let lock = git.path.join("index.lock");
            Problem::StaleGitLock { lock, secs: STALE_LOCK.as_secs() }.log();
        }
        false
    }

    /// When a held lock turns stale, if one is held: the watcher wakes then.
    pub fn stale_at(&self) -> Option<Instant> {
        self.held.as_ref().filter(|h| !h.stale_warned).map(|h| h.since + STALE_LOCK)
    }
}

/// The lines of `path` at `HEAD`, for a one-shot caller (a resolve): readers of its own, gone
/// when it returns. None outside a repository or without git.
pub fn head_lines_of(path: &Path) -> HeldLines {
    HeldLines::new(GitLines::new().head_lines(&[path]))
}

/// How many `(revision, path)` → blob answers are kept.
const TREE_ANSWERS: usize = 1 << 16;
/// How many line keys the kept blobs may hold in all (~8 bytes each, plus the sets' room).
const BLOB_LINES: usize = 1 << 20;

/// Whether lines are git's, answered for the live path with no process spawned per save (see
/// the module's documentation).
#[derive(Default)]
pub struct GitLines {
    /// The `cat-file` readers of each repository, by work tree top, started on first use.
    readers: HashMap<PathBuf, Readers>,
    /// `<revision>:<path>` → its blob id (`None`: no such file there). Revisions are ids.
    trees: Fifo<(String, String), Option<String>>,
    /// Blob id → the keys of its lines.
    blobs: Fifo<String, LineKeys>,
    /// The blobs of a file's history, by repository, path and the revisions it was read from.
    histories: Fifo<(PathBuf, String, u64), Arc<Vec<String>>>,
    /// git processes started, for tests: a save must not start one.
    started: usize,
    /// The trigger: a version's lines that hold it are known at their place too
    /// ([`crate::lines::version_keys`]).
    trigger: Option<memchr::memmem::Finder<'static>>,
    /// The searches of files' histories, and their answers.
    searches: history::Searches,
}

/// A change git may have written: the window it was seen in, and the file's bytes as read (what
/// tells, when a bound cuts the search of its history short, whether git wrote it at all).
#[derive(Clone, Copy)]
pub struct FromGit<'a> {
    pub window: &'a GitWindow,
    pub bytes: &'a [u8],
}

/// The two long-lived readers of one repository.
#[derive(Default)]
struct Readers {
    /// `--batch-check`: names to blob ids. It reads the index once, when first asked for a
    /// stage: started again when the index file changed since (`index`).
    check: Option<CatFile>,
    index: Option<FileStamp>,
    /// `--batch`: blob contents.
    contents: Option<CatFile>,
}

/// What tells a file's versions apart without reading it: git writes its index anew (a new
/// file renamed over) each time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    id: Option<(u64, u64)>,
}

impl FileStamp {
    fn of(path: &Path) -> Option<FileStamp> {
        let meta = std::fs::metadata(path).ok()?;
        let id = crate::sys::path_file_id(path).ok().flatten();
        Some(FileStamp { len: meta.len(), modified: meta.modified().ok(), id })
    }
}

impl GitLines {
    /// Nothing read yet.
    pub fn new() -> GitLines {
        GitLines {
            trees: Fifo::new(TREE_ANSWERS),
            blobs: Fifo::new(BLOB_LINES),
            histories: Fifo::new(1 << 20),
            ..GitLines::default()
        }
    }

    /// Nothing read yet; the lines of versions that hold `trigger` are known at their place
    /// too (see [`GitLines::held`]).
    pub fn for_trigger(trigger: &str) -> GitLines {
        let trigger = Some(memchr::memmem::Finder::new(trigger.as_bytes()).into_owned());
        GitLines { trigger, ..GitLines::new() }
    }

    /// How many `git` processes were started so far.
    #[cfg(test)]
    pub fn processes_started(&self) -> usize {
        self.started
    }

    /// The keys of the lines of each of `paths` (a file, then the paths it was moved from) at
    /// `HEAD`: what the file held before, as far as git knows. Empty outside a repository.
    pub fn head_lines(&mut self, paths: &[&Path]) -> Vec<LineKeys> {
        let mut out = Vec::new();
        for path in paths {
            let Some((git, rel)) = repo_path(path) else { continue };
            let Some(commit) = git.head_commit().filter(|_| !rel.contains('\n')) else {
                continue;
            };
            if let Some(Some(blob)) = self.blob_at(&git, &commit, &rel) {
                out.extend(self.blob_lines(&git, &blob));
            }
        }
        out
    }

    /// True if none of `paths` is in a git repository: git holds none of their lines.
    pub fn holds_none_of(&self, paths: &[&Path]) -> bool {
        paths.iter().all(|p| repo_path(p).is_none())
    }

    /// Which of `keys` (see [`crate::lines::line_key`]; with [`GitLines::for_trigger`], also
    /// [`crate::lines::place_keys`] of lines holding the trigger) are lines git holds in a
    /// version of one of `paths` (the file, then the paths it was moved from): see the module's
    /// documentation. For a change `from_git` (the file changed while git held its lock) the
    /// files' histories are searched too. What git cannot answer (no git, a broken repository)
    /// counts as no version.
    pub fn held(
        &mut self,
        paths: &[&Path],
        from_git: Option<FromGit>,
        keys: &HashSet<u64>,
    ) -> HashSet<u64> {
        self.lookup(paths, from_git, keys, false).unwrap_or_default()
    }

    /// True if [`GitLines::held`] for this change git may have written waits on a search of a
    /// file's history, now running in the background (see [`GitLines::search_in_background`]):
    /// its file is woken when the answer is in.
    pub fn history_pending(
        &mut self,
        paths: &[&Path],
        from_git: FromGit,
        keys: &HashSet<u64>,
    ) -> bool {
        self.searches.wakes() && self.lookup(paths, Some(from_git), keys, true).is_none()
    }

    /// [`GitLines::held`]; with `background`, `None` while a history is being searched.
    fn lookup(
        &mut self,
        paths: &[&Path],
        from_git: Option<FromGit>,
        keys: &HashSet<u64>,
        background: bool,
    ) -> Option<HashSet<u64>> {
        let window = from_git.map(|f| f.window);
        let mut search = Search { left: keys.clone(), found: HashSet::new() };
        for path in paths {
            if search.left.is_empty() {
                break;
            }
            let Some((git, rel)) = repo_path(path) else { continue };
            if rel.contains('\n') {
                // No batch reader takes such a name: the safe answer.
                tracing::debug!(
                    "{}: a line break in its name; its markers count as git's",
                    path.display()
                );
                search.all_held();
                break;
            }
            let revs = match git.held_revisions(window) {
                Some(revs) => revs,
                None => self.revisions_from_git(&git, window),
            };
            let mut blobs: Vec<String> = Vec::new();
            for rev in revs.iter().chain(&git.auto_merge()) {
                if let Some(Some(blob)) = self.blob_at(&git, rev, &rel) {
                    blobs.push(blob);
                }
            }
            blobs.extend(self.staged(&git, &rel));
            let mut seen = HashSet::new();
            for blob in blobs.into_iter().filter(|b| seen.insert(b.clone())) {
                if let Some(lines) = self.blob_lines(&git, &blob) {
                    search.take_held(&lines);
                }
                if search.left.is_empty() {
                    return Some(search.found);
                }
            }
            if let Some(from_git) = from_git {
                let job = history::Job {
                    git: git.clone(),
                    changed: paths[0].to_path_buf(),
                    path: path.to_path_buf(),
                    rel,
                    revs,
                    seen,
                    keys: search.left.clone(),
                    bytes: Arc::from(from_git.bytes),
                };
                self.history(job, &mut search, background)?;
            }
        }
        Some(search.found)
    }

    /// The blob `rel` is in `rev`, asked of the repository's check reader (kept by revision:
    /// only immutable names are asked). `None`: git cannot answer; `Some(None)`: no such file.
    fn blob_at(&mut self, git: &GitDir, rev: &str, rel: &str) -> Option<Option<String>> {
        let key = (rev.to_string(), rel.to_string());
        if let Some(answer) = self.trees.get(&key) {
            return Some(answer.clone());
        }
        let name = format!("{rev}:{rel}");
        let blob = |answer: Option<(String, String)>| answer.filter(|(_, t)| t == "blob");
        let mut answer = blob(self.check(git, &name, false)?);
        // Objects never change, so a reader can be wrong only by calling one missing: a file
        // the revision lacks is missing only if the revision itself is known. A reader that
        // does not know it is stale (started in a repository since deleted and cloned again,
        // its directory gone) and would call every file of the new commits missing: untracked,
        // so their markers the user's. It is started again, once.
        let base = rev.split('^').next().unwrap_or(rev);
        if answer.is_none() && self.check(git, base, false)?.is_none() {
            tracing::debug!("git cat-file in {}: no {base}; started again", git.top.display());
            // Both readers: the contents one was started in the same gone repository.
            self.readers.remove(&git.top);
            answer = blob(self.check(git, &name, false)?);
        }
        let answer = answer.map(|(id, _)| id);
        self.trees.insert(key, answer.clone(), 1);
        Some(answer)
    }

    /// The blobs of `rel` in the index, every stage (a conflict's base, ours, theirs), as the
    /// index file is now.
    fn staged(&mut self, git: &GitDir, rel: &str) -> Vec<String> {
        let mut blobs = Vec::new();
        for stage in 0..=3 {
            if let Some(Some((id, kind))) = self.check(git, &format!(":{stage}:{rel}"), true) {
                if kind == "blob" {
                    blobs.push(id);
                }
            }
        }
        blobs
    }

    /// One answer of the repository's `--batch-check` reader (started, or restarted once if it
    /// died; with `index`, restarted too if the index file changed since it read it).
    fn check(&mut self, git: &GitDir, name: &str, index: bool) -> Option<Option<(String, String)>> {
        let index_file = git.path.join("index");
        for _ in 0..2 {
            let readers = self.readers.entry(git.top.clone()).or_default();
            if index && readers.check.is_some() && readers.index != FileStamp::of(&index_file) {
                readers.check = None; // it read an older index
            }
            if readers.check.is_none() {
                // Taken first: an index written meanwhile starts the reader again next time.
                readers.index = FileStamp::of(&index_file);
                readers.check = Some(CatFile::start(&git.top, "--batch-check")?);
                self.started += 1;
            }
            let readers = self.readers.get_mut(&git.top)?;
            match readers.check.as_mut()?.check(name) {
                Ok(answer) => return Some(answer),
                Err(e) => tracing::debug!("git cat-file in {}: {e}", git.top.display()),
            }
            readers.check = None;
        }
        None
    }

    /// The keys of the lines of `blob` (kept), `None` if git cannot read it.
    fn blob_lines(&mut self, git: &GitDir, blob: &str) -> Option<LineKeys> {
        if let Some(lines) = self.blobs.get(&blob.to_string()) {
            return Some(lines.clone());
        }
        let bytes = self.contents(git, blob)?;
        let lines = Arc::new(version_keys(&bytes, self.trigger.as_ref()));
        self.blobs.insert(blob.to_string(), lines.clone(), lines.len().max(1));
        Some(lines)
    }

    /// The bytes of `blob` through the repository's `--batch` reader.
    fn contents(&mut self, git: &GitDir, blob: &str) -> Option<Vec<u8>> {
        for _ in 0..2 {
            let readers = self.readers.entry(git.top.clone()).or_default();
            if readers.contents.is_none() {
                readers.contents = Some(CatFile::start(&git.top, "--batch")?);
                self.started += 1;
            }
            let readers = self.readers.get_mut(&git.top)?;
            match readers.contents.as_mut()?.read(blob) {
                Ok(bytes) => return bytes,
                Err(e) => tracing::debug!("git cat-file in {}: {e}", git.top.display()),
            }
            readers.contents = None;
        }
        None
    }

    /// [`GitDir::held_revisions`] for refs only git can read (`reftable`): one process each.
    fn revisions_from_git(&mut self, git: &GitDir, window: Option<&GitWindow>) -> Vec<String> {
        let mut revs: Vec<String> = Vec::new();
        let ask = |args: &[&str]| -> Vec<String> {
            let out = git_command(&git.top).args(args).stderr(Stdio::null()).output();
            let out = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            out.unwrap_or_default()
                .lines()
                .map(str::to_string)
                .filter(|l| is_object_id(l))
                .collect()
        };
        revs.extend(ask(&["rev-parse", "--verify", "-q", "HEAD"]));
        revs.extend(ask(&["for-each-ref", "--format=%(objectname)"]));
        let stashes = ask(&["log", "-g", "--format=%H", "refs/stash"]);
        self.started += 3;
        revs.extend(git.operation_heads());
        for stash in stashes.into_iter().chain(window.into_iter().flat_map(|w| w.stashes.clone())) {
            revs.push(format!("{stash}^2"));
            revs.push(format!("{stash}^3"));
            revs.push(stash);
        }
        revs
    }
}

/// A `git cat-file` kept running (`--batch` or `--batch-check`): a name in, an answer out, no
/// process per question.
struct CatFile {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    fn start(top: &Path, mode: &str) -> Option<CatFile> {
        let mut git = git_command(top);
        git.args(["cat-file", mode]);
        git.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = git.spawn().ok()?; // no git at all
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take()?);
        Some(CatFile { child, stdin, stdout })
    }

    fn ask(&mut self, name: &str) -> std::io::Result<Option<(String, String, usize)>> {
        let stdin = self.stdin.as_mut().ok_or(std::io::ErrorKind::BrokenPipe)?;
        stdin.write_all(format!("{name}\n").as_bytes())?;
        stdin.flush()?;
        let mut header = String::new();
        if self.stdout.read_line(&mut header)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        batch_header(&header)
    }

    /// `--batch-check`: the id and type of the object `name` (one line, no line break), `None`
    /// if it does not exist.
    fn check(&mut self, name: &str) -> std::io::Result<Option<(String, String)>> {
        Ok(self.ask(name)?.map(|(id, kind, _)| (id, kind)))
    }

    /// `--batch`: the contents of the object `name`, `None` if it does not exist.
    fn read(&mut self, name: &str) -> std::io::Result<Option<Vec<u8>>> {
        let Some((_, _, size)) = self.ask(name)? else { return Ok(None) };
        read_blob(&mut self.stdout, size).map(Some)
    }
}

/// A `git cat-file --batch` header: `<oid> <type> <size>` (followed, in `--batch`, by the
/// content and a newline); `None` for `<name> missing` (or `ambiguous`), a line alone — whatever
/// spaces the name holds.
fn batch_header(header: &str) -> std::io::Result<Option<(String, String, usize)>> {
    let header = header.trim_end_matches('\n');
    if header.ends_with(" missing") || header.ends_with(" ambiguous") {
        return Ok(None);
    }
    match header.split(' ').collect::<Vec<_>>().as_slice() {
        [id, kind, size] => match size.parse() {
            Ok(size) => Ok(Some((id.to_string(), kind.to_string(), size))),
            Err(_) => Err(std::io::ErrorKind::InvalidData.into()),
        },
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

/// `git` in the repository at `top`. It never waits on a person or the network: no credential
/// prompt, no lazy fetch of a partial clone's missing blobs (those count as missing).
fn git_command(top: &Path) -> Command {
    let mut git = Command::new("git");
    git.arg("-C").arg(crate::sys::plain_path(top).as_ref());
    git.env("GIT_TERMINAL_PROMPT", "0").env("GIT_NO_LAZY_FETCH", "1");
    git.stdin(Stdio::null());
    git
}

/// The repository of `path` and the path relative to its work tree, `/`-separated.
fn repo_path(path: &Path) -> Option<(GitDir, String)> {
    let git = GitDir::find(path.parent()?)?;
    let rel = path.strip_prefix(&git.top).ok()?;
    let rel: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    Some((git, rel.join("/")))
}

/// A map that forgets its oldest entries once their costs pass a total.
struct Fifo<K, V> {
    map: HashMap<K, (V, usize)>,
    order: VecDeque<K>,
    cost: usize,
    max: usize,
}

impl<K, V> Default for Fifo<K, V> {
    fn default() -> Self {
        Fifo { map: HashMap::new(), order: VecDeque::new(), cost: 0, max: 0 }
    }
}

impl<K: Hash + Eq + Clone, V> Fifo<K, V> {
    fn new(max: usize) -> Self {
        Fifo { max, ..Fifo::default() }
    }

    fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(v, _)| v)
    }

    fn insert(&mut self, key: K, value: V, cost: usize) {
        match self.map.insert(key.clone(), (value, cost)) {
            Some((_, old)) => self.cost -= old,
            None => self.order.push_back(key),
        }
        self.cost += cost;
        while self.cost > self.max {
            let Some(oldest) = self.order.pop_front() else { break };
            if let Some((_, gone)) = self.map.remove(&oldest) {
                self.cost -= gone;
            }
        }
    }
}
