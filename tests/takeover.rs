//! Issue 30 (12): three sessions (servers) on one root; the owner is killed with SIGKILL in the
//! middle of a burst of saves, while it reads and records them. Whatever it had not sent yet
//! is announced by the next owner: no ask is lost, round after round.
#![cfg(unix)]

mod common;

use std::collections::HashSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::mcp::{Server, DISCOVER, INITIALIZE, INITIALIZED, TOOLS_LIST};
use serde_json::Value;

/// How many files with an ask each round saves at once.
const BURST: usize = 16;

/// The handshake, answered in any order (a standby's notice may come first).
fn handshake(s: &mut Server) {
    s.send(DISCOVER);
    s.reply_str("server-discover-probe-1");
    s.send(INITIALIZE);
    s.reply(0);
    s.send(INITIALIZED);
    s.send(TOOLS_LIST);
    s.reply(1);
}

/// The ask texts among `lines` (raw stdout lines of a server).
fn ask_texts(lines: impl IntoIterator<Item = Value>) -> Vec<String> {
    lines
        .into_iter()
        .filter(|n| n["method"] == "notifications/claude/channel")
        .filter(|n| n["params"]["meta"].get("notice").is_none())
        .filter_map(|n| Some(n["params"]["content"].as_str()?.to_string()))
        .collect()
}

/// Reads what `s` wrote so far (without waiting) into its notes; its ask texts.
fn drain_now(s: &mut Server) -> Vec<String> {
    while let Ok(line) = s.lines.try_recv() {
        s.notes.push(serde_json::from_str(&line).unwrap());
    }
    ask_texts(s.notes.iter().cloned())
}

/// One round: A owns the root, B and C stand by; a burst of saves, and A is killed after it
/// announced `kill_after` of them. Returns the asks no session announced.
fn round(n: usize, kill_after: usize) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut a = Server::start_in(&root, state.path(), Stdio::null());
    handshake(&mut a);
    std::fs::write(root.join("probe.py"), "# @claude probe\n").unwrap();
    a.note(|v| v["method"] == "notifications/claude/channel");
    let mut standbys: Vec<Server> = (0..2)
        .map(|_| {
            let mut s = Server::start_in(&root, state.path(), Stdio::null());
            handshake(&mut s);
            s.note(|v| v["params"]["meta"]["notice"].is_string());
            s
        })
        .collect();
    let want: Vec<String> = (0..BURST).map(|i| format!("@claude round {n} ask {i}")).collect();
    for (i, text) in want.iter().enumerate() {
        std::fs::write(root.join(format!("f{i}.py")), format!("x = {i}\n# {text}\n")).unwrap();
    }
    let mut seen = 0;
    while seen < kill_after {
        let v = a.json();
        if v["method"] == "notifications/claude/channel"
            && v["params"]["content"] != "@claude probe"
        {
            seen += 1;
        }
        a.notes.push(v);
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGKILL) };
    a.wait_exit();
    let mut heard: HashSet<String> = drain_now(&mut a).into_iter().collect();
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline && want.iter().any(|t| !heard.contains(t)) {
        for s in &mut standbys {
            if let Ok(line) = s.lines.recv_timeout(Duration::from_millis(100)) {
                s.notes.push(serde_json::from_str(&line).unwrap());
            }
            heard.extend(ask_texts(s.notes.iter().cloned()));
        }
    }
    want.into_iter().filter(|t| !heard.contains(t)).collect()
}

#[test]
fn an_owner_killed_mid_burst_loses_no_ask() {
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut lost = Vec::new();
    let mut rounds = 0;
    while rounds < 16 && Instant::now() < deadline {
        let missing = round(rounds, 1 + rounds % 4);
        eprintln!("round {rounds}: {} lost {missing:?}", missing.len());
        lost.extend(missing);
        rounds += 1;
    }
    assert!(rounds >= 2, "only {rounds} rounds in the time");
    assert!(lost.is_empty(), "{} asks lost in {rounds} rounds: {lost:?}", lost.len());
}
