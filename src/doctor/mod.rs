//! `filewatch-mcp doctor`: each link of the chain from a save to Claude, checked where the user
//! runs it and said in one line — `ok`, `missing` or `warning`, with the fix where one is
//! missing: Claude Code and its version, the server's registration (or the plugin), the hooks,
//! what Claude Code's latest debug log says of the channel, the state directory, the session
//! that owns the root and its channel flag, the editor's habit, inotify's limits, and a live
//! round trip in a scratch directory no session watches.
//!
//! It reads Claude Code's files (never runs `claude mcp list`, which starts every server), and
//! treats them as it treats a user's: a file that is not JSON, a FIFO where a file belongs, a
//! missing HOME or a debug log of gigabytes (only its tail is read) is a line, never a panic.

mod claude;
mod config;
mod round_trip;
mod session;

use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::scan::DEFAULT_TRIGGER;

/// How a link of the chain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// It works.
    Ok,
    /// It works, but not as well as it could, or not for this session.
    Warning,
    /// It is broken or absent: asks do not get through this way.
    Missing,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Missing => "missing",
        })
    }
}

/// One link's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// How it is.
    pub status: Status,
    /// Its name (`hooks`, `owner`, …).
    pub link: &'static str,
    /// What was found.
    pub text: String,
    /// What to do about it, where something is to be done.
    pub fix: Option<String>,
}

impl Line {
    fn ok(link: &'static str, text: impl Into<String>) -> Line {
        Line { status: Status::Ok, link, text: text.into(), fix: None }
    }

    fn warning(link: &'static str, text: impl Into<String>, fix: impl Into<String>) -> Line {
        Line { status: Status::Warning, link, text: text.into(), fix: Some(fix.into()) }
    }

    fn missing(link: &'static str, text: impl Into<String>, fix: impl Into<String>) -> Line {
        Line { status: Status::Missing, link, text: text.into(), fix: Some(fix.into()) }
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One terminal line each, whatever a file or a command line held.
        let text = crate::escaped(&self.text.replace('\n', " "), false);
        write!(f, "{:<8} {:<11} {text}", self.status, self.link)?;
        if let Some(fix) = &self.fix {
            write!(f, " — fix: {}", crate::escaped(&fix.replace('\n', " "), false))?;
        }
        Ok(())
    }
}

/// What the doctor looks at.
#[derive(Debug, Clone)]
pub struct Options {
    /// The project (as given: made canonical here).
    pub root: PathBuf,
    /// This program, for the round trip (`watch`, `resolve`) and to compare the hooks' binary.
    pub binary: PathBuf,
}

/// Where things are for this run: the root, HOME, Claude Code's directory, the state directory.
pub(crate) struct Place {
    root: PathBuf,
    home: Option<PathBuf>,
    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
    claude_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    binary: PathBuf,
    trigger: String,
}

impl Place {
    /// A path as the user knows it: `./…` in the project, `~/…` under HOME.
    fn shown(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rest) if !rest.as_os_str().is_empty() => format!("./{}", crate::slash_path(rest)),
            _ => shown(path),
        }
    }
}

/// Checks every link, writing each line to `out` as it is found; true if every link is ok.
/// Fails only if `out` cannot be written or the root is not a directory.
pub fn run(options: &Options, out: &mut dyn Write) -> io::Result<bool> {
    let root = options.root.canonicalize().map_err(|e| {
        io::Error::new(e.kind(), format!("{}: cannot check this root: {e}", options.root.display()))
    })?;
    if !root.is_dir() {
        let message = format!("{}: not a directory", root.display());
        return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
    }
    let place = Place {
        root,
        home: crate::hear::settings::home_dir(),
        claude_dir: crate::hear::settings::claude_config_dir(),
        state_dir: crate::state::state_dir(),
        binary: options.binary.clone(),
        trigger: DEFAULT_TRIGGER.to_string(),
    };
    let version = env!("CARGO_PKG_VERSION");
    writeln!(out, "filewatch-mcp doctor {version}: {}", place.root.display())?;
    let mut lines = Vec::new();
    let mut say = |line: Line, out: &mut dyn Write| -> io::Result<()> {
        writeln!(out, "{line}")?;
        out.flush()?;
        lines.push(line);
        Ok(())
    };
    say(claude::found(), out)?;
    let config = config::ClaudeConfig::load(&place);
    let servers = config.servers(&place);
    say(servers.line(), out)?;
    say(config.hooks(&place, &servers), out)?;
    say(claude::debug_log(&place, &servers.names()), out)?;
    say(session::state_dir(&place), out)?;
    let owner = session::Owner::find(&place);
    say(owner.line(), out)?;
    say(owner.channel_line(servers.plugin_enabled()), out)?;
    say(session::editor(&place), out)?;
    say(session::inotify(&place, owner.is_running()), out)?;
    say(round_trip::run(&place), out)?;
    let not_ok: Vec<&str> =
        lines.iter().filter(|l| l.status != Status::Ok).map(|l| l.link).collect();
    if not_ok.is_empty() {
        writeln!(out, "all {} links ok", lines.len())?;
    } else {
        writeln!(
            out,
            "{} of {} links need a look: {}",
            not_ok.len(),
            lines.len(),
            not_ok.join(", ")
        )?;
    }
    Ok(not_ok.is_empty())
}

/// The program `name` as a shell would find it: a path (with a `/`) as it is, else the first
/// file of that name (or with `.exe`, `.cmd`) in a directory of `PATH`.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') || name.contains('\\') {
        let path = PathBuf::from(name);
        return path.is_file().then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for candidate in [name.to_string(), format!("{name}.exe"), format!("{name}.cmd")] {
            let file = dir.join(&candidate);
            if file.is_file() {
                return Some(file);
            }
        }
    }
    None
}

/// Runs `command` (stdin empty) to its end or for `limit` at most (then kills it): its
/// output, or why there is none.
pub(crate) fn run_for(command: &mut Command, limit: Duration) -> Result<Output, String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.by_ref().take(1 << 20).read_to_end(&mut bytes);
            }
            let _ = tx.send(bytes);
        });
        rx
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                // A child's exit wakes nothing here portably: look again soon.
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {} s", limit.as_secs()));
            }
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    };
    // A grandchild may hold the pipes open: what came by then is enough.
    let collect = |rx: std::sync::mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(Duration::from_secs(1)).unwrap_or_default()
    };
    Ok(Output { status, stdout: collect(stdout), stderr: collect(stderr) })
}

/// What a JSON file of Claude Code's holds.
#[derive(Debug, Clone)]
pub(crate) enum Json {
    /// There is none.
    Missing,
    /// It cannot be read, or is not JSON: why (its path included).
    Bad(String),
    /// Its JSON.
    Value(serde_json::Value),
}

/// The most of a JSON file of Claude Code's that is read (`~/.claude.json` holds every
/// project's history: megabytes).
const MAX_JSON: u64 = 64 << 20;

impl Json {
    /// Reads `path` (a symlink followed: dotfiles are kept elsewhere), if it is a regular file
    /// of at most [`MAX_JSON`] bytes; a blank file is `{}`, as Claude Code reads it.
    pub(crate) fn read(path: &Path) -> Json {
        let bad = |why: String| Json::Bad(format!("{}: {why}", shown(path)));
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Json::Missing,
            Err(e) => return bad(format!("cannot read it: {e}")),
        };
        if !meta.is_file() {
            return bad("not a regular file".into());
        }
        if meta.len() > MAX_JSON {
            return bad(format!("over {} MiB: not read", MAX_JSON >> 20));
        }
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => return bad(format!("cannot read it: {e}")),
        };
        if text.trim().is_empty() {
            return Json::Value(serde_json::json!({}));
        }
        match serde_json::from_str(&text) {
            Ok(value) => Json::Value(value),
            Err(e) => bad(format!("not valid JSON ({e}): Claude Code cannot read it either")),
        }
    }

    /// The JSON, or `null` when there is none.
    pub(crate) fn value(&self) -> &serde_json::Value {
        static NULL: serde_json::Value = serde_json::Value::Null;
        match self {
            Json::Value(v) => v,
            _ => &NULL,
        }
    }
}

/// A path as the user knows it: `~/…` under HOME.
pub(crate) fn shown(path: &Path) -> String {
    if let Some(home) = crate::hear::settings::home_dir() {
        if let Ok(rest) = path.strip_prefix(&home) {
            return format!("~/{}", crate::slash_path(rest));
        }
    }
    crate::slash_path(path)
}

/// `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_lines_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(8192), "8,192");
        assert_eq!(thousands(1_234_567), "1,234,567");
        let line = Line::missing("hooks", "none\nhere", "`filewatch-mcp hooks install`");
        assert_eq!(
            line.to_string(),
            "missing  hooks       none here — fix: `filewatch-mcp hooks install`"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_command_that_hangs_is_given_up() {
        let mut sleep = Command::new("sleep");
        sleep.arg("30");
        let e = run_for(&mut sleep, Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("no answer"), "{e}");
    }
}
