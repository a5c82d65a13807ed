//! The syntax tree's side of a scan: parsers kept per thread and a bounded parse, the comment
//! node around a hit and the comment's own byte range in it, and whether a syntax error lies
//! near a comment (then the tokens decide: `recover`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{ControlFlow, Range};
use std::time::{Duration, Instant};

use memchr::memmem;
use tree_sitter::{Node, ParseOptions, Parser, Tree};

use super::{recover, trim_end, trim_start, Steps};
use crate::languages::Language;

/// A parse that takes longer than this is abandoned and the file scanned with the fallback
/// table; a 1 MiB file parses in well under a second with every grammar we ship.
const PARSE_BUDGET: Duration = Duration::from_secs(5);

thread_local! {
    /// One parser per grammar per thread: creating a parser is cheap, but the tree-sitter docs
    /// recommend reuse, and it keeps allocations warm across files.
    static PARSERS: RefCell<HashMap<String, Parser>> = RefCell::new(HashMap::new());
}

/// Parses `src` (or only `region` of it, keeping offsets file-absolute) with a bounded budget,
/// reusing what is unchanged of `old` (already edited to match `src`) if given.
pub(super) fn parse(
    grammar: &str,
    ts: &tree_sitter::Language,
    src: &[u8],
    region: Option<Range<usize>>,
    old: Option<&Tree>,
) -> Option<Tree> {
    PARSERS.with(|parsers| {
        let mut parsers = parsers.borrow_mut();
        if !parsers.contains_key(grammar) {
            let mut parser = Parser::new();
            parser.set_language(ts).ok()?;
            parsers.insert(grammar.to_string(), parser);
        }
        let parser = parsers.get_mut(grammar)?;
        let ranges = match region {
            Some(r) => vec![ts_range(src, r)],
            None => Vec::new(),
        };
        parser.set_included_ranges(&ranges).ok()?;
        let deadline = Instant::now() + PARSE_BUDGET;
        let mut give_up = |_: &tree_sitter::ParseState| {
            if Instant::now() > deadline {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let options = ParseOptions::new().progress_callback(&mut give_up);
        let mut read = |i: usize, _| src.get(i..).unwrap_or_default();
        let tree = parser.parse_with_options(&mut read, old, Some(options));
        if tree.is_none() {
            parser.reset();
        }
        tree
    })
}

fn ts_range(src: &[u8], r: Range<usize>) -> tree_sitter::Range {
    tree_sitter::Range {
        start_byte: r.start,
        end_byte: r.end,
        start_point: point(src, r.start),
        end_point: point(src, r.end),
    }
}

/// The row and byte column of `offset` as tree-sitter counts them: rows end at `\n` only (a
/// `\r` before it is the last column of its row).
pub(super) fn point(src: &[u8], offset: usize) -> tree_sitter::Point {
    let before = &src[..offset];
    let row = memchr::memchr_iter(b'\n', before).count();
    let col = offset - memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    tree_sitter::Point::new(row, col)
}

/// The nearest node, from `node` up, whose kind is one of the language's comment kinds.
pub(super) fn enclosing_comment<'a>(
    lang: &Language,
    steps: &Steps<'a>,
    node: Node<'a>,
) -> Option<Node<'a>> {
    ancestor_of_kind(steps, node, &lang.comment_kinds)
}

/// The nearest node, from `node` up, whose kind the language reads with its tokens.
pub(super) fn lexed_ancestor<'a>(
    lang: &Language,
    steps: &Steps<'a>,
    node: Node<'a>,
) -> Option<Node<'a>> {
    ancestor_of_kind(steps, node, &lang.lexed_kinds)
}

fn ancestor_of_kind<'a>(steps: &Steps<'a>, node: Node<'a>, kinds: &[String]) -> Option<Node<'a>> {
    if kinds.is_empty() {
        return None;
    }
    let mut n = Some(node);
    while let Some(cur) = n {
        if kinds.iter().any(|k| k == cur.kind()) {
            return Some(cur);
        }
        n = steps.parent(cur);
    }
    None
}

/// The comment's range if it lies on one line, or is a whole multi-line block comment:
/// trailing `\r`/`\n` trimmed (Rust doc comments and many grammars include them), a Markdown
/// `html_block` cut to the comment around `hit`, and a run of line comments that the grammar
/// merged into one node (Haskell) cut to the line of `hit`.
pub(super) fn comment_range(
    lang: &Language,
    src: &[u8],
    range: Range<usize>,
    hit: usize,
) -> Option<Range<usize>> {
    let mut end = range.end;
    while end > range.start && matches!(src[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    // Markdown's html_block starts at the line, before up to three spaces of indentation.
    let range = range.start
        + (src[range.start..end].len() - trim_start(&src[range.start..end]).len())
        ..range.end;
    let text = &src[range.start..end];
    if text.contains(&b'\n') {
        if let Some(line) = merged_line_comment(lang, src, range.start..end, hit) {
            return Some(line);
        }
    }
    let mut start = range.start;
    for d in &lang.block_comments {
        let closes_before_hit = || {
            let first_body = (range.start + d.open.len()).min(hit);
            memmem::find(&src[first_body..hit], d.close.as_bytes()).is_some()
        };
        if text.starts_with(d.open.as_bytes())
            && (!text.ends_with(d.close.as_bytes()) || closes_before_hit())
        {
            // A node that holds more than one comment (Markdown's html_block): the comment is
            // the one around the hit, from the last opener before it to the next closer.
            let Some(open) = memmem::rfind(&src[range.start..hit], d.open.as_bytes()) else {
                continue;
            };
            start = range.start + open;
            let body = start + d.open.len();
            if let Some(i) = memmem::find(&src[body..end], d.close.as_bytes()) {
                end = body + i + d.close.len();
            }
        }
    }
    let text = &src[start..end];
    let is_block = lang
        .block_comments
        .iter()
        .any(|d| text.starts_with(d.open.as_bytes()) && text.ends_with(d.close.as_bytes()));
    if is_block {
        return Some(start..end); // on one line, or a whole block over several
    }
    if text.contains(&b'\n') {
        return None;
    }
    // A lone `\r` ends a line too (CR-only files): a line comment stops there.
    if let Some(cr) = memchr::memchr(b'\r', text) {
        end = start + cr;
    }
    Some(start..end)
}

/// If every line of `range` is a line comment (`-- a` / `-- b`), the one holding `hit`,
/// from its comment token to the end of the line.
fn merged_line_comment(
    lang: &Language,
    src: &[u8],
    range: Range<usize>,
    hit: usize,
) -> Option<Range<usize>> {
    let starts_with_token = |line: &[u8]| {
        let line = trim_start(line);
        lang.line_comments.iter().any(|t| line.starts_with(t.as_bytes()))
    };
    let mut found = None;
    let mut start = range.start;
    for line in src[range.clone()].split(|&b| b == b'\n') {
        if !starts_with_token(line) {
            return None;
        }
        let end = start + line.len();
        if (start..end).contains(&hit) {
            let token = start + (line.len() - trim_start(line).len());
            let end = start + trim_end(line).len();
            found = Some(token..end.max(token));
        }
        start = end + 1;
    }
    found
}

/// A comment node directly inside a string, or inside a heredoc below its opening line, is a
/// grammar's mistake (tree-sitter-lua reads `"--[[ x ]]"` so, tree-sitter-php a `#` line of a
/// heredoc body): the text is string. A comment after a heredoc opener (`cat <<EOF # x`) is real.
pub(super) fn parent_is_string(steps: &Steps, comment: Node) -> bool {
    steps.parent(comment).is_some_and(|p| {
        let kind = p.kind();
        if kind.contains("heredoc") {
            return comment.start_position().row > p.start_position().row;
        }
        kind.contains("string") && !kind.contains("concatenat")
    })
}

/// True if the comment is inside an ERROR node, beside one, or shares its line with an error
/// or a MISSING node.
pub(super) fn near_error(steps: &Steps, comment: Node, line: Range<usize>) -> bool {
    let root = steps.root();
    if !root.has_error() {
        return false;
    }
    let mut n = steps.parent(comment);
    while let Some(p) = n {
        if p.is_error() || p.is_missing() {
            return true;
        }
        n = steps.parent(p);
    }
    // A sibling holding an error: an unterminated string on the line before leaves the
    // ERROR inside the previous statement, and the comment right after it.
    let bad = |n: Option<Node>| n.is_some_and(|n| n.is_error() || n.is_missing() || n.has_error());
    if bad(steps.prev_sibling(comment)) || bad(steps.next_sibling(comment)) {
        return true;
    }
    error_touches(root, &line)
}

fn error_touches(node: Node, range: &Range<usize>) -> bool {
    if !node.has_error() || node.end_byte() < range.start || node.start_byte() > range.end {
        return false;
    }
    if node.is_error() || node.is_missing() {
        return true;
    }
    // Straight to the first child that reaches the range (a large error node has many).
    let mut cursor = node.walk();
    if !recover::goto_child_after(&mut cursor, range.start.saturating_sub(1)) {
        return false;
    }
    loop {
        let child = cursor.node();
        if child.start_byte() > range.end {
            return false;
        }
        if error_touches(child, range) {
            return true;
        }
        if !cursor.goto_next_sibling() {
            return false;
        }
    }
}
