//! `filewatch-mcp doctor`: each link of the chain from a save to Claude in one line, `ok`,
//! `missing` or `warning`, with the fix where one is missing; exit 0 only when every link is ok.
//! Each test is a project in a temporary HOME with its own state directory; Claude Code is a
//! stand-in script on PATH (its command line, which the server reads for a channel flag, is
//! the test's), or the real one (`FILEWATCH_CLAUDE_BIN`) for the plugin. Unix only: the
//! stand-in is a shell script.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

mod common;
use common::mcp::{handshake, Server, DEADLINE};

/// A stand-in for Claude Code: `--version` answers as Claude Code 2.1.332 does; otherwise it
/// runs the server (`$FW_BIN` with the arguments after the flags it was given) as its child and
/// stays its parent, so the server finds this command line among its ancestors.
const FAKE_CLAUDE: &str = r#"#!/bin/sh
if [ "$1" = --version ]; then echo '2.1.332 (Claude Code)'; exit 0; fi
if [ "$1" = --dangerously-load-development-channels ]; then shift 2; fi
"$FW_BIN" "$@"
exit $?
"#;

/// A project, a HOME and a state directory; PATH holds `claude` (the stand-in) and
/// `filewatch-mcp` (this build).
struct Project {
    dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    state: PathBuf,
    bin_dir: PathBuf,
    servers: Vec<Server>,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (root, home, state, bin_dir) =
            (base.join("project"), base.join("home"), base.join("state"), base.join("bin"));
        for d in [&root, &home, &state, &bin_dir] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(root.join("main.py"), "def f():\n    return 1\n").unwrap();
        let claude = bin_dir.join("claude");
        std::fs::write(&claude, FAKE_CLAUDE).unwrap();
        make_executable(&claude);
        std::os::unix::fs::symlink(PathBuf::from(common::bin()), bin_dir.join("filewatch-mcp"))
            .unwrap();
        Project { dir, root, home, state, bin_dir, servers: Vec::new() }
    }

    /// Registered as `claude mcp add filewatch -- filewatch-mcp --root .` writes it (local
    /// scope: `~/.claude.json`'s entry of the project).
    fn register(&self) {
        let config = json!({
            "projects": {self.root.to_str().unwrap(): {"mcpServers": {"filewatch": {
                "type": "stdio", "command": "filewatch-mcp", "args": ["--root", "."], "env": {}
            }}}}
        });
        write_json(&self.home.join(".claude.json"), &config);
    }

    /// `filewatch-mcp hooks install` in the project.
    fn install_hooks(&self) {
        let out = self.command(&["hooks", "install"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    /// A session on the root: the stand-in Claude Code (with the channel flag or without) and
    /// its server, through the handshake. Returns the stand-in's pid.
    fn session(&mut self, channel_flag: bool) -> u32 {
        let mut claude = Command::new(self.bin_dir.join("claude"));
        if channel_flag {
            claude.args(["--dangerously-load-development-channels", "server:filewatch"]);
        }
        claude.env("FW_BIN", common::bin()).env("PATH", self.path_var());
        let mut server = Server::spawn(claude, &self.root, &self.state, Stdio::null(), &[]);
        handshake(&mut server);
        let pid = server.child.id();
        self.servers.push(server);
        pid
    }

    fn path_var(&self) -> String {
        format!("{}:/usr/bin:/bin", self.bin_dir.display())
    }

    /// `filewatch-mcp ARGS` in the project with this HOME, state directory and PATH only.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(common::bin());
        command
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", self.path_var())
            .env("HOME", &self.home)
            .env("FILEWATCH_STATE_DIR", &self.state);
        command
    }

    /// `filewatch-mcp doctor`, run in the project: its output, printed for the test's log.
    fn doctor(&self, env: &[(&str, &str)]) -> (String, Output) {
        let mut command = self.command(&["doctor"]);
        command.envs(env.iter().copied());
        let out = command.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        println!("{text}");
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        (text, out)
    }
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn write_json(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

/// The line of `link` (its name follows the status word).
fn line<'a>(text: &'a str, link: &str) -> &'a str {
    text.lines()
        .find(|l| l.split_whitespace().nth(1).is_some_and(|w| w.starts_with(link)))
        .unwrap_or_else(|| panic!("no {link:?} line in:\n{text}"))
}

fn status<'a>(text: &'a str, link: &str) -> &'a str {
    line(text, link).split_whitespace().next().unwrap()
}

/// The links doctor checks, in its order.
const LINKS: &[&str] = &[
    "claude",
    "server",
    "hooks",
    "debug-log",
    "state",
    "owner",
    "channel",
    "editor",
    "inotify",
    "round-trip",
];

/// Everything in place: registered, hooks installed, a session with the channel flag owning
/// the root; the round trip runs outside the project.
#[test]
fn a_healthy_project_is_ok_on_every_line() {
    let mut p = Project::new();
    p.register();
    p.install_hooks();
    let claude_pid = p.session(true);
    let (text, out) = p.doctor(&[]);
    for link in LINKS {
        assert_eq!(status(&text, link), "ok", "{link}:\n{text}");
    }
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(line(&text, "claude").contains("2.1.332"), "{text}");
    assert!(line(&text, "server").contains("filewatch"), "{text}");
    assert!(line(&text, "owner").contains(&format!("Claude Code pid {claude_pid}")), "{text}");
    assert!(line(&text, "channel").contains("--dangerously-load-development-channels"), "{text}");
    let trip = line(&text, "round-trip");
    assert!(trip.contains("announced") && trip.contains("removed"), "{text}");
    assert!(!trip.contains(p.root.to_str().unwrap()), "the round trip ran in the project: {trip}");
    // Nothing of the round trip is left in the project, nor its scratch directory.
    assert_eq!(
        std::fs::read_to_string(p.root.join("main.py")).unwrap(),
        "def f():\n    return 1\n"
    );
    assert_eq!(std::fs::read_dir(&p.root).unwrap().count(), 2, "main.py and .claude/ only");
    let scratch = trip.split(" in ").last().unwrap().split(' ').next().unwrap();
    let scratch = Path::new(scratch).ancestors().nth(2).unwrap();
    assert!(!scratch.exists(), "{} left behind", scratch.display());
}

/// Registered with `claude mcp add` but no hooks: the asks a channel does not carry never
/// reach Claude. The line says so and how to fix it.
#[test]
fn no_hooks_is_missing_with_the_fix() {
    let mut p = Project::new();
    p.register();
    p.session(true);
    let (text, out) = p.doctor(&[]);
    assert_eq!(status(&text, "hooks"), "missing", "{text}");
    assert!(line(&text, "hooks").contains("filewatch-mcp hooks install"), "{text}");
    assert_eq!(status(&text, "server"), "ok", "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

/// The session owning the root runs a Claude Code started without a channel flag: asks come
/// by the hooks alone.
#[test]
fn an_owner_without_a_channel_flag_is_a_warning() {
    let mut p = Project::new();
    p.register();
    p.install_hooks();
    let claude_pid = p.session(false);
    let (text, out) = p.doctor(&[]);
    assert_eq!(status(&text, "owner"), "ok", "{text}");
    assert_eq!(status(&text, "channel"), "warning", "{text}");
    let channel = line(&text, "channel");
    assert!(channel.contains(&format!("pid {claude_pid}")), "{text}");
    assert!(channel.contains("--dangerously-load-development-channels server:filewatch"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

/// Two sessions on the root, doctor run in the second (its Claude Code is `CLAUDE_PID`): the
/// first owns the root, so this session hears no ask.
#[test]
fn a_root_owned_by_another_session_is_a_warning() {
    let mut p = Project::new();
    p.register();
    p.install_hooks();
    let first = p.session(true);
    let second = p.session(true);
    let env = [("CLAUDECODE", "1"), ("CLAUDE_PID", &second.to_string() as &str)];
    let (text, out) = p.doctor(&env);
    assert_eq!(status(&text, "owner"), "warning", "{text}");
    let owner = line(&text, "owner");
    assert!(owner.contains("another session") && owner.contains(&format!("pid {first}")), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

/// Files Claude Code could not read, no HOME, a state directory that is a file, a debug log of
/// gigabytes (its tail is read): each is a clear line, never a panic.
#[test]
fn hostile_inputs_give_lines_not_panics() {
    let p = Project::new();
    std::fs::write(p.home.join(".claude.json"), "{\"projects\": {").unwrap();
    std::fs::create_dir_all(p.root.join(".claude")).unwrap();
    std::fs::write(p.root.join(".claude/settings.local.json"), "not json").unwrap();
    let debug = p.home.join(".claude/debug");
    std::fs::create_dir_all(&debug).unwrap();
    let log = std::fs::File::create(debug.join("s.txt")).unwrap();
    log.set_len(4 << 30).unwrap(); // sparse: 4 GiB of zeros, then the line
    drop(log);
    let tail =
        "\n2026-12-02T10:00:00.000Z [DEBUG] MCP server \"filewatch\": Channel notifications \
                skipped: channels feature is not currently available\n";
    std::fs::OpenOptions::new()
        .append(true)
        .open(debug.join("s.txt"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, tail.as_bytes()))
        .unwrap();
    let t = Instant::now();
    let (text, out) = p.doctor(&[]);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(t.elapsed() < DEADLINE * 3, "doctor read the whole debug log?");
    assert!(line(&text, "server").contains(".claude.json"), "{text}");
    assert!(line(&text, "hooks").contains("settings.local.json"), "{text}");
    assert!(
        line(&text, "debug-log").contains("channels feature is not currently available"),
        "{text}"
    );
    assert_eq!(status(&text, "debug-log"), "warning", "{text}");

    // No HOME, and a state directory that is a file.
    let not_a_dir = p.dir.path().join("state-file");
    std::fs::write(&not_a_dir, "").unwrap();
    let out = Command::new(common::bin())
        .arg("doctor")
        .current_dir(&p.root)
        .env_clear()
        .env("PATH", p.path_var())
        .env("FILEWATCH_STATE_DIR", &not_a_dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(status(&text, "state"), "missing", "{text}");
    assert!(line(&text, "server").contains("HOME"), "{text}");
    for link in LINKS {
        line(&text, link);
    }
}

/// The plugin as `claude plugin install` writes it (the real Claude Code, a temporary HOME):
/// registered and hooks in place; disabled, the server line says how to enable it.
#[test]
fn the_plugin_installed_by_the_real_claude_code() {
    let Some(claude) = common::claude::bin() else { return };
    let p = Project::new();
    let run = |args: &[&str]| {
        let out = Command::new(&claude)
            .args(args)
            .current_dir(&p.root)
            .env_clear()
            .env("PATH", p.path_var())
            .env("HOME", &p.home)
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "claude {args:?}: {out:?}");
    };
    run(&["plugin", "marketplace", "add", env!("CARGO_MANIFEST_DIR")]);
    run(&["plugin", "install", "filewatch@filewatch-mcp"]);
    let claude_bin = claude.to_str().unwrap();
    let (text, _) = p.doctor(&[("FILEWATCH_CLAUDE_BIN", claude_bin)]);
    assert_eq!(status(&text, "claude"), "ok", "{text}");
    assert!(line(&text, "claude").contains("2.1.332"), "{text}");
    assert_eq!(status(&text, "server"), "ok", "{text}");
    assert!(line(&text, "server").contains("filewatch@filewatch-mcp"), "{text}");
    assert_eq!(status(&text, "hooks"), "ok", "{text}");
    assert!(line(&text, "hooks").contains("plugin"), "{text}");

    run(&["plugin", "disable", "filewatch@filewatch-mcp"]);
    let (text, out) = p.doctor(&[("FILEWATCH_CLAUDE_BIN", claude_bin)]);
    assert_eq!(status(&text, "server"), "missing", "{text}");
    assert!(
        line(&text, "server").contains("claude plugin enable filewatch@filewatch-mcp"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
}
