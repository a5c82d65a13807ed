//! Claude's own writes are not the user's asks. A simulated Claude handles each ask the way a
//! model plausibly does — it writes a test file whose header copies the ask comment, and edits
//! the ask's file to leave a follow-up `# @claude …` comment — through simulated `Write` and
//! `Edit` tool calls, with the plugin's hooks run exactly as Claude Code 2.1.332 runs them: the
//! command from `plugin/hooks/hooks.json` (exec form when it has `args`, else through bash),
//! `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PROJECT_DIR` set, the hook's JSON (the shape the 2.1.332
//! bundle builds) on stdin, `PreToolUse` before the write and `PostToolUse` after it. Meanwhile
//! the user saves real asks for 10 s, in the same files. Exactly the user's asks come out, each
//! once; none of Claude's. (Without hooks, one ask became dozens in seconds, without end.)
#![cfg(unix)] // the hook is a shell script

mod common;

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::WatchProcess;
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(60);
/// How long the user and Claude work side by side.
const SESSION: Duration = Duration::from_secs(10);
/// A runaway loop is cut here, so that the test ends and says how many there were.
const RUNAWAY: usize = 300;

/// One hook command of `hooks.json`.
#[derive(Debug, Clone)]
struct Hook {
    event: String,
    tools: Vec<String>,
    command: String,
    args: Option<Vec<String>>,
}

/// The plugin's hooks, or none if it has no `hooks/hooks.json`.
fn plugin_hooks(plugin: &Path) -> Vec<Hook> {
    let Ok(text) = std::fs::read_to_string(plugin.join("hooks/hooks.json")) else {
        eprintln!("no plugin/hooks/hooks.json: Claude's writes go unreported");
        return Vec::new();
    };
    hooks_of(&serde_json::from_str(&text).expect("hooks.json is JSON"))
}

/// The hooks of the `.claude/settings.json` snippet in docs/security.md (for a server
/// registered without the plugin; `filewatch-mcp hooks print`): its JSON block that runs
/// `filewatch-mcp`.
fn settings_hooks() -> Vec<Hook> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/security.md");
    let doc = std::fs::read_to_string(doc).unwrap();
    let block = doc
        .split("```json")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains("\"filewatch-mcp\""))
        .expect("a settings.json snippet in docs/security.md");
    hooks_of(&serde_json::from_str(block).expect("the snippet is JSON"))
}

/// The hook commands of a `{"hooks": {EVENT: [{matcher, hooks: [...]}]}}` document.
fn hooks_of(v: &Value) -> Vec<Hook> {
    let mut hooks = Vec::new();
    for (event, groups) in v["hooks"].as_object().expect("a hooks object") {
        for group in groups.as_array().unwrap() {
            let matcher = group["matcher"].as_str().unwrap_or("*");
            // Claude Code reads a matcher of names and `|` as a list of tool names, and `*`
            // (or none) as every tool.
            let every = matcher == "*" || matcher.is_empty();
            assert!(
                every || matcher.chars().all(|c| c.is_ascii_alphanumeric() || c == '|'),
                "{matcher}"
            );
            let tools: Vec<String> = if every {
                vec!["*".to_string()]
            } else {
                matcher.split('|').map(str::to_string).collect()
            };
            for h in group["hooks"].as_array().unwrap() {
                assert_eq!(h["type"], "command");
                let args = h.get("args").map(|a| {
                    a.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
                });
                let command = h["command"].as_str().unwrap().to_string();
                hooks.push(Hook { event: event.clone(), tools: tools.clone(), command, args });
            }
        }
    }
    hooks
}

/// `PATH` with the built `filewatch-mcp` first (the settings snippet runs it by name).
fn path_with_the_binary() -> std::ffi::OsString {
    let bin = Path::new(env!("CARGO_BIN_EXE_filewatch-mcp")).parent().unwrap().to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&rest))).unwrap()
}

/// Claude Code's side of a session: the project, the plugin, and the hooks it runs.
struct ClaudeCode {
    project: PathBuf,
    plugin: PathBuf,
    hooks: Vec<Hook>,
    state: PathBuf,
    session_id: String,
    calls: usize,
}

impl ClaudeCode {
    /// `${CLAUDE_PLUGIN_ROOT}` and `${CLAUDE_PROJECT_DIR}` put in, as Claude Code does before it
    /// runs a command.
    fn expand(&self, s: &str) -> String {
        s.replace("${CLAUDE_PLUGIN_ROOT}", self.plugin.to_str().unwrap())
            .replace("${CLAUDE_PROJECT_DIR}", self.project.to_str().unwrap())
    }

    /// Runs every hook of `event` that matches `tool` with `input` on stdin; each must exit 0
    /// with nothing on stdout (Claude Code would read it as the hook's answer).
    fn run_hooks(&self, event: &str, tool: &str, input: &Value) {
        for hook in self
            .hooks
            .iter()
            .filter(|h| h.event == event && h.tools.iter().any(|t| t == tool || t == "*"))
        {
            let mut command = match &hook.args {
                Some(args) => {
                    let mut c = Command::new(self.expand(&hook.command));
                    c.args(args.iter().map(|a| self.expand(a)));
                    c
                }
                None => {
                    let mut c = Command::new("bash");
                    c.arg("-c").arg(self.expand(&hook.command));
                    c
                }
            };
            let mut child = command
                .current_dir(&self.project)
                .env("CLAUDE_PLUGIN_ROOT", &self.plugin)
                .env("CLAUDE_PROJECT_DIR", &self.project)
                .env("FILEWATCH_MCP_BIN", env!("CARGO_BIN_EXE_filewatch-mcp"))
                .env("PATH", path_with_the_binary())
                .env("FILEWATCH_STATE_DIR", &self.state)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run the hook");
            child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{event} hook: {out:?}");
            assert!(out.stdout.is_empty(), "{event} hook wrote to stdout: {out:?}");
        }
    }

    /// The hook input as Claude Code 2.1.332 builds it (`session_id`, `transcript_path`, `cwd`,
    /// `permission_mode`, `hook_event_name`, `tool_name`, `tool_input`, `tool_use_id`; for
    /// `PostToolUse` also `tool_response` and `duration_ms`).
    fn input(&self, event: &str, tool: &str, id: &str, tool_input: &Value) -> Value {
        json!({
            "session_id": self.session_id,
            "transcript_path": format!("/tmp/claude/{}.jsonl", self.session_id),
            "cwd": self.project,
            "permission_mode": "default",
            "hook_event_name": event,
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": id,
        })
    }

    /// A tool call: Pre hooks, the write (`None`: the tool failed, nothing written), Post hooks.
    fn call(&mut self, tool: &str, tool_input: Value, write: impl FnOnce() -> Option<Value>) {
        self.calls += 1;
        let id = format!("toolu_{:020}", self.calls);
        self.run_hooks("PreToolUse", tool, &self.input("PreToolUse", tool, &id, &tool_input));
        let started = Instant::now();
        let Some(response) = write() else { return };
        let mut post = self.input("PostToolUse", tool, &id, &tool_input);
        post["tool_response"] = response;
        post["duration_ms"] = json!(started.elapsed().as_millis() as u64);
        self.run_hooks("PostToolUse", tool, &post);
    }

    /// The `Write` tool: the whole file.
    fn write(&mut self, path: &Path, content: &str) {
        let input = json!({ "file_path": path, "content": content });
        self.call("Write", input, || {
            let original = std::fs::read_to_string(path).ok();
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
            let lines: Vec<String> = content.lines().map(|l| format!("+{l}")).collect();
            Some(json!({
                "type": if original.is_some() { "update" } else { "create" },
                "filePath": path,
                "content": content,
                "structuredPatch": [{
                    "oldStart": 1, "oldLines": 0, "newStart": 1,
                    "newLines": lines.len(), "lines": lines,
                }],
                "originalFile": original,
            }))
        });
    }

    /// The `Edit` tool: `old` replaced by `new` once; it fails if the file changed since Claude
    /// read it (`read`) or does not hold `old`, as Claude Code's does.
    fn edit(&mut self, path: &Path, read: &str, old: &str, new: &str) {
        let input = json!({ "file_path": path, "old_string": old, "new_string": new });
        self.call("Edit", input, || {
            let original = std::fs::read_to_string(path).ok()?;
            if original != read || !original.contains(old) {
                return None;
            }
            let updated = original.replacen(old, new, 1);
            std::fs::write(path, &updated).unwrap();
            let mut lines: Vec<String> = old.lines().map(|l| format!("-{l}")).collect();
            lines.extend(new.lines().map(|l| format!("+{l}")));
            let start = original[..original.find(old).unwrap()].lines().count() + 1;
            Some(json!({
                "filePath": path,
                "oldString": old,
                "newString": new,
                "originalFile": original,
                "structuredPatch": [{
                    "oldStart": start, "oldLines": old.lines().count(),
                    "newStart": start, "newLines": new.lines().count(), "lines": lines,
                }],
                "userModified": false,
                "replaceAll": false,
            }))
        });
    }
}

#[test]
fn claudes_writes_are_never_asks_and_the_users_are_once() {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin");
    session(plugin_hooks(&plugin), SESSION);
}

/// The same with the hooks of the documented `.claude/settings.json` snippet, `filewatch-mcp`
/// found on `PATH`, for a shorter session.
#[test]
fn the_settings_snippet_hooks_do_the_same() {
    let hooks = settings_hooks();
    // SessionStart and Stop (waiting), UserPromptSubmit, PreToolUse and PostToolUse.
    assert_eq!(hooks.len(), 5, "{hooks:?}");
    session(hooks, SESSION / 3);
}

/// The user saving asks for `length` beside a Claude handling them, with `hooks`.
fn session(hooks: Vec<Hook>, length: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin");
    let w = WatchProcess::start(
        &root,
        &["--debounce", "100ms"],
        &[("FILEWATCH_STATE_DIR", state.path())],
        DEADLINE,
    );
    let mut claude = ClaudeCode {
        project: root.clone(),
        plugin,
        hooks,
        state: state.path().to_path_buf(),
        session_id: "0b9c6a8e-5f0e-4d35-9d59-6d1c5d2f3a10".to_string(),
        calls: 0,
    };
    // The user's files, each written by one hand at a time (Claude Code's Edit refuses a file
    // changed since it was read, so the two never interleave within one edit).
    let files: Arc<HashMap<String, Mutex<()>>> =
        Arc::new((0..4).map(|i| (format!("u{i}.py"), Mutex::new(()))).collect());
    for name in files.keys() {
        std::fs::write(root.join(name), format!("# {name}\nx = 1\n")).unwrap();
    }

    // The user: a real ask every ~400 ms for 10 s, appended to one of the files.
    let user = {
        let (root, files) = (root.clone(), files.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut typed = Vec::new();
            let mut i = 0;
            while started.elapsed() < length {
                let name = format!("u{}.py", i % 4);
                let text = format!("@claude user ask {i}: explain line {}", i + 1);
                {
                    let _held = files[&name].lock().unwrap();
                    let p = root.join(&name);
                    let now = std::fs::read_to_string(&p).unwrap();
                    std::fs::write(&p, format!("{now}# {text}\n")).unwrap();
                }
                typed.push(text);
                i += 1;
                std::thread::sleep(Duration::from_millis(400));
            }
            typed
        })
    };

    // Claude: handles each ask as it comes. Once the user is done, two barriers: a sentinel
    // file's ask comes after everything saved before it, and the second one after whatever
    // Claude wrote while the first was on its way.
    let mut heard: Vec<Value> = Vec::new();
    let mut tests_written = 0;
    let mut barriers = 0;
    let mut waiting_for: Option<String> = None;
    let give_up = Instant::now() + length + DEADLINE;
    while barriers < 2 && heard.len() <= RUNAWAY {
        if waiting_for.is_none() && user.is_finished() {
            barriers += 1;
            let name = format!("sentinel-{barriers}.py");
            std::fs::write(root.join(&name), format!("# @claude sentinel {barriers}\n")).unwrap();
            waiting_for = Some(name);
        }
        let Ok(ask) = w.asks.recv_timeout(Duration::from_millis(200)) else {
            assert!(Instant::now() < give_up, "no sentinel's ask: {heard:?}");
            continue;
        };
        if Some(ask["file"].as_str().unwrap()) == waiting_for.as_deref() {
            waiting_for = None;
            continue;
        }
        heard.push(ask.clone());
        let (file, text) = (ask["file"].as_str().unwrap(), ask["text"].as_str().unwrap());
        let id = ask["id"].as_str().unwrap_or_default();
        // A test whose header copies the ask comment, untagged, as it was typed.
        tests_written += 1;
        let test = root.join(format!("tests/test_{tests_written}.py"));
        claude.write(
            &test,
            &format!("# {text}\n# (from {file})\ndef test_{tests_written}():\n    assert True\n"),
        );
        // A follow-up in the ask's own file, under the marker.
        let Some(held) = files.get(file) else { continue };
        let _held = held.lock().unwrap();
        let p = root.join(file);
        let read = std::fs::read_to_string(&p).unwrap();
        let Some(line) = read.lines().find(|l| !id.is_empty() && l.contains(id)) else { continue };
        let follow_up = format!("{line}\n# @claude follow-up: did this answer {id}?");
        claude.edit(&p, &read, line, &follow_up);
    }
    let typed = user.join().unwrap();
    eprintln!(
        "{} asks typed by the user, {} heard, {} tool calls by Claude ({} hooks each)",
        typed.len(),
        heard.len(),
        claude.calls,
        claude.hooks.len()
    );

    let mut texts: Vec<String> =
        heard.iter().map(|a| a["text"].as_str().unwrap().to_string()).collect();
    // Claude's: in its test files, or a follow-up it left.
    let is_claudes = |a: &Value| {
        a["file"].as_str().unwrap().starts_with("tests/")
            || !a["text"].as_str().unwrap().contains("user ask")
    };
    let from_claude: Vec<&Value> = heard.iter().filter(|a| is_claudes(a)).collect();
    assert!(
        from_claude.is_empty(),
        "{} asks from Claude's own writes beside the user's {} (cut at {RUNAWAY}): {:?}",
        from_claude.len(),
        typed.len(),
        from_claude.iter().take(3).map(|a| &a["text"]).collect::<Vec<_>>()
    );
    texts.sort();
    let mut want = typed.clone();
    want.sort();
    let unique: HashSet<&String> = texts.iter().collect();
    assert_eq!(unique.len(), texts.len(), "an ask announced twice");
    assert_eq!(texts, want, "the user's asks, each once");
    assert!(claude.calls >= typed.len(), "Claude handled the asks: {} tool calls", claude.calls);
}

/// The channel notes of `s` until `deadline`: each ask it announced (`meta.file`, the text).
fn announced_until(s: &mut common::mcp::Server, deadline: Instant) -> Vec<(String, String)> {
    let mut asks = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok(line) = s.lines.recv_timeout(left) else { break };
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "notifications/claude/channel" {
            let file = v["params"]["meta"]["file"].as_str().unwrap_or_default().to_string();
            asks.push((file, v["params"]["content"].as_str().unwrap_or_default().to_string()));
        } else {
            s.notes.push(v);
        }
    }
    asks
}

/// Issue 30 (4): only a line Claude's tool really wrote is Claude's. Claude proposes an `Edit`
/// that adds `# @claude explain f` above `f`; the user denies it (the `PreToolUse` hook ran, the
/// file is unchanged, no `PostToolUse`), and then types that very line there and saves: it is
/// the user's ask. A line Claude's `Edit` really wrote (`PreToolUse`, the write, `PostToolUse`)
/// is not announced, and `list_asks` says why (`not_announced`). Through the real hook command.
#[test]
fn a_denied_edit_leaves_the_users_identical_line_an_ask() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin");
    let p = root.join("a.py");
    let original = "def f():\n    pass\n\n\ndef g():\n    pass\n";
    std::fs::write(&p, original).unwrap();
    let mut s = common::mcp::Server::start_in(&root, state.path(), Stdio::inherit());
    common::mcp::handshake(&mut s);
    let mut claude = ClaudeCode {
        project: root.clone(),
        plugin: plugin.clone(),
        hooks: plugin_hooks(&plugin),
        state: state.path().to_path_buf(),
        session_id: "5d1c7f0e-2a9b-4c3d-8e1f-0a1b2c3d4e5f".to_string(),
        calls: 0,
    };
    // Denied: PreToolUse only.
    let proposed = json!({"file_path": p, "old_string": "def f():",
                          "new_string": "# @claude explain f\ndef f():"});
    claude.call("Edit", proposed, || None);
    // A real write of Claude's, above g.
    claude.edit(&p, original, "def g():", "# @claude did g work?\ndef g():");
    let claudes = std::fs::read_to_string(&p).unwrap();
    assert!(claudes.contains("# @claude did g work?"));
    // The user types the line Claude proposed, where it proposed it.
    std::fs::write(&p, claudes.replacen("def f():", "# @claude explain f\ndef f():", 1)).unwrap();
    let asks = announced_until(&mut s, Instant::now() + Duration::from_secs(8));
    assert_eq!(
        asks,
        [("a.py".to_string(), "@claude explain f".to_string())],
        "the user's line after a denied Edit"
    );
    let listed = s.call(90, "list_asks", json!({}));
    let listed: Value =
        serde_json::from_str(listed["content"][0]["text"].as_str().unwrap()).unwrap();
    let quiet = listed["unannounced"].as_array().unwrap();
    assert_eq!(quiet.len(), 1, "{listed:#}");
    assert_eq!(quiet[0]["text"], "@claude did g work?");
    let why = quiet[0]["not_announced"].as_str().unwrap_or_default();
    assert!(why.contains("Claude"), "no reason for Claude's marker: {:#}", quiet[0]);
}
