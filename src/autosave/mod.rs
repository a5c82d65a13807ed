//! Editors that save while their user types (VS Code `files.autoSave`, Emacs
//! `auto-save-visited-mode`, JetBrains on idle, vim on `CursorHold`): what their saves look like,
//! and when an ask typed into one is ready.
//!
//! A save is a "send" only when the user presses save. An autosaving editor writes fragments:
//! `@claude please`, then `@claude please refactor f1`, then the whole ask. Nothing in the file
//! system tells a deliberate save from an automatic one, but their sequence does: an ask that
//! grows from one save to the next is still being typed. A root is taken to save deliberately
//! until asks were seen growing so on several saves ([`habit`]: repeated evidence, which fades);
//! from then on an untagged marker is a [`Draft`] until it is ready — when a save changes the
//! file elsewhere while the ask's text stays as it was (the user moved on), or when its text has
//! not changed for the settle time (longer if this user's pauses while typing are longer).
//! On such a root nothing is written into a file to announce an ask: its id stays in the
//! record, as with `--tag never`, because a tag written under an editor's unsaved typing makes
//! it stop its user with "changed on disk" or refuse its next save.

mod habit;

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::id::MarkerId;
use crate::scan::Marker;

#[cfg(test)]
pub use habit::unix_now;
pub use habit::{mode_line, reset, show, KeptHabit, ModeSwitch, HUMAN_PACE};

/// How long a person takes to type one character, to tell their pause from their typing: the
/// time between two saves of an ask is the pause before its new words plus their typing (the
/// editor saves its delay after the last keystroke each time, so that delay drops out).
pub const KEYSTROKE: Duration = Duration::from_millis(150);

/// True if `new` is `old` with more typed after it: everything before `old`'s last word (which
/// the save may have cut short) is there as it was, and more. A typo fixed in the middle is not.
pub fn grew(old: &str, new: &str) -> bool {
    let old = old.trim_end();
    let Some(stem) = old.rfind(char::is_whitespace).map(|i| &old[..i]) else { return false };
    new.len() > old.len() && new.starts_with(stem)
}

/// An ask seen changing from one save to the next: its user is typing it.
#[derive(Debug, Clone, Copy)]
pub struct Typed {
    /// The time between the two saves.
    pub gap: Duration,
    /// How many characters were added.
    pub added: usize,
    /// It grew (see [`grew`]).
    pub grew: bool,
    /// The ask it revises, if it was announced.
    pub revises: Option<MarkerId>,
    /// The first time this draft (without an id) was seen growing.
    pub first_growth: bool,
}

impl Typed {
    /// The user's pause before the new words: the time between the saves, less their typing.
    pub fn pause(&self) -> Duration {
        self.gap.saturating_sub(KEYSTROKE * self.added as u32)
    }
}

/// An untagged marker that may still change: on a root whose editor autosaves, a fresh ask (or
/// the revision of an ask announced before the habit was known) waits here until it is ready.
#[derive(Debug, Clone)]
pub struct Draft {
    /// The marker as the last save had it.
    pub marker: Marker,
    /// Set when the draft is the new text of an ask already announced: it keeps that id.
    pub revises: Option<MarkerId>,
    /// When its text last changed.
    changed_at: Instant,
    /// Its text changed from one save to another while it waited.
    changed: bool,
    /// It was seen growing (at most one piece of evidence an ask).
    grown: bool,
}

impl Draft {
    /// A marker first seen now.
    pub fn new(marker: Marker, revises: Option<MarkerId>, now: Instant) -> Draft {
        Draft { marker, revises, changed_at: now, changed: false, grown: false }
    }

    /// A fresh ask whose text never changed while it waited: saved whole.
    pub fn whole(&self) -> bool {
        self.revises.is_none() && !self.changed
    }
}

/// Which lines one save changed: the lines before `prefix` and the last `suffix` lines are the
/// same in the old and the new bytes.
#[derive(Debug, Clone, Copy)]
pub struct LineDiff {
    prefix: usize,
    old_lines: usize,
    new_lines: usize,
    suffix: usize,
}

impl LineDiff {
    /// The difference between two versions of a file, line by line (no diff algorithm: saves
    /// between two autosaves change one place).
    pub fn between(old: &[u8], new: &[u8]) -> LineDiff {
        let old_l: Vec<&[u8]> = old.split(|&b| b == b'\n').collect();
        let new_l: Vec<&[u8]> = new.split(|&b| b == b'\n').collect();
        let prefix = old_l.iter().zip(&new_l).take_while(|(a, b)| a == b).count();
        let max_suffix = old_l.len().min(new_l.len()) - prefix;
        let suffix = old_l
            .iter()
            .rev()
            .zip(new_l.iter().rev())
            .take(max_suffix)
            .take_while(|(a, b)| a == b)
            .count();
        LineDiff { prefix, old_lines: old_l.len(), new_lines: new_l.len(), suffix }
    }

    /// The new lines (1-based) this save wrote; empty when it changed nothing line-wise.
    pub fn edited(&self) -> RangeInclusive<usize> {
        self.prefix + 1..=self.new_lines - self.suffix
    }

    /// True if the save changed any of lines `first..=last` (1-based, new numbering).
    pub fn touches(&self, first: usize, last: usize) -> bool {
        let edited = self.edited();
        // An insertion between two lines: the edited range is empty but sits between them.
        if edited.is_empty() {
            return self.old_lines != self.new_lines
                && first <= self.prefix + 1
                && self.prefix < last;
        }
        first <= *edited.end() && *edited.start() <= last
    }

    /// Where old line `line` (1-based) is now: the same line before the change, shifted after
    /// it, and for a line the save rewrote, the line at the same place in the rewritten part.
    pub fn map(&self, line: usize) -> usize {
        if line <= self.prefix {
            line
        } else if line > self.old_lines - self.suffix {
            line + self.new_lines - self.old_lines
        } else {
            (line).min(self.new_lines - self.suffix).max(self.prefix + 1)
        }
    }
}

/// The drafts of every file, and their due times.
#[derive(Debug, Default)]
pub struct Drafts {
    files: HashMap<PathBuf, Vec<Draft>>,
}

impl Drafts {
    /// Takes one save of `path` into account: `candidates` are its markers that would be asks
    /// now (fresh ones, and revisions), `diff` what the save changed. Returns those ready, and
    /// those seen changing since the save before; keeps the others as drafts. A candidate is
    /// ready when it was a draft whose text this save left as it was while changing the file
    /// elsewhere (the user moved on); a new one, or one whose text changed, waits.
    pub fn update(
        &mut self,
        path: &Path,
        candidates: Vec<Draft>,
        diff: Option<LineDiff>,
        now: Instant,
    ) -> (Vec<Draft>, Vec<Typed>) {
        let mut before = self.files.remove(path).unwrap_or_default();
        let (mut ready, mut waiting, mut typed) = (Vec::new(), Vec::new(), Vec::new());
        for mut c in candidates {
            // At its place; else the same words moved (re-indented by an edit around them).
            let was = before.iter().position(|d| same_draft(d, &c, diff));
            let was = was.or_else(|| before.iter().position(|d| same_words(d, &c)));
            let Some(was) = was.map(|i| before.remove(i)) else {
                waiting.push(c); // new: it may be the first fragment of an ask being typed
                continue;
            };
            (c.changed, c.grown) = (was.changed, was.grown);
            if was.marker.text != c.marker.text {
                let (old, new) = (&was.marker.text, &c.marker.text);
                let grew = grew(old, new);
                typed.push(Typed {
                    gap: now.saturating_duration_since(was.changed_at),
                    added: new.chars().count().saturating_sub(old.chars().count()),
                    grew,
                    revises: c.revises,
                    first_growth: grew && !was.grown,
                });
                (c.changed, c.grown) = (true, was.grown || grew);
                waiting.push(c); // still being typed
            } else if diff.is_some_and(|d| !d.touches(c.marker.line, c.marker.end_line)) {
                c.changed_at = was.changed_at;
                ready.push(c); // the user moved on
            } else {
                c.changed_at = was.changed_at; // the same words (a space after them, say)
                waiting.push(c);
            }
        }
        if !waiting.is_empty() {
            self.files.insert(path.to_path_buf(), waiting);
        }
        (ready, typed)
    }

    /// The words of the drafts of `path` that wait (the user typed them).
    pub fn waiting_words(&self, path: &Path) -> Vec<&str> {
        self.files
            .get(path)
            .map_or_else(Vec::new, |ds| ds.iter().map(|d| d.marker.text.as_str()).collect())
    }

    /// The first time a draft falls due, with `settle` as its settle time.
    pub fn next_due(&self, settle: Duration) -> Option<Instant> {
        self.files.values().flatten().map(|d| d.changed_at + settle).min()
    }

    /// The files with a draft due at `now`.
    pub fn due_files(&self, now: Instant, settle: Duration) -> Vec<PathBuf> {
        let due = |ds: &Vec<Draft>| ds.iter().any(|d| d.changed_at + settle <= now);
        self.files.iter().filter(|(_, ds)| due(ds)).map(|(p, _)| p.clone()).collect()
    }

    /// The drafts of `path` due at `now` (its bytes have not changed since they were seen).
    pub fn take_due(&mut self, path: &Path, now: Instant, settle: Duration) -> Vec<Draft> {
        let Some(drafts) = self.files.get_mut(path) else { return Vec::new() };
        let (due, rest): (Vec<Draft>, Vec<Draft>) =
            drafts.drain(..).partition(|d| d.changed_at + settle <= now);
        *drafts = rest;
        if drafts.is_empty() {
            self.files.remove(path);
        }
        due
    }

    /// Forgets the drafts of `path` (it is gone, or unreadable).
    pub fn forget(&mut self, path: &Path) {
        self.files.remove(path);
    }
}

/// True if candidate `c` is draft `d` of the save before: the revision of the same ask, or an
/// ask at the same place (its old line mapped through the save's change).
fn same_draft(d: &Draft, c: &Draft, diff: Option<LineDiff>) -> bool {
    if d.revises.is_some() || c.revises.is_some() {
        return d.revises == c.revises;
    }
    let line = diff.map_or(d.marker.line, |diff| diff.map(d.marker.line));
    line == c.marker.line
}

/// True if candidate `c` holds the words of draft `d` (a fresh ask both), wherever it is.
fn same_words(d: &Draft, c: &Draft) -> bool {
    d.revises.is_none() && c.revises.is_none() && d.marker.text == c.marker.text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_diff_maps_lines_around_one_edit() {
        let old = b"a\nb\nc\nd\n";
        let new = b"a\nB!\nc\nd\n";
        let d = LineDiff::between(old, new);
        assert_eq!(d.edited(), 2..=2);
        assert_eq!((d.map(1), d.map(2), d.map(3)), (1, 2, 3));
        assert!(d.touches(2, 2) && !d.touches(3, 4) && !d.touches(1, 1));
        let inserted = LineDiff::between(old, b"a\nx\ny\nb\nc\nd\n");
        assert_eq!(inserted.edited(), 2..=3);
        assert_eq!((inserted.map(1), inserted.map(2), inserted.map(4)), (1, 4, 6));
        let appended = LineDiff::between(old, b"a\nb\nc\nd\ne\n");
        assert!(!appended.touches(1, 4), "{appended:?}");
    }

    #[test]
    fn an_ask_grows_when_words_come_after_it() {
        assert!(grew("@claude please refac", "@claude please refactor f1"));
        assert!(grew("@claude explain g", "@claude explain g and h"));
        assert!(!grew("@claude add tets for f", "@claude add tests for f"), "a typo fixed");
        assert!(!grew("@claude add tests for f", "@claude add tests"), "cut short");
    }
}
