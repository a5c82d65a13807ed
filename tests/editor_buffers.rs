//! Issue 34 without a browser: what filewatch-mcp writes into a file an editor holds in a
//! buffer, driven as VS Code drives the disk (tests/vscode has the real one).
//! - B: a heard ask's tag is written right after a save that left the ask's lines alone (the
//!   user works elsewhere: VS Code's reload moves only a cursor on a changed line), at most
//!   twice when the editor writes its buffer back over it, else after `--tag-after`; a tag
//!   the user takes out again (undo) is not written again.
//! - C: a root whose VS Code saves after a delay starts autosaving: its first ask is not
//!   announced cut in half.
//! - D: a resolved marker an editor writes back (Overwrite after a resolve) stays resolved.
//!
//! Absence is proven with a barrier: another file whose tag is due later than the one that
//! must not come.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::mcp::{handshake, Server};
use common::WatchProcess;
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(30);

struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        Project { _dir: dir, root }
    }

    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.root.join(file), text).unwrap();
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.root.join(file)).unwrap()
    }

    /// Waits until `file` holds `want` (a tag lands a moment after the save that allows it).
    fn wait_for(&self, file: &str, want: &str) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let now = self.read(file);
            if now == want {
                return;
            }
            assert!(Instant::now() < deadline, "{file}: {now:?}, not {want:?}");
            std::thread::sleep(Duration::from_millis(20)); // polling the file
        }
    }
}

/// `watch` with a quick settle and the default `--tag-after` (10 minutes: never, in a test).
fn watch(p: &Project, env: &[(&str, &Path)]) -> WatchProcess {
    let args = ["--debounce", "100ms", "--settle", "300ms", "--log-level", "debug"];
    let mut env = env.to_vec();
    env.push(("FILEWATCH_TAG_AFTER", Path::new("10m")));
    WatchProcess::start(&p.root, &args, &env, DEADLINE)
}

fn next_ask(w: &WatchProcess) -> Value {
    w.asks.recv_timeout(DEADLINE).expect("an ask")
}

/// Saves an ask in `file` (`before` + the ask + `after`), then a line elsewhere, and waits for
/// its tag: a barrier for every tag that was due before. Returns the ask's id.
fn tagged_barrier(p: &Project, w: &WatchProcess, file: &str) -> String {
    p.write(file, "# @claude barrier\n");
    let ask = next_ask(w);
    assert_eq!(ask["file"], file, "{ask}");
    let id = ask["id"].as_str().unwrap().to_string();
    p.write(file, "# @claude barrier\nx = 1\n");
    p.wait_for(file, &format!("# @claude[{id}] barrier\nx = 1\n"));
    id
}

/// B: no tag while the user's saves touch the ask (or none comes), a tag right after a save
/// elsewhere; taken out again by an undo, it is not written again.
#[test]
fn a_tag_waits_for_a_save_elsewhere_and_an_undone_tag_stays_out() {
    let p = Project::new();
    p.write("a.py", "x = 1\n\ny = 2\n");
    let w = watch(&p, &[]);
    let asked = "x = 1\n# @claude why one?\ny = 2\n";
    p.write("a.py", asked);
    let id = next_ask(&w)["id"].as_str().unwrap().to_string();
    tagged_barrier(&p, &w, "b1.py");
    assert_eq!(p.read("a.py"), asked, "a.py tagged with no save elsewhere in it");

    // The user goes on below the ask: the tag lands.
    let below = "x = 1\n# @claude why one?\ny = 2\nz = 3\n";
    p.write("a.py", below);
    let tagged = format!("x = 1\n# @claude[{id}] why one?\ny = 2\nz = 3\n");
    p.wait_for("a.py", &tagged);

    // Ctrl+Z, Ctrl+S: the file as it was before the tag. Not fought over.
    let _ = w.log.try_iter().count(); // what it said before
    p.write("a.py", below);
    w.log_until("a.py: 1 marker(s)", DEADLINE); // seen: the next save is another one
    p.write("a.py", &format!("{below}w = 4\n")); // and a save elsewhere after it
    tagged_barrier(&p, &w, "b2.py");
    assert_eq!(p.read("a.py"), format!("{below}w = 4\n"), "the undone tag was written again");
    let more: Vec<Value> = w.asks.try_iter().collect();
    assert!(more.is_empty(), "asked again: {more:?}");
}

/// B: an editor that writes its buffer back over the tag (VS Code with unsaved typing) gets it
/// again at the next save elsewhere — twice at most; then only `--tag-after` is left.
#[test]
fn a_tag_written_over_by_a_stale_buffer_is_tried_twice() {
    let p = Project::new();
    let w = watch(&p, &[]);
    p.write("a.py", "# @claude why?\nx = 1\n");
    let id = next_ask(&w)["id"].as_str().unwrap().to_string();
    let mut text = "# @claude why?\nx = 1\n".to_string();
    for n in 2..=4 {
        text.push_str(&format!("x = {n}\n")); // typed below, unsaved while the tag lands
        p.write("a.py", &text);
        if n < 4 {
            p.wait_for("a.py", &text.replace("@claude", &format!("@claude[{id}]")));
        }
    }
    tagged_barrier(&p, &w, "b.py");
    assert_eq!(p.read("a.py"), text, "a third tag at a save elsewhere");
    let more: Vec<Value> = w.asks.try_iter().collect();
    assert!(more.is_empty(), "asked again: {more:?}");
}

/// B: with no save elsewhere, the tag comes `--tag-after` after the last save.
#[test]
fn with_no_save_elsewhere_the_tag_comes_after_tag_after() {
    let p = Project::new();
    let args = ["--debounce", "100ms", "--settle", "300ms", "--tag-after", "1s"];
    let w = WatchProcess::start(&p.root, &args, &[], DEADLINE);
    p.write("a.py", "# @claude why?\n");
    let id = next_ask(&w)["id"].as_str().unwrap().to_string();
    p.wait_for("a.py", &format!("# @claude[{id}] why?\n"));
}

/// C: VS Code's user settings (JSONC) say `files.autoSave: afterDelay`: the first ask on a
/// fresh root waits for its text to settle instead of going out at its first autosave.
#[test]
fn vscode_autosave_in_the_settings_starts_the_root_autosaving() {
    let p = Project::new();
    let home = tempfile::tempdir().unwrap();
    let user = home.path().join(".config/Code/User");
    std::fs::create_dir_all(&user).unwrap();
    let settings = "{\n  // saved for me\n  \"files.autoSave\": \"afterDelay\",\n  \
                    \"files.autoSaveDelay\": 1000, /* ms */\n}\n";
    std::fs::write(user.join("settings.json"), settings).unwrap();
    let config = home.path().join(".config");
    let data = home.path().join(".local/share");
    let env = [("HOME", home.path()), ("XDG_CONFIG_HOME", &config), ("XDG_DATA_HOME", &data)];
    let args = ["--debounce", "100ms", "--settle", "3s", "--log-level", "debug"];
    let w = WatchProcess::start(&p.root, &args, &env, DEADLINE);
    // Autosave writes the ask in pieces as it is typed, then the code after it.
    for text in [
        "x = 1\n# @claude why does total\n",
        "x = 1\n# @claude why does total not skip None?\n",
        "x = 1\n# @claude why does total not skip None?\nprint(total([1]))\n",
    ] {
        p.write("a.py", text);
        w.log_until("a.py: 1 marker(s)", DEADLINE); // seen: the next piece is the next save
    }
    let first = next_ask(&w);
    assert_eq!(first["text"], "@claude why does total not skip None?", "{first}");
}

/// D: Claude resolves the ask; the editor's buffer (Overwrite) writes the tagged marker back.
/// It stays resolved: not announced, not listed as pending, nothing written over it.
#[test]
fn a_resolved_marker_written_back_stays_resolved() {
    let p = Project::new();
    let state = tempfile::tempdir().unwrap();
    let mut s = Server::start_with_args(&p.root, state.path(), Stdio::inherit(), &[]);
    handshake(&mut s);
    p.write("a.py", "# @claude why?\nx = 1\n");
    let note = s.note(|n| n["params"]["meta"]["file"] == "a.py");
    let id = note["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    s.hear_all(3);
    let tagged = format!("# @claude[{id}] why?\nx = 1\n");
    p.wait_for("a.py", &tagged);
    let resolved = s.call(4, "resolve_ask", serde_json::json!({ "id": id }));
    assert_ne!(resolved["isError"], true, "{resolved}");
    assert_eq!(p.read("a.py"), "x = 1\n");
    let back = format!("{tagged}y = 2\n"); // the buffer, with what the user typed since
    p.write("a.py", &back);
    p.write("b.py", "# @claude barrier\n");
    s.note(|n| n["params"]["meta"]["file"] == "b.py");
    let listed = s.call(5, "list_asks", serde_json::json!({}));
    let text = listed["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let pending: Value = serde_json::from_str(&text).unwrap_or_default();
    assert!(pending["pending"].is_array(), "list_asks said {listed}");
    let ids: Vec<&str> = pending["pending"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert!(!ids.contains(&id.as_str()), "the resolved ask is listed as pending: {text}");
    let again: Vec<&Value> =
        s.notes.iter().filter(|n| n["params"]["meta"]["file"] == "a.py").skip(1).collect();
    assert!(again.is_empty(), "announced again: {again:?}");
    assert_eq!(p.read("a.py"), back, "written over");
}

/// D: resolved before its tag was written (no save elsewhere yet), the ask comes back
/// untagged from the editor's buffer with code typed below it: no tag is written over it.
#[test]
fn a_resolved_ask_written_back_before_its_tag_gets_none() {
    let p = Project::new();
    let state = tempfile::tempdir().unwrap();
    let args = ["--tag-after", "10m"];
    let mut s = Server::start_with_args(&p.root, state.path(), Stdio::inherit(), &args);
    handshake(&mut s);
    p.write("a.py", "# @claude why?\nx = 1\n");
    let note = s.note(|n| n["params"]["meta"]["file"] == "a.py");
    let id = note["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    s.hear_all(3);
    let resolved = s.call(4, "resolve_ask", serde_json::json!({ "id": id }));
    assert_ne!(resolved["isError"], true, "{resolved}");
    assert_eq!(p.read("a.py"), "x = 1\n");
    let back = "# @claude why?\nx = 1\ny = 2\n"; // the buffer, and code typed below
    p.write("a.py", back);
    // The barrier: an ask heard, then a save elsewhere in its file, then its tag.
    p.write("b.py", "# @claude barrier\n");
    let note = s.note(|n| n["params"]["meta"]["file"] == "b.py");
    let b = note["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    s.hear_all(5);
    p.write("b.py", "# @claude barrier\nx = 1\n");
    p.wait_for("b.py", &format!("# @claude[{b}] barrier\nx = 1\n"));
    assert_eq!(p.read("a.py"), back, "a tag written into the resolved ask");
}
