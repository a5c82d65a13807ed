//! The tag queue: asks that were heard wait here for a safe moment to get their ids written
//! into their file. An editor that holds the file reloads it when the tag lands, and moves a
//! cursor on the tagged line to the next line (VS Code does); under unsaved typing the tag
//! is written back over at the next save. So a tag is written right after a save that left
//! the ask's lines alone (the user works elsewhere in the file) once the file was quiet for
//! the quiet time (`--settle`) — at most [`SAFE_TRIES`] times — else after `--tag-after` since
//! the file's last save; a tag the user takes out again (their save is the file as it was
//! before the tag: an undo) is not written again.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::asks::TagMode;
use crate::autosave::LineDiff;
use crate::error::Problem;
use crate::fsio::{self, WriteError};
use crate::id::MarkerId;
use crate::stamp;

use super::files::Seen;
use super::{Ask, LivePipeline};

/// How many times a tag is written at a safe moment (a save elsewhere in the file) before only
/// `--tag-after` is left: an editor that writes its buffer back over the tag each time is not
/// fought over.
const SAFE_TRIES: u8 = 2;

/// The default of `--tag-after`: the latest a tag is written after its file's last save.
pub const TAG_AFTER: Duration = Duration::from_secs(600);

/// The asks of one file that are owed their tags, and when the tags may be written.
struct TagLater {
    ids: Vec<MarkerId>,
    /// The end of the quiet after a save that left the asks' lines alone: a safe moment.
    safe_at: Option<Instant>,
    /// The latest moment: `--tag-after` after the file's last save.
    fallback: Instant,
    /// How many times the tags were written.
    tries: u8,
    /// The bytes the last write replaced, until the file's next save tells whether the tags
    /// stayed.
    replaced: Option<Vec<u8>>,
}

impl TagLater {
    /// When the tags may be written: at the safe moment while tries are left, else at the
    /// fallback (one last try); never while a write waits for the next save's verdict.
    fn due(&self) -> Option<Instant> {
        if self.replaced.is_some() || self.tries > SAFE_TRIES {
            return None;
        }
        let safe = self.safe_at.filter(|_| self.tries < SAFE_TRIES);
        Some(safe.map_or(self.fallback, |s| s.min(self.fallback)))
    }
}

/// What one save of a file with tags owed says.
pub(super) enum Verdict {
    /// It left the asks' lines alone: the tags may go in once the file is quiet.
    Safe,
    /// It touched them (the user is on them), or its change is unknown: not now.
    NotNow,
    /// The tags are in the file, or nothing is owed any more: done.
    Done,
    /// The file is exactly as it was before our tags: the user took them out.
    TakenOut,
}

/// Heard asks waiting for their tags, by file, and delivered ones waiting to be heard.
#[derive(Default)]
pub(super) struct TagQueue {
    later: HashMap<PathBuf, TagLater>,
    /// Asks sent to a client that tells later whether they were heard (Claude Code, through
    /// the hub): tagged only once they are.
    unheard: HashMap<MarkerId, PathBuf>,
    /// How long a file must be quiet after a safe save before a tag is written into it (zero:
    /// at once, whatever the saves).
    quiet: Duration,
    /// The latest a tag is written after its file's last save (`--tag-after`).
    pub(super) tag_after: Duration,
}

impl TagQueue {
    /// A queue that writes a file's tags once it was quiet for `quiet` after a safe save, or
    /// [`TAG_AFTER`] after its last save.
    pub fn new(quiet: Duration) -> Self {
        TagQueue { quiet, tag_after: TAG_AFTER, ..TagQueue::default() }
    }

    /// The heard asks among `asks` to be tagged get their tags at a safe moment.
    pub fn push(&mut self, asks: &[Ask]) {
        self.owe(asks.iter().filter(|a| a.stamped).filter_map(|a| Some((a.id()?, a.path.clone()))));
    }

    /// The asks to be tagged among `asks` wait to be heard.
    pub fn wait_for_hearing(&mut self, asks: &[Ask]) {
        for ask in asks.iter().filter(|a| a.stamped) {
            if let Some(id) = ask.id() {
                self.unheard.insert(id, ask.path.clone());
            }
        }
    }

    /// These asks were heard: those waiting for it get their tags at a safe moment. Returns
    /// the others (not sent by this process: an earlier session's).
    pub fn heard(&mut self, ids: &[MarkerId]) -> Vec<MarkerId> {
        let (mut owed, mut others) = (Vec::new(), Vec::new());
        for id in ids {
            match self.unheard.remove(id) {
                Some(path) => owed.push((*id, path)),
                None => others.push(*id),
            }
        }
        self.owe(owed.into_iter());
        others
    }

    /// Owes these tags. The save that brought an ask touched its lines: the next safe moment
    /// is a later save's. With no quiet time they are due at once.
    pub fn owe(&mut self, owed: impl Iterator<Item = (MarkerId, PathBuf)>) {
        let now = Instant::now();
        let safe_at = self.quiet.is_zero().then_some(now);
        for (id, path) in owed {
            let later = self.later.entry(path).or_insert(TagLater {
                ids: Vec::new(),
                safe_at,
                fallback: now + self.tag_after,
                tries: 0,
                replaced: None,
            });
            later.ids.push(id);
            later.safe_at = safe_at;
        }
    }

    /// How many tags `path` is owed: heard or waiting to be heard.
    pub fn owed_to(&self, path: &Path) -> usize {
        let later = self.later.get(path).map_or(0, |l| l.ids.len());
        later + self.unheard.values().filter(|p| *p == path).count()
    }

    /// The asks `ids` followed their file to `to` (moved at `now`): their tags go there, at
    /// the next safe moment (the move is no save of other lines).
    pub fn moved(&mut self, ids: &[MarkerId], to: &Path) {
        if ids.is_empty() {
            return;
        }
        for (id, path) in self.unheard.iter_mut() {
            if ids.contains(id) {
                *path = to.to_path_buf();
            }
        }
        let mut owed = Vec::new();
        for later in self.later.values_mut() {
            owed.extend(later.ids.iter().filter(|id| ids.contains(id)));
            later.ids.retain(|id| !ids.contains(id));
        }
        self.later.retain(|_, later| !later.ids.is_empty());
        self.owe(owed.into_iter().map(|id| (id, to.to_path_buf())));
    }

    /// `path` was saved at `now` (news: not our own write) and the save says `verdict`.
    pub fn saved(&mut self, path: &Path, now: Instant, verdict: Verdict) {
        let Some(later) = self.later.get_mut(path) else { return };
        let tried = later.replaced.take().is_some();
        let safe_at = match verdict {
            Verdict::Done => None,
            Verdict::TakenOut => {
                tracing::info!(
                    "{}: the tag was taken out again (undone); it is not written again",
                    path.display()
                );
                None
            }
            _ if tried && later.tries > SAFE_TRIES => {
                tracing::info!(
                    "{}: the tag was written over {} times; it is not written again",
                    path.display(),
                    later.tries
                );
                None
            }
            Verdict::Safe => Some(now + self.quiet),
            Verdict::NotNow => {
                later.safe_at = self.quiet.is_zero().then_some(now);
                later.fallback = now + self.tag_after;
                return;
            }
        };
        match safe_at {
            Some(at) => {
                later.safe_at = Some(at);
                later.fallback = now + self.tag_after;
            }
            None => {
                self.later.remove(path);
            }
        }
    }

    /// The bytes the last write of `path`'s tags replaced, if its verdict is still to come.
    fn replaced(&self, path: &Path) -> Option<&[u8]> {
        self.later.get(path)?.replaced.as_deref()
    }

    /// Gives up every tag owed: nothing is written under an autosaving editor's typing.
    pub fn clear(&mut self) {
        self.later.clear();
    }

    /// When the next file's tags fall due.
    pub fn next_due(&self) -> Option<Instant> {
        self.later.values().filter_map(TagLater::due).min()
    }

    /// The files whose tags are due at `now`.
    fn due(&self, now: Instant) -> Vec<PathBuf> {
        let due = |t: &TagLater| t.due().is_some_and(|d| d <= now);
        self.later.iter().filter(|(_, t)| due(t)).map(|(p, _)| p.clone()).collect()
    }
}

impl LivePipeline<'_> {
    /// The asks are about to be handed to a client that shows them at once (the terminal):
    /// no longer unsent (see [`crate::asks::AskRecord::unsent`]; the server marks its asks
    /// just before its channel message goes).
    pub fn sending(&mut self, asks: &[Ask]) {
        let ids: Vec<MarkerId> = asks.iter().map(|a| a.record).collect();
        self.ledger.asks.sent(&ids);
    }

    /// The asks reached the client. `heard`: the client is a person or a program that shows
    /// them (the terminal), so they are heard now; else they are heard when the client says so
    /// ([`LivePipeline::heard`]). A heard ask to be tagged gets its tag once its file is quiet.
    pub fn delivered(&mut self, asks: &[Ask], heard: bool) {
        self.sending(asks); // marked before already where a kill could come in between
        if heard {
            let ids: Vec<MarkerId> = asks.iter().map(|a| a.record).collect();
            self.ledger.asks.hear(&ids);
            self.tags.push(asks);
        } else {
            self.tags.wait_for_hearing(asks);
        }
    }

    /// There is evidence that these asks entered Claude's context: the ones waiting for that
    /// get their tags once their file is quiet — also those an earlier session sent and nobody
    /// heard then, where their file can hold a tag (`--tag file`, a root that saves
    /// deliberately: the same as for an ask of this session).
    pub fn heard(&mut self, ids: &[MarkerId]) {
        let earlier = self.tags.heard(ids);
        if earlier.is_empty() || self.ledger.mode != TagMode::File || self.typing.autosaves() {
            return;
        }
        let root = self.files.root.clone();
        let owed: Vec<(MarkerId, PathBuf)> = self.ledger.asks.view(|records| {
            let earlier = records.iter().filter(|r| earlier.contains(&r.id) && r.is_pending());
            earlier.map(|r| (r.id, root.join(&r.file))).collect()
        });
        self.tags.owe(owed.into_iter());
    }

    /// Writes the tags whose file has been quiet long enough (all, with no quiet time);
    /// returns the ids written.
    pub(super) fn write_due_tags(&mut self, now: Instant) -> HashSet<MarkerId> {
        let mut written = HashSet::new();
        for path in self.tags.due(now) {
            if self.in_backlog(&path) {
                continue; // with the file's last round
            }
            written.extend(self.write_tags(&path));
        }
        written
    }

    /// Writes every tag still owed, whatever the time (the run is ending) — not one written
    /// already, whose verdict is still to come; returns the ids written.
    pub fn write_all_tags(&mut self) -> HashSet<MarkerId> {
        let owed = self.tags.later.iter().filter(|(_, t)| t.due().is_some());
        let paths: Vec<PathBuf> = owed.map(|(p, _)| p.clone()).collect();
        let written = paths.iter().flat_map(|path| self.write_tags(path)).collect();
        self.files.let_go();
        written
    }

    /// A save of `seen` (news: not our own write; `diff` what it changed since the version
    /// last seen) tells the tag queue whether the tags owed to its file may go in soon: see
    /// [`Verdict`]. After a write of ours, the save is compared with the bytes the write
    /// replaced: an editor that wrote its buffer back over the tag changed what the user
    /// changed since, and nothing more.
    pub(super) fn judge_save(&mut self, seen: &Seen, diff: Option<LineDiff>, now: Instant) {
        let Some(later) = self.tags.later.get(&seen.path) else { return };
        let owed: HashSet<MarkerId> = later.ids.iter().copied().collect();
        let stamps = self.ledger.stamps_owed(&seen.found().after(diff), &owed);
        let replaced = self.tags.replaced(&seen.path);
        let verdict = if stamps.is_empty() {
            Verdict::Done
        } else if replaced == Some(seen.bytes()) {
            Verdict::TakenOut
        } else {
            let diff = replaced.map(|old| LineDiff::between(old, seen.bytes())).or(diff);
            let at = |s: &stamp::Stamp| seen.markers.iter().find(|m| m.insert_at == s.insert_at);
            let lines: Vec<(usize, usize)> =
                stamps.iter().filter_map(at).map(|m| (m.line, m.end_line)).collect();
            match diff {
                Some(d) if lines.iter().all(|&(first, last)| !d.touches(first, last)) => {
                    Verdict::Safe
                }
                _ => Verdict::NotNow,
            }
        };
        self.tags.saved(&seen.path, now, verdict);
    }

    /// Writes the tags owed to `path`: the untagged markers that are those asks get their ids.
    /// If the user wrote the file meanwhile, the tags wait for the next quiet moment (the
    /// user's write wins, and brings its own change); if the file cannot be written, they are
    /// given up (the asks are recorded: once). A written tag stays owed until the file's next
    /// save says whether it stayed ([`LivePipeline::judge_save`]).
    fn write_tags(&mut self, path: &Path) -> Vec<MarkerId> {
        let Some(mut later) = self.tags.later.remove(path) else { return Vec::new() };
        tracing::debug!("{}: writing {} tag(s)", path.display(), later.ids.len());
        let Some(seen) = self.read_file(path) else { return Vec::new() }; // gone: nothing owed
        let owed: HashSet<MarkerId> = later.ids.iter().copied().collect();
        let diff = self.files.diff(path, seen.bytes()); // changed since it was reconciled?
        let stamps = self.ledger.stamps_owed(&seen.found().after(diff), &owed);
        if stamps.is_empty() {
            tracing::debug!("{}: no tag owed any more", path.display());
            return Vec::new(); // resolved, deleted, or tagged already
        }
        let stamped = stamp::splice(seen.bytes(), &stamps);
        if stamped.len() as u64 > fsio::MAX_FILE_SIZE {
            tracing::debug!("{}: a tag would pass the size limit; not tagged", path.display());
            return Vec::new();
        }
        #[cfg(test)]
        if let Some(hook) = self.before_stamp.as_mut() {
            hook(path);
        }
        match self.files.replace(path, seen.bytes(), &stamped) {
            Ok(()) => {
                tracing::debug!("{}: tagged {} ask(s)", path.display(), stamps.len());
                self.files.remember(path, &stamped);
                later.tries += 1;
                later.replaced = Some(seen.bytes().to_vec());
                self.tags.later.insert(path.to_path_buf(), later);
                stamps.iter().map(|s| s.id).collect()
            }
            Err(e) if is_conflict(&e) => {
                // Whatever caused it brings the next change, and the tags wait for the quiet
                // after it. Nor are these bytes "seen" as left: the next change looks again.
                tracing::debug!("{e}; tagged when it is quiet again");
                self.files.look_again(path);
                let due = Instant::now() + self.tags.quiet.max(Duration::from_millis(50));
                later.safe_at = Some(due);
                later.fallback = later.fallback.max(due);
                self.tags.later.insert(path.to_path_buf(), later);
                Vec::new()
            }
            Err(e) => {
                Problem::Write(e).log();
                Vec::new()
            }
        }
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::fsio;
    use crate::live::testing::live;

    /// A file that vanishes (or turns into a directory) after its ask was announced, before
    /// the tag is written: nothing is written at the path, and the ask is not announced again.
    #[test]
    fn a_file_gone_before_its_tag_gets_nothing_written() {
        for replace_with_dir in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut live = live(dir.path());
            let p = live.files.root.join("a.py");
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
        let p = live.files.root.join("big.py");
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
        live.files.last_seen.clear();
        assert!(live.process(&p, None).is_empty(), "announced twice");
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
        let sub = live.files.root.join("sub");
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

    /// An ask of an earlier run (a session killed before anyone heard it), heard in this run —
    /// its hooks handed it over from the ledger — gets its tag, as an ask of this run does;
    /// one in a file that cannot take a tag (here: two names) does not.
    #[test]
    fn an_ask_of_an_earlier_run_heard_now_gets_its_tag() {
        use crate::asks::{Asks, TagMode};
        use crate::live::testing::scanner;
        use crate::live::LivePipeline;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (a, b) = (root.join("a.py"), root.join("b.py"));
        crate::test_support::write(&a, "# @claude heard later\n").unwrap();
        crate::test_support::write(&b, "# @claude linked, heard later\n").unwrap();
        let asks = Asks::in_memory();
        let mut earlier =
            LivePipeline::with_asks(root.clone(), scanner(), TagMode::File, asks.clone());
        let mut sent = Vec::new();
        for path in [&a, &b] {
            let change = crate::watch::Change {
                path: path.clone(),
                from_git: None,
                rescan: None,
                renamed_from: Vec::new(),
            };
            sent.extend(earlier.process_change(&change, usize::MAX));
        }
        earlier.delivered(&sent, false);
        drop(earlier); // the session ended before anyone heard them
        std::fs::hard_link(&b, root.join("b.txt")).unwrap();

        let mut now = LivePipeline::with_asks(root.clone(), scanner(), TagMode::File, asks);
        let ids: Vec<_> = sent.iter().map(|ask| ask.record).collect();
        now.heard(&ids);
        now.write_all_tags();
        assert_eq!(
            std::fs::read_to_string(&a).unwrap(),
            format!("# @claude[{}] heard later\n", sent[0].record),
            "heard, so tagged"
        );
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "# @claude linked, heard later\n");
    }

    /// A file with several names cannot be stamped safely: its ask goes out untagged, once,
    /// with its id in the message (one file, one ask, by any name), and both names keep the
    /// user's bytes.
    #[cfg(unix)]
    #[test]
    fn a_hard_linked_file_is_announced_once_unstamped() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.py");
        crate::test_support::write(&p, "# @claude linked\n").unwrap();
        std::fs::hard_link(&p, live.files.root.join("b.txt")).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(!asks[0].stamped && asks[0].id().is_some());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# @claude linked\n");
        crate::test_support::write(&p, "# @claude linked\n").unwrap();
        live.files.last_seen.clear();
        assert!(live.process(&p, None).is_empty(), "announced twice");
    }
}
