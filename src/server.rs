//! The MCP stdio server Claude Code spawns: the handshake Claude Code 2.1.332 needs for channels,
//! the `list_asks` / `resolve_ask` tools, and one `notifications/claude/channel` per new ask.
//!
//! ```text
//!  stdin ─► line filter ─► rmcp service ─► line writer ─► stdout      (JSON-RPC only)
//!                              ▲
//!  Live (watch → pipeline) ─► announcer (queues until `notifications/initialized`)
//! ```
//! The line filter answers malformed or oversized lines with a JSON-RPC parse error instead of
//! letting them reach (and end) the session; the line writer is the only thing that writes to
//! stdout, one whole message per line.
//!
//! Two sessions in one repository run two servers on one root: the one that owns the root
//! (see [`crate::owner`]) watches and announces; the other stands by, answers the tools, tells
//! its client once which session gets the asks, and takes over when the owner exits.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, DiscoverRequestMethod, DiscoverResult, Implementation,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{tool, tool_handler, tool_router, ErrorData as McpError, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch, Mutex};

use crate::asks::Asks;
use crate::error::{Problem, StartError};
use crate::hear::hub::ChannelState;
pub use crate::hear::{channel_content, MAX_ASK};
use crate::hear::{Hub, Offer};
use crate::id::MarkerId;
use crate::languages::LanguageTable;
use crate::live::{Ask, Delivery, Live, LiveOptions, Sink};
use crate::owner::{self, Claim, OwnerInfo, Standby};
use crate::pipeline::{self, relative};
use crate::scan::{escaped, Scanner};

mod stdio;

pub use stdio::MAX_LINE;
use stdio::{filter_input, write_output, Line};

/// The notification method Claude Code listens to.
pub const CHANNEL_METHOD: &str = "notifications/claude/channel";

/// The newest protocol revision we negotiate: later ones have no unsolicited notification path,
/// and Claude Code disables channels for a server that offers them.
pub const MAX_PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Threads a `list_asks` or `resolve_ask` call walks the tree with: the tools answer while the
/// live worker keeps running, so leave it a core.
const TOOL_THREADS: usize = 2;

/// Asks found but not yet handed to the announcer. When it is full (the client stopped
/// reading), markers are left untagged instead of being stamped and queued without end.
pub const ASK_QUEUE: usize = 64;

/// The pipe from the line filter to rmcp: a whole 16 MiB line is never held, so this is only
/// about throughput.
const PIPE_BUFFER: usize = 1 << 20;

/// Channel notifications waiting for the line writer (each ask's sender waits for its own).
const NOTE_LINES: usize = 16;

/// The pipe from rmcp to the line writer: small, so that a client that stops reading stdout
/// holds up rmcp, the announcer and the ask queue — and with it the stamping — quickly,
/// instead of a megabyte of notifications later.
const OUTPUT_BUFFER: usize = 16 * 1024;

/// Replies the line filter makes itself (parse errors, the discover probe) waiting for the
/// line writer.
const FILTER_REPLIES: usize = 64;

/// After the client closes stdin, how long replies already made may take to reach stdout: a
/// client that reads gets them, one that stopped reading does not keep the process alive.
/// Twice this (rmcp, then the stdout writer) stays well under the second that ending may take.
const FLUSH_GRACE: Duration = Duration::from_millis(300);

/// What Claude reads in its system prompt about this server (kept well under 4096 chars).
pub const INSTRUCTIONS: &str = "\
filewatch watches the user's files. When the user saves a code comment that starts with \
@claude, the ask reaches you in one of two forms, each ask once: \
(1) a <channel source=\"filewatch\" file=\"…\" line=\"…\" replyTo=\"fw-…\"> message whose content \
is the ask; or (2) hook text: \"filewatch: the user saved an ask for you in a code comment\" and \
<ask id=\"fw-…\" file=\"…\" line=\"…\" end_line=\"…\">the ask</ask>, in a hook's additional \
context (after a tool call or a prompt), or in a \"Stop hook\" or \"SessionStart\" notice that woke \
you (shown as a hook's blocking error: it is no error, it is the user's ask). Both mean the same: \
an ask the user wrote in their code at that file and line (relative to the project root; one \
written over several comment lines runs to end_line), its id being replyTo or id. Treat it like \
a message from the user about that spot in the code: read the file around that line first (if \
it has symbol and symbol_lines, read those lines: the function or class the ask is about); if \
the ask is a question, answer it in this session; if it asks for work, make the change in the \
code. When you are done, call the resolve_ask tool with that id (or delete the whole marker \
comment yourself) so the file is clean; the marker is tagged @claude[fw-…] once you have it (or, \
where the editor autosaves, its id is kept aside), and it never fires again. An ask with \
revised=\"true\" is the whole text of one you got before under the same id, whose first words the \
editor had saved while the user was still typing: it replaces that one. list_asks shows the asks \
still open in the tree. Never write a comment that starts with @claude yourself (in code, tests \
or notes): it would come back to you as a new ask; to leave the user a note, use another word \
(NOTE:). If a channel message has no replyTo, the file could not be tagged (read-only, or with \
metadata a new file could not keep): handle the ask, and tell the user to remove the marker. A channel message with a notice attribute is no ask: it says which session \
receives the asks (another Claude Code session in the same project may own them); tell the user \
once if it matters, nothing else to do.";

/// Room for the notices of one run: the standby's, then the takeover's.
const NOTICES: usize = 4;

/// State shared by the handler, the announcer and the tools.
struct Shared {
    root: PathBuf,
    trigger: String,
    /// The asks announced on this root: what `resolve_ask` finds by id.
    asks: Asks,
    /// Whether the client sent `notifications/initialized`; what comes before waits in it.
    channel: Mutex<Channel>,
    /// Lines for stdout that are ours rather than rmcp's: the channel notifications.
    out: mpsc::Sender<Line>,
    /// What Claude heard (the tools' calls are evidence too), if hooks can reach this server.
    hub: Option<Arc<Hub>>,
}

#[derive(Default)]
struct Channel {
    open: bool,
    queue: Vec<Outgoing>,
}

/// An ask on its way to the client, with who to tell once it is written (the live worker:
/// only then is it tagged).
pub struct Announcement {
    /// The ask.
    pub ask: Ask,
    /// Told `true` once the notification is written and flushed to stdout, `false` (or
    /// dropped) if it never will be.
    pub written: Option<oneshot::Sender<bool>>,
}

/// A channel notification to send: an ask, or a notice about who gets the asks.
enum Outgoing {
    Ask(Announcement),
    /// The notification's params, ready.
    Notice(Value),
}

impl Shared {
    fn scanner(&self) -> Result<Scanner<'static>, McpError> {
        Scanner::new(LanguageTable::builtin(), &self.trigger)
            .map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    /// Sends it now, or queues it until the client is initialized.
    async fn announce(&self, out: Outgoing) {
        let mut channel = self.channel.lock().await;
        if channel.open {
            send(&self.out, out, &self.asks).await;
        } else {
            channel.queue.push(out);
        }
    }
}

/// The channel notification for one ask: every meta value a string, every key an identifier,
/// no `source` (Claude Code sets it to the server's name). What comes from the file — its
/// name, the definition's name, the ask — is shown with its control characters escaped, as the
/// CLI shows them: Claude reads `\u{1b}`, never a raw ESC, and a meta value stays one line.
pub fn channel_notification(ask: &Ask) -> Value {
    let mut meta = serde_json::Map::new();
    meta.insert("file".into(), json!(escaped(&ask.file, false)));
    meta.insert("line".into(), json!(ask.marker.line.to_string()));
    meta.insert("end_line".into(), json!(ask.marker.end_line.to_string()));
    if let Some(id) = ask.id() {
        meta.insert("replyTo".into(), json!(id.to_string()));
    } else {
        meta.insert("stamped".into(), json!("false"));
    }
    meta.insert("language".into(), json!(escaped(&ask.marker.language, false)));
    if let Some(symbol) = &ask.marker.symbol {
        meta.insert("symbol".into(), json!(escaped(&symbol.name, false)));
        meta.insert("symbol_lines".into(), json!(symbol.lines()));
    }
    if ask.revised {
        meta.insert("revised".into(), json!("true"));
    }
    json!({ "content": channel_content(&ask.marker.text), "meta": meta })
}

/// The ask as the hooks hand it to Claude: what its channel message carries.
pub fn offer(ask: &Ask) -> Offer {
    Offer {
        id: ask.record,
        file: ask.file.clone(),
        line: ask.marker.line,
        end_line: ask.marker.end_line,
        text: ask.marker.text.clone(),
        symbol: ask.marker.symbol.as_ref().map(|s| s.name.clone()),
        symbol_lines: ask.marker.symbol.as_ref().map(|s| s.lines()),
        revised: ask.revised,
    }
}

/// The notice a standby sends its client once: which session gets the asks.
pub fn standby_notice(root: &Path, trigger: &str, owner: Option<&OwnerInfo>) -> Value {
    let root = escaped(&crate::sys::plain_path(root).display().to_string(), false);
    let who = owner.map(|o| format!(" ({})", o.describe())).unwrap_or_default();
    let content = format!(
        "filewatch: another session owns {root}{who}: {trigger} asks saved in this project go to \
         that session, not to this one. This session takes over when that one exits. \
         list_asks and resolve_ask work here as usual."
    );
    let mut meta = serde_json::Map::new();
    meta.insert("notice".into(), json!("standby"));
    meta.insert("root".into(), json!(root));
    if let Some(o) = owner {
        meta.insert("owner_pid".into(), json!(o.pid.to_string()));
    }
    json!({ "content": content, "meta": meta })
}

/// The notice a standby sends when it takes over.
pub fn takeover_notice(root: &Path) -> Value {
    let root = escaped(&crate::sys::plain_path(root).display().to_string(), false);
    let content = format!(
        "filewatch: the session that owned {root} has exited; @claude asks saved in this \
         project now come to this session."
    );
    json!({ "content": content, "meta": { "notice": "owner", "root": root } })
}

/// Hands one notification to the stdout writer, written as a JSON-RPC line of its own (rmcp
/// is not in between: the writer tells the live worker when the line is out).
async fn send(lines: &mpsc::Sender<Line>, out: Outgoing, asks: &Asks) {
    let (params, written, what) = match out {
        Outgoing::Ask(a) => {
            // Marked sent just before it goes (not after: an owner killed in between would
            // leave the next one to announce it again, to a session that may have it). One
            // killed before this point leaves it unsent: the next owner announces it.
            asks.sent(&[a.ask.record]);
            let what = format!("{}:{} {}", a.ask.file, a.ask.marker.line, a.ask.label());
            (channel_notification(&a.ask), a.written, what)
        }
        Outgoing::Notice(params) => (params, None, "a notice".to_string()),
    };
    let message = json!({"jsonrpc": "2.0", "method": CHANNEL_METHOD, "params": params});
    let text = message.to_string();
    if lines.send(Line { text, written }).await.is_err() {
        tracing::debug!("{what}: not announced, the session is over");
    } else {
        tracing::info!("sent on the channel: {what}");
    }
}

/// The rmcp handler.
#[derive(Clone)]
pub struct FilewatchServer {
    shared: Arc<Shared>,
}

/// Arguments of `list_asks`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListAsksArgs {
    /// Only list markers in this file or directory (relative to the project root).
    #[serde(default)]
    pub path: Option<String>,
}

/// Arguments of `resolve_ask`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ResolveAskArgs {
    /// The ask's id: the `replyTo` of its channel message, `fw-` and 8 hex digits.
    pub id: String,
}

fn text_result(value: Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(&value).unwrap_or_default(),
    )])
}

fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

#[tool_router]
impl FilewatchServer {
    fn new(shared: Arc<Shared>) -> Self {
        FilewatchServer { shared }
    }

    /// Every @claude marker in the project (ignore rules apply): `pending` asks were delivered
    /// (tagged with an id) and are not resolved yet; `unannounced` markers are untagged and
    /// wait for their file to be saved (or came in through git).
    #[tool(annotations(read_only_hint = true))]
    async fn list_asks(
        &self,
        Parameters(args): Parameters<ListAsksArgs>,
    ) -> Result<CallToolResult, McpError> {
        let shared = self.shared.clone();
        let scope = match &args.path {
            Some(p) => match inside_root(&shared.root, p) {
                Ok(path) => path,
                Err(message) => return Ok(error_result(format!("{p}: {message}"))),
            },
            None => shared.root.clone(),
        };
        let result = tokio::task::spawn_blocking(move || -> Result<Value, McpError> {
            let scanner = shared.scanner()?;
            let report = pipeline::scan_paths(&scanner, &[scope], TOOL_THREADS);
            let mut records = shared.asks.snapshot();
            // A resolved ask's tagged marker that an editor wrote back (its buffer saved over
            // the resolve) is no open ask: it is not listed (issue 34).
            let resolved: HashSet<MarkerId> =
                records.iter().filter(|r| !r.is_pending()).map(|r| r.id).collect();
            records.retain(|r| r.is_pending());
            let (mut pending, mut unannounced) = (Vec::new(), Vec::new());
            for f in &report.files {
                let file = relative(&shared.root, &f.path);
                let mine: Vec<_> = records.iter().filter(|r| r.file == file).cloned().collect();
                let quiet = shared.asks.has_quiet(&file).then(|| std::fs::read(&f.path).ok());
                for (m, id) in pipeline::with_records(&scanner, &f.path, &file, &f.markers, &mine) {
                    if id.is_some_and(|id| resolved.contains(&id)) {
                        continue;
                    }
                    let why = match (&quiet, id) {
                        (Some(Some(bytes)), None) => {
                            let line = crate::lines::line_around(bytes, m.insert_at..m.insert_at);
                            let place = crate::lines::place_keys(bytes, line);
                            shared.asks.why_not_announced(&file, place)
                        }
                        _ => None,
                    };
                    let view = crate::scan::MarkerView { id, not_announced: why, ..m.view(&file) };
                    let list = if id.is_some() { &mut pending } else { &mut unannounced };
                    list.push(serde_json::to_value(view).unwrap_or_default());
                }
            }
            if let Some(hub) = &shared.hub {
                let listed: Vec<MarkerId> =
                    pending.iter().filter_map(|v| v["id"].as_str()?.parse().ok()).collect();
                hub.heard_by_tool(&listed);
            }
            Ok(json!({"pending": pending, "unannounced": unannounced}))
        })
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))??;
        Ok(text_result(result))
    }

    /// Remove a delivered ask's marker from its file, once the ask is handled: the whole line
    /// when the comment is alone on it, else the comment. Takes the `replyTo` id.
    #[tool(annotations(destructive_hint = false, idempotent_hint = true))]
    async fn resolve_ask(
        &self,
        Parameters(args): Parameters<ResolveAskArgs>,
    ) -> Result<CallToolResult, McpError> {
        let id: MarkerId = match args.id.parse() {
            Ok(id) => id,
            Err(e) => return Ok(error_result(e.to_string())),
        };
        let shared = self.shared.clone();
        let outcome = tokio::task::spawn_blocking(move || -> Result<Vec<String>, String> {
            let scanner = shared.scanner().map_err(|e| e.message.to_string())?;
            // An ask of this run is found by its record (its tag may be gone); an older one
            // by its tag, anywhere in the tree.
            let done: Vec<String> = match shared.asks.by_id(id).filter(|r| r.is_pending()) {
                Some(record) => {
                    let removed = pipeline::resolve_recorded(&scanner, &shared.root, &record)
                        .map_err(|e| format!("{id}: {e}"))?;
                    if removed {
                        vec![record.file.clone()]
                    } else {
                        Vec::new()
                    }
                }
                None => {
                    let root = [shared.root.clone()];
                    pipeline::resolve_in_tree(&scanner, &root, id, TOOL_THREADS)
                        .map_err(|e| format!("{id}: {e}"))?
                        .iter()
                        .map(|p| relative(&shared.root, p))
                        .collect()
                }
            };
            shared.asks.resolve(id);
            if let Some(hub) = &shared.hub {
                hub.heard_by_tool(&[id]);
            }
            if done.is_empty() {
                return Err(format!("no marker with id {id} in the project (already resolved?)"));
            }
            Ok(done)
        })
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(match outcome {
            Ok(files) => text_result(json!({"resolved": id.to_string(), "files": files})),
            Err(message) => error_result(message),
        })
    }
}

#[tool_handler]
impl ServerHandler for FilewatchServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder().enable_tools().build();
        let mut experimental = std::collections::BTreeMap::new();
        experimental.insert("claude/channel".to_string(), serde_json::Map::new());
        capabilities.experimental = Some(experimental);
        ServerConfig::new(capabilities)
            .with_protocol_version(MAX_PROTOCOL)
            .with_server_info(Implementation::new("filewatch-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&MAX_PROTOCOL))
    }

    /// Claude Code probes with `server/discover` first; any answer but an error makes it treat
    /// the server as "modern" and disable channels. So: method not found.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        Err(McpError::method_not_found::<DiscoverRequestMethod>())
    }

    async fn on_initialized(&self, _context: NotificationContext<RoleServer>) {
        let mut channel = self.shared.channel.lock().await;
        for out in std::mem::take(&mut channel.queue) {
            send(&self.shared.out, out, &self.shared.asks).await;
        }
        channel.open = true;
        tracing::debug!("client initialized; channel open");
    }
}

/// `p` (relative to the root, or absolute) if it names something inside the root; else why not.
fn inside_root(root: &Path, p: &str) -> Result<PathBuf, &'static str> {
    let canonical = match root.join(p).canonicalize() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("no such file or directory in the project")
        }
        Err(_) => return Err("cannot be read"),
    };
    if canonical.starts_with(root) {
        Ok(canonical)
    } else {
        Err("not inside the project root")
    }
}

/// Serves MCP over `input`/`output` until the input ends, announcing the asks that arrive on
/// `asks`. Used by [`run`] with stdio and by tests with pipes.
pub async fn serve<R, W>(
    root: PathBuf,
    trigger: String,
    records: Asks,
    input: R,
    output: W,
    asks: mpsc::Receiver<Ask>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (_no_notices, notices) = mpsc::channel(1);
    // Asks handed in here were recorded (and tagged) by the caller: nobody waits to hear.
    let (tx, announcements) = mpsc::channel(ASK_QUEUE);
    let mut asks = asks;
    tokio::spawn(async move {
        while let Some(ask) = asks.recv().await {
            if tx.send(Announcement { ask, written: None }).await.is_err() {
                break;
            }
        }
    });
    let root = Root { root, trigger, records, hub: None };
    serve_with_notices(root, input, output, announcements, notices).await
}

/// The root a session serves: its asks, and the hub that tells what Claude heard.
struct Root {
    root: PathBuf,
    trigger: String,
    records: Asks,
    hub: Option<Arc<Hub>>,
}

/// [`serve`], with notices (who gets the asks) sent as they arrive on `notices`.
async fn serve_with_notices<R, W>(
    served: Root,
    input: R,
    output: W,
    mut asks: mpsc::Receiver<Announcement>,
    mut notices: mpsc::Receiver<Value>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let channel = Mutex::new(Channel::default());
    let (note_tx, note_rx) = mpsc::channel(NOTE_LINES);
    let Root { root, trigger, records, hub } = served;
    let shared = Arc::new(Shared { root, trigger, asks: records, channel, out: note_tx, hub });
    let (rmcp_in, filter_end) = tokio::io::duplex(PIPE_BUFFER);
    let (writer_end, rmcp_out) = tokio::io::duplex(OUTPUT_BUFFER);
    let (err_tx, err_rx) = mpsc::channel(FILTER_REPLIES);
    let (ended_tx, ended) = watch::channel(false);
    let filter = tokio::spawn(filter_input(input, filter_end, err_tx, ended_tx));
    let writer = tokio::spawn(write_output(writer_end, err_rx, note_rx, output));
    let announcer = {
        let shared = shared.clone();
        let ended = ended.clone();
        tokio::spawn(async move {
            let mut notices_open = true;
            loop {
                let out = tokio::select! {
                    // The client closed its input: it is leaving. What waits in the queue is
                    // dropped unannounced: not tagged, it is found again by whichever session
                    // owns the root next.
                    () = input_ended(ended.clone()) => {
                        asks.close();
                        break;
                    }
                    ask = asks.recv() => match ask {
                        Some(ask) => Outgoing::Ask(ask),
                        None => break,
                    },
                    notice = notices.recv(), if notices_open => match notice {
                        Some(params) => Outgoing::Notice(params),
                        None => {
                            notices_open = false;
                            continue;
                        }
                    },
                };
                shared.announce(out).await;
            }
        })
    };
    let server = FilewatchServer::new(shared);
    let mut writer = writer;
    let mut writer_done = false;
    match server.serve((rmcp_in, rmcp_out)).await {
        Ok(running) => {
            let session = running.cancellation_token();
            let waiting = running.waiting();
            tokio::pin!(waiting);
            tokio::select! {
                _ = &mut waiting => {}
                // stdout closed: the client is gone, and nothing can be announced any more.
                _ = &mut writer => {
                    writer_done = true;
                    session.cancel();
                }
                // stdin closed: rmcp answers what it has read, unless nobody reads stdout.
                () = input_ended(ended.clone()) => {
                    if tokio::time::timeout(FLUSH_GRACE, &mut waiting).await.is_err() {
                        session.cancel();
                    }
                }
            }
        }
        Err(e) => Problem::Handshake(e.to_string()).log(),
    }
    announcer.abort();
    filter.abort();
    if !writer_done && tokio::time::timeout(FLUSH_GRACE, &mut writer).await.is_err() {
        tracing::debug!("stdout is not read: what is left unwritten is dropped");
        writer.abort();
    }
}

/// Resolves once the client has closed stdin (see [`filter_input`]).
async fn input_ended(mut ended: watch::Receiver<bool>) {
    let _ = ended.wait_for(|&eof| eof).await;
}

/// The live worker's sink: the queue to the announcer. An ask is delivered when its line is
/// out on stdout; the worker waits for that (a client that stops reading holds it up, and
/// nothing is tagged meanwhile). Sent is not heard: the hub offers each ask to the session's
/// hooks until there is evidence Claude heard it — unless there is no hub (no state directory
/// for the hooks to find this server), where a line written is all anyone can know.
struct Announcer {
    queue: mpsc::Sender<Announcement>,
    hub: Option<Arc<Hub>>,
}

impl Sink for Announcer {
    fn deliver(&mut self, ask: Ask) -> Delivery {
        match self.deliver_round(std::slice::from_ref(&ask)) {
            1 => Delivery::Delivered,
            _ => Delivery::Closed,
        }
    }

    /// The whole round is queued at once (the queue holds a round) and then waited for, in
    /// order: the client reads the asks as fast as it reads, not one round trip each.
    fn deliver_round(&mut self, asks: &[Ask]) -> usize {
        let mut waiting = Vec::with_capacity(asks.len());
        for ask in asks {
            let (tell, written) = oneshot::channel();
            let ask = ask.clone();
            if self.queue.blocking_send(Announcement { ask, written: Some(tell) }).is_err() {
                break; // the session is over
            }
            waiting.push(written);
        }
        let mut reached = 0;
        for (ask, written) in asks.iter().zip(waiting) {
            if written.blocking_recv() != Ok(true) {
                break;
            }
            if let Some(hub) = &self.hub {
                hub.sent(offer(ask), true);
            }
            reached += 1;
        }
        reached
    }

    fn hears(&self) -> bool {
        self.hub.is_none()
    }
}

/// The whole server: own the root (or stand by until its owner exits), watch it, run the live
/// worker, serve MCP on stdin/stdout, and hear through the hooks (the hub). Returns when stdin
/// closes or on SIGTERM/SIGINT, with the watcher and worker stopped (no stamp left half-done,
/// so no temp file behind) before the root is let go.
pub async fn run(options: LiveOptions) -> Result<(), StartError> {
    let (ask_tx, ask_rx) = mpsc::channel(ASK_QUEUE);
    let (notice_tx, notice_rx) = mpsc::channel(NOTICES);
    let claim = owner::claim(&options.root, &options.trigger, "serve", options.tag)?;
    let root = claim.root().to_path_buf();
    let records = Asks::for_mode(options.tag, &root, &options.trigger)?;
    let hub = start_hub(&root, &options.trigger, &records).await;
    let (heard_tx, heard_rx) = std::sync::mpsc::channel();
    if let Some(hub) = &hub {
        hub.tell_heard(heard_tx);
    }
    let announcer = Announcer { queue: ask_tx, hub: hub.clone() };
    let (mut owner, mut live, mut takeover) = match claim {
        Claim::Owner(owner) => {
            tracing::info!("{} is ours: this server announces its asks", root.display());
            // Asks saved while no session ran are in the files modified since the last one.
            let since = owner.last_watched();
            let live = Live::serve(&options, records.clone(), since, heard_rx, announcer)?;
            if let Some(hub) = &hub {
                hub.own();
            }
            (Some(owner), Some(live), None)
        }
        Claim::Standby(standby) => {
            tracing::info!("{} is owned by another process; standing by", root.display());
            let notice = standby_notice(&root, &options.trigger, standby.owner.as_ref());
            let _ = notice_tx.try_send(notice);
            let hearing = Hearing { hub: hub.clone(), heard: heard_rx, announcer };
            let job = take_over(*standby, options.clone(), records.clone(), hearing, notice_tx);
            (None, None, Some(tokio::spawn(job)))
        }
    };
    tracing::debug!("filewatch-mcp {} serving MCP on stdio", env!("CARGO_PKG_VERSION"));
    let trigger = options.trigger.clone();
    let (input, output) = (tokio::io::stdin(), tokio::io::stdout());
    let served = Root { root, trigger, records, hub: hub.clone() };
    let session = serve_with_notices(served, input, output, ask_rx, notice_rx);
    tokio::pin!(session);
    let stop = crate::sys::shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut session => break,
            () = finished(&mut live) => break,
            () = &mut stop => {
                tracing::debug!("signal received; stopping");
                break;
            }
            taken = joined(&mut takeover) => {
                takeover = None;
                match taken {
                    Some(Ok((new_owner, new_live))) => {
                        owner = Some(new_owner);
                        live = Some(new_live);
                    }
                    Some(Err(e)) => return Err(e),
                    None => {} // the wait failed (said where it did): stand by for good
                }
            }
        }
    }
    if let Some(hub) = &hub {
        hub.close();
    }
    if let Some(job) = takeover {
        job.abort();
    }
    if let Some(live) = live {
        let _ = tokio::task::spawn_blocking(move || live.stop()).await;
    }
    drop(owner); // only now: a stamp of ours never overlaps the next owner's
    Ok(())
}

/// The hub of this server, listening for its session's hooks; `None` (said at debug level)
/// where hooks could not find it: no state directory, or no local port to listen on.
async fn start_hub(root: &Path, trigger: &str, records: &Asks) -> Option<Arc<Hub>> {
    let state_dir = crate::state::state_dir()?;
    let ancestors = crate::sys::ancestors(8);
    let channel = crate::hear::ChannelFlag::of(&ancestors).channel_state();
    if channel == ChannelState::Deaf {
        tracing::info!("Claude Code was started without a channel flag: the hooks carry the asks");
    }
    let hub = Hub::new(root, trigger, records.clone(), channel);
    let dir = crate::hear::wire::endpoints_dir(&state_dir);
    match hub.listen(&dir, ancestors).await {
        Ok(_) => Some(hub),
        Err(e) => {
            Problem::Hooks { path: dir, source: e }.log();
            None
        }
    }
}

/// What a standby's takeover needs to hear through the hooks once it owns the root.
struct Hearing {
    hub: Option<Arc<Hub>>,
    heard: std::sync::mpsc::Receiver<Vec<MarkerId>>,
    announcer: Announcer,
}

/// A standby's takeover: waits for the owner to exit, then watches the root, looking first at
/// the files modified since this process started standing by, and tells the client.
async fn take_over(
    standby: Standby,
    options: LiveOptions,
    records: Asks,
    hearing: Hearing,
    notice_tx: mpsc::Sender<Value>,
) -> Option<Result<(owner::Owner, Live), StartError>> {
    let since = standby.since;
    let root = options.root.clone();
    let owner = match standby.wait_in_background().await {
        Ok(Ok(owner)) => owner,
        Ok(Err(source)) => {
            Problem::Takeover { root, source }.log();
            return None;
        }
        Err(_) => return None, // the waiting thread could not start (logged)
    };
    tracing::info!("the owner of {} exited; taking over", root.display());
    let Hearing { hub, heard, announcer } = hearing;
    let started = tokio::task::spawn_blocking(move || {
        Live::serve(&options, records, Some(since), heard, announcer)
    })
    .await;
    let live = match started {
        Ok(Ok(live)) => live,
        Ok(Err(e)) => return Some(Err(e)),
        Err(_) => return None, // cancelled: the session is ending
    };
    if let Some(hub) = &hub {
        hub.own();
    }
    let _ = notice_tx.send(takeover_notice(live.root())).await;
    Some(Ok((owner, live)))
}

/// Resolves when the live worker ends on its own; never without one.
async fn finished(live: &mut Option<Live>) {
    match live {
        Some(live) => live.finished().await,
        None => std::future::pending().await,
    }
}

/// The takeover's outcome once it is done; never without one.
async fn joined<T>(job: &mut Option<tokio::task::JoinHandle<Option<T>>>) -> Option<T> {
    match job {
        Some(job) => job.await.ok().flatten(),
        None => std::future::pending().await,
    }
}
