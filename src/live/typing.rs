//! Asks the user may still be typing. On a root whose editor saves while its user types (see
//! [`crate::autosave`]), a fresh ask waits as a draft until its text has settled; anywhere, a
//! revision (an ask announced a moment ago whose text changed since) waits too. With no settle
//! time every save is a deliberate one and nothing waits.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::autosave::{self, Draft, Drafts, KeptHabit, LineDiff, ModeSwitch, Typed, HUMAN_PACE};
use crate::id::MarkerId;

/// How many files' last saves are kept before those older than [`RECENT`] are let go.
const SAVES_KEPT: usize = 4096;
const RECENT: Duration = Duration::from_secs(60);

/// What the root's editor does while its user types, and the asks still being typed.
#[derive(Default)]
pub(super) struct Typing {
    /// The least time an ask's text must stay unchanged on a root whose editor autosaves.
    /// Zero: every save is a deliberate one.
    settle: Duration,
    /// What this root's editor does on its own.
    habit: KeptHabit,
    /// Asks that may still be being typed (autosaving editors).
    drafts: Drafts,
    /// When each file was last saved, and the time between its last two saves: a save too soon
    /// after the one before is a program's, not a person's typing.
    saves: HashMap<PathBuf, (Instant, Option<Duration>)>,
    /// The asks (by id) seen revised already: the later saves of each are its draft's.
    revised: HashSet<MarkerId>,
    /// The switches between deliberate saves and autosave not yet told.
    switches: Vec<ModeSwitch>,
    /// The editor's settings say it autosaves (VS Code's `files.autoSave`), whatever the
    /// habit learned: read at start, not kept.
    configured: bool,
}

impl Typing {
    /// Asks settle for `settle` on a root whose editor has `habit`.
    pub fn new(settle: Duration, habit: KeptHabit) -> Self {
        Typing { settle, habit, ..Typing::default() }
    }

    /// True if asks announced a moment ago may be revised (there is a settle time).
    pub fn revising(&self) -> bool {
        !self.settle.is_zero()
    }

    /// True once the root's editor is known to save while its user types.
    pub fn autosaves(&self) -> bool {
        self.configured || self.habit.habit.autosave
    }

    /// The editor's settings say it saves while its user types: asks wait from the first.
    pub fn configured_to_autosave(&mut self) {
        self.configured = true;
    }

    /// A save of `path` at `now`, before anything is made of it: the habit is read again if
    /// its file changed (a reset), and the time since the file's last save is noted.
    pub fn saved(&mut self, path: &Path, now: Instant) {
        self.refresh();
        if self.saves.len() >= SAVES_KEPT {
            // A build's storm of files: only the last minute's saves can be a person's typing.
            self.saves.retain(|_, (t, _)| now.saturating_duration_since(*t) < RECENT);
        }
        let last = self.saves.get(path).map(|&(t, _)| now.saturating_duration_since(t));
        self.saves.insert(path.to_path_buf(), (now, last));
    }

    /// Reads the habit again if its file changed since (`autosave reset`).
    pub fn refresh(&mut self) {
        self.switches.extend(self.habit.refresh());
    }

    /// The time between the last two saves of `path`.
    fn gap(&self, path: &Path) -> Option<Duration> {
        self.saves.get(path).and_then(|&(_, gap)| gap)
    }

    /// The ask `id`, announced a moment ago, now reads `new` instead of `old` (this save
    /// revises it): the first time, the user's pause is learned, and a piece of evidence if it
    /// grew. (Its later saves are its draft's: see [`Typing::ready`].)
    pub fn revised(&mut self, path: &Path, id: MarkerId, old: &str, new: &str) {
        if !self.revised.insert(id) {
            return;
        }
        let added = new.chars().count().saturating_sub(old.chars().count());
        let Some(gap) = self.gap(path) else { return };
        let grew = autosave::grew(old, new);
        self.typed(path, Typed { gap, added, grew, revises: Some(id), first_growth: grew });
    }

    /// An ask seen changing from one save to the next: the user's pause is learned, and its
    /// first growth is a piece of evidence — unless the save came too soon after the one
    /// before, as a program's do.
    fn typed(&mut self, path: &Path, t: Typed) {
        if self.gap(path).is_some_and(|gap| gap < HUMAN_PACE) {
            return;
        }
        self.habit.saw_pause(t.pause());
        if t.grew && t.first_growth {
            self.switches.extend(self.habit.saw_growth());
        }
    }

    /// Of one save's `candidates` (fresh asks and revisions, `diff` what the save changed),
    /// those ready to be announced now; the others wait as drafts.
    pub fn ready(
        &mut self,
        path: &Path,
        candidates: Vec<Draft>,
        diff: Option<LineDiff>,
        now: Instant,
    ) -> Vec<Draft> {
        if !self.waits(&candidates) {
            self.drafts.forget(path);
            return candidates;
        }
        let (ready, typed) = self.drafts.update(path, candidates, diff, now);
        for mut t in typed {
            // An announced ask gave its evidence when it was first seen revised.
            t.first_growth &= t.revises.is_none();
            self.typed(path, t);
        }
        self.saw_ready(&ready);
        ready
    }

    /// Asks ready: each saved whole on a root that autosaves takes a piece of evidence back.
    fn saw_ready(&mut self, ready: &[Draft]) {
        for _ in ready.iter().filter(|d| d.whole()) {
            if self.autosaves() {
                self.switches.extend(self.habit.saw_whole());
            }
        }
    }

    /// True if these candidates must wait for their text to settle: on a root whose editor
    /// autosaves, always; elsewhere, only revisions (their user is typing right now).
    fn waits(&self, candidates: &[Draft]) -> bool {
        !self.settle.is_zero()
            && (self.autosaves() || candidates.iter().any(|c| c.revises.is_some()))
    }

    /// The words of the asks of `path` waiting for their text to settle (the user typed them:
    /// an edit of Claude's that moves them, re-indented, leaves them the user's).
    pub fn waiting_words(&self, path: &Path) -> Vec<&str> {
        self.drafts.waiting_words(path)
    }

    /// Forgets the drafts of `path` (it is gone, unreadable, or all its asks are ready).
    pub fn forget(&mut self, path: &Path) {
        self.drafts.forget(path);
    }

    /// The switches between deliberate saves and autosave since the last call.
    pub fn switches(&mut self) -> Vec<ModeSwitch> {
        std::mem::take(&mut self.switches)
    }

    /// How long an ask's text must stay as it is before it is ready, on this root.
    pub fn ask_settle(&self) -> Duration {
        self.habit.habit.ask_settle(self.settle)
    }

    /// When the first draft falls due.
    pub fn next_due(&self) -> Option<Instant> {
        self.drafts.next_due(self.ask_settle())
    }

    /// The files with a draft due at `now`, with `settle` as the settle time.
    pub fn due_files(&self, now: Instant, settle: Duration) -> Vec<PathBuf> {
        self.drafts.due_files(now, settle)
    }

    /// The drafts of `path` due at `now`.
    pub fn take_due(&mut self, path: &Path, now: Instant, settle: Duration) -> Vec<Draft> {
        let due = self.drafts.take_due(path, now, settle);
        self.saw_ready(&due);
        due
    }

    /// Takes the root to autosave, as if it had been learned (tests).
    #[cfg(test)]
    pub fn assume_autosave(&mut self) {
        self.habit.habit.autosave = true;
        self.habit.habit.evidence = vec![autosave::unix_now(); 3];
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::asks::{Asks, TagMode};
    use crate::claude_writes::ClaudeWrites;
    use crate::live::testing::scanner;
    use crate::live::LivePipeline;
    use crate::watch::Change;

    /// Issue 30 (9): on a root whose editor autosaves, an ask waiting for its text to settle
    /// is still the user's when Claude's edit re-indents it (wraps its function in a class,
    /// every line of it rewritten by Claude's tool): it is announced once it settled, as on a
    /// deliberate root it was at once.
    #[test]
    fn a_waiting_ask_claude_reindents_is_announced() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut live =
            LivePipeline::with_asks(root.clone(), scanner(), TagMode::File, Asks::in_memory())
                .settling(Duration::from_secs(5), None);
        live.provenance.claude = ClaudeWrites::in_dir(state.path());
        live.typing.assume_autosave();
        let p = root.join("a.py");
        crate::test_support::write(&p, "def f():\n    # @claude add a docstring\n    return 1\n")
            .unwrap();
        let change = Change { path: p.clone(), from_git: None, rescan: None, renamed_from: vec![] };
        assert!(live.process_change(&change, usize::MAX).is_empty(), "announced at once");
        let wrapped =
            "class C:\n    def f(self):\n        # @claude add a docstring\n        return 1\n";
        // Claude's edit wrote every line of the class, the ask's among them.
        let at = wrapped.find("        # @claude").unwrap();
        let line = at..at + wrapped[at..].find('\n').unwrap();
        let place = crate::lines::place_keys(wrapped.as_bytes(), line);
        live.provenance.claude.record(&p, "post", "toolu_1", &place);
        crate::test_support::write(&p, wrapped).unwrap();
        assert!(live.process_change(&change, usize::MAX).is_empty(), "announced before it settled");
        let later = Instant::now() + Duration::from_secs(60);
        let texts: Vec<String> =
            live.run_due(later, usize::MAX).into_iter().map(|a| a.marker.text).collect();
        assert_eq!(texts, ["@claude add a docstring"], "the user's ask was taken for Claude's");
    }
}
