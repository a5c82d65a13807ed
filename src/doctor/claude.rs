//! Claude Code itself: found (`$FILEWATCH_CLAUDE_BIN`, else `claude` on PATH) and its version,
//! and what its latest debug log (`~/.claude/debug/`, written by `claude --debug`) says of the
//! filewatch server: its channel registered or skipped (and why), or its start failed.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{run_for, shown, which, Line, Place};

/// How long `claude --version` may take (it starts Node: a second or two on a loaded machine).
const VERSION_WAIT: Duration = Duration::from_secs(10);

/// The most of a debug log that is read, from its end: a long session's log grows to
/// gigabytes, and what matters is its last start of the server.
const LOG_TAIL: u64 = 4 << 20;

/// The `claude` line: where it is, and `claude --version`.
pub(super) fn found() -> Line {
    const LINK: &str = "claude";
    let asked = std::env::var_os("FILEWATCH_CLAUDE_BIN").filter(|v| !v.is_empty());
    let bin = match &asked {
        Some(path) => {
            let path = PathBuf::from(path);
            if !path.is_file() {
                let text = format!("FILEWATCH_CLAUDE_BIN={} is not a file", path.display());
                return Line::missing(
                    LINK,
                    text,
                    "point it at Claude Code's `claude`, or unset it",
                );
            }
            path
        }
        None => match which("claude") {
            Some(path) => path,
            None => {
                return Line::missing(
                    LINK,
                    "Claude Code not found: no `claude` on PATH",
                    "install it (`npm install -g @anthropic-ai/claude-code`), or set \
                     FILEWATCH_CLAUDE_BIN to its path",
                )
            }
        },
    };
    match run_for(Command::new(&bin).arg("--version"), VERSION_WAIT) {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout);
            let version = version.lines().next().unwrap_or_default().trim().to_string();
            Line::ok(LINK, format!("{version} at {}", shown(&bin)))
        }
        Ok(out) => Line::warning(
            LINK,
            format!(
                "{}: `claude --version` failed ({}): {}",
                shown(&bin),
                out.status,
                String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or_default()
            ),
            "run `claude --version` and read its error",
        ),
        Err(why) => Line::warning(
            LINK,
            format!("{}: `claude --version`: {why}", shown(&bin)),
            "run `claude --version` and read its error",
        ),
    }
}

/// The `debug-log` line: the newest debug log's last word on our server (`names`: as Claude
/// Code names it, `filewatch` or `plugin:filewatch:filewatch`).
pub(super) fn debug_log(place: &Place, names: &[String]) -> Line {
    const LINK: &str = "debug-log";
    let Some(dir) = place.claude_dir.as_ref().map(|d| d.join("debug")) else {
        return Line::ok(LINK, "no home directory (HOME unset): no Claude Code debug log to read");
    };
    let Some(log) = newest_log(&dir) else {
        return Line::ok(LINK, format!("none in {} (`claude --debug` writes one)", shown(&dir)));
    };
    let tail = match read_tail(&log, LOG_TAIL) {
        Ok(tail) => tail,
        Err(e) => {
            let text = format!("{}: cannot read it: {e}", shown(&log));
            return Line::warning(LINK, text, "check its permissions");
        }
    };
    let said = last_word(&tail, names);
    let name = shown(&log);
    match said {
        None => Line::ok(LINK, format!("{name} does not mention the filewatch server")),
        Some(Said::Registered(line)) => Line::ok(LINK, format!("{name}: {line}")),
        Some(Said::Skipped(line, reason)) => {
            Line::warning(LINK, format!("{name}: {line}"), skip_fix(&reason))
        }
        Some(Said::Failed(line)) => Line::missing(
            LINK,
            format!("{name}: {line}"),
            "run the server's command line yourself in the project (`filewatch-mcp --root .`) \
             and read its error",
        ),
    }
}

/// What a debug log said last of the server.
#[derive(Debug, PartialEq, Eq)]
enum Said {
    /// `Channel notifications registered`.
    Registered(String),
    /// `Channel notifications skipped: REASON`, and the reason.
    Skipped(String, String),
    /// `Connection failed …`: the server did not start.
    Failed(String),
}

/// The newest `*.txt` in `dir` (Claude Code's `latest` symlink points at it, where it made one).
fn newest_log(dir: &Path) -> Option<PathBuf> {
    if let Ok(latest) = std::fs::canonicalize(dir.join("latest")) {
        if latest.is_file() {
            return Some(latest);
        }
    }
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "txt"))
        .filter_map(|e| {
            Some((e.metadata().ok().filter(|m| m.is_file())?.modified().ok()?, e.path()))
        })
        .max()
        .map(|(_, path)| path)
}

/// The last `max` bytes of `path` (from the first whole line in them).
fn read_tail(path: &Path, max: u64) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let len = file.metadata()?.len();
    let start = len.saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    if start > 0 {
        let first = memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1);
        bytes.drain(..first);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The last line of `log` about a server in `names` (any whose name holds `filewatch` if
/// `names` is empty) that says how its channel or its start went.
fn last_word(log: &str, names: &[String]) -> Option<Said> {
    let ours = |line: &str| {
        let Some(at) = line.find("MCP server \"") else { return false };
        let rest = &line[at + 12..];
        let name = &rest[..rest.find('"').unwrap_or(rest.len())];
        if names.is_empty() {
            name.contains("filewatch")
        } else {
            names.iter().any(|n| n == name)
        }
    };
    for line in log.lines().rev().filter(|l| ours(l)) {
        let line = line.trim().to_string();
        if line.contains("Channel notifications registered")
            || line.contains("Channel notifications re-registered")
        {
            return Some(Said::Registered(line));
        }
        if let Some(at) = line.find("Channel notifications skipped: ") {
            let reason = line[at + "Channel notifications skipped: ".len()..].to_string();
            return Some(Said::Skipped(line, reason));
        }
        if line.contains("Connection failed") {
            return Some(Said::Failed(line));
        }
    }
    None
}

/// What to do about a channel Claude Code skipped, by its reason (Claude Code 2.1.332's).
fn skip_fix(reason: &str) -> String {
    let hooks = "the hooks carry the asks meanwhile";
    if reason.contains("not currently available") {
        format!(
            "none on your side: Claude Code's switch for channels is off for this login; {hooks}"
        )
    } else if reason.contains("third-party providers") {
        format!("none: channels need Anthropic's API (not Bedrock, Vertex or Foundry); {hooks}")
    } else if reason.contains("org policy") {
        format!("ask your admin for `channelsEnabled: true` in managed settings; {hooks}")
    } else if reason.contains("--channels list") || reason.contains("allowlist") {
        format!(
            "start `claude --dangerously-load-development-channels server:filewatch` (the \
             plugin: `plugin:filewatch@filewatch-mcp`); {hooks}"
        )
    } else {
        format!("see docs/troubleshooting.md (Do asks reach Claude?); {hooks}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_word_on_our_server_counts() {
        let log = "\
2026-12-02T12:12:39Z [DEBUG] MCP server \"filewatch\": Connection failed after 5ms (ENOENT)
2026-12-02T12:12:40Z [DEBUG] MCP server \"other\": Channel notifications registered
2026-12-02T12:12:41Z [DEBUG] MCP server \"filewatch\": Channel notifications skipped: \
channels feature is not currently available
2026-12-02T12:12:42Z [DEBUG] MCP server \"other\": Connection failed";
        let names = vec!["filewatch".to_string()];
        let Some(Said::Skipped(_, reason)) = last_word(log, &names) else { panic!() };
        assert_eq!(reason, "channels feature is not currently available");
        assert!(matches!(last_word(log, &["other".into()]), Some(Said::Failed(_))));
        assert!(matches!(last_word(log, &[]), Some(Said::Skipped(..))));
        assert_eq!(last_word("nothing here", &names), None);
    }

    #[test]
    fn only_the_tail_is_read_from_a_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.txt");
        std::fs::write(&path, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(read_tail(&path, 10).unwrap(), "third\n");
        assert_eq!(read_tail(&path, 1000).unwrap(), "first line\nsecond line\nthird\n");
    }
}
