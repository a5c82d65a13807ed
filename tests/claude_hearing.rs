//! Issue 29's proof with the real Claude Code, offline (tests/common/claude.rs): the filewatch
//! plugin installed from this repository's marketplace, default server flags, no channel flag
//! (channels never register offline), and the scripted model's request log as the ground
//! truth of what Claude heard. Skipped without `FILEWATCH_CLAUDE_BIN` (failed under `CI`).
//!
//! One session walks through idle from the start (the `SessionStart` asyncRewake hook wakes
//! it), idle after a turn (the `Stop` hook), busy (the next tool call's `PostToolUse` text) and
//! a burst of 20 asks (each id once in the conversation and in the transcript); two sessions
//! show asks saved while none ran, a pending ask surviving a killed session, and a marker git
//! brought in staying quiet; two at once on one root show that only the owner's session hears.
#![cfg(unix)] // shell-script wrappers, tmux, signals

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::claude::{self, Claude, Request, ScriptedApi};
use common::hearing::{
    after_tool_call, ask_counts, heard, model, news, tag_in, tool_calls_before, turns, Setup, BUSY,
    DEADLINE, HELLO, ONE_TOOL,
};
use serde_json::{json, Value};

/// How many of the transcripts' lines that entered a conversation (a message, an attachment;
/// not a queue operation: queued is not sent) hold each ask: a line holds an ask once however
/// many copies of its text it keeps (an attachment keeps its content and how it was rendered).
fn transcript_asks(claude: &Claude) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in claude.transcripts().lines() {
        let kind = serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| v["type"].as_str().map(str::to_string));
        if matches!(kind.as_deref(), Some("user" | "attachment" | "system")) {
            for id in ask_counts(line).into_keys() {
                *counts.entry(id).or_default() += 1;
            }
        }
    }
    counts
}

/// The Claude Code session a request belongs to (`metadata.user_id` holds its id).
fn session_of(request: &Request) -> String {
    let user: Value = request.body["metadata"]["user_id"]
        .as_str()
        .and_then(|u| serde_json::from_str(u).ok())
        .unwrap_or_default();
    user["session_id"].as_str().unwrap_or_default().to_string()
}

/// Each ask is in the conversations exactly once, all sessions of `apis` together: in no
/// request twice; once in the last request of the one session that heard it (a request
/// carries the whole conversation so far), and in no other session; and once among the
/// transcripts' lines that entered a conversation. Returns the ids.
fn each_once(apis: &[&ScriptedApi], claude: &Claude) -> Vec<String> {
    let mut last_of: BTreeMap<String, Request> = BTreeMap::new();
    let mut most: BTreeMap<String, usize> = BTreeMap::new();
    for r in apis.iter().flat_map(|api| turns(api)) {
        for (id, n) in ask_counts(&r.text) {
            let m = most.entry(id).or_default();
            *m = (*m).max(n);
        }
        last_of.insert(session_of(&r), r);
    }
    let twice: Vec<_> = most.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "asks in a request more than once: {twice:?}");
    let mut heard: BTreeMap<String, usize> = BTreeMap::new();
    for last in last_of.values() {
        for (id, n) in ask_counts(&last.text) {
            *heard.entry(id).or_default() += n;
        }
    }
    assert_eq!(
        heard.keys().collect::<Vec<_>>(),
        most.keys().collect::<Vec<_>>(),
        "the last request of each session holds every ask it heard"
    );
    assert!(heard.values().all(|n| *n == 1), "heard by more than one session: {heard:?}");
    // Claude Code writes a turn's prompt to the transcript as the request goes out: wait until
    // every ask heard is there, then count.
    let end = Instant::now() + DEADLINE;
    let mut transcript = transcript_asks(claude);
    while !heard.keys().all(|id| transcript.contains_key(id)) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50)); // polling the transcript files
        transcript = transcript_asks(claude);
    }
    assert_eq!(transcript, heard, "the transcripts' lines holding each ask");
    heard.into_keys().collect()
}

/// 1 → 2 → 3 → 5 → 8 in one session: idle from the start, idle after a turn, busy, a burst of
/// 20, and the tools' results beside the hooks' texts.
#[test]
fn one_session_hears_each_ask_once_idle_busy_and_in_a_burst() {
    let Some(bin) = claude::bin() else { return };
    let api = ScriptedApi::start();
    api.respond_with(model);
    let setup = Setup::new(&bin, &api);
    let mut session = setup.start("hear", true);

    // 1. Idle from the start: nothing typed; the SessionStart hook wakes the session.
    setup.save("idle.py", "def f():\n    # @claude explain f\n    return 1\n");
    let (woken, idle_id) = heard(&api, "idle.py");
    let text = news(&woken);
    assert!(text.contains("SessionStart:startup"), "woken by the SessionStart hook: {text:.600}");

    // 2. Idle after a turn: the Stop hook wakes it.
    session.prompt(HELLO);
    api.wait_for_request_containing(HELLO, DEADLINE);
    session.until("the answer", |s| s.contains("hello there"));
    setup.save("after.py", "x = 2  # @claude why two?\n");
    let (woken, after_id) = heard(&api, "after.py");
    let text = news(&woken);
    assert!(
        text.contains("Stop hook blocking error from command"),
        "woken by the Stop hook: {text:.600}"
    );

    // 3. Busy: an ask saved during the first of three sleeps is in the request after it (the
    // Stop hook of the turn before still waits: it hands the ask over at once, and Claude Code
    // puts its text in at the next request of the turn); one saved during the second sleep,
    // with no hook waiting, comes with the second tool call's PostToolUse text.
    session.prompt(BUSY);
    after_tool_call(&api, 0);
    setup.save("busy.py", "# @claude is this busy?\ny = 3\n");
    let (request, busy_id) = heard(&api, "busy.py");
    assert_eq!(
        tool_calls_before(&request),
        1,
        "heard after the first tool call: {}",
        news(&request)
    );
    after_tool_call(&api, 1);
    setup.save("busier.py", "# @claude and this?\ny = 4\n");
    let (request, busier_id) = heard(&api, "busier.py");
    assert_eq!(
        tool_calls_before(&request),
        2,
        "heard after the second tool call: {}",
        news(&request)
    );
    assert!(
        news(&request)
            .contains("PostToolUse:Bash hook additional context: filewatch: the user saved"),
        "{}",
        news(&request)
    );

    // 8. A hook never stands in a tool's way: each tool's result reaches the model beside the
    // hooks' texts; and the hooks print nothing but asks.
    session.until("the busy turn's end", |s| s.contains("three sleeps done"));
    for n in 1..=3 {
        let request = turns(&api)
            .into_iter()
            .find(|r| tool_calls_before(r) == n && news(r).contains("tool_result"))
            .unwrap();
        assert!(
            news(&request).contains(&format!("\"content\":\"step-{n}\"")),
            "tool {n}'s result: {}",
            news(&request)
        );
    }

    // 5. A burst of 20 asks while idle: each reaches the model, and each once.
    let burst: Vec<String> = (1..=20).map(|i| format!("burst{i:02}.py")).collect();
    for (i, file) in burst.iter().enumerate() {
        setup.save(file, &format!("# @claude burst ask {i}\nz = {i}\n"));
    }
    let ids: Vec<String> = burst.iter().map(|file| heard(&api, file).1).collect();
    keep_log("one-session", &[&api], &setup.claude);
    let once = each_once(&[&api], &setup.claude);
    assert_eq!(once.len(), 24, "{once:?}");
    for id in [&idle_id, &after_id, &busy_id, &busier_id].into_iter().chain(&ids) {
        assert!(once.contains(id), "{id}");
    }
    for r in turns(&api) {
        for (at, _) in r.text.match_indices("hook additional context: ") {
            assert!(
                r.text[at..].starts_with("hook additional context: filewatch: the user saved"),
                "{:.300}",
                &r.text[at..]
            );
        }
        assert!(!r.text.contains("hook error"), "a hook failed: {}", news(&r));
    }

    // 8. A hook whose server hangs (stopped) gives up on it: the tool's result still reaches
    // the model, and the hook prints nothing.
    let server = setup.endpoints()[0]["pid"].to_string();
    signal("STOP", &server);
    session.prompt(ONE_TOOL);
    session.until("the turn with a hung server", |s| s.contains("one echo done"));
    signal("CONT", &server);
    let request = turns(&api).into_iter().find(|r| news(r).contains("one-echo\",")).unwrap();
    assert!(news(&request).contains("tool_result"), "{}", news(&request));
    assert!(!news(&request).contains("hook"), "a hook said something: {}", news(&request));

    // Each heard ask is tagged with the id the model heard.
    let heard = [("idle.py", &idle_id), ("after.py", &after_id), ("busy.py", &busy_id)];
    for (file, id) in heard.into_iter().chain([("busier.py", &busier_id)]) {
        assert_eq!(&setup.tagged(file), id, "{file}");
    }
    for (file, id) in burst.iter().zip(&ids) {
        assert_eq!(&setup.tagged(file), id, "{file}");
    }
    session.exit();
}

/// With `FILEWATCH_HEARING_LOG=DIR`, writes what each turn request of `apis` added to the
/// conversation to `DIR/NAME.jsonl`, one request a line: the request log to quote.
fn keep_log(name: &str, apis: &[&ScriptedApi], claude: &Claude) {
    let Some(dir) = std::env::var_os("FILEWATCH_HEARING_LOG") else { return };
    let lines: String = apis
        .iter()
        .flat_map(|api| turns(api))
        .map(|r| format!("{}\n", json!({"session": session_of(&r), "news": news(&r)})))
        .collect();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(Path::new(&dir).join(format!("{name}.jsonl")), lines).unwrap();
    std::fs::write(Path::new(&dir).join(format!("{name}.transcripts.jsonl")), claude.transcripts())
        .unwrap();
}

/// Sends SIGNAL to the process `pid`.
fn signal(signal: &str, pid: &str) {
    let status = Command::new("kill").args([&format!("-{signal}"), pid]).status().unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// `git ARGS…` in `dir`, as a test user; panics if it fails.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// 7 then 4: an ask saved in a session whose hooks are disabled is never heard, so never
/// tagged; that session killed (SIGKILL) leaves it pending. With Claude Code closed, an ask is
/// saved and git brings in a commit with a marker. The next session hears both asks at its
/// start (the pending one under its first id) and never the marker git brought.
#[test]
fn asks_not_heard_or_saved_while_no_session_ran_reach_the_next_session() {
    let Some(bin) = claude::bin() else { return };
    let api = ScriptedApi::start();
    api.respond_with(model);
    let setup = Setup::new(&bin, &api);
    let project = setup.project();
    // A repository whose branch `upstream` adds a file with a marker, not checked out yet.
    std::fs::write(project.join(".gitignore"), ".claude/\n").unwrap();
    git(project, &["init", "-q"]);
    git(project, &["add", "-A"]);
    git(project, &["commit", "-qm", "base"]);
    git(project, &["checkout", "-qb", "upstream"]);
    std::fs::write(project.join("pulled.py"), "# @claude from git, not for you\n").unwrap();
    git(project, &["add", "pulled.py"]);
    git(project, &["commit", "-qm", "a marker from upstream"]);
    git(project, &["checkout", "-q", "main"]);

    // 7. Hooks disabled: the ask is announced (recorded) but not heard, and not tagged however
    // long its file stays quiet (a busy turn of three 2 s sleeps: past the 5 s settle time).
    setup
        .claude
        .project_settings(json!({"permissions": {"allow": ["Bash"]}, "disableAllHooks": true}));
    let mut session = setup.start("deaf", true);
    setup.save("pending.py", "def g():\n    # @claude document g\n    pass\n");
    let mut pending_id = String::new();
    setup.wait("pending.py's ask in the ledger", || {
        let found = setup.ledger().into_iter().find(|(_, r)| r["file"] == "pending.py");
        pending_id = found.map(|(id, _)| id).unwrap_or_default();
        !pending_id.is_empty()
    });
    session.prompt(BUSY);
    session.until("the busy turn's end", |s| s.contains("three sleeps done"));
    assert_eq!(api.count_containing(&pending_id), 0, "heard with the hooks disabled");
    assert!(tag_in(&setup.read("pending.py")).is_none(), "tagged though not heard");
    let pid = session.pid();
    signal("KILL", &pid.to_string());
    setup.wait_ended(pid);
    drop(session);
    assert!(tag_in(&setup.read("pending.py")).is_none(), "tagged though not heard");
    assert_eq!(setup.ledger()[&pending_id]["heard"], Value::Null, "{:?}", setup.ledger());

    // 4. Claude Code closed: an ask is saved, and git brings in a marker.
    setup.claude.project_settings(json!({"permissions": {"allow": ["Bash"]}}));
    setup.save("saved.py", "# @claude saved while closed\nw = 5\n");
    git(project, &["merge", "-q", "--ff-only", "upstream"]);
    assert!(setup.read("pulled.py").contains("@claude from git"));

    let before = turns(&api).len();
    let session = setup.start("next", true);
    let (woken, saved_id) = heard(&api, "saved.py");
    let (_, heard_pending) = heard(&api, "pending.py");
    assert_eq!(heard_pending, pending_id, "the pending ask, under its first id");
    let first = &turns(&api)[before];
    assert!(news(first).contains("SessionStart:startup"), "at the start: {}", news(first));
    assert!(news(&woken).contains("saved.py"), "{}", news(&woken));
    assert_eq!(setup.tagged("saved.py"), saved_id);
    assert_eq!(setup.tagged("pending.py"), pending_id);
    assert_eq!(api.count_containing("pulled.py"), 0, "git's marker reached the model");
    assert_eq!(setup.read("pulled.py"), "# @claude from git, not for you\n", "git's marker tagged");
    keep_log("saved-while-closed", &[&api], &setup.claude);
    each_once(&[&api], &setup.claude);
    session.exit();
}

/// 6: two sessions on one root. Only the owner's model hears an ask; the other's, though a
/// tool call of its own runs its PostToolUse hook after the save, hears nothing. Once the
/// owner exits, the other takes over and hears the next ask, and never the first again.
#[test]
fn with_two_sessions_on_a_root_only_the_owners_hears() {
    let Some(bin) = claude::bin() else { return };
    let (api_a, api_b) = (ScriptedApi::start(), ScriptedApi::start());
    api_a.respond_with(model);
    api_b.respond_with(model);
    let mut setup = Setup::new(&bin, &api_a);
    let a = setup.start("owner", true);
    setup.claude.use_api(&api_b);
    let mut b = setup.start("other", false);

    setup.save("two.py", "# @claude which session hears me?\n");
    let (_, id) = heard(&api_a, "two.py");
    b.prompt(ONE_TOOL);
    api_b.wait_for("the other session's request after its tool call", DEADLINE, |rs| {
        rs.iter().find(|r| news(r).contains("one-echo") && news(r).contains("tool_result")).cloned()
    });
    b.until("the other session's turn to end", |s| s.contains("one echo done"));
    let heard_by_b: Vec<_> = turns(&api_b).iter().flat_map(|r| ask_counts(&r.text)).collect();
    assert_eq!(heard_by_b, vec![], "the other session heard an ask");
    assert_eq!(api_b.count_containing(&id), 0);
    assert_eq!(setup.tagged("two.py"), id);

    // The owner exits: the other session's server takes over, and its session hears the next.
    let pid = a.pid();
    a.exit();
    setup.wait("the other session's server to own the root", || {
        Path::new(&format!("/proc/{pid}")).exists().then_some(()).is_none()
            && setup.endpoints().iter().any(|e| e["owner"] == true)
    });
    setup.save("three.py", "# @claude and now?\n");
    let (_, next) = heard(&api_b, "three.py");
    assert_eq!(setup.tagged("three.py"), next);
    assert_eq!(api_b.count_containing(&id), 0, "the first ask heard again");
    keep_log("two-sessions", &[&api_a, &api_b], &setup.claude);
    each_once(&[&api_a, &api_b], &setup.claude);
    drop(a);
    b.exit();
}
