//! Real editors that keep the file open, driven in tmux as a person does (`send-keys`,
//! `capture-pane`): open a file, type an ask, save, keep typing, save again (answering the
//! editor's "changed on disk" question where it asks one), save a third time. With `--tag file`:
//! exactly one ask, one id, whatever the stale buffer writes back. With `--tag never`: the same,
//! and the editor never has anything to warn about.
//!
//! Skipped (with a message) where tmux or an editor is missing; `.ci/run` installs them.
#![cfg(unix)]

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::tmux::{has, Tmux};
use common::WatchProcess;
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(20);

static SENTINELS: AtomicUsize = AtomicUsize::new(0);

/// `filewatch-mcp watch --json` on a fresh tree.
struct Watcher {
    process: WatchProcess,
    root: PathBuf,
    _dir: tempfile::TempDir,
    _state: tempfile::TempDir,
}

impl Watcher {
    fn start(tag: &str) -> Watcher {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let args = ["--debounce", "150ms", "--tag", tag];
        let env = [("FILEWATCH_STATE_DIR", state.path())];
        let process = WatchProcess::start(&root, &args, &env, DEADLINE);
        Watcher { process, root, _dir: dir, _state: state }
    }

    fn ask(&self) -> Value {
        self.process.asks.recv_timeout(DEADLINE).expect("an ask")
    }

    /// Every ask up to a sentinel file's (not returned): what the earlier saves produced.
    fn asks_until_barrier(&self) -> Vec<Value> {
        // A new file each time: the same text saved again would be the same ask.
        let name = format!("sentinel-{}.py", SENTINELS.fetch_add(1, Ordering::Relaxed));
        std::fs::write(self.root.join(&name), "# @claude sentinel\n").unwrap();
        let mut got = Vec::new();
        loop {
            let a = self.ask();
            if a["file"] == name.as_str() {
                return got;
            }
            got.push(a);
        }
    }
}

/// How each editor is opened, moved to the end, made to type a new line, and made to save.
struct Editor {
    name: &'static str,
    command: &'static [&'static str],
    /// Keys that open a new line at the end of the file, ready for text.
    new_line: &'static [&'static str],
    /// What the screen shows once the editor is ready for text (insert mode, a modified
    /// buffer).
    typing: &'static str,
    /// Keys that leave typing and save.
    save: &'static [&'static str],
}

const EDITORS: &[Editor] = &[
    Editor {
        name: "vim",
        command: &["vim", "-N", "-u", "NONE", "-i", "NONE", "-n"],
        new_line: &["G", "o"],
        typing: "-- INSERT --",
        save: &["Escape", ":w", "Enter"],
    },
    Editor {
        name: "nvim",
        command: &["nvim", "-u", "NONE", "-i", "NONE", "-n"],
        new_line: &["G", "o"],
        typing: "-- INSERT --",
        save: &["Escape", ":w", "Enter"],
    },
    Editor {
        name: "emacs",
        command: &["emacs", "-nw", "-Q"],
        new_line: &["M->", "Enter"],
        typing: "**-", // the mode line of a modified buffer
        save: &["C-x", "C-s"],
    },
];

/// One editor, one mode: type an ask, save, type more, save, type more, save. Returns the
/// screen after the second save and the questions the editor asked.
fn session(editor: &Editor, tag: &str) -> (String, Vec<String>) {
    let w = Watcher::start(tag);
    let file = w.root.join("notes.py");
    std::fs::write(&file, "x = 1\n").unwrap();
    assert!(w.asks_until_barrier().is_empty());
    let mut command: Vec<&str> = editor.command.to_vec();
    command.push("notes.py");
    let mut t = Tmux::start(editor.name, &command, &w.root);
    t.until("the file", |s| s.contains("x = 1"));

    let mut id = String::new();
    let mut second_screen = String::new();
    for (i, line) in ["# @claude explain this module", "y = 2", "z = 3"].into_iter().enumerate() {
        t.keys(editor.new_line);
        t.until("typing", |s| s.contains(editor.typing));
        t.type_text(line);
        t.keys(editor.save);
        // Saved once the file on disk holds the new line.
        let screen =
            t.until("the save", |_| std::fs::read_to_string(&file).unwrap().contains(line));
        if i == 0 {
            let ask = w.ask();
            assert_eq!(ask["text"], "@claude explain this module", "{}", editor.name);
            id = ask["id"].as_str().expect("an id").to_string();
        }
        if i == 1 {
            second_screen = screen;
        }
    }
    let later = w.asks_until_barrier();
    assert!(later.is_empty(), "{} --tag {tag}: asked again: {later:?}", editor.name);
    let on_disk = std::fs::read_to_string(&file).unwrap();
    assert!(on_disk.contains("@claude"), "{on_disk}");
    if tag == "never" {
        assert!(!on_disk.contains(&id), "--tag never wrote the id into the file: {on_disk}");
    }
    (second_screen, t.asked.clone())
}

#[test]
fn editors_that_keep_the_file_open_ask_once() {
    if !has("tmux") {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let mut tried = Vec::new();
    for editor in EDITORS {
        if !has(editor.command[0]) {
            eprintln!("SKIPPED {}: not installed", editor.name);
            continue;
        }
        for tag in ["file", "never"] {
            let (screen, asked) = session(editor, tag);
            eprintln!(
                "---- {} --tag {tag}: asked {asked:?}; screen after the second save:\n{screen}",
                editor.name
            );
            if tag == "never" {
                assert!(
                    asked.is_empty(),
                    "{}: --tag never still made it ask {asked:?}",
                    editor.name
                );
            }
            tried.push(format!("{} --tag {tag}", editor.name));
        }
    }
    eprintln!("editors tried: {tried:?}");
    if std::env::var_os("CI").is_some() {
        assert_eq!(tried.len(), 6, "CI installs tmux, vim, nvim and emacs; tried only {tried:?}");
    }
}
