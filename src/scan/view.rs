//! The one JSON shape of a marker: `scan --json`, `stamp --json`, `watch --json` and the
//! `list_asks` tool all print this. Its keys are public (scripts depend on them); the channel
//! notification is the only other form, because Claude Code needs every value as a string.
//! Also the one way a file's text is shown outside JSON (terminal, channel): [`escaped`].

use serde::Serialize;

use super::Marker;
use crate::id::MarkerId;

/// A marker as printed: where it is, what it asks, and how the scanner decided.
#[derive(Debug, Clone, Serialize)]
pub struct MarkerView<'m> {
    /// The file: relative to the project root, or as the user named it on the command line.
    pub file: &'m str,
    /// 1-based line of the trigger.
    pub line: usize,
    /// 1-based last line of the ask.
    pub end_line: usize,
    /// 1-based byte column of the trigger.
    pub column: usize,
    /// The ask.
    pub text: &'m str,
    /// True if the file holds the marker's tag (after this command's stamp, if it stamps).
    pub tagged: bool,
    /// The ask's id: its tag, or the id a stamp gave or would give it.
    pub id: Option<MarkerId>,
    /// The file's language.
    pub language: &'m str,
    /// `syntax` or `fallback`.
    pub mode: &'static str,
    /// Why the fallback decided; `null` for the syntax tree.
    pub reason: Option<String>,
    /// The definition the ask is about (`Cache.refresh`); `null` at module level, in a
    /// language without symbols, or where the syntax tree cannot tell.
    pub symbol: Option<&'m str>,
    /// Its first and last line, 1-based, attributes and decorators included; `null` with
    /// `symbol`.
    pub symbol_lines: Option<[usize; 2]>,
    /// `watch --json` only: true if the file holds the ask's tag — never yet when the ask is
    /// announced: the tag is written later (see `tag`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stamped: Option<bool>,
    /// `watch --json` only: `pending` — the id goes into the marker once the file has been
    /// left alone for `--settle`; `none` — it will not (the file cannot be written, `--tag
    /// never`, or an autosaving editor's root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<&'static str>,
    /// `watch --json` only, and only when true: the whole text of an ask announced before
    /// under the same id (its first words saved by an autosaving editor); it replaces that one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revised: Option<bool>,
    /// `list_asks` only, for an untagged marker the server found not typed by the user: why it
    /// was not announced (Claude's file tool wrote it, git brought it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_announced: Option<String>,
}

impl Marker {
    /// The marker as printed, in `file` as it should be shown.
    pub fn view<'m>(&'m self, file: &'m str) -> MarkerView<'m> {
        MarkerView {
            file,
            line: self.line,
            end_line: self.end_line,
            column: self.column,
            text: &self.text,
            tagged: self.is_tagged(),
            id: self.tag,
            language: &self.language,
            mode: self.decided_by.mode(),
            reason: self.decided_by.reason().map(ToString::to_string),
            symbol: self.symbol.as_ref().map(|s| s.name.as_str()),
            symbol_lines: self.symbol.as_ref().map(|s| [s.first_line, s.last_line]),
            stamped: None,
            tag: None,
            revised: None,
            not_announced: None,
        }
    }
}

/// `text` as it may be shown outside JSON — on a terminal, or to Claude in a channel message:
/// each control character (ESC and with it CSI/OSC sequences, `\r`, BEL, other C0 and C1
/// codes, DEL) written as its escape (`\u{1b}`), so a file cannot move the cursor, retitle the
/// window or break a line of a message. With `keep_breaks`, the line breaks and tabs of a
/// multi-line ask stay.
pub fn escaped(text: &str, keep_breaks: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && !(keep_breaks && (c == '\n' || c == '\t')) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn control_characters_are_shown_escaped() {
        let text = "a\u{1b}]0;x\u{7}\tb\nc\r\u{9b}\u{7f}";
        assert_eq!(escaped(text, true), "a\\u{1b}]0;x\\u{7}\tb\nc\\r\\u{9b}\\u{7f}");
        assert_eq!(escaped(text, false), "a\\u{1b}]0;x\\u{7}\\tb\\nc\\r\\u{9b}\\u{7f}");
        assert_eq!(escaped("Cache.refresh é", false), "Cache.refresh é");
    }
}
