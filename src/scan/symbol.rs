//! Which definition an ask is about: the innermost function, method, class, impl, module …
//! that holds the marker, or, for a whole-line comment, the definition right below it (only
//! blank lines, other comments and attributes between); its names from outer to inner and its
//! lines. Read from the tree the scan already holds, only for the comments that are markers.
//!
//! The definitions come from tree-sitter queries (see `queries/README.md`): the tags query a
//! grammar crate ships where it is usable, and the project's `queries/<grammar>/symbols.scm`.
//! Where the tree has errors only definitions that parsed whole, under no error, count: the
//! symbol is then the one the sound part of the tree shows, or none, never a guess.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use tree_sitter::{Node, Query, QueryCursor, StreamingIterator};

use super::steps::Steps;
use crate::languages::{Language, LanguageTable};

/// The definition an ask is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Its name and those of the definitions around it, outer to inner, joined with `.`
    /// (`Cache.refresh`).
    pub name: String,
    /// 1-based first line, its attributes and decorators included.
    pub first_line: usize,
    /// 1-based last line.
    pub last_line: usize,
}

impl Symbol {
    /// `3-5` (`3-3` for a definition on one line), as the channel message gives them.
    pub fn lines(&self) -> String {
        format!("{}-{}", self.first_line, self.last_line)
    }
}

/// The kinds of `@definition.KIND` an ask can be about; constants, variables, fields and
/// properties are not.
const KINDS: &[&str] = &[
    "class",
    "enum",
    "function",
    "impl",
    "interface",
    "macro",
    "method",
    "module",
    "namespace",
    "object",
    "struct",
    "trait",
    "type",
];

/// A name longer than this is cut: a name is an identifier, not a paragraph.
const MAX_NAME: usize = 200;

/// A chain of names (`Outer.Inner.method`) longer than this is cut to its innermost names: 60
/// nested classes are not a name anyone reads.
const MAX_CHAIN: usize = 256;

/// How many comments and attributes between an ask and the definition below it are looked at.
const MAX_SKIPPED: usize = 64;

/// The query texts of `grammar`, in order (the grammar table's, [`crate::grammar::COMPILED`]).
/// `None` for a grammar without symbols (data formats, markup) or not compiled in.
pub fn sources(grammar: &str) -> Option<Vec<&'static str>> {
    let texts = crate::grammar::compiled(grammar)?.symbol_queries;
    (!texts.is_empty()).then(|| texts.to_vec())
}

/// A grammar's symbol query, compiled, with the indices of the captures that count.
pub(super) struct SymbolQuery {
    query: Query,
    name: u32,
    /// `@scope`: a name the definition's own is qualified with (a Go method's receiver type).
    scope: Option<u32>,
    /// Per capture index: true for a `@definition.KIND` of a kind in [`KINDS`].
    definition: Vec<bool>,
    attached: Option<u32>,
}

impl SymbolQuery {
    /// Compiles `texts` for `ts`; patterns without a capture that counts are disabled, so a
    /// tags query's references cost nothing.
    fn new(ts: &tree_sitter::Language, texts: &[&str]) -> Result<SymbolQuery, String> {
        let mut query = Query::new(ts, &texts.join("\n")).map_err(|e| e.to_string())?;
        let names = query.capture_names();
        let definition: Vec<bool> = names
            .iter()
            .map(|n| n.strip_prefix("definition.").is_some_and(|k| KINDS.contains(&k)))
            .collect();
        let index = |wanted: &str| names.iter().position(|n| *n == wanted).map(|i| i as u32);
        let name = index("name").ok_or("no @name capture")?;
        let scope = index("scope");
        let attached = index("attached");
        for pattern in 0..query.pattern_count() {
            let uses = query.capture_quantifiers(pattern);
            let counts = |i: usize| uses[i] != tree_sitter::CaptureQuantifier::Zero;
            let useful =
                (0..uses.len()).any(|i| counts(i) && (definition[i] || Some(i as u32) == attached));
            if !useful {
                query.disable_pattern(pattern);
            }
        }
        Ok(SymbolQuery { query, name, scope, definition, attached })
    }
}

/// The compiled symbol query of `grammar`, compiled once per process; `None` for a grammar
/// without one.
pub(super) fn query_for(grammar: &str, ts: &tree_sitter::Language) -> Option<Arc<SymbolQuery>> {
    type Cell = Arc<OnceLock<Option<Arc<SymbolQuery>>>>;
    static QUERIES: OnceLock<Mutex<HashMap<String, Cell>>> = OnceLock::new();
    let cell: Cell = {
        let mut queries =
            QUERIES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        queries.entry(grammar.to_string()).or_default().clone()
    };
    // Compiled once, outside the map's lock: a save waits for its own grammar's query (begun at
    // its file's first event by `warm_for`, and then not compiled twice), never for another's.
    let compiled = cell.get_or_init(|| {
        sources(grammar).and_then(|texts| match SymbolQuery::new(ts, &texts) {
            Ok(q) => Some(Arc::new(q)),
            Err(e) => {
                // The test suite compiles every query; this is a build defect, not the user's.
                tracing::warn!("symbol query for {grammar} does not compile: {e}");
                None
            }
        })
    });
    compiled.clone()
}

/// Compiles, on a thread of its own, the symbol query of the language `path` is in, unless it
/// was compiled or begun already: a query takes tens of milliseconds to compile (tree-sitter
/// analyses its patterns), which the first save of a file in that language would otherwise wait
/// for. Called as a file's first event comes in, so the query is ready when the debounce ends.
/// Only the languages a root's files use are compiled: each query holds a few MiB.
pub fn warm_for(table: &'static LanguageTable, path: &Path) {
    static BEGUN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let Some(lang) = table.for_path(path) else { return };
    let (Some(grammar), Some(ts)) = (lang.grammar.clone(), lang.ts_language.clone()) else {
        return;
    };
    let mut begun = BEGUN.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if begun.insert(grammar.clone()) {
        let _ = std::thread::Builder::new()
            .name("query".into())
            .spawn(move || query_for(&grammar, &ts));
    }
}

/// One definition found: its node, its name's node, and the name that qualifies it.
#[derive(Clone, Copy)]
struct Def<'t> {
    node: Node<'t>,
    name: Node<'t>,
    scope: Option<Node<'t>>,
}

/// The definition the ask in `comment` (its trigger at `hit`) is about, in `root`, the tree of
/// `src` in language `row`. `None` at module level, or where the tree cannot vouch for it.
pub(super) fn symbol_of(
    q: &SymbolQuery,
    row: &Language,
    steps: &Steps,
    src: &[u8],
    comment: Range<usize>,
    hit: usize,
) -> Option<Symbol> {
    let root = steps.root();
    let whole_line = super::starts_its_line(src, comment.start);
    let below =
        if whole_line { below(q, row, steps, src, comment.start, comment.end) } else { None };
    let chain: Vec<Def> = match below {
        Some(d) => containing(q, steps, src, d.node.start_byte())
            .into_iter()
            .filter(|c| {
                c.node.start_byte() <= d.node.start_byte() && c.node.end_byte() >= d.node.end_byte()
            })
            .collect(),
        // A trailing comment is about the code it trails: `def run; end # @claude …`, or the
        // last line of a Haskell equation, whose node ends before the comment.
        None if !whole_line => {
            let code = src[..comment.start].iter().rposition(|b| !b.is_ascii_whitespace());
            containing(q, steps, src, code.unwrap_or(hit))
        }
        None => containing(q, steps, src, hit),
    };
    let inner = *chain.last()?;
    if root.has_error() && !sound(steps, &chain) {
        return None;
    }
    let names = chain.iter().flat_map(|d| d.scope.into_iter().chain([d.name]));
    let name = chain_text(names.map(|n| name_text(src, n)).collect());
    let first = attached_before(q, src, steps, inner.node);
    let end = inner.node.end_position();
    // A node that ends with its line's `\n` (Rust doc comments do) ends on the row before.
    let last_row =
        if end.column == 0 && end.row > first.start_position().row { end.row - 1 } else { end.row };
    Some(Symbol { name, first_line: first.start_position().row + 1, last_line: last_row + 1 })
}

/// True if every definition of `chain` parsed whole and none lies under an error: in a tree
/// with errors, anything else may be the parser's guess.
fn sound(steps: &Steps, chain: &[Def]) -> bool {
    if chain.iter().any(|d| d.node.has_error()) {
        return false;
    }
    let mut n = chain.first().and_then(|d| steps.parent(d.node));
    while let Some(p) = n {
        if p.is_error() || p.is_missing() {
            return false;
        }
        n = steps.parent(p);
    }
    true
}

/// The names, outer to inner, joined with `.`; a chain over [`MAX_CHAIN`] bytes keeps its
/// innermost names (the ones the ask is about) after a `…` that says outer ones were cut.
fn chain_text(names: Vec<String>) -> String {
    let whole = names.join(".");
    if whole.len() <= MAX_CHAIN {
        return whole;
    }
    // The innermost name is always kept: it is at most MAX_NAME bytes and a `…`.
    let mut len = '…'.len_utf8() + names[names.len() - 1].len();
    let mut kept = 1;
    for name in names.iter().rev().skip(1) {
        if len + 1 + name.len() > MAX_CHAIN {
            break;
        }
        len += 1 + name.len();
        kept += 1;
    }
    format!("…{}", names[names.len() - kept..].join("."))
}

/// The name as one line: whitespace runs become one space, cut at [`MAX_NAME`] bytes.
fn name_text(src: &[u8], name: Node) -> String {
    let text = String::from_utf8_lossy(&src[name.byte_range()]);
    let mut out = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.len() > MAX_NAME {
        let mut cut = MAX_NAME;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// The definitions whose node holds the byte at `at`, outer to inner: one per name (the
/// outermost node: a decorated definition over its function) and one name per node (the
/// first: a type's own name before its variants'). Looked for from the top-level node that
/// holds `at`, not the root: a query cursor steps through every child of the node it starts
/// at, and no symbol pattern's definition is the root.
fn containing<'t>(q: &SymbolQuery, steps: &Steps<'t>, src: &[u8], at: usize) -> Vec<Def<'t>> {
    let mut cursor = QueryCursor::new();
    cursor.set_byte_range(at..at + 1);
    let holds = |n: Node| n.start_byte() <= at && at < n.end_byte();
    let from = steps.top_at(at).unwrap_or(steps.root());
    let defs = matches(q, &mut cursor, from, src, holds);
    let mut defs = dedup(defs);
    defs.sort_by_key(|d| (d.node.start_byte(), std::cmp::Reverse(d.node.end_byte())));
    defs
}

/// The definitions the query finds under `node` within the cursor's range, those whose node
/// passes `keep`.
fn matches<'t>(
    q: &SymbolQuery,
    cursor: &mut QueryCursor,
    node: Node<'t>,
    src: &[u8],
    keep: impl Fn(Node) -> bool,
) -> Vec<Def<'t>> {
    let mut defs = Vec::new();
    let mut it = cursor.matches(&q.query, node, src);
    while let Some(m) = it.next() {
        let def = m.captures().iter().find(|c| q.definition[c.index as usize]).map(|c| c.node);
        let name = m.captures().iter().find(|c| c.index == q.name).map(|c| c.node);
        let scope = m.captures().iter().find(|c| Some(c.index) == q.scope).map(|c| c.node);
        if let (Some(node), Some(name)) = (def, name) {
            if keep(node) {
                defs.push(Def { node, name, scope });
            }
        }
    }
    defs
}

/// One definition per name and one name per definition. A name inside another's name is the
/// same name (C++'s `refresh` in `Cache::refresh`): the outermost node that carries it wins.
fn dedup(mut defs: Vec<Def>) -> Vec<Def> {
    let within =
        |a: Node, b: Node| a.start_byte() >= b.start_byte() && a.end_byte() <= b.end_byte();
    let size = |n: Node| n.end_byte() - n.start_byte();
    // Largest nodes first (and of one node, the match that qualifies its name): each later one
    // is dropped if an earlier one has the same name or the same node.
    defs.sort_by_key(|d| (std::cmp::Reverse(size(d.node)), d.name.start_byte(), d.scope.is_none()));
    let mut kept: Vec<Def> = Vec::with_capacity(defs.len());
    for d in defs {
        let taken = kept.iter().any(|k| {
            within(d.name, k.name)
                || within(k.name, d.name)
                || k.node.byte_range() == d.node.byte_range()
        });
        if !taken {
            kept.push(d);
        }
    }
    kept
}

/// True if the query marks `node` itself as belonging to the definition after it.
fn is_attached(q: &SymbolQuery, src: &[u8], node: Node) -> bool {
    let Some(attached) = q.attached else { return false };
    let mut cursor = QueryCursor::new();
    // Patterns that start at `node` only, and no walk through the rest of a big node.
    cursor.set_max_start_depth(Some(0));
    cursor.set_byte_range(node.start_byte()..node.start_byte() + 1);
    let mut it = cursor.matches(&q.query, node, src);
    while let Some(m) = it.next() {
        if m.captures().iter().any(|c| c.index == attached && c.node.id() == node.id()) {
            return true;
        }
    }
    false
}

/// Where `def` starts with the attributes right before it that belong to it.
fn attached_before<'t>(q: &SymbolQuery, src: &[u8], steps: &Steps<'t>, def: Node<'t>) -> Node<'t> {
    let mut first = def;
    while let Some(prev) = steps.prev_sibling(first) {
        if !is_attached(q, src, prev) {
            break;
        }
        first = prev;
    }
    first
}

/// The definition that starts right after the whole-line comment `start..from`, past blank
/// lines, other comments and attributes, and indented no less than the comment (a comment
/// indented deeper ends the block above, as the last lines of a Python function do); `None`
/// if anything else comes first.
fn below<'t>(
    q: &SymbolQuery,
    row: &Language,
    steps: &Steps<'t>,
    src: &[u8],
    start: usize,
    from: usize,
) -> Option<Def<'t>> {
    let column = |at: usize| at - crate::lines::line_start(src, at);
    let indent = column(start);
    let mut pos = from;
    // Each comment passed and each node passed counts against MAX_SKIPPED.
    let mut used = 0;
    while used < MAX_SKIPPED {
        let (comments, stop) = steps.comment_run(pos, |p| next_is_comment(row, steps, src, p));
        used += comments;
        let at = stop?;
        if used >= MAX_SKIPPED {
            return None;
        }
        used += 1;
        let starting = starting_at(steps, at)?;
        if column(at) < indent {
            return None;
        }
        if let Some(d) = starting.iter().rev().find_map(|n| heading(q, src, *n)) {
            return Some(d);
        }
        match starting.iter().rev().find(|n| is_attached(q, src, **n)) {
            Some(a) => pos = a.end_byte(),
            None => return None,
        }
    }
    None
}

/// The step of [`below`]'s walk at `pos`: past blank space, the end of the comment that starts
/// there, else `Err` with where the node that is no comment starts (`None`: the end of the
/// file, or no node starts there).
fn next_is_comment(
    row: &Language,
    steps: &Steps,
    src: &[u8],
    pos: usize,
) -> Result<usize, Option<usize>> {
    let rest = src.get(pos..).ok_or(None)?;
    let at = pos + rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
    if at >= src.len() {
        return Err(None);
    }
    let starting = starting_at(steps, at).ok_or(None)?;
    match starting.iter().find(|n| row.comment_kinds.iter().any(|k| k == n.kind())) {
        Some(c) => Ok(c.end_byte()),
        None => Err(Some(at)),
    }
}

/// The nodes that start at `at`, smallest first; `None` if none does.
fn starting_at<'t>(steps: &Steps<'t>, at: usize) -> Option<Vec<Node<'t>>> {
    let leaf = steps.descendant(at, at + 1)?;
    if leaf.start_byte() != at {
        return None;
    }
    let mut starting = vec![leaf];
    while let Some(parent) = starting.last().and_then(|n| steps.parent(*n)) {
        if parent.start_byte() != at || parent.id() == steps.root().id() {
            break;
        }
        starting.push(parent);
    }
    Some(starting)
}

/// The definition that `node` is, or wraps (`export class …`, `const f = () => …;`): the
/// outermost one that starts on `node`'s first line and ends where it ends (but for `;` or `,`).
fn heading<'t>(q: &SymbolQuery, src: &[u8], node: Node<'t>) -> Option<Def<'t>> {
    let first_line_end = memchr::memchr(b'\n', &src[node.start_byte()..node.end_byte()])
        .map_or(node.end_byte(), |i| node.start_byte() + i);
    let mut cursor = QueryCursor::new();
    cursor.set_byte_range(node.start_byte()..first_line_end.max(node.start_byte() + 1));
    let row = node.start_position().row;
    let ends_with = |d: Node| {
        d.end_byte() <= node.end_byte()
            && src[d.end_byte()..node.end_byte()]
                .iter()
                .all(|b| b.is_ascii_whitespace() || *b == b';' || *b == b',')
    };
    let fits = |d: Node| {
        d.start_byte() >= node.start_byte() && d.start_position().row == row && ends_with(d)
    };
    let defs = dedup(matches(q, &mut cursor, node, src, fits));
    defs.into_iter().max_by_key(|d| d.node.end_byte() - d.node.start_byte())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar;

    #[test]
    fn a_long_chain_keeps_its_innermost_names() {
        let names: Vec<String> = (0..60).map(|i| format!("C{i}_{}", "x".repeat(20))).collect();
        let chain = chain_text(names.clone());
        assert!(chain.len() <= MAX_CHAIN, "{chain}");
        assert!(chain.starts_with("…C") && chain.ends_with(&format!(".{}", names[59])), "{chain}");
        assert_eq!(chain_text(names[..3].to_vec()), names[..3].join("."));
        let one = vec!["n".repeat(MAX_NAME), "m".repeat(MAX_NAME)];
        assert_eq!(chain_text(one), format!("…{}", "m".repeat(MAX_NAME)));
    }

    /// Every grammar's symbol query compiles, part by part (the shipped tags queries and the
    /// project's file each on their own, so a failure names its file), and as a whole.
    #[test]
    fn every_query_compiles() {
        let mut with = Vec::new();
        for name in grammar::KNOWN {
            let Some(texts) = sources(name) else { continue };
            let ts = grammar::language(name).unwrap();
            for (i, text) in texts.iter().enumerate() {
                if let Err(e) = Query::new(&ts, text) {
                    panic!("{name}: query part {i} does not compile: {e}\n{text}");
                }
            }
            let q = SymbolQuery::new(&ts, &texts).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(q.definition.iter().any(|&d| d), "{name}: no definition capture");
            with.push(*name);
        }
        for wanted in [
            "bash",
            "c",
            "c-sharp",
            "cpp",
            "elm",
            "go",
            "haskell",
            "java",
            "javascript",
            "kotlin",
            "lua",
            "php",
            "python",
            "ruby",
            "rust",
            "scala",
            "swift",
            "tsx",
            "typescript",
        ] {
            assert!(with.contains(&wanted), "{wanted} has no symbol query");
        }
    }
}
