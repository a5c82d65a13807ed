//! What Claude's own file tools wrote, so that a marker Claude writes (a test whose header copies
//! the ask, a follow-up `# @claude …` note) is never announced as the user's ask.
//!
//! Claude Code runs `filewatch-mcp hook` around each `Write`, `Edit`, `MultiEdit` and
//! `NotebookEdit` call (the plugin's `hooks/hooks.json`, or the user's `.claude/settings.json`):
//! `PreToolUse` before the write, `PostToolUse` after it, the call as JSON on stdin. The hook
//! ([`record_hook`]) works out the lines the call adds to the file, each at its place
//! ([`crate::lines::place_keys`]), and appends them to a small record in the user's state
//! directory: `claude-writes/<hash of the file's canonical path>.<day>`. `PreToolUse` (from the
//! tool's input and the file as it is) only says what the tool *proposes*: the user may deny
//! it. `PostToolUse` (the file as the tool left it, the diff Claude Code reports) says what it
//! wrote. The live pipeline reads the record of a file whose save holds an untagged marker
//! ([`ClaudeWrites::written`]): a marker at a place Claude's tool wrote is not the user's; one
//! at a place only proposed waits a moment for its `PostToolUse` (the write comes before it),
//! and without one is the user's. No socket and no lock: the record is written whichever
//! server owns the root (or none yet), and a hook never waits on anything. A place stays
//! Claude's for [`DAYS`] days; a marker seen as Claude's stays quiet for the rest of the run.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::asks;
use crate::lines::{line_around, line_key, place_keys};
use crate::state::{self, Place};

/// How many days a line Claude wrote counts as Claude's (one record file per day).
pub const DAYS: u64 = 7;

/// The most of a hook's input that is read: a `Write` carries the whole file.
const MAX_INPUT: u64 = 64 * 1024 * 1024;

/// A day's record of one file is not grown past this (nor read past it).
const MAX_RECORD: u64 = 8 * 1024 * 1024;

/// The directory of the records, under the state directory.
const DIR: &str = "claude-writes";

/// What went wrong in a hook; it is logged (at debug level: a hook's stderr is Claude Code's
/// business) and the hook still exits 0.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The input is not the JSON of a tool call.
    #[error("the hook's input is not a tool call's JSON: {0}")]
    Input(String),
    /// There is no state directory to keep the record in.
    #[error("no state directory (FILEWATCH_STATE_DIR, XDG_STATE_HOME, HOME, LOCALAPPDATA)")]
    NoStateDir,
    /// The record could not be written.
    #[error("{path}: {source}")]
    Record {
        /// The record file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// `filewatch-mcp hook`: reads one Claude Code hook input (`PreToolUse` or `PostToolUse` of a
/// file tool) from `input` and records the lines the call adds to its file. Never blocks on
/// anything but its input; writes nothing to stdout.
pub fn record_hook(input: impl Read) -> Result<(), HookError> {
    let mut bytes = Vec::new();
    input.take(MAX_INPUT).read_to_end(&mut bytes).map_err(|e| HookError::Input(e.to_string()))?;
    let call: Value =
        serde_json::from_slice(&bytes).map_err(|e| HookError::Input(e.to_string()))?;
    record_call(&call)
}

/// Records the lines a file tool's call (`PreToolUse` or `PostToolUse` hook input) adds to its
/// file; any other call records nothing.
pub fn record_call(call: &Value) -> Result<(), HookError> {
    let file_tool = ["Write", "Edit", "MultiEdit", "NotebookEdit"];
    if !file_tool.iter().any(|t| call["tool_name"] == *t) {
        return Ok(());
    }
    let Some(path) = target(call) else { return Ok(()) };
    let Some(entry) = entry(call, &path) else { return Ok(()) };
    let dir = state::state_dir().ok_or(HookError::NoStateDir)?.join(DIR);
    Records { dir }.append(&path, &entry)
}

/// One call's line of a record: `pre ID KEY…` (the places a `PreToolUse` proposes to write)
/// or `post ID KEY…` (those its `PostToolUse` says were written), ID the call's `tool_use_id`;
/// `None` if the call adds no line.
fn entry(call: &Value, path: &Path) -> Option<String> {
    let kind = match call["hook_event_name"].as_str() {
        Some("PreToolUse") => "pre",
        Some("PostToolUse") => "post",
        _ => return None,
    };
    let places = added_places(call, path);
    if places.is_empty() {
        return None;
    }
    let id = call["tool_use_id"].as_str().filter(|id| is_word(id)).unwrap_or("-");
    let keys: String = places.iter().map(|k| format!(" {k:016x}")).collect();
    Some(format!("{kind} {id}{keys}\n"))
}

/// True for a non-empty word of letters, digits, `_` and `-` (what a `tool_use_id` is).
fn is_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
}

/// The places ([`place_keys`]) of the lines the call adds to the file: in the file as the tool
/// will leave it (`PreToolUse`), or as it left it (`PostToolUse`: the file read now).
fn added_places(call: &Value, path: &Path) -> HashSet<u64> {
    let added = added_lines(call, path);
    if added.is_empty() {
        return HashSet::new();
    }
    let text = match call["hook_event_name"].as_str() {
        Some("PreToolUse") => proposed_text(call, path),
        _ => read_text(path),
    };
    let Some(text) = text else { return HashSet::new() };
    let src = text.as_bytes();
    let mut places = HashSet::new();
    let mut start = 0;
    while start <= src.len() {
        let line = line_around(src, start..start);
        if added.contains(&line_key(&src[line.clone()])) {
            places.extend(place_keys(src, line.clone()));
        }
        start = line.end + 1;
    }
    places
}

/// The file at `path` as text, if it is a regular file (not following a symlink, not waiting
/// on a FIFO: the path is canonical already).
fn read_text(path: &Path) -> Option<String> {
    let f = crate::sys::open_read(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = Vec::new();
    f.take(MAX_INPUT).read_to_end(&mut text).ok()?;
    Some(String::from_utf8_lossy(&text).into_owned())
}

/// The file as a `PreToolUse`'s tool will leave it, if its input tells: a `Write`'s content,
/// the file now after an `Edit`'s or `MultiEdit`'s edits.
fn proposed_text(call: &Value, path: &Path) -> Option<String> {
    let input = &call["tool_input"];
    let now = read_text(path);
    let edits = match call["tool_name"].as_str() {
        Some("Write") => return input["content"].as_str().map(str::to_string),
        Some("Edit") => vec![input.clone()],
        Some("MultiEdit") => input["edits"].as_array().cloned().unwrap_or_default(),
        _ => return None,
    };
    apply_edits(now.as_deref().unwrap_or(""), &edits, &mut Vec::new())
}

/// The file the call writes, absolute and canonical (as the watcher names it), made from the
/// call's `cwd` if relative; a file not made yet is named from its nearest existing directory.
fn target(call: &Value) -> Option<PathBuf> {
    let input = &call["tool_input"];
    let path = input["file_path"].as_str().or_else(|| input["notebook_path"].as_str())?;
    let path = Path::new(path);
    let path = match (path.is_absolute(), call["cwd"].as_str()) {
        (true, _) => path.to_path_buf(),
        (false, Some(cwd)) => Path::new(cwd).join(path),
        (false, None) => return None,
    };
    let mut missing = Vec::new();
    let mut existing = path.as_path();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return Some(missing.iter().rev().fold(real, |p, name| p.join(name)));
        }
        missing.push(existing.file_name()?.to_os_string());
        existing = existing.parent()?;
    }
}

/// The lines the call adds to the file at `path`, as keys, blank lines left out (no marker is
/// blank). `PreToolUse`: the file as the tool will leave it, less the lines it holds now (a
/// user's ask already in the file stays the user's). `PostToolUse`: the `+` lines of the diff
/// Claude Code reports, or the whole new text less the old one.
fn added_lines(call: &Value, path: &Path) -> HashSet<u64> {
    let input = &call["tool_input"];
    let text_of = |v: &Value| v.as_str().map(str::to_string);
    let mut lines: Vec<String> = Vec::new();
    match call["hook_event_name"].as_str() {
        Some("PreToolUse") => {
            let now = read_text(path);
            let before: HashSet<u64> = now.iter().flat_map(|t| t.lines()).map(key).collect();
            let after = match call["tool_name"].as_str() {
                Some("Write") => text_of(&input["content"]),
                Some("Edit") => {
                    let edit = [input.clone()];
                    apply_edits(now.as_deref().unwrap_or(""), &edit, &mut lines)
                }
                Some("MultiEdit") => {
                    let edits = input["edits"].as_array().cloned().unwrap_or_default();
                    apply_edits(now.as_deref().unwrap_or(""), &edits, &mut lines)
                }
                _ => text_of(&input["new_source"]), // NotebookEdit: a cell's source
            };
            lines.extend(after.iter().flat_map(|t| t.lines()).map(str::to_string));
            lines.retain(|l| !before.contains(&key(l)));
        }
        Some("PostToolUse") => {
            let response = &call["tool_response"];
            let patch = response["structuredPatch"].as_array();
            for hunk in patch.into_iter().flatten() {
                let hunk_lines = hunk["lines"].as_array().into_iter().flatten();
                lines.extend(
                    hunk_lines.filter_map(|l| l.as_str()?.strip_prefix('+')).map(str::to_string),
                );
            }
            // A write with no diff (a new file, a diff that timed out), a notebook.
            let new = text_of(&response["content"]).or_else(|| text_of(&response["updated_file"]));
            let old = text_of(&response["originalFile"])
                .or_else(|| text_of(&response["original_file"]))
                .unwrap_or_default();
            if let (None, Some(new)) = (patch.filter(|p| !p.is_empty()), new) {
                let before: HashSet<u64> = old.lines().map(key).collect();
                lines.extend(new.lines().filter(|l| !before.contains(&key(l))).map(str::to_string));
            }
            if call["tool_name"] == "NotebookEdit" {
                lines.extend(
                    text_of(&response["new_source"])
                        .iter()
                        .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>()),
                );
            }
        }
        _ => {}
    }
    lines.iter().filter(|l| !l.trim().is_empty()).map(|l| key(l)).collect()
}

/// The key of a line of text.
fn key(line: &str) -> u64 {
    line_key(line.as_bytes())
}

/// `text` after the `Edit`/`MultiEdit` edits (`old_string` → `new_string`, once or with
/// `replace_all` everywhere), as Claude Code applies them. `None` if one does not apply as
/// given (Claude Code also matches quotes loosely): then every line of every `new_string` goes
/// to `fallback`, and the diff of `PostToolUse` tells the rest.
fn apply_edits(text: &str, edits: &[Value], fallback: &mut Vec<String>) -> Option<String> {
    let mut text = text.to_string();
    let mut applied = true;
    for edit in edits {
        let (Some(old), Some(new)) = (edit["old_string"].as_str(), edit["new_string"].as_str())
        else {
            continue;
        };
        fallback.extend(new.lines().map(str::to_string));
        if old.is_empty() {
            text = new.to_string(); // an Edit with no old_string makes the file
        } else if !text.contains(old) {
            applied = false;
        } else if edit["replace_all"].as_bool() == Some(true) {
            text = text.replace(old, new);
        } else {
            text = text.replacen(old, new, 1);
        }
    }
    if applied {
        fallback.clear();
    }
    applied.then_some(text)
}

/// The days since the Unix epoch.
fn today() -> u64 {
    asks::now() / 86_400
}

/// The record files in one directory.
struct Records {
    dir: PathBuf,
}

impl Records {
    /// The record of `path` for `day`: `<hash of the path>.<day>`.
    fn file(&self, path: &Path, day: u64) -> PathBuf {
        Place::of_root(&self.dir, path).file(&day.to_string())
    }

    /// Appends `entry` (one line: see [`entry`]) to today's record of `path`, in one write
    /// (records appended by two hooks at once do not interleave). The first record of a day
    /// sweeps out the records of days past.
    fn append(&self, path: &Path, entry: &str) -> Result<(), HookError> {
        let error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| HookError::Record { path, source }
        };
        let place = Place::of_root(&self.dir, path);
        place.make_dir().map_err(error(&self.dir))?;
        let record = self.file(path, today());
        let new = !record.exists();
        let mut file = crate::sys::open_append(&record).map_err(error(&record))?;
        let meta = file.metadata().map_err(error(&record))?;
        if !meta.is_file() {
            let e = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
            return Err(error(&record)(e));
        }
        if meta.len() >= MAX_RECORD {
            tracing::debug!("{}: full for today", record.display());
            return Ok(());
        }
        file.write_all(entry.as_bytes()).map_err(error(&record))?;
        if new {
            self.sweep();
        }
        Ok(())
    }

    /// Removes the records of days that no longer count.
    fn sweep(&self) {
        let oldest = today().saturating_sub(DAYS - 1);
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let day = name.to_str().and_then(|n| n.rsplit_once('.')).map(|(_, d)| d.parse::<u64>());
            if matches!(day, Some(Ok(d)) if d < oldest) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// The places recorded for `path` in the last [`DAYS`] days: written, and only proposed
    /// (a `PreToolUse` whose `PostToolUse` has not come, or never will). Only regular files
    /// are read (a FIFO or a symlink planted there is not), at most [`MAX_RECORD`] of each.
    fn written(&self, path: &Path) -> Written {
        let mut proposals: Vec<(String, Vec<u64>)> = Vec::new();
        let (mut written, mut done) = (HashSet::new(), HashSet::new());
        let today = today();
        for day in today.saturating_sub(DAYS - 1)..=today {
            let Ok(file) = state::open_existing(&self.file(path, day)) else { continue };
            let mut text = Vec::new();
            if file.take(MAX_RECORD).read_to_end(&mut text).is_err() {
                continue;
            }
            // A line being appended right now may be cut short: only whole lines count.
            let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            for line in String::from_utf8_lossy(&text[..whole]).lines() {
                let mut words = line.split(' ');
                let (Some(kind), Some(id)) = (words.next(), words.next()) else { continue };
                let keys = words.filter_map(|w| u64::from_str_radix(w, 16).ok()).collect();
                match kind {
                    "post" => {
                        written.extend(keys);
                        done.insert(id.to_string());
                    }
                    "pre" => proposals.push((id.to_string(), keys)),
                    _ => {} // an older record's bare line key: no place, no longer enough
                }
            }
        }
        let open = proposals.into_iter().filter(|(id, _)| id == "-" || !done.contains(id));
        Written { proposed: open.flat_map(|(_, keys)| keys).collect(), written }
    }
}

/// The places ([`place_keys`]) of the lines Claude's file tools added to a file.
#[derive(Debug, Default)]
pub struct Written {
    /// Written: a `PostToolUse` reported them.
    pub written: HashSet<u64>,
    /// Only proposed: a `PreToolUse` whose `PostToolUse` has not come (the write happens
    /// between the two), or never will (the user denied it, the tool failed).
    pub proposed: HashSet<u64>,
}

impl Written {
    /// Adds what `other` holds (the records of a path the file was renamed from).
    pub fn and(mut self, other: Written) -> Written {
        self.written.extend(other.written);
        self.proposed.extend(other.proposed);
        self
    }
}

/// The live pipeline's view of the records: which lines Claude's file tools added to a file.
pub struct ClaudeWrites {
    records: Option<Records>,
}

impl ClaudeWrites {
    /// The records in the user's state directory (none without one).
    pub fn new() -> ClaudeWrites {
        ClaudeWrites { records: state::state_dir().map(|d| Records { dir: d.join(DIR) }) }
    }

    /// The records under the state directory `dir` (for tests).
    #[cfg(test)]
    pub(crate) fn in_dir(dir: &Path) -> ClaudeWrites {
        ClaudeWrites { records: Some(Records { dir: dir.join(DIR) }) }
    }

    /// Records the places `keys` as written by Claude into `path` by its call `id` (`post`) or
    /// proposed (`pre`): for tests, what the hook does.
    #[cfg(test)]
    pub(crate) fn record(&self, path: &Path, kind: &str, id: &str, keys: &[u64]) {
        let keys: String = keys.iter().map(|k| format!(" {k:016x}")).collect();
        self.records.as_ref().unwrap().append(path, &format!("{kind} {id}{keys}\n")).unwrap();
    }

    /// The places Claude's file tools wrote into `path` (canonical), or proposed to, in the
    /// last [`DAYS`] days.
    pub fn written(&self, path: &Path) -> Written {
        self.records.as_ref().map(|r| r.written(path)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn records(dir: &Path) -> Records {
        Records { dir: dir.join(DIR) }
    }

    fn hook(dir: &Path, call: &Value) {
        let path = target(call).unwrap();
        if let Some(entry) = entry(call, &path) {
            records(dir).append(&path, &entry).unwrap();
        }
    }

    /// The places of the lines of `text` that are one of `lines`.
    fn places(text: &str, lines: &[&str]) -> HashSet<u64> {
        let src = text.as_bytes();
        let mut places = HashSet::new();
        let mut start = 0;
        for line in text.split('\n') {
            if lines.contains(&line) {
                places.extend(place_keys(src, start..start + line.len()));
            }
            start += line.len() + 1;
        }
        places
    }

    fn pre(root: &Path, tool: &str, id: &str, input: Value) -> Value {
        json!({"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input,
               "cwd": root, "session_id": "s", "transcript_path": "", "tool_use_id": id})
    }

    /// `PreToolUse` of a Write and of an Edit records, as proposed, the places of the lines the
    /// call adds in the file as it will be, not those the file holds already (a user's ask
    /// saved a moment before the call stays the user's); nothing as written.
    #[test]
    fn pre_records_the_places_a_call_proposes() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let p = root.path().canonicalize().unwrap().join("a.py");
        std::fs::write(&p, "x = 1\n# @claude the user's\n").unwrap();
        let written = "x = 1\n# @claude the user's\n# @claude copied\n";
        hook(
            state.path(),
            &pre(root.path(), "Write", "t1", json!({"file_path": p, "content": written})),
        );
        let edit =
            json!({"file_path": p, "old_string": "x = 1", "new_string": "x = 2  # @claude inline"});
        hook(state.path(), &pre(root.path(), "Edit", "t2", edit));
        let got = records(state.path()).written(&p);
        assert!(got.written.is_empty());
        let mut want = places(written, &["# @claude copied"]);
        want.extend(places(
            "x = 2  # @claude inline\n# @claude the user's\n",
            &["x = 2  # @claude inline"],
        ));
        assert_eq!(got.proposed, want);
        // A new file in a directory not made yet, named by a relative path.
        let q = root.path().canonicalize().unwrap().join("new/dir/t.py");
        let input = json!({"file_path": "new/dir/t.py", "content": "# @claude t\n"});
        hook(state.path(), &pre(root.path(), "Write", "t3", input));
        assert_eq!(
            records(state.path()).written(&q).proposed,
            places("# @claude t\n", &["# @claude t"])
        );
    }

    /// `PostToolUse` records as written the places of the `+` lines of the diff Claude Code
    /// reports (and of a new file's whole text when there is no diff), in the file as the
    /// tool left it; its `PreToolUse` is no longer only proposed.
    #[test]
    fn post_records_the_places_written() {
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let p = root.path().canonicalize().unwrap().join("b.py");
        let edited = "keep\n# @claude new\n";
        std::fs::write(&p, "keep\n# @claude old\n").unwrap();
        let input =
            json!({"file_path": p, "old_string": "# @claude old", "new_string": "# @claude new"});
        hook(state.path(), &pre(root.path(), "Edit", "t1", input.clone()));
        assert_eq!(records(state.path()).written(&p).proposed, places(edited, &["# @claude new"]));
        std::fs::write(&p, edited).unwrap();
        let post = json!({
            "hook_event_name": "PostToolUse", "tool_name": "Edit", "cwd": root.path(),
            "tool_use_id": "t1", "tool_input": input,
            "tool_response": {"filePath": p, "structuredPatch": [
                {"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 2,
                 "lines": [" keep", "-# @claude old", "+# @claude new", "+"]}]},
        });
        hook(state.path(), &post);
        let got = records(state.path()).written(&p);
        assert_eq!(got.written, places(edited, &["# @claude new"]));
        assert!(got.proposed.is_empty(), "still proposed after its PostToolUse");
        let whole = "# @claude whole\n";
        std::fs::write(&p, whole).unwrap();
        let write = json!({
            "hook_event_name": "PostToolUse", "tool_name": "Write", "cwd": root.path(),
            "tool_use_id": "t2", "tool_input": {"file_path": p, "content": whole},
            "tool_response": {"type": "create", "filePath": p, "content": whole,
                              "structuredPatch": [], "originalFile": null},
        });
        hook(state.path(), &write);
        let mut want = places(edited, &["# @claude new"]);
        want.extend(places(whole, &["# @claude whole"]));
        assert_eq!(records(state.path()).written(&p).written, want);
    }

    /// Records of days past do not count and are swept out; a FIFO or symlink planted where a
    /// record goes is neither read nor written through; an older record's bare line keys
    /// count for nothing.
    #[cfg(unix)]
    #[test]
    fn old_and_planted_records_do_not_count() {
        let state = tempfile::tempdir().unwrap();
        let r = records(state.path());
        std::fs::create_dir_all(&r.dir).unwrap();
        let p = Path::new("/nowhere/a.py");
        std::fs::write(r.file(p, today() - DAYS), "post t1 0000000000000001\n").unwrap();
        assert!(r.written(p).written.is_empty());
        r.append(p, "post t2 0000000000000002\n").unwrap();
        assert_eq!(r.written(p).written, HashSet::from([2]));
        assert!(!r.file(p, today() - DAYS).exists(), "not swept");
        let older = Path::new("/nowhere/older.py");
        std::fs::write(r.file(older, today()), format!("{:016x}\n", key("# @claude x"))).unwrap();
        let got = r.written(older);
        assert!(got.written.is_empty() && got.proposed.is_empty(), "{got:?}");
        let q = Path::new("/nowhere/b.py");
        let fifo = r.file(q, today());
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(r.written(q).written.is_empty());
        assert!(r.append(q, "post t 0000000000000001\n").is_err(), "appended to a FIFO");
        let s = Path::new("/nowhere/c.py");
        std::os::unix::fs::symlink("/dev/zero", r.file(s, today())).unwrap();
        assert!(r.written(s).written.is_empty());
        assert!(r.append(s, "post t 0000000000000001\n").is_err(), "appended through a symlink");
    }
}
