//! The fallback reader: a line-based lexer over a row's comment and string tokens, for
//! languages without a grammar and to confirm hits next to a syntax error.

use std::ops::Range;

use memchr::memmem;

use crate::languages::Language;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum LexState {
    Code,
    /// Inside a block comment; the index is into `FallbackLexer::tokens`.
    Block(usize),
    /// Inside a string; `true` if it may span lines.
    String(usize, bool),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Line,
    Block,
    String,
    MultilineString,
}

/// The row's tokens, longest first, so `"""` wins over `"` and `/**` is read as `/*`.
pub(super) struct FallbackLexer<'l> {
    tokens: Vec<(&'l str, &'l str, TokenKind)>,
}

impl<'l> FallbackLexer<'l> {
    pub(super) fn new(lang: &'l Language) -> Self {
        let mut tokens: Vec<(&str, &str, TokenKind)> = Vec::new();
        tokens.extend(lang.line_comments.iter().map(|t| (t.as_str(), "", TokenKind::Line)));
        tokens.extend(
            lang.block_comments
                .iter()
                .map(|d| (d.open.as_str(), d.close.as_str(), TokenKind::Block)),
        );
        tokens.extend(
            lang.strings.iter().map(|d| (d.open.as_str(), d.close.as_str(), TokenKind::String)),
        );
        tokens.extend(
            lang.multiline_strings
                .iter()
                .map(|d| (d.open.as_str(), d.close.as_str(), TokenKind::MultilineString)),
        );
        // Stable sort: at equal length, comments win over strings.
        tokens.sort_by_key(|(open, _, _)| std::cmp::Reverse(open.len()));
        FallbackLexer { tokens }
    }

    fn token_at(&self, src: &[u8], i: usize) -> Option<usize> {
        self.tokens.iter().position(|(open, _, _)| src[i..].starts_with(open.as_bytes()))
    }

    /// A comment that starts exactly at `start` and ends on this line: its range.
    /// `block_end` bounds where a block comment may close (the line end, or further).
    pub(super) fn comment_at(
        &self,
        src: &[u8],
        start: usize,
        line_end: usize,
        block_end: usize,
    ) -> Option<Range<usize>> {
        let t = self.token_at(&src[..line_end], start)?;
        let (open, close, kind) = self.tokens[t];
        match kind {
            TokenKind::Line => Some(start..line_end),
            TokenKind::Block => {
                let body = start + open.len();
                let i = memmem::find(&src[body..block_end], close.as_bytes())?;
                Some(start..body + i + close.len())
            }
            TokenKind::String | TokenKind::MultilineString => None,
        }
    }

    /// One step from `i` in `state`, reading no further than `text.len()`: the next position
    /// and state, or the comment token (line or block) that starts at `i` in code.
    fn step(&self, text: &[u8], i: usize, state: LexState) -> Step {
        match state {
            LexState::Code => match self.token_at(text, i) {
                None => Step::Next(i + 1, LexState::Code),
                Some(t) => {
                    let (open, _, kind) = self.tokens[t];
                    match kind {
                        TokenKind::Line | TokenKind::Block => Step::Comment(t),
                        TokenKind::String => Step::Next(i + open.len(), LexState::String(t, false)),
                        TokenKind::MultilineString => {
                            Step::Next(i + open.len(), LexState::String(t, true))
                        }
                    }
                }
            },
            LexState::Block(t) => {
                let close = self.tokens[t].1.as_bytes();
                match memmem::find(&text[i..], close) {
                    Some(j) => Step::Next(i + j + close.len(), LexState::Code),
                    None => Step::Next(text.len(), state),
                }
            }
            LexState::String(t, _) => {
                let close = self.tokens[t].1.as_bytes();
                if text[i] == b'\\' {
                    Step::Next(i + 2, state)
                } else if text[i..].starts_with(close) {
                    Step::Next(i + close.len(), LexState::Code)
                } else {
                    Step::Next(i + 1, state)
                }
            }
        }
    }

    /// The one-line comment in `region` (read with the tokens from its start) that holds `hit`.
    pub(super) fn comment_containing(
        &self,
        src: &[u8],
        region: Range<usize>,
        hit: usize,
    ) -> Option<Range<usize>> {
        let text = &src[..region.end];
        let (mut i, mut state) = (region.start, LexState::Code);
        while i <= hit && i < region.end {
            match self.step(text, i, state) {
                Step::Next(j, s) => (i, state) = (j, s),
                Step::Comment(_) => {
                    let line_end =
                        memchr::memchr2(b'\n', b'\r', &text[i..]).map_or(region.end, |j| i + j);
                    let comment = self.comment_at(src, i, line_end, line_end)?;
                    if comment.contains(&hit) {
                        return Some(comment);
                    }
                    i = comment.end;
                }
            }
        }
        None
    }

    /// The state after reading `src[line_start..line_end]` in `state`.
    pub(super) fn advance(
        &self,
        src: &[u8],
        line_start: usize,
        line_end: usize,
        mut state: LexState,
    ) -> LexState {
        let line = &src[..line_end];
        let mut i = line_start;
        while i < line_end {
            match self.step(line, i, state) {
                Step::Next(j, s) => (i, state) = (j, s),
                Step::Comment(t) => {
                    let (open, _, kind) = self.tokens[t];
                    if kind == TokenKind::Line {
                        return LexState::Code; // the rest of the line is comment
                    }
                    (i, state) = (i + open.len(), LexState::Block(t));
                }
            }
        }
        match state {
            LexState::String(_, false) => LexState::Code, // single-line strings end here
            other => other,
        }
    }
}

/// What one lexer step found.
enum Step {
    Next(usize, LexState),
    /// A comment token (index into the tokens) starts here.
    Comment(usize),
}
