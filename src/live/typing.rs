//! Asks the user may still be typing. On a root whose editor saves while its user types (see
//! [`crate::autosave`]), a fresh ask waits as a draft until its text has settled; anywhere, a
//! revision (an ask announced a moment ago whose text changed since) waits too. With no settle
//! time every save is a deliberate one and nothing waits.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::autosave::{Draft, Drafts, KeptHabit, LineDiff};

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
}

impl Typing {
    /// Asks settle for `settle` on a root whose editor has `habit`.
    pub fn new(settle: Duration, habit: KeptHabit) -> Self {
        Typing { settle, habit, drafts: Drafts::default() }
    }

    /// True if asks announced a moment ago may be revised (there is a settle time).
    pub fn revising(&self) -> bool {
        !self.settle.is_zero()
    }

    /// True once the root's editor is known to save while its user types.
    pub fn autosaves(&self) -> bool {
        self.habit.habit.autosave
    }

    /// Learns that the editor autosaves; true if that is news.
    pub fn learn_autosave(&mut self) -> bool {
        self.habit.learn_autosave()
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
        self.drafts.update(path, candidates, diff, now, &mut self.habit)
    }

    /// True if these candidates must wait for their text to settle: on a root whose editor
    /// autosaves, always; elsewhere, only revisions (their user is typing right now).
    fn waits(&self, candidates: &[Draft]) -> bool {
        !self.settle.is_zero()
            && (self.habit.habit.autosave || candidates.iter().any(|c| c.revises.is_some()))
    }

    /// Forgets the drafts of `path` (it is gone, unreadable, or all its asks are ready).
    pub fn forget(&mut self, path: &Path) {
        self.drafts.forget(path);
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
        self.drafts.take_due(path, now, settle)
    }
}
