//! The real Claude Code, offline (tests/common/claude.rs): what hooks print reaches the model.
//! A session whose settings hold a `Stop` hook with `asyncRewake` and a `PostToolUse` hook
//! adding context; the scripted model answers a typed prompt with three `Bash(sleep 2)` calls,
//! then text. The request log shows each tool call's context, and the rewake turn after it.
//! Skipped without `FILEWATCH_CLAUDE_BIN` (failed under `CI`).
#![cfg(unix)] // the hook stubs are shell scripts; tmux

mod common;

use std::path::Path;
use std::time::Duration;

use common::claude::{self, Claude, Reply, ScriptedApi};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(60);

/// An executable shell script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn hook_texts_reach_the_model_in_a_busy_turn_and_after_it() {
    let Some(bin) = claude::bin() else { return };
    let api = ScriptedApi::start();
    api.push([
        Reply::bash("sleep 2"),
        Reply::bash("sleep 2"),
        Reply::bash("sleep 2"),
        Reply::text("three sleeps done"),
    ]);
    let claude = Claude::new(&bin, &api);
    let context = script(
        claude.dir(),
        "post-tool-use",
        r#"cat >/dev/null
echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"fw-ctx0001 heard in the turn"}}'"#,
    );
    // Wakes the session once, after the first turn only (a second wake would loop forever).
    let rewake = script(
        claude.dir(),
        "stop-rewake",
        r#"grep -q '"stop_hook_active":true' && exit 0
echo 'fw-rwk0001 heard while idle' >&2
exit 2"#,
    );
    claude.project_settings(json!({
        "permissions": {"allow": ["Bash"]},
        "hooks": {
            "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": context}]}],
            "Stop": [{"hooks": [{"type": "command", "command": rewake, "asyncRewake": true}]}],
        },
    }));

    let mut session = claude.interactive("busy", &[]);
    session.prompt("run three sleeps");

    // Each tool result is followed by the hook's text: the request after the Nth tool call
    // holds it N times (the conversation so far is sent again each time).
    api.wait_for_request_containing("three sleeps done", DEADLINE);
    let context_line = "PostToolUse:Bash hook additional context: fw-ctx0001 heard in the turn";
    let turns: Vec<_> = api.requests().into_iter().filter(|r| r.is_turn()).collect();
    let counts: Vec<usize> = turns.iter().map(|r| r.text.matches(context_line).count()).collect();
    assert!(
        counts.starts_with(&[0, 1, 2, 3]),
        "hook texts per request {counts:?}, expected 0, 1, 2, 3 in the busy turn:\n{}",
        claude::summary(&api.requests())
    );

    // The Stop hook's stderr wakes the idle session: a turn of its own.
    let woken = api.wait_for_request_containing(
        "Stop hook blocking error from command \\\"Stop\\\": fw-rwk0001 heard while idle",
        DEADLINE,
    );
    assert!(woken.is_turn());
    // Claude Code writes its transcript beside the request, not before it: wait for the line.
    let deadline = std::time::Instant::now() + DEADLINE;
    while !claude.transcripts().contains("fw-rwk0001") {
        assert!(std::time::Instant::now() < deadline, "the rewake is in the transcript");
        std::thread::sleep(Duration::from_millis(50));
    }
    session.exit();
}

#[test]
fn the_plugin_installs_from_this_repository_and_its_server_reaches_the_model() {
    let Some(bin) = claude::bin() else { return };
    let api = ScriptedApi::start();
    let mut claude = Claude::new(&bin, &api);
    claude.install_plugin(Path::new(&common::bin()));
    let out = claude.print("hi", &[]);
    assert!(out.status.success(), "claude -p: {}", String::from_utf8_lossy(&out.stderr));
    // The model is offered the server's tools (`-p` waits for its MCP servers).
    let request = api.wait_for_request_containing("mcp__plugin_filewatch_filewatch__", DEADLINE);
    assert!(request.is_turn());
}
