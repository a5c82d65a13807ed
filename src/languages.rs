//! The language table: `grammars.toml` (embedded in the binary) parsed and checked into a
//! [`LanguageTable`] that maps file paths to [`Language`]s.
//!
//! Loading has two phases, like helix's `languages.toml`: serde reads the raw rows (kebab-case
//! keys, unknown keys rejected, a token may be a string or a list), then [`LanguageTable::parse`]
//! checks them (sorted, unique names, no file type claimed twice, grammar names known, comment
//! node kinds present in their grammar) and builds the lookup maps.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use crate::grammar;

/// The table compiled into the binary.
pub const BUILTIN_TOML: &str = include_str!("../grammars.toml");

/// An error in the language table, naming the row it is about.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// Not TOML, or not the table's shape.
    #[error("grammars.toml is not valid: {0}")]
    Toml(#[from] toml::de::Error),
    /// One row is wrong.
    #[error("grammars.toml: language `{name}`: {problem}")]
    Row {
        /// The row's language name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Two rows are out of order.
    #[error("grammars.toml: rows must be sorted by name: `{after}` comes after `{before}`")]
    Unsorted {
        /// The earlier row.
        before: String,
        /// The row that should come before it.
        after: String,
    },
    /// Two rows claim one file type or interpreter.
    #[error("grammars.toml: {what} is claimed by both `{first}` and `{second}`")]
    Claimed {
        /// The file type or interpreter.
        what: String,
        /// The row that claimed it first.
        first: String,
        /// The row that claims it again.
        second: String,
    },
}

// ---- phase 1: raw rows, exactly as written -------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    language: Vec<RawLanguage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawLanguage {
    name: String,
    #[serde(default)]
    file_types: Vec<RawFileType>,
    #[serde(default)]
    shebangs: Vec<String>,
    grammar: Option<String>,
    #[serde(default)]
    comment_kinds: Vec<String>,
    #[serde(default)]
    line_comment: OneOrMany<String>,
    #[serde(default)]
    block_comment: Pairs,
    doc_markers: Option<String>,
    #[serde(default)]
    strings: Vec<RawDelimiter>,
    #[serde(default)]
    multiline_strings: Vec<RawDelimiter>,
    #[serde(default)]
    raw_strings: Vec<RawDelimiter>,
    #[serde(default)]
    string_holes: Vec<[String; 2]>,
    #[serde(default)]
    code_escapes: bool,
    #[serde(default)]
    variable_sigils: String,
    #[serde(default)]
    line_block_comments: Vec<[String; 2]>,
    #[serde(default)]
    block_scalar_properties: String,
    #[serde(default)]
    jsx_text: bool,
    #[serde(default)]
    heredocs: Vec<String>,
    heredoc_space: Option<RawHeredocSpace>,
    #[serde(default)]
    shift_operator: bool,
    #[serde(default)]
    arithmetic: Vec<[String; 2]>,
    #[serde(default)]
    quote_operators: Vec<String>,
    verbatim_line_prefix: Option<String>,
    #[serde(default)]
    slash_regex: bool,
    #[serde(default)]
    block_scalars: String,
    #[serde(default)]
    data_section: Vec<String>,
    #[serde(default)]
    substitute_operators: Vec<String>,
    #[serde(default)]
    comments_start_line: bool,
    #[serde(default)]
    lexed_kinds: Vec<String>,
    #[serde(default)]
    embedded: bool,
}

/// `heredoc-space = true` or `"quoted"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawHeredocSpace {
    Flag(bool),
    Word(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawFileType {
    Extension(String),
    Name { name: String },
    Glob { glob: String },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

impl<T> OneOrMany<T> {
    fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::One(t) => vec![t],
            OneOrMany::Many(v) => v,
        }
    }
}

/// `["/*", "*/"]` or `[["/*", "*/"], ["(*", "*)"]]`.
#[derive(Deserialize, Default)]
#[serde(untagged)]
enum Pairs {
    #[default]
    None,
    One([String; 2]),
    Many(Vec<[String; 2]>),
}

/// `'"'` (same open and close) or `["<<", ">>"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawDelimiter {
    Same(String),
    Pair([String; 2]),
}

// ---- phase 2: checked rows -----------------------------------------------------------------

/// How a file is recognised as being in a language.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FileType {
    /// Extension without the dot, lowercase (`py`); matched case-insensitively.
    Extension(String),
    /// Exact file name (`Makefile`), case-sensitive.
    Name(String),
    /// A glob over the file name (`Dockerfile.*`).
    Glob(String),
}

impl std::fmt::Display for FileType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileType::Extension(e) => write!(f, "*.{e}"),
            FileType::Name(n) => f.write_str(n),
            FileType::Glob(g) => f.write_str(g),
        }
    }
}

/// An opening and a closing delimiter (of a block comment or a string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delimiters {
    /// The opening delimiter.
    pub open: String,
    /// The closing delimiter.
    pub close: String,
}

/// Where a heredoc's word may stand after its opener (`heredoc-space`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeredocSpace {
    /// Glued to it (Ruby, Crystal, HCL): `x << "abc"` is no heredoc.
    #[default]
    Glued,
    /// A quoted word after spaces, a bare one glued (Perl: `print << "EOF"`).
    Quoted,
    /// Any word after spaces (shells: `cat << EOF`; PHP: `<<< EOT`).
    Any,
}

/// One checked row of the table.
#[derive(Debug)]
pub struct Language {
    /// The row's name (`python`).
    pub name: String,
    /// The file types the row claims.
    pub file_types: Vec<FileType>,
    /// Interpreters of `#!` lines that mean this language (`python3`).
    pub shebangs: Vec<String>,
    /// The grammar name as written in the table (it may not be compiled in).
    pub grammar: Option<String>,
    /// The grammar itself, when its feature is compiled in.
    pub ts_language: Option<tree_sitter::Language>,
    /// Node kinds of the grammar that are comments.
    pub comment_kinds: Vec<String>,
    /// Tokens that start a comment running to the end of the line (`//`, `#`).
    pub line_comments: Vec<String>,
    /// Block comment delimiters (`/*` … `*/`).
    pub block_comments: Vec<Delimiters>,
    /// Characters allowed between the opening token and the trigger (`///`, `//!`, `/**`).
    pub doc_markers: String,
    /// Strings that end at the end of the line at the latest.
    pub strings: Vec<Delimiters>,
    /// Strings that may span lines (`"""`, heredoc-like fixed delimiters).
    pub multiline_strings: Vec<Delimiters>,
    /// Strings that may span lines and in which a backslash escapes nothing; a doubled closer
    /// stands for itself (shell `'…'`, C# `@"…""…"`).
    pub raw_strings: Vec<Delimiters>,
    /// Inside a multi-line string, these open code that runs to the matching closer, where
    /// strings (templates too) open again: JS `${…}`, shell `$(…)`.
    pub string_holes: Vec<Delimiters>,
    /// A backslash in code quotes the next byte (shells: `don\'t` opens no string).
    pub code_escapes: bool,
    /// Sigils that, followed by punctuation, make a variable (Perl `$"`, `$'`, `$#`, `@"`):
    /// the punctuation opens nothing.
    pub variable_sigils: String,
    /// Block comments that open at the start of a line with this token and a letter (Perl POD's
    /// `=head1`, `=for`, any `=identifier`) and end after the line that starts with the closer.
    pub line_block_comments: Vec<Delimiters>,
    /// Characters that start a node property (YAML's `!tag`, `&anchor`) that may stand between
    /// a `key:` and its block scalar indicator (`data: !!binary |`).
    pub block_scalar_properties: String,
    /// Text between JSX tags is text: a `//` there opens no comment, whatever a broken parse or
    /// the tokens say.
    pub jsx_text: bool,
    /// Heredoc openers (`<<`, `<<~`, `<<<`, `q:to/`): the word after one (bare, `'EOT'`,
    /// `"EOT"` or `\EOT`) names the line that ends the body.
    pub heredocs: Vec<String>,
    /// Which heredoc words may follow their opener after spaces.
    pub heredoc_space: HeredocSpace,
    /// `<<` is also an operator (Ruby's append, Perl's shift): after a value it opens no
    /// heredoc (`out << "abc"`, `$x << "3"`, `f(x) <<"b"`, `arr<<item`, `class <<self`).
    pub shift_operator: bool,
    /// Brackets that hold arithmetic on one line, where `<<` is a shift (shell `$(( 1 << n ))`).
    pub arithmetic: Vec<Delimiters>,
    /// Quote-like operators whose one delimited part is a literal (`q{…}`, `qw(…)`, `%w[…]`,
    /// `~r/…/`); brackets nest, other delimiters repeat.
    pub quote_operators: Vec<String>,
    /// Quote-like operators with two delimited parts (`s/…/…/`, `tr{…}{…}`).
    pub substitute_operators: Vec<String>,
    /// Lines that start with this are handed on verbatim and hold none of the row's comments
    /// (Make recipes, which go to the shell).
    pub verbatim_line_prefix: Option<String>,
    /// A `/` where a value is expected (after an operator, `(`, `,` or a keyword such as
    /// `if`, `split`, `return`) starts a regex literal that ends at the next `/` on its line.
    pub slash_regex: bool,
    /// Indicators that, ending a `key:` or `-` line, open a block of text: the lines below
    /// indented deeper (YAML's `|` and `>`).
    pub block_scalars: String,
    /// Lines that end the code: what follows is data (Perl's and Ruby's `__END__`).
    pub data_section: Vec<String>,
    /// Only a comment that starts its line is a comment (Dockerfile: `FROM x # y` is an
    /// argument), even where the grammar says otherwise.
    pub comments_start_line: bool,
    /// Grammar node kinds whose text the grammar leaves unparsed (C's `preproc_arg`); comments
    /// inside them are found with the row's tokens.
    pub lexed_kinds: Vec<String>,
    /// Only reached from inside another language (Markdown inline), never from a file type.
    pub embedded: bool,
}

/// The checked table with its lookup maps.
#[derive(Debug)]
pub struct LanguageTable {
    languages: Vec<Language>,
    by_name: HashMap<String, usize>,
    by_file_name: HashMap<String, usize>,
    by_extension: HashMap<String, usize>,
    by_shebang: HashMap<String, usize>,
    globs: GlobSet,
    glob_owner: Vec<usize>,
}

impl LanguageTable {
    /// The table embedded in the binary. Its validity is checked by the test suite, so a
    /// failure here is a build defect, not a user error. Its node kinds are not looked up in
    /// the grammars again at every start (the test suite did, with [`LanguageTable::parse`]):
    /// that lookup reads every grammar's symbol table, a cost of a few megabytes of memory
    /// to every `scan`, most of which parses nothing.
    pub fn builtin() -> &'static LanguageTable {
        static TABLE: OnceLock<LanguageTable> = OnceLock::new();
        TABLE.get_or_init(|| {
            LanguageTable::parse_with(BUILTIN_TOML, NodeKinds::Trusted)
                .expect("embedded grammars.toml is invalid")
        })
    }

    /// Reads and checks a table in the `grammars.toml` format.
    pub fn parse(text: &str) -> Result<LanguageTable, TableError> {
        LanguageTable::parse_with(text, NodeKinds::Checked)
    }

    fn parse_with(text: &str, kinds: NodeKinds) -> Result<LanguageTable, TableError> {
        let raw: RawTable = toml::from_str(text)?;
        let mut table = LanguageTable {
            languages: Vec::with_capacity(raw.language.len()),
            by_name: HashMap::new(),
            by_file_name: HashMap::new(),
            by_extension: HashMap::new(),
            by_shebang: HashMap::new(),
            globs: GlobSet::empty(),
            glob_owner: Vec::new(),
        };
        let mut globs = GlobSetBuilder::new();
        let mut claimed: HashMap<String, String> = HashMap::new();
        for row in raw.language {
            if let Some(prev) = table.languages.last() {
                if prev.name >= row.name {
                    return Err(TableError::Unsorted {
                        before: prev.name.clone(),
                        after: row.name,
                    });
                }
            }
            let lang = check_row(row, kinds)?;
            let index = table.languages.len();
            for ft in &lang.file_types {
                let key = match ft {
                    FileType::Extension(e) => format!("extension .{e}"),
                    FileType::Name(n) => format!("file name {n}"),
                    FileType::Glob(g) => format!("glob {g}"),
                };
                if let Some(first) = claimed.insert(key.clone(), lang.name.clone()) {
                    return Err(TableError::Claimed {
                        what: key,
                        first,
                        second: lang.name.clone(),
                    });
                }
                match ft {
                    FileType::Extension(e) => {
                        table.by_extension.insert(e.clone(), index);
                    }
                    FileType::Name(n) => {
                        table.by_file_name.insert(n.clone(), index);
                    }
                    FileType::Glob(g) => {
                        let glob = Glob::new(g).map_err(|e| row_error(&lang.name, e))?;
                        globs.add(glob);
                        table.glob_owner.push(index);
                    }
                }
            }
            for interpreter in &lang.shebangs {
                if let Some(first) =
                    claimed.insert(format!("shebang {interpreter}"), lang.name.clone())
                {
                    return Err(TableError::Claimed {
                        what: format!("shebang {interpreter}"),
                        first,
                        second: lang.name.clone(),
                    });
                }
                table.by_shebang.insert(interpreter.clone(), index);
            }
            table.by_name.insert(lang.name.clone(), index);
            table.languages.push(lang);
        }
        table.globs = globs.build().map_err(|e| row_error("(globs)", e))?;
        Ok(table)
    }

    /// Every row, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Language> {
        self.languages.iter()
    }

    /// How many rows the table has.
    pub fn len(&self) -> usize {
        self.languages.len()
    }

    /// True for a table without rows.
    pub fn is_empty(&self) -> bool {
        self.languages.is_empty()
    }

    /// The row named `name`.
    pub fn get(&self, name: &str) -> Option<&Language> {
        self.by_name.get(name).map(|&i| &self.languages[i])
    }

    /// The language of a path by its file name: exact name, then glob, then extension.
    pub fn for_path(&self, path: &Path) -> Option<&Language> {
        // A name that is not UTF-8 is still a `.py` file: its odd bytes are in its stem.
        let file_name = &*path.file_name()?.to_string_lossy();
        if let Some(&i) = self.by_file_name.get(file_name) {
            return Some(&self.languages[i]);
        }
        if let Some(&g) = self.globs.matches(file_name).first() {
            return Some(&self.languages[self.glob_owner[g]]);
        }
        let (_, ext) = file_name.rsplit_once('.')?;
        let i = self.by_extension.get(&ext.to_ascii_lowercase())?;
        Some(&self.languages[*i])
    }

    /// The language of a file: by its name, or for a name that says nothing, by the `#!` line
    /// at the start of `bytes`.
    pub fn detect(&self, path: &Path, bytes: &[u8]) -> Option<&Language> {
        if let Some(lang) = self.for_path(path) {
            return Some(lang);
        }
        let first_line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        self.for_shebang(first_line)
    }

    /// True if reading `path` may lead to a language: a known file type, or a name without an
    /// extension (a script whose `#!` line may say). Spares reading images and archives.
    pub fn may_claim(&self, path: &Path) -> bool {
        self.for_path(path).is_some()
            || path.file_name().is_some_and(|n| !n.to_string_lossy().contains('.'))
    }

    /// The language named by a `#!` line (`#!/usr/bin/env python3` → python), for files whose
    /// name says nothing.
    pub fn for_shebang(&self, first_line: &[u8]) -> Option<&Language> {
        let line = first_line.strip_prefix(b"#!")?;
        let line = std::str::from_utf8(line).ok()?;
        let mut words = line.split_whitespace();
        let mut program = words.next()?.rsplit('/').next()?;
        if program == "env" {
            program = words.find(|w| !w.starts_with('-'))?;
        }
        if let Some(&i) = self.by_shebang.get(program) {
            return Some(&self.languages[i]);
        }
        // `python3.12` → `python3` → `python`
        let trimmed = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        self.by_shebang.get(trimmed).map(|&i| &self.languages[i])
    }
}

fn row_error(name: &str, problem: impl std::fmt::Display) -> TableError {
    TableError::Row { name: name.to_string(), problem: problem.to_string() }
}

fn delimiters(raw: Vec<RawDelimiter>) -> Vec<Delimiters> {
    raw.into_iter()
        .map(|d| match d {
            RawDelimiter::Same(s) => Delimiters { open: s.clone(), close: s },
            RawDelimiter::Pair([open, close]) => Delimiters { open, close },
        })
        .collect()
}

/// The opening bracket of a one-byte closer (`}` → `{`), or the closer itself.
fn closing_to_opening(close: &str) -> &str {
    match close {
        "}" => "{",
        ")" => "(",
        "]" => "[",
        other => other,
    }
}

/// Whether a table's node kinds are looked up in their grammars.
#[derive(Clone, Copy, PartialEq)]
enum NodeKinds {
    /// Each one must name a node of its grammar.
    Checked,
    /// The builtin table's, which its test checked.
    Trusted,
}

/// A row of the table, checked (each step below in turn; the first problem is the row's error)
/// and made a [`Language`].
fn check_row(mut row: RawLanguage, kinds: NodeKinds) -> Result<Language, TableError> {
    let name = std::mem::take(&mut row.name);
    let bad = |problem: String| row_error(&name, problem);
    check_name(&name).map_err(bad)?;
    let file_types = file_types(&mut row).map_err(bad)?;
    let (line_comments, block_comments) = comments(&mut row).map_err(bad)?;
    let literals = literals(&mut row).map_err(bad)?;
    check_sigils_and_scalars(&row).map_err(bad)?;
    let (heredoc_space, arithmetic) = heredocs(&mut row).map_err(bad)?;
    check_operators_and_lines(&row).map_err(bad)?;
    let ts_language = ts_language(&row, kinds).map_err(bad)?;
    Ok(Language {
        name,
        file_types,
        shebangs: row.shebangs,
        grammar: row.grammar,
        ts_language,
        comment_kinds: row.comment_kinds,
        line_comments,
        block_comments,
        doc_markers: row.doc_markers.unwrap_or_else(|| "/!*".to_string()),
        strings: literals.strings,
        multiline_strings: literals.multiline_strings,
        raw_strings: literals.raw_strings,
        string_holes: literals.string_holes,
        code_escapes: row.code_escapes,
        variable_sigils: row.variable_sigils,
        line_block_comments: literals.line_block_comments,
        block_scalar_properties: row.block_scalar_properties,
        jsx_text: row.jsx_text,
        heredocs: row.heredocs,
        heredoc_space,
        shift_operator: row.shift_operator,
        arithmetic,
        quote_operators: row.quote_operators,
        substitute_operators: row.substitute_operators,
        verbatim_line_prefix: row.verbatim_line_prefix,
        slash_regex: row.slash_regex,
        block_scalars: row.block_scalars,
        data_section: row.data_section,
        comments_start_line: row.comments_start_line,
        lexed_kinds: row.lexed_kinds,
        embedded: row.embedded,
    })
}

fn check_name(name: &str) -> Result<(), String> {
    let allowed =
        |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'+' || b == b'#';
    if name.is_empty() || !name.bytes().all(allowed) {
        return Err("name must be lowercase kebab-case".into());
    }
    Ok(())
}

/// The row's file types: extensions lowercase without the dot; none exactly when embedded.
fn file_types(row: &mut RawLanguage) -> Result<Vec<FileType>, String> {
    let file_types: Vec<FileType> = std::mem::take(&mut row.file_types)
        .into_iter()
        .map(|ft| match ft {
            RawFileType::Extension(e) => FileType::Extension(e),
            RawFileType::Name { name } => FileType::Name(name),
            RawFileType::Glob { glob } => FileType::Glob(glob),
        })
        .collect();
    for ft in &file_types {
        if let FileType::Extension(e) = ft {
            if e.is_empty() || e.starts_with('.') || e.chars().any(|c| c.is_ascii_uppercase()) {
                return Err(format!("extension `{e}` must be lowercase, without the dot"));
            }
        }
    }
    if file_types.is_empty() != row.embedded {
        return Err("a row needs file types, unless it is `embedded = true` (and then none)".into());
    }
    Ok(file_types)
}

/// The row's line-comment and block-comment tokens: at least one, none empty.
fn comments(row: &mut RawLanguage) -> Result<(Vec<String>, Vec<Delimiters>), String> {
    let line_comments = std::mem::take(&mut row.line_comment).into_vec();
    let block_comments: Vec<Delimiters> = match std::mem::take(&mut row.block_comment) {
        Pairs::None => Vec::new(),
        Pairs::One([open, close]) => vec![Delimiters { open, close }],
        Pairs::Many(v) => v.into_iter().map(|[open, close]| Delimiters { open, close }).collect(),
    };
    if line_comments.is_empty() && block_comments.is_empty() {
        return Err("needs a line-comment or a block-comment token".into());
    }
    if line_comments.iter().any(String::is_empty)
        || block_comments.iter().any(|d| d.open.is_empty() || d.close.is_empty())
    {
        return Err("comment tokens must not be empty".into());
    }
    Ok((line_comments, block_comments))
}

/// A row's string delimiters, the holes in its strings and its line-block comments.
struct Literals {
    strings: Vec<Delimiters>,
    multiline_strings: Vec<Delimiters>,
    raw_strings: Vec<Delimiters>,
    string_holes: Vec<Delimiters>,
    line_block_comments: Vec<Delimiters>,
}

/// The row's [`Literals`]: none empty; holes only in multiline strings, each closed by one
/// bracket its opener ends with.
fn literals(row: &mut RawLanguage) -> Result<Literals, String> {
    let pairs = |v: Vec<[String; 2]>| -> Vec<Delimiters> {
        v.into_iter().map(|[open, close]| Delimiters { open, close }).collect()
    };
    let literals = Literals {
        strings: delimiters(std::mem::take(&mut row.strings)),
        multiline_strings: delimiters(std::mem::take(&mut row.multiline_strings)),
        raw_strings: delimiters(std::mem::take(&mut row.raw_strings)),
        string_holes: pairs(std::mem::take(&mut row.string_holes)),
        line_block_comments: pairs(std::mem::take(&mut row.line_block_comments)),
    };
    let Literals { strings, multiline_strings, raw_strings, string_holes, line_block_comments } =
        &literals;
    if strings
        .iter()
        .chain(multiline_strings)
        .chain(raw_strings)
        .chain(string_holes)
        .chain(line_block_comments)
        .any(|d| d.open.is_empty() || d.close.is_empty())
    {
        return Err("string, hole and line-block-comment delimiters must not be empty".into());
    }
    if !string_holes.is_empty() && multiline_strings.is_empty() {
        return Err("string-holes need multiline-strings to open in".into());
    }
    // A hole ends at its closer's byte, counting nested openers of the same bracket.
    if string_holes
        .iter()
        .any(|h| h.close.len() != 1 || !h.open.ends_with(closing_to_opening(&h.close)))
    {
        return Err(
            "a string hole closes with one bracket that its opener ends with (`${` … `}`)".into()
        );
    }
    Ok(literals)
}

fn check_sigils_and_scalars(row: &RawLanguage) -> Result<(), String> {
    if row.variable_sigils.bytes().any(|b| !b.is_ascii_punctuation())
        || row.block_scalar_properties.bytes().any(|b| !b.is_ascii_punctuation())
    {
        return Err("variable-sigils and block-scalar-properties are punctuation characters".into());
    }
    if !row.block_scalar_properties.is_empty() && row.block_scalars.is_empty() {
        return Err("block-scalar-properties need block-scalars".into());
    }
    Ok(())
}

/// The row's heredoc spacing and arithmetic brackets, which only a row with heredocs has.
fn heredocs(row: &mut RawLanguage) -> Result<(HeredocSpace, Vec<Delimiters>), String> {
    let heredoc_space = match row.heredoc_space.take() {
        None | Some(RawHeredocSpace::Flag(false)) => HeredocSpace::Glued,
        Some(RawHeredocSpace::Flag(true)) => HeredocSpace::Any,
        Some(RawHeredocSpace::Word(w)) if w == "quoted" => HeredocSpace::Quoted,
        Some(RawHeredocSpace::Word(w)) => {
            return Err(format!("heredoc-space is true, false or \"quoted\", not {w:?}"));
        }
    };
    let arithmetic: Vec<Delimiters> = std::mem::take(&mut row.arithmetic)
        .into_iter()
        .map(|[open, close]| Delimiters { open, close })
        .collect();
    if row.heredocs.iter().any(String::is_empty)
        || arithmetic.iter().any(|d| d.open.is_empty() || d.close.is_empty())
    {
        return Err("heredoc openers and arithmetic brackets must not be empty".into());
    }
    let about_heredocs =
        heredoc_space != HeredocSpace::Glued || row.shift_operator || !arithmetic.is_empty();
    if about_heredocs && row.heredocs.is_empty() {
        return Err("heredoc-space, shift-operator and arithmetic need heredocs".into());
    }
    Ok((heredoc_space, arithmetic))
}

fn check_operators_and_lines(row: &RawLanguage) -> Result<(), String> {
    if row.quote_operators.iter().chain(&row.substitute_operators).any(String::is_empty) {
        return Err("quote operators must not be empty".into());
    }
    if row.data_section.iter().any(String::is_empty) {
        return Err("data-section lines must not be empty".into());
    }
    if row.verbatim_line_prefix.as_deref() == Some("") {
        return Err("verbatim-line-prefix must not be empty".into());
    }
    Ok(())
}

/// The row's compiled-in grammar, if it names one (known, with comment kinds; with
/// [`NodeKinds::Checked`], each kind a node of it); a row without one has no node kinds.
fn ts_language(
    row: &RawLanguage,
    kinds: NodeKinds,
) -> Result<Option<tree_sitter::Language>, String> {
    let Some(g) = &row.grammar else {
        if !row.comment_kinds.is_empty() || !row.lexed_kinds.is_empty() {
            return Err("comment-kinds without a grammar".into());
        }
        return Ok(None);
    };
    if !grammar::KNOWN.contains(&g.as_str()) {
        return Err(format!("unknown grammar `{g}` (see src/grammar.rs)"));
    }
    if row.comment_kinds.is_empty() {
        return Err("a grammar needs its comment-kinds".into());
    }
    let lang = grammar::language(g);
    if let (Some(lang), NodeKinds::Checked) = (&lang, kinds) {
        for kind in row.comment_kinds.iter().chain(&row.lexed_kinds) {
            if lang.id_for_node_kind(kind, true) == 0 {
                return Err(format!("grammar `{g}` has no node kind `{kind}`"));
            }
        }
    }
    Ok(lang)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_is_valid_and_large() {
        let table = LanguageTable::parse(BUILTIN_TOML).unwrap_or_else(|e| panic!("{e}"));
        assert!(table.len() >= 150, "only {} languages", table.len());
        for lang in table.iter() {
            if let Some(g) = &lang.grammar {
                assert!(
                    lang.ts_language.is_some(),
                    "grammar `{g}` of `{}` does not resolve with default features",
                    lang.name
                );
            }
        }
    }

    #[test]
    fn lookups() {
        let t = LanguageTable::builtin();
        let name = |p: &str| t.for_path(Path::new(p)).map(|l| l.name.as_str());
        assert_eq!(name("src/a.rs"), Some("rust"));
        assert_eq!(name("A.PY"), Some("python"));
        assert_eq!(name("x/Makefile"), Some("make"));
        assert_eq!(name("Dockerfile.dev"), Some("dockerfile"));
        assert_eq!(name("notes.txt"), None);
        assert_eq!(name("README"), None);
        let sb = |l: &str| t.for_shebang(l.as_bytes()).map(|l| l.name.as_str());
        assert_eq!(sb("#!/usr/bin/env python3"), Some("python"));
        assert_eq!(sb("#!/bin/bash -e"), Some("bash"));
        assert_eq!(sb("#!/usr/bin/env -S ruby -w"), Some("ruby"));
        assert_eq!(sb("no shebang"), None);
    }

    #[test]
    fn rejects_bad_tables() {
        let err = |t: &str| LanguageTable::parse(t).unwrap_err().to_string();
        let row = |name: &str, ext: &str| {
            format!(
                "[[language]]\nname = \"{name}\"\nfile-types = [\"{ext}\"]\nline-comment = \"#\"\n"
            )
        };
        assert!(err(&format!("{}{}", row("b", "x"), row("a", "y"))).contains("sorted"));
        assert!(err(&format!("{}{}", row("a", "x"), row("b", "x"))).contains("claimed by both"));
        assert!(err(
            "[[language]]\nname = \"a\"\nfile-types = [\"x\"]\nline-comment = \"#\"\ncolour = 1\n"
        )
        .contains("unknown field"));
        assert!(err("[[language]]\nname = \"a\"\nfile-types = [\"x\"]\n")
            .contains("needs a line-comment"));
        assert!(err("[[language]]\nname = \"a\"\nfile-types = [\"x\"]\nline-comment = \"#\"\ngrammar = \"nope\"\ncomment-kinds = [\"comment\"]\n")
            .contains("unknown grammar"));
        assert!(err("[[language]]\nname = \"a\"\nfile-types = [\"x\"]\nline-comment = \"#\"\ngrammar = \"python\"\ncomment-kinds = [\"remark\"]\n")
            .contains("no node kind `remark`"));
        let with = |extra: &str| {
            format!(
                "[[language]]\nname = \"a\"\nfile-types = [\"x\"]\nline-comment = \"#\"\n{extra}\n"
            )
        };
        assert!(err(&with("string-holes = [[\"${\", \"}\"]]")).contains("need multiline-strings"));
        assert!(err(&with("multiline-strings = ['`']\nstring-holes = [[\"${\", \")\"]]"))
            .contains("closes with one bracket"));
        assert!(err(&with("multiline-strings = ['`']\nstring-holes = [[\"${\", \"}}\"]]"))
            .contains("closes with one bracket"));
        assert!(err(&with("variable-sigils = \"$a\"")).contains("punctuation"));
        assert!(err(&with("block-scalar-properties = \"!\"")).contains("need block-scalars"));
        assert!(err(&with("raw-strings = [\"\"]")).contains("must not be empty"));
        assert!(err(&with("line-block-comments = [[\"=\", \"\"]]")).contains("must not be empty"));
    }

    /// Issue 26: the multi-line string forms the token reading needs after a syntax error are
    /// in the rows that have them.
    #[test]
    fn multi_line_string_forms_are_in_the_table() {
        let t = LanguageTable::builtin();
        let row = |name: &str| t.get(name).unwrap();
        let opens = |d: &[Delimiters], open: &str| d.iter().any(|d| d.open == open);
        let bash = row("bash");
        assert!(
            opens(&bash.raw_strings, "'") && !opens(&bash.strings, "'"),
            "shell '…' spans lines"
        );
        assert!(opens(&bash.multiline_strings, "$'") && bash.code_escapes);
        assert!(opens(&bash.string_holes, "$("));
        let cs = row("c-sharp");
        for open in ["@\"", "$@\"", "@$\""] {
            assert!(opens(&cs.raw_strings, open), "C# {open}");
        }
        let perl = row("perl");
        assert_eq!(perl.variable_sigils, "$@");
        assert!(opens(&perl.line_block_comments, "="));
        assert!(
            perl.block_comments.is_empty(),
            "POD is a line-block comment, not a token anywhere"
        );
        assert_eq!(row("yaml").block_scalar_properties, "!&");
        assert!(row("haskell").lexed_kinds.iter().any(|k| k == "cpp"));
        for name in ["javascript", "tsx", "typescript"] {
            assert!(opens(&row(name).string_holes, "${"), "{name} templates have holes");
        }
        assert!(row("javascript").jsx_text && row("tsx").jsx_text && !row("typescript").jsx_text);
        // Issue 31: where `<<` is an operator, and where a heredoc word may stand after spaces.
        for name in ["ruby", "perl", "crystal"] {
            assert!(row(name).shift_operator, "{name}: `<<` is also an operator");
        }
        for name in ["bash", "ebuild", "rpm-spec"] {
            assert!(opens(&row(name).arithmetic, "(("), "{name}: `$(( 1 << n ))`");
        }
        assert_eq!(row("ruby").heredoc_space, HeredocSpace::Glued);
        assert_eq!(row("perl").heredoc_space, HeredocSpace::Quoted);
        assert_eq!(row("php").heredoc_space, HeredocSpace::Any);
        assert_eq!(row("bash").heredoc_space, HeredocSpace::Any);
        // Every raw string and hole is a multi-line form: none of them is also a one-line string.
        for lang in t.iter() {
            for d in &lang.raw_strings {
                assert!(!opens(&lang.strings, &d.open), "{}: {} twice", lang.name, d.open);
            }
        }
    }
}
