//! What several integration tests share: `filewatch-mcp watch --json` as a child process, its
//! asks and its log arriving on channels.

// Each test binary compiles this module and uses what it needs of it.
#![allow(dead_code)]

pub mod claude;
#[cfg(unix)] // shell-script wrappers, tmux, /proc
pub mod hearing;
pub mod mcp;
pub mod tmux;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::Value;

/// The names in `dir` (not below) of our temp files (`.NAME.….fw-tmp`): none may stay behind.
pub fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".fw-tmp"))
        .collect()
}

/// A kernel setting under `/proc/sys` changed for one test and put back when this is dropped.
pub struct Sysctl {
    file: &'static str,
    old: String,
}

impl Sysctl {
    /// Sets `file` to `value`; `None` (with a line saying the test is skipped, and why) where
    /// the setting does not exist or cannot be written (not root).
    pub fn set(file: &'static str, value: &str) -> Option<Sysctl> {
        let Ok(old) = std::fs::read_to_string(file) else {
            eprintln!("no {file}; skipped");
            return None;
        };
        if std::fs::write(file, value).is_err() {
            eprintln!("cannot change {file} (not root?); skipped");
            return None;
        }
        Some(Sysctl { file, old })
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(self.file, &self.old);
    }
}

/// The binary under test: this build's, or `$FILEWATCH_TEST_BIN` (to show that a test fails on
/// an older build, say).
pub fn bin() -> std::ffi::OsString {
    std::env::var_os("FILEWATCH_TEST_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_filewatch-mcp").into())
}

/// A running `watch --json`: its asks (one JSON object each) and its stderr lines.
pub struct WatchProcess {
    pub child: Child,
    pub asks: Receiver<Value>,
    /// The other JSON lines: events (`{"event": "autosave", …}`).
    pub events: Receiver<Value>,
    pub log: Receiver<String>,
    /// A state directory of its own, unless the caller gave one.
    _state: Option<tempfile::TempDir>,
}

impl WatchProcess {
    /// Starts `watch --json ARGS… ROOT` with extra environment `env`, and returns once it says
    /// it is watching (or panics after `deadline`). Stderr lines are echoed as `[watch] …`.
    pub fn start(root: &Path, args: &[&str], env: &[(&str, &Path)], deadline: Duration) -> Self {
        let process = Self::spawn(root, args, env);
        process.log_until("filewatch-mcp: watching", deadline);
        process
    }

    /// Starts `watch --json ARGS… ROOT` like [`WatchProcess::start`], without waiting for it.
    pub fn spawn(root: &Path, args: &[&str], env: &[(&str, &Path)]) -> Self {
        let mut command = Command::new(bin());
        command.args(["watch", "--json"]).args(args).arg(root);
        // Tests written before `--tag-after` (issue 34) wait for a tag once the file was quiet
        // for the settle time: their tags fall back after that much, unless they say otherwise.
        let settle = args.iter().position(|a| *a == "--settle").and_then(|i| args.get(i + 1));
        command.env("FILEWATCH_TAG_AFTER", settle.unwrap_or(&"5s"));
        for (key, value) in env {
            command.env(key, value);
        }
        // The owner lock and the ledger live there: no test shares another's.
        let state = (!env.iter().any(|(key, _)| *key == "FILEWATCH_STATE_DIR"))
            .then(|| tempfile::tempdir().unwrap());
        if let Some(state) = &state {
            command.env("FILEWATCH_STATE_DIR", state.path());
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start filewatch-mcp watch");
        let (ask_tx, asks) = mpsc::channel();
        let (event_tx, events) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value: Value = serde_json::from_str(&line).expect("a JSON line");
                let tx = if value.get("event").is_some() { &event_tx } else { &ask_tx };
                let _ = tx.send(value);
            }
        });
        let (log_tx, log) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[watch] {line}");
                let _ = log_tx.send(line);
            }
        });
        WatchProcess { child, asks, events, log, _state: state }
    }

    /// The stderr lines up to and including the first that contains `pattern` (panics if none
    /// comes within `deadline`).
    pub fn log_until(&self, pattern: &str, deadline: Duration) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = self.log.recv_timeout(deadline).unwrap_or_else(|e| {
                panic!("watch never said {pattern:?} ({e}); it said {lines:?}")
            });
            let done = line.contains(pattern);
            lines.push(line);
            if done {
                return lines;
            }
        }
    }
}

impl Drop for WatchProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
