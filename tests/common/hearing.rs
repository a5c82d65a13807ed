//! Issue 29's set-up with the real Claude Code (tests/claude_hearing.rs, benches/hearing.rs): the
//! filewatch plugin installed from this repository into a temporary HOME, its server this build,
//! and readers of what the scripted model received (`<ask id=… file=…>` in a request body).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::claude::{Claude, Reply, Request, ScriptedApi, Session};

/// How long a scenario waits for one thing before it fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The prompt of the busy turn: three `Bash(echo step-N && sleep 2)` calls, then text.
pub const BUSY: &str = "run three sleeps";

/// The prompt of a turn answered with text.
pub const HELLO: &str = "say hello";

/// The prompt of a turn with one quick tool call.
pub const ONE_TOOL: &str = "run one echo";

/// The scripted model: a typed prompt gets its first reply; a `Bash(echo step-N …)` call gets
/// the next step of its chain; anything else (a session woken by a hook) gets `ok`.
pub fn model(request: &Request) -> Option<Reply> {
    let messages = request.body["messages"].as_array()?;
    let last_assistant = messages.iter().rposition(|m| m["role"] == "assistant");
    if last_assistant.is_some_and(|i| messages[i].to_string().contains("echo one-echo")) {
        return Some(Reply::text("one echo done"));
    }
    if let Some(step) = last_assistant.and_then(|i| step_of(&messages[i])) {
        return Some(match step {
            1 | 2 => Reply::bash(&format!("echo step-{} && sleep 2", step + 1)),
            _ => Reply::text("three sleeps done"),
        });
    }
    let since = &messages[last_assistant.map_or(0, |i| i + 1)..];
    let typed = |prompt: &str| since.iter().any(|m| m["content"].to_string().contains(prompt));
    Some(if typed(BUSY) {
        Reply::bash("echo step-1 && sleep 2")
    } else if typed(HELLO) {
        Reply::text("hello there")
    } else if typed(ONE_TOOL) {
        Reply::bash("echo one-echo")
    } else {
        Reply::text("ok")
    })
}

/// N if `message` calls `Bash(echo step-N …)`.
pub fn step_of(message: &Value) -> Option<u32> {
    message["content"].as_array()?.iter().find_map(|block| {
        let command = block["input"]["command"].as_str()?;
        command.strip_prefix("echo step-")?.get(..1)?.parse().ok()
    })
}

/// How many of the busy turn's tool calls came before `request` (0 for the prompt's own).
pub fn tool_calls_before(request: &Request) -> u32 {
    let messages = request.body["messages"].as_array().unwrap();
    messages.iter().rev().find_map(step_of).unwrap_or(0)
}

/// Waits for the request that follows the busy turn's `n`th tool call (0: the prompt's), so
/// that the next tool call is running: its reply started it.
pub fn after_tool_call(api: &ScriptedApi, n: u32) {
    api.wait_for(&format!("the request after tool call {n}"), DEADLINE, |requests| {
        requests
            .iter()
            .find(|r| {
                r.is_turn()
                    && news(r).contains(if n == 0 { BUSY } else { "tool_result" })
                    && tool_calls_before(r) == n
            })
            .cloned()
    });
}

/// An executable shell script `name` in `dir`.
pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Claude Code in a temporary HOME with the filewatch plugin installed from this repository,
/// its server this build run with `--log-level debug` into [`Setup::log`] (what to read when
/// a scenario fails), and `Bash` allowed.
pub struct Setup {
    pub claude: Claude,
    pub log: PathBuf,
}

impl Setup {
    pub fn new(bin: &Path, api: &ScriptedApi) -> Setup {
        let mut claude = Claude::new(bin, api);
        let log = claude.dir().join("server.log");
        let server = super::bin();
        let server = server.to_str().unwrap();
        // The hooks run the binary as it is: a waiting hook's stderr is what the model reads.
        let wrapper = script(
            claude.dir(),
            "filewatch-mcp",
            &format!(
                "case \"${{1:-}}\" in hook) exec '{server}' \"$@\" ;; esac\n\
                 exec '{server}' \"$@\" --log-level debug 2>>'{}'",
                log.display()
            ),
        );
        claude.install_plugin(&wrapper);
        claude.project_settings(json!({"permissions": {"allow": ["Bash"]}}));
        Setup { claude, log }
    }

    pub fn project(&self) -> &Path {
        &self.claude.project
    }

    /// The state directory of the sessions (`$HOME/.local/state/filewatch-mcp`).
    pub fn state(&self) -> PathBuf {
        self.claude.home.join(".local/state/filewatch-mcp")
    }

    /// Writes `text` into the project's `file` (an ask saved in an editor).
    pub fn save(&self, file: &str, text: &str) {
        std::fs::write(self.project().join(file), text).unwrap();
    }

    pub fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.project().join(file)).unwrap()
    }

    /// Starts `claude` in tmux and waits until its filewatch server owns the root (it
    /// watches: an ask saved from now on is seen). With `owner` false, until a server that
    /// stands by has started.
    pub fn start(&self, name: &str, owner: bool) -> Session {
        let before: Vec<u32> =
            self.endpoints().iter().map(|e| e["pid"].as_u64().unwrap() as u32).collect();
        let session = self.claude.interactive(name, &[]);
        let pid = session.pid();
        self.wait(&format!("the filewatch server of {name} (owner: {owner})"), || {
            self.endpoints().iter().any(|e| {
                !before.contains(&(e["pid"].as_u64().unwrap() as u32))
                    && e["owner"] == owner
                    && e["ancestors"].as_array().unwrap().contains(&json!(pid))
            })
        });
        session
    }

    /// The endpoint files of the servers running now.
    pub fn endpoints(&self) -> Vec<Value> {
        let dir = self.state().join("sessions");
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
            .collect()
    }

    /// The ask ledger's records (the last `{"ask": …}` line written for each id).
    pub fn ledger(&self) -> BTreeMap<String, Value> {
        let mut records = BTreeMap::new();
        for entry in std::fs::read_dir(self.state()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".asks.jsonl") {
                continue;
            }
            for line in std::fs::read_to_string(entry.path()).unwrap_or_default().lines() {
                let Ok(entry) = serde_json::from_str::<Value>(line) else { continue };
                let record = &entry["ask"];
                if let Some(id) = record["id"].as_str() {
                    records.insert(id.to_string(), record.clone());
                }
            }
        }
        records
    }

    /// Waits until `done()` holds; panics after [`DEADLINE`] with the server's log.
    pub fn wait(&self, what: &str, mut done: impl FnMut() -> bool) {
        let end = Instant::now() + DEADLINE;
        while !done() {
            if Instant::now() > end {
                panic!("waited {DEADLINE:?} for {what}; the server's log:\n{}", self.server_log());
            }
            std::thread::sleep(Duration::from_millis(50)); // polling files and processes
        }
    }

    /// Waits until the project's `file` holds a tag, and returns its id.
    pub fn tagged(&self, file: &str) -> String {
        let mut id = None;
        self.wait(&format!("the tag in {file}"), || {
            id = tag_in(&self.read(file));
            id.is_some()
        });
        id.unwrap()
    }

    pub fn server_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the claude process `pid` and every filewatch server have ended.
    pub fn wait_ended(&self, pid: u32) {
        self.wait("claude and its filewatch server to end", || {
            !Path::new(&format!("/proc/{pid}")).exists() && self.endpoints().is_empty()
        });
    }
}

/// The id in the first `@claude[fw-…]` tag of `text`.
pub fn tag_in(text: &str) -> Option<String> {
    let at = text.find("@claude[fw-")? + "@claude[".len();
    Some(text.get(at..at + 11)?.to_string())
}

/// `<ask id="` as a request body (JSON) carries it.
pub const ASK_OPEN: &str = "<ask id=\\\"";

/// The id of the ask of `file` in a request body, if it carries it.
pub fn ask_id_in(text: &str, file: &str) -> Option<String> {
    let attribute = format!("\\\" file=\\\"{file}\\\"");
    text.match_indices(ASK_OPEN).find_map(|(at, open)| {
        let id = text.get(at + open.len()..at + open.len() + 11)?;
        text[at + open.len() + 11..].starts_with(&attribute).then(|| id.to_string())
    })
}

/// How many times each ask id is in `text` (a request body, or the transcript's lines): ids
/// as the server makes them (`fw-` and 8 hex digits), not the server's instructions' example.
pub fn ask_counts(text: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (at, open) in text.match_indices(ASK_OPEN) {
        let Some(id) = text.get(at + open.len()..at + open.len() + 11) else { continue };
        let hex = id.strip_prefix("fw-").unwrap_or_default();
        if hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            *counts.entry(id.to_string()).or_default() += 1;
        }
    }
    counts
}

/// The main loop's requests.
pub fn turns(api: &ScriptedApi) -> Vec<Request> {
    api.requests().into_iter().filter(Request::is_turn).collect()
}

/// Waits for the first turn request that carries the ask of `file`; returns it and the id.
pub fn heard(api: &ScriptedApi, file: &str) -> (Request, String) {
    api.wait_for(&format!("the ask of {file}"), DEADLINE, |requests| {
        requests
            .iter()
            .filter(|r| r.is_turn())
            .find_map(|r| ask_id_in(&r.text, file).map(|id| (r.clone(), id)))
    })
}

/// The messages of a request after its last assistant message (what this request adds).
pub fn news(request: &Request) -> String {
    let messages = request.body["messages"].as_array().unwrap();
    let from = messages.iter().rposition(|m| m["role"] == "assistant").map_or(0, |i| i + 1);
    Value::from(messages[from..].to_vec()).to_string()
}
