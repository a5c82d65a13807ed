//! The server binary as a test's MCP client: Claude Code 2.1.332's start-up byte for byte (the
//! `server/discover` probe, `initialize` 2025-11-25, `notifications/initialized`,
//! `tools/list`), its stdout read line by line, tools called, notifications kept.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const DEADLINE: Duration = Duration::from_secs(10);

pub const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.332"}}}}"#;
pub const INITIALIZE: &str = r#"{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{},"elicitation":{}},"clientInfo":{"name":"claude-code","title":"Claude Code","version":"2.1.332"}},"jsonrpc":"2.0","id":0}"#;
pub const INITIALIZED: &str = r#"{"method":"notifications/initialized","jsonrpc":"2.0"}"#;
pub const TOOLS_LIST: &str = r#"{"method":"tools/list","jsonrpc":"2.0","id":1}"#;

pub struct Server {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: Receiver<String>,
    /// Notifications read while looking for something else (a reply, another notification).
    pub notes: Vec<Value>,
    /// The state directory of a server that has one of its own.
    pub _state: Option<tempfile::TempDir>,
}

impl Server {
    pub fn start(root: &Path) -> Server {
        Server::start_with_stderr(root, Stdio::inherit())
    }

    pub fn start_with_stderr(root: &Path, stderr: impl Into<Stdio>) -> Server {
        let state = tempfile::tempdir().unwrap();
        let mut s = Server::start_in(root, state.path(), stderr);
        s._state = Some(state);
        s
    }

    /// A server whose state directory (the owner lock, the ledger) is `state`: servers sharing
    /// one are the sessions of one user.
    pub fn start_in(root: &Path, state: &Path, stderr: impl Into<Stdio>) -> Server {
        Server::start_with_args(root, state, stderr, &[])
    }

    pub fn start_with_args(
        root: &Path,
        state: &Path,
        stderr: impl Into<Stdio>,
        args: &[&str],
    ) -> Server {
        let command = Command::new(super::bin());
        Server::spawn(command, root, state, stderr, args)
    }

    /// `command` (the binary, or the binary run as another user) as a server on `root`.
    pub fn spawn(
        mut command: Command,
        root: &Path,
        state: &Path,
        stderr: impl Into<Stdio>,
        args: &[&str],
    ) -> Server {
        // The test's own `--settle`, if it gives one, instead of the quick one tests use.
        let settle: &[&str] = if args.contains(&"--settle") { &[] } else { &["--settle", "300ms"] };
        // Tags fall back after the settle time too (tests written before `--tag-after`, issue
        // 34, wait for a tag once the file was quiet), unless the test says otherwise.
        let at = args.iter().position(|a| *a == "--settle").and_then(|i| args.get(i + 1));
        let mut child = command
            .env("FILEWATCH_TAG_AFTER", at.unwrap_or(&"300ms"))
            .env("FILEWATCH_STATE_DIR", state)
            .args(["--root"])
            .arg(root)
            .args(["--debounce", "100ms"])
            .args(settle)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take();
        Server { child, stdin, lines, notes: Vec::new(), _state: None }
    }

    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line on stdout, raw; every line must be one JSON-RPC message.
    pub fn line(&self) -> String {
        let line = self.lines.recv_timeout(DEADLINE).expect("a line on stdout");
        let v: Value = serde_json::from_str(&line).expect("stdout carries only JSON");
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        line
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.line()).unwrap()
    }

    /// The reply to request `id`; notifications that come first are kept in `notes`.
    pub fn reply(&mut self, id: i64) -> Value {
        loop {
            let v = self.json();
            if v["id"].as_i64() == Some(id) {
                return v;
            }
            assert!(v.get("method").is_some(), "an unexpected reply: {v}");
            self.notes.push(v);
        }
    }

    /// The reply to request `id` (a string id).
    pub fn reply_str(&mut self, id: &str) -> Value {
        loop {
            let v = self.json();
            if v["id"].as_str() == Some(id) {
                return v;
            }
            self.notes.push(v);
        }
    }

    /// The first notification (kept, or still to come) that `matches`.
    pub fn note(&mut self, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(v) = self.notes.iter().find(|v| matches(v)) {
            return v.clone();
        }
        loop {
            let v = self.json();
            self.notes.push(v.clone());
            if matches(&v) {
                return v;
            }
        }
    }

    /// Every line until stdout closes (the process ended), into `notes`.
    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.recv_timeout(DEADLINE) {
            self.notes.push(serde_json::from_str(&line).unwrap());
        }
    }

    /// Calls a tool; its result.
    pub fn call(&mut self, id: i64, name: &str, arguments: Value) -> Value {
        let request = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        });
        self.send(&request.to_string());
        self.reply(id)["result"].clone()
    }

    /// Claude lists the asks (`list_asks`, request `id`): a tool call naming them is evidence
    /// they were heard, so their tags may be written now.
    pub fn hear_all(&mut self, id: i64) {
        let listed = self.call(id, "list_asks", serde_json::json!({}));
        assert_ne!(listed["isError"], true, "{listed}");
    }

    /// Waits (with a deadline) for the process to exit; returns how long it took.
    pub fn wait_exit(&mut self) -> Duration {
        let t = Instant::now();
        while t.elapsed() < DEADLINE {
            if self.child.try_wait().unwrap().is_some() {
                return t.elapsed();
            }
            std::thread::sleep(Duration::from_millis(5)); // polling an exit, not waiting for time
        }
        panic!("the server did not exit");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn handshake(s: &mut Server) -> (Value, Value) {
    s.send(DISCOVER);
    let discover = s.json();
    s.send(INITIALIZE);
    let init = s.json();
    s.send(INITIALIZED);
    s.send(TOOLS_LIST);
    let tools = s.json();
    assert_eq!(discover["id"], "server-discover-probe-1");
    assert_eq!(discover["error"]["code"], -32601, "{discover}");
    (init, tools)
}
