//! [`LivePipeline`]: a change's way from the watcher to the asks handed on. It owns its parts —
//! the root's files, the ledger, what the user did not type, the asks still being typed, the
//! tag queue — and runs them in order: read the file → reconcile its markers with the ledger →
//! keep what the user typed → wait for typing to settle → record and hand on (at most a round;
//! the rest wait in the backlog). Tags are written later, by the tag queue.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::asks::{Asks, TagMode};
use crate::autosave::{Draft, KeptHabit, LineDiff, ModeSwitch};
use crate::fsio::{self, Source};
use crate::git::{GitWindow, Waker};
use crate::id::MarkerId;
use crate::lines::content_hash;
use crate::scan::{Marker, Scanner};
use crate::watch::Change;

use super::aside::{Aside, ASIDE_BYTES};
use super::files::{Files, Seen};
use super::provenance::Provenance;
use super::reconcile::{Ledger, Reconciled};
use super::tag_queue::TagQueue;
use super::typing::Typing;
use super::Ask;

/// Turns changed paths into asks, exactly once each: a marker is recorded before it is
/// announced and tagged after it reached the client; a marker that matches an ask already
/// announced (an editor's stale copy) is that ask, and is left alone.
pub struct LivePipeline<'t> {
    /// The root's files: reading them, what they held when last seen, their markers.
    pub(super) files: Files<'t>,
    /// The asks of the root, and where their ids go.
    pub(super) ledger: Ledger,
    /// What the user did not type: git's lines, Claude's writes, renames.
    pub(super) provenance: Provenance,
    /// The asks that may still be being typed.
    pub(super) typing: Typing,
    /// Delivered asks waiting for their tags.
    pub(super) tags: TagQueue,
    /// Files with more asks ready than one round handed on, each with what the look found:
    /// its later rounds come from that, not from a look a round.
    backlog: VecDeque<Rounds<'t>>,
    /// Asks recorded by an owner that died before sending them, found in the change at hand:
    /// ready at once, announced under their ids as they were (no revision).
    unsent: HashSet<MarkerId>,
    /// Files git may have written whose history is being searched in the background, and big
    /// files being scanned beside the worker: looked at again when the answer is in.
    parked: HashMap<PathBuf, Change>,
    /// The thread that scans big files, once [`LivePipeline::wake_when_ready`] started it.
    aside: Option<Aside>,
    /// Runs between the read and the stamp's write: tests change the file there.
    #[cfg(test)]
    pub(super) before_stamp: Option<Hook>,
}

/// The asks of a file still to be handed on, as one look at it found them ready: a file of
/// thousands of asks is read, scanned and reconciled once, not once a round.
struct Rounds<'t> {
    change: Change,
    /// The file as the look read it: while it holds these bytes, the rest are still ready.
    seen: Seen<'t>,
    /// The ready asks no round has taken yet, in file order.
    left: VecDeque<Draft>,
}

/// A test's hook into the pipeline.
#[cfg(test)]
pub(super) type Hook = Box<dyn FnMut(&Path) + Send>;

impl<'t> LivePipeline<'t> {
    /// A pipeline that stamps files and remembers its asks for this run, with no settle time
    /// (tags at once, every save deliberate). `root` must be canonical (as
    /// [`crate::Watch`] reports paths).
    pub fn new(root: PathBuf, scanner: Scanner<'t>) -> Self {
        LivePipeline::with_asks(root, scanner, TagMode::File, Asks::in_memory())
    }

    /// A pipeline that records its asks in `asks`, stamping files or not as `mode` says.
    pub fn with_asks(root: PathBuf, scanner: Scanner<'t>, mode: TagMode, asks: Asks) -> Self {
        let provenance = Provenance::new(scanner.trigger(), asks.clone());
        LivePipeline {
            files: Files::new(root, scanner),
            ledger: Ledger { asks, mode },
            provenance,
            typing: Typing::default(),
            tags: TagQueue::default(),
            backlog: VecDeque::new(),
            unsent: HashSet::new(),
            parked: HashMap::new(),
            aside: None,
            #[cfg(test)]
            before_stamp: None,
        }
    }

    /// Sets the settle time (see [`super::LiveOptions::settle`]): how long a file must be
    /// quiet before a tag is written into it, and the least time an ask's text must stay
    /// unchanged on a root whose editor autosaves. What is learned of the root's editor is kept
    /// in `state_dir` (if any), where earlier runs kept it.
    pub fn settling(mut self, settle: Duration, state_dir: Option<&Path>) -> Self {
        self.typing = Typing::new(settle, KeptHabit::load(state_dir, self.files.root()));
        self.tags = TagQueue::new(settle);
        self
    }

    /// A root whose VS Code saves after a delay (its settings say so) starts as a root whose
    /// editor autosaves, so that its first ask is not announced cut in half. Read at each
    /// start, not kept.
    pub fn reading_vscode_settings(mut self) -> Self {
        if let Some(file) = crate::vscode_settings::autosave_settings(self.files.root()) {
            tracing::info!("{}: VS Code saves after a delay; asks wait to settle", file.display());
            self.typing.configured_to_autosave();
        }
        self
    }

    /// Sets the latest a heard ask's tag is written after its file's last save (see
    /// [`super::LiveOptions::tag_after`]).
    pub fn tagging_after(mut self, tag_after: Duration) -> Self {
        self.tags.tag_after = tag_after;
        self
    }

    /// How many changes were scanned; a change to bytes we left as they are is not.
    pub fn scanned(&self) -> usize {
        self.files.scanned()
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
        self.delivered(&asks, true);
        let tagged = self.write_all_tags();
        for ask in &mut asks {
            ask.stamped = ask.id().is_some_and(|id| tagged.contains(&id));
        }
        asks
    }

    /// Handles one change from the watcher: returns at most `room` asks ready to be announced
    /// (recorded, not yet tagged: see [`LivePipeline::delivered`]); more wait in the backlog.
    /// A file listed by a rescan after lost events is handled only if it changed during the
    /// run (see [`Files::is_news`]) — a rescan never fires markers nobody saved (a vendored
    /// file's, a dormant one).
    pub fn process_change(&mut self, change: &Change, room: usize) -> Vec<Ask> {
        self.typing.saved(&change.path, Instant::now());
        let change = self.unparked(change);
        let asks = self.look(&change, room);
        self.files.let_go();
        asks
    }

    /// The switches of the root between deliberate saves and autosave since the last call
    /// (each said in the log already), for the front end to tell its user.
    pub fn switches(&mut self) -> Vec<ModeSwitch> {
        if self.typing.autosaves() {
            self.tags.clear(); // nothing is written under an autosaving editor's typing
        }
        self.typing.switches()
    }

    /// From now on what would hold the worker up runs on threads of their own, and `wake` is
    /// told the file when its answer is in (then [`LivePipeline::unpark`] it): the search of
    /// the history of a file git may have written, and the parse and scan of a big file
    /// ([`ASIDE_BYTES`] or more; for the built-in language table). The file waits, the others
    /// go on.
    pub fn wake_when_ready(&mut self, wake: impl Fn(&Path) + Send + Sync + 'static) {
        let wake: Waker = std::sync::Arc::new(wake);
        self.provenance.git.search_in_background(wake.clone());
        self.aside = Aside::start(self.files.scanner.trigger(), wake);
    }

    /// The file `path`, whose history search or scan beside the worker is done, is looked at
    /// again (if it still waits; no save of the user's, so not one for [`Typing::saved`]).
    pub fn unpark(&mut self, path: &Path, room: usize) -> Vec<Ask> {
        self.provenance.git.poll_history();
        let Some(change) = self.parked.remove(path) else { return Vec::new() };
        let asks = self.look(&change, room);
        self.files.let_go();
        asks
    }

    /// `change`, with the window of an earlier change of its file that still waits on git's
    /// history: a later save of a file git may have written is looked at as git's too.
    fn unparked(&mut self, change: &Change) -> Change {
        let mut change = change.clone();
        if let Some(parked) = self.parked.remove(&change.path) {
            change.from_git = change.from_git.or(parked.from_git);
        }
        change
    }

    /// True while a file has asks ready that no round has taken yet.
    pub fn has_backlog(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// True while the file at `path` has asks ready that no round has taken yet: its tags
    /// wait for the last round, and then go in with one write, not one a round.
    pub(super) fn in_backlog(&self, path: &Path) -> bool {
        self.backlog.iter().any(|r| r.change.path == path)
    }

    /// The next round of a file with more asks than one round took, if any: the next of the
    /// asks its look found while it still holds the bytes it was read as, else from a new look.
    pub fn backlog(&mut self, room: usize) -> Option<Vec<Ask>> {
        let mut rounds = self.backlog.pop_front()?;
        let path = rounds.change.path.clone();
        let unchanged = self.files.read(&path).is_some_and(|s| s.bytes == rounds.seen.bytes());
        let asks = if unchanged {
            let ready: Vec<Draft> = rounds.left.drain(..room.min(rounds.left.len())).collect();
            let asks = self.announce(&rounds.seen, ready);
            if !rounds.left.is_empty() {
                self.backlog.push_back(rounds);
            }
            asks
        } else {
            self.files.look_again(&path); // although we left it so
            self.look_at_next_round(&rounds.change, room)
        };
        self.files.let_go();
        Some(asks)
    }

    /// The asks never reached the client (it went away): they are forgotten, untagged, so that
    /// the next look at their file — this session's or the next owner's — finds them again.
    pub fn undelivered(&mut self, asks: &[Ask]) {
        if asks.is_empty() {
            return;
        }
        self.ledger.forget(asks);
        for ask in asks {
            self.files.look_again(&ask.path);
        }
    }

    /// When the worker must wake with no event: a draft due, a tag, or a marker Claude
    /// proposed whose write did not come.
    pub fn next_due(&self) -> Option<Instant> {
        let due = [self.typing.next_due(), self.tags.next_due(), self.provenance.next_due()];
        due.into_iter().flatten().min()
    }

    /// What falls due at `now`: drafts whose text has settled and markers that waited for
    /// Claude's write in vain (returned, to be announced; at most `room`), and tags whose
    /// file is quiet (written).
    pub fn run_due(&mut self, now: Instant, room: usize) -> Vec<Ask> {
        self.typing.refresh();
        let settle = self.typing.ask_settle();
        let mut asks = Vec::new();
        for path in self.typing.due_files(now, settle) {
            asks.extend(self.ripen(&path, now, settle, room.saturating_sub(asks.len())));
        }
        for path in self.provenance.due_files(now) {
            self.files.look_again(&path);
            let change = Change { path, from_git: None, rescan: None, renamed_from: vec![] };
            asks.extend(self.look(&change, room.saturating_sub(asks.len())));
        }
        self.write_due_tags(now);
        self.files.let_go();
        asks
    }

    /// Looks at a changed file: its asks ready now (fresh ones the user typed, revisions) are
    /// recorded and returned; those still being typed wait as drafts.
    fn look(&mut self, change: &Change, room: usize) -> Vec<Ask> {
        let now = Instant::now();
        let Some((seen, candidates, diff)) = self.see(change, now) else { return Vec::new() };
        let unsent = &self.unsent;
        let (mut ready, candidates): (Vec<Draft>, Vec<Draft>) =
            candidates.into_iter().partition(|d| d.revises.is_some_and(|id| unsent.contains(&id)));
        ready.extend(self.typing.ready(&seen.path, candidates, diff, now));
        ready.sort_by_key(|d| d.marker.line);
        self.announce_ready(&seen, ready, room, change, now)
    }

    /// Looks at a file of the backlog again: its asks were ready when it was put there.
    fn look_at_next_round(&mut self, change: &Change, room: usize) -> Vec<Ask> {
        let now = Instant::now();
        let Some((seen, candidates, _)) = self.see(change, now) else { return Vec::new() };
        self.typing.forget(&seen.path);
        self.announce_ready(&seen, candidates, room, change, now)
    }

    /// Reads the changed file and finds its candidate asks, in file order: the revisions of
    /// asks still being typed, and the fresh markers the user typed. `None` when there is
    /// nothing to look at: the file is gone, not ours, in no language, or not news.
    fn see(
        &mut self,
        change: &Change,
        now: Instant,
    ) -> Option<(Seen<'t>, Vec<Draft>, Option<LineDiff>)> {
        let path = change.path.as_path();
        let Some(source) = self.files.read(path) else {
            self.typing.forget(path);
            return None;
        };
        self.follow_rename(change);
        if !self.files.is_news(change, &source) {
            return None;
        }
        let diff = self.files.diff(path, &source.bytes);
        if self.scanning_aside(path, &source) {
            tracing::debug!("{}: scanned beside the worker; looked at when done", path.display());
            // Its renames are followed already: the next look must not follow them again.
            let change = Change { renamed_from: Vec::new(), ..change.clone() };
            self.parked.insert(path.to_path_buf(), change);
            return None;
        }
        let mut seen = self.seen(path, source)?;
        if let Some(window) = &change.from_git {
            if self.provenance.history_pending(&seen, window) {
                tracing::debug!("{}: waits for its history in git to be searched", path.display());
                self.parked.insert(path.to_path_buf(), change.clone());
                return None;
            }
        }
        self.files.count_scan();
        let (fresh, mut candidates) = self.reconcile(&mut seen, diff, now);
        // A safe moment for the tags owed to the file, or not now.
        self.judge_save(&seen, diff, now);
        // An ask waiting for its text to settle is the user's, wherever an edit moved it.
        let waiting = self.typing.waiting_words(path);
        let (waited, fresh): (Vec<Marker>, Vec<Marker>) =
            fresh.into_iter().partition(|m| waiting.contains(&m.text.as_str()));
        let previous = self.files.previous(path);
        let mut typed =
            self.provenance.typed(&seen, fresh, change.from_git.as_ref(), previous, now);
        typed.extend(waited);
        // The records' places are this version's now: the next save's diff starts from it.
        self.files.keep_previous(path, seen.bytes());
        candidates.extend(typed.into_iter().map(|m| Draft::new(m, None, now)));
        candidates.sort_by_key(|d| d.marker.line);
        Some((seen, candidates, diff))
    }

    /// True if `source`, the bytes of `path`, are being scanned beside the worker: a big file
    /// with the trigger in it, whose markers for these bytes are not in yet. Once they are,
    /// they are what [`Files::markers`] gives for these bytes.
    fn scanning_aside(&mut self, path: &Path, source: &Source) -> bool {
        let Some(aside) = &mut self.aside else { return false };
        let bytes = &source.bytes;
        if bytes.len() < ASIDE_BYTES || !self.files.scanner.may_hold_marker(bytes) {
            return false;
        }
        let Some(lang) = self.files.table().detect(path, bytes) else { return false };
        let hash = content_hash(bytes);
        match aside.take(path, hash) {
            Some(Some(markers)) => {
                self.files.scanned_as(path, hash, markers);
                false
            }
            Some(None) => false, // its scan failed there: scanned here
            None => {
                aside.send(path, lang, bytes, hash);
                true
            }
        }
    }

    /// The file read as `source`, with its language, name and markers; `None` in no language.
    fn seen(&mut self, path: &Path, source: Source) -> Option<Seen<'t>> {
        let lang = self.files.table().detect(path, &source.bytes)?;
        let markers = self.files.markers(lang, path, &source.bytes);
        let file = self.files.relative(path);
        let file = self.name_of_links(path, &source, file, &markers);
        Some(Seen { path: path.to_path_buf(), source, lang, file, markers, reconciled: None })
    }

    /// The name a file with several hard links is known by: the name of another of its links
    /// that a pending ask with one of its markers' words is recorded under (the file was
    /// saved by that name first), or `file`. One file, one set of asks, whichever name a
    /// change came by. Files with one name cost nothing.
    fn name_of_links(
        &self,
        path: &Path,
        source: &Source,
        file: String,
        markers: &[Marker],
    ) -> String {
        let several = crate::sys::link_count(path, &source.metadata).is_ok_and(|n| n > 1);
        if !several || markers.is_empty() {
            return file;
        }
        let Ok(Some(id)) = crate::sys::path_file_id(path) else { return file };
        let first = |t: &str| t.lines().next().unwrap_or_default().to_string();
        let words: HashSet<String> = markers.iter().map(|m| first(&m.text)).collect();
        let others: HashSet<String> = self.ledger.asks.view(|records| {
            let named = records.iter().filter(|r| r.is_pending() && r.file != file);
            named.filter(|r| words.contains(&first(&r.text))).map(|r| r.file.clone()).collect()
        });
        let root = self.files.root();
        let same =
            |other: &String| crate::sys::path_file_id(&root.join(other)).ok().flatten() == Some(id);
        let mut others: Vec<String> = others.into_iter().filter(same).collect();
        others.sort();
        others.into_iter().next().unwrap_or(file)
    }

    /// Reads `path` and finds its markers (see [`LivePipeline::seen`]).
    pub(super) fn read_file(&mut self, path: &Path) -> Option<Seen<'t>> {
        let source = self.files.read(path)?;
        self.seen(path, source)
    }

    /// The file's markers reconciled with the ledger (see [`Ledger::reconcile`]): returns its
    /// untagged markers that are no ask yet and were not found not typed before, and the
    /// revisions of asks announced a moment ago whose text the user is still typing.
    fn reconcile(
        &mut self,
        seen: &mut Seen,
        diff: Option<LineDiff>,
        now: Instant,
    ) -> (Vec<Marker>, Vec<Draft>) {
        let (path, markers) = (&seen.path, &seen.markers);
        tracing::debug!("{}: {} marker(s)", path.display(), markers.len());
        if markers.is_empty() && !self.ledger.may_have_pending(&seen.file) {
            return (Vec::new(), Vec::new()); // nothing to ask, nothing to close
        }
        let found = seen.found().after(diff);
        let root = self.files.root().to_path_buf();
        let adopted = self.ledger.adopt_moved(&found, |file| !root.join(file).exists());
        self.tags.moved(&adopted, path);
        let Reconciled { pairs, revisions, unsent, others } =
            self.ledger.reconcile(&found, self.typing.revising());
        seen.reconciled = others;
        for v in &revisions {
            let line = markers[v.marker].line;
            tracing::debug!("{}:{line}: {} changed under the user's hands", path.display(), v.id);
        }
        for v in revisions.iter().filter(|v| v.soon) {
            self.typing.revised(path, v.id, &v.before, &markers[v.marker].text);
        }
        let revised: HashSet<usize> = revisions.iter().map(|v| v.marker).collect();
        let mut revisions: Vec<Draft> = revisions
            .into_iter()
            .map(|v| Draft::new(markers[v.marker].clone(), Some(v.id), now))
            .collect();
        for (mi, id) in unsent {
            tracing::debug!(
                "{}: {id} was recorded and never sent; announced again",
                path.display()
            );
            self.unsent.insert(id);
            revisions.push(Draft::new(markers[mi].clone(), Some(id), now));
        }
        let fresh = markers
            .iter()
            .enumerate()
            .filter(|(i, m)| pairs[*i].is_none() && !revised.contains(i) && !m.is_tagged())
            .map(|(_, m)| m.clone())
            .filter(|m| !self.provenance.was_not_typed(path, seen.bytes(), m))
            .collect();
        (fresh, revisions)
    }

    /// A file renamed inside the root (itself, or a directory above it) keeps what it had at
    /// its old paths: their versions in git and Claude's records, the markers found not typed
    /// there, their last bytes and hash when it has none of its own, and — when the old path
    /// is gone, a move and not a copy — their asks, which are now its.
    fn follow_rename(&mut self, change: &Change) {
        let path = &change.path;
        let mut to = path.clone();
        for from in &change.renamed_from {
            if from == &to || from == path {
                continue;
            }
            self.provenance.renamed(path, &to, from);
            to = from.clone();
            self.files.inherit(path, from);
            if !from.exists() {
                let ids =
                    self.ledger.move_file(&self.files.relative(from), &self.files.relative(path));
                self.tags.moved(&ids, path);
            }
        }
    }

    /// Announces the ready asks of a file once it is closed by its writers: recorded, at most
    /// `room` of them (see [`LivePipeline::announce`]). The file's bytes are left as seen.
    fn announce_ready(
        &mut self,
        seen: &Seen<'t>,
        ready: Vec<Draft>,
        room: usize,
        change: &Change,
        now: Instant,
    ) -> Vec<Ask> {
        if !ready.is_empty() && !fsio::wait_closed(&seen.path, now) {
            // Still open for writing: what it holds may be half an ask. Its writer's close
            // brings the next change, which looks again.
            tracing::debug!(
                "{}: still open for writing by another program; asked when it is closed",
                seen.path.display()
            );
            self.typing.forget(&seen.path);
            return Vec::new();
        }
        self.files.remember(&seen.path, seen.bytes());
        if ready.is_empty() {
            return Vec::new();
        }
        let ready = self.take_round(seen, ready, room, change);
        self.announce(seen, ready)
    }

    /// The first `room` of the ready asks, in file order; the file waits in the backlog with
    /// the rest (in place of what an earlier look of it left there).
    fn take_round(
        &mut self,
        seen: &Seen<'t>,
        mut ready: Vec<Draft>,
        room: usize,
        change: &Change,
    ) -> Vec<Draft> {
        self.backlog.retain(|r| r.change.path != seen.path);
        if ready.len() > room {
            let left = ready.split_off(room).into();
            let seen = seen.clone();
            self.backlog.push_back(Rounds { change: change.clone(), seen, left });
        }
        ready
    }

    /// The drafts of `path` that have settled, announced — if the file still holds exactly
    /// what they were seen in; otherwise the file is looked at anew.
    fn ripen(&mut self, path: &Path, now: Instant, settle: Duration, room: usize) -> Vec<Ask> {
        let Some(source) = self.files.read(path) else {
            self.typing.forget(path);
            return Vec::new();
        };
        let change =
            Change { path: path.to_path_buf(), from_git: None, rescan: None, renamed_from: vec![] };
        if !self.files.is_left_as(path, &source.bytes) {
            return self.look(&change, room); // changed: its event is on its way too
        }
        let Some(seen) = self.seen(path, source) else {
            self.typing.forget(path);
            return Vec::new();
        };
        let ready = self.typing.take_due(path, now, settle);
        let ready = self.take_round(&seen, ready, room, &change);
        self.announce(&seen, ready)
    }

    /// Records the ready markers as asks — new ones with new ids (unless another server on the
    /// root just did), revisions under the id they had. Nothing is written yet: the ids go into
    /// the file once the asks reached the client ([`LivePipeline::delivered`]). A file that
    /// cannot be tagged (read-only, several hard links, or too large for one more tag) gets
    /// untagged asks, recorded, so once.
    fn announce(&mut self, seen: &Seen, ready: Vec<Draft>) -> Vec<Ask> {
        let mode = self.ledger.mode;
        // Room for these tags beside those the file is owed already (a file of many asks gets
        // its tags once its last round went out).
        let why = untaggable(seen, ready.len() + self.tags.owed_to(&seen.path));
        let taggable = mode == TagMode::File && why.is_none();
        // A file with several names is one ask by any of them (see `Seen::file`): its id is
        // in the message, though no tag can be written into it.
        let with_id = taggable || mode == TagMode::Never || why == Some(fsio::SEVERAL_LINKS);
        let (claimed, revised) = self.ledger.record(&seen.found(), ready, seen.reconciled);
        let unsent = std::mem::take(&mut self.unsent);
        let stamped = taggable && !self.typing.autosaves();
        // Claimed and revised markers carry their record's id; a file that cannot be tagged
        // (with `--tag file`) is announced without it (Claude asks the user to remove it).
        let ask = |mut marker: Marker, revised| {
            let record = marker.tag?;
            if !with_id {
                marker.tag = None;
            }
            let (path, file) = (seen.path.clone(), seen.file.clone());
            Some(Ask { path, file, marker, record, stamped, revised })
        };
        let mut asks: Vec<Ask> = claimed.into_iter().filter_map(|m| ask(m, false)).collect();
        let resent = |m: &Marker| m.tag.is_some_and(|id| unsent.contains(&id));
        asks.extend(revised.into_iter().filter_map(|m| {
            let revised = !resent(&m);
            ask(m, revised)
        }));
        asks.sort_by_key(|a| a.marker.line);
        asks
    }
}

/// Whether a tag can be written into the file at all: writable, one name, and room under the
/// size limit for `n` more tags. (What only the write itself can tell — metadata a new file
/// cannot keep — shows when the tag is written.)
/// `None` if it can, else why not.
fn untaggable(seen: &Seen, n: usize) -> Option<&'static str> {
    let tags = n as u64 * MarkerId::TAG_LEN as u64;
    let why = if seen.source.bytes.len() as u64 + tags > fsio::MAX_FILE_SIZE {
        Some("a tag would pass the size limit")
    } else {
        fsio::cannot_replace(&seen.path, &seen.source.metadata)
    };
    if let Some(why) = why {
        tracing::debug!("{}: not tagged: {why}", seen.path.display());
    }
    why
}

#[cfg(test)]
mod tests {
    use crate::live::testing::live;
    use crate::watch::Change;

    /// A file another program still has open for writing is left alone and nothing is
    /// announced; the change its close brings stamps it — even with no byte written since.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_being_written_is_stamped_when_its_writer_closes() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.py");
        let mut writer = std::fs::File::create(&p).unwrap();
        writer.write_all(b"# @claude slow\n").unwrap();
        assert!(live.process(&p, None).is_empty(), "announced while being written");
        assert!(live.ledger.asks.snapshot().is_empty());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude slow\n");
        drop(writer);
        // The close that ends the writing: ours, or that of a copy a fork elsewhere made.
        crate::test_support::wait_closed(&p);
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(asks[0].stamped);
        assert!(std::fs::read_to_string(&p).unwrap().starts_with("# @claude[fw-"));
    }

    /// Issue 30 (10): a file of many asks is read, scanned and reconciled once, and its asks go
    /// out in rounds from that — not one whole look a round (with the tags of the round before
    /// written into it in between), which made 20,000 asks take minutes to drain. Its tags
    /// wait for the last round and then go in with one write.
    /// A big file is scanned beside the worker: its change returns nothing at once (the file
    /// waits, the worker goes on), and when its markers are in, the file is looked at again
    /// and announced. Saved again while the first bytes were being scanned, it is announced as
    /// saved last: never the first version's markers read over the second's bytes.
    #[test]
    fn a_big_file_is_scanned_aside_and_announced_as_saved_last() {
        use super::ASIDE_BYTES;
        use std::path::Path;
        use std::sync::mpsc;
        use std::time::Duration;
        const N: usize = 15_000; // about 200 KB: over ASIDE_BYTES
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let (tx, woken) = mpsc::channel();
        live.wake_when_ready(move |p: &Path| {
            let _ = tx.send(p.to_path_buf());
        });
        let p = live.files.root.join("big.py");
        let first: String = (0..N).map(|i| format!("#@claude a{i}\n")).collect();
        assert!(first.len() > ASIDE_BYTES);
        let change = Change { path: p.clone(), from_git: None, rescan: None, renamed_from: vec![] };
        crate::test_support::write(&p, &first).unwrap();
        assert!(live.process_change(&change, N).is_empty(), "scanned on the worker");
        let last = first.replacen("#@claude a0\n", "#@claude b0 saved last\n", 1);
        crate::test_support::write(&p, &last).unwrap();
        assert!(live.process_change(&change, N).is_empty(), "scanned on the worker");
        let asks = loop {
            let path = woken.recv_timeout(Duration::from_secs(60)).expect("no scan done in 60 s");
            let asks = live.unpark(&path, N);
            if !asks.is_empty() {
                break asks;
            }
        };
        assert_eq!(asks.len(), N);
        assert_eq!(asks[0].marker.text, "@claude b0 saved last");
        assert_eq!(asks[1].marker.text, "@claude a1");
        assert_eq!(live.scanned(), 1, "looked at once, with the markers of the bytes saved last");
    }

    #[test]
    fn a_file_of_many_asks_is_looked_at_once_for_all_its_rounds() {
        use std::time::Instant;
        const N: usize = 1000;
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.py");
        let text: String = (0..N).map(|i| format!("# @claude ask {i}\n")).collect();
        crate::test_support::write(&p, &text).unwrap();
        let change = Change { path: p.clone(), from_git: None, rescan: None, renamed_from: vec![] };
        let mut round = live.process_change(&change, 64);
        let (mut lines, mut rounds) = (Vec::new(), 0);
        loop {
            assert!(!round.is_empty() && round.len() <= 64, "round {rounds}: {}", round.len());
            lines.extend(round.iter().map(|a| a.marker.line));
            live.delivered(&round, true);
            rounds += 1;
            // As the worker does between rounds: what fell due first (the tags owed).
            let due = live.run_due(Instant::now(), 64);
            assert!(due.is_empty(), "{} asks fell due", due.len());
            let tags = std::fs::read_to_string(&p).unwrap().matches("@claude[fw-").count();
            if live.has_backlog() {
                assert_eq!(tags, 0, "tags written while asks of the file wait (round {rounds})");
            }
            match live.backlog(64) {
                Some(next) => round = next,
                None => break,
            }
        }
        assert_eq!(lines, (1..=N).collect::<Vec<_>>(), "each ask once, in file order");
        assert_eq!(rounds, N.div_ceil(64));
        assert_eq!(live.scanned(), 1, "the file was looked at again for later rounds");
        let tagged = std::fs::read_to_string(&p).unwrap();
        assert_eq!(tagged.matches("@claude[fw-").count(), N, "every tag in");
        // Its own tags' change is no news: nothing more is looked at or announced.
        assert!(live.process_change(&change, 64).is_empty());
        assert_eq!(live.scanned(), 1);
    }

    /// A later round of a file claims no marker that another server on the root recorded
    /// since the file was looked at (the rounds skip pairing only while nobody else wrote).
    #[test]
    fn a_later_round_leaves_what_another_server_recorded_meanwhile() {
        use crate::asks::{Asks, TagMode};
        use crate::live::testing::scanner;
        let state = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let server = || {
            let asks = Asks::with_ledger_in(state.path(), &root, "@claude").unwrap();
            super::LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks)
        };
        let (mut one, mut two) = (server(), server());
        let p = root.join("a.py");
        let text: String = (0..100).map(|i| format!("# @claude ask {i}\n")).collect();
        crate::test_support::write(&p, &text).unwrap();
        let change = Change { path: p.clone(), from_git: None, rescan: None, renamed_from: vec![] };
        let first = one.process_change(&change, 64);
        assert_eq!(first.len(), 64);
        one.delivered(&first, true);
        assert_eq!(two.process_change(&change, 1000).len(), 36, "the other server takes the rest");
        let next = one.backlog(64).expect("the rest of the file in the backlog");
        let lines: Vec<usize> = next.iter().map(|a| a.marker.line).collect();
        assert!(lines.is_empty(), "claimed again: {lines:?}");
        assert_eq!(one.ledger.asks.snapshot().len(), 100);
    }

    /// No room to deliver: the marker stays untagged, unrecorded, and its file waits in the
    /// backlog for the next round.
    #[test]
    fn no_room_no_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.py");
        crate::test_support::write(&p, "# @claude later\n").unwrap();
        let change = Change { path: p.clone(), from_git: None, rescan: None, renamed_from: vec![] };
        assert!(live.process_change(&change, 0).is_empty());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude later\n");
        assert!(live.ledger.asks.snapshot().is_empty());
        let next = live.backlog(1).expect("the file in the backlog");
        assert_eq!(next.len(), 1, "found when there is room again");
    }
}
