//! The live pipeline behind `watch` and the server: a changed file is read, its fresh markers
//! are found, those git brought or the user already asked are dropped, a paragraph is cut to
//! the lines written with it, and the rest are recorded and handed on as [`Ask`]s — by one
//! worker, [`Live`], that both front ends run. An ask is announced first and tagged after:
//! once it reached the client, and once its file has been quiet for the settle time, so that
//! no tag lands under an editor's unsaved typing and nothing is tagged that nobody heard. On a
//! root whose editor saves while its user types (see [`crate::autosave`]) an ask waits until
//! its text has settled, and its id stays in the record instead of the file.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::asks::{self, AskRecord, Asks, TagMode};
use crate::autosave::{Draft, Drafts, KeptHabit, LineDiff};
use crate::claude_writes::ClaudeWrites;
use crate::error::{Problem, StartError};
use crate::fsio::{self, Source, WriteError};
use crate::git::{self, GitLines, GitWindow};
use crate::id::{uuid_random, MarkerId};
use crate::languages::{Language, LanguageTable};
use crate::lines::{content_hash, line_start};
use crate::pairing::{self, anchor, InFile};
use crate::pipeline::relative;
use crate::scan::{Marker, Scanner, TreeCache};
use crate::stamp::{self, Stamp};
use crate::sys;
use crate::watch::{Change, Watch, WatchStats};

/// The previous bytes of recently changed files are kept up to this total: what tells the lines
/// a user just wrote from those that were already there.
const PREVIOUS_BYTES: usize = 32 * 1024 * 1024;

/// An ask announced this long ago or less whose text then changes under the user's hands is
/// being typed still: its new text is announced under the same id, as a revision.
const REVISE_WINDOW: Duration = Duration::from_secs(60);

/// A revision this soon after the announcement means the editor saved a fragment on its own:
/// the root is learned to autosave.
const LEARN_WINDOW: Duration = Duration::from_secs(10);

/// How many asks of one file are handed on before the next are claimed: a file with thousands
/// of markers goes out in rounds, in file order, each only once the one before reached the
/// client.
pub const ROUND: usize = 64;

/// A new ask: a marker the user just wrote, with its id.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The file, absolute.
    pub path: PathBuf,
    /// The file relative to the root, `/`-separated.
    pub file: String,
    /// The marker as announced (a paragraph cut to the lines written with it); `tag` holds the
    /// ask's id, unless the file could not be written in `--tag file` mode.
    pub marker: Marker,
    /// True when the id is to be written into the file as a tag: once the ask has reached the
    /// client and the file is quiet (the tag is not there yet when the ask is announced).
    pub stamped: bool,
    /// True when this is the whole text of an ask announced before under the same id (its
    /// first words, saved by an editor while the user was still typing): it replaces that one.
    pub revised: bool,
}

impl Ask {
    /// The id the ask is known by: `None` only for a file that could not be stamped.
    pub fn id(&self) -> Option<MarkerId> {
        self.marker.tag
    }

    /// The id for logs, or `untagged`.
    pub fn label(&self) -> String {
        self.id().map_or_else(|| "untagged".to_string(), |id| id.to_string())
    }
}

/// Asks that reached the client and wait for their file to be quiet to get their tags.
struct TagLater {
    ids: Vec<MarkerId>,
    due: Instant,
}

/// Turns changed paths into asks, exactly once each: a marker is recorded before it is
/// announced and tagged after it reached the client; a marker that matches an ask already
/// announced (an editor's stale copy) is that ask, and is left alone.
pub struct LivePipeline<'t> {
    root: PathBuf,
    scanner: Scanner<'t>,
    mode: TagMode,
    asks: Asks,
    /// Content hash of each file as we last left it: a change event for bytes we have already
    /// handled (our own stamp's rename, a touch) costs one read and a hash.
    last_seen: HashMap<PathBuf, u64>,
    /// The bytes of recently changed files as we last saw them.
    previous: Previous,
    /// The syntax trees of recently scanned files: a save re-parses only what it changed.
    trees: TreeCache,
    /// What git could have written into a file: no process spawned per save.
    git: GitLines,
    /// What Claude's own file tools wrote (recorded by its hooks).
    claude: ClaudeWrites,
    /// Untagged markers the user did not type (git brought them, Claude wrote them), by file
    /// and line key: not announced this run.
    not_typed: HashSet<(PathBuf, u64)>,
    /// Where files renamed inside the root were before.
    renames: Renames,
    /// Files read and scanned (not skipped as unchanged): for logs and tests.
    scanned: usize,
    /// The directory of the file at hand, held since it was read.
    here: Option<Here>,
    /// How long a file must be quiet before a tag is written into it, and the least time an
    /// ask's text must stay unchanged on a root whose editor autosaves. Zero: tags at once, and
    /// every save is a deliberate one.
    settle: Duration,
    /// What this root's editor does on its own.
    habit: KeptHabit,
    /// Asks that may still be being typed (autosaving editors).
    drafts: Drafts,
    /// Delivered asks waiting for their tags, by file.
    tag_later: HashMap<PathBuf, TagLater>,
    /// Files with more asks ready than one round handed on.
    backlog: VecDeque<Change>,
    /// The last file scanned: its path, the hash of its bytes, its markers.
    last_scan: Option<(PathBuf, u64, Vec<Marker>)>,
    /// Runs between the read and the stamp's write: tests change the file there.
    #[cfg(test)]
    before_stamp: Option<Hook>,
}

impl<'t> LivePipeline<'t> {
    /// A pipeline that stamps files and remembers its asks for this run, with no settle time
    /// (tags at once, every save deliberate). `root` must be canonical (as [`Watch`] reports
    /// paths).
    pub fn new(root: PathBuf, scanner: Scanner<'t>) -> Self {
        LivePipeline::with_asks(root, scanner, TagMode::File, Asks::in_memory())
    }

    /// A pipeline that records its asks in `asks`, stamping files or not as `mode` says.
    pub fn with_asks(root: PathBuf, scanner: Scanner<'t>, mode: TagMode, asks: Asks) -> Self {
        LivePipeline {
            root,
            scanner,
            mode,
            asks,
            last_seen: HashMap::new(),
            previous: Previous::default(),
            trees: TreeCache::new(),
            git: GitLines::new(),
            claude: ClaudeWrites::new(),
            not_typed: HashSet::new(),
            renames: Renames::default(),
            scanned: 0,
            here: None,
            settle: Duration::ZERO,
            habit: KeptHabit::default(),
            drafts: Drafts::default(),
            tag_later: HashMap::new(),
            backlog: VecDeque::new(),
            last_scan: None,
            #[cfg(test)]
            before_stamp: None,
        }
    }

    /// Sets the settle time (see [`LiveOptions::settle`]); what is learned of the root's
    /// editor is kept in `state_dir` (if any), where earlier runs kept it.
    pub fn settling(mut self, settle: Duration, state_dir: Option<&Path>) -> Self {
        self.settle = settle;
        self.habit = KeptHabit::load(state_dir, &self.root);
        self
    }

    /// How many changes were scanned; a change to bytes we left as they are is not.
    pub fn scanned(&self) -> usize {
        self.scanned
    }

    /// Handles one changed file as if every ask reached its client at once, and writes every
    /// tag owed at once (whatever the settle time); returns the asks. For tests and tools.
    pub fn process(&mut self, path: &Path, from_git: Option<&GitWindow>) -> Vec<Ask> {
        let change = Change {
            path: path.to_path_buf(),
            from_git: from_git.cloned(),
            rescan: None,
            renamed_from: Vec::new(),
        };
        let mut asks = self.process_change(&change, usize::MAX);
        self.delivered(&asks);
        let tagged = self.write_all_tags();
        for ask in &mut asks {
            ask.stamped = ask.id().is_some_and(|id| tagged.contains(&id));
        }
        asks
    }

    /// Handles one change from the watcher: returns at most `room` asks ready to be announced
    /// (recorded, not yet tagged: see [`LivePipeline::delivered`]); more wait in the backlog.
    /// A file listed by a rescan after lost events is handled only if it changed during the
    /// run (its bytes differ from the ones last seen, or, never seen, it was modified after
    /// watching began) — a rescan never fires markers nobody saved (a vendored file's, a
    /// dormant one).
    pub fn process_change(&mut self, change: &Change, room: usize) -> Vec<Ask> {
        let asks = self.look(change, room, false);
        self.let_go();
        asks
    }

    /// Lets go of the directory held since the last read: an open directory keeps the kernel
    /// from reporting its deletion (the root's `rm -rf` would go unseen until the next save).
    fn let_go(&mut self) {
        self.here = None;
    }

    fn look(&mut self, change: &Change, room: usize, all_ready: bool) -> Vec<Ask> {
        let path = change.path.as_path();
        let now = Instant::now();
        if let Some(later) = self.tag_later.get_mut(path) {
            later.due = now + self.settle; // not quiet yet
        }
        let Some(source) = self.read(path) else {
            self.drafts.forget(path);
            return Vec::new();
        };
        self.follow_rename(change);
        let hash = content_hash(&source.bytes);
        if self.last_seen.get(path) == Some(&hash) {
            tracing::debug!("{}: unchanged since we left it", path.display());
            return Vec::new(); // bytes we already handled: our own stamp, a touch
        }
        if let Some(since) = change.rescan {
            // Seen before: its bytes differ, so it changed. Never seen: only if modified since.
            let modified = source.metadata.modified().ok();
            if !self.last_seen.contains_key(path) && modified.is_none_or(|m| m < since) {
                tracing::debug!("{}: unchanged across lost events; not announced", path.display());
                return Vec::new();
            }
        }
        let bytes = &source.bytes;
        let Some(lang) = self.scanner.table().detect(path, bytes) else { return Vec::new() };
        let file = relative(&self.root, path);
        let diff = self.previous.get(path).map(|old| LineDiff::between(old, bytes));
        let (markers, mut fresh, revisions) = self.fresh_markers(lang, path, &file, bytes, diff);
        if !fresh.is_empty() {
            fresh = self.drop_claude_lines(path, bytes, fresh);
        }
        if !fresh.is_empty() {
            fresh = self.drop_git_lines(path, bytes, fresh, change.from_git.as_ref());
        }
        if !fresh.is_empty() {
            let old_lines = self.old_lines(path);
            fresh = cut_to_new_lines(lang, bytes, fresh, &old_lines);
        }
        let mut candidates: Vec<Draft> = revisions;
        candidates.extend(fresh.into_iter().map(|m| Draft::new(m, None, now)));
        candidates.sort_by_key(|d| d.marker.line);
        let ready = if all_ready || !self.waits_for_typing(&candidates) {
            self.drafts.forget(path);
            candidates
        } else {
            self.drafts.update(path, candidates, diff, now, &mut self.habit)
        };
        if !ready.is_empty() && !fsio::wait_closed(path, now) {
            // Still open for writing: what it holds may be half an ask. Its writer's close
            // brings the next change, which looks again.
            tracing::debug!(
                "{}: still open for writing by another program; asked when it is closed",
                path.display()
            );
            self.drafts.forget(path);
            return Vec::new();
        }
        self.remember(path, bytes);
        if ready.is_empty() {
            return Vec::new();
        }
        self.announce(lang, path, &file, &source, &markers, ready, room, change)
    }

    /// True if these candidates must wait for their text to settle: on a root whose editor
    /// autosaves, always; elsewhere, only revisions (their user is typing right now).
    fn waits_for_typing(&self, candidates: &[Draft]) -> bool {
        !self.settle.is_zero()
            && (self.habit.habit.autosave || candidates.iter().any(|c| c.revises.is_some()))
    }

    /// The file's bytes, if it is ours to read: inside the root (symlinks are not followed,
    /// but be sure), of a type some language may claim, and a readable regular file.
    fn read(&mut self, path: &Path) -> Option<Source> {
        self.here = None;
        let rel = path.strip_prefix(&self.root).ok()?;
        if !self.scanner.table().may_claim(path) {
            return None;
        }
        // Reached without following a symlink in any directory of the path, and held: what
        // is read and stamped is in the root, whatever happens to the path meanwhile.
        let (rel_dir, name) = (rel.parent().unwrap_or(Path::new("")), path.file_name()?);
        let beneath = match sys::dir_beneath(&self.root, rel_dir) {
            Ok(beneath) => beneath,
            Err(e) => {
                tracing::debug!(
                    "{}: not read: its directory is gone or a symlink ({e})",
                    path.display()
                );
                self.last_seen.remove(path);
                return None;
            }
        };
        let real = beneath.path(name);
        let here = Here { beneath, real, rel_dir: rel_dir.to_path_buf() };
        match fsio::read_source(&here.real).map_err(|e| e.shown_as(|p| here.beneath.shown(p))) {
            Ok(source) => {
                self.here = Some(here);
                Some(source)
            }
            Err(e) => {
                if path.exists() {
                    Problem::Read(e).log();
                } else {
                    tracing::debug!("{e}"); // deleted or renamed away: its new path says so
                }
                self.last_seen.remove(path);
                None
            }
        }
    }

    /// The untagged markers of the file that are neither git's nor an ask already announced,
    /// and the revisions: asks announced a moment ago whose text the user is still typing.
    /// The asks of this file whose marker is gone are settled, and every other one's place is
    /// brought up to date.
    fn fresh_markers(
        &mut self,
        lang: &Language,
        path: &Path,
        file: &str,
        bytes: &[u8],
        diff: Option<LineDiff>,
    ) -> (Vec<Marker>, Vec<Marker>, Vec<Draft>) {
        self.scanned += 1;
        let markers = self.markers(lang, path, bytes);
        tracing::debug!("{}: {} marker(s)", path.display(), markers.len());
        if markers.is_empty() && !self.asks.may_have_pending(file) {
            return (markers, Vec::new(), Vec::new()); // nothing to ask, nothing to settle
        }
        let revising = !self.settle.is_zero();
        let now = Instant::now();
        let found = InFile::new(lang, bytes, file, &markers).after(diff);
        let (pairs, revisions) = self.asks.update(|records| {
            let pairs = pairing::pair(&found, records);
            let revisions =
                if revising { find_revisions(&found, &pairs, records) } else { Vec::new() };
            settle(&found, &pairs, &revisions, records);
            (pairs, revisions)
        });
        for (i, id, _) in &revisions {
            tracing::debug!(
                "{}:{}: {id} changed under the user's hands",
                path.display(),
                markers[*i].line
            );
        }
        if revisions.iter().any(|(_, _, soon)| *soon) && self.habit.learn_autosave() {
            self.tag_later.clear(); // nothing is written under an autosaving editor's typing
        }
        let revised: HashSet<usize> = revisions.iter().map(|(i, _, _)| *i).collect();
        let revisions = revisions
            .into_iter()
            .map(|(i, id, _)| Draft::new(markers[i].clone(), Some(id), now))
            .collect();
        let paths = self.renames.chain(path);
        let not_typed = |m: &Marker| {
            let key = git::line_key(&line_of(bytes, m));
            paths.iter().any(|p| self.not_typed.contains(&(p.clone(), key)))
        };
        let fresh = markers
            .iter()
            .enumerate()
            .filter(|(i, m)| pairs[*i].is_none() && !revised.contains(i) && !m.is_tagged())
            .map(|(_, m)| m.clone())
            .filter(|m| !not_typed(m))
            .collect();
        (markers, fresh, revisions)
    }

    /// The lines the file held before: at `HEAD` (its own path's and those it was renamed
    /// from) and in the version we last saw.
    fn old_lines(&mut self, path: &Path) -> OldLines {
        let paths = self.renames.chain(path);
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let git = self.git.head_lines(&paths);
        let seen = self.previous.get(path).map(git::line_keys).unwrap_or_default();
        OldLines { git, seen }
    }

    /// Drops the markers that arrived through git rather than from the user's hands: their
    /// trigger line is in a version of the file (or of a path it was renamed from) that git
    /// holds; with `window` (it changed while git held its lock), in its history too (see
    /// [`GitLines::held`]). They stay quiet for the rest of the run.
    fn drop_git_lines(
        &mut self,
        path: &Path,
        bytes: &[u8],
        fresh: Vec<Marker>,
        window: Option<&GitWindow>,
    ) -> Vec<Marker> {
        let paths = self.renames.chain(path);
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let keys: HashSet<u64> = fresh.iter().map(|m| git::line_key(&line_of(bytes, m))).collect();
        let held = self.git.held(&paths, window, &keys);
        self.drop_not_typed(path, bytes, fresh, &held, "from git")
    }

    /// Drops the markers on lines Claude's own file tools wrote (as its hooks recorded them,
    /// for the file or a path it was renamed from). They stay quiet for the rest of the run.
    fn drop_claude_lines(&mut self, path: &Path, bytes: &[u8], fresh: Vec<Marker>) -> Vec<Marker> {
        let written: HashSet<u64> =
            self.renames.chain(path).iter().flat_map(|p| self.claude.lines(p)).collect();
        self.drop_not_typed(path, bytes, fresh, &written, "written by Claude")
    }

    /// Drops the markers whose line's key is in `keys`, remembering them as not typed.
    fn drop_not_typed(
        &mut self,
        path: &Path,
        bytes: &[u8],
        mut fresh: Vec<Marker>,
        keys: &HashSet<u64>,
        why: &str,
    ) -> Vec<Marker> {
        fresh.retain(|m| {
            let key = git::line_key(&line_of(bytes, m));
            let not_typed = keys.contains(&key);
            if not_typed {
                tracing::debug!("{}:{}: {why}, not announced", path.display(), m.line);
                self.not_typed.insert((path.to_path_buf(), key));
            }
            !not_typed
        });
        fresh
    }

    /// A file renamed inside the root (itself, or a directory above it) keeps what it had at
    /// its old paths: their versions in git and Claude's records (through `renames`), the
    /// markers found not typed there, their last bytes and hash when it has none of its own,
    /// and — when the old path is gone, a move and not a copy — their asks, which are now its.
    fn follow_rename(&mut self, change: &Change) {
        let path = &change.path;
        let mut to = path.clone();
        for from in &change.renamed_from {
            if from == &to || from == path {
                continue;
            }
            self.renames.insert(&to, from);
            to = from.clone();
            if self.previous.get(path).is_none() {
                if let Some(bytes) = self.previous.get(from).map(<[u8]>::to_vec) {
                    self.previous.insert(path, &bytes);
                }
            }
            if let (false, Some(&hash)) =
                (self.last_seen.contains_key(path), self.last_seen.get(from))
            {
                self.last_seen.insert(path.clone(), hash);
            }
            let keys: Vec<u64> =
                self.not_typed.iter().filter(|(p, _)| p == from).map(|(_, k)| *k).collect();
            self.not_typed.extend(keys.into_iter().map(|k| (path.clone(), k)));
            if !from.exists() {
                let (old, new) = (relative(&self.root, from), relative(&self.root, path));
                self.asks.update(|records| {
                    for r in records.iter_mut().filter(|r| r.file == old) {
                        tracing::debug!("{old} → {new}: {} follows its file", r.id);
                        r.file = new.clone();
                    }
                });
            }
        }
    }

    /// Records the ready markers as asks — new ones with new ids (unless another server on the
    /// root just did), revisions under the id they had — at most `room` of them, in file order
    /// (the rest wait in the backlog). Nothing is written yet: the ids go into the file once
    /// the asks reached the client ([`LivePipeline::delivered`]). A file that cannot be tagged
    /// (read-only, several hard links, or too large for one more tag) gets untagged asks,
    /// recorded, so once.
    #[allow(clippy::too_many_arguments)]
    fn announce(
        &mut self,
        lang: &Language,
        path: &Path,
        file: &str,
        source: &Source,
        markers: &[Marker],
        mut ready: Vec<Draft>,
        room: usize,
        change: &Change,
    ) -> Vec<Ask> {
        if ready.len() > room {
            ready.truncate(room);
            self.backlog.push_back(change.clone());
        }
        let bytes = &source.bytes;
        let taggable = self.mode == TagMode::File && self.taggable(path, source, ready.len());
        let with_id = taggable || self.mode == TagMode::Never;
        let (fresh, revisions): (Vec<Draft>, Vec<Draft>) =
            ready.into_iter().partition(|d| d.revises.is_none());
        let fresh: Vec<Marker> = fresh.into_iter().map(|d| d.marker).collect();
        let (claimed, revised) = self.asks.update(|records| {
            let found = InFile::new(lang, bytes, file, markers);
            let claimed = claim(&found, fresh, records, with_id);
            let revised = revise(bytes, revisions, records);
            (claimed, revised)
        });
        let stamped = taggable && !self.habit.habit.autosave;
        let ask = |marker, revised| Ask {
            path: path.to_path_buf(),
            file: file.to_string(),
            marker,
            stamped,
            revised,
        };
        let mut asks: Vec<Ask> = claimed.into_iter().map(|m| ask(m, false)).collect();
        asks.extend(revised.into_iter().map(|m| ask(m, true)));
        asks.sort_by_key(|a| a.marker.line);
        asks
    }

    /// True if a tag can be written into the file at all: `--tag file`, writable, one name,
    /// and room under the size limit for `n` more tags. (What only the write itself can tell —
    /// metadata a new file cannot keep — shows when the tag is written.)
    fn taggable(&self, path: &Path, source: &Source, n: usize) -> bool {
        let tags = n as u64 * MarkerId::TAG_LEN as u64;
        let why = if source.bytes.len() as u64 + tags > fsio::MAX_FILE_SIZE {
            Some("a tag would pass the size limit")
        } else {
            fsio::cannot_replace(path, &source.metadata)
        };
        if let Some(why) = why {
            tracing::debug!("{}: not tagged: {why}", path.display());
        }
        why.is_none()
    }

    /// The asks reached the client: those to be tagged get their tags once their file is quiet.
    pub fn delivered(&mut self, asks: &[Ask]) {
        let due = Instant::now() + self.settle;
        for ask in asks.iter().filter(|a| a.stamped) {
            let Some(id) = ask.id() else { continue };
            let later =
                self.tag_later.entry(ask.path.clone()).or_insert(TagLater { ids: Vec::new(), due });
            later.ids.push(id);
            later.due = due;
        }
    }

    /// The asks never reached the client (it went away): they are forgotten, untagged, so that
    /// the next look at their file — this session's or the next owner's — finds them again.
    pub fn undelivered(&mut self, asks: &[Ask]) {
        if asks.is_empty() {
            return;
        }
        let ids: HashSet<MarkerId> =
            asks.iter().filter(|a| !a.revised).filter_map(Ask::id).collect();
        self.asks.update(|records| records.retain(|r| !ids.contains(&r.id)));
        for ask in asks {
            self.last_seen.remove(&ask.path);
        }
    }

    /// The next round of a file with more asks than one round took, if any.
    pub fn backlog(&mut self, room: usize) -> Option<Vec<Ask>> {
        let change = self.backlog.pop_front()?;
        self.last_seen.remove(&change.path); // look again, although we left it so
        let asks = self.look(&change, room, true);
        self.let_go();
        Some(asks)
    }

    /// When the worker must wake with no event: a draft due, or a tag.
    pub fn next_due(&self) -> Option<Instant> {
        let settle = self.habit.habit.ask_settle(self.settle);
        let tags = self.tag_later.values().map(|t| t.due).min();
        [self.drafts.next_due(settle), tags].into_iter().flatten().min()
    }

    /// What falls due at `now`: drafts whose text has settled (returned, to be announced; at
    /// most `room`), and tags whose file is quiet (written).
    pub fn run_due(&mut self, now: Instant, room: usize) -> Vec<Ask> {
        let settle = self.habit.habit.ask_settle(self.settle);
        let mut asks = Vec::new();
        for path in self.drafts.due_files(now, settle) {
            asks.extend(self.ripen(&path, now, settle, room.saturating_sub(asks.len())));
        }
        self.write_due_tags(now);
        self.let_go();
        asks
    }

    /// The drafts of `path` that have settled, announced — if the file still holds exactly
    /// what they were seen in; otherwise the file is looked at anew.
    fn ripen(&mut self, path: &Path, now: Instant, settle: Duration, room: usize) -> Vec<Ask> {
        let Some(source) = self.read(path) else {
            self.drafts.forget(path);
            return Vec::new();
        };
        let change =
            Change { path: path.to_path_buf(), from_git: None, rescan: None, renamed_from: vec![] };
        if self.last_seen.get(path) != Some(&content_hash(&source.bytes)) {
            return self.look(&change, room, false); // changed: its event is on its way too
        }
        let Some(lang) = self.scanner.table().detect(path, &source.bytes) else {
            self.drafts.forget(path);
            return Vec::new();
        };
        let ready = self.drafts.take_due(path, now, settle);
        let file = relative(&self.root, path);
        let markers = self.markers(lang, path, &source.bytes);
        self.announce(lang, path, &file, &source, &markers, ready, room, &change)
    }

    /// Writes the tags whose file has been quiet long enough (all, with no settle time);
    /// returns the ids written.
    fn write_due_tags(&mut self, now: Instant) -> HashSet<MarkerId> {
        let due: Vec<PathBuf> =
            self.tag_later.iter().filter(|(_, t)| t.due <= now).map(|(p, _)| p.clone()).collect();
        let mut written = HashSet::new();
        for path in due {
            written.extend(self.write_tags(&path));
        }
        written
    }

    /// Writes every tag still owed, whatever the time (the run is ending); returns the ids
    /// written.
    pub fn write_all_tags(&mut self) -> HashSet<MarkerId> {
        let paths: Vec<PathBuf> = self.tag_later.keys().cloned().collect();
        let written = paths.iter().flat_map(|path| self.write_tags(path)).collect();
        self.let_go();
        written
    }

    /// Writes the tags owed to `path`: the untagged markers that are those asks get their ids.
    /// If the user wrote the file meanwhile, the tags wait for the next quiet moment (the
    /// user's write wins, and brings its own change); if the file cannot be written, they are
    /// given up (the asks are recorded: once).
    fn write_tags(&mut self, path: &Path) -> Vec<MarkerId> {
        let Some(later) = self.tag_later.remove(path) else { return Vec::new() };
        tracing::debug!("{}: writing {} tag(s)", path.display(), later.ids.len());
        let Some(source) = self.read(path) else { return Vec::new() }; // gone: nothing owed
        let bytes = &source.bytes;
        let Some(lang) = self.scanner.table().detect(path, bytes) else { return Vec::new() };
        let file = relative(&self.root, path);
        let markers = self.markers(lang, path, bytes);
        let records = self.asks.snapshot();
        let pairs = pairing::pair(&InFile::new(lang, bytes, &file, &markers), &records);
        let owed: HashSet<MarkerId> = later.ids.iter().copied().collect();
        let stamps: Vec<Stamp> = markers
            .iter()
            .zip(&pairs)
            .filter(|(m, _)| !m.is_tagged())
            .filter_map(|(m, p)| {
                let id = records[(*p)?].id;
                owed.contains(&id).then_some(Stamp { insert_at: m.insert_at, id })
            })
            .collect();
        if stamps.is_empty() {
            tracing::debug!("{}: no tag owed any more", path.display());
            return Vec::new(); // resolved, deleted, or tagged already
        }
        let stamped = stamp::splice(bytes, &stamps);
        if stamped.len() as u64 > fsio::MAX_FILE_SIZE {
            tracing::debug!("{}: a tag would pass the size limit; not tagged", path.display());
            return Vec::new();
        }
        #[cfg(test)]
        if let Some(hook) = self.before_stamp.as_mut() {
            hook(path);
        }
        let target = self.here.as_ref().map_or_else(|| path.to_path_buf(), |h| h.real.clone());
        let in_place =
            || self.here.as_ref().is_none_or(|h| sys::same_dir(&h.beneath, &self.root, &h.rel_dir));
        let written = if !in_place() {
            // A directory of the path was swapped (for a symlink out of the root, say): the
            // path no longer names what was read. Its new state brings its own event. (The
            // replace looks again just before and just after its exchange.)
            Err(WriteError::Conflict { path: path.to_path_buf() })
        } else {
            fsio::replace_checked_in(&target, bytes, &stamped, &in_place)
                .map_err(|e| e.shown_as(|p| self.shown(p)))
        };
        match written {
            Ok(()) => {
                tracing::debug!("{}: tagged {} ask(s)", path.display(), stamps.len());
                self.remember(path, &stamped);
                stamps.iter().map(|s| s.id).collect()
            }
            Err(e) if is_conflict(&e) => {
                // Whatever caused it brings the next change, and the tags wait for the quiet
                // after it. Nor are these bytes "seen" as left: the next change looks again.
                tracing::debug!("{e}; tagged when it is quiet again");
                self.last_seen.remove(path);
                let due = Instant::now() + self.settle.max(Duration::from_millis(50));
                self.tag_later.insert(path.to_path_buf(), TagLater { due, ..later });
                Vec::new()
            }
            Err(e) => {
                Problem::Write(e).log();
                Vec::new()
            }
        }
    }

    /// The markers of `path`'s `bytes`: scanned (incrementally), or, for the very bytes scanned
    /// last, as found then — a file with thousands of asks is scanned once for all its rounds,
    /// not once a round.
    fn markers(&mut self, lang: &Language, path: &Path, bytes: &[u8]) -> Vec<Marker> {
        let hash = content_hash(bytes);
        if let Some((p, h, markers)) = &self.last_scan {
            if p == path && *h == hash {
                return markers.clone();
            }
        }
        let markers = self.scanner.scan_incremental(lang, bytes, &mut self.trees, path);
        self.last_scan = Some((path.to_path_buf(), hash, markers.clone()));
        markers
    }

    /// `path` (a name under the held directory of the file at hand) as the user knows it.
    fn shown(&self, path: &Path) -> PathBuf {
        self.here.as_ref().map_or_else(|| path.to_path_buf(), |h| h.beneath.shown(path))
    }

    fn remember(&mut self, path: &Path, bytes: &[u8]) {
        self.last_seen.insert(path.to_path_buf(), content_hash(bytes));
        self.previous.insert(path, bytes);
    }
}

/// A write that lost to the user: the file changed, is still being written (open for writing
/// by another program), or is gone from its path (deleted, renamed away with its directory,
/// replaced by a directory or a symlink). Its new state brings its own event (a writer's close
/// does).
fn is_conflict(e: &WriteError) -> bool {
    match e {
        WriteError::Conflict { .. } | WriteError::Busy { .. } | WriteError::NotRegular { .. } => {
            true
        }
        WriteError::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// The file at hand: its directory, reached beneath the root and held open, and the name
/// that reaches the file through it.
struct Here {
    beneath: sys::Beneath,
    real: PathBuf,
    /// The directory relative to the root, to check that it is still the one held.
    rel_dir: PathBuf,
}

/// A test's hook into the pipeline.
#[cfg(test)]
type Hook = Box<dyn FnMut(&Path) + Send>;

/// What a file held before this change, by line key ([`git::line_key`]).
struct OldLines {
    /// At `HEAD` (shared with git's cache: not copied per save).
    git: Vec<git::Lines>,
    /// The lines of the version we last saw.
    seen: HashSet<u64>,
}

impl OldLines {
    fn is_empty(&self) -> bool {
        self.git.iter().all(|g| g.is_empty()) && self.seen.is_empty()
    }

    /// True if the file held `line` before.
    fn contains(&self, line: &[u8]) -> bool {
        let key = git::line_key(line);
        self.git.iter().any(|g| g.contains(&key)) || self.seen.contains(&key)
    }
}

/// Where files renamed inside the root were before (new path → old path), for the latest
/// renames: what tells a moved file's old lines from new ones on its later saves too.
#[derive(Default)]
struct Renames {
    from: HashMap<PathBuf, PathBuf>,
    order: VecDeque<PathBuf>,
}

/// How many renames [`Renames`] keeps.
const RENAMES: usize = 4096;

impl Renames {
    fn insert(&mut self, to: &Path, from: &Path) {
        if self.from.insert(to.to_path_buf(), from.to_path_buf()).is_none() {
            self.order.push_back(to.to_path_buf());
        }
        while self.order.len() > RENAMES {
            if let Some(oldest) = self.order.pop_front() {
                self.from.remove(&oldest);
            }
        }
    }

    /// `path`, then the paths it had before, newest first (a few at most, no cycles).
    fn chain(&self, path: &Path) -> Vec<PathBuf> {
        let mut chain = vec![path.to_path_buf()];
        while let Some(from) = self.from.get(chain.last().unwrap_or(&PathBuf::new())) {
            if chain.contains(from) || chain.len() > 8 {
                break;
            }
            chain.push(from.clone());
        }
        chain
    }
}

/// The asks of this save whose text the user is still typing: a pending ask announced within
/// [`REVISE_WINDOW`] whose own lines now read otherwise — its tagged marker (the editor
/// reloaded our tag and the user typed on after it), or, with its marker gone, the untagged
/// one at its place (the editor wrote its buffer back over our tag). Each as (marker index,
/// id, announced within [`LEARN_WINDOW`]).
fn find_revisions(
    found: &InFile,
    pairs: &[Option<usize>],
    records: &[AskRecord],
) -> Vec<(usize, MarkerId, bool)> {
    let InFile { lang, src, file, markers, diff } = *found;
    let now = asks::now();
    let recent = |r: &AskRecord| {
        r.file == file
            && r.is_pending()
            && now.saturating_sub(r.announced) < REVISE_WINDOW.as_secs()
    };
    let soon = |r: &AskRecord| now.saturating_sub(r.announced) < LEARN_WINDOW.as_secs();
    let mut out = Vec::new();
    for (mi, m) in markers.iter().enumerate() {
        let Some(r) = pairs[mi].map(|ri| &records[ri]) else { continue };
        if m.is_tagged() && recent(r) && stamp::first_lines(lang, src, m, r.lines).text != r.text {
            out.push((mi, r.id, soon(r)));
        }
    }
    let paired: HashSet<usize> = pairs.iter().flatten().copied().collect();
    let by_line: HashMap<usize, usize> =
        markers.iter().enumerate().map(|(mi, m)| (m.line, mi)).collect();
    for (ri, r) in records.iter().enumerate() {
        if paired.contains(&ri) || !recent(r) || out.iter().any(|(_, id, _)| *id == r.id) {
            continue;
        }
        let line = diff.map_or(r.line, |d| d.map(r.line));
        let at_its_place = by_line.get(&line).copied().filter(|&mi| {
            let m = &markers[mi];
            !m.is_tagged() && pairs[mi].is_none() && m.text != r.text
        });
        if let Some(mi) = at_its_place {
            if !out.iter().any(|(i, _, _)| *i == mi) {
                out.push((mi, r.id, soon(r)));
            }
        }
    }
    out
}

/// Settles the asks of `file` after a save: a pending one whose marker is gone (resolved by
/// hand, deleted) is resolved now, so a stale buffer that brings it back within the window
/// does not ask again; every one still there has its place brought up to date.
fn settle(
    found: &InFile,
    pairs: &[Option<usize>],
    revisions: &[(usize, MarkerId, bool)],
    records: &mut [AskRecord],
) {
    let InFile { src, file, markers, .. } = *found;
    for (mi, m) in markers.iter().enumerate() {
        let Some(r) = pairs[mi].map(|ri| &mut records[ri]) else { continue };
        let place = (m.line, anchor(src, m));
        if r.is_pending() && (r.line, r.anchor) != place {
            (r.line, r.anchor) = place;
        }
    }
    let paired: HashSet<usize> = pairs.iter().flatten().copied().collect();
    for (ri, r) in records.iter_mut().enumerate() {
        let revising = revisions.iter().any(|(_, id, _)| *id == r.id);
        if r.file == file && r.is_pending() && !paired.contains(&ri) && !revising {
            tracing::debug!("{file}: {} is gone; settled", r.id);
            r.resolved = Some(asks::now());
        }
    }
}

/// Gives each fresh marker a new id and records it — unless, looked at under the ledger's lock,
/// another server on the root has just recorded it (`markers`, all of the file's, are paired
/// with the records again). Returns the markers claimed, with their ids as tags; without,
/// when `with_id` is false (a file `--tag file` cannot tag: Claude is told to ask the user to
/// remove the marker).
fn claim(
    found: &InFile,
    fresh: Vec<Marker>,
    records: &mut Vec<AskRecord>,
    with_id: bool,
) -> Vec<Marker> {
    let InFile { src, file, markers, .. } = *found;
    let pairs = pairing::pair(found, records);
    let recorded: HashSet<usize> =
        markers.iter().zip(&pairs).filter(|(_, p)| p.is_some()).map(|(m, _)| m.insert_at).collect();
    let mut taken: HashSet<MarkerId> = records.iter().map(|r| r.id).collect();
    let mut claimed = Vec::new();
    for m in fresh {
        if recorded.contains(&m.insert_at) {
            continue; // another server on the root recorded it a moment ago
        }
        let id = MarkerId::fresh(src, &taken, uuid_random);
        taken.insert(id);
        records.push(record(src, file, &m, id));
        claimed.push(Marker { tag: with_id.then_some(id), ..m });
    }
    claimed
}

/// Gives the revisions their records' new text, lines and place; returns them with their ids.
fn revise(src: &[u8], revisions: Vec<Draft>, records: &mut [AskRecord]) -> Vec<Marker> {
    let mut out = Vec::new();
    for d in revisions {
        let Some(id) = d.revises else { continue };
        let Some(r) = records.iter_mut().find(|r| r.id == id && r.is_pending()) else { continue };
        let m = Marker { tag: Some(id), ..d.marker };
        *r = AskRecord { announced: r.announced, ..record(src, &r.file.clone(), &m, id) };
        out.push(m);
    }
    out
}

/// The record of an ask announced now.
fn record(src: &[u8], file: &str, m: &Marker, id: MarkerId) -> AskRecord {
    AskRecord {
        id,
        file: file.to_string(),
        text: m.text.clone(),
        lines: m.end_line - m.line + 1,
        line: m.line,
        anchor: anchor(src, m),
        announced: asks::now(),
        resolved: None,
    }
}

/// A paragraph ask ends before the first of its continuation lines that the file already held
/// (a `// SAFETY:` note, a licence header, a doc comment the ask was written above): only the
/// lines written with the ask are the ask. A paragraph whose first line is old too was there
/// before (a dormant ask) and is kept whole.
fn cut_to_new_lines(
    lang: &Language,
    src: &[u8],
    fresh: Vec<Marker>,
    old: &OldLines,
) -> Vec<Marker> {
    fresh
        .into_iter()
        .map(|m| {
            if old.is_empty() || old.contains(&line_of(src, &m)) {
                return m;
            }
            stamp::cut_before_old_lines(lang, src, &m, |l| old.contains(l))
        })
        .collect()
}

/// The bytes of recently changed files, bounded by [`PREVIOUS_BYTES`]: the oldest go first.
#[derive(Default)]
struct Previous {
    files: HashMap<PathBuf, Box<[u8]>>,
    order: VecDeque<PathBuf>,
    total: usize,
}

impl Previous {
    fn get(&self, path: &Path) -> Option<&[u8]> {
        self.files.get(path).map(|b| &b[..])
    }

    fn insert(&mut self, path: &Path, bytes: &[u8]) {
        if let Some(old) = self.files.insert(path.to_path_buf(), bytes.into()) {
            self.total -= old.len();
            self.order.retain(|p| p != path);
        }
        self.total += bytes.len();
        self.order.push_back(path.to_path_buf());
        while self.total > PREVIOUS_BYTES {
            let Some(oldest) = self.order.pop_front() else { break };
            if let Some(gone) = self.files.remove(&oldest) {
                self.total -= gone.len();
            }
        }
    }
}

/// The whole line holding the marker's trigger, without its line ending: what git's versions
/// of the file are searched for (a multi-line ask is known by its first line).
fn line_of(src: &[u8], m: &Marker) -> Vec<u8> {
    let at = m.insert_at;
    let start = line_start(src, at);
    let end = memchr::memchr(b'\n', &src[at..]).map_or(src.len(), |i| at + i);
    let line = &src[start..end];
    line.strip_suffix(b"\r").unwrap_or(line).to_vec()
}

// ---- the one live worker: watch → pipeline → asks, for `watch` and the server --------------

/// How a live run is set up.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The directory to watch.
    pub root: PathBuf,
    /// Quiet time after a file's last event before it is read.
    pub debounce: Duration,
    /// How long a file must be quiet before a tag is written into it; and, on a root whose
    /// editor saves while its user types, the least time an ask's text must stay unchanged
    /// before it is announced. Zero: tags at once, and every save is a deliberate one.
    pub settle: Duration,
    /// The word that starts an ask.
    pub trigger: String,
    /// Where an ask's id goes: into the file, or only into the ledger.
    pub tag: TagMode,
}

/// What became of an ask handed to a [`Sink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// It reached the client (written and flushed to it).
    Delivered,
    /// It did not, and nothing more will: the client is gone.
    Closed,
}

/// Where the live worker's asks go: the terminal, or the MCP server's announcer.
pub trait Sink: Send + 'static {
    /// Hands one ask on, in order, and returns once it reached the client — or could not: an
    /// ask is tagged only once it was delivered, so a tag on disk is an ask someone heard.
    fn deliver(&mut self, ask: Ask) -> Delivery;

    /// Hands a round of asks on, in order, and returns how many of them, from the first,
    /// reached the client (the rest did not, and nothing more will). One at a time unless a
    /// sink can keep several on their way at once.
    fn deliver_round(&mut self, asks: &[Ask]) -> usize {
        asks.iter().take_while(|a| self.deliver((*a).clone()) == Delivery::Delivered).count()
    }
}

/// A closure is a sink that has delivered the ask when it returns [`ControlFlow::Continue`]
/// (the terminal: the write is done).
impl<F: FnMut(Ask) -> ControlFlow<()> + Send + 'static> Sink for F {
    fn deliver(&mut self, ask: Ask) -> Delivery {
        match self(ask) {
            ControlFlow::Continue(()) => Delivery::Delivered,
            ControlFlow::Break(()) => Delivery::Closed,
        }
    }
}

/// How long [`Live::stop`] waits for the worker to finish the file at hand. A stamp takes
/// milliseconds; a worker still busy after this is blocked on a sink nobody reads, and is left.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// A running watch and the worker that turns its changes into asks, handing them to the
/// [`Sink`] given to [`Live::start`]; when the sink stops listening, the worker ends.
pub struct Live {
    asks: Asks,
    watch: Option<Watch>,
    worker: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    finished: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Closed (sender dropped) when the worker ends.
    ended: Receiver<()>,
}

impl Live {
    /// Watches the root and starts the worker; returns once every directory is watched.
    pub fn start(options: &LiveOptions, sink: impl Sink) -> Result<Live, StartError> {
        Live::launch(options, None, None, sink)
    }

    /// [`Live::start`] for a process taking the root over from its previous owner (see
    /// [`crate::owner`]): the files modified since `since` are looked at first, as after lost
    /// events, so that a save the owner never handled is handled now; what it stamped is
    /// tagged and stays quiet. `asks`, if given, is the record to share (the server's tools
    /// already use it).
    pub fn take_over(
        options: &LiveOptions,
        asks: Option<Asks>,
        since: SystemTime,
        sink: impl Sink,
    ) -> Result<Live, StartError> {
        Live::launch(options, asks, Some(since), sink)
    }

    fn launch(
        options: &LiveOptions,
        asks: Option<Asks>,
        since: Option<SystemTime>,
        sink: impl Sink,
    ) -> Result<Live, StartError> {
        let scanner = Scanner::new(LanguageTable::builtin(), &options.trigger)?;
        let (watch, changes) = match since {
            None => Watch::start(&options.root, options.debounce)?,
            Some(since) => Watch::start_after(&options.root, options.debounce, since)?,
        };
        let root = watch.root().to_path_buf();
        // The previous owner may have been killed in the middle of a stamp.
        fsio::remove_leftovers_in_background(&root);
        let asks = match asks {
            Some(asks) => asks,
            None => Asks::for_mode(options.tag, &root, &options.trigger)?,
        };
        let mut live = LivePipeline::with_asks(root, scanner, options.tag, asks.clone())
            .settling(options.settle, crate::state::state_dir().as_deref());
        let stop = Arc::new(AtomicBool::new(false));
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let (end, ended) = std::sync::mpsc::channel::<()>();
        let worker = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("pipeline".into())
                .spawn(move || {
                    run_live(&mut live, &changes, &stop, sink);
                    drop((done, end)); // tells `finished` and `stop`
                })
                .map_err(StartError::Thread)?
        };
        let finished = Some(finished);
        Ok(Live { asks, watch: Some(watch), worker: Some(worker), stop, finished, ended })
    }

    /// The asks this run records (shared with the worker).
    pub fn asks(&self) -> &Asks {
        &self.asks
    }

    /// The watched root, canonical.
    pub fn root(&self) -> &Path {
        self.watch.as_ref().map_or(Path::new(""), Watch::root)
    }

    /// What could be watched at start-up.
    pub fn stats(&self) -> WatchStats {
        self.watch.as_ref().map(|w| w.stats().clone()).unwrap_or_default()
    }

    /// Resolves when the worker has ended on its own (its sink stopped listening).
    pub async fn finished(&mut self) {
        if let Some(finished) = self.finished.as_mut() {
            let _ = finished.await;
        }
    }

    /// Stops watching, lets the worker finish the file at hand and write the tags it owes (a
    /// stamp is never left half-done, so no temp file stays behind) and waits for it — at most
    /// [`STOP_GRACE`]: a worker blocked on a sink nobody reads (a client that stopped reading)
    /// is left behind.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(watch) = self.watch.take() {
            watch.stop(); // ends the stream of changes: the worker's wait returns
        }
        if let Some(worker) = self.worker.take() {
            match self.ended.recv_timeout(STOP_GRACE) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    tracing::debug!("the pipeline is blocked on its output; not waiting for it");
                }
                _ => {
                    let _ = worker.join();
                }
            }
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The worker's loop: each change as it comes, and what falls due (a draft whose text settled,
/// a tag whose file is quiet) when it does — no polling, no timer while nothing is owed —
/// until the changes end, `stop` is set, or the sink breaks. The tags still owed then are
/// written: their asks were delivered.
fn run_live(
    live: &mut LivePipeline,
    changes: &Receiver<Change>,
    stop: &AtomicBool,
    mut sink: impl Sink,
) {
    loop {
        let input = match live.next_due() {
            None => changes.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(at) => changes.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let asks = match input {
            Ok(change) => {
                tracing::debug!("changed: {}", change.path.display());
                live.process_change(&change, ROUND)
            }
            Err(RecvTimeoutError::Timeout) => live.run_due(Instant::now(), ROUND),
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if hand_on(live, &mut sink, asks).is_break() {
            return;
        }
        while let Some(asks) = live.backlog(ROUND) {
            if hand_on(live, &mut sink, asks).is_break() || stop.load(Ordering::SeqCst) {
                return;
            }
        }
    }
    live.write_all_tags();
}

/// Delivers `asks` in order and tells the pipeline which got through;
/// [`ControlFlow::Break`] once the client is gone.
fn hand_on(live: &mut LivePipeline, sink: &mut impl Sink, asks: Vec<Ask>) -> ControlFlow<()> {
    for ask in &asks {
        tracing::debug!("ask {}:{} {}", ask.file, ask.marker.line, ask.label());
    }
    let reached = sink.deliver_round(&asks);
    live.delivered(&asks[..reached]);
    live.undelivered(&asks[reached..]);
    if reached < asks.len() {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::DEFAULT_TRIGGER;
    use crate::test_support::git_in;

    fn live(root: &Path) -> LivePipeline<'static> {
        let scanner = Scanner::new(LanguageTable::builtin(), DEFAULT_TRIGGER).unwrap();
        LivePipeline::new(root.canonicalize().unwrap(), scanner)
    }

    /// Our own stamp's write comes back as a change: it costs a read and a hash, not a scan.
    #[test]
    fn own_writes_are_not_scanned_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude one\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        assert_eq!(live.scanned(), 1);
        assert!(live.process(&p, None).is_empty());
        assert_eq!(live.scanned(), 1, "the stamped bytes were scanned again");
        crate::test_support::write(
            &p,
            format!("{}# @claude two\n", std::fs::read_to_string(&p).unwrap()),
        )
        .unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        assert_eq!(live.scanned(), 2);
    }

    /// A multi-line ask committed in HEAD is git's, known by its first line.
    #[test]
    fn multi_line_asks_from_head_are_not_announced() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let root = live.root.clone();
        let git = |args: &[&str]| git_in(&root, args);
        git(&["init", "-q"]);
        let p = root.join("a.rs");
        crate::test_support::write(&p, "/* @claude committed\n   over two lines */\nfn a() {}\n")
            .unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "x"]);
        crate::test_support::write(
            &p,
            "/* @claude committed\n   over two lines */\nfn a() {}\n// @claude new\n",
        )
        .unwrap();
        let asks = live.process(&p, None);
        let texts: Vec<&str> = asks.iter().map(|a| a.marker.text.as_str()).collect();
        assert_eq!(texts, ["@claude new"]);
    }

    /// A stamp does not cost the file its syntax tree: the tree kept is that of the untagged
    /// bytes, which our tag leaves as they were, so the user's next save is parsed from it.
    #[test]
    fn a_save_after_a_stamp_is_parsed_incrementally() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        let body: String = (0..200).map(|i| format!("def f{i}():\n    return {i}\n")).collect();
        crate::test_support::write(&p, format!("{body}# @claude one\n")).unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        let stamped = std::fs::read_to_string(&p).unwrap();
        assert!(stamped.contains("@claude[fw-"), "not stamped: {stamped}");
        crate::test_support::write(&p, format!("x = 0\n{stamped}# @claude two\n")).unwrap();
        let asks = live.process(&p, None);
        let texts: Vec<&str> = asks.iter().map(|a| a.marker.text.as_str()).collect();
        assert_eq!(texts, ["@claude two"]);
        let counts = live.trees.counts();
        assert_eq!((counts.full, counts.incremental), (1, 1), "{counts:?}");
    }

    /// A repository deleted and cloned again at the same place: its files' markers are the
    /// clone's commits, not the user's, although the reader started for the old repository is
    /// still running (in a directory that is gone).
    #[test]
    fn a_repository_cloned_again_in_place_is_read_anew() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let sub = live.root.join("sub");
        std::fs::create_dir(&sub).unwrap();
        git_in(&sub, &["init", "-q"]);
        let p = sub.join("a.py");
        crate::test_support::write(&p, "x = 1\n").unwrap();
        git_in(&sub, &["add", "."]);
        git_in(&sub, &["commit", "-qm", "one"]);
        crate::test_support::write(&p, "x = 1\n# @claude mine\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        assert_eq!(live.git.processes_started(), 2, "the two cat-file readers");

        let upstream = tempfile::tempdir().unwrap();
        let theirs = upstream.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        git_in(&theirs, &["init", "-q"]);
        crate::test_support::write(theirs.join("a.py"), "# @claude injected\n").unwrap();
        git_in(&theirs, &["add", "."]);
        git_in(&theirs, &["commit", "-qm", "theirs"]);
        std::fs::remove_dir_all(&sub).unwrap();
        git_in(&live.root, &["clone", "-q", theirs.to_str().unwrap(), "sub"]);
        let texts: Vec<String> =
            live.process(&p, None).into_iter().map(|a| a.marker.text).collect();
        assert!(texts.is_empty(), "a marker of the clone's commit was announced: {texts:?}");
    }

    /// Saves in a repository start git's two readers once, not a process each (one is started
    /// again after git wrote its index: it reads the index once); git's lines follow `HEAD` as
    /// it moves: a commit, refs packed, a detached `HEAD`, a linked worktree.
    #[test]
    fn saves_spawn_no_git_and_follow_head() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let root = live.root.clone();
        git_in(&root, &["init", "-q"]);
        let p = root.join("a.py");
        crate::test_support::write(&p, "x = 1\n").unwrap();
        git_in(&root, &["add", "."]);
        git_in(&root, &["commit", "-qm", "one"]);
        for i in 0..5 {
            crate::test_support::write(&p, format!("x = 1\n# @claude ask {i}\n")).unwrap();
            assert_eq!(live.process(&p, None).len(), 1, "save {i}");
        }
        assert_eq!(live.git.processes_started(), 2, "a git process per save");
        // Untracked, with a space in its name: git answers `HEAD:b c.py missing`.
        let spaced = root.join("b c.py");
        for i in 0..3 {
            crate::test_support::write(&spaced, format!("# @claude spaced {i}\n")).unwrap();
            assert_eq!(live.process(&spaced, None).len(), 1, "spaced save {i}");
        }
        assert_eq!(live.git.processes_started(), 2, "a git process per save of a spaced name");
        let mut head_moves = |commit: &str, setup: &dyn Fn()| {
            crate::test_support::write(&p, format!("# @claude {commit}\n")).unwrap();
            git_in(&root, &["commit", "-qam", commit]);
            setup();
            crate::test_support::write(&p, format!("# @claude {commit}\ny = 2\n")).unwrap();
            assert!(live.process(&p, None).is_empty(), "{commit}: git's marker announced");
        };
        head_moves("committed", &|| {});
        head_moves("packed", &|| drop(git_in(&root, &["pack-refs", "--all", "--prune"])));
        git_in(&root, &["checkout", "-q", "--detach"]);
        head_moves("detached", &|| {});
        // One reader started again per index git wrote (three commits, one checkout).
        assert!(live.git.processes_started() <= 2 + 4, "{}", live.git.processes_started());
        // A linked worktree: its own HEAD, refs in the main repository's git directory.
        let other = tempfile::tempdir().unwrap();
        let wt = other.path().canonicalize().unwrap().join("wt");
        git_in(&root, &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
        let mut in_wt = live_at(&wt);
        let q = wt.join("a.py");
        crate::test_support::write(&q, "# @claude detached\n# @claude in the worktree\n").unwrap();
        git_in(&wt, &["commit", "-qam", "side"]);
        git_in(&wt, &["pack-refs", "--all", "--prune"]);
        crate::test_support::write(
            &q,
            "# @claude detached\n# @claude in the worktree\n# @claude new\n",
        )
        .unwrap();
        let texts: Vec<String> =
            in_wt.process(&q, None).into_iter().map(|a| a.marker.text).collect();
        assert_eq!(texts, ["@claude new"]);
    }

    fn live_at(root: &Path) -> LivePipeline<'static> {
        LivePipeline::new(root.to_path_buf(), scanner())
    }

    fn scanner() -> Scanner<'static> {
        Scanner::new(LanguageTable::builtin(), DEFAULT_TRIGGER).unwrap()
    }

    fn resolve(live: &LivePipeline, id: MarkerId) {
        let record = live.asks.by_id(id).expect("a recorded ask");
        assert!(crate::pipeline::resolve_recorded(&live.scanner, &live.root, &record).unwrap());
        live.asks.resolve(id);
    }

    /// A file moved inside the root keeps what its old path had: a marker committed there is
    /// git's (its new path is untracked), an ask recorded there is the same ask (`--tag
    /// never`, the record moved with the file), and the bytes last seen there are not new. A
    /// file the move left a copy of (an editor's backup dance) keeps its own records.
    #[test]
    fn a_moved_file_keeps_what_its_old_path_had() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        git_in(&root, &["init", "-q"]);
        let asks = Asks::with_ledger_in(state.path(), &root, DEFAULT_TRIGGER).unwrap();
        let mut live = LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks);
        let committed = root.join("committed.py");
        crate::test_support::write(
            &committed,
            "# @claude theirs
",
        )
        .unwrap();
        git_in(&root, &["add", "."]);
        git_in(&root, &["commit", "-qm", "theirs"]);
        let old = root.join("old.py");
        crate::test_support::write(
            &old,
            "x = 1
# @claude mine
",
        )
        .unwrap();
        let id = live.process(&old, None)[0].id().unwrap();
        let moved = |live: &mut LivePipeline, from: &Path, to: &Path| {
            std::fs::rename(from, to).unwrap();
            let change = Change {
                path: to.to_path_buf(),
                from_git: None,
                rescan: None,
                renamed_from: vec![from.to_path_buf()],
            };
            let asks = live.process_change(&change, usize::MAX);
            live.delivered(&asks);
            asks
        };
        let new = root.join("sub/new.py");
        std::fs::create_dir(root.join("sub")).unwrap();
        assert!(moved(&mut live, &old, &new).is_empty(), "the same ask, announced again");
        assert_eq!(live.scanned(), 1, "the same bytes, scanned again");
        assert_eq!(live.asks.by_id(id).unwrap().file, "sub/new.py");
        let theirs = root.join("theirs.py");
        assert!(moved(&mut live, &committed, &theirs).is_empty(), "git's marker announced");
        // Later saves of the moved files: still git's, still the same ask; a new ask is new.
        crate::test_support::write(
            &theirs,
            "# @claude theirs
x = 2
",
        )
        .unwrap();
        assert!(live.process(&theirs, None).is_empty(), "git's marker announced on a save");
        crate::test_support::write(
            &new,
            "x = 1
# @claude mine
# @claude more
",
        )
        .unwrap();
        let texts: Vec<String> =
            live.process(&new, None).into_iter().map(|a| a.marker.text).collect();
        assert_eq!(texts, ["@claude more"]);
        // The backup dance: renamed to a backup, the file written anew; the records stay.
        let backup = root.join("sub/new.py.bak.py");
        std::fs::copy(&new, &backup).unwrap();
        let change = Change {
            path: backup.clone(),
            from_git: None,
            rescan: None,
            renamed_from: vec![new.clone()],
        };
        live.process_change(&change, usize::MAX);
        assert_eq!(live.asks.by_id(id).unwrap().file, "sub/new.py", "the record left its file");
    }

    /// A marker on a line Claude's file tools wrote (recorded by its hook) is not announced, on
    /// this save or a later one; the user's ask saved with it is, once.
    #[test]
    fn a_marker_claude_wrote_is_not_an_ask() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        live.claude = ClaudeWrites::in_dir(state.path());
        let p = live.root.join("a.py");
        live.claude.record(&p, &["# @claude follow-up: did that work?"]);
        crate::test_support::write(
            &p,
            "# @claude follow-up: did that work?
# @claude mine
",
        )
        .unwrap();
        let texts: Vec<String> =
            live.process(&p, None).into_iter().map(|a| a.marker.text).collect();
        assert_eq!(texts, ["@claude mine"]);
        let now = std::fs::read_to_string(&p).unwrap();
        crate::test_support::write(
            &p,
            format!(
                "{now}x = 1
"
            ),
        )
        .unwrap();
        assert!(live.process(&p, None).is_empty(), "Claude's marker announced on a later save");
    }

    /// An editor's stale buffer writes the marker back without its tag (with another edit),
    /// and saves again; the ask is resolved; the stale buffer is saved once more. One ask, one
    /// id, the stale copies never re-stamped, and the file ends as the user's bytes minus the
    /// ask.
    #[test]
    fn a_stale_buffer_is_the_same_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.rs");
        crate::test_support::write(&p, "fn a() {}\n// @claude why?\nfn b() {}\n").unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        let id = asks[0].id().unwrap();
        assert!(asks[0].stamped);
        let stale = "fn a() { 1 }\n// @claude why?\nfn b() {}\n";
        for _ in 0..2 {
            crate::test_support::write(&p, stale).unwrap();
            assert!(live.process(&p, None).is_empty(), "a stale copy asked again");
            assert_eq!(
                std::fs::read_to_string(&p).unwrap(),
                stale,
                "the stale copy was re-stamped"
            );
        }
        resolve(&live, id);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "fn a() { 1 }\nfn b() {}\n");
        crate::test_support::write(&p, stale).unwrap();
        assert!(live.process(&p, None).is_empty(), "a resolved ask came back from a stale buffer");
        // The same place, new words: a new ask.
        crate::test_support::write(&p, "fn a() { 1 }\n// @claude why not?\nfn b() {}\n").unwrap();
        let again = live.process(&p, None);
        assert_eq!(again.len(), 1);
        assert_ne!(again[0].id(), Some(id));
    }

    /// The same words in another file are another ask.
    #[test]
    fn the_same_text_in_another_file_is_another_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        for name in ["a.py", "b.py"] {
            let p = live.root.join(name);
            crate::test_support::write(&p, "# @claude add tests\n").unwrap();
            assert_eq!(live.process(&p, None).len(), 1, "{name}");
        }
    }

    /// An ask is its place and its text: the same words typed above another function, while
    /// the first is still pending (tagged), are a second ask; saved again, neither fires.
    #[test]
    fn the_same_words_in_another_place_are_another_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude add a docstring\ndef f(): pass\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        let tagged = std::fs::read_to_string(&p).unwrap();
        assert!(tagged.contains("@claude[fw-"), "{tagged}");
        let both = format!("{tagged}\n# @claude add a docstring\ndef g(): pass\n");
        crate::test_support::write(&p, &both).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1, "the ask above g() was taken for the one above f()");
        assert_eq!(asks[0].marker.line, 4);
        crate::test_support::write(&p, format!("{}x = 1\n", std::fs::read_to_string(&p).unwrap()))
            .unwrap();
        assert!(live.process(&p, None).is_empty());
    }

    /// `--tag never`: two identical markers saved together are two asks, each with its own id,
    /// and neither fires again.
    #[test]
    fn tag_never_two_identical_markers_are_two_asks() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let asks = Asks::with_ledger_in(state.path(), &root, DEFAULT_TRIGGER).unwrap();
        let mut live = LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks);
        let p = root.join("a.py");
        let text = "# @claude add a docstring\ndef f(): pass\n\n# @claude add a docstring\ndef g(): pass\n";
        crate::test_support::write(&p, text).unwrap();
        let asks = live.process(&p, None);
        let lines: Vec<usize> = asks.iter().map(|a| a.marker.line).collect();
        assert_eq!(lines, [1, 4], "two identical markers");
        assert_ne!(asks[0].id(), asks[1].id());
        crate::test_support::write(&p, format!("{text}x = 1\n")).unwrap();
        assert!(live.process(&p, None).is_empty(), "announced again");
        // Resolving the second removes it, and only it.
        resolve(&live, asks[1].id().unwrap());
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "# @claude add a docstring\ndef f(): pass\n\ndef g(): pass\nx = 1\n"
        );
    }

    /// A marker removed by hand (not through `resolve_ask`) is settled too.
    #[test]
    fn a_marker_deleted_by_hand_does_not_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude one\nx = 1\n").unwrap();
        let id = live.process(&p, None)[0].id().unwrap();
        crate::test_support::write(&p, "x = 1\n").unwrap();
        assert!(live.process(&p, None).is_empty());
        assert!(!live.asks.by_id(id).unwrap().is_pending());
        crate::test_support::write(&p, "# @claude one\nx = 1\n").unwrap();
        assert!(live.process(&p, None).is_empty());
    }

    /// An ask written right above comments that were already there is only its own lines:
    /// it is announced so, and resolving it gives back the original file, byte for byte.
    #[test]
    fn an_ask_is_only_the_lines_written_with_it() {
        let originals = [
            (
                "safety.rs",
                "fn f() {\n    // SAFETY: the pointer is valid\n    unsafe { g() }\n}\n",
                1,
                "    // @claude is this sound?\n    // think about aliasing\n",
            ),
            (
                "licence.py",
                "# Copyright 2024 Alice\n# SPDX-License-Identifier: MIT\nimport os\n",
                0,
                "# @claude check the licence year\n",
            ),
            (
                "doc.rs",
                "/// Adds one.\n/// Panics never.\nfn inc(x: u8) -> u8 { x + 1 }\n",
                0,
                "// @claude overflow?\n// at 255\n",
            ),
            (
                "todo.go",
                "package a\n\n// TODO(alice): remove\nvar x = 1\n",
                2,
                "// @claude who is alice?\n",
            ),
        ];
        for (name, original, at, ask) in originals {
            let dir = tempfile::tempdir().unwrap();
            let mut live = live(dir.path());
            let p = live.root.join(name);
            crate::test_support::write(&p, original).unwrap();
            assert!(live.process(&p, None).is_empty(), "{name}: no ask yet");
            let mut lines: Vec<&str> = original.split_inclusive('\n').collect();
            lines.insert(at, ask);
            crate::test_support::write(&p, lines.concat()).unwrap();
            let asks = live.process(&p, None);
            assert_eq!(asks.len(), 1, "{name}");
            let want: Vec<&str> =
                ask.lines().map(|l| l.trim_start().trim_start_matches(['/', '#']).trim()).collect();
            assert_eq!(asks[0].marker.text, want.join("\n"), "{name}");
            assert_eq!(
                asks[0].marker.end_line - asks[0].marker.line + 1,
                ask.lines().count(),
                "{name}"
            );
            resolve(&live, asks[0].id().unwrap());
            assert_eq!(std::fs::read_to_string(&p).unwrap(), original, "{name}: resolve took more");
        }
    }

    /// `--tag never`: no byte of the file changes; the ledger remembers the ask across a
    /// restart, and resolve is the only write.
    #[test]
    fn tag_never_writes_nothing_and_remembers_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let start = || {
            let asks = Asks::with_ledger_in(state.path(), &root, DEFAULT_TRIGGER).unwrap();
            LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks)
        };
        let mut live = start();
        let p = root.join("a.py");
        let text = "x = 1\n# @claude rename x\n";
        crate::test_support::write(&p, text).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(!asks[0].stamped);
        let id = asks[0].id().expect("an id from the ledger");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text, "the file was written");
        crate::test_support::write(&p, format!("{text}y = 2\n")).unwrap();
        assert!(live.process(&p, None).is_empty());
        drop(live);
        let mut restarted = start();
        crate::test_support::write(&p, format!("{text}y = 3\n")).unwrap();
        assert!(restarted.process(&p, None).is_empty(), "announced again after a restart");
        resolve(&restarted, id);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x = 1\ny = 3\n");
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1, "nothing else in the tree");
    }

    /// A file that vanishes (or turns into a directory) after its ask was announced, before
    /// the tag is written: nothing is written at the path, and the ask is not announced again.
    #[test]
    fn a_file_gone_before_its_tag_gets_nothing_written() {
        for replace_with_dir in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut live = live(dir.path());
            let p = live.root.join("a.py");
            crate::test_support::write(&p, "# @claude one\n").unwrap();
            live.before_stamp = Some(Box::new(move |path: &Path| {
                std::fs::remove_file(path).unwrap();
                if replace_with_dir {
                    std::fs::create_dir(path).unwrap();
                }
            }));
            let asks = live.process(&p, None);
            assert_eq!(asks.len(), 1, "dir: {replace_with_dir}");
            assert!(!asks[0].stamped, "dir: {replace_with_dir}");
            assert_eq!(p.is_dir(), replace_with_dir, "something was written at the path");
            assert!(live.process(&p, None).is_empty(), "dir: {replace_with_dir}: asked again");
        }
    }

    /// Our tag never takes a file past the size limit: such a file's ask goes out untagged,
    /// once, and the file stays readable.
    #[test]
    fn a_tag_never_crosses_the_size_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("big.py");
        let mut text = "# @claude too big to tag\n".to_string();
        while text.len() < fsio::MAX_FILE_SIZE as usize - 5 {
            text.push_str("x = 1\n");
        }
        text.truncate(fsio::MAX_FILE_SIZE as usize - 5);
        crate::test_support::write(&p, &text).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(!asks[0].stamped && asks[0].id().is_none());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        crate::test_support::write(&p, &text).unwrap();
        live.last_seen.clear();
        assert!(live.process(&p, None).is_empty(), "announced twice");
    }

    /// A file with several names cannot be stamped safely: its ask goes out untagged, once,
    /// and both names keep the user's bytes.
    #[cfg(unix)]
    #[test]
    fn a_hard_linked_file_is_announced_once_unstamped() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude linked\n").unwrap();
        std::fs::hard_link(&p, live.root.join("b.txt")).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(!asks[0].stamped && asks[0].id().is_none());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude linked\n");
        crate::test_support::write(&p, "# @claude linked\n").unwrap();
        live.last_seen.clear();
        assert!(live.process(&p, None).is_empty(), "announced twice");
    }

    /// A file another program still has open for writing is left alone and nothing is
    /// announced; the change its close brings stamps it — even with no byte written since.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_being_written_is_stamped_when_its_writer_closes() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        let mut writer = std::fs::File::create(&p).unwrap();
        writer.write_all(b"# @claude slow\n").unwrap();
        assert!(live.process(&p, None).is_empty(), "announced while being written");
        assert!(live.asks.snapshot().is_empty());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude slow\n");
        drop(writer);
        // The close that ends the writing: ours, or that of a copy a fork elsewhere made.
        crate::test_support::wait_closed(&p);
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(asks[0].stamped);
        assert!(std::fs::read_to_string(&p).unwrap().starts_with("# @claude[fw-"));
    }

    /// No room to deliver: the marker stays untagged, unrecorded, and its file waits in the
    /// backlog for the next round.
    #[test]
    fn no_room_no_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.root.join("a.py");
        crate::test_support::write(&p, "# @claude later\n").unwrap();
        let change = Change { path: p.clone(), from_git: None, rescan: None, renamed_from: vec![] };
        assert!(live.process_change(&change, 0).is_empty());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude later\n");
        assert!(live.asks.snapshot().is_empty());
        let next = live.backlog(1).expect("the file in the backlog");
        assert_eq!(next.len(), 1, "found when there is room again");
    }

    /// A rescan after lost events lists every file; only those that changed during the run
    /// may fire.
    #[test]
    fn a_rescan_fires_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let dormant = live.root.join("vendored.py");
        crate::test_support::write(&dormant, "# @claude from a vendored file\n").unwrap();
        let seen = live.root.join("seen.py");
        crate::test_support::write(&seen, "x = 1\n").unwrap();
        assert!(live.process(&seen, None).is_empty());
        let since = std::time::SystemTime::now();
        std::thread::sleep(Duration::from_millis(20)); // mtimes after `since`, on coarse clocks too
        crate::test_support::write(&seen, "x = 1\n# @claude saved while events were lost\n")
            .unwrap();
        let fresh = live.root.join("new.py");
        crate::test_support::write(&fresh, "# @claude new while events were lost\n").unwrap();
        let mut texts = Vec::new();
        for path in [&dormant, &seen, &fresh] {
            let change = Change {
                path: path.clone(),
                from_git: None,
                rescan: Some(since),
                renamed_from: vec![],
            };
            texts.extend(
                live.process_change(&change, usize::MAX).into_iter().map(|a| a.marker.text),
            );
        }
        texts.sort();
        assert_eq!(
            texts,
            ["@claude new while events were lost", "@claude saved while events were lost"]
        );
        // Saved later, the dormant marker is the user's to fire, as always.
        crate::test_support::write(&dormant, "# @claude from a vendored file\n\n").unwrap();
        assert_eq!(live.process(&dormant, None).len(), 1);
    }

    /// A directory of the path swapped for a symlink out of the root — before the read, or
    /// between the read and the tag: the outside file is never read or written, and nothing
    /// of it is announced (what was read inside the root before the swap is).
    #[cfg(unix)] // std::os::unix::fs::symlink
    #[test]
    fn a_directory_swapped_for_a_symlink_is_not_followed_out_of_the_root() {
        for when in ["before the read", "before the stamp"] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            let secret = outside.path().join("a.py");
            crate::test_support::write(&secret, "# @claude outside the root\n").unwrap();
            let mut live = live(dir.path());
            let sub = live.root.join("sub");
            std::fs::create_dir(&sub).unwrap();
            let p = sub.join("a.py");
            crate::test_support::write(&p, "# @claude outside the root\n").unwrap();
            let outside_dir = outside.path().to_path_buf();
            let swap = move |sub: &Path| {
                std::fs::rename(sub, sub.with_file_name("sub.old")).unwrap();
                std::os::unix::fs::symlink(&outside_dir, sub).unwrap();
            };
            if when == "before the read" {
                swap(&sub);
            } else {
                live.before_stamp = Some(Box::new(move |path: &Path| swap(path.parent().unwrap())));
            }
            let asks = live.process(&p, None);
            let want = usize::from(when == "before the stamp");
            assert_eq!(asks.len(), want, "{when}: announced");
            assert!(asks.iter().all(|a| !a.stamped), "{when}: tagged");
            assert_eq!(
                std::fs::read_to_string(&secret).unwrap(),
                "# @claude outside the root\n",
                "{when}: the outside file was written"
            );
        }
    }

    /// A tag undone by a conflict that left the same bytes at the path (here a directory of
    /// the path swapped for a copy of itself; on Linux also a lease broken by an open for
    /// writing that writes nothing, like `touch`): the ask stays announced once, and the next
    /// change writes its tag — it does not find the file "unchanged since we left it".
    #[cfg(unix)] // Windows: the directory held beneath the root cannot be renamed (sharing)
    #[test]
    fn a_conflict_that_changed_no_byte_still_gets_its_tag() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let sub = live.root.join("sub");
        std::fs::create_dir(&sub).unwrap();
        let p = sub.join("a.py");
        crate::test_support::write(&p, "# @claude after a conflict\n").unwrap();
        let mut once = true;
        live.before_stamp = Some(Box::new(move |path: &Path| {
            if std::mem::take(&mut once) {
                let sub = path.parent().unwrap();
                std::fs::rename(sub, sub.with_file_name("sub.old")).unwrap();
                std::fs::create_dir(sub).unwrap();
                crate::test_support::write(path, "# @claude after a conflict\n").unwrap();
            }
        }));
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1, "announced once");
        assert!(!asks[0].stamped, "tagged through a conflict");
        assert!(live.process(&p, None).is_empty(), "announced again");
        assert!(
            std::fs::read_to_string(&p).unwrap().contains("@claude[fw-"),
            "the tag was dropped after the conflict"
        );
    }
}

#[cfg(test)]
mod takeover_tests {
    use super::*;
    use crate::test_support::git_in as git;
    use std::sync::mpsc;

    /// Taking a root over looks at the files modified since the standby began: an untagged
    /// marker saved then fires (once); one the old owner tagged, those git brought (in `HEAD`,
    /// or from another branch: the old owner saw git's lock, the new one did not) and one in a
    /// file untouched since before stay quiet.
    #[test]
    fn a_takeover_fires_only_the_saves_the_owner_missed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        git(&root, &["init", "-q"]);
        let old = root.join("old.py");
        crate::test_support::write(&old, "# @claude dormant, untouched since before\n").unwrap();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&old).unwrap().set_modified(hour_ago).unwrap();
        crate::test_support::write(root.join("committed.py"), "# @claude from a commit\n").unwrap();
        git(&root, &["add", "committed.py"]);
        git(&root, &["commit", "-qm", "x"]);
        // A marker on another branch, which a checkout of that file brings while nobody
        // watches the git lock: git's too, though not in HEAD.
        git(&root, &["checkout", "-qb", "other"]);
        crate::test_support::write(root.join("branch.py"), "# @claude from another branch\n")
            .unwrap();
        git(&root, &["add", "branch.py"]);
        git(&root, &["commit", "-qm", "y"]);
        git(&root, &["checkout", "-q", "-"]);
        let since = SystemTime::now() - Duration::from_secs(1);
        git(&root, &["checkout", "other", "--", "branch.py"]);
        // Saved while the old owner ran (it tagged the first), or after it died.
        crate::test_support::write(
            root.join("tagged.py"),
            "# @claude[fw-0000abcd] handled by the owner\n",
        )
        .unwrap();
        crate::test_support::write(root.join("missed.py"), "# @claude saved as the owner died\n")
            .unwrap();
        crate::test_support::write(root.join("committed.py"), "# @claude from a commit\nx = 1\n")
            .unwrap();

        let options = LiveOptions {
            root: root.clone(),
            debounce: Duration::from_millis(20),
            settle: Duration::ZERO,
            trigger: crate::scan::DEFAULT_TRIGGER.to_string(),
            tag: TagMode::File,
        };
        let (tx, rx) = mpsc::channel();
        let asks = Some(Asks::in_memory());
        let live = Live::take_over(&options, asks, since, move |ask: Ask| {
            let _ = tx.send(ask.file);
            ControlFlow::Continue(())
        })
        .unwrap();
        // Changes come in the order files fell quiet: the sentinel's ask comes after the rest.
        crate::test_support::write(root.join("sentinel.py"), "# @claude sentinel\n").unwrap();
        let mut files = Vec::new();
        while files.last().map(String::as_str) != Some("sentinel.py") {
            files.push(rx.recv_timeout(Duration::from_secs(20)).expect("the sentinel's ask"));
        }
        live.stop();
        assert_eq!(files, ["missed.py", "sentinel.py"]);
    }
}
