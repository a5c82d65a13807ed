//! End-to-end tests of the `filewatch-mcp` binary: `scan` and `languages`, on real files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_filewatch-mcp"))
}

/// Runs the binary in `dir`, with a state directory of its own (`resolve` opens the ledger of
/// the root it is given: the user's is none of these tests' business).
fn run(args: &[&str], dir: &Path) -> Output {
    let state = tempfile::tempdir().unwrap();
    let mut command = bin();
    command.args(args).current_dir(dir).env("FILEWATCH_STATE_DIR", state.path());
    command.output().expect("run filewatch-mcp")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

fn json_lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn write(root: &Path, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn json_output_keeps_the_public_keys() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.py", "x = 1  # @claude why one?\n");
    write(dir.path(), "b.go", "package b\n// @claude[fw-0123abcd] done already\n");
    let lines = json_lines(&run(&["scan", "--json", "."], dir.path()));
    assert_eq!(lines.len(), 2, "{lines:?}");
    let a = &lines[0];
    let keys: Vec<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
    for k in ["file", "line", "column", "text", "tagged", "id", "language", "mode"] {
        assert!(keys.contains(&k), "missing key {k} in {a}");
    }
    assert_eq!(a["file"], "./a.py");
    assert_eq!(a["line"], 1);
    assert_eq!(a["column"], 10);
    assert_eq!(a["text"], "@claude why one?");
    assert_eq!(a["tagged"], false);
    assert_eq!(a["id"], Value::Null);
    assert_eq!(a["language"], "python");
    assert_eq!(a["mode"], "syntax");
    let b = &lines[1];
    assert_eq!((b["line"].as_u64(), b["tagged"].as_bool()), (Some(2), Some(true)));
    assert_eq!(b["id"], "fw-0123abcd");
    assert_eq!(b["text"], "@claude done already");
    // At module level: no definition, and the keys are there, null.
    assert_eq!((&a["symbol"], &a["symbol_lines"]), (&Value::Null, &Value::Null));
}

#[test]
fn json_output_names_the_definition_an_ask_is_about() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "cache.py",
        "class Cache:\n    @property\n    def size(self):\n        return 0  # @claude count\n",
    );
    let lines = json_lines(&run(&["scan", "--json", "cache.py"], dir.path()));
    assert_eq!(lines[0]["symbol"], "Cache.size", "{lines:?}");
    assert_eq!(lines[0]["symbol_lines"], serde_json::json!([2, 4]), "{lines:?}");
    let out = stdout(&run(&["scan", "cache.py"], dir.path()));
    assert_eq!(out, "cache.py:4: @claude count  (in Cache.size 2-4)\n");
}

#[test]
fn text_output_is_path_line_text() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/a.rs", "fn a() {} // @claude name this\n// @claude[fw-00000000] old\n");
    let out = stdout(&run(&["scan", "src"], dir.path()));
    assert_eq!(
        out,
        "src/a.rs:1: @claude name this  (in a 1-1)\nsrc/a.rs:2: @claude old  [fw-00000000 tagged]\n"
    );
}

/// `scan --verbose` says where a comment almost holds an ask and why it is none (issue 33);
/// strings, e-mail addresses and real asks get no hint, and without the flag nothing is said.
#[test]
fn scan_verbose_explains_near_misses() {
    let dir = tempfile::tempdir().unwrap();
    // Code between the comments: no paragraph joins them.
    let src = [
        "# @claude: a real ask",
        "x = 1",
        "# @Claude fix this",
        "x = 2",
        "# @claudefix this",
        "x = 3",
        "# @claude:",
        "x = 4",
        "# note @claude fix this",
        "x = 5",
        "# @claude:fix this",
        "x = 6",
        "# write to me@claude.ai",
        "s = \"@Claude fix this\"",
    ];
    write(dir.path(), "a.py", src.join("\n") + "\n");
    let quiet = run(&["scan", "a.py"], dir.path());
    assert_eq!(stdout(&quiet), "a.py:1: @claude: a real ask\n");
    assert_eq!(stderr(&quiet), "");
    let out = run(&["scan", "--verbose", "a.py"], dir.path());
    assert_eq!(stdout(&out), "a.py:1: @claude: a real ask\n");
    let hints = stderr(&out);
    let lines: Vec<&str> = hints.lines().collect();
    let expect = [
        ("a.py:3:3: not an ask: ", "case-sensitive"),
        ("a.py:5:3: not an ask: ", "`@claudefix` is another word"),
        ("a.py:7:3: not an ask: ", "nothing to ask after `@claude:`"),
        ("a.py:9:8: not an ask: ", "must start the comment"),
        ("a.py:11:3: not an ask: ", "`:` after the trigger must be followed by whitespace"),
    ];
    assert_eq!(lines.len(), expect.len(), "{hints}");
    for (line, (start, why)) in lines.iter().zip(expect) {
        assert!(line.starts_with(start) && line.contains(why), "{line:?}: want {start}… {why}");
    }
}

#[test]
fn ignore_rules_hard_excludes_and_explicit_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "keep.js", "// @claude keep\n");
    write(root, "node_modules/dep/x.js", "// @claude vendored\n");
    write(root, "gen/out.js", "// @claude generated\n");
    write(root, ".gitignore", "gen/\n");
    write(root, "sub/.gitignore", "local.js\n");
    write(root, "sub/local.js", "// @claude ignored\n");
    write(root, "sub/ok.js", "// @claude nested ok\n");
    let texts = |out: &Output| -> Vec<String> {
        json_lines(out).iter().map(|v| v["text"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(texts(&run(&["scan", "--json"], root)), ["@claude keep", "@claude nested ok"]);
    // Named explicitly, an ignored file is scanned.
    let out = run(&["scan", "--json", "node_modules/dep/x.js"], root);
    assert_eq!(texts(&out), ["@claude vendored"]);
}

#[test]
fn custom_trigger() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rb", "# @ai tidy up\nx = 1\n# @claude not this one\n");
    let lines = json_lines(&run(&["scan", "--json", "--trigger", "@ai"], dir.path()));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["text"], "@ai tidy up");
}

#[test]
fn shebang_scripts_without_extension() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "bin/tool", "#!/usr/bin/env python3\nprint(1)  # @claude add --help\n");
    let lines = json_lines(&run(&["scan", "--json"], dir.path()));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["language"], "python");
}

#[cfg(unix)]
#[test]
fn odd_files_never_hang_or_leak() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(outside.path(), "secret.py", "# @claude outside the tree\n");
    std::os::unix::fs::symlink(outside.path().join("secret.py"), root.join("link.py")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("linkdir")).unwrap();
    let fifo = root.join("pipe.py");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    write(root, "binary.py", b"# @claude nope\0\x01\x02");
    let mut big = b"# @claude too big\n".to_vec();
    big.resize(2 * 1024 * 1024, b'#');
    write(root, "big.py", big);
    write(root, "latin1.py", b"# caf\xe9\n# @claude still found \xff here\n");
    write(root, "crlf.py", "# @claude no carriage return\r\n");
    let lines = json_lines(&run(&["scan", "--json"], root));
    let texts: Vec<&str> = lines.iter().map(|v| v["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["@claude no carriage return", "@claude still found \u{fffd} here"]);
    // Named explicitly, a FIFO is still refused, not opened.
    let out = run(&["scan", "pipe.py"], root);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_path_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["scan", "no/such/dir"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no/such/dir"), "{err}");
}

#[test]
fn languages_lists_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = stdout(&run(&["languages"], dir.path()));
    assert!(out.lines().count() >= 150, "{} rows", out.lines().count());
    let rust = out.lines().find(|l| l.starts_with("rust ")).expect("rust row");
    assert!(rust.contains("grammar rust") && rust.contains("*.rs"), "{rust}");
    let json: Vec<Value> = stdout(&run(&["languages", "--json"], dir.path()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(json.iter().any(|v| v["mode"] == "fallback"));
    assert!(json.iter().filter(|v| v["mode"] == "syntax").count() >= 28);
    // Symbols: the programming languages with a grammar; never a data format or the fallback.
    let symbols = |name: &str| json.iter().find(|v| v["name"] == name).unwrap()["symbols"].clone();
    for name in ["rust", "python", "typescript", "tsx", "haskell", "elm", "bash", "kotlin"] {
        assert_eq!(symbols(name), true, "{name}");
    }
    for name in ["json", "yaml", "markdown", "perl", "ada"] {
        assert_eq!(symbols(name), false, "{name}");
    }
    assert!(rust.contains("symbols"), "{rust}");
    let perl = out.lines().find(|l| l.starts_with("perl ")).expect("perl row");
    assert!(perl.contains("no symbols"), "{perl}");
}

/// The repository scanned by its own tool reports exactly the fixture markers: corpus inputs
/// (`.txt`), bench samples, docs and sources never fire.
#[test]
fn self_scan_finds_only_the_fixture_markers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lines = json_lines(&run(&["scan", "--json", "."], root));
    let found: Vec<String> = lines
        .iter()
        .map(|v| {
            format!("{}:{} {}", v["file"].as_str().unwrap(), v["line"], v["text"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        found,
        [
            "./tests/fixtures/self-scan/ask.py:6 @claude add type hints to parse()",
            "./tests/fixtures/self-scan/page.html:7 @claude make the header sticky",
            "./tests/fixtures/self-scan/page.html:11 @claude debounce this handler",
            "./tests/fixtures/self-scan/tagged.rs:4 @claude an ask that was already stamped",
        ]
    );
}

#[test]
fn stamp_then_resolve_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let original = "import os\r\n\r\ndef f():  # @claude explain\r\n    # @claude add a test\r\n    return 1\r\n";
    write(root, "a.py", original);

    // --dry-run writes nothing.
    let dry = json_lines(&run(&["stamp", "--dry-run", "--json", "."], root));
    assert_eq!(dry.len(), 2);
    assert_eq!(std::fs::read_to_string(root.join("a.py")).unwrap(), original);

    let asks = json_lines(&run(&["stamp", "--json", "."], root));
    assert_eq!(asks.len(), 2);
    let ids: Vec<String> = asks.iter().map(|v| v["id"].as_str().unwrap().to_string()).collect();
    assert!(asks.iter().all(|v| v["tagged"] == true));
    assert_eq!(asks[1]["text"], "@claude add a test");
    let stamped = std::fs::read_to_string(root.join("a.py")).unwrap();
    assert_eq!(
        stamped,
        format!("import os\r\n\r\ndef f():  # @claude[{}] explain\r\n    # @claude[{}] add a test\r\n    return 1\r\n", ids[0], ids[1])
    );
    // Stamping again finds nothing new.
    assert!(stdout(&run(&["stamp", "."], root)).is_empty());

    let out = stdout(&run(&["resolve", &ids[1]], root));
    assert!(out.contains(&ids[1]), "{out}");
    let out = stdout(&run(&["resolve", &format!("[{}]", ids[0]), "a.py"], root));
    assert!(out.contains(&ids[0]), "{out}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.py")).unwrap(),
        "import os\r\n\r\ndef f():\r\n    return 1\r\n"
    );

    let out = run(&["resolve", &ids[0]], root);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&ids[0]));
    let out = run(&["resolve", "fw-XYZ"], root);
    assert_eq!(out.status.code(), Some(2));
}

#[cfg(unix)]
#[test]
fn stamp_reports_read_only_files_and_leaves_them() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "ro.rs", "// @claude can't touch this\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = run(&["stamp", "ro.rs"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ro.rs: read-only"));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "// @claude can't touch this\n");
}

// ---- the first ten minutes: every mistake a new user made gets a clear answer --------------

/// The binary as a user without special rights: root reads every directory, so "unreadable"
/// can only be tested as someone else (`setpriv` to nobody); `None` where that is impossible.
#[cfg(unix)]
fn as_unprivileged(dir: &Path) -> Option<Command> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(bin());
    }
    Command::new("setpriv").arg("--version").output().ok()?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    cmd.arg(env!("CARGO_BIN_EXE_filewatch-mcp"));
    Some(cmd)
}

/// No `setpriv` and no mode bits off Unix: the unreadable cases are skipped there.
#[cfg(not(unix))]
fn as_unprivileged(_dir: &Path) -> Option<Command> {
    None
}

#[cfg(unix)]
fn unreadable_dir(root: &Path, rel: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = root.join(rel);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    p
}

#[cfg(not(unix))]
fn unreadable_dir(_root: &Path, _rel: &str) -> PathBuf {
    unreachable!("only called after as_unprivileged, which is None off Unix")
}

#[cfg(unix)]
fn unreadable_file(root: &Path, rel: &str, bytes: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = write(root, rel, bytes);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    p
}

#[cfg(not(unix))]
fn unreadable_file(_root: &Path, _rel: &str, _bytes: &str) -> PathBuf {
    unreachable!("only called after as_unprivileged, which is None off Unix")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn root_must_be_a_readable_directory() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "some-file.py", "x = 1\n");
    for args in [
        &["--root", "some-file.py"][..],
        &["serve", "--root", "some-file.py"],
        &["watch", "some-file.py"],
    ] {
        let out = bin()
            .args(args)
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).contains("some-file.py: cannot watch: not a directory"),
            "{}",
            stderr(&out)
        );
    }
    // A missing root: the cause is said once.
    let out = run(&["--root", "no/such/dir"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no/such/dir: cannot watch"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");

    let Some(mut cmd) = as_unprivileged(dir.path()) else {
        eprintln!("skipped the unreadable-root case: cannot drop privileges here");
        return;
    };
    unreadable_dir(dir.path(), "locked");
    let out = cmd
        .args(["--root", "locked"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("locked: cannot watch: Permission denied"), "{}", stderr(&out));
}

#[test]
fn scan_exit_codes_are_consistent() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "tree/a.py", "# @claude hello\n");
    assert_eq!(run(&["scan", "tree"], dir.path()).status.code(), Some(0));
    let Some(mut named) = as_unprivileged(dir.path()) else {
        eprintln!("skipped: cannot drop privileges here");
        return;
    };
    let mut inside = as_unprivileged(dir.path()).unwrap();
    unreadable_dir(dir.path(), "tree/locked");
    // Named on the command line and unreadable: the user's mistake, like a missing path.
    let out = named.args(["scan", "tree/locked"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot list directory tree/locked"), "{}", stderr(&out));
    // Inside the tree: everything else is scanned and printed, the failure said, exit 1.
    let out = inside.args(["scan", "tree"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "tree/a.py:1: @claude hello\n");
    assert!(stderr(&out).contains("tree/locked"), "{}", stderr(&out));
}

/// A file no language claims is none of the scan's business: unreadable (someone's private key,
/// say), it does not fail the scan. An unreadable source file still does.
#[test]
fn unreadable_files_of_no_language_do_not_fail_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "tree/a.py", "# @claude hello\n");
    let Some(mut scan) = as_unprivileged(dir.path()) else {
        eprintln!("skipped: cannot drop privileges here");
        return;
    };
    unreadable_file(dir.path(), "tree/key.pem", "-----BEGIN PRIVATE KEY-----\n");
    let out = scan.args(["scan", "tree"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "tree/a.py:1: @claude hello\n");
    assert!(!stderr(&out).contains("key.pem"), "{}", stderr(&out));

    unreadable_file(dir.path(), "tree/b.py", "# @claude unseen\n");
    let mut scan = as_unprivileged(dir.path()).unwrap();
    let out = scan.args(["scan", "tree"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("b.py"), "{}", stderr(&out));
}

#[test]
fn flags_are_checked_and_explain_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--log-level", "loud", "scan"], "possible values: off, error, warn, info, debug, trace"),
        (&["watch", "--debounce", "5"], "\"5\" has no unit: write 5ms or 5s"),
        (&["watch", "--debounce", "-1s"], "\"-1s\" is negative"),
        (&["--debounce", "2 fortnights"], "unknown unit"),
        (&["--root", ".", "scan"], "--root goes after the subcommand"),
        (&["--tag", "never", "scan"], "--tag goes after the subcommand"),
        (&["--log-file", "x.log", "scan"], "--log-file goes after the subcommand"),
        (&["resolve", "fw-zz"], "\"fw-zz\" is not an ask id (fw- and 8 lowercase hex digits)"),
    ];
    for (args, want) in cases {
        let out = bin()
            .args(*args)
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    // A global flag before the subcommand is fine.
    let out = run(&["--log-level", "debug", "scan", "."], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A file name with a newline and an ask full of escape sequences: the terminal output stays
/// one line per marker, with the name quoted and every control character shown escaped; the
/// JSON output carries the exact text.
#[test]
fn terminal_output_cannot_be_forged() {
    let dir = tempfile::tempdir().unwrap();
    let ask = "# @claude hi \u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{7f}\n";
    write(dir.path(), "evil\nname.py", ask);
    let out = run(&["scan", "."], dir.path());
    let text = stdout(&out);
    assert_eq!(
        text,
        "\"./evil\\nname.py\":1: @claude hi \\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{9b}31m\\u{7f}\n"
    );
    assert!(!text.contains('\u{1b}') && !text.contains('\r'));
    eprintln!("scan prints: {text}");
    let lines = json_lines(&run(&["scan", "--json", "."], dir.path()));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["file"], "./evil\nname.py");
    assert_eq!(lines[0]["text"], "@claude hi \u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{7f}");
}

// ---- issue 24: a CLI that says what it did ---------------------------------------------------

/// A running `filewatch-mcp watch` in text mode, with its stdout and stderr lines on channels.
struct TextWatch {
    child: std::process::Child,
    out: std::sync::mpsc::Receiver<String>,
    err: std::sync::mpsc::Receiver<String>,
    /// Its state directory (owner lock, `--tag never` ledger), its own.
    state: tempfile::TempDir,
}

/// How long a test waits for the watcher to say something (the machine may be loaded).
const WATCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

impl TextWatch {
    fn start(root: &Path, args: &[&str]) -> TextWatch {
        TextWatch::start_with_state(root, args, tempfile::tempdir().unwrap())
    }

    /// [`TextWatch::start`] with `state` as its state directory (a restart keeps it).
    fn start_with_state(root: &Path, args: &[&str], state: tempfile::TempDir) -> TextWatch {
        use std::io::BufRead;
        let mut child = bin()
            .arg("watch")
            .args(args)
            .arg(root)
            .env("FILEWATCH_STATE_DIR", state.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start filewatch-mcp watch");
        let lines = |pipe: Box<dyn std::io::Read + Send>| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
            rx
        };
        let out = lines(Box::new(child.stdout.take().unwrap()));
        let err = lines(Box::new(child.stderr.take().unwrap()));
        TextWatch { child, out, err, state }
    }

    /// Kills it (as a crash would) and hands back its state directory.
    fn stop(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.state, tempfile::tempdir().unwrap())
    }

    /// The stderr lines up to the first that contains `pattern`.
    fn err_until(&self, pattern: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = self
                .err
                .recv_timeout(WATCH_DEADLINE)
                .unwrap_or_else(|e| panic!("watch never said {pattern:?} ({e}); it said {seen:?}"));
            let done = line.contains(pattern);
            seen.push(line);
            if done {
                return seen;
            }
        }
    }
}

impl Drop for TextWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 24 (1): a file named on the command line that is not read says why, on stderr, for
/// `scan` and `stamp`; it is not changed, and the walk of a tree holding the same files stays
/// quiet about them (skips are expected there).
#[cfg(unix)]
#[test]
fn named_files_that_are_skipped_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut big = b"# @claude too big\n".to_vec();
    big.resize(2 * 1024 * 1024, b'#');
    write(root, "big.py", &big);
    write(root, "binary.py", b"# @claude nope\0\x01\x02");
    write(root, "target.py", "# @claude through a link\n");
    std::os::unix::fs::symlink(root.join("target.py"), root.join("link.py")).unwrap();
    assert!(Command::new("mkfifo").arg(root.join("pipe.py")).status().unwrap().success());
    let cases: &[(&str, &str)] = &[
        ("big.py", "big.py: 2097152 bytes is over the 1048576-byte limit"),
        ("binary.py", "binary.py: binary file"),
        ("link.py", "link.py: not a regular file (symlink)"),
        ("pipe.py", "pipe.py: not a regular file (fifo)"),
        ("/dev/null", "/dev/null: not a regular file (device)"),
    ];
    for command in ["scan", "stamp"] {
        for (path, why) in cases {
            let out = run(&[command, path], root);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(0), "{command} {path}: {err}");
            assert!(
                out.stdout.is_empty(),
                "{command} {path}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(
                err.starts_with("filewatch-mcp: ") && err.contains(why) && err.contains("skipped"),
                "{command} {path}: stderr should say {why:?}; it says {err:?}"
            );
        }
    }
    assert_eq!(std::fs::read(root.join("big.py")).unwrap(), big);
    assert_eq!(std::fs::read(root.join("binary.py")).unwrap(), b"# @claude nope\0\x01\x02");
    // Walked, the same files are skipped without a word; the linked file is found by itself.
    let out = run(&["scan", "."], root);
    assert_eq!(stdout(&out), "./target.py:1: @claude through a link\n");
    assert_eq!(stderr(&out), "");
}

/// Issue 24 (2): `stamp` without a path stamps the current directory, like `scan`.
#[test]
fn stamp_defaults_to_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/a.py", "x = 1  # @claude why one?\n");
    let out = run(&["stamp"], dir.path());
    let text = stdout(&out);
    assert!(text.starts_with("./src/a.py:1: @claude why one?  [fw-"), "{text}");
    let stamped = std::fs::read_to_string(dir.path().join("src/a.py")).unwrap();
    assert!(stamped.starts_with("x = 1  # @claude[fw-"), "{stamped}");
}

/// Issue 24 (3): `stamp --dry-run` shows no id: the real stamp draws its own, so any id shown
/// here would be one no file ever gets.
#[test]
fn dry_run_shows_no_invented_ids() {
    let dir = tempfile::tempdir().unwrap();
    let original = "def f():  # @claude explain\n    return 1\n";
    write(dir.path(), "a.py", original);
    let text = stdout(&run(&["stamp", "--dry-run", "a.py"], dir.path()));
    assert_eq!(text, "a.py:1: @claude explain  [would stamp]\n");
    let json = json_lines(&run(&["stamp", "--dry-run", "--json", "a.py"], dir.path()));
    assert_eq!(json.len(), 1);
    assert_eq!((&json[0]["id"], &json[0]["tagged"]), (&Value::Null, &Value::Bool(false)));
    assert_eq!(std::fs::read_to_string(dir.path().join("a.py")).unwrap(), original);
}

/// Issue 24 (4): a multi-line ask is one line of grep-able output (its line breaks shown as
/// ` ⏎ `) in `scan`, `stamp` and `watch`; `--json` keeps the exact text.
#[test]
fn multi_line_asks_print_one_line_each() {
    let dir = tempfile::tempdir().unwrap();
    let file = "# @claude multi line\n# second line\nx = 1\n# @claude another\n";
    write(dir.path(), "a.py", file);
    let scan = stdout(&run(&["scan", "."], dir.path()));
    assert_eq!(scan, "./a.py:1-2: @claude multi line ⏎ second line\n./a.py:4: @claude another\n");
    let json = json_lines(&run(&["scan", "--json", "."], dir.path()));
    assert_eq!(json[0]["text"], "@claude multi line\nsecond line");
    let dry = stdout(&run(&["stamp", "--dry-run", "."], dir.path()));
    assert_eq!(dry.lines().count(), 2, "{dry}");
    assert!(
        dry.starts_with("./a.py:1-2: @claude multi line ⏎ second line  [would stamp]\n"),
        "{dry}"
    );
    let stamp = stdout(&run(&["stamp", "."], dir.path()));
    assert_eq!(stamp.lines().count(), 2, "{stamp}");
    assert!(stamp.starts_with("./a.py:1-2: @claude multi line ⏎ second line  [fw-"), "{stamp}");

    let tree = tempfile::tempdir().unwrap();
    let watch = TextWatch::start(tree.path(), &["--debounce", "50ms"]);
    watch.err_until("filewatch-mcp: watching");
    write(tree.path(), "b.py", file);
    let first = watch.out.recv_timeout(WATCH_DEADLINE).expect("watch prints the first ask");
    let second = watch.out.recv_timeout(WATCH_DEADLINE).expect("watch prints the second ask");
    assert!(first.starts_with("b.py:1-2  @claude multi line ⏎ second line  [fw-"), "{first}");
    assert!(second.starts_with("b.py:4  @claude another  [fw-"), "{second}");
}

/// Issue 24 (5): `watch --tag never` prints an id that is only in the ledger; `resolve ID`
/// finds it there (the same state directory), removes the ask, and the ledger knows.
#[test]
fn resolve_finds_a_tag_never_ask_in_the_ledger() {
    let tree = tempfile::tempdir().unwrap();
    let watch = TextWatch::start(tree.path(), &["--tag", "never", "--debounce", "50ms"]);
    watch.err_until("filewatch-mcp: watching");
    let file = "def f():\n    return 1  # @claude explain\n";
    write(tree.path(), "a.py", file);
    let said = watch.out.recv_timeout(WATCH_DEADLINE).expect("watch prints the ask");
    let id = said
        .rsplit_once("  [")
        .and_then(|(_, id)| id.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no id in {said:?}"))
        .to_string();
    assert!(id.starts_with("fw-"), "{said}");
    assert_eq!(std::fs::read_to_string(tree.path().join("a.py")).unwrap(), file);

    let resolve = |id: &str| {
        bin()
            .args(["resolve", id])
            .current_dir(tree.path())
            .env("FILEWATCH_STATE_DIR", watch.state.path())
            .output()
            .unwrap()
    };
    let out = resolve(&id);
    assert_eq!(out.status.code(), Some(0), "resolve {id}: {}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("./a.py: removed {id}\n"));
    assert_eq!(
        std::fs::read_to_string(tree.path().join("a.py")).unwrap(),
        "def f():\n    return 1\n"
    );
    // Resolved is resolved: the ledger says so, and a second resolve finds nothing.
    let out = resolve(&id);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("no marker with id {id}")), "{}", stderr(&out));
}

/// A watch that ends by itself — its root and the root's parent deleted, nothing left to
/// watch — exits 2, not 0 as if it had been stopped. Linux only: under Wine the directories are
/// not gone while the watch holds them, and the watch goes on (seen in .ci/cross.sh).
#[cfg(target_os = "linux")]
#[test]
fn a_watch_that_ends_by_itself_exits_2() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("parent/root");
    std::fs::create_dir_all(&root).unwrap();
    let mut watch = TextWatch::start(&root, &[]);
    watch.err_until("filewatch-mcp: watching");
    std::fs::remove_dir_all(outer.path().join("parent")).unwrap();
    let deadline = std::time::Instant::now() + WATCH_DEADLINE;
    let status = loop {
        if let Some(status) = watch.child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "watch did not end after its root went");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let said: Vec<String> = watch.err.try_iter().collect();
    assert_eq!(status.code(), Some(2), "{said:?}");
}

/// Issue 24 (6): a walk that meets an unreadable directory says so as the CLI does —
/// `filewatch-mcp: …` — not as a log line with a time and a level.
#[test]
fn walk_warnings_speak_as_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "tree/a.py", "# @claude hello\n");
    if as_unprivileged(dir.path()).is_none() {
        eprintln!("skipped: cannot drop privileges here");
        return;
    }
    unreadable_dir(dir.path(), "tree/locked");
    for args in [
        &["scan", "tree"][..],
        &["stamp", "--dry-run", "tree"],
        &["resolve", "fw-00000000", "tree"],
    ] {
        let out = as_unprivileged(dir.path())
            .unwrap()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = stderr(&out);
        let line = err.lines().find(|l| l.contains("tree/locked")).unwrap_or_else(|| {
            panic!("{args:?}: stderr does not name the unreadable directory: {err:?}")
        });
        assert!(line.starts_with("filewatch-mcp: "), "{args:?}: {line:?}");
        assert!(!line.contains("WARN"), "{args:?}: {line:?}");
    }
}

/// Issue 24 (7): "watching 1 directory", not "1 directories".
#[test]
fn watch_counts_directories_in_english() {
    let one = tempfile::tempdir().unwrap();
    let watch = TextWatch::start(one.path(), &[]);
    let said = watch.err_until("filewatch-mcp: watching").pop().unwrap();
    assert!(said.starts_with("filewatch-mcp: watching 1 directory under "), "{said}");
    drop(watch);
    let two = tempfile::tempdir().unwrap();
    std::fs::create_dir(two.path().join("sub")).unwrap();
    let watch = TextWatch::start(two.path(), &[]);
    let said = watch.err_until("filewatch-mcp: watching").pop().unwrap();
    assert!(said.starts_with("filewatch-mcp: watching 2 directories under "), "{said}");
}

/// The exit codes are in `--help`, for the server and each subcommand: a line for each code
/// the command can end with, under "Exit status:".
#[test]
fn help_documents_the_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["--help"], &["0 ", "2 "]),
        (&["serve", "--help"], &["0 ", "2 "]),
        (&["watch", "--help"], &["0 ", "2 "]),
        (&["scan", "--help"], &["0 ", "1 ", "2 "]),
        (&["stamp", "--help"], &["0 ", "1 ", "2 "]),
        (&["resolve", "--help"], &["0 ", "1 ", "2 "]),
        (&["languages", "--help"], &["0 "]),
    ];
    for (args, codes) in cases {
        let help = stdout(&run(args, dir.path()));
        let (_, status) = help
            .split_once("Exit status:")
            .unwrap_or_else(|| panic!("{args:?}: no \"Exit status:\" in\n{help}"));
        for code in *codes {
            assert!(
                status.lines().any(|l| l.trim_start().starts_with(code)),
                "{args:?}: no line for exit status {code}in\n{help}"
            );
        }
    }
}

/// A file in the tree the user cannot read (someone else's `0600` file) has nothing to do with
/// the ask being resolved: `resolve` skips it, removes the marker and succeeds.
#[cfg(unix)]
#[test]
fn resolve_skips_files_it_cannot_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let Some(mut cmd) = as_unprivileged(dir.path()) else {
        eprintln!("cannot run as another user; skipped");
        return;
    };
    let ask = write(dir.path(), "a.py", "x = 1\n# @claude[fw-0000abcd] explain\n");
    // The file to resolve is the (unprivileged) user's; the other one is not.
    std::os::unix::fs::chown(&ask, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    unreadable_file(dir.path(), "secret.py", "# @claude[fw-0000abcd] not yours\n");
    let out = cmd.args(["resolve", "fw-0000abcd", "."]).current_dir(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&ask).unwrap(), "x = 1\n");
}

/// `stamp` and `resolve` on a file whose name is as long as the file system allows (255
/// bytes): the ask is stamped and resolved, and no temp file stays (issue 21, item 13).
#[test]
fn stamp_and_resolve_a_file_with_the_longest_name() {
    let dir = tempfile::tempdir().unwrap();
    for name in [format!("{}.py", "n".repeat(252)), format!("{}.py", "é".repeat(126))] {
        write(dir.path(), &name, "# @claude keep the long name\nx = 1\n");
        let stamped = json_lines(&run(&["stamp", "--json", &name], dir.path()));
        assert_eq!(stamped.len(), 1, "{} bytes: {stamped:?}", name.len());
        let id = stamped[0]["id"].as_str().unwrap().to_string();
        let now = std::fs::read_to_string(dir.path().join(&name)).unwrap();
        assert!(now.contains(&format!("@claude[{id}]")), "{now:?}");
        stdout(&run(&["resolve", &id, &name], dir.path()));
        assert_eq!(std::fs::read_to_string(dir.path().join(&name)).unwrap(), "x = 1\n");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, std::slice::from_ref(&name), "temp files left");
        std::fs::remove_file(dir.path().join(&name)).unwrap();
    }
}

// ---- issue 30: the asks contract, round 4 ----------------------------------------------------

/// Issue 30 (17): `--settle 0`, as `--help` and docs/cli.md write it, is accepted by the server
/// and by `watch`; with it `watch` announces the ask and tags it at once. A duration without a
/// unit other than 0 is still refused.
#[test]
fn settle_zero_needs_no_unit() {
    let dir = tempfile::tempdir().unwrap();
    // The server with stdin closed: a session that ends at once (0), not a bad flag (2).
    let out = bin()
        .args(["--settle", "0", "--root", "."])
        .current_dir(dir.path())
        .env("FILEWATCH_STATE_DIR", dir.path().join("state"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "the server with --settle 0: {}", stderr(&out));

    let tree = tempfile::tempdir().unwrap();
    let watch = TextWatch::start(tree.path(), &["--settle", "0", "--debounce", "50ms"]);
    watch.err_until("filewatch-mcp: watching");
    write(tree.path(), "a.py", "x = 1  # @claude why one?\n");
    let said = watch.out.recv_timeout(WATCH_DEADLINE).expect("watch prints the ask");
    assert!(said.starts_with("a.py:1  @claude why one?  [fw-"), "{said}");
    let deadline = std::time::Instant::now() + WATCH_DEADLINE;
    while !std::fs::read_to_string(tree.path().join("a.py")).unwrap().contains("@claude[fw-") {
        assert!(std::time::Instant::now() < deadline, "a.py was never tagged");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let out = bin().args(["watch", "--settle", "3"]).stdin(std::process::Stdio::null()).output();
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("\"3\" has no unit: write 3ms or 3s"), "{}", stderr(&out));
}

/// Issue 30 (5): with `--tag never` the ledger is the only record of an ask's id. Damage to it
/// — one line made unreadable, the log cut to half — announces none of the asks again after a
/// restart: saving each file again is quiet, and the next ask saved is the first thing said.
#[test]
fn a_damaged_ledger_announces_no_ask_again() {
    for damage in ["one line", "half"] {
        let tree = tempfile::tempdir().unwrap();
        let args = ["--tag", "never", "--debounce", "50ms"];
        let watch = TextWatch::start(tree.path(), &args);
        watch.err_until("filewatch-mcp: watching");
        for name in ["a", "b", "c"] {
            write(tree.path(), &format!("{name}.py"), format!("# @claude ask {name}\n"));
            let said = watch.out.recv_timeout(WATCH_DEADLINE).expect("watch prints the ask");
            assert!(said.starts_with(&format!("{name}.py:1  @claude ask {name}  [fw-")), "{said}");
        }
        let state = watch.stop();

        let log = std::fs::read_dir(state.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".asks.jsonl"))
            .expect("a ledger");
        let bytes = std::fs::read(&log).unwrap();
        let damaged = match damage {
            // b's line (after the header and a's): one byte of its key made another.
            "one line" => {
                let mut lines: Vec<Vec<u8>> =
                    bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
                lines[2][10] = b'#';
                lines.join(&b'\n')
            }
            _ => bytes[..bytes.len() / 2].to_vec(),
        };
        std::fs::write(&log, damaged).unwrap();

        let watch = TextWatch::start_with_state(tree.path(), &args, state);
        watch.err_until("filewatch-mcp: watching");
        for name in ["a", "b", "c"] {
            write(tree.path(), &format!("{name}.py"), format!("# @claude ask {name}\nx = 1\n"));
        }
        write(tree.path(), "d.py", "# @claude a new one\n");
        let said = watch.out.recv_timeout(WATCH_DEADLINE).expect("watch prints d.py's ask");
        assert!(said.starts_with("d.py:1  @claude a new one  [fw-"), "{damage}: {said}");
    }
}

/// Issue 30 (20): a file whose name is not UTF-8 is scanned, announced and stamped like any
/// other — its name shown with the odd byte escaped (`caf\xE9.py`) — and with `--tag never`
/// `resolve` finds its ask through the ledger. `scan` lists it too.
#[cfg(unix)]
#[test]
fn a_file_whose_name_is_not_utf8_is_heard() {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.py");
    for tag in ["file", "never"] {
        let tree = tempfile::tempdir().unwrap();
        let args = ["--tag", tag, "--debounce", "50ms", "--settle", "0s"];
        let watch = TextWatch::start(tree.path(), &args);
        watch.err_until("filewatch-mcp: watching");
        let path = tree.path().join(name);
        std::fs::write(&path, "x = 1  # @claude odd name\n").unwrap();
        let said = watch.out.recv_timeout(WATCH_DEADLINE).expect("watch prints the ask");
        assert!(said.starts_with(r"caf\xE9.py:1  @claude odd name  [fw-"), "{tag}: {said}");
        let id = said.rsplit_once("  [").unwrap().1.trim_end_matches(']').to_string();
        if tag == "file" {
            let deadline = std::time::Instant::now() + WATCH_DEADLINE;
            while !std::fs::read_to_string(&path).unwrap().contains(&format!("@claude[{id}]")) {
                assert!(std::time::Instant::now() < deadline, "never tagged");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let scan = stdout(&run(&["scan", "."], tree.path()));
            assert!(scan.contains(&format!("@claude odd name  [{id} tagged]")), "scan: {scan:?}");
            continue;
        }
        let out = bin()
            .args(["resolve", &id])
            .current_dir(tree.path())
            .env("FILEWATCH_STATE_DIR", watch.state.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "resolve {id}: {}", stderr(&out));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x = 1\n");
    }
}

/// Issue 30 (18): `scan` and `stamp` read an ask as the server does — only the lines written
/// with it: a new ask above a committed `// SAFETY:` comment is its own line, not that comment.
#[test]
fn scan_and_stamp_read_an_ask_as_the_server_does() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q"]);
    let committed = "fn f() {\n    // SAFETY: the pointer is valid\n    unsafe { g() }\n}\n";
    write(root, "safety.rs", committed);
    git(&["add", "."]);
    git(&["commit", "-qm", "x"]);
    let asked = committed.replace("    // SAFETY", "    // @claude is this sound?\n    // SAFETY");
    write(root, "safety.rs", &asked);
    let scan = json_lines(&run(&["scan", "--json", "."], root));
    assert_eq!(scan.len(), 1, "{scan:?}");
    assert_eq!(scan[0]["text"], "@claude is this sound?", "scan");
    assert_eq!((scan[0]["line"].as_u64(), scan[0]["end_line"].as_u64()), (Some(2), Some(2)));
    let text = stdout(&run(&["scan", "."], root));
    assert_eq!(text, "./safety.rs:2: @claude is this sound?  (in f 1-5)\n");
    let stamp = json_lines(&run(&["stamp", "--json", "."], root));
    assert_eq!(stamp.len(), 1, "{stamp:?}");
    assert_eq!(stamp[0]["text"], "@claude is this sound?", "stamp");
    let id = stamp[0]["id"].as_str().unwrap();
    let stamped = std::fs::read_to_string(root.join("safety.rs")).unwrap();
    assert_eq!(stamped, asked.replace("@claude", &format!("@claude[{id}]")));
    // Tagged, it is still only its own line.
    let scan = json_lines(&run(&["scan", "--json", "."], root));
    assert_eq!(scan[0]["text"], "@claude is this sound?", "scan of the tagged ask");
}

/// The flags the server and `watch` share are one set: each reads the same in `--help`, `serve
/// --help` and `watch --help` (its line and what it says), so a flag cannot change in one and
/// not the other.
#[test]
fn serve_and_watch_share_their_flags() {
    /// The paragraph of `flag` in a long help: its line and the lines under it, up to a blank.
    fn paragraph(help: &str, flag: &str) -> Option<String> {
        let mut lines = help.lines().skip_while(|l| !l.trim_start().starts_with(flag));
        let first = lines.next()?;
        let rest = lines.take_while(|l| !l.trim().is_empty());
        Some(std::iter::once(first).chain(rest).collect::<Vec<_>>().join("\n"))
    }
    let dir = tempfile::tempdir().unwrap();
    let helps: Vec<(&str, String)> = [&["--help"][..], &["serve", "--help"], &["watch", "--help"]]
        .iter()
        .map(|args| (args[0], stdout(&run(args, dir.path()))))
        .collect();
    for flag in ["--root ", "--debounce ", "--settle ", "--trigger ", "--tag ", "--log-file "] {
        let said: Vec<(&str, Option<String>)> =
            helps.iter().map(|(name, help)| (*name, paragraph(help, flag))).collect();
        assert!(said[0].1.is_some(), "{flag}is not in --help:\n{}", helps[0].1);
        for other in &said[1..] {
            assert_eq!(said[0].1, other.1, "{flag}in --help and in {} --help", other.0);
        }
    }
}
