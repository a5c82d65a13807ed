//! The one JSON shape of a marker: `scan --json`, `stamp --json`, `watch --json` and the
//! `list_asks` tool all print this. Its keys are public (scripts depend on them); the channel
//! notification is the only other form, because Claude Code needs every value as a string.

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
    /// `watch --json` only: false when the file could not be written and the ask was
    /// announced untagged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stamped: Option<bool>,
    /// `watch --json` only, and only when true: the whole text of an ask announced before
    /// under the same id (its first words saved by an autosaving editor); it replaces that one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revised: Option<bool>,
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
            revised: None,
        }
    }
}
