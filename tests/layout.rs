//! The source stays a size a newcomer can hold (issue 32's targets): no file under src/ holds
//! more than 900 lines of code, no function is longer than 100 lines.
//!
//! Lines of code, as tokei counts them, but for the production code only: blank lines,
//! comments (`//`, `///`, `//!`, `/* … */` on lines of their own) and `#[cfg(test)]` items (the
//! unit tests) are not counted. A function runs from its `fn` line to its closing brace, every
//! line counted; it is found by rustfmt's layout (the brace closes at the `fn`'s indentation).
//!
//! And the modules import one way: no circle through their `crate::` paths (tests and comments
//! aside), so each can be read with only what is below it.
//!
//! `cargo test --test layout -- --nocapture` prints the longest files and functions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_CODE_LINES: usize = 900;
const MAX_FUNCTION_LINES: usize = 100;

/// One source file measured.
struct Measured {
    path: String,
    code_lines: usize,
    /// (lines, first line, name) of each function outside the unit tests.
    functions: Vec<(usize, usize, String)>,
    /// The crate's top-level modules its code names (`crate::watch::…` → `watch`).
    uses: BTreeSet<String>,
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The index of the line that closes the item opened at `start` (the `}` at its indentation),
/// or of the line that ends one without a body (`mod x;`) or on one line (`fn f() {}`).
fn item_end(lines: &[&str], start: usize) -> usize {
    let at = indent(lines[start]);
    for (i, line) in lines.iter().enumerate().skip(start) {
        let line = line.trim_end();
        if line.ends_with(';') || (i == start && line.ends_with('}')) {
            return i;
        }
        // The signature may run over several lines; the body opens at the first `{` ending one.
        if line.ends_with('{') {
            let closes = |l: &&str| indent(l) == at && matches!(l.trim(), "}" | "};");
            return (i + 1..lines.len()).find(|&j| closes(&lines[j])).unwrap_or(lines.len() - 1);
        }
    }
    lines.len() - 1
}

/// The name of the function declared on `line`, if one is.
fn function_name(line: &str) -> Option<&str> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|&w| w == "fn")?;
    let before_ok = words[..at].iter().all(|w| {
        w.starts_with("pub") || ["const", "async", "unsafe", "extern", "\"C\""].contains(w)
    });
    let name = words.get(at + 1)?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(name.len());
    (before_ok && end > 0).then(|| &name[..end])
}

fn measure(path: &Path) -> Measured {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (mut code_lines, mut functions, mut uses) = (0, Vec::new(), BTreeSet::new());
    let mut in_block_comment = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if in_block_comment || line.starts_with("/*") {
            in_block_comment = !line.contains("*/");
        } else if line == "#[cfg(test)]" {
            // The item under it (after its attributes and doc comments) is the unit tests'.
            let mut item = i + 1;
            while item < lines.len() && {
                let l = lines[item].trim();
                l.starts_with("#[") || l.starts_with("//")
            } {
                item += 1;
            }
            i = item_end(&lines, item.min(lines.len() - 1)) + 1;
            continue;
        } else if !line.is_empty() && !line.starts_with("//") {
            code_lines += 1;
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'));
                uses.insert(rest[..end.unwrap_or(rest.len())].to_string());
            }
            if let Some(name) = function_name(line) {
                let end = item_end(&lines, i);
                functions.push((end - i + 1, i + 1, name.to_string()));
            }
        }
        i += 1;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = path.strip_prefix(repo).unwrap_or(path).to_string_lossy().replace('\\', "/");
    Measured { path, code_lines, functions, uses }
}

/// The top-level module a file under src/ belongs to (`src/watch/tree.rs` → `watch`).
fn module_of(path: &str) -> String {
    let inside = path.trim_start_matches("src/");
    let top = inside.split('/').next().unwrap_or(inside);
    top.trim_end_matches(".rs").to_string()
}

/// A circle in `graph`, as the modules along it (the first again at the end), if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        module: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut found = path[at..].to_vec();
            found.push(module.to_string());
            return Some(found);
        }
        if !done.insert(module.to_string()) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

fn measured() -> Vec<Measured> {
    let mut files = Vec::new();
    source_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    files.sort();
    files.iter().map(|p| measure(p)).collect()
}

#[test]
fn no_file_over_900_lines_of_code_nor_function_over_100_lines() {
    let all = measured();
    let mut files: Vec<(usize, &str)> =
        all.iter().map(|m| (m.code_lines, m.path.as_str())).collect();
    files.sort_by(|a, b| b.cmp(a));
    let mut functions: Vec<(usize, String)> = all
        .iter()
        .flat_map(|m| {
            m.functions.iter().map(|(n, line, name)| (*n, format!("{}:{line} {name}", m.path)))
        })
        .collect();
    functions.sort_by(|a, b| b.cmp(a));
    println!("lines of code (no tests, comments or blank lines), the longest files:");
    for (n, path) in files.iter().take(12) {
        println!("{n:6}  {path}");
    }
    println!("the longest functions (lines from `fn` to its closing brace):");
    for (n, at) in functions.iter().take(12) {
        println!("{n:6}  {at}");
    }
    let total: usize = files.iter().map(|(n, _)| n).sum();
    let count: usize = all.iter().map(|m| m.functions.len()).sum();
    println!("{} files, {total} lines of code, {count} functions", files.len());
    assert!(count > 500, "only {count} functions found: the measure is broken");
    let long_files: Vec<_> = files.iter().filter(|(n, _)| *n > MAX_CODE_LINES).collect();
    let long_functions: Vec<_> =
        functions.iter().filter(|(n, _)| *n > MAX_FUNCTION_LINES).collect();
    assert!(
        long_files.is_empty() && long_functions.is_empty(),
        "split these by job (docs/development.md's module map names each file):\n\
         files over {MAX_CODE_LINES} lines of code: {long_files:?}\n\
         functions over {MAX_FUNCTION_LINES} lines: {long_functions:?}"
    );
}

#[test]
fn the_modules_import_one_way() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in measured() {
        let module = module_of(&m.path);
        let uses: Vec<String> =
            m.uses.into_iter().filter(|u| *u != module && u != "test_support").collect();
        graph.entry(module).or_default().extend(uses);
    }
    assert!(graph.get("live").is_some_and(|u| u.contains("scan")), "the parser is broken");
    assert_eq!(circle(&graph), None, "a circle of modules (through their crate:: paths)");
}

/// The measure itself: what counts as code, where a function ends, and that the unit tests
/// are left out.
#[test]
fn the_measure_counts_code_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.rs");
    let text = "//! A module.\n\nuse std::fmt;\n\n/// Doc.\npub(crate) fn one(\n    a: u8,\n) -> u8 {\n    // why\n    a\n}\n\n/* a\n   block */\nfn two() {}\n\n#[cfg(test)]\nmod tests {\n    fn three() {\n        let x = 1;\n    }\n}\n";
    std::fs::write(&path, text).unwrap();
    let m = measure(&path);
    assert_eq!(m.code_lines, 7, "use, one's 5 code lines, two");
    assert_eq!(m.functions, vec![(6, 6, "one".to_string()), (1, 15, "two".to_string())]);
    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
        }
        g
    };
    assert_eq!(circle(&graph(&[("a", "b"), ("b", "c")])), None);
    let found = circle(&graph(&[("a", "b"), ("b", "c"), ("c", "b")]));
    assert_eq!(found, Some(vec!["b".to_string(), "c".to_string(), "b".to_string()]));
    assert_eq!(module_of("src/watch/tree.rs"), "watch");
    assert_eq!(module_of("src/git.rs"), "git");
}
