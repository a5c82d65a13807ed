//! Editors that save while their user types (VS Code `files.autoSave`, Emacs
//! `auto-save-visited-mode`, JetBrains on idle, vim on `CursorHold`): what their saves look like,
//! and when an ask typed into one is ready.
//!
//! A save is a "send" only when the user presses save. An autosaving editor writes fragments:
//! `@claude please`, then `@claude please refactor f1`, then the whole ask. Nothing in the file
//! system tells a deliberate save from an automatic one, but their sequence does: an ask whose
//! text changes from one save to the next is still being typed. So a root is taken to save
//! deliberately until an ask is seen changing under the user's hands right after it was
//! announced; from then on ([`Habit::autosave`], kept in the state directory for the next
//! session) an untagged marker is a [`Draft`] until it is ready — when a save changes the file
//! elsewhere while the ask's text stays as it was (the user moved on), or when its text has
//! not changed for the settle time (longer if this user's pauses while typing are longer).
//! On such a root nothing is written into a file to announce an ask: its id stays in the
//! record, as with `--tag never`, because a tag written under an editor's unsaved typing makes
//! it stop its user with "changed on disk" or refuse its next save.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::id::MarkerId;
use crate::scan::Marker;

/// The longest an ask waits for its text to settle, however slowly its user types.
pub const MAX_SETTLE: Duration = Duration::from_secs(15);

/// Pauses longer than this between two saves of a changing ask are not typing pauses (the user
/// left and came back): they do not stretch the settle time.
const TYPING_GAP_LIMIT: Duration = Duration::from_secs(12);

/// What this root's editor does on its own, learned from its saves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Habit {
    /// The editor saves while its user types: an ask was seen changing from save to save.
    pub autosave: bool,
    /// The longest pause seen between two saves of an ask still being typed, in milliseconds.
    #[serde(default)]
    pub typing_gap_ms: u64,
}

impl Habit {
    /// How long an ask's text must stay as it is before it is ready: `settle`, or one and a
    /// half of the longest typing pause seen on this root, at most [`MAX_SETTLE`].
    pub fn ask_settle(&self, settle: Duration) -> Duration {
        let gap = Duration::from_millis(self.typing_gap_ms);
        settle.max(gap.mul_f32(1.5)).min(MAX_SETTLE.max(settle))
    }

    /// Takes note of a pause between two saves of an ask still being typed; true if the habit
    /// changed (and should be kept).
    fn saw_typing_gap(&mut self, gap: Duration) -> bool {
        let ms = gap.as_millis() as u64;
        if gap > TYPING_GAP_LIMIT || ms <= self.typing_gap_ms {
            return false;
        }
        self.typing_gap_ms = ms;
        true
    }
}

/// A [`Habit`] with the file it is kept in (none: this run only).
#[derive(Debug, Default)]
pub struct KeptHabit {
    pub habit: Habit,
    file: Option<PathBuf>,
}

impl KeptHabit {
    /// The habit learned on `root` in earlier runs, from `<state dir>/<hash of root>.editor.json`;
    /// a missing, unreadable or malformed file is a habit not learned yet.
    pub fn load(state_dir: Option<&Path>, root: &Path) -> KeptHabit {
        let Some(dir) = state_dir else { return KeptHabit::default() };
        let file = crate::state::Place::of_root(dir, root).file("editor.json");
        // Read with the care a user's file gets: no symlink followed, no FIFO, size-limited.
        let habit = crate::fsio::read_source(&file)
            .ok()
            .and_then(|s| serde_json::from_slice(&s.bytes).ok())
            .unwrap_or_default();
        KeptHabit { habit, file: Some(file) }
    }

    /// Learns that the editor autosaves; true if that is news.
    pub fn learn_autosave(&mut self) -> bool {
        if self.habit.autosave {
            return false;
        }
        self.habit.autosave = true;
        tracing::info!(
            "this editor saves while its user types: asks now wait for their text to settle"
        );
        self.keep();
        true
    }

    fn saw_typing_gap(&mut self, gap: Duration) {
        if self.habit.saw_typing_gap(gap) {
            self.keep();
        }
    }

    /// Writes the habit down (atomically; a failure only costs the next session the lesson).
    fn keep(&self) {
        let Some(file) = &self.file else { return };
        let dir = file.parent().unwrap_or(Path::new("."));
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| tempfile::NamedTempFile::new_in(dir))
            .and_then(|mut tmp| {
                serde_json::to_writer(&mut tmp, &self.habit)?;
                tmp.persist(file).map_err(|e| e.error)?;
                Ok(())
            });
        if let Err(e) = written {
            tracing::warn!(
                "{}: cannot keep what was learned about the editor: {e}",
                file.display()
            );
        }
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
}

impl Draft {
    /// A marker first seen now.
    pub fn new(marker: Marker, revises: Option<MarkerId>, now: Instant) -> Draft {
        Draft { marker, revises, changed_at: now }
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
    /// now (fresh ones, and revisions), `diff` what the save changed. Returns those ready;
    /// keeps the others as drafts. A candidate is ready when it was a draft whose text this
    /// save left as it was while changing the file elsewhere (the user moved on); a new one, or
    /// one whose text changed, waits (and its pause since the last change is learned).
    pub fn update(
        &mut self,
        path: &Path,
        candidates: Vec<Draft>,
        diff: Option<LineDiff>,
        now: Instant,
        habit: &mut KeptHabit,
    ) -> Vec<Draft> {
        let mut before = self.files.remove(path).unwrap_or_default();
        let mut ready = Vec::new();
        let mut waiting = Vec::new();
        for mut c in candidates {
            // At its place; else the same words moved (re-indented by an edit around them).
            let was = before.iter().position(|d| same_draft(d, &c, diff));
            let was = was.or_else(|| before.iter().position(|d| same_words(d, &c)));
            let Some(was) = was.map(|i| before.remove(i)) else {
                waiting.push(c); // new: it may be the first fragment of an ask being typed
                continue;
            };
            if was.marker.text != c.marker.text {
                habit.saw_typing_gap(now.saturating_duration_since(was.changed_at));
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
        ready
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
    fn the_settle_time_follows_the_users_pauses() {
        let mut habit = Habit::default();
        let settle = Duration::from_secs(5);
        assert_eq!(habit.ask_settle(settle), settle);
        assert!(habit.saw_typing_gap(Duration::from_secs(4)));
        assert_eq!(habit.ask_settle(settle), Duration::from_secs(6));
        assert!(!habit.saw_typing_gap(Duration::from_secs(30)), "not a typing pause");
        habit.typing_gap_ms = 60_000;
        assert_eq!(habit.ask_settle(settle), MAX_SETTLE);
    }
}
