//! Reading a file whose parse has errors: the tree's tokens where it parsed them soundly, the
//! fallback lexer from the first byte it did not. A hit next to a syntax error is then decided
//! by what the tokens before it say (is the `//` inside a string?), not by how the parser
//! recovered from the error.

use std::ops::{ControlFlow, Range};

use tree_sitter::{Node, TreeCursor};

use super::lexer::{Comment, FallbackLexer, LexState, Step};
use crate::languages::Language;

/// The reader's place in one syntax tree: hits are asked for in file order, and each question
/// reads on from where the last one stopped (the tree cursor too, so a large error node's
/// children are walked once, not once per hit).
pub(super) struct Recovery<'l, 't> {
    at: Place<'l>,
    cursor: TreeCursor<'t>,
    /// For each node on the cursor's path: is it an error node? (Asking a node for its parent
    /// walks down from the root: too slow inside a large error.)
    errors: Vec<bool>,
}

/// Where the reading is in the bytes, and with which tokens.
struct Place<'l> {
    row: &'l Language,
    lexer: FallbackLexer<'l>,
    pos: usize,
    state: LexState,
    /// The comment the last question found: a later question inside it is answered with it.
    last: Option<Comment>,
}

impl<'l, 't> Recovery<'l, 't> {
    /// A reader of `root`, a tree in language `row`.
    pub(super) fn new(row: &'l Language, root: Node<'t>) -> Recovery<'l, 't> {
        let lexer = FallbackLexer::new(row);
        let at = Place { row, lexer, pos: root.start_byte(), state: LexState::Code, last: None };
        Recovery { at, cursor: root.walk(), errors: Vec::new() }
    }

    /// The comment that holds `hit`, read with the row's tokens from the start of the tree:
    /// subtrees without errors are skipped whole (their tokens are sound, and they end in code),
    /// a token the tree read soundly is opaque (a string's text, JSX text: never a comment),
    /// and everything else (error nodes, bytes no node covers, comments, strings the tree did
    /// not close) is read with the lexer. `None` if `hit` is not in a comment.
    pub(super) fn comment_at(&mut self, src: &[u8], hit: usize) -> Option<Comment> {
        if hit < self.at.pos {
            return self.at.last.clone().filter(|c| c.range.contains(&hit));
        }
        let mut reader = Reader {
            src,
            limit: hit,
            at: &mut self.at,
            cursor: &mut self.cursor,
            errors: &mut self.errors,
        };
        let found = match reader.tree() {
            ControlFlow::Break(found) => found,
            // Past the end of the tree (a parser that stopped early): the lexer reads on.
            ControlFlow::Continue(()) => match reader.lex(src.len()) {
                ControlFlow::Break(found) => found,
                ControlFlow::Continue(()) => None,
            },
        };
        self.at.last = found.clone();
        found
    }
}

/// Whether to read a node's children, and whether the lexer agreed with the tree where it starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Descend {
    No,
    Yes { trusted: bool },
}

struct Reader<'r, 'l, 't> {
    src: &'r [u8],
    /// The hit: reading stops once it is passed, with the verdict.
    limit: usize,
    at: &'r mut Place<'l>,
    cursor: &'r mut TreeCursor<'t>,
    errors: &'r mut Vec<bool>,
}

impl Reader<'_, '_, '_> {
    /// Reads the tree from the cursor's node (read again: it may have been read in part) until
    /// the limit is passed (`Break` with the comment holding it, if any) or the tree ends
    /// (`Continue`).
    fn tree(&mut self) -> ControlFlow<Option<Comment>> {
        'nodes: loop {
            let node = self.cursor.node();
            let in_error = self.errors.last().copied().unwrap_or(false);
            let descend = self.node(node, in_error)?;
            if let Descend::Yes { trusted } = descend {
                if goto_child_after(self.cursor, self.at.pos) {
                    self.errors.push(node.is_error() || !trusted);
                    continue;
                }
            }
            if descend != Descend::No {
                self.lex(node.end_byte())?; // no child reaches past the position
            }
            // The next sibling; or up, reading the bytes after a parent's last child.
            loop {
                if self.cursor.goto_next_sibling() {
                    continue 'nodes;
                }
                if !self.cursor.goto_parent() {
                    return ControlFlow::Continue(());
                }
                self.errors.pop();
                self.lex(self.cursor.node().end_byte())?;
            }
        }
    }

    /// Reads one node, or says to read its children.
    fn node(&mut self, node: Node, in_error: bool) -> ControlFlow<Option<Comment>, Descend> {
        let (start, end) = (node.start_byte(), node.end_byte());
        if end <= self.at.pos {
            return ControlFlow::Continue(Descend::No);
        }
        if self.at.pos < start {
            self.lex(start)?; // the bytes between nodes
            if end <= self.at.pos {
                return ControlFlow::Continue(Descend::No);
            }
        }
        let fresh = self.at.state == LexState::Code && self.at.pos == start;
        let sound = !node.has_error() && !node.is_error() && !node.is_missing();
        let leaf = node.child_count() == 0;
        let lexed_kind = self.lexed_kind(node);
        // A node that opens a string, comment or heredoc (`"` alone, Python's `string_start`,
        // XML's `CDStart`) may not close where the tree says: the lexer reads it.
        let opens = self.at.lexer.opens_at(self.src, start)
            // …and one whose end splits a token (`/p>; /` read as a regex, then `/ @claude`)
            // ends where the lexer would not.
            || self.at.lexer.splits_token(self.src, end)
            // A prefixed string opener (`r\"\"\"`) skipped would leave the lexer in code, and
            // its closer read as an opener: the string would run to the end of the file.
            || (leaf && self.at.lexer.prefixed_opener(self.src, start, end));
        let orphan = in_error && orphan_string_part(node);
        // A heredoc body the lexer meets in code: it read the opener as an operator
        // (`arr<<item`, `@buf <<"x"`), and it decides.
        let unopened = fresh && HEREDOC_BODIES.contains(&node.kind());
        if fresh && sound && !opens && end <= self.limit && !orphan && !unopened {
            // A heredoc opener the tree read as code (`<<` a shift) leaves the body to the
            // lexer, which must see the opener.
            if self.at.lexer.holds_heredoc(self.src, start..end) {
                self.lex(end)?;
                return ControlFlow::Continue(Descend::No);
            }
            self.at.pos = end; // parsed soundly, before the hit: it ends in code
            return ControlFlow::Continue(Descend::No);
        }
        // JSX text in a broken file may be the parser's guess (code after a function whose `}`
        // it took for an unclosed `{value`'s): the tokens and the JSX check decide.
        let jsx_text = self.at.row.jsx_text && node.kind() == "jsx_text";
        if fresh && sound && leaf && !opens && !lexed_kind && !orphan && !jsx_text {
            // A token the tree read soundly holds the hit: it is no comment.
            self.at.pos = end;
            return ControlFlow::Break(None);
        }
        if leaf || lexed_kind || unopened {
            self.lex(end)?;
            return ControlFlow::Continue(Descend::No);
        }
        // A node the lexer entered out of step with the tree (inside a string the tree did not
        // open, past its first byte): its string parts are the tree's guess, read with the lexer.
        ControlFlow::Continue(Descend::Yes { trusted: fresh })
    }

    /// Comments, and text the grammar leaves unparsed (C macro bodies): read with the tokens.
    fn lexed_kind(&self, node: Node) -> bool {
        let kind = node.kind();
        let row = self.at.row;
        row.comment_kinds.iter().chain(&row.lexed_kinds).any(|k| k == kind)
    }

    /// Reads with the lexer up to `until` (a token may carry it further).
    fn lex(&mut self, until: usize) -> ControlFlow<Option<Comment>> {
        let src = self.src;
        let until = until.min(src.len());
        while self.at.pos < until {
            let pos = self.at.pos;
            match self.at.lexer.step(src, pos, until, self.at.state) {
                Step::Next(next, state) => {
                    self.at.pos = next.min(src.len());
                    self.at.state = state;
                    if next > self.limit {
                        return ControlFlow::Break(None); // in code, a string or a heredoc
                    }
                }
                Step::Comment(range, state) => {
                    self.at.pos = range.end;
                    self.at.state = state;
                    if range.end > self.limit {
                        let comment = self.at.lexer.comment(self.at.row, src, range);
                        return ControlFlow::Break(Some(comment));
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// The grammars' node kinds of a heredoc's body (Ruby, Bash, PHP).
const HEREDOC_BODIES: &[&str] = &["heredoc_body"];

/// True if `node` lies in a heredoc body that runs to the end of the file without its closing
/// line (an empty end): a file with no syntax error to the parser, but one to the language —
/// and, where the grammar read an operator as the opener (tree-sitter-ruby's `@buf<<item`),
/// one the tokens must read.
pub(super) fn in_unclosed_heredoc(steps: &super::Steps, node: Node) -> bool {
    let mut n = Some(node);
    while let Some(cur) = n {
        if HEREDOC_BODIES.contains(&cur.kind()) {
            let end = cur.child(cur.child_count().saturating_sub(1));
            return end.is_some_and(|e| e.kind() == "heredoc_end" && e.byte_range().is_empty());
        }
        n = steps.parent(cur);
    }
    false
}

/// Moves `cursor` to the first child of its node that ends after `pos`, or leaves it where it
/// is. (tree-sitter's `goto_first_child_for_byte` gives up when `pos` lies in the invisible
/// tail of a hidden node, such as the newline that ends a Go declaration.)
pub(super) fn goto_child_after(cursor: &mut TreeCursor, pos: usize) -> bool {
    if cursor.goto_first_child_for_byte(pos).is_some() {
        return true;
    }
    if !cursor.goto_first_child() {
        return false;
    }
    loop {
        if cursor.node().end_byte() > pos {
            return true;
        }
        if !cursor.goto_next_sibling() {
            cursor.goto_parent();
            return false;
        }
    }
}

/// A string's text (a node directly inside an error, without its string): the grammar's error
/// recovery made it from whatever followed (Kotlin reads ` = "` so). The lexer reads it
/// instead. (JSX text is text wherever it lies.)
fn orphan_string_part(node: Node) -> bool {
    let kind = node.kind();
    node.child_count() == 0
        && node.is_named()
        && (kind.contains("string") || kind.contains("content") || kind.contains("fragment"))
}

/// The range of a comment without a trailing line break.
pub(super) fn trimmed(src: &[u8], range: Range<usize>) -> Range<usize> {
    let mut end = range.end;
    while end > range.start && matches!(src[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    range.start..end
}

/// How far back from a comment [`in_jsx_text`] looks for the tag before it.
const JSX_LOOKBACK: usize = 4096;
/// How many expression containers back (`{a}{b}{c} // …`) [`in_jsx_text`] follows children.
const JSX_CHILDREN: usize = 64;

/// True if `at` lies in JSX text, in a tree that starts at `start`: the nearest `<`, `>`, `{`
/// or `}` before it ends a JSX child — the `>` of a tag (`<li>`, `</li>`, `<br />`, `<>`,
/// `<div ref={(r) => { a(); }}>`), or the `}` of an expression container (`{endIcon}`, `))}`,
/// `{/* … */}`) that is itself a child, as found the same way — and what lies between is
/// text: not the `)`, `;` or `,` that follows an element in code on its line
/// (`<Foo />); // …`), nor the quote that ends a string of HTML (`'<li>'; // …`), no
/// statement's end, no backtick (HTML in a template).
pub(super) fn in_jsx_text(src: &[u8], start: usize, at: usize) -> bool {
    let from = at.saturating_sub(JSX_LOOKBACK).max(start);
    let mut at = at;
    for _ in 0..JSX_CHILDREN {
        let Some(k) = src[from..at].iter().rposition(|b| b"<>{}".contains(b)).map(|k| from + k)
        else {
            return false;
        };
        // Inside an element just opened, a `)` starting a later line is its text: only after
        // a closed child does it close the code around the element.
        let opened = src[k] == b'>' && opens_element(src, k, from);
        if !jsx_text_between(&src[k + 1..at], opened) {
            return false;
        }
        match src[k] {
            b'>' => return ends_jsx_tag(src, k, from),
            b'}' => match child_container(src, from, k) {
                Some(open) => at = open, // a child: what precedes it decides
                None => return false,
            },
            _ => return false, // inside a tag or an expression
        }
    }
    false
}

/// True if `between`, what follows a JSX child, may be text: on the child's line, no `)`, `]`,
/// `;`, `,` or quote first (`<Foo />); // …`, `'<li>'; // …`); on a later line, unless the
/// child is an element's opening tag (`<li>` ⏎ `)` is text), no `)` or `]` that closes the code
/// around the element (`</p>` ⏎ `); // …`); no statement's end, no backtick.
fn jsx_text_between(between: &[u8], in_opened_element: bool) -> bool {
    let ends_statement = memchr::memmem::find(between, b";\n").is_some();
    let on_its_line = between.iter().find(|&&b| b != b' ' && b != b'\t');
    let first = between.iter().find(|b| !b.is_ascii_whitespace());
    let code = on_its_line.is_some_and(|b| b")];,'\"".contains(b))
        || (!in_opened_element && first.is_some_and(|b| b")]".contains(b)))
        || between.contains(&b'`')
        || ends_statement;
    !code
}

/// The `{` of the expression container that the `}` at `close` ends, if it may be a JSX child:
/// not a block (`if (a) {`, `() => {`, `else {`) nor an object (`= {`, `({`, `, {`), and over
/// several lines, its `}` indented as its `{` (a function's `}` after an unclosed `{cond && (`
/// is not that container's).
fn child_container(src: &[u8], from: usize, close: usize) -> Option<usize> {
    let mut depth = 0usize;
    let open = (from..close).rev().find(|&k| match src[k] {
        b'}' => {
            depth += 1;
            false
        }
        b'{' if depth == 0 => true,
        b'{' => {
            depth -= 1;
            false
        }
        _ => false,
    })?;
    if src[open..close].contains(&b'\n') && indent(src, open) != indent(src, close) {
        return None;
    }
    let Some(last) = src[from..open].iter().rposition(|b| !b.is_ascii_whitespace()) else {
        return Some(open);
    };
    let last = from + last;
    let arrow = src[last] == b'>' && last > 0 && src[last - 1] == b'=';
    if arrow || b")=(,:?&|".contains(&src[last]) {
        return None; // a block, an object, an arrow's body
    }
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let start = src[..=last].iter().rposition(|b| !word(b)).map_or(0, |k| k + 1);
    let keyword = matches!(&src[start..=last], b"else" | b"try" | b"finally" | b"do" | b"return");
    (!keyword).then_some(open)
}

/// The indentation of the line that holds `pos`.
fn indent(src: &[u8], pos: usize) -> &[u8] {
    let start = super::line_start(src, pos);
    let len = src[start..pos].iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &src[start..start + len]
}

/// True if the `>` at `gt` ends a JSX tag that starts after `from`.
fn ends_jsx_tag(src: &[u8], gt: usize, from: usize) -> bool {
    if gt > 0 && matches!(src[gt - 1], b'=' | b'-') {
        return false; // `=>`, `->`
    }
    let Some(lt) = tag_start(src, gt, from) else { return false };
    let inner = &src[lt + 1..gt];
    let closing = inner.starts_with(b"/");
    let name = inner.strip_prefix(b"/").unwrap_or(inner);
    let fragment = name.iter().all(u8::is_ascii_whitespace);
    let named = name.first().is_some_and(|b| b.is_ascii_alphabetic())
        && name
            .iter()
            .take_while(|b| !b.is_ascii_whitespace() && **b != b'/')
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b':' | b'-' | b'_'));
    if !fragment && !named {
        return false;
    }
    // A generic (`Array<string>`, `f<T>(x)`) follows a name it touches; a tag follows anything
    // else, keywords that take an expression too (`return <li>`), and text that ends in a word
    // when the tag starts its line, closes an element or closes itself (`<br />`).
    let Some(last) = src[..lt].iter().rposition(|b| !b.is_ascii_whitespace()) else { return true };
    let word = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$');
    let starts_line = src[last + 1..lt].contains(&b'\n');
    if !word(&src[last]) || closing || inner.ends_with(b"/") || starts_line {
        return true;
    }
    let start = src[..=last].iter().rposition(|b| !word(b)).map_or(0, |k| k + 1);
    matches!(&src[start..=last], b"return" | b"yield" | b"await" | b"default" | b"case")
}

/// True if the `>` at `gt` ends an opening tag (`<li>`, `<>`, `<a href="x">`): the element it
/// opens holds what follows. Not a closing (`</li>`) or self-closing (`<br />`) tag.
fn opens_element(src: &[u8], gt: usize, from: usize) -> bool {
    let arrow = gt > 0 && matches!(src[gt - 1], b'=' | b'-');
    let Some(lt) = tag_start(src, gt, from).filter(|_| !arrow) else { return false };
    !src[lt + 1..gt].starts_with(b"/") && !src[lt + 1..gt].ends_with(b"/")
}

/// The `<` of the tag that the `>` at `gt` would end, found walking back over its attributes:
/// `{…}` expressions (one that lost its `}` mid-edit too), quoted values, an arrow's `=>`.
/// `None` at a `;` or another `>` outside them: code, no tag.
fn tag_start(src: &[u8], gt: usize, from: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut k = gt;
    while k > from {
        k -= 1;
        match src[k] {
            b'}' => depth += 1,
            b'{' => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            q @ (b'"' | b'\'') => k = from + src[from..k].iter().rposition(|&b| b == q)?,
            b'<' => return Some(k),
            b';' => return None,
            b'>' if k > from && src[k - 1] == b'=' => k -= 1,
            b'>' => return None,
            _ => {}
        }
    }
    None
}
