//! `filewatch-mcp hook`: what runs inside Claude Code's hooks. Around a file tool it records
//! the lines Claude writes ([`crate::claude_writes`]); after every tool and every prompt it
//! asks its session's server for asks not heard yet and prints them as `additionalContext`;
//! as a `SessionStart`/`Stop` hook with `asyncRewake` (`hook --wait`) it waits in the
//! background — blocked on its server's socket, no timer — until there is an ask, prints it on
//! stderr and exits 2, which wakes the idle session.
//!
//! A hook never stands in Claude's way: it exits 0 (2 only to wake a session) and prints
//! nothing but asks, whatever its input; it gives up on a server that does not answer within
//! [`REPLY_WAIT`]; and a waiting one ends when its server does (the session ended).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::text::for_model;
use super::wire::{self, Ack, Endpoint, Offer, Reply, Request};
use crate::claude_writes;

/// The most of a hook's input that is read: a `Write` carries the whole file.
const MAX_INPUT: u64 = 64 * 1024 * 1024;

/// How long a hook waits for its server to accept and answer (a `PostToolUse` hook runs after
/// every tool call: it must not hold Claude up).
pub const REPLY_WAIT: Duration = Duration::from_millis(1500);

/// How long a waiting hook waits for its session's server to start (Claude Code starts the
/// MCP servers and the `SessionStart` hooks at once).
const SERVER_START_WAIT: Duration = Duration::from_secs(60);

/// What a hook run did: the exit code to return (its output is written already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookRun {
    /// 0, or 2 when a waiting hook printed asks on stderr (that wakes the session).
    pub exit: u8,
    /// How many asks it printed.
    pub printed: usize,
}

impl HookRun {
    const QUIET: HookRun = HookRun { exit: 0, printed: 0 };
}

/// Runs one hook: reads Claude Code's hook input from `input`; with `wait`, it is the
/// background hook that wakes an idle session. Asks go to `stdout` (as Claude Code's hook JSON)
/// or, waiting, to `stderr`. Failures are logged at debug level and end it quietly.
pub fn run_hook(
    input: impl Read,
    wait: bool,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> HookRun {
    let mut bytes = Vec::new();
    if input.take(MAX_INPUT).read_to_end(&mut bytes).is_err() {
        return HookRun::QUIET;
    }
    let Ok(call) = serde_json::from_slice::<Value>(&bytes) else {
        tracing::debug!("hook: the input is not JSON");
        return HookRun::QUIET;
    };
    if let Err(e) = claude_writes::record_call(&call) {
        tracing::debug!("hook: {e}");
    }
    let Some(event) = call["hook_event_name"].as_str() else { return HookRun::QUIET };
    // Without a person at the terminal (`claude -p`, the SDK) Claude Code runs an asyncRewake
    // hook in the foreground: a waiting one would hold the session up. There it looks once.
    let attended = std::env::var("CLAUDE_CODE_SESSION_ATTENDED").as_deref() != Ok("0")
        && std::env::var("CLAUDE_CODE_ENTRYPOINT").as_deref() != Ok("sdk-cli");
    let hearing = match event {
        "PostToolUse" | "UserPromptSubmit" => Hearing::Context,
        "SessionStart" if wait && attended && !crate::sys::BACKGROUND_HOOKS_BLOCK => Hearing::Wake,
        // Where a waiting SessionStart hook would hold up the start (Windows), it looks once
        // and wakes the session only if asks are waiting already.
        "SessionStart" if wait && attended => Hearing::WakeIfAny,
        "SessionStart" => Hearing::Context,
        "Stop" if wait && attended => Hearing::Wake,
        // `-p`: exit 2 goes on with the turn, the asks as its feedback.
        "Stop" if wait => Hearing::WakeIfAny,
        _ => return HookRun::QUIET,
    };
    let session = Session::of(&call);
    let Some(endpoint) = session.server(hearing == Hearing::Wake) else {
        tracing::debug!("hook: no filewatch server for this session");
        return HookRun::QUIET;
    };
    let request = Request {
        token: endpoint.token.clone(),
        event: event.to_string(),
        session_id: session.id.clone(),
        transcript_path: call["transcript_path"].as_str().map(PathBuf::from),
        claude_pid: session.claude_pid,
        wait: hearing == Hearing::Wake,
    };
    match ask_server(&endpoint, &request, hearing, event, stdout, stderr) {
        Ok(run) => run,
        Err(e) => {
            tracing::debug!("hook: {}: {e}", endpoint.port);
            HookRun::QUIET
        }
    }
}

/// How this run hands asks to Claude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hearing {
    /// As `additionalContext` in the hook's JSON on stdout (a busy session, a new prompt).
    Context,
    /// On stderr with exit 2, once there is something (a background hook, an idle session).
    Wake,
    /// On stderr with exit 2 if something is waiting now; else at once exit 0.
    WakeIfAny,
}

/// The session a hook runs in, as its input and environment say.
struct Session {
    id: Option<String>,
    claude_pid: Option<u32>,
    project: Option<PathBuf>,
}

impl Session {
    fn of(call: &Value) -> Session {
        let project = std::env::var_os("CLAUDE_PROJECT_DIR")
            .map(PathBuf::from)
            .or_else(|| call["cwd"].as_str().map(PathBuf::from))
            .and_then(|p| p.canonicalize().ok());
        Session {
            id: call["session_id"].as_str().map(str::to_string),
            claude_pid: std::env::var("CLAUDE_PID").ok().and_then(|p| p.parse().ok()),
            project,
        }
    }

    /// The server of this session on its project, the root's owner first; with `wait`, one
    /// that starts within [`SERVER_START_WAIT`] if none runs yet.
    fn server(&self, wait: bool) -> Option<Endpoint> {
        let dir = wire::endpoints_dir(&crate::state::state_dir()?);
        let project = self.project.as_deref()?;
        let deadline = Instant::now() + if wait { SERVER_START_WAIT } else { Duration::ZERO };
        let mut watcher = None;
        loop {
            if let Some(found) = self.find(&dir, project) {
                return Some(found);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            // Woken by the endpoint file being written, not by a timer.
            let (tx, rx) = std::sync::mpsc::channel();
            if watcher.is_none() {
                let _ = crate::state::make_private_dir(&dir);
                let mut w = notify::recommended_watcher(move |_| {
                    let _ = tx.send(());
                })
                .ok()?;
                notify::Watcher::watch(&mut w, &dir, notify::RecursiveMode::NonRecursive).ok()?;
                watcher = Some((w, rx));
                continue; // look once more: it may have been written before the watch
            }
            let (_, rx) = watcher.as_ref()?;
            if rx.recv_timeout(left).is_err() {
                return None;
            }
        }
    }

    /// The endpoint of a live server of this session whose root holds `project`; endpoint files
    /// of servers that are gone are removed.
    fn find(&self, dir: &Path, project: &Path) -> Option<Endpoint> {
        let mut mine: Vec<Endpoint> = Vec::new();
        for (path, endpoint) in Endpoint::all(dir) {
            if !crate::sys::process_alive(endpoint.pid) {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if endpoint.serves_dir(project)
                && endpoint.serves_session(self.claude_pid, self.id.as_deref())
            {
                mine.push(endpoint);
            }
        }
        // The owner, and of two (a plugin and a `claude mcp add` server), the nearer root.
        mine.sort_by_key(|e| (!e.owner, std::cmp::Reverse(e.root.as_os_str().len())));
        mine.into_iter().next()
    }
}

/// Sends the request, prints what the server hands out, and tells it what was printed.
fn ask_server(
    endpoint: &Endpoint,
    request: &Request,
    hearing: Hearing,
    event: &str,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> std::io::Result<HookRun> {
    let address = SocketAddr::from(([127, 0, 0, 1], endpoint.port));
    let mut stream = TcpStream::connect_timeout(&address, REPLY_WAIT)?;
    stream.set_nodelay(true)?;
    stream.write_all(&wire::line(request))?;
    // A waiting hook blocks in this read until its server has something (or ends).
    let timeout = if hearing == Hearing::Wake { None } else { Some(REPLY_WAIT) };
    stream.set_read_timeout(timeout)?;
    if hearing == Hearing::Wake {
        // It may wait for hours: the code starting touched need not stay resident meanwhile.
        crate::sys::release_file_pages();
    }
    let mut reader = BufReader::new(stream.try_clone()?.take(wire::MAX_LINE as u64));
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(HookRun::QUIET); // the server ended: so did the session
    }
    let offers = match serde_json::from_str::<Reply>(&line) {
        Ok(Reply::Asks(offers)) => offers,
        Ok(Reply::Exit) | Err(_) => return Ok(HookRun::QUIET),
    };
    let offers: Vec<Offer> = offers.into_iter().take(wire::MAX_OFFERS).collect();
    if offers.is_empty() {
        return Ok(HookRun::QUIET);
    }
    let text = for_model(&offers);
    let exit = match hearing {
        Hearing::Context => {
            let out = json!({
                "hookSpecificOutput": {"hookEventName": event, "additionalContext": text}
            });
            writeln!(stdout, "{out}")?;
            stdout.flush()?;
            0
        }
        Hearing::Wake | Hearing::WakeIfAny => {
            writeln!(stderr, "{text}")?;
            stderr.flush()?;
            2
        }
    };
    let ack = Ack { printed: offers.iter().map(|o| o.id).collect() };
    let _ = stream.write_all(&wire::line(&ack));
    Ok(HookRun { exit, printed: offers.len() })
}
