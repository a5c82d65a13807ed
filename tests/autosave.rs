//! Editors that save while their user types, as a person types into them, against
//! `filewatch-mcp watch --json` with its default flags on a fresh root:
//! - an emulation of VS Code's `files.autoSave: afterDelay` rules: the buffer is written in
//!   place 1 s after the last keystroke; a clean buffer is reloaded when the file changes on
//!   disk; a save over a file whose modification time changed under a dirty buffer is a
//!   conflict (VS Code refuses it: "the content of the file is newer"; a tag keeps the time);
//! - real Emacs (`auto-save-visited-mode`, 1 s, with `global-auto-revert-mode`) and real Neovim
//!   (writing on `CursorHold`/`CursorHoldI`, `updatetime=1000`), in tmux.
//!
//! Each ask is typed in bursts with pauses longer than the autosave delay, then code is typed
//! below it. Each ask must reach Claude once, with its whole text, under one id (at most one
//! fragment before it, on the first three asks of the root — the evidence that it autosaves —
//! revised under the same id); no conflict, no changed-on-disk question; every typed line in
//! the file at the end. Then what is learned, and how: repeated evidence, never a quick fix or
//! a program's storm of saves, said with the root's path, reset by `autosave reset`; the
//! user's typing pause, not the time between saves.
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use common::tmux::{has, Tmux, QUESTIONS};
use common::WatchProcess;
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(30);

/// The emulated editor writes its buffer this long after the last keystroke.
const AUTOSAVE_DELAY: Duration = Duration::from_secs(1);

/// How long a keystroke takes (a quick typist).
const KEYSTROKE: Duration = Duration::from_millis(50);

/// The asks typed, each in three bursts, and the thinking pauses between the bursts (0.5–2 s;
/// the first ask's first pause is longer than the autosave delay, so its first words are saved
/// alone, as they are on a root nothing was learned of yet).
const ASKS: [(&[&str; 3], [u64; 2]); 5] = [
    (&["please refactor", " f1 into", " a generator expression"], [1500, 2000]),
    (&["explain why", " g returns x", " unchanged"], [2000, 1200]),
    (&["add a docstring", " to h with", " an example"], [1800, 500]),
    (&["is this loop", " quadratic in", " the worst case"], [1100, 1900]),
    (&["rename tmp to", " something that says", " what it holds"], [1400, 1600]),
];

/// An editor with VS Code's autosave rules, typing at the end of its current line.
struct Emulated {
    path: PathBuf,
    lines: Vec<String>,
    /// The bytes on disk as the editor last wrote or loaded them, and their modification time.
    known: Vec<u8>,
    known_mtime: SystemTime,
    dirty: bool,
    last_key: Instant,
    cursor: usize,
    /// Saves refused because the file changed under the dirty buffer.
    conflicts: usize,
    /// Clean buffers reloaded because the file changed on disk.
    reloads: usize,
}

/// The file's modification time.
fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

impl Emulated {
    fn open(path: &Path) -> Emulated {
        let known = std::fs::read(path).unwrap();
        let text = String::from_utf8(known.clone()).unwrap();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let cursor = lines.len().saturating_sub(1);
        Emulated {
            path: path.to_path_buf(),
            lines,
            known,
            known_mtime: mtime(path),
            dirty: false,
            last_key: Instant::now(),
            cursor,
            conflicts: 0,
            reloads: 0,
        }
    }

    fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// What the editor does on its own: reload a clean buffer the disk changed under; write a
    /// dirty one once the keys have been still for the autosave delay.
    fn tick(&mut self) {
        let disk = std::fs::read(&self.path).unwrap();
        if !self.dirty && disk != self.known {
            let text = String::from_utf8(disk.clone()).unwrap();
            self.lines = text.lines().map(str::to_string).collect();
            self.cursor = self.cursor.min(self.lines.len().saturating_sub(1));
            self.known = disk;
            self.known_mtime = mtime(&self.path);
            self.reloads += 1;
            return;
        }
        if self.dirty && self.last_key.elapsed() >= AUTOSAVE_DELAY {
            if mtime(&self.path) != self.known_mtime {
                // VS Code refuses the save over a newer file; the user picks "Overwrite".
                eprintln!("conflict: the file is newer on disk than the dirty buffer");
                self.conflicts += 1;
            }
            let text = self.text();
            std::fs::write(&self.path, &text).unwrap(); // in place: truncate and write
            self.known = text.into_bytes();
            self.known_mtime = mtime(&self.path);
            self.dirty = false;
        }
    }

    /// Lets `d` pass, the editor doing what it does on its own meanwhile.
    fn idle(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.tick();
            std::thread::sleep(Duration::from_millis(20)); // the editor's own clock
        }
    }

    fn key(&mut self, c: char) {
        self.idle(KEYSTROKE);
        if c == '\n' {
            self.cursor += 1;
            self.lines.insert(self.cursor, String::new());
        } else {
            self.lines[self.cursor].push(c);
        }
        self.dirty = true;
        self.last_key = Instant::now();
    }

    fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.key(c);
        }
    }
}

/// Every ask printed until `done(asks so far)` holds (or the deadline passes).
fn asks_until(watch: &WatchProcess, got: &mut Vec<Value>, done: impl Fn(&[Value]) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done(got) && Instant::now() < deadline {
        if let Ok(ask) = watch.asks.recv_timeout(Duration::from_millis(200)) {
            eprintln!("ask: {ask}");
            got.push(ask);
        }
    }
}

/// The asks by id, in the order they came: each id's texts.
fn by_id(asks: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in asks {
        let id = a["id"].as_str().expect("every ask has an id").to_string();
        ids.entry(id).or_default().push(a["text"].as_str().unwrap().to_string());
    }
    ids
}

/// How many asks are seen growing from save to save before a root is taken to autosave: each
/// of them may reach Claude in part first.
const LEARNING: usize = 3;

/// Checks the asks against what was typed: one id per ask, ending with its whole text; at
/// most one fragment of each of the first [`LEARNING`] asks, before its whole text (which says
/// it is a revision), and none after.
fn check_asks(editor: &str, asks: &[Value], typed: &[String]) {
    let ids = by_id(asks);
    assert_eq!(ids.len(), typed.len(), "{editor}: one id per ask: {ids:?}");
    for whole in typed {
        let (id, texts) = ids
            .iter()
            .find(|(_, texts)| texts.last() == Some(whole))
            .unwrap_or_else(|| panic!("{editor}: {whole:?} never came whole: {ids:?}"));
        assert!(texts.len() <= 2, "{editor}: {id} came {} times: {texts:?}", texts.len());
        if texts.len() == 2 {
            let learning = &typed[..LEARNING.min(typed.len())];
            assert!(
                learning.contains(whole),
                "{editor}: a fragment of {whole:?}, after the switch"
            );
            let revised = asks.iter().rfind(|a| a["id"] == id.as_str()).unwrap();
            assert_eq!(revised["revised"], true, "{editor}: the whole text does not say so");
        }
    }
    let fragments = asks.len() - typed.len();
    assert!(fragments <= LEARNING, "{editor}: {fragments} fragments announced");
    eprintln!(
        "{editor}: {} asks, {} ids, {fragments} superseded fragment(s)",
        asks.len(),
        ids.len()
    );
}

#[test]
fn an_emulated_autosaving_editor_gets_each_ask_once_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let path = root.join("work.py");
    std::fs::write(&path, "def f1(xs):\n    return [x * 2 for x in xs]\n").unwrap();
    let watch = WatchProcess::start(&root, &[], &[], DEADLINE);
    let mut editor = Emulated::open(&path);
    let mut typed = Vec::new();
    let mut asks = Vec::new();
    for (i, (bursts, pauses)) in ASKS.iter().enumerate() {
        editor.key('\n');
        editor.type_text("# @claude ");
        for (b, burst) in bursts.iter().enumerate() {
            editor.type_text(burst);
            if let Some(&pause) = pauses.get(b) {
                editor.idle(Duration::from_millis(pause));
            }
        }
        typed.push(format!("@claude {}", bursts.concat()));
        editor.idle(Duration::from_millis(1200)); // the editor saves the whole ask
        editor.type_text(&format!("\nv{i} = {i}"));
        editor.idle(Duration::from_secs(5));
    }
    editor.idle(AUTOSAVE_DELAY + Duration::from_millis(200));
    asks_until(&watch, &mut asks, |got| {
        typed.iter().all(|t| got.iter().any(|a| a["text"] == t.as_str()))
    });
    // Anything more would come within the settle time.
    let settle = Instant::now() + Duration::from_secs(6);
    asks_until(&watch, &mut asks, |_| Instant::now() >= settle);
    eprintln!("emulated: {} conflicts, {} reloads", editor.conflicts, editor.reloads);
    check_asks("emulated", &asks, &typed);
    assert_eq!(editor.conflicts, 0, "a tag was written under the dirty buffer");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), editor.text(), "typed lines lost");
}

/// `text` without the tags in it (`[fw-` and 8 hex digits and `]`).
fn untagged(text: &str) -> String {
    let mut out = text.to_string();
    while let Some(at) = out.find("[fw-") {
        out.replace_range(at..at + "[fw-12345678]".len(), "");
    }
    out
}

/// How a real editor is made to autosave, and to type a new line at the end.
struct RealEditor {
    name: &'static str,
    command: &'static [&'static str],
    /// Keys that put the cursor on a new line at the end of the file, ready for text.
    new_line: &'static [&'static str],
}

const REAL_EDITORS: &[RealEditor] = &[
    RealEditor {
        name: "emacs",
        command: &[
            "emacs",
            "-nw",
            "-Q",
            "--eval",
            "(progn (setq auto-save-visited-interval 1) (auto-save-visited-mode 1) \
             (setq auto-revert-interval 1) (global-auto-revert-mode 1))",
        ],
        new_line: &["M->", "Enter"],
    },
    RealEditor {
        name: "nvim",
        command: &[
            "nvim",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-n",
            "--cmd",
            "set updatetime=1000",
            "-c",
            "autocmd CursorHold,CursorHoldI * silent! update",
        ],
        new_line: &["G", "o"],
    },
];

/// Types `text` one key at a time, as a person does.
fn type_slowly(t: &Tmux, text: &str) {
    for c in text.chars() {
        t.type_text(&c.to_string());
        std::thread::sleep(KEYSTROKE); // a keystroke's time
    }
}

/// Waits `d`, watching the screen: every question the editor asks meanwhile is recorded (and
/// answered, so the session can go on and the test can say what it saw).
fn watch_screen(t: &mut Tmux, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        let screen = t.screen();
        if QUESTIONS.iter().any(|(q, _)| screen.contains(q)) {
            t.until("the question answered", |_| true);
        }
        std::thread::sleep(Duration::from_millis(50)); // polling the screen
    }
}

#[test]
fn real_autosaving_editors_give_one_whole_ask_and_never_a_question() {
    if !has("tmux") {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let mut tried = Vec::new();
    for editor in REAL_EDITORS {
        if !has(editor.command[0]) {
            eprintln!("SKIPPED {}: not installed", editor.name);
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let path = root.join("g.py");
        std::fs::write(&path, "def g(x):\n    return x\n").unwrap();
        let watch = WatchProcess::start(&root, &[], &[], DEADLINE);
        let mut command: Vec<&str> = editor.command.to_vec();
        command.push("g.py");
        let mut t = Tmux::start(&format!("autosave-{}", editor.name), &command, &root);
        t.until("the file", |s| s.contains("return x"));
        t.keys(editor.new_line);
        watch_screen(&mut t, Duration::from_millis(300));
        type_slowly(&t, "# @claude explain why");
        watch_screen(&mut t, Duration::from_millis(1800)); // the editor saves the fragment
        type_slowly(&t, " g returns x");
        watch_screen(&mut t, Duration::from_millis(1600));
        type_slowly(&t, " unchanged");
        watch_screen(&mut t, Duration::from_millis(1500));
        t.keys(&["Enter"]);
        type_slowly(&t, "y = g(1)");
        watch_screen(&mut t, Duration::from_millis(1500));
        t.keys(&["Enter"]);
        type_slowly(&t, "z = g(2)");
        watch_screen(&mut t, Duration::from_millis(2500));
        let typed = vec!["@claude explain why g returns x unchanged".to_string()];
        let mut asks = Vec::new();
        asks_until(&watch, &mut asks, |got| got.iter().any(|a| a["text"] == typed[0].as_str()));
        let settle = Instant::now() + Duration::from_secs(6);
        asks_until(&watch, &mut asks, |_| Instant::now() >= settle);
        let screen = t.screen();
        eprintln!("---- {}: asked {:?}; the screen:\n{screen}", editor.name, t.asked);
        check_asks(editor.name, &asks, &typed);
        assert!(t.asked.is_empty(), "{}: the editor asked {:?}", editor.name, t.asked);
        // Before the root is taken to autosave, an ask's tag lands once its file is quiet.
        let on_disk = untagged(&std::fs::read_to_string(&path).unwrap());
        for line in ["# @claude explain why g returns x unchanged", "y = g(1)", "z = g(2)"] {
            assert!(on_disk.contains(line), "{}: {line:?} lost: {on_disk:?}", editor.name);
        }
        tried.push(editor.name);
    }
    eprintln!("editors tried: {tried:?}");
    if std::env::var_os("CI").is_some() {
        assert_eq!(tried.len(), 2, "CI installs tmux, emacs and nvim; tried only {tried:?}");
    }
}

/// An IDE that writes one complete save several times (the same bytes three times, 150 ms
/// apart), with the default flags: one ask, and nothing written under the later writes.
#[test]
fn a_save_written_three_times_is_one_ask() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let watch = WatchProcess::start(&root, &[], &[], DEADLINE);
    let path = root.join("ide.py");
    let text = "def f():\n    return 1  # @claude why one?\n";
    for _ in 0..3 {
        std::fs::write(&path, text).unwrap();
        std::thread::sleep(Duration::from_millis(150)); // the IDE's pace
    }
    let mut asks = Vec::new();
    asks_until(&watch, &mut asks, |got| !got.is_empty());
    // A sentinel saved after: every ask of ide.py came before its own.
    std::fs::write(root.join("sentinel.py"), "# @claude sentinel\n").unwrap();
    asks_until(&watch, &mut asks, |got| got.iter().any(|a| a["file"] == "sentinel.py"));
    let of_ide: Vec<&Value> = asks.iter().filter(|a| a["file"] == "ide.py").collect();
    assert_eq!(of_ide.len(), 1, "{of_ide:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "written under the IDE's saves");
}

/// The next ask for which `want` holds (the others are dropped), or a panic after the deadline.
fn next_ask(watch: &WatchProcess, what: &str, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + DEADLINE;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match watch.asks.recv_timeout(left) {
            Ok(ask) if want(&ask) => return ask,
            Ok(ask) => eprintln!("ask: {ask}"),
            Err(_) => break,
        }
    }
    panic!("no ask {what} within {DEADLINE:?}");
}

/// Saves a fresh ask in a file of its own, as one saves deliberately: on a root that saves
/// deliberately it is announced with its tag to come (`"tag": "pending"`); where the editor is
/// taken to autosave, with none. Returns the `tag` it was announced with.
fn tag_of_a_fresh_ask(watch: &WatchProcess, root: &Path, name: &str) -> String {
    std::fs::write(root.join(format!("{name}.py")), format!("# @claude {name}\nx = 1\n")).unwrap();
    let text = format!("@claude {name}");
    let ask = next_ask(watch, &text, |a| a["text"] == text.as_str());
    ask["tag"].as_str().unwrap().to_string()
}

/// `filewatch-mcp autosave ARGS…` with the state directory `state`: its stdout (it must
/// succeed).
fn autosave_command(state: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(common::bin())
        .arg("autosave")
        .args(args)
        .env("FILEWATCH_STATE_DIR", state)
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "autosave {args:?}: {stdout}{stderr}");
    stdout.into_owned()
}

/// Issue 30 (7): a typo fixed a moment after the save, a few words added to an ask just
/// announced, and a program's storm of saves (a growing ask written 20 times, 150 ms apart)
/// never take a root to autosave: each time, an ask saved after is announced with its tag to
/// come.
#[test]
fn quick_fixes_and_a_save_storm_never_switch_a_root() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let watch = WatchProcess::start(&root, &[], &[("FILEWATCH_STATE_DIR", state.path())], DEADLINE);
    let fixes = [("add tets for f", "add tests for f"), ("explain g", "explain g and h")];
    for (i, (typo, fixed)) in fixes.iter().enumerate() {
        let path = root.join(format!("fix{i}.py"));
        std::fs::write(&path, format!("# @claude {typo}\ndef f(): pass\n")).unwrap();
        let first = next_ask(&watch, typo, |a| a["text"] == format!("@claude {typo}").as_str());
        std::thread::sleep(Duration::from_secs(1)); // the user reads the save back
        std::fs::write(&path, format!("# @claude {fixed}\ndef f(): pass\n")).unwrap();
        let text = format!("@claude {fixed}");
        let revised = next_ask(&watch, fixed, |a| a["text"] == text.as_str());
        assert_eq!(revised["id"], first["id"], "the fix is the same ask");
        let tag = tag_of_a_fresh_ask(&watch, &root, &format!("after fix {i}"));
        assert_eq!(tag, "pending", "after {} quick fix(es), the root was taken to autosave", i + 1);
    }
    let storm = root.join("generated.py");
    let mut text = "# @claude step".to_string();
    for i in 0..20 {
        text.push_str(&format!(" {i}"));
        std::fs::write(&storm, format!("{text}\n")).unwrap();
        std::thread::sleep(Duration::from_millis(150)); // the program's pace
    }
    assert_eq!(
        tag_of_a_fresh_ask(&watch, &root, "after the storm"),
        "pending",
        "a save storm taught it"
    );
    let shown = autosave_command(state.path(), &["show", "--root", root.to_str().unwrap()]);
    assert!(shown.contains(&root.display().to_string()) && shown.contains("deliberate"), "{shown}");
}

/// Issue 30 (7): asks seen growing from save to save, three times, take the root to autosave;
/// that is said where the user looks — on `watch`'s stderr with the root's path, and as an
/// event on its JSON stdout — the state file names the root, `autosave show` prints it, and
/// `autosave reset` takes the running watch back to deliberate saves.
#[test]
fn repeated_growth_switches_a_root_which_is_said_and_can_be_reset() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let watch = WatchProcess::start(&root, &[], &[("FILEWATCH_STATE_DIR", state.path())], DEADLINE);
    let mut asks = Vec::new();
    for i in 0..3 {
        let path = root.join(format!("typed{i}.py"));
        std::fs::write(&path, "# @claude please refactor\n").unwrap();
        std::thread::sleep(Duration::from_millis(1500)); // the editor saves the next words
        let whole = format!("@claude please refactor f{i} into a generator");
        std::fs::write(&path, format!("# {whole}\n")).unwrap();
        asks_until(&watch, &mut asks, |got| got.iter().any(|a| a["text"] == whole.as_str()));
    }
    let fragments: Vec<&Value> =
        asks.iter().filter(|a| a["text"] == "@claude please refactor").collect();
    assert_eq!(fragments.len(), 3, "the root switched before three asks grew: {asks:?}");
    let said = format!("{}: autosave", root.display());
    watch.log_until(&said, DEADLINE);
    let event = watch.events.recv_timeout(DEADLINE).expect("an autosave event on stdout");
    assert_eq!(event["event"], "autosave", "{event}");
    assert_eq!(event["autosave"], true, "{event}");
    assert_eq!(event["root"], root.to_str().unwrap(), "{event}");
    let kept: Vec<PathBuf> = std::fs::read_dir(state.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".editor.json"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let habit: Value = serde_json::from_slice(&std::fs::read(&kept[0]).unwrap()).unwrap();
    assert_eq!(habit["root"], root.to_str().unwrap(), "the state file does not name its root");
    let root_arg = root.to_str().unwrap();
    let shown = autosave_command(state.path(), &["show", "--root", root_arg]);
    assert!(shown.contains(root_arg) && shown.contains("autosave"), "{shown}");
    assert_eq!(tag_of_a_fresh_ask(&watch, &root, "while autosaving"), "none");
    autosave_command(state.path(), &["reset", "--root", root_arg]);
    assert_eq!(tag_of_a_fresh_ask(&watch, &root, "after the reset"), "pending", "reset not taken");
    let event = watch.events.recv_timeout(DEADLINE).expect("a deliberate event on stdout");
    assert_eq!(event["autosave"], false, "{event}");
    let shown = autosave_command(state.path(), &["show", "--root", root_arg]);
    assert!(shown.contains("deliberate"), "{shown}");
}

/// A person's typing in the tests below: one key every 150 ms (80 words a minute), kept to
/// that schedule whatever tmux's own time per key.
const HUMAN_KEYSTROKE: Duration = Duration::from_millis(150);

/// Types `text` at [`HUMAN_KEYSTROKE`] a key; returns when the last key was sent.
fn type_at_a_persons_pace(t: &Tmux, text: &str) -> Instant {
    let start = Instant::now();
    for (i, c) in text.chars().enumerate() {
        let at = start + HUMAN_KEYSTROKE * i as u32;
        std::thread::sleep(at.saturating_duration_since(Instant::now())); // the typist's pace
        t.type_text(&c.to_string());
    }
    Instant::now()
}

/// The typing pause learned on the root, as its state file in `state` keeps it (this
/// version's latest pauses, or an older version's one longest gap).
fn learned_pause(state: &Path) -> Duration {
    let file = std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".editor.json"))
        .expect("nothing learned of the editor");
    let habit: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    eprintln!("learned: {habit}");
    let pauses = habit["pauses_ms"].as_array().into_iter().flatten().filter_map(Value::as_u64);
    let ms = pauses.max().or_else(|| habit["typing_gap_ms"].as_u64()).unwrap_or(0);
    Duration::from_millis(ms)
}

/// Issue 30 (8): the typing pause learned from a real autosaving editor (Emacs
/// `auto-save-visited-mode`, Neovim writing on `CursorHoldI`) is the user's pause between two
/// bursts of an ask, not the time between the editor's saves — which adds the typing of the
/// words after the pause. An ask typed in three bursts, 2.2 s apart, at a person's pace.
#[test]
fn real_editors_teach_the_users_pause_not_the_time_between_saves() {
    const PAUSE: Duration = Duration::from_millis(2200);
    if !has("tmux") {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let mut seen = Vec::new();
    for editor in REAL_EDITORS.iter().filter(|e| has(e.command[0])) {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("g.py"), "def g(x):\n    return x\n").unwrap();
        let env = [("FILEWATCH_STATE_DIR", state.path())];
        let watch = WatchProcess::start(&root, &[], &env, DEADLINE);
        let mut command: Vec<&str> = editor.command.to_vec();
        command.push("g.py");
        let mut t = Tmux::start(&format!("pause-{}", editor.name), &command, &root);
        t.until("the file", |s| s.contains("return x"));
        t.keys(editor.new_line);
        watch_screen(&mut t, Duration::from_millis(300));
        let mut real = Duration::ZERO;
        let bursts = ["# @claude explain why", " g returns x", " unchanged"];
        for (i, burst) in bursts.iter().enumerate() {
            let ended = type_at_a_persons_pace(&t, burst);
            if i + 1 < bursts.len() {
                watch_screen(&mut t, PAUSE); // the user thinks; the editor saves meanwhile
                real = real.max(ended.elapsed());
            }
        }
        watch_screen(&mut t, Duration::from_millis(1500));
        let whole = "@claude explain why g returns x unchanged";
        let mut asks = Vec::new();
        asks_until(&watch, &mut asks, |got| got.iter().any(|a| a["text"] == whole));
        assert!(asks.iter().any(|a| a["text"] == whole), "{}: {asks:?}", editor.name);
        let learned = learned_pause(state.path());
        eprintln!("{}: learned a pause of {learned:?} for a real pause of {real:?}", editor.name);
        seen.push((editor.name, learned, real));
    }
    // Each editor's numbers first, then the verdict: the pause, not pause and typing.
    for (name, learned, real) in seen {
        assert!(
            learned <= real + Duration::from_secs(1),
            "{name}: learned a pause of {learned:?} for a real pause of {real:?}"
        );
    }
}
