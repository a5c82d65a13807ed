//! Editors that save while their user types, as a person types into them, against
//! `filewatch-mcp watch --json` with its default flags on a fresh root:
//! - an emulation of VS Code's `files.autoSave: afterDelay` rules: the buffer is written in
//!   place 1 s after the last keystroke; a clean buffer is reloaded when the file changes on
//!   disk; a save over a file that changed on disk under a dirty buffer is a conflict (VS Code
//!   refuses it: "the content of the file is newer");
//! - real Emacs (`auto-save-visited-mode`, 1 s, with `global-auto-revert-mode`) and real Neovim
//!   (writing on `CursorHold`/`CursorHoldI`, `updatetime=1000`), in tmux.
//!
//! Each ask is typed in bursts with pauses longer than the autosave delay, then code is typed
//! below it. Each ask must reach Claude once, with its whole text, under one id (at most one
//! fragment before it, on the first ask of the root, revised under the same id); no conflict,
//! no changed-on-disk question; every typed line in the file at the end.
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// The bytes on disk as the editor last wrote or loaded them.
    known: Vec<u8>,
    dirty: bool,
    last_key: Instant,
    cursor: usize,
    /// Saves refused because the file changed under the dirty buffer.
    conflicts: usize,
    /// Clean buffers reloaded because the file changed on disk.
    reloads: usize,
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
            self.reloads += 1;
            return;
        }
        if self.dirty && self.last_key.elapsed() >= AUTOSAVE_DELAY {
            if disk != self.known {
                // VS Code refuses the save; the user picks "Overwrite" to go on.
                eprintln!("conflict: the file changed on disk under the dirty buffer");
                self.conflicts += 1;
            }
            let text = self.text();
            std::fs::write(&self.path, &text).unwrap(); // in place: truncate and write
            self.known = text.into_bytes();
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

/// Checks the asks against what was typed: one id per ask, ending with its whole text; at
/// most one fragment, of the first ask, before its whole text (which says it is a revision).
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
            assert_eq!(whole, &typed[0], "{editor}: a fragment of an ask after the first");
            let revised = asks.iter().rfind(|a| a["id"] == id.as_str()).unwrap();
            assert_eq!(revised["revised"], true, "{editor}: the whole text does not say so");
        }
    }
    let fragments = asks.len() - typed.len();
    assert!(fragments <= 1, "{editor}: {fragments} fragments announced");
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
        let on_disk = std::fs::read_to_string(&path).unwrap();
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
