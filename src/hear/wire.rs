//! What a hook and its session's server say to each other, and how a hook finds that server.
//!
//! Each server listens on a TCP port of 127.0.0.1 (the one kind of local socket every platform
//! has without new code) and writes an endpoint file, `<state dir>/sessions/<pid>.json`: its
//! port, a random token (the state directory is the user's own, so only the user's processes
//! can present it), the root, whether it owns the root, and the processes above it — what a
//! hook matches against `CLAUDE_PID` to find the server of its own Claude Code session.
//!
//! One JSON line each way, in order: the hook's [`Request`]; the server's [`Reply`] (at once, or,
//! for a waiting hook, once there is something to hear); the hook's [`Ack`] naming the asks it
//! printed. An ask handed out but never acknowledged is offered again.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::id::MarkerId;
use crate::state;

/// A line of the protocol over this size is refused: a request or an ack is a few hundred
/// bytes; a reply holds at most [`MAX_OFFERS`] asks of at most 4 KiB each.
pub const MAX_LINE: usize = 1 << 20;

/// The most asks one hook run hands to Claude; more wait for the next run.
pub const MAX_OFFERS: usize = 32;

/// About the most text one hook run hands to Claude: Claude Code saves a hook text of some
/// 30 KB to a file and shows the model only its first 2 KB (docs/claude-code-hooks.md), so
/// asks beyond this wait for the next run (one ask alone is at most 4 KiB).
pub const MAX_TEXT: usize = 12 * 1024;

/// Endpoint files over this size are not read.
const MAX_ENDPOINT: u64 = 64 * 1024;

/// The directory of the endpoint files, under the state directory.
const DIR: &str = "sessions";

/// An ask as a hook hands it to Claude: what its channel message carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    /// The ask's id (`replyTo` on the channel).
    pub id: MarkerId,
    /// The file, relative to the root, `/`-separated.
    pub file: String,
    /// The line of the trigger (1-based).
    pub line: usize,
    /// The ask's last line.
    pub end_line: usize,
    /// The ask, from the trigger on.
    pub text: String,
    /// The definition the ask is about (`Outer.inner`), if the syntax tree tells.
    #[serde(default)]
    pub symbol: Option<String>,
    /// Its lines (`10-30`).
    #[serde(default)]
    pub symbol_lines: Option<String>,
    /// The whole text of an ask offered before under the same id (autosave saved its start).
    #[serde(default)]
    pub revised: bool,
}

/// A hook run's question to its server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The token of the server's endpoint file.
    pub token: String,
    /// Claude Code's hook event (`PostToolUse`, `Stop`, …).
    pub event: String,
    /// The session, as Claude Code names it in the hook's input.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The session's transcript (JSON lines), where its channel messages are recorded.
    #[serde(default)]
    pub transcript_path: Option<PathBuf>,
    /// The Claude Code process (`CLAUDE_PID`), whose command line tells whether channels
    /// were asked for.
    #[serde(default)]
    pub claude_pid: Option<u32>,
    /// True for a hook that waits in the background (`asyncRewake`) until there is an ask.
    #[serde(default)]
    pub wait: bool,
}

/// The server's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Asks to print (none: nothing to hear now).
    Asks(Vec<Offer>),
    /// A waiting hook is no longer needed (a newer one waits for the session): exit quietly.
    Exit,
}

/// The hook printed these asks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ack {
    /// Their ids.
    pub printed: Vec<MarkerId>,
}

/// Where a server listens, as its endpoint file says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The server process.
    pub pid: u32,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// What a hook presents.
    pub token: String,
    /// The root it serves (canonical).
    pub root: PathBuf,
    /// Its trigger.
    pub trigger: String,
    /// True while it owns the root (announces its asks).
    pub owner: bool,
    /// The processes above it, nearest first: its Claude Code session is among them.
    pub ancestors: Vec<u32>,
    /// `CLAUDE_CODE_SESSION_ID` as Claude Code started it (a session `/clear`ed since has
    /// another id; the processes still match).
    #[serde(default)]
    pub session_id: Option<String>,
}

/// The directory of the endpoint files in the state directory `state_dir`.
pub fn endpoints_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(DIR)
}

impl Endpoint {
    /// Its file: `<dir>/<pid>.json`.
    pub fn path(dir: &Path, pid: u32) -> PathBuf {
        dir.join(format!("{pid}.json"))
    }

    /// Writes (or rewrites) the endpoint file in `dir`, made for this user alone: a temp file
    /// renamed over it, so a reader never sees half of one.
    pub fn write(&self, dir: &Path) -> io::Result<PathBuf> {
        state::make_private_dir(dir)?;
        let path = Endpoint::path(dir, self.pid);
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!("{}.", self.pid))
            .suffix(".tmp")
            .tempfile_in(dir)?;
        serde_json::to_writer(&mut tmp, self)?;
        tmp.write_all(b"\n")?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(path)
    }

    /// Every endpoint file in `dir` that reads; a file that does not (half written by a
    /// killed server, planted) is skipped.
    pub fn all(dir: &Path) -> Vec<(PathBuf, Endpoint)> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let read = state::open_existing(&path)
                .and_then(|mut f| state::read_at_most(&mut f, MAX_ENDPOINT));
            if let Some(endpoint) = read.ok().and_then(|b| serde_json::from_slice(&b).ok()) {
                found.push((path, endpoint));
            }
        }
        found
    }

    /// True if this server belongs to the session whose Claude Code process is `claude_pid`
    /// (one of the processes above the server), or whose id is `session_id`.
    pub fn serves_session(&self, claude_pid: Option<u32>, session_id: Option<&str>) -> bool {
        claude_pid.is_some_and(|pid| self.ancestors.contains(&pid))
            || (session_id.is_some() && self.session_id.as_deref() == session_id)
    }

    /// True if this server watches the project at `dir` (the hook's project directory).
    pub fn serves_dir(&self, dir: &Path) -> bool {
        dir.starts_with(&self.root)
    }
}

/// A random token: 128 bits, hex.
pub fn new_token() -> String {
    format!("{:032x}", crate::id::uuid_random())
}

/// Compares two tokens without stopping at the first difference.
pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One JSON line of `value`, newline included.
pub fn line<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}
