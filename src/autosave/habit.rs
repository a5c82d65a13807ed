//! What a root's editor does on its own, learned from repeated evidence and kept in the state
//! directory (`<state dir>/<key of the root>.editor.json`, which names its root): [`Habit`].
//!
//! One piece of evidence is an ask seen growing from one save to the next at a person's pace —
//! the editor saved its first words while its user typed the rest. A typo fixed right after a
//! save is no such piece (the words before it changed), nor is a program's storm of saves (too
//! quick, or many asks at once). The root is taken to autosave once [`EVIDENCE_TO_SWITCH`] asks
//! gave a piece; the evidence fades — it is forgotten after [`EVIDENCE_LIFE`], and each ask
//! saved whole on an autosave root takes one piece back — and with none left the root saves
//! deliberately again. The state file is read again when it changes: deleting it (or
//! `filewatch-mcp autosave reset`) resets the running server too.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// The longest an ask waits for its text to settle, however slowly its user types.
pub const MAX_SETTLE: Duration = Duration::from_secs(15);

/// How many asks must be seen growing from save to save before a root is taken to autosave:
/// one or two quick fixes after a save never switch it.
pub const EVIDENCE_TO_SWITCH: usize = 3;

/// The most pieces of evidence kept: how many asks saved whole in a row take a root that
/// autosaves back to deliberate saves.
const EVIDENCE_KEPT: usize = 5;

/// Evidence older than this is forgotten (seconds): a root whose editor stopped autosaving
/// goes back to deliberate saves, one that never switched forgets its quick fixes.
pub const EVIDENCE_LIFE: u64 = 7 * 24 * 3600;

/// Two pieces of evidence this close (seconds) are one: a person types one ask at a time, a
/// program rewriting many asks at once is one save.
const EVIDENCE_SPACING: u64 = 5;

/// A save this soon after the one before it is a program's (or one save written in steps),
/// never a person's typing: it is no evidence, and no typing pause.
pub const HUMAN_PACE: Duration = Duration::from_millis(400);

/// Pauses longer than this between two saves of a changing ask are not typing pauses (the user
/// left and came back): they do not stretch the settle time.
const TYPING_GAP_LIMIT: Duration = Duration::from_secs(12);

/// How many of the user's latest typing pauses the settle time follows.
const PAUSES_KEPT: usize = 8;

/// What this root's editor does on its own, learned from its saves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Habit {
    /// The root this is of (the file's name is a hash of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// The editor saves while its user types: asks wait for their text to settle.
    pub autosave: bool,
    /// When asks were seen growing from save to save (Unix seconds), oldest first.
    #[serde(default)]
    pub evidence: Vec<u64>,
    /// The user's latest pauses while typing an ask (milliseconds), oldest first.
    #[serde(default)]
    pub pauses_ms: Vec<u64>,
    /// When the root last switched (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switched: Option<u64>,
}

impl Habit {
    /// How long an ask's text must stay as it is before it is ready: `settle`, or one and a
    /// half of the longest of the user's latest typing pauses, at most [`MAX_SETTLE`].
    pub fn ask_settle(&self, settle: Duration) -> Duration {
        settle.max(self.typing_pause().mul_f32(1.5)).min(MAX_SETTLE.max(settle))
    }

    /// The longest of the user's latest typing pauses.
    pub fn typing_pause(&self) -> Duration {
        Duration::from_millis(self.pauses_ms.iter().copied().max().unwrap_or(0))
    }

    /// Takes note of a pause while typing an ask; true if kept.
    pub(super) fn saw_pause(&mut self, pause: Duration) -> bool {
        if pause > TYPING_GAP_LIMIT {
            return false;
        }
        self.pauses_ms.push(pause.as_millis() as u64);
        let extra = self.pauses_ms.len().saturating_sub(PAUSES_KEPT);
        self.pauses_ms.drain(..extra);
        true
    }

    /// Takes note of an ask seen growing from save to save at `now` (Unix seconds); true if it
    /// is a piece of evidence (not one a moment after the last).
    pub(super) fn saw_growth(&mut self, now: u64) -> bool {
        if self.evidence.last().is_some_and(|&t| now.saturating_sub(t) < EVIDENCE_SPACING) {
            return false;
        }
        self.evidence.push(now);
        let extra = self.evidence.len().saturating_sub(EVIDENCE_KEPT);
        self.evidence.drain(..extra);
        if !self.autosave && self.evidence.len() >= EVIDENCE_TO_SWITCH {
            self.autosave = true;
            self.switched = Some(now);
        }
        true
    }

    /// Takes note of an ask saved whole on a root that autosaves: one piece of evidence fewer.
    /// True if that changed anything.
    pub(super) fn saw_whole(&mut self, now: u64) -> bool {
        if !self.autosave || self.evidence.is_empty() {
            return false;
        }
        self.evidence.remove(0);
        self.fade(now);
        true
    }

    /// Forgets the evidence older than [`EVIDENCE_LIFE`]; with none left, the root saves
    /// deliberately again. (A file kept before evidence was counted has none: one typo fix
    /// taught it.)
    pub(super) fn fade(&mut self, now: u64) {
        self.evidence.retain(|&t| now.saturating_sub(t) < EVIDENCE_LIFE);
        if self.autosave && self.evidence.is_empty() {
            self.autosave = false;
            self.pauses_ms.clear();
            self.switched = Some(now);
        }
    }

    /// The mode and its evidence, as one line (`autosave: …`, `deliberate saves: …`).
    pub fn describe(&self, now: u64) -> String {
        let pieces = self.evidence.len();
        let latest = self.evidence.last().map(|&t| ago(now, t)).unwrap_or_default();
        let since = self.switched.map(|t| format!(" since {}", ago(now, t))).unwrap_or_default();
        if self.autosave {
            let pause = self.typing_pause().as_secs_f32();
            let settle = self.ask_settle(Duration::from_secs(5)).as_secs_f32();
            format!(
                "autosave{since}: {pieces} ask(s) seen growing from save to save, the latest \
                 {latest}; typing pause {pause:.1} s, so an ask is a draft until its text has \
                 stood unchanged for the draft wait ({settle:.1} s with --settle 5s), and no tag \
                 is written"
            )
        } else if pieces > 0 {
            format!(
                "deliberate saves{since}: {pieces} ask(s) of the {EVIDENCE_TO_SWITCH} that \
                 switch to autosave seen growing from save to save, the latest {latest}"
            )
        } else {
            format!("deliberate saves{since}: no ask seen growing from save to save")
        }
    }
}

/// `now` as Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// How long ago `then` was: `12 s ago`, `5 min ago`, `3 h ago`, `2 days ago`.
fn ago(now: u64, then: u64) -> String {
    let s = now.saturating_sub(then);
    match s {
        0..=119 => format!("{s} s ago"),
        120..=7199 => format!("{} min ago", s / 60),
        7200..=172_799 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// The file's identity and version as last read or written: a change to it (another process
/// wrote it, the user deleted it) is read again.
type Stamp = Option<(SystemTime, u64, Option<(u64, u64)>)>;

fn stamp_of(file: &Path) -> Stamp {
    let meta = std::fs::symlink_metadata(file).ok()?;
    Some((meta.modified().ok()?, meta.len(), crate::sys::path_file_id(file).ok()?))
}

/// A root's switch between deliberate saves and autosave, as said to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeSwitch {
    /// The root.
    pub root: PathBuf,
    /// True: the root is now taken to autosave; false: to save deliberately.
    pub autosave: bool,
    /// What changed and why, with the root's path.
    pub line: String,
}

/// A [`Habit`] with the file it is kept in (none: this run only).
#[derive(Debug, Default)]
pub struct KeptHabit {
    pub habit: Habit,
    root: PathBuf,
    file: Option<PathBuf>,
    /// The file as last read or written.
    seen: Stamp,
}

impl KeptHabit {
    /// The habit learned on `root` in earlier runs, from `<state dir>/<hash of root>.editor.json`;
    /// a missing, unreadable or malformed file is a habit not learned yet.
    pub fn load(state_dir: Option<&Path>, root: &Path) -> KeptHabit {
        let file = state_dir.map(|dir| crate::state::Place::of_root(dir, root).file("editor.json"));
        let mut kept = KeptHabit { root: root.to_path_buf(), file, ..KeptHabit::default() };
        kept.read();
        kept
    }

    /// (Re)reads the file: what is there now, faded to `now`.
    fn read(&mut self) {
        let Some(file) = &self.file else { return };
        self.seen = stamp_of(file);
        // Read with the care a user's file gets: no symlink followed, no FIFO, size-limited.
        self.habit = crate::fsio::read_source(file)
            .ok()
            .and_then(|s| serde_json::from_slice(&s.bytes).ok())
            .unwrap_or_default();
        self.habit.root = Some(self.root.clone());
        let was = self.habit.autosave;
        self.habit.fade(unix_now());
        if was && !self.habit.autosave {
            let root = self.root.display();
            tracing::info!("{root}: deliberate saves again: no evidence of autosave is left");
        }
    }

    /// Reads the file again if another process changed it since (`autosave reset`, the user
    /// deleting it): the switch, if that switched the root.
    pub fn refresh(&mut self) -> Option<ModeSwitch> {
        let file = self.file.as_ref()?;
        if stamp_of(file) == self.seen {
            return None;
        }
        let was = self.habit.autosave;
        self.read();
        let why = "its state file was changed or removed (`filewatch-mcp autosave reset`)";
        self.switch(was, why)
    }

    /// Takes note of an ask seen growing from save to save: the switch, if it switched.
    pub fn saw_growth(&mut self) -> Option<ModeSwitch> {
        let was = self.habit.autosave;
        if !self.habit.saw_growth(unix_now()) {
            return None;
        }
        self.keep();
        self.switch(was, "asks were seen growing from save to save")
    }

    /// Takes note of an ask saved whole: the switch, if it switched.
    pub fn saw_whole(&mut self) -> Option<ModeSwitch> {
        let was = self.habit.autosave;
        if !self.habit.saw_whole(unix_now()) {
            return None;
        }
        self.keep();
        self.switch(was, "asks are saved whole")
    }

    /// Takes note of a pause while typing an ask.
    pub fn saw_pause(&mut self, pause: Duration) {
        if self.habit.saw_pause(pause) {
            self.keep();
        }
    }

    /// The switch from `was`, said in the log (info: `watch`'s stderr, the server's log file).
    fn switch(&self, was: bool, why: &str) -> Option<ModeSwitch> {
        if self.habit.autosave == was {
            return None;
        }
        let root = self.root.display();
        let line = if self.habit.autosave {
            format!(
                "{root}: autosave: {why} ({} asks): asks now wait for their text to settle and \
                 no tag is written (`filewatch-mcp autosave reset --root {root}` undoes it)",
                self.habit.evidence.len()
            )
        } else {
            format!("{root}: deliberate saves again: {why}; each save of an ask sends it")
        };
        tracing::info!("{line}");
        Some(ModeSwitch { root: self.root.clone(), autosave: self.habit.autosave, line })
    }

    /// Writes the habit down (atomically; a failure only costs the next session the lesson).
    fn keep(&mut self) {
        let Some(file) = &self.file else { return };
        let dir = file.parent().unwrap_or(Path::new("."));
        let written = crate::state::make_private_dir(dir)
            .and_then(|()| tempfile::NamedTempFile::new_in(dir))
            .and_then(|mut tmp| {
                serde_json::to_writer_pretty(&mut tmp, &self.habit)?;
                tmp.persist(file).map_err(|e| e.error)?;
                Ok(())
            });
        match written {
            Ok(()) => self.seen = stamp_of(file),
            Err(e) => tracing::warn!(
                "{}: cannot keep what was learned about the editor: {e}",
                file.display()
            ),
        }
    }
}

/// The line `filewatch-mcp autosave show` and `doctor` print for `root` (canonical): its mode
/// and the evidence for it, as kept in `state_dir`.
pub fn mode_line(state_dir: Option<&Path>, root: &Path) -> String {
    KeptHabit::load(state_dir, root).habit.describe(unix_now())
}

/// `filewatch-mcp autosave show`: `<root>: <its mode line>`.
pub fn show(root: &Path) -> io::Result<String> {
    let root = canonical(root)?;
    let line = mode_line(crate::state::state_dir().as_deref(), &root);
    Ok(format!("{}: {line}", root.display()))
}

/// `filewatch-mcp autosave reset`: forgets what was learned of `root`'s editor — its state
/// file is removed, and a server running on the root reads that at its next save. Says what
/// was forgotten.
pub fn reset(root: &Path) -> io::Result<String> {
    let root = canonical(root)?;
    let dir = crate::state::state_dir().ok_or_else(crate::state::no_state_dir)?;
    let file = crate::state::Place::of_root(&dir, &root).file("editor.json");
    let was = mode_line(Some(&dir), &root);
    match std::fs::remove_file(&file) {
        Ok(()) => Ok(format!(
            "{}: forgotten (it was {was}); saves are deliberate again, in a running server from \
             its next save",
            root.display()
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Ok(format!("{}: nothing learned; saves are deliberate", root.display()))
        }
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: cannot remove: {e}", file.display()))),
    }
}

/// The root as the server names it (canonical), or an error naming it.
fn canonical(root: &Path) -> io::Result<PathBuf> {
    root.canonicalize().map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", root.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settle_time_follows_the_users_latest_pauses() {
        let mut habit = Habit::default();
        let settle = Duration::from_secs(5);
        assert_eq!(habit.ask_settle(settle), settle);
        assert!(habit.saw_pause(Duration::from_secs(4)));
        assert_eq!(habit.ask_settle(settle), Duration::from_secs(6));
        assert!(!habit.saw_pause(Duration::from_secs(30)), "not a typing pause");
        // The pause follows the latest ones: it shrinks as shorter pauses replace it.
        for _ in 0..PAUSES_KEPT {
            habit.saw_pause(Duration::from_secs(1));
        }
        assert_eq!(habit.typing_pause(), Duration::from_secs(1));
        habit.pauses_ms = vec![60_000];
        assert_eq!(habit.ask_settle(settle), MAX_SETTLE);
    }

    /// One or two asks growing never switch a root; a third does, pieces a moment apart count
    /// once, and the evidence fades: by age, and by asks saved whole.
    #[test]
    fn autosave_needs_repeated_evidence_and_fades() {
        let mut habit = Habit::default();
        let t = 1_000_000;
        assert!(habit.saw_growth(t));
        assert!(!habit.saw_growth(t + 1), "a moment after: the same save storm");
        assert!(habit.saw_growth(t + 60));
        assert!(!habit.autosave, "two quick fixes switched the root");
        assert!(habit.saw_growth(t + 120));
        assert!(habit.autosave);
        assert_eq!(habit.switched, Some(t + 120));
        for _ in 0..3 {
            assert!(habit.saw_whole(t + 200));
        }
        assert!(!habit.autosave, "three asks saved whole leave no evidence");
        // Age: a week after the last piece, nothing is left.
        let mut habit =
            Habit { autosave: true, evidence: vec![t, t + 10, t + 20], ..Habit::default() };
        habit.fade(t + 20 + EVIDENCE_LIFE);
        assert!(!habit.autosave && habit.evidence.is_empty());
        // A file kept before evidence was counted: taught by one typo fix; no more.
        let mut old: Habit =
            serde_json::from_str(r#"{"autosave":true,"typing_gap_ms":4400}"#).unwrap();
        old.fade(t);
        assert!(!old.autosave);
    }
}
