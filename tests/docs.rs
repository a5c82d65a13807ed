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
