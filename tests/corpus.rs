//! Runs every case in `corpus/**/*.txt` as its own test (see `corpus/README.md` for the format).
//! `CORPUS_UPDATE=1 cargo test --test corpus` rewrites the expected sections from the scanner.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use filewatch_mcp::languages::LanguageTable;
use filewatch_mcp::scan::{Marker, Scanner, DEFAULT_TRIGGER};
use libtest_mimic::{Arguments, Failed, Trial};

/// One `===` case of a corpus file.
#[derive(Debug, Clone)]
struct Case {
    name: String,
    attributes: Vec<String>,
    input: Vec<String>,
    expected: Vec<String>,
    /// The lines of the case in its file, header included, for rewriting.
    lines: std::ops::Range<usize>,
    expected_start: usize,
}

fn is_rule(line: &str, ch: char) -> bool {
    line.len() >= 3 && line.chars().all(|c| c == ch)
}

fn parse_file(text: &str) -> Result<Vec<Case>, String> {
    let lines: Vec<&str> = text.lines().collect();
    // Case starts: a `===` line followed (after name and attributes) by another `===` line.
    let mut starts = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if is_rule(lines[i], '=') {
            let close = (i + 1..lines.len()).find(|&j| is_rule(lines[j], '='));
            let Some(close) = close else {
                return Err(format!("line {}: header is not closed", i + 1));
            };
            starts.push((i, close));
            i = close + 1;
            // Skip to the next header: the next `===` that is followed by a closing `===`
            // with only a name and attributes between.
            while i < lines.len() {
                if is_rule(lines[i], '=')
                    && (i + 1..lines.len().min(i + 12))
                        .find(|&j| is_rule(lines[j], '='))
                        .is_some_and(|j| {
                            j > i + 1 && lines[i + 2..j].iter().all(|l| l.starts_with(':'))
                        })
                {
                    break;
                }
                i += 1;
            }
        } else if lines[i].trim().is_empty() {
            i += 1;
        } else {
            return Err(format!("line {}: text before the first case header", i + 1));
        }
    }
    let mut cases = Vec::new();
    for (k, &(open, close)) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map_or(lines.len(), |s| s.0);
        let header = &lines[open + 1..close];
        let Some((name, attrs)) = header.split_first() else {
            return Err(format!("line {}: case without a name", open + 1));
        };
        let body = &lines[close + 1..end];
        // The divider is the longest dashed line (the last one on ties).
        let divider = body
            .iter()
            .enumerate()
            .filter(|(_, l)| is_rule(l, '-'))
            .max_by_key(|(i, l)| (l.len(), *i))
            .map(|(i, _)| i)
            .ok_or_else(|| format!("case {name:?}: no `---` divider"))?;
        let mut input: Vec<String> = body[..divider].iter().map(|s| s.to_string()).collect();
        while input.last().is_some_and(|l| l.is_empty()) {
            input.pop();
        }
        let mut expected: Vec<String> = body[divider + 1..].iter().map(|s| s.to_string()).collect();
        while expected.last().is_some_and(|l| l.trim().is_empty()) {
            expected.pop();
        }
        cases.push(Case {
            name: name.trim().to_string(),
            attributes: attrs.iter().map(|s| s.trim().to_string()).collect(),
            input,
            expected,
            lines: open..end,
            expected_start: close + 1 + divider + 1,
        });
    }
    Ok(cases)
}

fn attr<'a>(case: &'a Case, key: &str) -> Option<&'a str> {
    case.attributes
        .iter()
        .find_map(|a| a.strip_prefix(':')?.strip_prefix(key)?.strip_prefix('(')?.strip_suffix(')'))
}

fn has_flag(case: &Case, flag: &str) -> bool {
    case.attributes.iter().any(|a| a == &format!(":{flag}"))
}

/// The bytes the case's input stands for, after `:crlf`, `:bom`, `:no-final-newline`.
fn input_bytes(case: &Case) -> Vec<u8> {
    let eol = if has_flag(case, "crlf") { "\r\n" } else { "\n" };
    let mut text = case.input.join(eol);
    if !has_flag(case, "no-final-newline") {
        text.push_str(eol);
    }
    let mut bytes = Vec::new();
    if has_flag(case, "bom") {
        bytes.extend_from_slice(b"\xEF\xBB\xBF");
    }
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

/// `LINE:COLUMN MODE [TAG] {SYMBOL} TEXT`; a multi-line ask as `LINE:COLUMN..END_LINE`, its
/// line breaks shown as `⏎`; `{SYMBOL}` (`{Cache.refresh 3-5}`, `{}` for none) only if
/// `symbol`.
fn render(m: &Marker, symbol: bool) -> String {
    let mut s = format!("{}:{}", m.line, m.column);
    if m.end_line != m.line {
        write!(s, "..{}", m.end_line).unwrap();
    }
    write!(s, " {} ", m.decided_by.mode()).unwrap();
    if let Some(tag) = &m.tag {
        write!(s, "[{tag}] ").unwrap();
    }
    match (&m.symbol, symbol) {
        (Some(sym), true) => {
            write!(s, "{{{} {}-{}}} ", sym.name, sym.first_line, sym.last_line).unwrap()
        }
        (None, true) => s.push_str("{} "),
        (_, false) => {}
    }
    s.push_str(&m.text.replace('\n', "⏎"));
    s
}

/// True if an expected line names the marker's symbol (`{…}` after the mode and the tag).
fn names_symbol(line: &str) -> bool {
    let mut words = line.splitn(4, ' ').skip(2);
    let next = words.next().unwrap_or_default();
    let next = if next.starts_with("[fw-") { words.next().unwrap_or_default() } else { next };
    next.starts_with('{')
}

fn run_case(case: &Case) -> Result<Vec<String>, String> {
    const KNOWN: &[&str] = &["language", "file", "crlf", "bom", "no-final-newline", "trigger"];
    for a in &case.attributes {
        let key = a.trim_start_matches(':').split('(').next().unwrap_or_default();
        if !a.starts_with(':') || !KNOWN.contains(&key) {
            return Err(format!("unknown attribute {a:?}"));
        }
    }
    let table = LanguageTable::builtin();
    let bytes = input_bytes(case);
    let lang = match (attr(case, "language"), attr(case, "file")) {
        (Some(name), _) => table.get(name).ok_or_else(|| format!("no language named {name:?}"))?,
        (None, Some(file)) => table
            .detect(Path::new(file), &bytes)
            .ok_or_else(|| format!("no language for file {file:?}"))?,
        (None, None) => return Err("needs :language(NAME) or :file(NAME)".into()),
    };
    let trigger = attr(case, "trigger").unwrap_or(DEFAULT_TRIGGER);
    let scanner = Scanner::new(table, trigger).map_err(|e| e.to_string())?;
    // The symbol is checked where the expected line names one (or `CORPUS_SYMBOLS=1` asks for
    // it everywhere, to write new cases with `CORPUS_UPDATE`).
    let all = std::env::var_os("CORPUS_SYMBOLS").is_some_and(|v| v != "0");
    let markers = scanner.scan(lang, &bytes);
    let symbol = |i: usize| all || case.expected.get(i).is_some_and(|l| names_symbol(l));
    Ok(markers.iter().enumerate().map(|(i, m)| render(m, symbol(i))).collect())
}

fn corpus_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            corpus_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "txt") {
            out.push(p);
        }
    }
}

/// Rewrites the expected sections of `path` with what the scanner finds now.
fn update_file(path: &Path, text: &str, cases: &[Case]) -> Result<(), String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut cursor = 0;
    for case in cases {
        for l in &lines[cursor..case.expected_start] {
            out.push_str(l);
            out.push('\n');
        }
        for m in run_case(case)? {
            out.push_str(&m);
            out.push('\n');
        }
        cursor = case.lines.end;
        if cursor < lines.len() {
            out.push('\n');
        }
    }
    std::fs::write(path, out).map_err(|e| e.to_string())
}

fn main() {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut files = Vec::new();
    corpus_files(&root, &mut files);
    let update = std::env::var_os("CORPUS_UPDATE").is_some_and(|v| v != "0");
    let mut trials = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&root).unwrap().with_extension("");
        let file_name = rel.to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(&path).expect("corpus files are UTF-8");
        let cases = match parse_file(&text) {
            Ok(c) => c,
            Err(e) => {
                let msg = format!("{}: {e}", path.display());
                trials.push(Trial::test(format!("{file_name}::(file)"), move || Err(msg.into())));
                continue;
            }
        };
        if update {
            if let Err(e) = update_file(&path, &text, &cases) {
                panic!("{}: {e}", path.display());
            }
        }
        let mut seen = std::collections::HashSet::new();
        for case in cases {
            let name = format!("{file_name}::{}", case.name);
            let duplicate = !seen.insert(case.name.clone());
            trials.push(Trial::test(name, move || {
                if duplicate {
                    return Err(Failed::from(format!("case name {:?} used twice", case.name)));
                }
                let got = run_case(&case)?;
                if update || got == case.expected {
                    return Ok(());
                }
                Err(format!(
                    "markers differ\n--- expected\n{}\n--- found\n{}\n--- input\n{}",
                    case.expected.join("\n"),
                    got.join("\n"),
                    case.input.join("\n")
                )
                .into())
            }));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
