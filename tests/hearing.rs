//! Hearing through Claude Code's hooks, with the server binary and `filewatch-mcp hook` as
//! Claude Code runs them (the hook's JSON on stdin, `CLAUDE_PID` naming the session's process):
//! an ask is tagged only once a hook printed it (or the transcript holds it), reaches the
//! conversation once, and only the session that owns the root hears it. The real Claude Code
//! runs these hooks in tests/claude_sessions.rs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;
use common::mcp::{handshake, Server, DEADLINE};

/// A root, its state directory, and its server, initialized.
struct Session {
    root: PathBuf,
    state: tempfile::TempDir,
    server: Server,
    _dir: tempfile::TempDir,
}

impl Session {
    fn start(args: &[&str]) -> Session {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut server = Server::start_with_args(&root, state.path(), Stdio::inherit(), args);
        handshake(&mut server);
        Session { root, state, server, _dir: dir }
    }

    /// The channel notification of the ask in `file`.
    fn channel_ask(&mut self, file: &str) -> Value {
        self.server.note(|v| v["params"]["meta"]["file"] == file)
    }

    /// The hook's input for `event` in this session.
    fn input(&self, event: &str, transcript: Option<&Path>) -> Value {
        json!({
            "session_id": "s-1",
            "transcript_path": transcript.map(|t| t.display().to_string()),
            "cwd": self.root.display().to_string(),
            "hook_event_name": event,
            "tool_name": "Bash",
            "tool_input": {"command": "true"},
        })
    }

    /// `filewatch-mcp hook [args]` run to its end, as this session's Claude Code runs it.
    fn hook(&self, input: &str, args: &[&str]) -> Output {
        let mut child = self.spawn_hook(args, std::process::id());
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }

    /// The `additionalContext` of the first `PostToolUse` hook that prints one: the server
    /// offers an ask a moment after its channel line is out (which the test sees first).
    fn context_soon(&self) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let out = self.hook(&self.input("PostToolUse", None).to_string(), &[]);
            assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
            if let Some(text) = context(&out) {
                return text;
            }
            assert!(Instant::now() < deadline, "no hook was handed the ask");
        }
    }

    /// `filewatch-mcp hook [args]` started, as the Claude Code process `claude_pid` runs it.
    fn spawn_hook(&self, args: &[&str], claude_pid: u32) -> Child {
        Command::new(common::bin())
            .arg("hook")
            .args(args)
            .env("FILEWATCH_STATE_DIR", self.state.path())
            .env("CLAUDE_PROJECT_DIR", &self.root)
            .env("CLAUDE_PID", claude_pid.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.root.join(file)).unwrap()
    }
}

/// The `additionalContext` a hook printed, if any.
fn context(out: &Output) -> Option<String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.trim().is_empty() {
        return None;
    }
    let v: Value = serde_json::from_str(stdout.trim()).expect("a hook prints one JSON object");
    Some(v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string())
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20)); // polling a file, not waiting for time
    }
}

/// Sent on the channel is not heard: without a hook or a transcript the ask stays untagged;
/// a `PostToolUse` hook prints it once (with its file, line and id), and then it is tagged.
#[test]
fn an_ask_is_tagged_only_once_a_hook_printed_it_and_printed_once() {
    let mut s = Session::start(&[]);
    std::fs::write(s.root.join("a.py"), "x = 1\n# @claude why one?\n").unwrap();
    let note = s.channel_ask("a.py");
    let id = note["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    // The settle time is 300 ms: a tag for a sent ask would land well within a second.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(s.read("a.py"), "x = 1\n# @claude why one?\n", "tagged though nobody heard it");

    let text = s.context_soon();
    assert!(
        text.contains(&format!("<ask id=\"{id}\" file=\"a.py\" line=\"2\" end_line=\"2\">")),
        "{text}"
    );
    assert!(text.contains("@claude why one?\n</ask>"), "{text}");
    assert!(text.contains("resolve_ask"), "{text}");
    let tagged = format!("x = 1\n# @claude[{id}] why one?\n");
    wait_for("the tag once heard", || s.read("a.py") == tagged);

    let again = s.hook(&s.input("UserPromptSubmit", None).to_string(), &[]);
    assert_eq!(context(&again), None, "a heard ask is never handed to Claude again");
}

/// A transcript that holds the ask's id (its channel message arrived) is evidence: the hook
/// prints nothing, and the ask is tagged.
#[test]
fn an_ask_in_the_transcript_is_heard_and_not_printed_again() {
    let mut s = Session::start(&[]);
    std::fs::write(s.root.join("b.py"), "# @claude explain\ny = 2\n").unwrap();
    let id = s.channel_ask("b.py")["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    let transcript = s.state.path().join("transcript.jsonl");
    let line = json!({"type": "user", "message": {"content":
        format!("<channel source=\"filewatch\" file=\"b.py\" line=\"1\" replyTo=\"{id}\">\n@claude explain\n</channel>")}});
    std::fs::write(&transcript, format!("{line}\n")).unwrap();
    // Each hook run prints nothing, until one has shown the server the transcript once it
    // knew the ask (the channel line reaches this test a moment before the server's hooks
    // side is told) and the ask is tagged.
    let tagged = format!("# @claude[{id}] explain\ny = 2\n");
    wait_for("the tag", || {
        let out = s.hook(&s.input("PostToolUse", Some(&transcript)).to_string(), &[]);
        assert_eq!(context(&out), None, "heard on the channel: not printed again");
        s.read("b.py") == tagged
    });
}

/// The background hook (`--wait`, asyncRewake) blocks until an ask is saved, then prints it
/// on stderr and exits 2 (which wakes the idle session).
#[test]
fn a_waiting_hook_wakes_the_session_with_the_next_ask() {
    let mut s = Session::start(&[]);
    let mut waiting = s.spawn_hook(&["--wait"], std::process::id());
    waiting.stdin.take().unwrap().write_all(s.input("Stop", None).to_string().as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(waiting.try_wait().unwrap().is_none(), "it waits while nothing is asked");
    std::fs::write(s.root.join("c.py"), "# @claude add a test\n").unwrap();
    let id = s.channel_ask("c.py")["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "exit 2 wakes the session");
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("<ask id=\"{id}\" file=\"c.py\"")), "{stderr}");
    wait_for("the tag", || s.read("c.py").contains(&format!("@claude[{id}]")));
}

/// While it waits (for hours, in an idle session), the background hook keeps few pages resident
/// (issue 29: ≤ 5 MB): the pages of its binary and libraries that starting touched are given
/// back (they stay in the page cache), and it still wakes the session with the next ask.
#[cfg(target_os = "linux")]
#[test]
fn a_waiting_hook_keeps_few_pages_resident() {
    let status_kb = |pid: u32, field: &str| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_default();
        line.split_whitespace().nth(1).and_then(|kb| kb.parse().ok()).unwrap_or(u64::MAX)
    };
    let mut s = Session::start(&[]);
    let mut waiting = s.spawn_hook(&["--wait"], std::process::id());
    waiting.stdin.take().unwrap().write_all(s.input("Stop", None).to_string().as_bytes()).unwrap();
    let pid = waiting.id();
    // Measured once it is blocked in its read from the server (where the kernel says it sleeps),
    // not as it starts, before it has touched much.
    let wchan = || std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    wait_for("the hook blocked in its read", || {
        ["sk_wait_data", "wait_woken"].contains(&wchan().as_str())
    });
    let deadline = Instant::now() + DEADLINE;
    while status_kb(pid, "VmRSS:") > 5 * 1024 {
        assert!(
            Instant::now() < deadline,
            "the waiting hook keeps {} kB resident ({} kB of files): more than 5 MB",
            status_kb(pid, "VmRSS:"),
            status_kb(pid, "RssFile:")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(waiting.try_wait().unwrap().is_none(), "it waits while nothing is asked");
    std::fs::write(s.root.join("e.py"), "# @claude after the wait\n").unwrap();
    let id = s.channel_ask("e.py")["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "exit 2 wakes the session");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("<ask id=\"{id}\" file=\"e.py\"")), "{stderr}");
}

/// Only the session the server belongs to hears its asks: a hook of another Claude Code
/// process gets nothing.
#[test]
fn a_hook_of_another_session_hears_nothing() {
    let mut s = Session::start(&[]);
    std::fs::write(s.root.join("d.py"), "# @claude mine\n").unwrap();
    s.channel_ask("d.py");
    std::thread::sleep(Duration::from_millis(300)); // the server offers it a moment after
    let mut other = s.spawn_hook(&[], 1); // pid 1 is no ancestor of the server
    other
        .stdin
        .take()
        .unwrap()
        .write_all(s.input("PostToolUse", None).to_string().as_bytes())
        .unwrap();
    let out = other.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(context(&out), None);
    assert!(s.context_soon().contains("@claude mine"));
}

/// Whatever the input, a hook exits 0 at once and prints nothing.
#[test]
fn a_hook_on_hostile_input_exits_0_and_prints_nothing() {
    let s = Session::start(&[]);
    let inputs = [
        String::new(),
        "not json".to_string(),
        "[1,2,3]".to_string(),
        "\u{0}\u{1}\u{2}".to_string(),
        json!({"hook_event_name": 7}).to_string(),
        json!({"hook_event_name": "PostToolUse", "cwd": "/no/such/dir"}).to_string(),
        json!({"hook_event_name": "Stop"}).to_string(),
        json!({"hook_event_name": "PostToolUse", "transcript_path": "/dev/zero",
               "cwd": s.root.display().to_string()})
        .to_string(),
        "{".repeat(100_000),
    ];
    for input in &inputs {
        let t = Instant::now();
        let out = s.hook(input, &[]);
        assert_eq!(out.status.code(), Some(0), "{input:.40}");
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{input:.40}: {out:?}");
        assert!(t.elapsed() < DEADLINE);
    }
}

/// An ask the user took back (the marker deleted and saved) before anyone heard it is not
/// handed to Claude.
#[test]
fn an_ask_taken_back_before_it_was_heard_is_not_handed_out() {
    let mut s = Session::start(&[]);
    std::fs::write(s.root.join("e.py"), "# @claude never mind\nx = 1\n").unwrap();
    s.channel_ask("e.py");
    std::fs::write(s.root.join("e.py"), "x = 1\n").unwrap();
    let ledger = ledger_file(s.state.path());
    let closed = |l: &str| l.contains("\"e.py\"") && !l.contains("\"resolved\":null");
    wait_for("the ask closed in the ledger", || {
        std::fs::read_to_string(&ledger).unwrap_or_default().lines().any(closed)
    });
    let out = s.hook(&s.input("PostToolUse", None).to_string(), &[]);
    assert_eq!(context(&out), None, "an ask the user took back was handed to Claude");
}

/// An ask no session heard stays pending in the ledger: the next session on the root is handed
/// it at once; one whose marker is tagged (heard, by a version that tagged what it sent) is not.
#[test]
fn an_unheard_ask_of_a_killed_session_reaches_the_next_one() {
    let mut a = Session::start(&[]);
    std::fs::write(a.root.join("f.py"), "# @claude still open\n").unwrap();
    let id = a.channel_ask("f.py")["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    // An ask of the version before: tagged in its file, its record without a heard time.
    std::fs::write(a.root.join("g.py"), "# @claude old\n").unwrap();
    a.channel_ask("g.py");
    a.server.child.kill().unwrap();
    a.server.child.wait().unwrap();
    let ledger = ledger_file(a.state.path());
    let records = std::fs::read_to_string(&ledger).unwrap();
    let old_id = records
        .lines()
        .filter(|l| l.contains("\"g.py\""))
        .find_map(|l| {
            serde_json::from_str::<Value>(l).ok()?["ask"]["id"].as_str().map(str::to_string)
        })
        .unwrap();
    std::fs::write(a.root.join("g.py"), format!("# @claude[{old_id}] old\n")).unwrap();

    let mut b = Server::start_with_args(&a.root, a.state.path(), Stdio::inherit(), &[]);
    handshake(&mut b);
    a.server = b;
    let text = a.context_soon();
    assert!(text.contains(&format!("<ask id=\"{id}\" file=\"f.py\"")), "{text}");
    assert!(!text.contains(&old_id), "a tagged ask is heard already: {text}");
    wait_for("the tag", || a.read("f.py") == format!("# @claude[{id}] still open\n"));
}

/// The root's ledger in a state directory.
fn ledger_file(state: &Path) -> PathBuf {
    std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".asks.jsonl"))
        .expect("a ledger")
}

/// Many long asks at once: each hook run's text stays small enough for Claude Code to show it
/// whole (it saves some 30 KB of hook text to a file and shows 2 KB of it), and every ask is
/// handed out exactly once across the runs.
#[test]
fn many_long_asks_go_out_in_runs_each_ask_once() {
    let mut s = Session::start(&[]);
    const FILES: usize = 12;
    for i in 0..FILES {
        let ask = format!("# @claude {i}: {}\n", "why ".repeat(700));
        std::fs::write(s.root.join(format!("long{i:02}.py")), ask).unwrap();
    }
    let ids: Vec<String> = (0..FILES)
        .map(|i| {
            let note = s.channel_ask(&format!("long{i:02}.py"));
            note["params"]["meta"]["replyTo"].as_str().unwrap().to_string()
        })
        .collect();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let deadline = Instant::now() + DEADLINE;
    while seen.len() < FILES {
        assert!(Instant::now() < deadline, "handed out only {} of {FILES}", seen.len());
        let out = s.hook(&s.input("PostToolUse", None).to_string(), &[]);
        let Some(text) = context(&out) else { continue };
        assert!(text.len() < 16 * 1024, "a hook text of {} bytes", text.len());
        for id in &ids {
            *seen.entry(id.clone()).or_default() += text.matches(&format!("id=\"{id}\"")).count();
        }
        seen.retain(|_, n| *n > 0);
    }
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
}
