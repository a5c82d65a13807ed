//! The server's stdio, between Claude Code and rmcp: stdin read line by line with a limit, the
//! lines rmcp must not see answered here (a parse error, an invalid request, Claude Code's
//! `server/discover` probe, a notification before `initialize`), and the one writer of stdout,
//! which interleaves rmcp's replies, those answers and the channel notifications a line at a time.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::Problem;

/// Incoming lines longer than this are answered with a parse error and dropped.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// How much of stdin is read at a time.
const READ_BUFFER: usize = 64 * 1024;

/// One line for stdout, and who to tell once it is written.
pub(super) struct Line {
    pub(super) text: String,
    pub(super) written: Option<oneshot::Sender<bool>>,
}

/// Reads one line of at most `max` bytes (without the `\n`); `Ok(None)` at EOF,
/// `Ok(Some(Err(n)))` for a line that was too long (`n` bytes, skipped).
async fn read_line<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Result<Vec<u8>, usize>>> {
    let mut line = Vec::new();
    let mut skipped = 0usize;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if line.is_empty() && skipped == 0 {
                return Ok(None);
            }
            break;
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if skipped > 0 || line.len() + chunk.len() > max {
            skipped += line.len() + chunk.len();
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        let consumed = done.unwrap_or(buf.len());
        reader.consume(consumed);
        if done.is_some() {
            break;
        }
    }
    Ok(Some(if skipped > 0 { Err(skipped) } else { Ok(line) }))
}

const PARSE_ERROR: &str =
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#;

/// Claude Code's `server/discover` probe gets "method not found" (-32601) whatever its params
/// hold: any other answer, or rmcp validating the probe's `_meta` first (-32602), is not what
/// the probe is documented to expect, and a success would disable channels.
fn discover_reply(message: &Value) -> Option<String> {
    if message.get("method")?.as_str()? != "server/discover" {
        return None;
    }
    let id = message.get("id")?;
    Some(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found: server/discover"}}}}"#
    ))
}

/// The "Invalid request" reply (-32600) for a JSON value that is no JSON-RPC 2.0 message —
/// not an object (batches included: MCP has none), no `"jsonrpc":"2.0"`, a method that is not
/// a string, or neither a method nor a result or error — carrying the message's id when it has
/// one, so the client can match it. `None` for a well-formed message.
fn invalid_request(message: &Value) -> Option<String> {
    let id = message.get("id").filter(|id| id.is_string() || id.is_number());
    let well_formed = message.is_object()
        && message.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && match message.get("method") {
            Some(method) => method.is_string(),
            None => {
                id.is_some() && (message.get("result").is_some() || message.get("error").is_some())
            }
        };
    if well_formed {
        return None;
    }
    let id = id.cloned().unwrap_or(Value::Null);
    tracing::debug!("invalid JSON-RPC message answered with -32600 (id {id})");
    Some(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32600,"message":"Invalid request"}}}}"#
    ))
}

/// stdin → rmcp: passes each line that is a JSON value, answers anything else with a parse
/// error (via `errors`), and ends rmcp's input at EOF — saying so on `ended` first.
pub(super) async fn filter_input<R, W>(
    input: R,
    mut to_rmcp: W,
    errors: mpsc::Sender<String>,
    ended: watch::Sender<bool>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::with_capacity(READ_BUFFER, input);
    // rmcp ends the session on anything but `initialize` first: a notification before it (a
    // client cancelling its probe) is dropped here instead.
    let mut initialize_seen = false;
    loop {
        match read_line(&mut reader, MAX_LINE).await {
            Ok(None) => break,
            Ok(Some(Ok(line))) => {
                let text = line.strip_suffix(b"\r").unwrap_or(&line);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let Ok(message) = serde_json::from_slice::<Value>(text) else {
                    Problem::MalformedLine(text.len()).log();
                    let _ = errors.send(PARSE_ERROR.to_string()).await;
                    continue;
                };
                if let Some(reply) = discover_reply(&message).or_else(|| invalid_request(&message))
                {
                    let _ = errors.send(reply).await;
                    continue;
                }
                let method = message.get("method").and_then(Value::as_str);
                if !initialize_seen && message.get("id").is_none() {
                    tracing::debug!("dropped {method:?}: a notification before initialize");
                    continue;
                }
                initialize_seen |= method == Some("initialize");
                if to_rmcp.write_all(text).await.is_err() || to_rmcp.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
            Ok(Some(Err(len))) => {
                Problem::LineTooLong { len, max: MAX_LINE }.log();
                let _ = errors.send(PARSE_ERROR.to_string()).await;
            }
            Err(e) => {
                Problem::Stdin(e).log();
                break;
            }
        }
    }
    let _ = ended.send(true);
    let _ = to_rmcp.shutdown().await;
}

/// rmcp → stdout, the filter's parse errors → stdout, our notifications → stdout: the only
/// writer of stdout, one line at a time. Each notification's sender is told when its line is
/// out (flushed), or that it never will be. It ends once rmcp and the filter are done.
pub(super) async fn write_output<R, W>(
    from_rmcp: R,
    mut errors: mpsc::Receiver<String>,
    mut notes: mpsc::Receiver<Line>,
    mut out: W,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = BufReader::new(from_rmcp).lines();
    let (mut rmcp_open, mut errors_open, mut notes_open) = (true, true, true);
    loop {
        let line = tokio::select! {
            line = lines.next_line(), if rmcp_open => match line {
                Ok(Some(text)) => Line { text, written: None },
                _ => {
                    rmcp_open = false;
                    continue;
                }
            },
            // Once the filter has ended, a closed channel is not polled again (it would be
            // ready at once, forever: a spin).
            reply = errors.recv(), if errors_open => match reply {
                Some(text) => Line { text, written: None },
                None => {
                    errors_open = false;
                    continue;
                }
            },
            note = notes.recv(), if notes_open && (rmcp_open || errors_open) => match note {
                Some(line) => line,
                None => {
                    notes_open = false;
                    continue;
                }
            },
            else => break,
        };
        // A failed write or flush means stdout is closed: the client is gone. (A write alone
        // may succeed into a buffer; the flush is where the closed pipe shows.)
        let written = async {
            out.write_all(line.text.as_bytes()).await?;
            out.write_all(b"\n").await?;
            out.flush().await
        };
        let ok = written.await.is_ok();
        if let Some(tell) = line.written {
            let _ = tell.send(ok);
        }
        if !ok {
            tracing::debug!("stdout is closed; ending the session");
            break;
        }
    }
    // What is still queued will never be written: dropping it tells its senders so.
    notes.close();
}
