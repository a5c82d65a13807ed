//! The documentation holds together: every relative link in README.md and docs/*.md names a file
//! that exists (and, with `#anchor`, a heading in it), and README.md stays a landing page — at
//! most 16 KB, with the registration commands near its top.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// README.md's size limit: a landing page, the reference lives in docs/.
const README_MAX_BYTES: usize = 16 * 1024;
/// The registration commands must be visible without scrolling far.
const REGISTRATION_WITHIN_LINES: usize = 80;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, sorted.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ holds no .md page");
    pages.extend(docs);
    pages
}

/// The lines of a Markdown text outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// A line with its inline code spans blanked out, so `[a](b)` inside backticks is not a link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// The targets of the inline links `[text](target)` and images on one line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        // `[text](target "title")`: the target is the first word.
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    targets
}

/// GitHub's anchor for a heading: lowercase, punctuation dropped (but `-` and `_`), each space a `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a page's headings make, with GitHub's `-1`, `-2` for repeated headings.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

#[test]
fn slugs_match_githubs() {
    assert_eq!(slug("Two sessions in one repository"), "two-sessions-in-one-repository");
    assert_eq!(
        slug("Security: only what you typed reaches Claude"),
        "security-only-what-you-typed-reaches-claude"
    );
    assert_eq!(
        slug("The server (`filewatch-mcp`, `filewatch-mcp serve`)"),
        "the-server-filewatch-mcp-filewatch-mcp-serve"
    );
    let a = anchors("# A\n## B\n```\n# not a heading\n```\n## B\n");
    assert_eq!(a, ["a", "b", "b-1"].into_iter().map(String::from).collect());
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(repo()).unwrap().display().to_string();
        for (number, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let path =
                    if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
                if !path.exists() {
                    broken.push(format!("{name}:{number}: {target}: no such file"));
                    continue;
                }
                if let Some(anchor) = anchor {
                    let target_text = std::fs::read_to_string(&path).unwrap_or_default();
                    if !anchors(&target_text).contains(anchor) {
                        broken
                            .push(format!("{name}:{number}: {target}: no heading makes #{anchor}"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 0, "no relative link found: the parser is broken");
}

#[test]
fn readme_is_a_landing_page() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.len() <= README_MAX_BYTES,
        "README.md is {} bytes, more than {README_MAX_BYTES}: move reference material to docs/",
        readme.len()
    );
    let top: Vec<&str> = readme.lines().take(REGISTRATION_WITHIN_LINES).collect();
    for command in ["claude mcp add filewatch", "claude plugin install"] {
        assert!(
            top.iter().any(|l| l.contains(command)),
            "`{command}` is not in README.md's first {REGISTRATION_WITHIN_LINES} lines"
        );
    }
}

#[test]
fn the_readme_links_every_docs_page() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let linked: HashSet<String> = prose_lines(&readme)
        .into_iter()
        .flat_map(|(_, l)| link_targets(l))
        .map(|t| t.split('#').next().unwrap().to_string())
        .collect();
    let unlinked: Vec<String> = pages()[1..]
        .iter()
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .filter(|p| !linked.contains(p))
        .collect();
    assert!(unlinked.is_empty(), "README.md does not link {unlinked:?}");
}

// ---- measured numbers name their command --------------------------------------------------

/// A Markdown block the measurement check reads: a paragraph, one list item, or one table row.
struct Block {
    line: usize,
    text: String,
    /// In a section whose heading says "Measurements".
    in_measurements: bool,
}

/// A quantity with a unit of time or size (`388 s`, `3–4 minutes`, `576 MiB`, `2,721 bytes`,
/// `1.5 / 2.5 ms`), outside code spans: what a measured number looks like.
fn quantities(text: &str) -> Vec<String> {
    const UNITS: &[&str] = &[
        "ms", "s", "min", "minute", "minutes", "h", "hour", "hours", "second", "seconds", "KB",
        "MB", "GB", "KiB", "MiB", "GiB", "bytes",
    ];
    let text = without_code_spans(text);
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut found = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let number = w.trim_start_matches(['(', '~', '≈']);
        let is_number = number.chars().next().is_some_and(|c| c.is_ascii_digit())
            && number.chars().all(|c| c.is_ascii_digit() || ",.–-".contains(c));
        let unit = words.get(i + 1).map(|u| u.trim_end_matches([',', ';', ')', '.', ':']));
        if is_number && unit.is_some_and(|u| UNITS.contains(&u)) {
            found.push(format!("{number} {}", unit.unwrap()));
        }
    }
    found
}

/// A table's cells, trimmed (`| a | b |` → `["a", "b"]`).
fn cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|').trim_end_matches('|');
    row.split('|').map(|c| c.trim().to_string()).collect()
}

/// A table: its header cells and its rows.
struct Table {
    header: Vec<String>,
    rows: Vec<Block>,
}

/// The paragraphs and list items of a page, and its tables.
fn blocks(text: &str) -> (Vec<Block>, Vec<Table>) {
    let mut blocks: Vec<Block> = Vec::new();
    let mut tables: Vec<Table> = Vec::new();
    let mut in_measurements = false;
    let mut open = false; // a paragraph or list item that the next line continues
    let mut table_line = false; // the line before was a table's
    let mut last = 0;
    for (number, line) in prose_lines(text) {
        let trimmed = line.trim();
        // A code block in between (prose_lines drops it) ends a paragraph or a table too.
        let adjacent = number == last + 1;
        last = number;
        if !trimmed.starts_with('|') {
            table_line = false;
        }
        if trimmed.starts_with('#') {
            in_measurements = trimmed.to_lowercase().contains("measurements");
            open = false;
        } else if trimmed.starts_with('|') {
            open = false;
            let row = cells(trimmed);
            let divider =
                row.iter().all(|c| !c.is_empty() && c.chars().all(|ch| "-:".contains(ch)));
            match tables.last_mut() {
                Some(table) if table_line && adjacent => {
                    if !divider {
                        let text = trimmed.to_string();
                        table.rows.push(Block { line: number, text, in_measurements });
                    }
                }
                _ => tables.push(Table { header: row, rows: Vec::new() }),
            }
            table_line = true;
        } else if trimmed.is_empty() {
            open = false;
        } else {
            let item = trimmed.starts_with("- ")
                || trimmed.starts_with("* ")
                || trimmed.split_once(". ").is_some_and(|(n, _)| n.parse::<u32>().is_ok());
            match blocks.last_mut() {
                Some(b) if open && adjacent && !item => {
                    b.text.push(' ');
                    b.text.push_str(trimmed);
                }
                _ => {
                    blocks.push(Block { line: number, text: trimmed.to_string(), in_measurements })
                }
            }
            open = true;
        }
    }
    (blocks, tables)
}

/// Words that say a number was measured (here, not in another program's documentation).
fn says_measured(text: &str) -> bool {
    let text = without_code_spans(text).to_lowercase();
    ["measured", "of cpu", " wall", "peak rss"].iter().any(|w| text.contains(w))
}

/// A link to a measurement table's section (`[measured](development.md#measurements)`).
fn links_measurements(text: &str) -> bool {
    link_targets(text).iter().any(|t| t.ends_with("#measurements"))
}

/// A measurement table: one with a `measured`, `measure` or `command` column, or any table in
/// a Measurements section.
fn is_measurement_table(table: &Table) -> bool {
    let named =
        |c: &String| ["measured", "measure", "command"].contains(&c.to_lowercase().as_str());
    table.header.iter().any(named) || table.rows.first().is_some_and(|r| r.in_measurements)
}

/// Pages whose measured numbers do not name their command yet, each with the reason: an open
/// item, not a rule (a page is taken off when its commands are written down).
const NO_COMMAND_YET: &[(&str, &str)] = &[(
    "docs/claude-code-hooks.md",
    "observations from hand runs (e1–e4) of Claude Code 2.1.332 against tests/common/claude.rs's \
     scripted API; the commands of those runs are not recorded (issue 29)",
)];

/// Every number README.md and docs/*.md state as measured names the command that measured it,
/// by the convention of docs/development.md#measurements: a measurement table (a `measured`
/// column, or in a Measurements section) has a `command` column with a command in backticks
/// in every row; prose that states a measured number (it says *measured*, *of CPU*, *wall*,
/// *peak RSS*, beside a time or a size) links to a measurement table's section, unless it is in
/// one.
#[test]
fn measured_numbers_name_their_command() {
    let mut missing = Vec::new();
    let mut measured = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(repo()).unwrap().display().to_string();
        if NO_COMMAND_YET.iter().any(|(page, _)| name.replace('\\', "/") == *page) {
            continue;
        }
        let (blocks, tables) = blocks(&text);
        for table in &tables {
            if !is_measurement_table(table) {
                continue;
            }
            let Some(command) = table.header.iter().position(|c| c == "command") else {
                let line = table.rows.first().map_or(0, |r| r.line - 2);
                missing
                    .push(format!("{name}:{line}: a measurement table without a `command` column"));
                continue;
            };
            for row in &table.rows {
                measured += 1;
                if !cells(&row.text).get(command).is_some_and(|c| c.contains('`')) {
                    missing.push(format!("{name}:{}: no command in the `command` cell", row.line));
                }
            }
        }
        let rows = tables.iter().filter(|t| !is_measurement_table(t)).flat_map(|t| &t.rows);
        for block in blocks.iter().chain(rows) {
            let numbers = quantities(&block.text);
            if numbers.is_empty() || !says_measured(&block.text) {
                continue;
            }
            measured += 1;
            if !block.in_measurements && !links_measurements(&block.text) {
                missing.push(format!(
                    "{name}:{}: {} measured, but no command: link the measurement table that \
                     holds it ([measured](…#measurements))",
                    block.line,
                    numbers.join(", ")
                ));
            }
        }
    }
    assert!(measured > 0, "no measured number found: the parser is broken");
    assert!(missing.is_empty(), "measured numbers without their command:\n{}", missing.join("\n"));
}

#[test]
fn quantities_are_found_outside_code() {
    assert_eq!(
        quantities("388 s of CPU, 3–4 minutes and (576 MiB)"),
        ["388 s", "3–4 minutes", "576 MiB"]
    );
    assert_eq!(quantities("`--settle 5s` and `1 MiB` in code, 12 files"), Vec::<String>::new());
    let (blocks, tables) = blocks(
        "# T\n\npara one\ngoes on\n- item\n\n| measured | command |\n|---|---|\n| 1 s | `x` |\n",
    );
    assert_eq!(
        blocks.iter().map(|b| b.text.as_str()).collect::<Vec<_>>(),
        ["para one goes on", "- item"]
    );
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].rows.len(), 1);
    assert!(is_measurement_table(&tables[0]));
}

// ---- the module map names every source file ------------------------------------------------

/// The module map: the entries (`src/…`, first on their line) of the code block under
/// docs/development.md's "Module map" heading, with their line numbers.
fn module_map() -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(repo().join("docs/development.md")).unwrap();
    let start = text
        .lines()
        .position(|l| l.starts_with('#') && l.contains("Module map"))
        .expect("docs/development.md has a \"Module map\" heading");
    let mut lines = text.lines().enumerate().skip(start + 1);
    lines.by_ref().find(|(_, l)| l.starts_with("```")).expect("a code block under it");
    lines
        .take_while(|(_, l)| !l.starts_with("```"))
        .filter_map(|(i, l)| {
            let first = l.split_whitespace().next()?;
            first.starts_with("src/").then(|| (i + 1, first.to_string()))
        })
        .collect()
}

/// Every file under src/, as `src/a/b.rs`, sorted.
fn source_files() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                let relative = path.strip_prefix(repo()).unwrap();
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo().join("src"), &mut files);
    files.sort();
    files
}

/// docs/development.md's module map is the newcomer's way in: it names every file under src/
/// (one entry each, a directory naming none of them), and every entry is a file that exists.
#[test]
fn the_module_map_names_every_source_file() {
    let map = module_map();
    assert!(map.len() > 10, "the module map has {} entries: the parser is broken", map.len());
    let named: HashSet<&str> = map.iter().map(|(_, entry)| entry.as_str()).collect();
    let files = source_files();
    let unnamed: Vec<&String> = files.iter().filter(|f| !named.contains(f.as_str())).collect();
    let not_files: Vec<String> = map
        .iter()
        .filter(|(_, entry)| !repo().join(entry).is_file())
        .map(|(line, entry)| format!("docs/development.md:{line}: {entry}"))
        .collect();
    let mut twice: Vec<&str> = map.iter().map(|(_, e)| e.as_str()).collect();
    twice.sort();
    twice.dedup();
    assert!(
        unnamed.is_empty() && not_files.is_empty() && twice.len() == map.len(),
        "docs/development.md's module map must name each file under src/ once.\n\
         not in the map: {unnamed:?}\nin the map but not a file: {not_files:?}\n\
         entries: {}, distinct: {}",
        map.len(),
        twice.len()
    );
}
