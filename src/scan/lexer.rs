//! The fallback reader: a quote-aware lexer over a row's comment, string and heredoc tokens,
//! for languages without a grammar and for the parts of a file its grammar could not parse.

use std::ops::Range;

use memchr::memmem;

use crate::languages::{HeredocSpace, Language};

/// Where the reader is: in code, or inside a token that may run past the current byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LexState {
    Code,
    /// Code, and a heredoc or block scalar opened on this line: its body starts on the next.
    CodeThenHeredoc(Body),
    /// Inside a block comment; the index is into `FallbackLexer::tokens`.
    Block(usize),
    /// Inside a string (the index is into `FallbackLexer::tokens`), and the heredoc whose
    /// opener came before it on its line, if any (`cat <<EOF > "$f"`): its body starts on the
    /// line after the string closes.
    String(usize, Option<Body>),
    /// Inside a heredoc or block scalar body, at the start of a line.
    Heredoc(Body),
}

/// How a heredoc's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Body {
    /// At a line that holds this word (where it is written in the file).
    Word { start: usize, len: usize },
    /// At a line indented this much or less (YAML's `|` and `>` block scalars).
    Indented(usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Line,
    Block,
    String,
    MultilineString,
    /// Multi-line, no backslash escapes, a doubled closer stands for itself.
    RawString,
}

/// One step of the reader.
pub(super) enum Step {
    /// Go on at this position in this state.
    Next(usize, LexState),
    /// A comment opens here, in code: its range (a line comment to the end of its line, a
    /// block comment to its closer), and the state after it.
    Comment(Range<usize>, LexState),
}

/// A comment the reader met in code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Comment {
    pub(super) range: Range<usize>,
    /// Only indentation precedes it on its line.
    pub(super) starts_line: bool,
    /// A trailing comment in a position no other token could take: after whitespace, or (for
    /// tokens not starting with `#`) after closing punctuation; never a word-like token
    /// (`REM`, `dnl`), which only comments at the start of a line.
    pub(super) trails_code: bool,
}

/// The row's tokens, longest first, so `"""` wins over `"` and `/**` is read as `/*`.
pub(super) struct FallbackLexer<'l> {
    tokens: Vec<(&'l str, &'l str, TokenKind)>,
    /// Heredoc openers, longest first.
    heredocs: Vec<&'l str>,
    heredoc_space: HeredocSpace,
    /// `<<` is also an operator: after a value it opens nothing.
    shift_operator: bool,
    /// Brackets of arithmetic (`((` … `))`), in which `<<` is a shift.
    arithmetic: Vec<(&'l str, &'l str)>,
    /// Quote-like operators (`q`, `qw`, `%w`, `~r`) with one delimited part, then those with
    /// two (`s`, `tr`); longest first.
    quotes: Vec<(&'l str, bool)>,
    /// Lines that start with this hold no comment (Make recipes).
    verbatim: Option<&'l str>,
    slash_regex: bool,
    /// Block scalar indicators (YAML's `|` and `>`).
    block_scalars: &'l [u8],
    /// Lines after which the rest of the file is data (`__END__`).
    data_section: &'l [String],
    /// Holes in multi-line strings (`${` … `}`): the opener, and the closing bracket.
    holes: Vec<(&'l str, u8)>,
    code_escapes: bool,
    sigils: &'l [u8],
    /// Block comments that start a line (POD): opener and closer.
    line_blocks: Vec<(&'l str, &'l str)>,
    /// Node properties allowed before a block scalar indicator (`!!binary |`).
    properties: &'l [u8],
    /// Bytes that may start a token or a heredoc opener: everything else is plain code.
    starts: [bool; 256],
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
        tokens.extend(
            lang.raw_strings
                .iter()
                .map(|d| (d.open.as_str(), d.close.as_str(), TokenKind::RawString)),
        );
        // Stable sort: at equal length, comments win over strings.
        tokens.sort_by_key(|(open, _, _)| std::cmp::Reverse(open.len()));
        let mut heredocs: Vec<&str> = lang.heredocs.iter().map(String::as_str).collect();
        heredocs.sort_by_key(|open| std::cmp::Reverse(open.len()));
        let mut quotes: Vec<(&str, bool)> =
            lang.quote_operators.iter().map(|q| (q.as_str(), false)).collect();
        quotes.extend(lang.substitute_operators.iter().map(|q| (q.as_str(), true)));
        quotes.sort_by_key(|(op, _)| std::cmp::Reverse(op.len()));
        let mut starts = [false; 256];
        let openers = tokens.iter().map(|t| t.0).chain(heredocs.iter().copied());
        for open in openers.chain(quotes.iter().map(|q| q.0)) {
            starts[usize::from(open.as_bytes()[0])] = true;
        }
        starts[usize::from(b'\n')] = true;
        if lang.slash_regex {
            starts[usize::from(b'/')] = true;
        }
        let block_scalars = lang.block_scalars.as_bytes();
        for &b in block_scalars {
            starts[usize::from(b)] = true;
        }
        let verbatim = lang.verbatim_line_prefix.as_deref();
        if let Some(prefix) = verbatim {
            starts[usize::from(prefix.as_bytes()[0])] = true;
        }
        for line in &lang.data_section {
            starts[usize::from(line.as_bytes()[0])] = true;
        }
        let line_blocks: Vec<(&str, &str)> =
            lang.line_block_comments.iter().map(|d| (d.open.as_str(), d.close.as_str())).collect();
        for (open, _) in &line_blocks {
            starts[usize::from(open.as_bytes()[0])] = true;
        }
        let sigils = lang.variable_sigils.as_bytes();
        for &b in sigils {
            starts[usize::from(b)] = true;
        }
        if lang.code_escapes {
            starts[usize::from(b'\\')] = true;
        }
        let holes =
            lang.string_holes.iter().map(|h| (h.open.as_str(), h.close.as_bytes()[0])).collect();
        FallbackLexer {
            tokens,
            heredocs,
            heredoc_space: lang.heredoc_space,
            shift_operator: lang.shift_operator,
            arithmetic: lang
                .arithmetic
                .iter()
                .map(|d| (d.open.as_str(), d.close.as_str()))
                .collect(),
            quotes,
            verbatim,
            slash_regex: lang.slash_regex,
            block_scalars,
            data_section: &lang.data_section,
            holes,
            code_escapes: lang.code_escapes,
            sigils,
            line_blocks,
            properties: lang.block_scalar_properties.as_bytes(),
            starts,
        }
    }

    fn token_at(&self, src: &[u8], i: usize) -> Option<usize> {
        if !self.starts[usize::from(src[i])] {
            return None;
        }
        self.tokens.iter().position(|(open, _, _)| src[i..].starts_with(open.as_bytes()))
    }

    /// True if a string, comment, heredoc, block scalar, quote-like or regex literal, or the
    /// data section, opens at `i` in code.
    pub(super) fn opens_at(&self, src: &[u8], i: usize) -> bool {
        self.token_at(src, i).is_some()
            || self.data_starts_at(src, i)
            || self.heredoc_at(src, i).is_some()
            || self.block_scalar_at(src, i).is_some()
            || self.quote_at(src, i).is_some()
            || self.regex_at(src, i).is_some()
    }

    /// True if a heredoc opener lies in `range`: a node of the tree that holds one does not end
    /// in code, whatever the tree says (its body starts on the next line).
    pub(super) fn holds_heredoc(&self, src: &[u8], range: Range<usize>) -> bool {
        let Some(first) = self.heredocs.first().map(|o| o.as_bytes()[0]) else { return false };
        if self.heredocs.iter().any(|o| o.as_bytes()[0] != first) {
            return (range.start..range.end).any(|i| self.heredoc_at(src, i).is_some());
        }
        memchr::memchr_iter(first, &src[range.clone()])
            .any(|k| self.heredoc_at(src, range.start + k).is_some())
    }

    /// True if the line at `i` ends the code (`__END__`): the rest of the file is data.
    fn data_starts_at(&self, src: &[u8], i: usize) -> bool {
        (i == 0 || src[i - 1] == b'\n') && self.data_section.iter().any(|l| ends_code(src, i, l))
    }

    /// The end of the regex literal that starts with the `/` at `i`, where a value is expected;
    /// it must close on its line (`[…]` classes may hold `/`).
    fn regex_at(&self, src: &[u8], i: usize) -> Option<usize> {
        if !self.slash_regex || src[i] != b'/' || !value_expected(src, i) {
            return None;
        }
        let mut j = i + 1;
        let mut class = false;
        while j < src.len() {
            match src[j] {
                b'\\' => j += 1,
                b'\n' | b'\r' => return None,
                b'[' => class = true,
                b']' => class = false,
                b'/' if !class => return (j > i + 1).then_some(j + 1),
                _ => {}
            }
            j += 1;
        }
        None
    }

    /// True if a token of more than one byte starts before `end` and runs past it.
    pub(super) fn splits_token(&self, src: &[u8], end: usize) -> bool {
        let longest = self.tokens.first().map_or(0, |t| t.0.len());
        (end.saturating_sub(longest.saturating_sub(1))..end)
            .any(|i| self.token_at(src, i).is_some_and(|t| i + self.tokens[t].0.len() > end))
    }

    /// True if a string opener ends at `end` after a prefix that starts at `start` (Python's
    /// `r\"\"\"`, `f"`, `b'`): the token `start..end` opens a string the lexer must see.
    pub(super) fn prefixed_opener(&self, src: &[u8], start: usize, end: usize) -> bool {
        let longest = self.tokens.first().map_or(0, |t| t.0.len());
        (end.saturating_sub(longest).max(start + 1)..end).any(|i| {
            self.token_at(src, i).is_some_and(|t| {
                let (open, _, kind) = self.tokens[t];
                i + open.len() == end && !matches!(kind, TokenKind::Line | TokenKind::Block)
            })
        })
    }

    /// The end of the quote-like literal (`q{…}`, `qw(…)`, `s/…/…/`, `%w[…]`) that starts at
    /// `i`. The operator must stand alone (not `$s`, `-s`, `->m`, `tr` in `str`), and its
    /// delimiter be punctuation that no other reading would give it (not `=`, `,`, `;`, a
    /// closing bracket or a quote).
    fn quote_at(&self, src: &[u8], i: usize) -> Option<usize> {
        if self.quotes.is_empty() || !self.starts[usize::from(src[i])] {
            return None;
        }
        let &(op, twice) =
            self.quotes.iter().find(|(op, _)| src[i..].starts_with(op.as_bytes()))?;
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        if op.as_bytes()[0].is_ascii_alphabetic()
            && i > 0
            && (word(src[i - 1]) || b"$@%&->:".contains(&src[i - 1]))
        {
            return None;
        }
        let open = i + op.len();
        let delimiter = *src.get(open)?;
        if word(delimiter)
            || delimiter.is_ascii_whitespace()
            || !delimiter.is_ascii()
            || b"=,;)]}>\"'.".contains(&delimiter)
        {
            return None;
        }
        let mut end = delimited(src, open)?;
        if twice {
            end = if closing_bracket(delimiter).is_some() {
                let next = end + src[end..].iter().take_while(|b| b.is_ascii_whitespace()).count();
                delimited(src, next)?
            } else {
                delimited(src, end - 1)?
            };
        }
        Some(end)
    }

    /// The heredoc whose opener starts at `i`: its word and where the opener ends. Where the
    /// opener is an operator (`out << "abc"`, `$(( 1 << n ))`, `x <<< y`) there is none.
    fn heredoc_at(&self, src: &[u8], i: usize) -> Option<(Body, usize)> {
        if self.heredocs.is_empty() || !self.starts[usize::from(src[i])] {
            return None;
        }
        let open = self.heredocs.iter().find(|o| src[i..].starts_with(o.as_bytes()))?;
        // `<<<` is not `<<` followed by a word, nor `x <<< y`'s tail.
        let first = open.as_bytes()[0];
        if i > 0 && src[i - 1] == first && !first.is_ascii_alphanumeric() {
            return None;
        }
        let mut j = i + open.len();
        let spaces = src[j..].iter().take_while(|&&b| b == b' ' || b == b'\t').count();
        j += spaces;
        let word = self.heredoc_word(src, j, spaces)?;
        if (self.shift_operator && after_value(src, i, spaces == 0)) || self.in_arithmetic(src, i) {
            return None;
        }
        Some(word)
    }

    /// The heredoc word that starts at `j`, `spaces` after its opener: bare, quoted (`'EOT'`,
    /// `"EOT"`, `` `EOT` ``) or `\EOT`, if the row lets it stand there.
    fn heredoc_word(&self, src: &[u8], j: usize, spaces: usize) -> Option<(Body, usize)> {
        let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let spaced = spaces > 0;
        match src.get(j)? {
            &q @ (b'\'' | b'"' | b'`') if !spaced || self.heredoc_space != HeredocSpace::Glued => {
                let body = j + 1;
                let len = src[body..].iter().position(|&b| b == q || b == b'\n' || b == b'\r')?;
                (len > 0 && src[body + len] == q)
                    .then_some((Body::Word { start: body, len }, body + len + 1))
            }
            b'\\' if !spaced || self.heredoc_space != HeredocSpace::Glued => {
                let body = j + 1;
                let len = src[body..].iter().take_while(|&&b| is_word(b)).count();
                (len > 0).then_some((Body::Word { start: body, len }, body + len))
            }
            &b if (b.is_ascii_alphabetic() || b == b'_')
                && (!spaced || self.heredoc_space == HeredocSpace::Any) =>
            {
                let len = src[j..].iter().take_while(|&&b| is_word(b)).count();
                Some((Body::Word { start: j, len }, j + len))
            }
            _ => None,
        }
    }

    /// True if the opener at `i` lies in arithmetic opened before it on its line (shell
    /// `$(( 1 << n ))`, `(( x <<= 1 ))`): there it is a shift.
    fn in_arithmetic(&self, src: &[u8], i: usize) -> bool {
        if self.arithmetic.is_empty() {
            return false;
        }
        let line = &src[super::line_start(src, i)..i];
        self.arithmetic.iter().any(|(open, close)| {
            memmem::find_iter(line, open).count() > memmem::find_iter(line, close).count()
        })
    }

    /// The YAML block scalar (`key: |`, `- >-`) whose indicator is at `i`: its body is the
    /// lines below indented deeper than this one.
    fn block_scalar_at(&self, src: &[u8], i: usize) -> Option<(Body, usize)> {
        if !self.block_scalars.contains(&src[i]) || i == 0 || src[i - 1] != b' ' {
            return None;
        }
        let line_start = crate::lines::line_start(src, i);
        let mut before = super::trim_end(&src[line_start..i]);
        // Node properties between the key and the indicator: `data: !!binary |`, `- &a >-`.
        while let Some(word) = before.iter().rposition(|&b| b == b' ' || b == b'\t').map(|k| k + 1)
        {
            if !self.properties.contains(&before[word]) {
                break;
            }
            before = super::trim_end(&before[..word]);
        }
        if !matches!(before.last(), Some(b':' | b'-' | b'?')) {
            return None;
        }
        let mut end = i + 1;
        end += src[end..].iter().take(2).take_while(|b| b"+-0123456789".contains(b)).count();
        let rest = &src[end..];
        let blank = rest.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
        let ends_line = match rest.get(blank) {
            None | Some(b'\n' | b'\r') => true,
            Some(b'#') => blank > 0,
            _ => false,
        };
        let indent = src[line_start..].iter().take_while(|&&b| b == b' ').count();
        ends_line.then_some((Body::Indented(indent), end))
    }

    /// True if the line `src[line]` ends the heredoc body: for a word, the word alone after
    /// any indentation, or followed only by `;`, `,` or `)` (PHP); for a block scalar, a line
    /// with text that is not indented deeper than the opener's.
    fn closes_heredoc(&self, src: &[u8], line: Range<usize>, body: Body) -> bool {
        let text = &src[line];
        let indent = text.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
        let text = &text[indent..];
        match body {
            Body::Word { start, len } => {
                let Some(rest) = text.strip_prefix(&src[start..start + len]) else {
                    return false;
                };
                let rest = super::trim_end(rest);
                rest.is_empty() || matches!(rest[0], b';' | b',' | b')')
            }
            Body::Indented(opener) => !super::trim_end(text).is_empty() && indent <= opener,
        }
    }

    /// One step from `i` in `state`. Plain code is passed over no further than `until` (a
    /// token that starts before it may run past it).
    pub(super) fn step(&self, src: &[u8], i: usize, until: usize, state: LexState) -> Step {
        match state {
            LexState::Code | LexState::CodeThenHeredoc(_) => self.step_code(src, i, until, state),
            LexState::Block(t) => {
                let close = self.tokens[t].1.as_bytes();
                match memmem::find(&src[i..], close) {
                    Some(j) => Step::Next(i + j + close.len(), LexState::Code),
                    None => Step::Next(src.len(), state),
                }
            }
            LexState::String(t, pending) => {
                let (_, close, kind) = self.tokens[t];
                let close = close.as_bytes();
                let after = match pending {
                    Some(body) => LexState::CodeThenHeredoc(body),
                    None => LexState::Code,
                };
                if kind == TokenKind::RawString {
                    // No escapes; a doubled closer (`''`, `""`) is part of the string.
                    return match memmem::find(&src[i..], close) {
                        Some(j) if src[i + j + close.len()..].starts_with(close) => {
                            Step::Next(i + j + 2 * close.len(), state)
                        }
                        Some(j) => Step::Next(i + j + close.len(), after),
                        None => Step::Next(src.len(), state),
                    };
                }
                if !matches!(src[i], b'\\' | b'\n') && src[i] != close[0] {
                    let next = memchr::memchr3(b'\\', b'\n', close[0], &src[i..]);
                    return Step::Next(next.map_or(src.len(), |j| i + j), state);
                }
                if src[i] == b'\\' {
                    Step::Next(i + 2, state)
                } else if src[i..].starts_with(close) {
                    Step::Next(i + close.len(), after)
                } else if src[i] == b'\n' && kind == TokenKind::String {
                    // A one-line string ends with its line; a heredoc opened before it starts.
                    let next = match pending {
                        Some(body) => LexState::Heredoc(body),
                        None => LexState::Code,
                    };
                    Step::Next(i + 1, next)
                } else {
                    Step::Next(i + 1, state)
                }
            }
            LexState::Heredoc(body) => {
                let end = memchr::memchr(b'\n', &src[i..]).map_or(src.len(), |j| i + j);
                match (self.closes_heredoc(src, i..end, body), body) {
                    // The line after a block scalar is code: read it as such.
                    (true, Body::Indented(_)) => Step::Next(i, LexState::Code),
                    // The next heredoc opened on the same line (`f(<<~A, <<~B)`) starts now.
                    (true, Body::Word { start, len }) => {
                        let next = match self.next_heredoc(src, start + len) {
                            Some(body) => LexState::Heredoc(body),
                            None => LexState::Code,
                        };
                        Step::Next((end + 1).min(src.len()), next)
                    }
                    (false, _) => Step::Next((end + 1).min(src.len()), state),
                }
            }
        }
    }

    fn step_code(&self, src: &[u8], i: usize, until: usize, state: LexState) -> Step {
        if !self.starts[usize::from(src[i])] {
            let end = until.clamp(i + 1, src.len());
            let next = src[i..end].iter().position(|&b| self.starts[usize::from(b)]);
            return Step::Next(next.map_or(end, |j| i + j), state);
        }
        if src[i] == b'\n' {
            let next = match state {
                LexState::CodeThenHeredoc(word) => LexState::Heredoc(word),
                other => other,
            };
            return Step::Next(i + 1, next);
        }
        let line_start = i == 0 || src[i - 1] == b'\n';
        if line_start && self.data_starts_at(src, i) {
            return Step::Next(src.len(), state); // the rest is data
        }
        if let Some(prefix) = self.verbatim {
            if line_start && src[i..].starts_with(prefix.as_bytes()) {
                let end = memchr::memchr(b'\n', &src[i..]).map_or(src.len(), |j| i + j);
                return Step::Next(end, state);
            }
        }
        if line_start {
            if let Some(end) = self.line_block_at(src, i) {
                return Step::Next(end, state);
            }
        }
        if self.code_escapes && src[i] == b'\\' {
            // `don\'t`, `\"`: the quoted byte opens nothing (a line ending is still one).
            let skip = if src.get(i + 1) == Some(&b'\n') { 1 } else { 2 };
            return Step::Next((i + skip).min(src.len()), state);
        }
        if self.sigils.contains(&src[i])
            && src.get(i + 1).is_some_and(|&b| b.is_ascii_punctuation() && b != b'{')
        {
            return Step::Next(i + 2, state); // `$"`, `$'`, `$#`, `@"`: a variable
        }
        let pending = match state {
            LexState::CodeThenHeredoc(body) => Some(body),
            _ => None,
        };
        if let Some(t) = self.token_at(src, i) {
            let (open, close, kind) = self.tokens[t];
            return match kind {
                TokenKind::Line if glued_hash(src, i, open) => Step::Next(i + 1, state),
                TokenKind::Line => {
                    let end = memchr::memchr2(b'\n', b'\r', &src[i..]).map_or(src.len(), |j| i + j);
                    Step::Comment(i..end, state)
                }
                TokenKind::Block => {
                    let body = i + open.len();
                    match memmem::find(&src[body..], close.as_bytes()) {
                        Some(j) => Step::Comment(i..body + j + close.len(), state),
                        None => Step::Next(src.len(), LexState::Block(t)),
                    }
                }
                TokenKind::MultilineString if !self.holes.is_empty() => {
                    // Holes hold code with strings of their own (`${`…`}` inside a template):
                    // the whole literal is read at once. One that never closes that way (a
                    // hole cut off mid-edit) is read as before, to the next closer.
                    match self.string_end(src, i, t, 0) {
                        Some(end) => Step::Next(end, state),
                        None => Step::Next(i + open.len(), LexState::String(t, pending)),
                    }
                }
                _ => Step::Next(i + open.len(), LexState::String(t, pending)),
            };
        }
        if let Some((word, end)) = self.heredoc_at(src, i).or_else(|| self.block_scalar_at(src, i))
        {
            // The first heredoc of a line starts on the next; the others after it, in turn.
            let next = match state {
                LexState::Code => LexState::CodeThenHeredoc(word),
                other => other,
            };
            return Step::Next(end, next);
        }
        if let Some(end) = self.quote_at(src, i) {
            return Step::Next(end, state);
        }
        if let Some(end) = self.regex_at(src, i) {
            return Step::Next(end, state);
        }
        Step::Next(i + 1, state)
    }

    /// The end of the line-start block comment (POD: `=head3` … `=cut`) that opens at `i`: after
    /// the line that starts with its closer, or the end of the file.
    fn line_block_at(&self, src: &[u8], i: usize) -> Option<usize> {
        let &(_, close) = self.line_blocks.iter().find(|(open, _)| {
            src[i..].starts_with(open.as_bytes())
                && src.get(i + open.len()).is_some_and(u8::is_ascii_alphabetic)
        })?;
        let mut line = i;
        loop {
            let Some(nl) = memchr::memchr(b'\n', &src[line..]) else { return Some(src.len()) };
            line += nl + 1;
            if src[line..].starts_with(close.as_bytes()) {
                let end = memchr::memchr(b'\n', &src[line..]).map_or(src.len(), |j| line + j);
                return Some(end);
            }
        }
    }

    /// The end of the multi-line string `t` that opens at `i`, its holes (`${…}`) read as code
    /// in which strings open again; `None` if it does not close. Nesting deeper than a few
    /// levels is not code anyone writes: it counts as unclosed.
    fn string_end(&self, src: &[u8], i: usize, t: usize, depth: usize) -> Option<usize> {
        let (open, close, kind) = self.tokens[t];
        let close = close.as_bytes();
        let mut j = i + open.len();
        while j < src.len() {
            let b = src[j];
            if b == b'\\' && kind != TokenKind::RawString {
                j += 2;
            } else if src[j..].starts_with(close) {
                return Some(j + close.len());
            } else if b == b'\n' && kind == TokenKind::String {
                return Some(j); // a one-line string ends with its line
            } else if let Some(&(hole, closer)) = (kind == TokenKind::MultilineString)
                .then(|| self.holes.iter().find(|(h, _)| src[j..].starts_with(h.as_bytes())))
                .flatten()
            {
                j = self.hole_end(src, j + hole.len(), closer, depth + 1)?;
            } else {
                j += 1;
            }
        }
        None
    }

    /// The end of a string hole whose code starts at `j`: after its closing bracket (brackets
    /// of its kind nest), strings and comments in it read as such.
    fn hole_end(&self, src: &[u8], mut j: usize, closer: u8, depth: usize) -> Option<usize> {
        if depth > 8 {
            return None;
        }
        let opener = match closer {
            b'}' => b'{',
            b')' => b'(',
            b']' => b'[',
            other => other,
        };
        let mut nest = 0usize;
        while j < src.len() {
            let b = src[j];
            if b == closer {
                if nest == 0 {
                    return Some(j + 1);
                }
                nest -= 1;
                j += 1;
                continue;
            }
            if b == opener {
                nest += 1;
                j += 1;
                continue;
            }
            let Some(t) = self.token_at(src, j) else {
                j += 1;
                continue;
            };
            let (open, close, kind) = self.tokens[t];
            j = match kind {
                TokenKind::Line => memchr::memchr(b'\n', &src[j..]).map_or(src.len(), |k| j + k),
                TokenKind::Block => {
                    let body = j + open.len();
                    body + memmem::find(&src[body..], close.as_bytes())? + close.len()
                }
                _ => self.string_end(src, j, t, depth)?,
            };
        }
        None
    }

    /// The heredoc opened on the line of `from` after it, if any: `<<~B` in `f(<<~A, <<~B)`
    /// once `A`'s body has closed.
    fn next_heredoc(&self, src: &[u8], from: usize) -> Option<Body> {
        // Past the word and its closing quote (`<<'A'`).
        let from = from + usize::from(matches!(src.get(from), Some(b'\'' | b'"' | b'`')));
        let end = memchr::memchr(b'\n', &src[from..]).map_or(src.len(), |j| from + j);
        let (mut i, mut state) = (from, LexState::Code);
        while i < end {
            match self.step(src, i, end, state) {
                Step::Next(
                    _,
                    LexState::CodeThenHeredoc(body) | LexState::String(_, Some(body)),
                ) => return Some(body),
                Step::Next(j, s) => (i, state) = (j, s),
                Step::Comment(..) => return None,
            }
        }
        None
    }

    /// Describes the comment `range` that the reader met in code.
    pub(super) fn comment(&self, lang: &Language, src: &[u8], range: Range<usize>) -> Comment {
        let start = range.start;
        let line_start = crate::lines::line_start(src, start);
        let before = &src[line_start..start];
        let before = before.strip_prefix(super::BOM).unwrap_or(before);
        let starts_line = before.iter().all(|&b| b == b' ' || b == b'\t');
        let token = src[start];
        let trails_code = !starts_line
            && !lang.comments_start_line
            && !token.is_ascii_alphabetic()
            && match before.last() {
                Some(b' ' | b'\t') => true,
                Some(b';' | b',' | b')' | b']' | b'}' | b'(' | b'{') => token != b'#',
                _ => false,
            };
        Comment { range, starts_line, trails_code }
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
            match self.step(text, i, text.len(), state) {
                Step::Next(j, s) => (i, state) = (j, s),
                Step::Comment(comment, s) => {
                    if comment.contains(&hit) {
                        return (!src[comment.clone()].contains(&b'\n')).then_some(comment);
                    }
                    (i, state) = (comment.end, s);
                }
            }
        }
        None
    }
}

/// The closer of an opening bracket.
fn closing_bracket(open: u8) -> Option<u8> {
    match open {
        b'(' => Some(b')'),
        b'[' => Some(b']'),
        b'{' => Some(b'}'),
        b'<' => Some(b'>'),
        _ => None,
    }
}

/// The end of a literal delimited by `src[open]`: after the matching closer (brackets nest),
/// or after the next unescaped repeat of the delimiter. `None` if it never closes.
fn delimited(src: &[u8], open: usize) -> Option<usize> {
    let delimiter = *src.get(open)?;
    let close = closing_bracket(delimiter).unwrap_or(delimiter);
    let mut depth = 0usize;
    let mut i = open + 1;
    while i < src.len() {
        let b = src[i];
        if b == b'\\' {
            i += 2;
            continue;
        }
        if b == close {
            if depth == 0 {
                return Some(i + 1);
            }
            depth -= 1;
        } else if b == delimiter && close != delimiter {
            depth += 1;
        }
        i += 1;
    }
    None
}

/// A `#` glued to what precedes it is part of that token, not a comment: Perl's `$#list`,
/// shell's `foo#bar` and `${x#y}`.
fn glued_hash(src: &[u8], i: usize, token: &str) -> bool {
    token.starts_with('#')
        && i > 0
        && (src[i - 1].is_ascii_alphanumeric() || matches!(src[i - 1], b'_' | b'$' | b'{'))
}

/// True if a value, not an operator, may come at `i`: at the start of a line, after an
/// operator or opening punctuation, or after a keyword that takes an expression.
fn value_expected(src: &[u8], i: usize) -> bool {
    let before = &src[..i];
    let end = before.iter().rposition(|&b| b != b' ' && b != b'\t');
    let Some(end) = end else { return true };
    let prev = before[end];
    if matches!(prev, b'\n' | b'(' | b',' | b'=' | b'!' | b'&' | b'|' | b'?' | b':' | b';' | b'{')
        || matches!(prev, b'[' | b'~' | b'+' | b'-' | b'*' | b'%' | b'^' | b'>')
    {
        return true;
    }
    if !prev.is_ascii_alphabetic() {
        return false;
    }
    let start = before[..=end]
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .map_or(0, |k| k + 1);
    const KEYWORDS: &[&[u8]] = &[
        b"if", b"unless", b"and", b"or", b"not", b"return", b"split", b"grep", b"map", b"when",
        b"while", b"until", b"x", b"eq", b"ne", b"lt", b"gt", b"le", b"ge", b"cmp", b"typeof",
        b"in", b"of", b"case", b"do", b"else", b"yield", b"await", b"throw",
    ];
    let word = &before[start..=end];
    KEYWORDS.contains(&word)
        && (start == 0 || !matches!(before[start - 1], b'$' | b'@' | b'%' | b'.'))
}

/// Words that take a value after them, glued to a heredoc opener or not (`print<<EOF`,
/// `return<<~A`): what follows them is no operator's right-hand side.
const TAKES_VALUE: &[&[u8]] = &[
    b"return", b"print", b"printf", b"say", b"puts", b"die", b"warn", b"raise", b"if", b"unless",
    b"elsif", b"while", b"until", b"when", b"and", b"or", b"not", b"in", b"do", b"then", b"else",
    b"yield", b"case",
];

/// True if a value ends right before the `<<` at `i`, which is then an operator (Ruby's
/// append, Perl's shift) and opens no heredoc: a closing bracket or quote, a number, a
/// variable (`$x`, `@x`, `@@x`, `%h`), a word glued to it that takes no value (`arr<<x`, not
/// `print<<EOF`), or `class` (`class <<self`). A word before it with a space between is a
/// method or function taking the heredoc (`puts <<~EOS`, `print << "EOF"`), and a variable or
/// block after `print`, a space and the opener glued to its word, a file handle (`print $fh
/// <<EOF`, `print {$out} <<"EOF"`; Perl reads `print $x << "3"` as a shift).
fn after_value(src: &[u8], i: usize, glued_word: bool) -> bool {
    let line = &src[super::line_start(src, i)..i];
    let Some(end) = line.iter().rposition(|&b| b != b' ' && b != b'\t') else { return false };
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let value_start = match line[end] {
        b')' | b']' | b'"' | b'\'' | b'`' => return true,
        b'}' => match line[..end].iter().rposition(|&b| b == b'{') {
            Some(open) => open,
            None => return true,
        },
        b if word(&b) => {
            let start = line[..=end].iter().rposition(|b| !word(b)).map_or(0, |k| k + 1);
            let sigils = line[..start].iter().rev().take_while(|b| b"$@%".contains(b)).count();
            if sigils == 0 {
                let name = &line[start..=end];
                let glued = end + 1 == line.len();
                return name[0].is_ascii_digit()
                    || name == b"class"
                    || (glued && !TAKES_VALUE.contains(&name));
            }
            start - sigils
        }
        _ => return false,
    };
    if !glued_word || end + 1 == line.len() {
        return true;
    }
    let before = super::trim_end(&line[..value_start]);
    let handle = [&b"print"[..], b"printf", b"say"].iter().any(|p| {
        before.ends_with(p)
            && (before.len() == p.len() || !word(&before[before.len() - p.len() - 1]))
    });
    !handle
}

/// True if the line at `i` is `line` alone (trailing whitespace allowed): `__END__`.
fn ends_code(src: &[u8], i: usize, line: &str) -> bool {
    src[i..].strip_prefix(line.as_bytes()).is_some_and(|rest| {
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        rest[..end].iter().all(u8::is_ascii_whitespace)
    })
}
