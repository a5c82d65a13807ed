//! `filewatch-mcp watch` end to end, on a real file system: every save style (real vim, nvim
//! and emacs when installed), ignore rules, new directories, odd files, git, bursts and races.
//!
//! Absence of an ask is proven with a barrier, not a sleep: after the action, a sentinel file
//! with a marker is saved; files are handled in the order they fall due, so once the sentinel's
//! ask arrives, anything the earlier action would have produced has been produced.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(20);

struct Watcher {
    child: Child,
    asks: Receiver<Value>,
    /// Everything it wrote to stderr so far.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    root: PathBuf,
    sentinels: usize,
    _dir: Option<tempfile::TempDir>,
    /// Its own state directory (owner lock, ledger): no test shares another's.
    _state: tempfile::TempDir,
}

impl Watcher {
    fn start() -> Watcher {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut w = Watcher::start_in(&root);
        w._dir = Some(dir);
        w
    }

    fn start_in(root: &Path) -> Watcher {
        Watcher::start_with(root, "150ms")
    }

    fn start_with(root: &Path, debounce: &str) -> Watcher {
        Watcher::start_settling(root, debounce, "200ms")
    }

    fn start_settling(root: &Path, debounce: &str, settle: &str) -> Watcher {
        let state = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_filewatch-mcp"))
            .env("FILEWATCH_STATE_DIR", state.path())
            .args(["watch", "--json", "--debounce", debounce, "--settle", settle])
            .args(["--tag-after", settle]) // the tag once the file is quiet, as before issue 34
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, asks) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).expect("JSON line");
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        // Ready once it says how many directories it watches.
        let stderr = child.stderr.take().unwrap();
        let (ready_tx, ready_rx) = mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log_writer = log.clone();
        std::thread::spawn(move || {
            let mut ready = Some(ready_tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[watch] {line}");
                log_writer.lock().unwrap().push(line.clone());
                if line.starts_with("filewatch-mcp: watching") {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
            }
        });
        ready_rx.recv_timeout(DEADLINE).expect("watcher ready");
        let root = root.to_path_buf();
        Watcher { child, asks, log, root, sentinels: 0, _dir: None, _state: state }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// The next ask, or panic after the deadline.
    fn ask(&self) -> Value {
        self.asks.recv_timeout(DEADLINE).expect("an ask within the deadline")
    }

    /// Every ask up to a fresh sentinel's (which is not returned).
    fn asks_until_barrier(&mut self) -> Vec<Value> {
        self.sentinels += 1;
        let name = format!("sentinel-{}.py", self.sentinels);
        self.write(&name, format!("# @claude sentinel {}\n", self.sentinels));
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

impl Drop for Watcher {
    fn drop(&mut self) {
        // SIGTERM, then make sure it is gone.
        #[cfg(unix)]
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::yield_now();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(p: &Path) -> String {
    String::from_utf8(std::fs::read(p).unwrap()).unwrap()
}

/// Waits (with a deadline) until `p` holds `want`: a tag follows its ask once the file has been
/// quiet for the settle time.
fn read_when(p: &Path, want: &str) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = read(p);
        if now == want || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20)); // polling the file
    }
}

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A new repository at `dir` on `main` (one file, `app.py`), and a branch `other` that adds
/// 2,000 files — enough that checking it out takes many debounces — with a committed marker in
/// every tenth (each costs git's revision walk when it changed under git's lock).
fn repo_with_a_branch_of_markers(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git_in(dir, &["init", "-q"]);
    std::fs::write(dir.join("app.py"), "x = 1\n").unwrap();
    git_in(dir, &["add", "."]);
    git_in(dir, &["commit", "-qm", "one"]);
    git_in(dir, &["checkout", "-qb", "other"]);
    for i in 0..2000 {
        let text = if i % 10 == 0 { format!("# @claude theirs {i}\n") } else { String::new() };
        std::fs::write(dir.join(format!("f{i}.py")), format!("x = {i}\n{text}")).unwrap();
    }
    git_in(dir, &["add", "."]);
    git_in(dir, &["commit", "-qm", "other"]);
    git_in(dir, &["checkout", "-q", "main"]);
}

/// Runs git in `dir` as a test user, on branch `main` for a new repository.
fn git_in(dir: &Path, args: &[&str]) {
    run(Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args));
}

fn run(cmd: &mut Command) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn whole_save_styles_each_give_one_stamped_ask() {
    let mut w = Watcher::start();

    // Plain write (truncate + write).
    let p = w.write("plain.py", "x = 1  # @claude why one?\n");
    let a = w.ask();
    assert_eq!((a["file"].as_str(), a["line"].as_u64()), (Some("plain.py"), Some(1)));
    assert_eq!(a["text"], "@claude why one?");
    let id = a["id"].as_str().unwrap();
    let want = format!("x = 1  # @claude[{id}] why one?\n");
    assert_eq!(read_when(&p, &want), want);

    // In place, no truncation (an editor writing over the same bytes).
    let p = w.write("inplace.rs", "fn a() {}\n//////////////////////////\n");
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.seek(std::io::SeekFrom::Start(10)).unwrap();
        f.write_all(b"// @claude in place ask //").unwrap();
    }
    let a = w.ask();
    assert_eq!(
        (a["file"].as_str(), a["text"].as_str()),
        (Some("inplace.rs"), Some("@claude in place ask //"))
    );

    // Write a temp file, rename it over (JetBrains safe write, VS Code atomicSave, Emacs).
    let staged = w.write("tmp-save.go.tmp", "package a\n// @claude renamed in\n");
    std::fs::rename(&staged, w.path("renamed.go")).unwrap();
    let a = w.ask();
    assert_eq!((a["file"].as_str(), a["line"].as_u64()), (Some("renamed.go"), Some(2)));

    // sed -i (temp file + rename, by a real tool).
    let p = w.write("sed.js", "let a = 1; // TODO\n");
    let others = w.asks_until_barrier();
    assert!(others.is_empty(), "{others:?}");
    run(Command::new("sed").arg("-i").arg("s|// TODO|// @claude from sed|").arg(&p));
    let a = w.ask();
    assert_eq!(
        (a["file"].as_str(), a["text"].as_str()),
        (Some("sed.js"), Some("@claude from sed"))
    );
}

#[test]
fn real_editors_save_styles() {
    let mut w = Watcher::start();
    let mut tried = Vec::new();
    // (editor, how it saves, command)
    let vim_cmd = |bin: &str, opts: &str, file: &Path| {
        let mut c = Command::new(bin);
        c.args(["-N", "-u", "NONE", "-i", "NONE", "-n", "-es"])
            .arg("-c")
            .arg(opts)
            .arg("-c")
            .arg("normal! Go# @claude typed in the editor")
            .arg("-c")
            .arg("wq")
            .arg(file);
        c
    };
    for (bin, opts) in [
        ("vim", "set backupcopy=no"), // write a new file, rename over
        ("vim", "set backup writebackup backupcopy=auto"), // the default backup dance
        ("vim", "set backupcopy=yes"), // copy, then overwrite in place
        ("nvim", "set backupcopy=no"),
        ("nvim", "set backupcopy=auto"),
    ] {
        if !has(bin) {
            continue;
        }
        tried.push(format!("{bin} {opts}"));
        let name = format!("{bin}-{}.py", tried.len());
        let p = w.write(&name, "x = 1\n");
        assert!(w.asks_until_barrier().is_empty());
        run(&mut vim_cmd(bin, opts, &p));
        let a = w.ask();
        assert_eq!(a["file"], name.as_str(), "{bin} {opts}");
        assert_eq!(a["text"], "@claude typed in the editor", "{bin} {opts}");
        let id = a["id"].as_str().unwrap();
        let want = format!("x = 1\n# @claude[{id}] typed in the editor\n");
        assert_eq!(read_when(&p, &want), want, "{bin} {opts}");
        assert!(w.asks_until_barrier().is_empty(), "{bin} {opts}: one ask only");
    }
    if has("emacs") {
        tried.push("emacs".into());
        let p = w.write("emacs.py", "x = 1\n");
        assert!(w.asks_until_barrier().is_empty());
        run(Command::new("emacs").args(["--batch", "-Q"]).arg(&p).args([
            "--eval",
            "(progn (goto-char (point-max)) (insert \"# @claude from emacs\\n\") (save-buffer))",
        ]));
        let a = w.ask();
        assert_eq!(
            (a["file"].as_str(), a["text"].as_str()),
            (Some("emacs.py"), Some("@claude from emacs"))
        );
        assert!(w.asks_until_barrier().is_empty(), "emacs: one ask only");
    }
    eprintln!("editors tried: {tried:?}");
    if std::env::var_os("CI").is_some() {
        assert!(tried.len() >= 6, "CI installs vim, nvim and emacs; tried only {tried:?}");
    }
}

#[test]
fn a_burst_of_writes_is_one_ask() {
    let mut w = Watcher::start();
    let p = w.path("burst.ts");
    for i in 0..50 {
        std::fs::write(&p, format!("// draft {i}\n")).unwrap();
    }
    std::fs::write(&p, "const a = 1; // @claude final version\n").unwrap();
    let asks = w.asks_until_barrier();
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["text"], "@claude final version");
}

#[cfg(unix)] // a symlink and a FIFO
#[test]
fn look_alikes_ignored_paths_and_odd_files_stay_silent_and_untouched() {
    let mut w = Watcher::start();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.py");
    std::fs::write(&secret, "# @claude outside the root\n").unwrap();

    let files: Vec<(PathBuf, Vec<u8>)> = [
        (
            "strings.py",
            &b"s = \"# @claude not a comment\"\nt = '''\n# @claude docstring\n'''\n"[..],
        ),
        ("tmpl.js", b"const t = `\n// @claude template ${x}\n`;\n"),
        ("raw.rs", b"let s = r#\"// @claude raw\"#;\n"),
        ("node_modules/dep/x.js", b"// @claude vendored\n"),
        ("target/debug/x.rs", b"// @claude build output\n"),
        ("binary.py", b"# @claude binary\0\0\0"),
        ("notes.txt", b"# @claude no language\n"),
    ]
    .iter()
    .map(|(rel, bytes)| (w.write(rel, bytes), bytes.to_vec()))
    .collect();
    let mut big = b"# @claude too big\n".to_vec();
    big.resize(2 * 1024 * 1024, b'#');
    let big_path = w.write("big.py", &big);
    std::os::unix::fs::symlink(&secret, w.path("link.py")).unwrap();
    assert!(Command::new("mkfifo").arg(w.path("pipe.py")).status().unwrap().success());

    let asks = w.asks_until_barrier();
    assert!(asks.is_empty(), "{asks:?}");
    for (p, bytes) in files {
        assert_eq!(std::fs::read(&p).unwrap(), bytes, "{} changed", p.display());
    }
    assert_eq!(std::fs::read(&big_path).unwrap(), big);
    assert_eq!(read(&secret), "# @claude outside the root\n");
}

#[test]
fn ignore_rules_and_new_directories_are_live() {
    let mut w = Watcher::start();
    w.write(".gitignore", "generated/\n*.gen.py\n");
    w.write("sub/keep.py", "x = 1\n");
    assert!(w.asks_until_barrier().is_empty());

    // A nested .gitignore added while running.
    w.write("sub/.gitignore", "local.py\n");
    assert!(w.asks_until_barrier().is_empty());
    w.write("sub/local.py", "# @claude ignored by the nested rule\n");
    w.write("x.gen.py", "# @claude ignored by the root rule\n");
    w.write("generated/y.py", "# @claude ignored directory\n");
    assert!(w.asks_until_barrier().is_empty());

    // New directories, with files written before their watch can exist.
    w.write("new/a/b/c/deep.py", "# @claude deep in a new tree\n");
    let asks = w.asks_until_barrier();
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["file"], "new/a/b/c/deep.py");
    let deep_id = asks[0]["id"].as_str().unwrap().to_string();

    // Un-ignoring: the rule goes, the directory is watched from then on.
    std::fs::write(w.path(".gitignore"), "*.gen.py\n").unwrap();
    assert!(w.asks_until_barrier().is_empty());
    w.write("generated/z.py", "# @claude now watched\n");
    let asks = w.asks_until_barrier();
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["file"], "generated/z.py");

    // A renamed directory keeps working under its new name. (Its tagged file stays quiet.)
    let deep = w.path("new/a/b/c/deep.py");
    let want = format!("# @claude[{deep_id}] deep in a new tree\n");
    assert_eq!(read_when(&deep, &want), want);
    std::fs::rename(w.path("new"), w.path("moved")).unwrap();
    assert!(w.asks_until_barrier().is_empty());
    w.write("moved/a/b/c/later.py", "# @claude after the move\n");
    let asks = w.asks_until_barrier();
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["file"], "moved/a/b/c/later.py");

    // A deleted directory, made again: watched again.
    std::fs::remove_dir_all(w.path("moved")).unwrap();
    assert!(w.asks_until_barrier().is_empty());
    w.write("moved/again.py", "# @claude after the delete\n");
    let asks = w.asks_until_barrier();
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["file"], "moved/again.py");
}

#[test]
fn five_hundred_files_at_once() {
    let mut w = Watcher::start();
    for i in 0..500 {
        w.write(&format!("many/f{i:03}.py"), format!("# @claude ask {i}\n"));
    }
    let asks = w.asks_until_barrier();
    let files: HashSet<&str> = asks.iter().map(|a| a["file"].as_str().unwrap()).collect();
    let ids: HashSet<&str> = asks.iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(asks.len(), 500);
    assert_eq!(files.len(), 500);
    assert_eq!(ids.len(), 500);
}

/// Issue 30 (19): `watch --json` tells the truth when it announces: the tag is not in the file
/// yet (`"stamped": false`, `"tagged": false`) and will be once the file is left alone
/// (`"tag": "pending"`); a file that cannot be written says `"tag": "none"`.
#[test]
fn an_announced_ask_says_its_tag_is_pending() {
    let w = Watcher::start();
    let p = w.write("a.py", "x = 1  # @claude why one?\n");
    let a = w.ask();
    assert_eq!(
        (&a["stamped"], &a["tagged"], &a["tag"]),
        (&Value::Bool(false), &Value::Bool(false), &Value::from("pending")),
        "{a}"
    );
    let want = format!("x = 1  # @claude[{}] why one?\n", a["id"].as_str().unwrap());
    assert_eq!(read_when(&p, &want), want, "the pending tag never landed");
}

#[cfg(unix)]
#[test]
fn read_only_files_are_announced_once_unstamped() {
    use std::os::unix::fs::PermissionsExt;
    let mut w = Watcher::start();
    let p = w.write("ro.py", "# @claude cannot be stamped\n");
    // Before the quiet time is over: by the time it is read, it is read-only.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    let asks = w.asks_until_barrier();
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["stamped"], false);
    assert_eq!(asks[0]["tag"], "none");
    assert_eq!(asks[0]["id"], Value::Null);
    assert_eq!(read(&p), "# @claude cannot be stamped\n");
    // Touching it again does not repeat the ask.
    run(Command::new("touch").arg(&p));
    assert!(w.asks_until_barrier().is_empty());
    // A second marker in it is a new ask, once.
    std::fs::write(&p, "# @claude cannot be stamped\n# @claude another one\n").unwrap();
    let asks = w.asks_until_barrier();
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["text"], "@claude another one");
}

#[test]
fn markers_from_git_are_not_asks() {
    if !has("git") {
        eprintln!("git not installed; skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let git = |args: &[&str]| git_in(&root, args);
    git(&["init", "-q"]);
    std::fs::write(root.join("app.py"), "x = 1\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "one"]);
    git(&["checkout", "-qb", "feature"]);
    std::fs::write(root.join("app.py"), "x = 1\n# @claude committed on a branch\n").unwrap();
    std::fs::write(root.join("other.py"), "# @claude another committed ask\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "two"]);
    git(&["checkout", "-q", "main"]);
    // A marker put away with `git stash` before the watcher starts.
    std::fs::write(root.join("app.py"), "x = 1\n# @claude stashed away\n").unwrap();
    git(&["stash", "-q"]);

    let mut w = Watcher::start_in(&root);
    git(&["checkout", "-q", "feature"]);
    git(&["checkout", "-q", "main"]);
    git(&["stash", "pop", "-q"]);
    let asks = w.asks_until_barrier();
    assert!(asks.is_empty(), "stash pop: {asks:?}");
    git(&["checkout", "-q", "--", "app.py"]);
    git(&["merge", "-q", "feature"]);
    let asks = w.asks_until_barrier();
    assert!(asks.is_empty(), "{asks:?}");
    assert_eq!(read(&root.join("app.py")), "x = 1\n# @claude committed on a branch\n");

    // An editor's background `git status` holds the index lock while the user saves: the
    // save is held until the lock goes, and is still the user's ask.
    std::fs::write(root.join(".git/index.lock"), "").unwrap();
    std::fs::write(
        root.join("other.py"),
        "# @claude another committed ask\n# @claude saved during a lock\n",
    )
    .unwrap();
    std::fs::remove_file(root.join(".git/index.lock")).unwrap();
    let a = w.ask();
    assert_eq!(a["text"], "@claude saved during a lock");
    assert!(w.asks_until_barrier().is_empty());

    // Git read `.git/info/exclude` many times above; nothing changed it, so the rules were never
    // reloaded (a reload reads the file: reacting to reads would loop forever).
    let reloads =
        w.log.lock().unwrap().iter().filter(|l| l.contains("ignore rules reloaded")).count();
    assert_eq!(reloads, 0);

    // `.git/info/exclude` edited while running: its rules apply at once.
    std::fs::write(root.join(".git/info/exclude"), "scratch*.py\n").unwrap();
    assert!(w.asks_until_barrier().is_empty());
    std::fs::write(root.join("scratch1.py"), "# @claude excluded by info/exclude\n").unwrap();
    assert!(w.asks_until_barrier().is_empty());

    // The user's own ask in the same file still fires.
    std::fs::write(root.join("app.py"), "x = 1\n# @claude committed on a branch\n# @claude mine\n")
        .unwrap();
    let a = w.ask();
    assert_eq!(a["text"], "@claude mine");
    assert!(w.asks_until_barrier().is_empty());
}

/// A repository inside the root (the root a folder of projects, or a checkout nested in
/// another): a checkout there writes files before it moves `HEAD`, as in the root's own
/// repository, so its index lock must hold them too. A checkout that takes longer than the
/// debounce announced the other branch's markers as asks. The same for a repository cloned in
/// while watching; the user's own ask in a nested repository still fires.
#[test]
fn markers_from_git_in_a_nested_repository_are_not_asks() {
    if !has("git") {
        eprintln!("git not installed; skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let git = git_in;
    let sub = root.join("sub");
    repo_with_a_branch_of_markers(&sub);

    let mut w = Watcher::start_with(&root, "20ms");
    git(&sub, &["checkout", "-q", "other"]);
    let asks = w.asks_until_barrier();
    assert!(asks.is_empty(), "{} asks from a nested checkout: {:?}…", asks.len(), asks.first());

    git(&root, &["clone", "-q", sub.to_str().unwrap(), "clone"]);
    let clone = root.join("clone");
    git(&clone, &["checkout", "-q", "main"]);
    assert!(w.asks_until_barrier().is_empty(), "the clone's files");
    git(&clone, &["checkout", "-q", "other"]);
    let asks = w.asks_until_barrier();
    assert!(asks.is_empty(), "{} asks from a checkout in a clone: {:?}…", asks.len(), asks.first());

    std::fs::write(sub.join("app.py"), "x = 1\n# @claude mine\n").unwrap();
    let a = w.ask();
    assert_eq!(a["text"], "@claude mine");
    assert_eq!(a["file"], "sub/app.py");
}

/// A submodule's git directory lives in its parent's (`.git/modules/sub`), and a linked
/// worktree's in the main repository's (`.git/worktrees/wt`): a checkout in either is git's
/// too. Before each nested repository's lock was watched, 194 of this submodule checkout's 200
/// markers were announced.
#[test]
fn markers_from_git_in_a_submodule_or_a_worktree_are_not_asks() {
    if !has("git") {
        eprintln!("git not installed; skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let (root, lib) = (top.join("root"), top.join("lib"));
    repo_with_a_branch_of_markers(&lib);
    std::fs::create_dir(&root).unwrap();
    git_in(&root, &["init", "-q"]);
    let lib_url = lib.to_str().unwrap();
    git_in(&root, &["-c", "protocol.file.allow=always", "submodule", "add", "-q", lib_url, "sub"]);
    git_in(&root, &["commit", "-qm", "the submodule"]);

    let mut w = Watcher::start_with(&root, "20ms");
    git_in(&root.join("sub"), &["checkout", "-q", "other"]);
    let asks = w.asks_until_barrier();
    assert!(
        asks.is_empty(),
        "{} asks from a submodule's checkout: {:?}…",
        asks.len(),
        asks.first()
    );

    git_in(&root.join("sub"), &["worktree", "add", "-q", "--detach", "../wt", "main"]);
    assert!(w.asks_until_barrier().is_empty(), "the worktree's own files");
    git_in(&root.join("wt"), &["checkout", "-q", "--detach", "origin/other"]);
    let asks = w.asks_until_barrier();
    assert!(asks.is_empty(), "{} asks from a worktree's checkout: {:?}…", asks.len(), asks.first());
}

#[test]
fn a_concurrent_writer_loses_nothing_and_gets_no_duplicate_asks() {
    let mut w = Watcher::start();
    let p = w.path("hot.py");
    let mut last = String::new();
    for i in 0..300 {
        last = format!("# @claude ask {i}\ncounter = {i}\n");
        if i % 2 == 0 {
            std::fs::write(&p, &last).unwrap();
        } else {
            let staged = w.path("hot.py.staged.tmp");
            std::fs::write(&staged, &last).unwrap();
            std::fs::rename(&staged, &p).unwrap();
        }
    }
    let asks = w.asks_until_barrier();
    let ids: HashSet<&str> = asks.iter().map(|a| a["id"].as_str().unwrap()).collect();
    let texts: HashSet<&str> = asks.iter().map(|a| a["text"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), asks.len(), "duplicate ids: {asks:?}");
    assert_eq!(texts.len(), asks.len(), "an ask announced twice: {asks:?}");
    // The file holds the writer's last write, stamped.
    let now = read(&p);
    let untagged = match now.find("[fw-") {
        Some(i) => format!("{}{}", &now[..i], &now[i + 13..]),
        None => now.clone(),
    };
    assert_eq!(untagged, last);
    assert_eq!(asks.last().map(|a| a["text"].as_str().unwrap()), Some("@claude ask 299"));
}

/// The root deleted and made again (`rm -rf R; mkdir R`: a script regenerating a project, a
/// re-clone in place): the watch says so and watches the new directory, whose saves are heard.
#[test]
fn the_root_deleted_and_made_again_is_watched_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("R");
    std::fs::create_dir(&root).unwrap();
    let w = Watcher::start_in(&root);
    w.write("a.py", "# @claude before\n");
    assert_eq!(w.ask()["file"], "a.py");

    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir(&root).unwrap();
    w.write("x.py", "# @claude x\n");
    let heard = w.asks.recv_timeout(DEADLINE).unwrap_or_else(|e| {
        panic!("nothing heard in the new root ({e}); the log: {:?}", w.log.lock().unwrap())
    });
    assert_eq!(heard["file"], "x.py", "{heard}");
    assert_eq!(heard["text"], "@claude x", "{heard}");
    // A directory made in the new root is watched too.
    w.write("sub/y.py", "# @claude y\n");
    assert_eq!(w.ask()["file"], "sub/y.py");
    let log = w.log.lock().unwrap().join("\n");
    assert!(log.contains("deleted"), "the deletion was not said: {log}");
}

/// Issue 30 (11): an ask follows its file through any number of moves before its tag lands.
/// `pkg/a.py` is saved with an ask and, right after it is announced (within the settle time),
/// `pkg` moves into a new `holder/x/`; then more asks, and a storm of 40 moves of the directory
/// into new directories. Each ask is announced once, and its tag lands at the file's last path.
#[test]
fn an_ask_follows_its_file_through_moves_before_its_tag() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut w = Watcher::start_settling(&root, "150ms", "3s");
    w.write("pkg/a.py", "def f():\n    pass\n# @claude one move\n");
    let mut heard = vec![w.ask()];
    std::fs::create_dir_all(w.path("holder/x")).unwrap();
    std::fs::rename(w.path("pkg"), w.path("holder/x/pkg")).unwrap();
    for i in 0..5 {
        w.write(&format!("holder/x/pkg/s{i}.py"), format!("x = {i}\n# @claude storm {i}\n"));
    }
    let storm = |heard: &[Value]| heard.iter().filter(|a| a["text"] != "@claude one move").count();
    while storm(&heard) < 5 {
        heard.push(w.ask());
    }
    let mut at = "holder/x/pkg".to_string();
    for k in 0..40 {
        let to = format!("m{k}/d{k}/pkg");
        std::fs::create_dir_all(w.path(&to).parent().unwrap()).unwrap();
        std::fs::rename(w.path(&at), w.path(&to)).unwrap();
        at = to;
    }
    heard.extend(w.asks_until_barrier());
    let texts: Vec<&str> = heard.iter().map(|a| a["text"].as_str().unwrap()).collect();
    let unique: HashSet<&str> = texts.iter().copied().collect();
    let files: Vec<String> = heard.iter().map(|a| format!("{} {}", a["file"], a["text"])).collect();
    assert_eq!(texts.len() - unique.len(), 0, "duplicates: {files:#?}");
    assert_eq!(unique.len(), 6, "{files:#?}");
    for a in &heard {
        let (text, id) = (a["text"].as_str().unwrap(), a["id"].as_str().unwrap());
        let name = Path::new(a["file"].as_str().unwrap()).file_name().unwrap().to_owned();
        let p = w.path(&at).join(name);
        let body = text.strip_prefix("@claude ").unwrap();
        let before = read(&p);
        let want = before.replace(&format!("@claude {body}"), &format!("@claude[{id}] {body}"));
        assert_eq!(read_when(&p, &want), want, "{}: the tag at the last path", p.display());
    }
}
