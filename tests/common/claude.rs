//! The real Claude Code, offline: a scripted Anthropic Messages API on 127.0.0.1 whose request
//! log is the ground truth of what the model heard, a temporary HOME seeded so that the
//! interactive UI starts with no dialog, the plugin installed from this repository, and `claude`
//! run in tmux (typed to as a person does) or as `claude -p`.
//!
//! ```ignore
//! let Some(bin) = claude::bin() else { return }; // skipped (or failed under CI) without one
//! let api = ScriptedApi::start();
//! api.push([Reply::bash("sleep 2"), Reply::text("done")]);
//! let claude = Claude::new(&bin, &api);
//! claude.project_settings(json!({"permissions": {"allow": ["Bash"]}}));
//! let mut session = claude.interactive("smoke");
//! session.prompt("run it");
//! api.wait_for_request_containing("done", DEADLINE);
//! ```
//!
//! Facts this rests on (Claude Code 2.1.332, see docs/claude-code-hooks.md): with
//! `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` its only calls are `POST /v1/messages?beta=true`,
//! each with `tools` and `"stream": true`; a key is accepted without a dialog when its last 20
//! characters are in `customApiKeyResponses.approved` of `~/.claude.json`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::tmux::Tmux;

/// The API key every session uses (only its format matters offline).
pub const API_KEY: &str = "sk-ant-api03-filewatch-harness-0000000000000000000000000000000000AA";

/// The Claude Code binary under test: `$FILEWATCH_CLAUDE_BIN`. Without it, `None` and a line
/// saying the test is skipped — unless `$CI` is set: then the test fails, as a check that does
/// not run must not pass there.
pub fn bin() -> Option<PathBuf> {
    match std::env::var_os("FILEWATCH_CLAUDE_BIN") {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "FILEWATCH_CLAUDE_BIN={} is not a file", path.display());
            Some(path)
        }
        _ if std::env::var_os("CI").is_some() => panic!(
            "CI is set but FILEWATCH_CLAUDE_BIN is not: the real Claude Code tests cannot run \
             (.ci/run installs Claude Code and sets it)"
        ),
        _ => {
            eprintln!("FILEWATCH_CLAUDE_BIN is not set: the real Claude Code test is SKIPPED");
            None
        }
    }
}

// ----- the scripted Messages API ---------------------------------------------------------------

/// One scripted model answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A text answer; the turn ends (`end_turn`).
    Text(String),
    /// A tool call; Claude Code runs the tool and asks again with its result.
    Tool { name: String, input: Value },
}

impl Reply {
    pub fn text(text: &str) -> Reply {
        Reply::Text(text.to_string())
    }

    /// A `Bash` tool call running `command`.
    pub fn bash(command: &str) -> Reply {
        Reply::Tool {
            name: "Bash".into(),
            input: json!({"command": command, "description": command}),
        }
    }
}

/// One request Claude Code made, as received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The JSON body (`Value::Null` when there was none or it was not JSON).
    pub body: Value,
    /// The body as text: what `*_containing` searches.
    pub text: String,
    pub at: Instant,
}

impl Request {
    /// True for the main loop's requests (they carry tools), which the script answers.
    pub fn is_turn(&self) -> bool {
        self.body["tools"].as_array().is_some_and(|t| !t.is_empty())
    }
}

type Responder = Box<dyn Fn(&Request) -> Option<Reply> + Send>;

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    script: VecDeque<Reply>,
    responder: Option<Responder>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
    ids: AtomicU64,
}

/// A scripted Anthropic Messages API on 127.0.0.1 (HTTP/1.1, keep-alive, a thread per
/// connection). Each `/v1/messages` request of the main loop takes the next scripted reply (or
/// what [`ScriptedApi::respond_with`] returns); with none left it answers the text `ok`. Other
/// requests get `ok` (messages) or `{}`. Every request is logged.
pub struct ScriptedApi {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
}

impl ScriptedApi {
    pub fn start() -> ScriptedApi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            ids: AtomicU64::new(0),
        });
        let accept = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accept.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let conn = Arc::clone(&accept);
                std::thread::spawn(move || serve_connection(stream, &conn));
            }
        });
        ScriptedApi { addr, shared }
    }

    /// What `ANTHROPIC_BASE_URL` is set to.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends replies to the script, in order.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.state.lock().unwrap().script.extend(replies);
    }

    /// Answers each turn request with `f(request)` when it returns `Some`, before the script.
    pub fn respond_with(&self, f: impl Fn(&Request) -> Option<Reply> + Send + 'static) {
        self.shared.state.lock().unwrap().responder = Some(Box::new(f));
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// How many requests have `text` in their body.
    pub fn count_containing(&self, text: &str) -> usize {
        self.requests().iter().filter(|r| r.text.contains(text)).count()
    }

    /// Waits until a request holds `text` (JSON-escaped as in the body: write `\n` as `\\n`)
    /// and returns the first; panics after `deadline` with the requests seen.
    pub fn wait_for_request_containing(&self, text: &str, deadline: Duration) -> Request {
        self.wait_for(&format!("a request containing {text:?}"), deadline, |requests| {
            requests.iter().find(|r| r.text.contains(text)).cloned()
        })
    }

    /// Waits until `found(requests)` returns `Some`; panics after `deadline`, listing the
    /// requests seen.
    pub fn wait_for<T>(
        &self,
        what: &str,
        deadline: Duration,
        mut found: impl FnMut(&[Request]) -> Option<T>,
    ) -> T {
        let end = Instant::now() + deadline;
        let mut state = self.shared.state.lock().unwrap();
        loop {
            if let Some(t) = found(&state.requests) {
                return t;
            }
            let now = Instant::now();
            if now >= end {
                panic!("waited {deadline:?} for {what}; requests:\n{}", summary(&state.requests));
            }
            state = self.shared.changed.wait_timeout(state, end - now).unwrap().0;
        }
    }
}

impl Drop for ScriptedApi {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop so that it ends
    }
}

/// One line per request: its path, how many messages, and the start of the last one's text;
/// for failure messages.
pub fn summary(requests: &[Request]) -> String {
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let messages = r.body["messages"].as_array().map_or(&[][..], Vec::as_slice);
            let last = messages.last().map(|m| m["content"].to_string()).unwrap_or_default();
            let last: String = last.chars().take(300).collect();
            format!("  #{i} {} {} ({} messages) last: {last}\n", r.method, r.path, messages.len())
        })
        .collect()
}

fn serve_connection(stream: TcpStream, shared: &Shared) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some((method, path, body)) = read_request(&mut reader) {
        let text = String::from_utf8_lossy(&body).into_owned();
        let request = Request {
            method,
            path,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            text,
            at: Instant::now(),
        };
        let reply = {
            let mut state = shared.state.lock().unwrap();
            let reply = choose_reply(&mut state, &request);
            state.requests.push(request.clone());
            shared.changed.notify_all();
            reply
        };
        let (content_type, payload) = respond(&request, reply, shared);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
             request-id: req_fw{}\r\n\r\n",
            payload.len(),
            shared.ids.fetch_add(1, Ordering::SeqCst)
        );
        if writer.write_all(head.as_bytes()).and_then(|_| writer.write_all(&payload)).is_err() {
            return;
        }
    }
}

/// Reads one HTTP/1.1 request (`content-length` or chunked body); `None` at end of stream.
fn read_request(reader: &mut impl BufRead) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let body = if chunked { read_chunked(reader)? } else { read_exact(reader, length)? };
    Some((method, path, body))
}

fn read_exact(reader: &mut impl BufRead, length: usize) -> Option<Vec<u8>> {
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        body.extend(read_exact(reader, size)?);
        read_exact(reader, 2)?; // the CRLF after the chunk
        if size == 0 {
            return Some(body);
        }
    }
}

fn choose_reply(state: &mut State, request: &Request) -> Reply {
    if !request.is_turn() {
        return Reply::text("ok");
    }
    if let Some(reply) = state.responder.as_ref().and_then(|f| f(request)) {
        return reply;
    }
    state.script.pop_front().unwrap_or_else(|| Reply::text("ok"))
}

/// The response body for `request`: server-sent events when it asked for a stream, else JSON.
fn respond(request: &Request, reply: Reply, shared: &Shared) -> (&'static str, Vec<u8>) {
    if !request.path.starts_with("/v1/messages") {
        return ("application/json", b"{}".to_vec());
    }
    if request.path.starts_with("/v1/messages/count_tokens") {
        return ("application/json", br#"{"input_tokens":10}"#.to_vec());
    }
    let n = shared.ids.fetch_add(1, Ordering::SeqCst);
    let model = request.body["model"].as_str().unwrap_or("claude").to_string();
    let (block, stop_reason) = match &reply {
        Reply::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Reply::Tool { name, input } => (
            json!({"type": "tool_use", "id": format!("toolu_fw{n:08}"), "name": name, "input": input}),
            "tool_use",
        ),
    };
    let usage = json!({"input_tokens": 10, "output_tokens": 5});
    let message = json!({"id": format!("msg_fw{n:08}"), "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage});
    if request.body["stream"] != json!(true) {
        let mut whole = message;
        whole["content"] = json!([block]);
        whole["stop_reason"] = json!(stop_reason);
        return ("application/json", whole.to_string().into_bytes());
    }
    ("text/event-stream", sse_events(message, block, stop_reason).into_bytes())
}

/// The stream of one message with one content block, as the Messages API sends it.
fn sse_events(message: Value, block: Value, stop_reason: &str) -> String {
    let (start, delta) = match block["type"].as_str() {
        Some("tool_use") => (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
        ),
        _ => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        ),
    };
    let events = [
        ("message_start", json!({"type": "message_start", "message": message})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": delta})),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect()
}

// ----- Claude Code in a temporary HOME -----------------------------------------------------------

/// Claude Code set up in a temporary HOME with a project directory, talking to a
/// [`ScriptedApi`]. Everything it writes stays under [`Claude::dir`], removed on drop.
pub struct Claude {
    bin: PathBuf,
    base_url: String,
    dir: tempfile::TempDir,
    /// The temporary HOME (`~/.claude.json`, `~/.claude/`).
    pub home: PathBuf,
    /// The project: the working directory of every `claude` run here.
    pub project: PathBuf,
    /// Extra environment for every `claude` run (e.g. `FILEWATCH_MCP_BIN`).
    env: Vec<(String, String)>,
}

impl Claude {
    /// Seeds HOME so that the interactive UI starts without a dialog: onboarding done, the API
    /// key approved, the project trusted.
    pub fn new(bin: &Path, api: &ScriptedApi) -> Claude {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::create_dir_all(project.join(".claude")).unwrap();
        // The project path as Claude Code keys it (symlinks resolved: /tmp may be one).
        let project = project.canonicalize().unwrap();
        let key_tail = &API_KEY[API_KEY.len() - 20..];
        let config = json!({
            "hasCompletedOnboarding": true,
            "numStartups": 5,
            "theme": "dark",
            "customApiKeyResponses": {"approved": [key_tail], "rejected": []},
            "projects": {project.to_str().unwrap(): {"hasTrustDialogAccepted": true, "allowedTools": []}},
        });
        write_json(&home.join(".claude.json"), &config);
        Claude { bin: bin.to_path_buf(), base_url: api.url(), dir, home, project, env: Vec::new() }
    }

    /// The temporary directory holding HOME and the project.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Later `claude` runs talk to `api` (two sessions in one HOME and project, each with its
    /// own request log).
    pub fn use_api(&mut self, api: &ScriptedApi) {
        self.base_url = api.url();
    }

    /// Adds `name=value` to the environment of every later `claude` run.
    pub fn env(&mut self, name: &str, value: &str) {
        self.env.push((name.into(), value.into()));
    }

    /// Writes the project's `.claude/settings.json`.
    pub fn project_settings(&self, settings: Value) {
        write_json(&self.project.join(".claude/settings.json"), &settings);
    }

    /// Writes the user's `~/.claude/settings.json`.
    pub fn user_settings(&self, settings: Value) {
        write_json(&self.home.join(".claude/settings.json"), &settings);
    }

    /// The environment of every run: nothing of the caller's but PATH and LANG (no
    /// credentials, no `CLAUDECODE` of an enclosing session), the scripted API, no update
    /// checks or telemetry, then [`Claude::env`]'s.
    fn environment(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("PATH".to_string(), std::env::var("PATH").unwrap_or_default()),
            ("LANG".into(), "C.UTF-8".into()),
            ("HOME".into(), self.home.display().to_string()),
            ("XDG_CONFIG_HOME".into(), self.home.join(".config").display().to_string()),
            ("TERM".into(), "xterm-256color".into()),
            ("ANTHROPIC_BASE_URL".into(), self.base_url.clone()),
            ("ANTHROPIC_API_KEY".into(), API_KEY.into()),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
            ("DISABLE_TELEMETRY".into(), "1".into()),
            ("DISABLE_ERROR_REPORTING".into(), "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(), "1".into()),
            // The server's tags once the file is quiet for 5 s, as before issue 34 (with no
            // save elsewhere in the file, the default waits 10 minutes).
            ("FILEWATCH_TAG_AFTER".into(), "5s".into()),
        ];
        env.extend(self.env.iter().cloned());
        env
    }

    /// `claude ARGS…` in the project with this environment (not yet run).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args).current_dir(&self.project).env_clear().envs(self.environment());
        cmd
    }

    /// Runs `claude ARGS…` to the end; panics (with its output) if it fails.
    pub fn run(&self, args: &[&str]) -> Output {
        let out = self.command(args).output().unwrap();
        assert!(
            out.status.success(),
            "claude {args:?}: {}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Installs the filewatch plugin from this repository's marketplace, its server being
    /// `server_bin` (`FILEWATCH_MCP_BIN`, read by the plugin's launcher at each session start).
    pub fn install_plugin(&mut self, server_bin: &Path) {
        let repo = env!("CARGO_MANIFEST_DIR");
        self.env("FILEWATCH_MCP_BIN", server_bin.to_str().unwrap());
        self.run(&["plugin", "marketplace", "add", repo]);
        self.run(&["plugin", "install", "filewatch@filewatch-mcp"]);
    }

    /// `claude -p PROMPT EXTRA…` to the end (hooks run; asyncRewake hooks run synchronously).
    pub fn print(&self, prompt: &str, extra: &[&str]) -> Output {
        let mut args = vec!["-p", prompt];
        args.extend_from_slice(extra);
        self.command(&args).output().unwrap()
    }

    /// `claude ARGS…` interactive in its own tmux server (named after `name`), once its prompt
    /// shows (or panics after 20 s with the screen).
    pub fn interactive(&self, name: &str, args: &[&str]) -> Session {
        let mut argv = vec!["env".to_string(), "-i".to_string()];
        argv.extend(self.environment().into_iter().map(|(k, v)| format!("{k}={v}")));
        argv.push(self.bin.display().to_string());
        argv.extend(args.iter().map(|a| a.to_string()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut tmux = Tmux::start(&format!("claude-{name}"), &argv, &self.project);
        tmux.until("Claude Code's prompt", |screen| {
            screen.contains("❯") && screen.contains("────")
        });
        Session { tmux }
    }

    /// The session transcripts (`~/.claude/projects/*/*.jsonl`) concatenated: where a hook's
    /// text, a rewake and a channel message are recorded.
    pub fn transcripts(&self) -> String {
        let mut all = String::new();
        let Ok(projects) = std::fs::read_dir(self.home.join(".claude/projects")) else {
            return all;
        };
        for project in projects.flatten() {
            for file in std::fs::read_dir(project.path()).into_iter().flatten().flatten() {
                if file.path().extension().is_some_and(|e| e == "jsonl") {
                    all.push_str(&std::fs::read_to_string(file.path()).unwrap_or_default());
                }
            }
        }
        all
    }
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

/// An interactive `claude` in tmux; the tmux server (and with it claude, its hooks and its MCP
/// servers) ends on drop.
pub struct Session {
    pub tmux: Tmux,
}

impl Session {
    /// Types `text` at the prompt and, once it shows, presses Enter.
    pub fn prompt(&mut self, text: &str) {
        self.tmux.type_text(text);
        // Enter as a key of its own, after the text has landed: sent with the text, it can be
        // taken as part of a paste (a newline in the input box).
        let shown: String = text.chars().take(40).collect();
        self.tmux.until("the typed prompt", |screen| screen.contains(&shown));
        self.tmux.keys(&["Enter"]);
    }

    /// The screen now.
    pub fn screen(&self) -> String {
        self.tmux.screen()
    }

    /// Waits until `done(screen)` holds (20 s), returning the screen.
    pub fn until(&mut self, what: &str, done: impl FnMut(&str) -> bool) -> String {
        self.tmux.until(what, done)
    }

    /// Types `/exit`; the tmux server goes on drop.
    pub fn exit(&self) {
        self.tmux.type_text("/exit");
        self.tmux.keys(&["Enter"]);
    }

    /// The claude process (tmux runs `env -i … claude`, and env execs it: the pane's process).
    pub fn pid(&self) -> u32 {
        self.tmux.pane_pid()
    }
}
