//! Incremental parsing never changes what a scan finds: random edits of the corpus's inputs
//! (every grammar, embedded languages, broken files, CRLF) give the same markers through an
//! edited syntax tree ([`Scanner::scan_incremental`]) as from scratch ([`Scanner::scan`]).

use std::path::Path;

use filewatch_mcp::languages::{Language, LanguageTable};
use filewatch_mcp::scan::{Scanner, TreeCache, DEFAULT_TRIGGER};
use proptest::prelude::*;

/// The inputs of the corpus's cases (see `corpus/README.md`), with their languages.
fn corpus() -> Vec<(&'static Language, Vec<u8>)> {
    let table = LanguageTable::builtin();
    let mut files = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "txt") {
                files.push(path);
            }
        }
    }
    files.sort();
    let rule = |l: &str, c: char| l.len() >= 3 && l.chars().all(|x| x == c);
    let mut cases = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // Headers: `===`, a name, `:attribute` lines, `===`.
        let mut headers = Vec::new();
        for i in 0..lines.len() {
            if !rule(lines[i], '=') || i + 2 >= lines.len() {
                continue;
            }
            let close = (i + 2..lines.len()).find(|&j| !lines[j].starts_with(':'));
            if let Some(close) = close.filter(|&j| rule(lines[j], '=')) {
                headers.push((i, close));
            }
        }
        for (k, &(open, close)) in headers.iter().enumerate() {
            let end = headers.get(k + 1).map_or(lines.len(), |h| h.0);
            let attrs = &lines[open + 2..close];
            let attr = |name: &str| {
                attrs.iter().find_map(|a| a.strip_prefix(&format!(":{name}("))?.strip_suffix(')'))
            };
            let lang = match (attr("language"), attr("file")) {
                (Some(name), _) => table.get(name),
                (None, Some(file)) => table.for_path(Path::new(file)),
                _ => None,
            };
            let (Some(lang), None) = (lang, attr("trigger")) else { continue };
            let body = &lines[close + 1..end];
            let divider = body
                .iter()
                .enumerate()
                .filter(|(_, l)| rule(l, '-'))
                .max_by_key(|(i, l)| (l.len(), *i))
                .map_or(body.len(), |(i, _)| i);
            let mut input = body[..divider].join("\n") + "\n";
            if attrs.contains(&":crlf") {
                input = input.replace('\n', "\r\n");
            }
            cases.push((lang, input.into_bytes()));
        }
    }
    cases
}

/// Text an edit inserts: markers, comment and string delimiters, embedded-language tags, line
/// breaks of both kinds, and random printable bytes.
fn insertion() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"@claude ".to_vec()),
        Just(b"// @claude look here\n".to_vec()),
        Just(b"# @claude and here\r\n".to_vec()),
        Just(b"/* @claude a block */".to_vec()),
        Just(b"<!-- @claude -->".to_vec()),
        Just(b"<script>// @claude in a script\n</script>".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"/*".to_vec()),
        Just(b"*/".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"'".to_vec()),
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"[fw-0123abcd]".to_vec()),
        "[ -~]{0,8}".prop_map(String::into_bytes),
        Just("é€".as_bytes().to_vec()),
    ]
}

/// One edit: where (a fraction of the length), how many bytes to delete, what to insert.
fn edit() -> impl Strategy<Value = (f64, usize, Vec<u8>)> {
    (0.0..=1.0f64, prop_oneof![3 => Just(0usize), 1 => 1usize..30], insertion())
}

fn apply(src: &[u8], (at, delete, insert): &(f64, usize, Vec<u8>)) -> Vec<u8> {
    let start = ((src.len() as f64) * at) as usize;
    let end = (start + delete).min(src.len());
    [&src[..start], insert, &src[end..]].concat()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn edits_scan_the_same_incrementally(
        case in any::<prop::sample::Index>(),
        edits in proptest::collection::vec(edit(), 1..6),
    ) {
        let cases = corpus();
        let (lang, mut src) = cases[case.index(cases.len())].clone();
        let scanner = Scanner::new(LanguageTable::builtin(), DEFAULT_TRIGGER).unwrap();
        let mut trees = TreeCache::new();
        let key = Path::new("/project/file");
        scanner.scan_incremental(lang, &src, &mut trees, key);
        for e in &edits {
            src = apply(&src, e);
            let incremental = scanner.scan_incremental(lang, &src, &mut trees, key);
            let full = scanner.scan(lang, &src);
            prop_assert_eq!(
                incremental, full,
                "{} after {:?}:\n{}", lang.name, e, String::from_utf8_lossy(&src)
            );
        }
    }
}

/// The property above holds vacuously if no tree is ever reused: a save of a big file with a
/// marker is parsed incrementally, and the same bytes again not at all.
#[test]
fn a_small_edit_of_a_big_file_is_parsed_incrementally() {
    let lang = LanguageTable::builtin().get("python").unwrap();
    let scanner = Scanner::new(LanguageTable::builtin(), DEFAULT_TRIGGER).unwrap();
    let mut src = String::new();
    for i in 0..2000 {
        src.push_str(&format!("def f{i}(x):\n    return x + {i}\n\n"));
    }
    let mut trees = TreeCache::new();
    let key = Path::new("/project/big.py");
    let first = format!("{src}# @claude one\n");
    assert_eq!(scanner.scan_incremental(lang, first.as_bytes(), &mut trees, key).len(), 1);
    let second = format!("{src}# @claude two\r\n# @claude three\n");
    let markers = scanner.scan_incremental(lang, second.as_bytes(), &mut trees, key);
    assert_eq!(markers, scanner.scan(lang, second.as_bytes()));
    assert_eq!(markers.len(), 2);
    scanner.scan_incremental(lang, second.as_bytes(), &mut trees, key);
    let counts = trees.counts();
    assert_eq!((counts.full, counts.incremental, counts.unchanged), (1, 1, 1));
    assert!(trees.bytes() > second.len(), "the tree's memory is counted");
}

/// A tree with parse errors is never reused (an edit could hide a marker behind the error), so
/// it must not be kept either: it would only take memory and push out trees that can be.
#[test]
fn a_tree_with_errors_is_not_kept() {
    let lang = LanguageTable::builtin().get("python").unwrap();
    let scanner = Scanner::new(LanguageTable::builtin(), DEFAULT_TRIGGER).unwrap();
    let mut trees = TreeCache::new();
    let key = Path::new("/project/half.py");
    let src = "def f(:\n    return (\n# @claude half-edited\n";
    scanner.scan_incremental(lang, src.as_bytes(), &mut trees, key);
    assert_eq!(trees.bytes(), 0, "a tree with errors is kept");
    scanner.scan_incremental(lang, src.as_bytes(), &mut trees, key);
    assert_eq!(trees.counts().full, 2);
}
