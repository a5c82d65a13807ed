//! The command line's shape: the flags and subcommands clap parses (`main.rs` runs them).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;
use filewatch_mcp::{LiveOptions, TagMode, DEFAULT_TRIGGER};

#[derive(clap::Parser)]
#[command(
    name = "filewatch-mcp",
    version,
    about = "Hears `// @claude <ask>` comments in your code",
    long_about = "Hears `// @claude <ask>` comments in your code. Without a subcommand it is the \
                  MCP server Claude Code spawns (the same as `serve`).",
    after_help = SERVE_EXIT
)]
pub(crate) struct Cli {
    /// Makes stderr a log (a time and a level on each line) from this level up; RUST_LOG
    /// overrides it. Without it: warnings and errors (and `watch`'s progress), as
    /// `filewatch-mcp: …` lines. `debug` logs each event, scan, stamp and announcement.
    #[arg(long, global = true, value_enum)]
    pub(crate) log_level: Option<LogLevel>,
    #[command(flatten)]
    pub(crate) serve: LiveArgs,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// How much goes to stderr (in order: `Off` the least).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// The flags the server and `watch` share, declared once: the root, how changes are read, and
/// where asks' ids and the log go.
#[derive(clap::Args, Clone)]
pub(crate) struct LiveArgs {
    /// The project directory to watch.
    #[arg(long, default_value = ".")]
    pub(crate) root: PathBuf,
    /// Quiet time after the last event of a file before it is read (100ms, 2s, …): what
    /// makes a save written in several steps one save.
    #[arg(long, default_value = "100ms", value_parser = parse_duration, allow_hyphen_values = true)]
    pub(crate) debounce: Duration,
    /// How long a file must stay unchanged before a tag is written into it; and, where the
    /// editor saves while you type (autosave), the least time an ask's text must stay
    /// unchanged before it is announced. 0: tags at once, every save is deliberate.
    #[arg(long, default_value = "5s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub(crate) settle: Duration,
    /// The latest a heard ask's tag is written, after the file's last save, when no save
    /// elsewhere in the file made a safe moment for it first (a tag is written right after a
    /// save that left the ask's lines alone and a quiet --settle; at most twice).
    #[arg(long, default_value = "10m", value_parser = parse_duration, env = "FILEWATCH_TAG_AFTER")]
    pub(crate) tag_after: Duration,
    /// The word that starts an ask.
    #[arg(long, default_value = DEFAULT_TRIGGER)]
    pub(crate) trigger: String,
    /// Where an ask's id goes: `file` writes it into the marker (`@claude[fw-…]`); `never`
    /// writes nothing and keeps it in a ledger in your state directory.
    #[arg(long, value_enum, default_value = "file")]
    pub(crate) tag: TagMode,
    /// Also write the log (info and up) to this file, rotated at 1 MiB (one `.1` kept).
    /// The server's default: `<state dir>/logs/<key of the root>.log`; `watch` has none.
    #[arg(long, value_name = "PATH")]
    pub(crate) log_file: Option<PathBuf>,
}

impl LiveArgs {
    /// What the live stage is given, watching `root` (`watch DIR` names it without `--root`).
    pub(crate) fn options(&self, root: &Path) -> LiveOptions {
        LiveOptions {
            root: root.to_path_buf(),
            debounce: self.debounce,
            settle: self.settle,
            tag_after: self.tag_after,
            trigger: self.trigger.clone(),
            tag: self.tag,
        }
    }
}

/// `--help`'s exit status section of the server (with and without `serve`).
const SERVE_EXIT: &str = "Exit status:
  0  the session ended: stdin closed, SIGINT or SIGTERM
  2  it could not start: a bad flag, or a root that is not a readable directory";

#[derive(Subcommand)]
pub(crate) enum Command {
    /// The MCP stdio server for Claude Code (also what runs without a subcommand).
    #[command(after_help = SERVE_EXIT)]
    Serve(LiveArgs),
    /// List the markers in files and trees; writes nothing.
    #[command(after_help = "Exit status:
  0  every file was read; files skipped on purpose (binary, over 1 MiB, not a regular file)
     are no failure, and one named on the command line is said on stderr
  1  some files or directories could not be read (each said on stderr); the rest was
     scanned and printed
  2  nothing was scanned: a bad flag or trigger, or a named path that does not exist or
     cannot be listed")]
    Scan {
        /// One JSON object per marker and line.
        #[arg(long)]
        json: bool,
        /// Also say on stderr where a comment almost holds an ask, and why it is none
        /// (`@Claude …`, `@claudefix`, `@claude:` with nothing after it, the trigger after
        /// other words).
        #[arg(long)]
        verbose: bool,
        /// The word that starts an ask.
        #[arg(long, default_value = DEFAULT_TRIGGER)]
        trigger: String,
        /// Files and directories to scan (directories honour .gitignore and friends).
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
    },
    /// Watch a tree: every save is scanned, new asks are stamped and printed, once each.
    #[command(after_help = "Exit status:
  0  stopped by Ctrl-C (SIGINT) or SIGTERM, or stdout was closed
  2  it could not start or go on: a bad flag, a root that is not a readable directory, the
     root deleted with its parent (nothing left to watch), or stdout could not be written")]
    Watch {
        /// The directory to watch (the same as --root).
        #[arg(conflicts_with = "root")]
        dir: Option<PathBuf>,
        #[command(flatten)]
        live: LiveArgs,
        /// One JSON object per ask and line (the `scan` keys, `id` the new id, `stamped`).
        #[arg(long)]
        json: bool,
    },
    /// Tag every untagged marker (`@claude` → `@claude[fw-1a2b3c4d]`) and print the new asks.
    #[command(after_help = "Exit status:
  0  every marker found was stamped (with --dry-run: listed); files skipped on purpose are
     no failure, and one named on the command line is said on stderr
  1  some files could not be read or stamped (read-only, hard-linked, kept changing, …:
     each said on stderr); the others were stamped
  2  nothing was stamped: a bad flag or trigger, or a named path that does not exist or
     cannot be listed")]
    Stamp {
        /// Print what would be stamped (without ids: the real stamp draws its own); write
        /// nothing.
        #[arg(long)]
        dry_run: bool,
        /// One JSON object per ask and line (the `scan` keys, `id` being the new id).
        #[arg(long)]
        json: bool,
        /// The word that starts an ask.
        #[arg(long, default_value = DEFAULT_TRIGGER)]
        trigger: String,
        /// Files and directories to stamp (directories honour .gitignore and friends).
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
    },
    /// Remove the marker tagged ID (its whole line if it is alone on it).
    #[command(after_help = "Exit status:
  0  the marker was removed
  1  the marker was found, but its file could not be read or written (said on stderr)
  2  a bad id or flag, a named path that does not exist, or no marker with that id")]
    Resolve {
        /// The id, `fw-` and 8 hex digits.
        id: String,
        /// The word that starts an ask.
        #[arg(long, default_value = DEFAULT_TRIGGER)]
        trigger: String,
        /// Files and directories to look in; a directory is also looked up as a root in the
        /// `--tag never` ledger (run it in the root a server watches, or name that root).
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
    },
    /// Claude Code's hooks (docs/hooks.md): reads the hook's JSON on stdin. Around Write,
    /// Edit, MultiEdit and NotebookEdit it records the lines Claude writes (a marker Claude
    /// writes is never your ask); after a tool or a prompt it prints the asks Claude has not
    /// heard yet as additionalContext; with --wait (SessionStart and Stop, asyncRewake) it
    /// waits until there is an ask and prints it on stderr, which wakes the idle session.
    #[command(after_help = "Exit status:
  0  always, but
  2  with --wait: asks were printed on stderr (Claude Code wakes the session with them)")]
    Hook {
        /// Wait in the background until there is an ask (an asyncRewake hook).
        #[arg(long)]
        wait: bool,
    },
    /// Claude Code's hooks for a server registered with `claude mcp add` (the plugin brings
    /// its own): print them, or put them into (take them out of) a Claude Code settings file.
    #[command(after_help = "Exit status:
  0  printed, or the settings file is as asked (written, or already so)
  2  the settings file is not valid JSON or not a settings object (named; nothing changed),
     or it could not be read or written")]
    Hooks {
        #[command(subcommand)]
        action: HooksAction,
    },
    /// Check each link from a save to Claude, one line each (ok, missing, warning) with the
    /// fix: Claude Code, the server's registration, the hooks, the channel, the state
    /// directory, the root's owner, the editor, inotify, and a live round trip.
    #[command(after_help = "Exit status:
  0  every link is ok
  1  some link is missing or has a warning (its line says what to do)
  2  a bad flag, or a root that is not a directory")]
    Doctor {
        /// The project.
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// What was learned of the root's editor — it autosaves, or you save deliberately — and
    /// the evidence for it; or forget it (docs/editors.md#autosave).
    #[command(after_help = "Exit status:
  0  shown, or forgotten
  2  the root cannot be found, or there is no state directory, or its file cannot be removed")]
    Autosave {
        #[command(subcommand)]
        action: AutosaveAction,
    },
    /// Print the language table: file types, and grammar or fallback.
    #[command(after_help = "Exit status:
  0  always (2 for a bad flag)")]
    Languages {
        /// One JSON object per language and line.
        #[arg(long)]
        json: bool,
    },
}

/// What `filewatch-mcp autosave` does.
#[derive(Subcommand)]
pub(crate) enum AutosaveAction {
    /// Print the root's mode (autosave or deliberate saves) and the evidence for it.
    Show {
        /// The project.
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Forget it: the root saves deliberately again — in a running server too, from its next
    /// save.
    Reset {
        /// The project.
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
}

/// What `filewatch-mcp hooks` does.
#[derive(Subcommand)]
pub(crate) enum HooksAction {
    /// Print the settings JSON: `{"hooks": {…}}`, the same hooks as the plugin's.
    Print {
        /// Run this binary (an absolute path is written) instead of `filewatch-mcp` on PATH.
        #[arg(long, value_name = "PATH")]
        bin: Option<PathBuf>,
    },
    /// Put the hooks into a settings file: hooks that run `filewatch-mcp hook` are replaced,
    /// nothing else is touched; running it twice is running it once.
    Install {
        /// project: .claude/settings.json (shared); local: .claude/settings.local.json (yours,
        /// this project); user: ~/.claude/settings.json (yours, every project).
        #[arg(long, value_enum, default_value = "local")]
        scope: filewatch_mcp::hear::settings::Scope,
        /// Run this binary (an absolute path is written) instead of `filewatch-mcp` on PATH.
        #[arg(long, value_name = "PATH")]
        bin: Option<PathBuf>,
        /// The project (for the project and local scopes).
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Take out of a settings file every hook that runs `filewatch-mcp hook`.
    Remove {
        /// project, local or user (see install).
        #[arg(long, value_enum, default_value = "local")]
        scope: filewatch_mcp::hear::settings::Scope,
        /// The project (for the project and local scopes).
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
}

/// `500ms`, `2s`, `1.5s` or `10m`: a non-negative number and a unit, `ms`, `s` or `m`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!("{text:?} is negative: a duration is 0 or more, like 500ms or 2s"));
    }
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("{text:?} is not a duration like 500ms or 2s"))?;
    let ms = match unit.trim() {
        "ms" => value,
        "s" => value * 1000.0,
        "m" => value * 60_000.0,
        // Zero is zero in any unit: `--settle 0`, as `--help` writes it.
        "" if value == 0.0 => 0.0,
        "" => return Err(format!("{text:?} has no unit: write {text}ms or {text}s")),
        other => return Err(format!("unknown unit {other:?} in {text:?}: use ms, s or m")),
    };
    Ok(Duration::from_micros((ms * 1000.0) as u64))
}
