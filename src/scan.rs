//! Finds the trigger markers in one file's bytes: a memmem prefilter, then the syntax tree (or
//! the fallback table) decides whether each hit really starts a comment, and a comment paragraph
//! or a multi-line block comment becomes one ask. Where the parse has errors, the tokens decide
//! rather than the parser's recovery: the tree's where it parsed soundly, the fallback lexer's
//! from the first byte it did not (`recover`).
//!
//! Pure: bytes and a [`Language`] in, [`Marker`]s out, no I/O. Parsers are kept per thread.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;

use memchr::memmem;
use tree_sitter::{Node, Tree};

use crate::id::MarkerId;
use crate::languages::{Language, LanguageTable};
use crate::lines::{line_around, line_start};

mod embed;
mod lexer;
mod near;
mod nodes;
mod recover;
mod steps;
mod symbol;
mod trees;
mod view;

use embed::{embedded_region, lang_hides_comment, Embedded};
use lexer::{FallbackLexer, LexState, Step};
use near::{Miss, Why};
pub use near::{NearMiss, Why as NearMissWhy};
use nodes::{
    comment_range, enclosing_comment, lexed_ancestor, near_error, parent_is_string, parse,
};
use recover::Recovery;
use steps::Steps;
pub use symbol::{sources as symbol_queries, warm_for as warm_symbol_query_for, Symbol};
use trees::Reuse;
pub use trees::{ParseCounts, TreeCache};
pub use view::{escaped, MarkerView};

/// The word that starts an ask unless `--trigger` says otherwise.
pub const DEFAULT_TRIGGER: &str = "@claude";

const BOM: &[u8] = b"\xEF\xBB\xBF";

const TAG_LEN: usize = MarkerId::TAG_LEN;

/// One `@claude` marker found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// 1-based line of the trigger.
    pub line: usize,
    /// 1-based last line of the ask: `line` for a one-line comment, the last line of a comment
    /// paragraph or a multi-line block comment otherwise.
    pub end_line: usize,
    /// 1-based byte column of the trigger on its line (a BOM does not count).
    pub column: usize,
    /// Byte range of the whole comment (for a paragraph: all its comments), delimiters
    /// included, the last line ending excluded.
    pub comment: Range<usize>,
    /// Byte offset right after the trigger: where a stamp inserts its tag.
    pub insert_at: usize,
    /// The ask: the trigger and the rest of the comment body, without the tag, the closing
    /// delimiter and trailing whitespace; the lines of a multi-line ask joined with `\n`, their
    /// comment tokens and decoration (`*` columns) removed.
    pub text: String,
    /// The marker's id when it is already stamped.
    pub tag: Option<MarkerId>,
    /// Name of the file's language in the table.
    pub language: String,
    /// What decided that this hit is inside a comment.
    pub decided_by: DecidedBy,
    /// The definition the ask is about, where the syntax tree tells (see [`Symbol`]). Boxed:
    /// markers travel by value through the live pipeline's queues, and many have none.
    pub symbol: Option<Box<Symbol>>,
}

impl Marker {
    /// True once the marker carries a tag: it was announced and never fires again.
    pub fn is_tagged(&self) -> bool {
        self.tag.is_some()
    }
}

/// A marker before its position is known: byte offsets only, turned into a [`Marker`] by
/// [`Positions::place`] once all markers of the file are found.
#[derive(Debug, Clone)]
struct Found {
    /// Byte offset of the trigger.
    hit: usize,
    comment: Range<usize>,
    insert_at: usize,
    text: String,
    tag: Option<MarkerId>,
    decided_by: DecidedBy,
    symbol: Option<Box<Symbol>>,
}

/// Whether the syntax tree or the fallback table decided that a marker is in a comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecidedBy {
    /// The language's syntax tree says the hit is in a comment.
    Syntax,
    /// The fallback table's line reading decided, for this reason.
    Fallback(FallbackReason),
}

impl DecidedBy {
    /// `"syntax"` or `"fallback"`, as in `scan --json`.
    pub fn mode(&self) -> &'static str {
        match self {
            DecidedBy::Syntax => "syntax",
            DecidedBy::Fallback(_) => "fallback",
        }
    }

    /// Why the fallback decided, `None` for the syntax tree.
    pub fn reason(&self) -> Option<&FallbackReason> {
        match self {
            DecidedBy::Syntax => None,
            DecidedBy::Fallback(reason) => Some(reason),
        }
    }
}

/// Why the fallback table decided instead of a syntax tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FallbackReason {
    /// The language has no grammar in the table.
    NoGrammar,
    /// The table names a grammar whose cargo feature is off.
    GrammarNotCompiled(String),
    /// The parser gave up (time budget) on this file.
    ParseFailed,
    /// The hit lies in or next to a syntax error; the fallback confirmed it.
    SyntaxError,
    /// The hit lies where the parser read no comment because of a syntax error (inside an
    /// error, or past where the parser stopped); the fallback found one.
    InsideSyntaxError,
}

impl FallbackReason {
    /// The reason a language is scanned with the fallback, or `None` if its grammar is used.
    pub fn for_language(lang: &Language) -> Option<FallbackReason> {
        match (&lang.grammar, &lang.ts_language) {
            (_, Some(_)) => None,
            (None, None) => Some(FallbackReason::NoGrammar),
            (Some(g), None) => Some(FallbackReason::GrammarNotCompiled(g.clone())),
        }
    }
}

impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FallbackReason::NoGrammar => f.write_str("no grammar for this language"),
            FallbackReason::GrammarNotCompiled(g) => write!(f, "grammar `{g}` not compiled in"),
            FallbackReason::ParseFailed => f.write_str("the parser gave up on this file"),
            FallbackReason::SyntaxError => f.write_str("syntax error next to the marker"),
            FallbackReason::InsideSyntaxError => {
                f.write_str("inside a syntax error: the comment and string tokens decided")
            }
        }
    }
}

/// An unusable trigger word.
#[derive(Debug, thiserror::Error)]
#[error("invalid trigger {0:?}: it must be non-empty and hold no whitespace or `[`")]
pub struct BadTrigger(pub String);

/// Scans files for one trigger word.
pub struct Scanner<'t> {
    table: &'t LanguageTable,
    trigger: String,
    finder: memmem::Finder<'static>,
}

impl<'t> Scanner<'t> {
    /// A scanner for `trigger` over the languages of `table`.
    pub fn new(table: &'t LanguageTable, trigger: &str) -> Result<Scanner<'t>, BadTrigger> {
        if trigger.is_empty() || trigger.contains(|c: char| c.is_whitespace() || c == '[') {
            return Err(BadTrigger(trigger.to_string()));
        }
        Ok(Scanner {
            table,
            trigger: trigger.to_string(),
            finder: memmem::Finder::new(trigger.as_bytes()).into_owned(),
        })
    }

    /// The word that starts an ask.
    pub fn trigger(&self) -> &str {
        &self.trigger
    }

    /// The language table this scanner reads files with.
    pub fn table(&self) -> &'t LanguageTable {
        self.table
    }

    /// True if `src` holds the trigger anywhere: the one memmem pass a file without markers
    /// costs.
    pub fn may_hold_marker(&self, src: &[u8]) -> bool {
        self.finder.find(src).is_some()
    }

    /// The searcher for the trigger's bytes.
    pub fn finder(&self) -> &memmem::Finder<'static> {
        &self.finder
    }

    /// Every marker in `src`, a file in language `lang`, in file order.
    pub fn scan(&self, lang: &Language, src: &[u8]) -> Vec<Marker> {
        self.scan_with(lang, src, None)
    }

    /// [`Scanner::scan`] for a file that changes again and again (the live path): its last
    /// syntax tree, kept in `trees` under `key`, is edited and re-parsed instead of parsing
    /// the file from scratch. The markers are always those [`Scanner::scan`] finds.
    pub fn scan_incremental(
        &self,
        lang: &Language,
        src: &[u8],
        trees: &mut TreeCache,
        key: &Path,
    ) -> Vec<Marker> {
        self.scan_with(lang, src, Some(Reuse { trees, key }))
    }

    fn scan_with(&self, lang: &Language, src: &[u8], reuse: Option<Reuse>) -> Vec<Marker> {
        let hits: Vec<usize> = self.finder.find_iter(src).collect();
        if hits.is_empty() {
            return Vec::new();
        }
        // Decide on the bytes as they were before any stamp: a tag changes a comment's length,
        // and tree-sitter's error recovery can depend on lengths, so without this a stamp could
        // change what a file with syntax errors is found to hold.
        let tags: Vec<usize> = hits
            .iter()
            .map(|&h| h + self.trigger.len())
            .filter(|&at| MarkerId::from_tag(&src[at..]).is_some())
            .collect();
        let found = if tags.is_empty() {
            self.scan_untagged(lang, src, &hits, reuse)
        } else {
            self.scan_without_tags(lang, src, &tags, reuse)
        };
        Positions::new(src).place(found, &lang.name)
    }

    /// Scans `src` as if the tags at `tags` were not there, then maps the offsets back.
    /// The bytes parsed are the untagged ones, so the syntax tree kept for a file is that of its
    /// untagged bytes: our own stamp, which only adds tags, leaves it as it is.
    fn scan_without_tags(
        &self,
        lang: &Language,
        src: &[u8],
        tags: &[usize],
        reuse: Option<Reuse>,
    ) -> Vec<Found> {
        let mut untagged = Vec::with_capacity(src.len());
        let mut cursor = 0;
        for &at in tags {
            untagged.extend_from_slice(&src[cursor..at]);
            cursor = at + TAG_LEN;
        }
        untagged.extend_from_slice(&src[cursor..]);
        // Where each tag was, in the untagged bytes.
        let removed: Vec<usize> =
            tags.iter().enumerate().map(|(k, &at)| at - k * TAG_LEN).collect();
        let back = |offset: usize| offset + removed.partition_point(|&r| r < offset) * TAG_LEN;
        let hits: Vec<usize> = self.finder.find_iter(&untagged).collect();
        let mut found = self.scan_untagged(lang, &untagged, &hits, reuse);
        for f in &mut found {
            f.comment = back(f.comment.start)..back(f.comment.end);
            f.hit = back(f.hit);
            f.insert_at = back(f.insert_at);
            f.tag = MarkerId::from_tag(&src[f.insert_at..]);
        }
        found
    }

    fn scan_untagged(
        &self,
        lang: &Language,
        src: &[u8],
        hits: &[usize],
        reuse: Option<Reuse>,
    ) -> Vec<Found> {
        match &lang.ts_language {
            Some(ts) => match self.scan_syntax(lang, ts, src, hits, reuse) {
                Some(found) => found,
                None => self.scan_fallback(lang, src, FallbackReason::ParseFailed),
            },
            None => {
                let reason =
                    FallbackReason::for_language(lang).unwrap_or(FallbackReason::NoGrammar);
                self.scan_fallback(lang, src, reason)
            }
        }
    }

    // ---- the syntax path ---------------------------------------------------------------

    /// Each hit in turn: locate the tree that owns it, find the comment around it, read the
    /// ask, decide. `None` if the file could not be parsed.
    fn scan_syntax(
        &self,
        lang: &Language,
        ts: &tree_sitter::Language,
        src: &[u8],
        hits: &[usize],
        reuse: Option<Reuse>,
    ) -> Option<Vec<Found>> {
        let grammar = lang.grammar.as_deref().unwrap_or(&lang.name);
        let tree = match reuse {
            Some(Reuse { trees, key }) => trees.parse(key, grammar, ts, src)?,
            None => parse(grammar, ts, src, None, None)?,
        };
        // Which tree owns each hit: the file's, or an embedded region's (parsed once each).
        let steps = Steps::new(tree.root_node());
        let mut injected = HashMap::new();
        let owners: Vec<Option<Owner>> =
            hits.iter().map(|&hit| self.owner(lang, &steps, &mut injected, src, hit)).collect();
        let regions: HashMap<usize, (&Language, Steps)> = injected
            .iter()
            .filter_map(|(&start, r)| {
                r.as_ref().map(|(row, t)| (start, (*row, Steps::new(t.root_node()))))
            })
            .collect();
        // Where the lexer-level reading of each broken tree has got to.
        let mut recoveries: HashMap<Owner, Recovery> = HashMap::new();
        let mut found: Vec<Found> = Vec::new();
        for (&hit, owner) in hits.iter().zip(owners) {
            if found.last().is_some_and(|f| f.comment.contains(&hit)) {
                continue; // a later line of a paragraph or block already read
            }
            let Some(owner) = owner else { continue };
            let end = hit + self.trigger.len();
            let at = match owner {
                // Past the end of a tree that stopped early (YAML after an indentation error),
                // the root itself stands for the hit.
                Owner::File => {
                    let node = steps.descendant(hit, end).unwrap_or(steps.root());
                    Located { row: lang, root: steps.root(), node, steps: &steps }
                }
                Owner::Region(start) => {
                    let Some((row, steps)) = regions.get(&start) else { continue };
                    let Some(node) = steps.descendant(hit, end) else { continue };
                    Located { row, root: steps.root(), node, steps }
                }
            };
            let marker = if at.root.has_error() || recover::in_unclosed_heredoc(at.steps, at.node) {
                let recovery =
                    recoveries.entry(owner).or_insert_with(|| Recovery::new(at.row, at.root));
                self.marker_near_error(lang, &at, src, hit, recovery)
            } else {
                self.marker_at(lang, &at, src, hit)
            };
            found.extend(marker.map(|f| Found { symbol: symbol_at(&at, src, &f), ..f }));
        }
        Some(found)
    }

    /// The tree that owns `hit`: the file's own, or an embedded language's (`<script>`,
    /// Markdown inline), parsed into `injected` once per region. `None` for an opaque region.
    fn owner(
        &self,
        lang: &Language,
        steps: &Steps,
        injected: &mut HashMap<usize, Option<(&'t Language, Tree)>>,
        src: &[u8],
        hit: usize,
    ) -> Option<Owner> {
        let node = steps.descendant(hit, hit + self.trigger.len()).unwrap_or(steps.root());
        match embedded_region(self.table, lang, steps, node, src) {
            Embedded::No => Some(Owner::File),
            Embedded::Opaque => None,
            Embedded::Yes(row, region) => {
                let start = region.start;
                injected.entry(start).or_insert_with(|| {
                    let ts = row.ts_language.as_ref()?;
                    let grammar = row.grammar.as_deref()?;
                    parse(grammar, ts, src, Some(region), None).map(|t| (row, t))
                });
                Some(Owner::Region(start))
            }
        }
    }

    /// The marker whose trigger is at `hit` in a tree without errors: the comment around it,
    /// the ask read from it (a paragraph of line comments is one ask).
    fn marker_at(&self, lang: &Language, at: &Located, src: &[u8], hit: usize) -> Option<Found> {
        let TreeSays::Comment(_, range) = comment_around(lang, at, src, hit) else {
            return None;
        };
        if at.row.comments_start_line && !starts_its_line(src, range.start) {
            return None;
        }
        let mut comment_below = |pos: usize, style: usize| {
            let comment = at
                .steps
                .descendant(pos, pos + 1)
                .and_then(|n| enclosing_comment(at.row, at.steps, n))
                .filter(|c| c.start_byte() <= pos && c.end_byte() >= pos + style)?;
            Some(comment.byte_range())
        };
        let (range, body) = self.ask(at.row, src, range, hit, &mut comment_below)?;
        Some(body.into_found(range, DecidedBy::Syntax))
    }

    /// The marker whose trigger is at `hit` in a tree with errors. The tokens decide: the
    /// tree's where it parsed soundly, the lexer's from the first byte it did not (see
    /// [`Recovery`]), so `f(a,  // @claude …` is a comment however the parser recovered, and
    /// `"// @claude …"` after an unclosed bracket is still a string. The tree's verdict stands
    /// (`syntax`) only where both agree and no error is near.
    fn marker_near_error(
        &self,
        lang: &Language,
        at: &Located,
        src: &[u8],
        hit: usize,
        recovery: &mut Recovery<'_, '_>,
    ) -> Option<Found> {
        let tree = comment_around(lang, at, src, hit);
        if matches!(tree, TreeSays::Hidden) {
            return None;
        }
        let lexed = recovery.comment_at(src, hit)?;
        let (range, node) = match tree {
            TreeSays::Comment(node, range) if range.start == lexed.range.start => {
                (range, Some(node))
            }
            // No comment node here: the lexer alone decides. A trailing comment must sit
            // where nothing but a comment can start (after whitespace), and a block comment
            // over several lines must start its line.
            _ => {
                let one_line = !src[lexed.range.clone()].contains(&b'\n');
                let placed = if one_line {
                    lexed.starts_line || lexed.trails_code
                } else {
                    lexed.starts_line
                };
                if !placed {
                    return None;
                }
                (recover::trimmed(src, lexed.range), None)
            }
        };
        if at.row.comments_start_line && !starts_its_line(src, range.start) {
            return None;
        }
        // Between JSX tags a `//` is text, however the broken parse or the tokens read it.
        if at.row.jsx_text && recover::in_jsx_text(src, at.root.start_byte(), range.start) {
            return None;
        }
        let mut comment_below = |pos: usize, style: usize| {
            let below = recovery.comment_at(src, pos + style)?;
            (below.range.start == pos).then(|| recover::trimmed(src, below.range))
        };
        let (range, body) = self.ask(at.row, src, range, hit, &mut comment_below)?;
        let decided_by = match node {
            Some(node) if !near_error(at.steps, node, line_around(src, range.clone())) => {
                DecidedBy::Syntax
            }
            Some(_) => DecidedBy::Fallback(FallbackReason::SyntaxError),
            None => DecidedBy::Fallback(FallbackReason::InsideSyntaxError),
        };
        Some(body.into_found(range, decided_by))
    }

    /// The ask of the comment `range` whose trigger is at `hit`: its body, and for a line
    /// comment the paragraph of line comments right below it (`comment_below(pos, len)` says
    /// whether a comment starts at `pos` and spans at least `len` bytes, and its range).
    fn ask(
        &self,
        row: &Language,
        src: &[u8],
        mut range: Range<usize>,
        hit: usize,
        comment_below: &mut dyn FnMut(usize, usize) -> Option<Range<usize>>,
    ) -> Option<(Range<usize>, Body)> {
        let mut body = self.read_comment(row, src, range.clone(), hit)?;
        if body.line_comment {
            // Line comments of the same style right below: one paragraph, one ask.
            let (end, lines) = self.paragraph(row, src, &range, hit, comment_below);
            range.end = end;
            for line in lines {
                body.text.push('\n');
                body.text.push_str(&line);
            }
        }
        Some((range, body))
    }

    // ---- the fallback path -------------------------------------------------------------

    /// Reading with the table's tokens: a marker must be a comment on one line, outside any
    /// string, heredoc or block comment, that starts its line or trails code where nothing
    /// but a comment can start (after whitespace: `x = 1  # @claude …`).
    fn scan_fallback(&self, lang: &Language, src: &[u8], reason: FallbackReason) -> Vec<Found> {
        let lexer = FallbackLexer::new(lang);
        let mut markers = Vec::new();
        let mut state = LexState::Code;
        let mut i = if src.starts_with(BOM) { BOM.len() } else { 0 };
        while i < src.len() {
            match lexer.step(src, i, src.len(), state) {
                Step::Next(next, s) => (i, state) = (next, s),
                Step::Comment(range, s) => {
                    (i, state) = (range.end, s);
                    if src[range.clone()].contains(&b'\n') {
                        continue; // the table's languages keep one-line asks
                    }
                    let comment = lexer.comment(lang, src, range);
                    if !comment.starts_line && !comment.trails_code {
                        continue;
                    }
                    let range = comment.range;
                    let Some(hit) = self.finder.find(&src[range.clone()]) else { continue };
                    let hit = range.start + hit;
                    if let Some(body) = self.read_comment(lang, src, range.clone(), hit) {
                        markers.push(body.into_found(range, DecidedBy::Fallback(reason.clone())));
                    }
                }
            }
        }
        markers
    }

    // ---- reading one comment -----------------------------------------------------------

    /// Reads the comment `range` whose trigger is at `hit`: the trigger must start the body,
    /// after the opening token, doc markers and whitespace. What makes a hit no ask is noted
    /// for `scan --verbose` (`near`).
    fn read_comment(
        &self,
        lang: &Language,
        src: &[u8],
        range: Range<usize>,
        hit: usize,
    ) -> Option<Body> {
        let prefix = &src[range.start..hit];
        let Some(close) = opening_token(lang, prefix) else {
            // `// see @claude …` almost asks; `me@claude.ai` is a word, no near miss.
            if prefix.last().is_some_and(u8::is_ascii_whitespace) {
                near::note(hit, Miss { why: Why::NotAtStart, end: hit + self.trigger.len() });
            }
            return None;
        };
        let mut body_end = range.end;
        if let Some(close) = close {
            let close = close.as_bytes();
            if src[..body_end].ends_with(close) && body_end - close.len() >= hit {
                body_end -= close.len();
            }
        }
        let after = hit + self.trigger.len();
        let (tag, ask) = match self.ask_after(src, after, body_end) {
            Ok(found) => found,
            Err(miss) => {
                if let Some(miss) = miss {
                    near::note(hit, miss);
                }
                return None;
            }
        };
        let mut text = self.trigger.clone();
        let ask_text = &src[ask];
        if ask_text.contains(&b'\n') || ask_text.contains(&b'\r') {
            text.push_str(&block_text(ask_text));
        } else {
            text.push_str(&String::from_utf8_lossy(ask_text));
        }
        Some(Body { hit, insert_at: after, tag, text, line_comment: close.is_none() })
    }

    /// The tag and the ask after a trigger that ends at `after`, in a comment body that ends at
    /// `body_end`: the trigger (and its tag) is followed by whitespace, or by `:` or `,` and
    /// whitespace (`@claude: fix this`, `@claude, why…`: asks are written like `TODO:`), then
    /// something to ask. The ask runs from right after the tag, so it keeps the `:` or `,` as
    /// typed. Otherwise why it is none, where that is worth a hint (`@claude.foo` is not).
    fn ask_after(
        &self,
        src: &[u8],
        after: usize,
        body_end: usize,
    ) -> Result<(Option<MarkerId>, Range<usize>), Option<Miss>> {
        let miss = |why, end| Err(Some(Miss { why, end }));
        if after > body_end {
            return miss(Why::NothingToAsk, after.min(src.len()));
        }
        let body = &src[..body_end];
        let (tag, start) = match MarkerId::from_tag(&body[after..]) {
            Some(tag) => (Some(tag), after + TAG_LEN),
            None => (None, after),
        };
        let punct = matches!(body.get(start), Some(b':' | b','));
        let space = start + usize::from(punct);
        let word_end = |from: usize| {
            from + body[from..].iter().take_while(|b| !b.is_ascii_whitespace()).count()
        };
        match body.get(space) {
            Some(b' ' | b'\t' | b'\r' | b'\n') => {}
            None => return miss(Why::NothingToAsk, space),
            Some(_) if punct => {
                return miss(Why::NoSpace(char::from(body[start])), word_end(space))
            }
            Some(b'[') => return miss(Why::BadTag, word_end(start)),
            Some(&b) if b.is_ascii_alphanumeric() || b == b'_' => {
                return miss(Why::Glued, word_end(start))
            }
            Some(_) => return Err(None),
        }
        let text_end = space + trim_end(&body[space..]).len();
        if text_end == space {
            return miss(Why::NothingToAsk, space);
        }
        Ok((tag, start..text_end))
    }

    /// The comments that continue the line comment `range` (its marker at `hit`) as one
    /// paragraph: the line comments of the same style on the lines right below, starting at the
    /// same column, up to a blank comment line, another style, code, or another marker. Returns
    /// where the paragraph ends and the continuation lines' text.
    fn paragraph(
        &self,
        row: &Language,
        src: &[u8],
        range: &Range<usize>,
        hit: usize,
        comment_below: &mut dyn FnMut(usize, usize) -> Option<Range<usize>>,
    ) -> (usize, Vec<String>) {
        let prefix = &src[range.start..hit];
        let style_len = prefix.iter().position(|b| b.is_ascii_whitespace()).unwrap_or(prefix.len());
        let style = &prefix[..style_len];
        // Columns as the eye sees them: a BOM in front of line 1 does not count.
        let column_of = |at: usize| {
            let start = line_start(src, at);
            let bom = if start == 0 && src.starts_with(BOM) { BOM.len() } else { 0 };
            at - start - bom
        };
        let column = column_of(range.start);
        let doc_chars = |b: u8| row.doc_markers.as_bytes().contains(&b) || style.last() == Some(&b);
        let mut end = range.end;
        let mut lines = Vec::new();
        let mut next = match memchr::memchr(b'\n', &src[range.end..]) {
            Some(i) => range.end + i + 1,
            None => return (end, lines),
        };
        while next < src.len() {
            let line_end = memchr::memchr(b'\n', &src[next..]).map_or(src.len(), |i| next + i);
            let content_end =
                if line_end > next && src[line_end - 1] == b'\r' { line_end - 1 } else { line_end };
            let indent =
                src[next..content_end].iter().take_while(|&&b| b == b' ' || b == b'\t').count();
            let pos = next + indent;
            if indent != column || !src[pos..content_end].starts_with(style) {
                break;
            }
            // It must really be a comment that starts there (not a string's text), and it ends
            // where the comment node ends (`</script>` or PHP's `?>` may follow on the line).
            let comment = comment_below(pos, style.len());
            let Some(comment) = comment else { break };
            // A block comment on the line (Lua's `--[[`) is another style, not a continuation.
            let rest = &src[comment.start..];
            if row.block_comments.iter().any(|d| rest.starts_with(d.open.as_bytes())) {
                break;
            }
            let content_end = content_end.min(comment.end);
            let after_style = &src[pos + style.len()..content_end];
            let body = trim_start(after_style);
            let same_style = after_style.first().is_none_or(|&b| !doc_chars(b));
            // Another marker, also behind doc characters (`-- | @claude`), starts its own ask.
            let marker_body: &[u8] = {
                let skip =
                    body.iter().take_while(|&&b| b.is_ascii_whitespace() || doc_chars(b)).count();
                &body[skip..]
            };
            if !same_style
                || body.is_empty()
                || body.starts_with(self.trigger.as_bytes())
                || marker_body.starts_with(self.trigger.as_bytes())
            {
                break;
            }
            let text = after_style.strip_prefix(b" ").unwrap_or(after_style);
            lines.push(String::from_utf8_lossy(trim_end(text)).into_owned());
            end = content_end;
            next = line_end + 1;
        }
        (end, lines)
    }
}

/// The body lines of a multi-line block comment as an ask: each continuation line without its
/// indentation and `*` decoration column, trailing blank lines dropped.
fn block_text(payload: &[u8]) -> String {
    let mut lines: Vec<String> = Vec::new();
    // `\n`, `\r\n` and a lone `\r` all end a line; `trim_end` drops the `\r` of `\r\n`.
    let line_breaks = payload.split(|&b| b == b'\n').flat_map(|l| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        l.split(|&b| b == b'\r')
    });
    for (i, raw) in line_breaks.enumerate() {
        let mut line = trim_end(raw);
        if i > 0 {
            line = trim_start(line);
            if line.starts_with(b"*") && !line.starts_with(b"*/") {
                line = &line[1..];
                line = line.strip_prefix(b" ").unwrap_or(line);
            }
        }
        lines.push(String::from_utf8_lossy(line).into_owned());
    }
    while lines.len() > 1 && lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

/// The parts of a marker that reading the comment yields.
struct Body {
    hit: usize,
    insert_at: usize,
    tag: Option<MarkerId>,
    text: String,
    /// A line comment (`//`, `#`), which a paragraph may continue.
    line_comment: bool,
}

impl Body {
    fn into_found(self, comment: Range<usize>, decided_by: DecidedBy) -> Found {
        Found {
            hit: self.hit,
            comment,
            insert_at: self.insert_at,
            text: self.text,
            tag: self.tag,
            decided_by,
            symbol: None,
        }
    }
}

/// The definition the marker `f`, found in the tree at `at`, is about.
fn symbol_at(at: &Located, src: &[u8], f: &Found) -> Option<Box<Symbol>> {
    let (grammar, ts) = (at.row.grammar.as_deref()?, at.row.ts_language.as_ref()?);
    let query = symbol::query_for(grammar, ts)?;
    symbol::symbol_of(&query, at.row, at.steps, src, f.comment.clone(), f.hit).map(Box::new)
}

/// The tree a hit lies in.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Owner {
    /// The file's own.
    File,
    /// The embedded region (`<script>` body, Markdown inline) that starts at this offset.
    Region(usize),
}

/// Where a hit lies: the language row and syntax tree that own it, and its smallest node.
struct Located<'a, 'r> {
    row: &'r Language,
    root: Node<'a>,
    node: Node<'a>,
    /// The tree's steps (see [`Steps`]).
    steps: &'r Steps<'a>,
}

/// What the tree says about a hit.
enum TreeSays<'a> {
    /// It is in this comment node (or text the grammar leaves unparsed), at this range.
    Comment(Node<'a>, Range<usize>),
    /// It is in a comment node that is no comment here (an HTML attribute value, a string's
    /// text) or that cannot hold an ask (a line comment continued over lines).
    Hidden,
    /// It is in no comment node.
    Nothing,
}

/// The comment node around `hit` (from `node` up) and the comment's own byte range, unless the
/// host language says that node is no comment (an HTML attribute value, a string's text).
fn comment_around<'a>(
    lang: &Language,
    at: &Located<'a, '_>,
    src: &[u8],
    hit: usize,
) -> TreeSays<'a> {
    let (row, node, steps) = (at.row, at.node, at.steps);
    if let Some(lexed) = lexed_ancestor(row, steps, node) {
        // Text the grammar leaves unparsed (a C macro body): read it with the tokens.
        return match FallbackLexer::new(row).comment_containing(src, lexed.byte_range(), hit) {
            Some(range) => TreeSays::Comment(lexed, range),
            None => TreeSays::Hidden,
        };
    }
    let Some(comment) = enclosing_comment(row, steps, node) else { return TreeSays::Nothing };
    if lang_hides_comment(lang, steps, comment, src) || parent_is_string(steps, comment) {
        return TreeSays::Hidden;
    }
    match comment_range(row, src, comment.byte_range(), hit) {
        Some(range) => TreeSays::Comment(comment, range),
        None => TreeSays::Hidden,
    }
}

/// Recognises the comment's opening token at the start of `prefix` (the bytes between the
/// comment start and the trigger) and checks that only doc markers and whitespace follow it.
/// Returns the closing delimiter to strip, if the token opens a block comment.
fn opening_token<'l>(lang: &'l Language, prefix: &[u8]) -> Option<Option<&'l str>> {
    let blocks = lang.block_comments.iter().map(|d| (d.open.as_str(), Some(d.close.as_str())));
    let lines = lang.line_comments.iter().map(|t| (t.as_str(), None));
    let mut candidates: Vec<(&str, Option<&str>)> = blocks.chain(lines).collect();
    candidates.sort_by_key(|(open, _)| std::cmp::Reverse(open.len()));
    candidates.into_iter().find_map(|(open, close)| {
        let rest = prefix.strip_prefix(open.as_bytes())?;
        let repeat = *open.as_bytes().last()?;
        // A block comment's body may start on a later line (`/**` ⏎ ` * @claude …`).
        let line_break_ok = close.is_some();
        let ok = rest.iter().all(|&b| {
            b == b' '
                || b == b'\t'
                || b == repeat
                || lang.doc_markers.as_bytes().contains(&b)
                || (line_break_ok && (b == b'\n' || b == b'\r'))
        });
        ok.then_some(close)
    })
}

pub(super) fn trim_end(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
    &bytes[..end]
}

/// True if only indentation (or a BOM) precedes `offset` on its line.
pub(super) fn starts_its_line(src: &[u8], offset: usize) -> bool {
    let before = &src[line_start(src, offset)..offset];
    let before = before.strip_prefix(BOM).unwrap_or(before);
    before.iter().all(|&b| b == b' ' || b == b'\t')
}

pub(super) fn trim_start(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    &bytes[start..]
}

// ---- positions -----------------------------------------------------------------------------

/// Turns byte offsets into 1-based lines and columns, in one forward pass over sorted markers.
struct Positions<'s> {
    src: &'s [u8],
    offset: usize,
    line: usize,
    line_start: usize,
}

impl<'s> Positions<'s> {
    fn new(src: &'s [u8]) -> Self {
        Positions { src, offset: 0, line: 1, line_start: 0 }
    }

    /// The markers of one file in file order, with their lines and columns.
    fn place(&mut self, mut found: Vec<Found>, language: &str) -> Vec<Marker> {
        found.sort_by_key(|f| f.hit);
        found
            .into_iter()
            .map(|f| {
                let hit = f.hit;
                for i in memchr::memchr_iter(b'\n', &self.src[self.offset..hit]) {
                    self.line += 1;
                    self.line_start = self.offset + i + 1;
                }
                self.offset = hit;
                let bom =
                    if self.line_start == 0 && self.src.starts_with(BOM) { BOM.len() } else { 0 };
                let asked_over = memchr::memchr_iter(b'\n', &self.src[hit..f.comment.end]).count();
                Marker {
                    line: self.line,
                    end_line: self.line + asked_over,
                    column: hit - self.line_start - bom + 1,
                    comment: f.comment,
                    insert_at: f.insert_at,
                    text: f.text,
                    tag: f.tag,
                    language: language.to_string(),
                    decided_by: f.decided_by,
                    symbol: f.symbol,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(lang: &str, src: &str) -> Vec<(usize, usize, String, Option<MarkerId>, &'static str)> {
        let table = LanguageTable::builtin();
        let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
        scanner
            .scan(table.get(lang).unwrap(), src.as_bytes())
            .into_iter()
            .map(|m| (m.line, m.column, m.text, m.tag, m.decided_by.mode()))
            .collect()
    }

    #[test]
    fn finds_whole_line_and_trailing_comments() {
        let found = scan("python", "x = 1  # @claude why one?\n# @claude[fw-0123abcd] done\n");
        assert_eq!(
            found,
            vec![
                (1, 10, "@claude why one?".into(), None, "syntax"),
                (2, 3, "@claude done".into(), Some("fw-0123abcd".parse().unwrap()), "syntax"),
            ]
        );
    }

    #[test]
    fn strings_are_not_comments() {
        assert!(scan("python", "s = \"# @claude nope\"\n").is_empty());
        assert!(scan("rust", "let s = r#\"// @claude nope\"#;\n").is_empty());
        assert!(scan("javascript", "const t = `\n// @claude nope ${x}\n`;\n").is_empty());
    }

    #[test]
    fn near_misses_are_not_markers() {
        for src in [
            "// @claudette x\n",
            "// @claude:x\n",
            "// @claude: \n",
            "// @claude.foo x\n",
            "// me@claude.ai x\n",
            "// @claude\n",
            "// @claude   \n",
            "// x @claude y\n",
        ] {
            assert!(scan("rust", src).is_empty(), "{src:?}");
        }
        // A line comment continued by a backslash is not a block: no multi-line ask.
        assert!(scan("c", "// @claude spans \\\n lines\n").is_empty());
    }

    #[test]
    fn multi_line_asks() {
        let para =
            scan("python", "# @claude refactor this\n# and keep the exit\n#\n# not part\nx = 1\n");
        assert_eq!(
            para,
            vec![(1, 3, "@claude refactor this\nand keep the exit".into(), None, "syntax")]
        );
        let block = scan(
            "rust",
            "/* @claude explain the lock;\r\n * is there a deadlock?\r\n */\r\nfn a() {}\r\n",
        );
        assert_eq!(block[0].2, "@claude explain the lock;\nis there a deadlock?");
        // Different style, trailing comment, code: the paragraph stops.
        let stops = scan("rust", "// @claude one\n/// doc\nlet x = 1; // two\n");
        assert_eq!(stops[0].2, "@claude one");
        let two = scan("go", "// @claude one\n// @claude two\n");
        assert_eq!(
            two.iter().map(|m| m.2.as_str()).collect::<Vec<_>>(),
            ["@claude one", "@claude two"]
        );
    }

    #[test]
    fn crlf_and_bom_do_not_leak_into_the_ask() {
        let found = scan("go", "\u{feff}// @claude fix\r\nx := 1 // @claude why\r\n");
        assert_eq!(found[0].0..=found[0].1, 1..=4);
        assert_eq!(found[0].2, "@claude fix");
        assert_eq!(found[1].2, "@claude why");
    }

    #[test]
    fn unterminated_string_yields_no_marker() {
        assert!(scan("python", "x = \"abc # @claude fix\ny = 2\n").is_empty());
        assert!(scan("javascript", "let x = 'abc // @claude fix\nlet y = 2\n").is_empty());
    }

    #[test]
    fn fallback_takes_clean_trailing_comments_and_skips_multiline_strings() {
        let table = LanguageTable::builtin();
        let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
        let lang = Language {
            name: "test".into(),
            file_types: vec![],
            shebangs: vec![],
            grammar: None,
            ts_language: None,
            comment_kinds: vec![],
            line_comments: vec!["#".into()],
            block_comments: vec![],
            doc_markers: String::new(),
            strings: vec![],
            multiline_strings: vec![crate::languages::Delimiters {
                open: "\"\"\"".into(),
                close: "\"\"\"".into(),
            }],
            raw_strings: vec![],
            string_holes: vec![],
            code_escapes: false,
            variable_sigils: String::new(),
            line_block_comments: vec![],
            block_scalar_properties: String::new(),
            jsx_text: false,
            heredocs: vec![],
            heredoc_space: Default::default(),
            shift_operator: false,
            arithmetic: vec![],
            quote_operators: vec![],
            substitute_operators: vec![],
            verbatim_line_prefix: None,
            slash_regex: false,
            block_scalars: String::new(),
            data_section: vec![],
            comments_start_line: false,
            lexed_kinds: vec![],
            embedded: false,
        };
        let src = b"  # @claude one\nx = 1 # @claude two\ns = \"\"\"\n# @claude three\n\"\"\"\n# @claude four\nx = \"\"\"a\"\"\"# @claude five\n";
        let found: Vec<usize> = scanner.scan(&lang, src).iter().map(|m| m.line).collect();
        // Line 7: a comment glued to a string's closer is not one the table can vouch for.
        assert_eq!(found, vec![1, 2, 6]);
    }

    #[test]
    fn custom_trigger_is_rejected_when_unusable() {
        let table = LanguageTable::builtin();
        assert!(Scanner::new(table, "").is_err());
        assert!(Scanner::new(table, "@a b").is_err());
        assert!(Scanner::new(table, "@ai").is_ok());
    }
}
