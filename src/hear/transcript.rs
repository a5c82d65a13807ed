//! A session's transcript as evidence: Claude Code appends every message that enters the
//! conversation — a channel message, a hook's text, Claude's own tool calls — as JSON lines
//! to the file its hooks name (`transcript_path`). An ask whose id is there was heard.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::id::MarkerId;

/// The most of a transcript read at once: a long session's file grows to megabytes; what came
/// before this much at the first look is older than any ask still unheard.
const MAX_READ: u64 = 64 << 20;

/// The most ids remembered from a transcript (a few bytes each): far more asks than a
/// session hears.
const MAX_SEEN: usize = 100_000;

/// A transcript, as far as it has been read.
#[derive(Debug)]
pub struct Transcript {
    path: PathBuf,
    read_to: u64,
    /// Every ask id in the lines read that entered the conversation, looked for or not: a line
    /// can be read before the hub learns of its ask (the channel line out, the hub told a
    /// moment later), and is never read again.
    seen: HashSet<MarkerId>,
}

impl Transcript {
    /// The transcript at `path`, not read yet.
    pub fn new(path: &Path) -> Transcript {
        Transcript { path: path.to_path_buf(), read_to: 0, seen: HashSet::new() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which of `ids` appear in the lines that entered the conversation, read at this look
    /// (the lines written since the last; the first look reads the file, or its last
    /// [`MAX_READ`] bytes) or an earlier one. A transcript that cannot be read (gone, a FIFO
    /// planted there) tells nothing new.
    pub fn find(&mut self, ids: &HashSet<MarkerId>) -> Vec<MarkerId> {
        if ids.is_empty() {
            return Vec::new();
        }
        self.read_new_lines();
        ids.iter().copied().filter(|id| self.seen.contains(id)).collect()
    }

    /// Reads the whole lines written since the last look into [`Transcript::seen`].
    fn read_new_lines(&mut self) {
        let Ok(mut file) = crate::state::open_existing(&self.path) else { return };
        let Ok(len) = file.metadata().map(|m| m.len()) else { return };
        if len < self.read_to {
            self.read_to = 0; // rewritten (compacted): read it again
        }
        let from = self.read_to.max(len.saturating_sub(MAX_READ));
        if len <= from || file.seek(SeekFrom::Start(from)).is_err() {
            return;
        }
        let mut bytes = Vec::new();
        if (&mut file).take(len - from).read_to_end(&mut bytes).is_err() {
            return;
        }
        // Whole lines only: a line still being written is read whole at the next look.
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else { return };
        bytes.truncate(end + 1);
        self.read_to = from + bytes.len() as u64;
        for id in ids_in_conversation(&bytes) {
            if self.seen.len() >= MAX_SEEN {
                self.seen.clear(); // the oldest asks are long heard or gone
            }
            self.seen.insert(id);
        }
    }
}

/// The ask ids (`fw-` and 8 hex digits) in the lines of `bytes` that entered the
/// conversation: a user or assistant message, an attachment (a hook's `additionalContext`, a
/// channel message queued mid-turn) or a system message — not a queue operation (a message
/// queued is not one sent yet).
fn ids_in_conversation(bytes: &[u8]) -> Vec<MarkerId> {
    let finder = memchr::memmem::Finder::new(b"fw-");
    let mut ids = Vec::new();
    for line in bytes.split(|&b| b == b'\n') {
        let mut found = finder
            .find_iter(line)
            .filter_map(|at| {
                let id = std::str::from_utf8(line.get(at..at + 11)?).ok()?;
                id.parse::<MarkerId>().ok()
            })
            .peekable();
        if found.peek().is_none() {
            continue;
        }
        let kind = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .and_then(|line| line["type"].as_str().map(str::to_string));
        if matches!(kind.as_deref(), Some("user" | "assistant" | "attachment" | "system")) {
            ids.extend(found);
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn an_id_is_found_once_written_even_across_two_looks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let id: MarkerId = "fw-0badc0de".parse().unwrap();
        let other: MarkerId = "fw-12345678".parse().unwrap();
        let ids: HashSet<MarkerId> = [id, other].into_iter().collect();
        let mut t = Transcript::new(&path);
        assert!(t.find(&ids).is_empty(), "no file yet");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"{\"type\":\"user\",\"text\":\"replyTo=\\\"fw-0bad").unwrap();
        assert!(t.find(&ids).is_empty());
        f.write_all(b"c0de\\\"\"}\n").unwrap();
        assert_eq!(t.find(&ids), vec![id], "the id cut by the first look is found by the next");
    }

    /// A line read while the server looked for other ids still counts for an id it learns of
    /// later: the channel line can reach the transcript, and a hook run read it, in the moment
    /// between the message going out and the hub being told (seen as a flake of
    /// tests/hearing.rs's an_ask_in_the_transcript_is_heard_and_not_printed_again).
    #[test]
    fn an_id_read_before_it_was_looked_for_is_found_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let id: MarkerId = "fw-0badc0de".parse().unwrap();
        let other: MarkerId = "fw-12345678".parse().unwrap();
        let line = r#"{"type":"user","message":{"content":"<channel replyTo=\"fw-0badc0de\">"}}"#;
        std::fs::write(&path, format!("{line}\n")).unwrap();
        let mut t = Transcript::new(&path);
        assert!(t.find(&[other].into_iter().collect()).is_empty());
        assert_eq!(t.find(&[id].into_iter().collect()), vec![id]);
    }

    #[test]
    fn a_queued_message_is_not_heard_yet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let id: MarkerId = "fw-0badc0de".parse().unwrap();
        let ids: HashSet<MarkerId> = [id].into_iter().collect();
        let queued = r#"{"type":"queue-operation","operation":"enqueue","content":"fw-0badc0de"}"#;
        std::fs::write(&path, format!("{queued}\n")).unwrap();
        let mut t = Transcript::new(&path);
        assert!(t.find(&ids).is_empty());
        let sent = r#"{"type":"attachment","attachment":{"type":"hook_additional_context","content":["<ask id=\"fw-0badc0de\">"]}}"#;
        std::fs::write(&path, format!("{queued}\n{sent}\n")).unwrap();
        assert_eq!(t.find(&ids), vec![id]);
    }
}
