//! The server binary as Claude Code 2.1.332 starts it, byte for byte: the `server/discover`
//! probe with a string id, `initialize` 2025-11-25, `notifications/initialized`, `tools/list`;
//! then a save, and the exact notification; then bad input; then exit on stdin EOF or SIGTERM.

use std::io::{BufRead, BufReader, Write};
#[cfg(unix)]
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
#[cfg(unix)] // used by the Unix-only state-directory tests
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::mcp::{handshake, Server, DEADLINE, DISCOVER, INITIALIZE, INITIALIZED, TOOLS_LIST};
use common::WatchProcess;

#[test]
fn claude_code_startup_replayed_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut s = Server::start(&root);
    let (init, tools) = handshake(&mut s);

    assert_eq!(init["id"], 0);
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["capabilities"]["experimental"]["claude/channel"], serde_json::json!({}));
    assert!(result["capabilities"]["experimental"].get("claude/channel/permission").is_none());
    assert!(result["capabilities"]["tools"].is_object());
    assert_eq!(result["serverInfo"]["name"], "filewatch-mcp");
    let instructions = result["instructions"].as_str().unwrap();
    assert!(instructions.len() <= 4096 && instructions.contains("resolve_ask"));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");

    std::fs::write(root.join("a.py"), "x = 1  # @claude why one?\n").unwrap();
    let raw = s.line();
    let note: Value = serde_json::from_str(&raw).unwrap();
    eprintln!("notification bytes: {raw}");
    assert!(
        raw.starts_with(r#"{"jsonrpc":"2.0","method":"notifications/claude/channel","params":"#),
        "{raw}"
    );
    assert_eq!(note["params"]["content"], "@claude why one?");
    let meta = note["params"]["meta"].as_object().unwrap();
    for (k, v) in meta {
        assert!(k.chars().next().unwrap().is_ascii_alphabetic() || k.starts_with('_'), "{k}");
        assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{k}");
        assert!(v.is_string(), "meta {k} is not a string: {v}");
    }
    assert!(!meta.contains_key("source"));
    assert_eq!(meta["file"], "a.py");
    assert_eq!(meta["line"], "1");
    let id = meta["replyTo"].as_str().unwrap();
    // The tag follows once Claude heard the ask (here: it lists the asks, a tool call naming
    // it) and the file has been quiet for the settle time.
    s.hear_all(20);
    wait_for_file(&root.join("a.py"), &format!("x = 1  # @claude[{id}] why one?\n"));

    // A multi-line ask arrives whole, with its last line.
    std::fs::write(
        root.join("b.rs"),
        "/* @claude explain this lock;\n * is there a deadlock? */\nfn f() {}\n",
    )
    .unwrap();
    let multi: Value = serde_json::from_str(&s.line()).unwrap();
    assert_eq!(multi["params"]["content"], "@claude explain this lock;\nis there a deadlock?");
    let meta = &multi["params"]["meta"];
    assert_eq!((meta["line"].as_str(), meta["end_line"].as_str()), (Some("1"), Some("2")));

    // Bad input never kills the session.
    s.send("not json at all");
    assert_eq!(s.json()["error"]["code"], -32700);
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"pad\":\"{}\"}}",
        "x".repeat(17 * 1024 * 1024)
    );
    s.send(&huge);
    assert_eq!(s.json()["error"]["code"], -32700);
    s.send(r#"{"jsonrpc":"2.0","id":7,"method":"no/such/method"}"#);
    assert_eq!(s.json()["error"]["code"], -32601);
    s.send(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#);
    let pong = s.json();
    assert_eq!(
        (pong["id"].as_i64(), pong["result"].as_object().map(|o| o.len())),
        (Some(8), Some(0))
    );

    // Claude Code quits: stdin closes, the server exits.
    drop(s.stdin.take());
    let took = s.wait_exit();
    eprintln!("exited {} ms after stdin EOF", took.as_millis());
    assert!(s.child.try_wait().unwrap().unwrap().success());
}

/// Through the binary, as Claude Code runs it: a saved Rust ask inside `impl Cache { fn refresh }`
/// arrives with `symbol` naming `refresh` and `symbol_lines` of that function, both strings; an
/// ask in a fallback-language file arrives without either key.
#[test]
fn the_channel_message_names_the_definition() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut s = Server::start(&root);
    let (init, _) = handshake(&mut s);
    assert!(init["result"]["instructions"].as_str().unwrap().contains("symbol_lines"), "{init}");

    std::fs::write(
        root.join("cache.rs"),
        "struct Cache;\n\nimpl Cache {\n    #[inline]\n    fn refresh(&mut self) {\n        \
         // @claude why clear first?\n        self.entries.clear();\n    }\n}\n",
    )
    .unwrap();
    let note = s.note(is_ask_of("cache.rs"));
    let meta = note["params"]["meta"].as_object().unwrap();
    for (k, v) in meta {
        assert!(v.is_string(), "meta {k} is not a string: {v}");
    }
    assert_eq!(meta["symbol"], "Cache.refresh", "{note}");
    assert_eq!(meta["symbol_lines"], "4-8", "{note}");

    std::fs::write(root.join("tool.pl"), "sub run {\n    # @claude use strict\n}\n").unwrap();
    let note = s.note(is_ask_of("tool.pl"));
    let meta = note["params"]["meta"].as_object().unwrap();
    assert!(!meta.contains_key("symbol") && !meta.contains_key("symbol_lines"), "{note}");
}

/// Issue 30 (15): what a file holds reaches Claude without control characters — a file name
/// with ESC, BEL and a newline, a definition whose name holds a BEL (a shell function may be
/// named so), an ask with an escape sequence — they are shown escaped (`\u{1b}`) as the CLI
/// shows them; only the line breaks of the ask's own text stay. A symbol chain of 60 nested
/// classes is cut to its innermost names, with a leading `…`, in the channel and in list_asks.
#[cfg(unix)]
#[test]
fn control_characters_and_deep_symbols_reach_claude_shown_not_raw() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut s = Server::start(&root);
    handshake(&mut s);

    let evil = "evil\u{1b}]0;pwned\u{7}\nname.sh";
    std::fs::write(root.join(evil), "f\u{7}g() {\n  # @claude hi \u{1b}[2J there\n  echo\n}\n")
        .unwrap();
    let note = s.note(|n| {
        n["method"] == "notifications/claude/channel" && n["params"]["meta"]["language"] == "bash"
    });
    let meta = note["params"]["meta"].as_object().unwrap();
    for (k, v) in meta {
        let v = v.as_str().unwrap();
        assert!(!v.chars().any(char::is_control), "meta {k} holds a control character: {v:?}");
    }
    assert_eq!(meta["file"], "evil\\u{1b}]0;pwned\\u{7}\\nname.sh", "{note}");
    assert_eq!(meta["symbol"], "f\\u{7}g", "{note}");
    let content = note["params"]["content"].as_str().unwrap();
    assert_eq!(content, "@claude hi \\u{1b}[2J there", "{note}");

    let mut deep = String::new();
    for i in 0..60 {
        deep += &format!("{}class C{i}_{}:\n", "    ".repeat(i), "x".repeat(40));
    }
    deep += &format!("{0}# @claude deep\n{0}pass\n", "    ".repeat(60));
    std::fs::write(root.join("deep.py"), &deep).unwrap();
    let note = s.note(is_ask_of("deep.py"));
    let symbol = note["params"]["meta"]["symbol"].as_str().unwrap().to_string();
    let innermost = format!(".C58_{0}.C59_{0}", "x".repeat(40));
    assert!(symbol.starts_with('…') && symbol.ends_with(&innermost), "{symbol:?}");
    assert!(symbol.len() <= 512, "a symbol of {} bytes", symbol.len());

    let listed = s.call(7, "list_asks", serde_json::json!({"path": "deep.py"}));
    let listed: Value =
        serde_json::from_str(listed["content"][0]["text"].as_str().unwrap()).unwrap();
    let all: Vec<&Value> = listed["pending"]
        .as_array()
        .unwrap()
        .iter()
        .chain(listed["unannounced"].as_array().unwrap())
        .collect();
    assert_eq!(all.len(), 1, "{listed}");
    assert_eq!(all[0]["symbol"], symbol.as_str(), "{listed}");
}

/// Issue 30 (16): what Claude and the log are told names the user's path, never the held
/// directory's `/proc/self/fd/N/…`: `resolve_ask` on a file made read-only, and the debug log
/// of a file too large to read.
/// Issue 30 (2): a two-line ask whose second line the user deletes right after it was
/// announced, inside the settle window (the file untagged, its record still two lines):
/// `resolve_ask` removes what is left of it, and only that.
#[test]
fn an_ask_edited_inside_the_settle_window_is_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut s = Server::start_with_args(&root, state.path(), Stdio::inherit(), &["--settle", "5s"]);
    handshake(&mut s);
    let file = root.join("a.py");
    std::fs::write(&file, "# @claude explain this\n# and say why\ndef f():\n    pass\n").unwrap();
    let note = s.note(is_ask_of("a.py"));
    assert_eq!(note["params"]["content"], "@claude explain this\nand say why");
    let id = note["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    std::fs::write(&file, "# @claude explain this\ndef f():\n    pass\n").unwrap();
    let result = s.call(7, "resolve_ask", serde_json::json!({ "id": id }));
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "def f():\n    pass\n");
}

#[cfg(unix)]
#[test]
fn messages_name_the_users_path_not_the_held_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut command = Command::new(common::bin());
    command.env("RUST_LOG", "debug");
    let mut s = Server::spawn(command, &root, state.path(), Stdio::piped(), &["--tag", "never"]);
    let log = stderr_of(&mut s);
    handshake(&mut s);

    std::fs::create_dir(root.join("pkg")).unwrap();
    let file = root.join("pkg/a.py");
    std::fs::write(&file, "x = 1  # @claude explain\n").unwrap();
    let note = s.note(is_ask_of("pkg/a.py"));
    let id = note["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    let result = s.call(7, "resolve_ask", serde_json::json!({ "id": id }));
    assert_eq!(result["isError"], true, "{result}");
    let said = result["content"][0]["text"].as_str().unwrap();
    assert!(!said.contains("/proc/self/fd"), "resolve_ask said: {said}");
    assert_eq!(said, format!("{id}: {}: read-only; not changed", file.display()));

    let mut big = b"# @claude too big\n".to_vec();
    big.resize(2 * 1024 * 1024, b'#');
    std::fs::write(root.join("pkg/big.py"), &big).unwrap();
    std::fs::write(root.join("pkg/after.py"), "# @claude after the big one\n").unwrap();
    s.note(is_ask_of("pkg/after.py"));
    s.child.kill().unwrap();
    let log = log.join().unwrap();
    assert!(log.contains(&format!("{}: ", root.join("pkg/big.py").display())), "{log}");
    let leaks: Vec<&str> = log.lines().filter(|l| l.contains("/proc/self/fd")).collect();
    assert!(leaks.is_empty(), "the log names held directories: {leaks:#?}");
}

#[cfg(unix)]
#[test]
fn sigterm_stops_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut s = Server::start(&root);
    handshake(&mut s);
    for i in 0..20 {
        std::fs::write(root.join(format!("f{i}.py")), format!("# @claude ask {i}\n")).unwrap();
    }
    let _ = s.line(); // at least one stamp under way or done
    unsafe {
        libc::kill(s.child.id() as i32, libc::SIGTERM);
    }
    let took = s.wait_exit();
    eprintln!("exited {} ms after SIGTERM", took.as_millis());
    let leftovers = common::temp_files(&root);
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A closed terminal (or an `ssh` session that ends) sends SIGHUP: the server stops as on
/// SIGTERM — after the file at hand, leaving no temp file — and exits successfully, instead of
/// dying of the signal in the middle of a stamp.
#[cfg(unix)]
#[test]
fn sighup_stops_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut s = Server::start(&root);
    handshake(&mut s);
    for i in 0..20 {
        std::fs::write(root.join(format!("f{i}.py")), format!("# @claude ask {i}\n")).unwrap();
    }
    let _ = s.line(); // at least one stamp under way or done
    unsafe {
        libc::kill(s.child.id() as i32, libc::SIGHUP);
    }
    let took = s.wait_exit();
    eprintln!("exited {} ms after SIGHUP", took.as_millis());
    let status = s.child.try_wait().unwrap().unwrap();
    assert!(status.success(), "SIGHUP: {status:?}");
    let leftovers = common::temp_files(&root);
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Claude Code logs every stderr line of a server as an error, and stops a server with SIGINT,
/// then SIGTERM ~150 ms later: in normal operation the server says nothing on stderr, and it
/// exits on SIGINT by itself, successfully. A `list_asks` path that does not exist says so.
#[cfg(unix)]
#[test]
fn quiet_on_stderr_and_stops_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut s = Server::start_with_stderr(&root, log.reopen().unwrap());
    handshake(&mut s);
    std::fs::write(root.join("a.py"), "# @claude hello\n").unwrap();
    let note: Value = serde_json::from_str(&s.line()).unwrap();
    assert_eq!(note["method"], "notifications/claude/channel");

    s.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_asks","arguments":{"path":"no/such/dir"}}}"#);
    let reply = s.json();
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(text, "no/such/dir: no such file or directory in the project");

    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(s.child.id() as i32, libc::SIGINT);
    }
    let took = s.wait_exit();
    eprintln!("exited {} ms after SIGINT", took.as_millis());
    assert!(s.child.try_wait().unwrap().unwrap().success());
    let said = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(said, "", "the server wrote to stderr in normal operation");
}

/// A notification before `initialize` (a client cancelling its probe) does not end the
/// session; a message that is not JSON-RPC 2.0 is answered "Invalid request" with its id.
#[test]
fn protocol_edge_cases_neither_end_nor_wedge_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start(&dir.path().canonicalize().unwrap());
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"server-discover-probe-1"}}"#);
    let (init, _) = handshake(&mut s);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let mut replies = std::collections::HashMap::new();
    for bad in [
        r#"{"jsonrpc":"2.0","id":6}"#,
        r#"{"id":7,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"s","method":5}"#,
    ] {
        s.send(bad);
        let reply = s.json();
        replies.insert(reply["id"].to_string(), reply["error"]["code"].clone());
    }
    for id in ["6", "7", "\"s\""] {
        assert_eq!(replies.get(id), Some(&serde_json::json!(-32600)), "{id}: {replies:?}");
    }
    s.send(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#);
    assert_eq!(s.json()["id"], 9);
}

/// The server, handshake done, with its raw stdout for a test that decides when to read it.
fn initialized_raw(
    root: &Path,
    state: &Path,
) -> (Child, ChildStdin, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(common::bin())
        .env("FILEWATCH_STATE_DIR", state)
        .arg("--root")
        .arg(root)
        .args(["--debounce", "20ms"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for line in [DISCOVER, INITIALIZE, INITIALIZED] {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut replies = String::new();
    for _ in 0..2 {
        stdout.read_line(&mut replies).unwrap(); // discover, initialize
    }
    (child, stdin, stdout)
}

/// A client that stops reading stdout: the server stops stamping (markers stay untagged, for
/// next time) instead of stamping asks that cannot be delivered, and SIGTERM ends it while its
/// stdout pipe is full. Every tag on disk is an ask that reached stdout or was queued when the
/// process ended.
#[cfg(unix)] // SIGTERM
#[test]
fn a_client_that_stops_reading_gets_no_undelivered_tags() {
    stop_reading_then(|child, _stdin| {
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
    });
}

/// The same client then closing stdin (Claude Code quitting without reading): stdin EOF ends
/// the server while its stdout pipe is still full.
#[test]
fn stdin_eof_ends_the_server_however_full_its_stdout() {
    stop_reading_then(|_child, stdin| drop(stdin));
}

/// Fills the server's stdout by not reading it, then ends the session with `end` and checks the
/// server exits before anyone reads the pipe, having tagged nothing it could not deliver.
fn stop_reading_then(end: fn(&mut Child, ChildStdin)) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (mut child, stdin, mut stdout) = initialized_raw(&root, state.path());
    // From here on nobody reads stdout.
    const FILES: usize = 1500;
    let pad = "# filler to make each notification long enough to fill pipes sooner\n".repeat(2);
    for i in 0..FILES {
        let text = format!("{pad}# @claude ask number {i} {}\n", "x".repeat(200));
        std::fs::write(root.join(format!("f{i:04}.py")), text).unwrap();
    }
    // Wait until stamping has stopped: the count of tagged files holds still for a while.
    let tagged = || {
        (0..FILES)
            .filter(|i| {
                std::fs::read_to_string(root.join(format!("f{i:04}.py")))
                    .is_ok_and(|t| t.contains("@claude[fw-"))
            })
            .count()
    };
    let deadline = Instant::now() + DEADLINE;
    let mut last = (tagged(), Instant::now());
    while last.1.elapsed() < Duration::from_secs(2) {
        assert!(Instant::now() < deadline, "stamping never stopped ({} tagged)", last.0);
        std::thread::sleep(Duration::from_millis(100)); // polling the tree
        let now = tagged();
        if now != last.0 {
            last = (now, Instant::now());
        }
    }
    let t = Instant::now();
    end(&mut child, stdin);
    // Nobody reads the full pipe until the process has gone.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(t.elapsed() < DEADLINE, "still running with a full stdout pipe");
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = t.elapsed();
    let mut delivered = 0;
    let mut line = String::new();
    while stdout.read_line(&mut line).unwrap_or(0) > 0 {
        delivered += usize::from(line.contains("notifications/claude/channel"));
        line.clear();
    }
    let on_disk = tagged();
    eprintln!(
        "{on_disk} of {FILES} files tagged, {delivered} notifications on stdout, exit {status} \
         {} ms after the end of the session",
        took.as_millis()
    );
    assert!(on_disk < FILES, "it kept stamping what it could not deliver");
    // What is tagged but not on stdout was held in memory when the process ended: the ask
    // queue; the 16 KiB pipe behind rmcp (a notification here is over 300 bytes: under 60);
    // one or two each in the announcer and rmcp.
    let held = filewatch_mcp::server::ASK_QUEUE + 60 + 8;
    assert!(on_disk <= delivered + held, "{on_disk} tagged, {delivered} delivered");
}

/// stdout closed (the client went away without closing stdin): the first announcement that
/// cannot be written ends the server, and nothing is tagged that was not written to the
/// client — not even that first ask.
#[test]
fn a_closed_stdout_ends_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (mut child, stdin, stdout) = initialized_raw(&root, state.path());
    drop(stdout); // the client is gone; stdin stays open
    let deadline = Instant::now() + DEADLINE;
    let mut saves = 0;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "still running with stdout closed");
        saves += 1;
        std::fs::write(root.join(format!("f{saves}.py")), format!("# @claude ask {saves}\n"))
            .unwrap();
        std::thread::sleep(Duration::from_millis(200)); // pacing saves, not waiting for time
    }
    let tagged = (1..=saves)
        .filter(|i| {
            std::fs::read_to_string(root.join(format!("f{i}.py"))).unwrap().contains("[fw-")
        })
        .count();
    eprintln!("exited after {saves} saves; {tagged} tagged");
    assert_eq!(tagged, 0, "tagged with stdout closed: asks that reached nobody");
    drop(stdin);
}

/// A file with far more markers than the ask queue holds: every one is announced, once, in
/// file order, and every one ends up tagged with the id it was announced with.
#[test]
fn a_file_with_many_asks_delivers_them_all_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut s = Server::start(&root);
    handshake(&mut s);
    const ASKS: usize = 1000;
    let text: String = (0..ASKS).map(|i| format!("x{i} = 1  # @claude review {i}\n")).collect();
    std::fs::write(root.join("r.py"), &text).unwrap();
    let mut got = Vec::new();
    while got.len() < ASKS {
        let note = s.note(is_ask_of("r.py"));
        s.notes.clear();
        got.push(note);
    }
    let lines: Vec<String> = got.iter().map(|n| n["params"]["meta"]["line"].to_string()).collect();
    let want: Vec<String> = (1..=ASKS).map(|i| format!("\"{i}\"")).collect();
    assert_eq!(lines, want, "not every ask, or not in file order");
    let ids: std::collections::HashSet<&str> =
        got.iter().map(|n| n["params"]["meta"]["replyTo"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), ASKS, "ids are not unique");
    // Once heard, every marker carries the id it was announced with.
    s.hear_all(20);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = std::fs::read_to_string(root.join("r.py")).unwrap();
        let tagged = now.lines().enumerate().all(|(i, l)| {
            let id = got[i]["params"]["meta"]["replyTo"].as_str().unwrap();
            l.contains(&format!("@claude[{id}] review {i}"))
        });
        if tagged {
            break;
        }
        assert!(Instant::now() < deadline, "not every marker was tagged with its id");
        std::thread::sleep(Duration::from_millis(50)); // polling the file
    }
}

/// Waits (with a deadline) until `path` holds exactly `want`.
fn wait_for_file(path: &Path, want: &str) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = std::fs::read_to_string(path).unwrap_or_default();
        if now == want {
            return;
        }
        assert!(Instant::now() < deadline, "{}: {now:?}, not {want:?}", path.display());
        std::thread::sleep(Duration::from_millis(20)); // polling the file
    }
}

/// The channel notifications about asks of `file` in `notes` (a notice has no `file`).
fn asks_of(notes: &[Value], file: &str) -> Vec<Value> {
    notes
        .iter()
        .filter(|n| {
            n["method"] == "notifications/claude/channel" && n["params"]["meta"]["file"] == file
        })
        .cloned()
        .collect()
}

fn is_notice(kind: &str) -> impl Fn(&Value) -> bool + '_ {
    move |n| n["params"]["meta"]["notice"] == kind
}

fn is_ask_of(file: &str) -> impl Fn(&Value) -> bool + '_ {
    move |n| n["method"] == "notifications/claude/channel" && n["params"]["meta"]["file"] == file
}

/// The handshake, answered in any order: the reply to `tools/list` may follow a notification.
fn handshake_any_order(s: &mut Server) {
    s.send(DISCOVER);
    assert_eq!(s.reply_str("server-discover-probe-1")["error"]["code"], -32601);
    s.send(INITIALIZE);
    assert_eq!(s.reply(0)["result"]["protocolVersion"], "2025-11-25");
    s.send(INITIALIZED);
    s.send(TOOLS_LIST);
    s.reply(1);
}

/// Two Claude Code sessions in one repository: the first server owns the root and gets every
/// ask; the second answers the tools, says once which session gets the asks, and takes over
/// when the owner ends — by SIGKILL or by its client closing stdin — without missing the save
/// made right then. No ask is announced twice across the two.
fn two_servers_on_one_root(end_owner: fn(&mut Server), tag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let args = ["--tag", tag];
    let mut a = Server::start_with_args(&root, state.path(), Stdio::inherit(), &args);
    handshake_any_order(&mut a);
    let mut b = Server::start_with_args(&root, state.path(), Stdio::inherit(), &args);
    handshake_any_order(&mut b);

    // B says once who owns the root: a channel notification Claude Code accepts.
    let notice = b.note(is_notice("standby"));
    let params = &notice["params"];
    let content = params["content"].as_str().unwrap();
    eprintln!("standby notice: {content}");
    assert!(content.contains(&format!("pid {}", a.child.id())), "{content}");
    assert!(content.contains(&root.display().to_string()), "{content}");
    for (k, v) in params["meta"].as_object().unwrap() {
        assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{k}");
        assert!(v.is_string(), "meta {k} is not a string: {v}");
    }
    assert!(params["meta"].get("replyTo").is_none() && params["meta"].get("source").is_none());

    // A save: the owner announces it.
    std::fs::write(root.join("a.py"), "# @claude first ask\n").unwrap();
    let first = a.note(is_ask_of("a.py"));
    let first_id = first["params"]["meta"]["replyTo"].as_str().unwrap().to_string();

    // B lists it, and resolves an ask it never announced.
    let listed = b.call(10, "list_asks", serde_json::json!({}));
    let listed: Value =
        serde_json::from_str(listed["content"][0]["text"].as_str().unwrap()).unwrap();
    let pending: Vec<&str> =
        listed["pending"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(pending, [first_id.as_str()], "{listed}");
    std::fs::write(root.join("b.py"), "x = 1\n# @claude resolve me elsewhere\n").unwrap();
    let second = a.note(is_ask_of("b.py"));
    let second_id = second["params"]["meta"]["replyTo"].as_str().unwrap();
    let resolved = b.call(11, "resolve_ask", serde_json::json!({ "id": second_id }));
    assert_ne!(resolved["isError"], true, "{resolved}");
    assert_eq!(std::fs::read_to_string(root.join("b.py")).unwrap(), "x = 1\n");

    // The owner ends; a save right then is B's, once.
    end_owner(&mut a);
    std::fs::write(root.join("c.py"), "# @claude saved as the owner went\n").unwrap();
    b.note(is_notice("owner"));
    let third = b.note(is_ask_of("c.py"));
    let third_id = third["params"]["meta"]["replyTo"].as_str().unwrap();
    b.hear_all(12);
    let tagged = match tag {
        "never" => String::new(),
        _ => format!("[{third_id}]"),
    };
    wait_for_file(&root.join("c.py"), &format!("# @claude{tagged} saved as the owner went\n"));
    std::fs::write(root.join("d.py"), "# @claude after the takeover\n").unwrap();
    b.note(is_ask_of("d.py"));
    a.wait_exit();
    a.drain();

    // Nothing twice, nothing to the wrong session.
    let count = |s: &Server, file| asks_of(&s.notes, file).len();
    for (file, in_a, in_b) in [("a.py", 1, 0), ("b.py", 1, 0), ("c.py", 0, 1), ("d.py", 0, 1)] {
        assert_eq!((count(&a, file), count(&b, file)), (in_a, in_b), "{file}: (A, B)");
    }
    let notices = |s: &Server, kind| s.notes.iter().filter(|n| is_notice(kind)(n)).count();
    assert_eq!((notices(&a, "standby"), notices(&a, "owner")), (0, 0), "A owned from the start");
    assert_eq!((notices(&b, "standby"), notices(&b, "owner")), (1, 1), "B said each once");
}

/// What one owner announced survives a takeover: the owner announces and tags an ask and is
/// killed; an editor's stale buffer writes the marker back untagged; the new owner knows it
/// (the root's ledger) and does not announce it a second time. A new ask after it still goes
/// out, once.
#[test]
fn a_stale_buffer_after_a_takeover_is_not_announced_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut a = Server::start_in(&root, state.path(), Stdio::inherit());
    handshake_any_order(&mut a);
    let mut b = Server::start_in(&root, state.path(), Stdio::inherit());
    handshake_any_order(&mut b);
    b.note(is_notice("standby"));
    let stale = "def f():\n    pass  # @claude explain f\n";
    std::fs::write(root.join("a.py"), stale).unwrap();
    let ask = a.note(is_ask_of("a.py"));
    let id = ask["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    a.hear_all(20);
    wait_for_file(&root.join("a.py"), &stale.replace("@claude", &format!("@claude[{id}]")));
    a.child.kill().unwrap();
    b.note(is_notice("owner"));
    // The editor still holds the buffer it had before the tag, and saves it (with an edit).
    std::fs::write(root.join("a.py"), format!("{stale}x = 1\n")).unwrap();
    std::fs::write(root.join("b.py"), "# @claude after the takeover\n").unwrap();
    b.note(is_ask_of("b.py"));
    assert_eq!(asks_of(&b.notes, "a.py").len(), 0, "announced again after the takeover");
}

#[test]
fn two_servers_on_one_root_the_second_takes_over_after_sigkill() {
    two_servers_on_one_root(|a| a.child.kill().unwrap(), "file");
}

#[test]
fn two_servers_on_one_root_the_second_takes_over_after_stdin_eof() {
    two_servers_on_one_root(|a| drop(a.stdin.take()), "file");
}

/// With `--tag never` the files say nothing: the shared ledger is what keeps the new owner
/// from announcing again what the old one did.
#[test]
fn two_servers_on_one_root_with_tag_never() {
    two_servers_on_one_root(|a| a.child.kill().unwrap(), "never");
}

/// `watch` in a terminal on a root a server owns follows the same rule: it says who owns the
/// root and waits (the asks go to that session); when the owner exits, it takes over, and the
/// save made right then is its to print, once.
#[test]
fn watch_on_an_owned_root_waits_then_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut a = Server::start_in(&root, state.path(), Stdio::inherit());
    handshake_any_order(&mut a);
    let watch = WatchProcess::spawn(
        &root,
        &["--debounce", "100ms"],
        &[("FILEWATCH_STATE_DIR", state.path())],
    );
    let said = |pattern: &str| watch.log_until(pattern, DEADLINE).pop().unwrap();
    let owned = said("owns");
    assert!(owned.contains(&format!("pid {}", a.child.id())), "{owned}");

    std::fs::write(root.join("a.py"), "# @claude for the session\n").unwrap();
    a.note(is_ask_of("a.py"));
    a.child.kill().unwrap();
    std::fs::write(root.join("b.py"), "# @claude for the terminal\n").unwrap();
    said("filewatch-mcp: watching");
    let printed = watch.asks.recv_timeout(DEADLINE).expect("an ask printed");
    assert_eq!(printed["file"], "b.py", "{printed}");
    std::fs::write(root.join("c.py"), "# @claude sentinel\n").unwrap();
    let next = watch.asks.recv_timeout(DEADLINE).expect("an ask printed");
    assert_eq!(next["file"], "c.py", "b.py printed twice, or a.py printed: {next}");
}

/// Two triggers are two audiences: `watch --trigger @bob` on a root gets the `@bob` asks, and a
/// Claude session on the same root (`@claude`) owns its own and hears them at once, instead of
/// standing by until the watch exits.
#[test]
fn two_triggers_on_one_root_are_two_owners() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let watch = WatchProcess::start(
        &root,
        &["--debounce", "100ms", "--trigger", "@bob"],
        &[("FILEWATCH_STATE_DIR", state.path())],
        DEADLINE,
    );
    let mut s = Server::start_in(&root, state.path(), Stdio::inherit());
    handshake_any_order(&mut s);

    std::fs::write(root.join("a.py"), "# @claude for the session\n").unwrap();
    let ask = s.note(|n| is_ask_of("a.py")(n) || is_notice("standby")(n));
    assert!(is_ask_of("a.py")(&ask), "the session stands by for another trigger's owner: {ask}");
    std::fs::write(root.join("b.py"), "# @bob for the terminal\n").unwrap();
    let printed = watch.asks.recv_timeout(DEADLINE).expect("an ask printed");
    assert_eq!(printed["file"], "b.py", "{printed}");
    assert_eq!(printed["text"], "@bob for the terminal", "{printed}");
}

/// The binary as a user without special rights (root writes everywhere, so as root: nobody,
/// through `setpriv`); `None` where that is impossible.
#[cfg(unix)]
fn unprivileged() -> Option<Command> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(Command::new(common::bin()));
    }
    Command::new("setpriv").arg("--version").output().ok()?;
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    cmd.arg(common::bin());
    Some(cmd)
}

/// Everything the server writes to stderr, once it has exited (or been killed).
#[cfg(unix)] // used by the Unix-only state-directory tests
fn stderr_of(s: &mut Server) -> std::thread::JoinHandle<String> {
    use std::io::Read;
    let mut err = s.child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text);
        eprint!("{text}");
        text
    })
}

/// True once the server answered `initialize`, false if it exited first; panics if it does
/// neither within the deadline (it hangs).
#[cfg(unix)] // used by the Unix-only state-directory tests
fn initialized_or_exited(s: &mut Server, what: &str) -> bool {
    if let Some(stdin) = s.stdin.as_mut() {
        let _ = writeln!(stdin, "{INITIALIZE}").and_then(|()| stdin.flush());
    }
    match s.lines.recv_timeout(DEADLINE) {
        Ok(line) => {
            assert!(line.contains("protocolVersion"), "{what}: {line}");
            if let Some(stdin) = s.stdin.as_mut() {
                let _ = writeln!(stdin, "{INITIALIZED}").and_then(|()| stdin.flush());
            }
            true
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => false,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: neither answered initialize nor exited within {DEADLINE:?}")
        }
    }
}

/// `--tag never` keeps the owner lock and the ledger in the state directory. One the server
/// cannot write (another user's, read-only) must not make two sessions on a root both announce
/// every ask: each refuses to start and says why, or, if both run, one of them stands by.
#[cfg(unix)]
#[test]
fn tag_never_with_a_state_directory_it_cannot_write_never_announces_twice() {
    use std::os::unix::fs::PermissionsExt;
    if unprivileged().is_none() {
        eprintln!("no setpriv to run as another user; skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut running = Vec::new();
    for name in ["A", "B"] {
        let cmd = unprivileged().unwrap();
        let mut s = Server::spawn(cmd, &root, state.path(), Stdio::piped(), &["--tag", "never"]);
        let err = stderr_of(&mut s);
        if initialized_or_exited(&mut s, name) {
            running.push(s);
            continue;
        }
        let status = s.child.wait().unwrap();
        let err = err.join().unwrap();
        assert!(!status.success(), "{name} exited with success: {err}");
        let dir = state.path().display().to_string();
        assert!(err.contains(&dir) && err.contains("--tag never"), "{name}: unclear: {err}");
    }
    if running.len() < 2 {
        return; // refused: nothing can be announced twice
    }
    // Both run: one must stand by (a standby says so at once).
    std::fs::write(root.join("a.py"), "# @claude once\n").unwrap();
    let said: Vec<Value> = running
        .iter_mut()
        .map(|s| s.note(|n| is_ask_of("a.py")(n) || is_notice("standby")(n)))
        .collect();
    let asks = said.iter().filter(|n| is_ask_of("a.py")(n)).count();
    assert_eq!(asks, 1, "both servers announced the ask: {said:?}");
}

/// Issue 30 (13): a state directory the servers cannot use — a regular file at its path, or
/// one they cannot write — still gives a root one owner (`--tag file`, which starts anyway):
/// of two sessions one announces and the other stands by, and each of five asks is announced
/// once, not once per session.
#[cfg(unix)]
#[test]
fn a_state_directory_that_cannot_be_used_still_gives_a_root_one_owner() {
    use std::os::unix::fs::PermissionsExt;
    for case in ["a regular file", "read-only"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let root = dir.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let state = outside.path().join("state");
        let command: fn() -> Option<Command> = match case {
            "a regular file" => {
                std::fs::write(&state, "not a directory").unwrap();
                || Some(Command::new(common::bin()))
            }
            _ => {
                std::fs::create_dir(&state).unwrap();
                std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o555)).unwrap();
                unprivileged
            }
        };
        if command().is_none() {
            eprintln!("{case}: no setpriv to run as another user; skipped");
            continue;
        }
        let mut servers: Vec<Server> = (0..2)
            .map(|_| {
                let mut s = Server::spawn(command().unwrap(), &root, &state, Stdio::inherit(), &[]);
                handshake_any_order(&mut s);
                s
            })
            .collect();
        let files = ["a.py", "b.py", "c.py", "d.py", "e.py"];
        for f in files {
            std::fs::write(root.join(f), format!("# @claude ask in {f}\n")).unwrap();
        }
        // Every ask heard by one of them; then a last one, after which nothing more comes.
        let mut heard = |file: &str| {
            let deadline = Instant::now() + DEADLINE;
            loop {
                if servers.iter().any(|s| !asks_of(&s.notes, file).is_empty()) {
                    return;
                }
                assert!(Instant::now() < deadline, "{case}: {file}'s ask never announced");
                for s in servers.iter_mut() {
                    while let Ok(line) = s.lines.try_recv() {
                        s.notes.push(serde_json::from_str(&line).unwrap());
                    }
                }
                std::thread::sleep(Duration::from_millis(10)); // polling two pipes
            }
        };
        for f in files {
            heard(f);
        }
        std::fs::write(root.join("last.py"), "# @claude the last one\n").unwrap();
        heard("last.py");
        for f in files {
            let per_server: Vec<usize> =
                servers.iter().map(|s| asks_of(&s.notes, f).len()).collect();
            assert_eq!(per_server.iter().sum::<usize>(), 1, "{case}: {f} announced {per_server:?}");
        }
    }
}

/// The state directory is trusted no more than the tree: a FIFO, or a symlink to `/dev/zero`,
/// where the owner lock, the owner record, the ledger or its lock is must neither hang the
/// server (before `initialize`, deaf to stdin EOF) nor be read: it starts, or refuses to and
/// names the file (with `--tag never`; with `--tag file` it starts, and says what it does
/// without).
#[cfg(unix)]
#[test]
fn hostile_files_in_the_state_directory_neither_hang_the_server_nor_get_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let good = tempfile::tempdir().unwrap();
    let never = ["--tag", "never"];
    // A run that makes every state file.
    let mut a = Server::start_with_args(&root, good.path(), Stdio::inherit(), &never);
    handshake_any_order(&mut a);
    std::fs::write(root.join("a.py"), "# @claude make the ledger\n").unwrap();
    a.note(is_ask_of("a.py"));
    drop(a.stdin.take());
    a.wait_exit();
    let mut names: Vec<String> = std::fs::read_dir(good.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file()) // not `sessions/`: hooks read it, with care
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.len() >= 4, "the owner lock and record, the ledger and its lock: {names:?}");
    for name in &names {
        for kind in ["fifo", "symlink to /dev/zero"] {
            let what = format!("{name} as a {kind}");
            let state = tempfile::tempdir().unwrap();
            for n in &names {
                std::fs::copy(good.path().join(n), state.path().join(n)).unwrap();
            }
            // The record is read by a server that finds the root owned: an owner first.
            let _owner = name.ends_with("owner.json").then(|| {
                let mut o = Server::start_with_args(&root, state.path(), Stdio::inherit(), &never);
                handshake_any_order(&mut o);
                o
            });
            let target = state.path().join(name);
            std::fs::remove_file(&target).unwrap();
            if kind == "fifo" {
                let made = Command::new("mkfifo").arg(&target).status().unwrap();
                assert!(made.success());
            } else {
                std::os::unix::fs::symlink("/dev/zero", &target).unwrap();
            }
            // With --tag file the tags keep an ask from firing twice: it starts, whatever is
            // there (and says what it does without).
            let cmd = Command::new(common::bin());
            let mut s = Server::spawn(cmd, &root, state.path(), Stdio::inherit(), &[]);
            assert!(initialized_or_exited(&mut s, &format!("{what}, --tag file")));
            drop(s.stdin.take());
            s.wait_exit();
            let cmd = Command::new(common::bin());
            let mut s = Server::spawn(cmd, &root, state.path(), Stdio::piped(), &never);
            let err = stderr_of(&mut s);
            if initialized_or_exited(&mut s, &what) {
                drop(s.stdin.take());
                s.wait_exit(); // ends on stdin EOF
                eprintln!("{what}: started");
                continue;
            }
            let status = s.child.wait().unwrap();
            let err = err.join().unwrap();
            assert!(!status.success(), "{what}: exited with success: {err}");
            assert!(err.contains(name.as_str()), "{what}: the error does not name it: {err}");
        }
    }
}

/// Issue 30 (6): one ask per hard-linked file, not one per name. `a.py` and `lib/b.py` are one
/// file; an ask saved through one name and a later save through the other are one
/// announcement with one id (a file with several names is never tagged: the id is in the
/// message), and `resolve_ask` with that id removes the marker — seen by both names.
#[cfg(unix)]
#[test]
fn a_hard_linked_file_is_one_ask_by_either_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (a, b) = (root.join("a.py"), root.join("lib/b.py"));
    std::fs::create_dir(root.join("lib")).unwrap();
    std::fs::write(&a, "x = 1\n").unwrap();
    std::fs::hard_link(&a, &b).unwrap();
    let mut s = Server::start(&root);
    handshake_any_order(&mut s);
    let append = |p: &Path, text: &str| {
        let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    append(&a, "# @claude one file, two names\n");
    let first = s.note(|n| n["method"] == "notifications/claude/channel");
    append(&b, "y = 2\n");
    std::fs::write(root.join("sentinel.py"), "# @claude sentinel\n").unwrap();
    s.note(is_ask_of("sentinel.py"));
    let asks: Vec<&Value> = s
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/claude/channel")
        .filter(|n| n["params"]["content"] == "@claude one file, two names")
        .collect();
    assert_eq!(asks.len(), 1, "one announcement: {asks:#?}");
    let id = first["params"]["meta"]["replyTo"].as_str().unwrap_or_default().to_string();
    assert!(id.starts_with("fw-"), "no id: {first}");
    let resolved = s.call(20, "resolve_ask", serde_json::json!({ "id": id }));
    assert_ne!(resolved["isError"], true, "{resolved}");
    for p in [&a, &b] {
        assert_eq!(std::fs::read_to_string(p).unwrap(), "x = 1\ny = 2\n", "{}", p.display());
    }
    assert_eq!(std::fs::metadata(&a).unwrap().nlink(), 2, "the links were split");
}
