//! Property tests of the pure stamp and resolve splices on random files: stamping inserts the
//! tags and nothing else, keeps every marker a marker, is idempotent, and resolve undoes a line.

use filewatch_mcp::languages::LanguageTable;
use filewatch_mcp::scan::{Marker, Scanner};
use filewatch_mcp::stamp::{plan, resolve, splice};
use filewatch_mcp::{uuid_random, MarkerId};

const TAG_LEN: usize = MarkerId::TAG_LEN;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Line {
    /// Random bytes without line breaks: code, strings, garbage, invalid UTF-8.
    Noise(Vec<u8>),
    /// A comment alone on its line; `punct` is what follows the trigger (`@claude: fix`).
    Marker { indent: String, punct: &'static str, ask: String },
    /// A comment after some code.
    Trailing { code: String, punct: &'static str, ask: String },
    /// A marker comment and line comments of the same style below it: one multi-line ask.
    Paragraph { indent: String, ask: String, more: Vec<String> },
    /// A block comment over several lines (`/* @claude …` ⏎ ` * …` ⏎ ` */`), where the
    /// language has one.
    Block { indent: String, ask: String, more: Vec<String> },
}

fn line() -> impl Strategy<Value = Line> {
    let ask = "[a-zA-Z0-9 ?.,()]{0,20}[a-z?]";
    prop_oneof![
        3 => proptest::collection::vec(any::<u8>().prop_filter("no breaks", |b| *b != b'\n' && *b != b'\r'), 0..40)
            .prop_map(Line::Noise),
        2 => ("[ \t]{0,6}", punct(), ask).prop_map(|(indent, punct, ask)| Line::Marker { indent, punct, ask }),
        1 => ("[a-z]{1,8} = [0-9]{1,3}", punct(), ask)
            .prop_map(|(code, punct, ask)| Line::Trailing { code, punct, ask }),
        1 => ("[ \t]{0,4}", ask, proptest::collection::vec("[a-z][a-z ,]{0,12}", 1..4))
            .prop_map(|(indent, ask, more)| Line::Paragraph { indent, ask, more }),
        1 => ("[ \t]{0,4}", ask, proptest::collection::vec("[a-z][a-z ,]{0,12}", 1..4))
            .prop_map(|(indent, ask, more)| Line::Block { indent, ask, more }),
    ]
}

/// What may follow the trigger before the ask's whitespace: nothing, `:` or `,`.
fn punct() -> impl Strategy<Value = &'static str> {
    prop_oneof![2 => Just(""), 1 => Just(":"), 1 => Just(",")]
}

/// (language, line comment token, has `/* */` block comments)
const LANGUAGES: &[(&str, &str, bool)] = &[
    ("python", "#", false),
    ("rust", "//", true),
    ("go", "//", true),
    ("ruby", "#", false),
    ("elixir", "#", false),
];

fn file() -> impl Strategy<Value = (usize, Vec<u8>)> {
    (
        0..LANGUAGES.len(),
        proptest::collection::vec(line(), 0..30),
        prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lang, lines, eol, bom, final_eol)| {
            let token = LANGUAGES[lang].1;
            let mut out = Vec::new();
            if bom {
                out.extend_from_slice(b"\xEF\xBB\xBF");
            }
            let blocks = LANGUAGES[lang].2;
            for (i, l) in lines.iter().enumerate() {
                match l {
                    Line::Noise(b) => out.extend_from_slice(b),
                    Line::Marker { indent, punct, ask } => out.extend_from_slice(
                        format!("{indent}{token} @claude{punct} {ask}").as_bytes(),
                    ),
                    Line::Trailing { code, punct, ask } => out.extend_from_slice(
                        format!("{code}  {token} @claude{punct} {ask}").as_bytes(),
                    ),
                    Line::Paragraph { indent, ask, more } => {
                        out.extend_from_slice(format!("{indent}{token} @claude {ask}").as_bytes());
                        for m in more {
                            out.extend_from_slice(format!("{eol}{indent}{token} {m}").as_bytes());
                        }
                    }
                    Line::Block { indent, ask, more } if blocks => {
                        out.extend_from_slice(format!("{indent}/* @claude {ask}").as_bytes());
                        for m in more {
                            out.extend_from_slice(format!("{eol}{indent} * {m}").as_bytes());
                        }
                        out.extend_from_slice(format!("{eol}{indent} */").as_bytes());
                    }
                    Line::Block { indent, ask, .. } => {
                        out.extend_from_slice(format!("{indent}{token} @claude {ask}").as_bytes())
                    }
                }
                if i + 1 < lines.len() || final_eol {
                    out.extend_from_slice(eol.as_bytes());
                }
            }
            (lang, out)
        })
}

fn scan(lang: usize, src: &[u8]) -> Vec<Marker> {
    let table = LanguageTable::builtin();
    let scanner = Scanner::new(table, "@claude").unwrap();
    scanner.scan(table.get(LANGUAGES[lang].0).unwrap(), src)
}

proptest! {
    // 200 cases by default; `PROPTEST_CASES=5000` for a deeper run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(200),
        ..ProptestConfig::default()
    })]

    #[test]
    fn stamping_inserts_only_tags_and_keeps_every_marker((lang, src) in file()) {
        let before = scan(lang, &src);
        let stamps = plan(&src, &before, uuid_random);
        let out = splice(&src, &stamps);

        // Output minus the tags is the input, byte for byte.
        let mut rebuilt = Vec::new();
        let mut cursor = 0;
        let mut sorted = stamps.clone();
        sorted.sort_by_key(|s| s.insert_at);
        for (k, s) in sorted.iter().enumerate() {
            let at = s.insert_at + k * TAG_LEN;
            rebuilt.extend_from_slice(&out[cursor..at]);
            let tag = format!("[{}]", s.id);
            prop_assert_eq!(&out[at..at + TAG_LEN], tag.as_bytes());
            cursor = at + TAG_LEN;
        }
        rebuilt.extend_from_slice(&out[cursor..]);
        prop_assert_eq!(&rebuilt, &src);

        // The same markers are found, now all tagged, with the planned ids.
        let after = scan(lang, &out);
        prop_assert_eq!(after.len(), before.len());
        let mut ids = stamps.iter().map(|s| s.id);
        for (b, a) in before.iter().zip(&after) {
            // Same line and ask; its offset moved by exactly the tags stamped before it.
            let shift = stamps.iter().filter(|s| s.insert_at < b.insert_at).count() * TAG_LEN;
            prop_assert_eq!((b.line, &b.text, b.insert_at + shift), (a.line, &a.text, a.insert_at));
            prop_assert!(a.is_tagged());
            if !b.is_tagged() {
                prop_assert_eq!(a.tag, ids.next());
            }
        }

        // Stamping again changes nothing.
        prop_assert!(plan(&out, &after, uuid_random).is_empty());
    }

    #[test]
    fn resolving_a_stamped_line_gives_the_file_without_that_line((lang, src) in file()) {
        let markers = scan(lang, &src);
        let Some(m) = markers.iter().find(|m| !m.is_tagged() && alone_on_its_line(&src, m)) else {
            return Ok(());
        };
        let stamps = plan(&src, std::slice::from_ref(m), uuid_random);
        let out = splice(&src, &stamps);
        let resolved = resolve(&out, &scan(lang, &out), stamps[0].id).unwrap();
        prop_assert_eq!(resolved, without_line(&src, m));
    }
}

/// `@claude: …` and `@claude, …` (issue 33): the tag goes right after the trigger, before the
/// `:` or `,`, the ask keeps them as typed, and resolve removes the whole line.
#[test]
fn a_colon_or_comma_ask_is_stamped_after_the_trigger_and_resolved() {
    for (lang, src, resolved) in [
        (0, "import os\n# @claude: use pathlib\nx = 1\n", "import os\nx = 1\n"),
        (1, "fn f() {}\n// @claude, why?\nfn g() {}\n", "fn f() {}\nfn g() {}\n"),
        (3, "x = 1  # @claude: why one?\n", "x = 1\n"),
    ] {
        let src = src.as_bytes();
        let markers = scan(lang, src);
        assert_eq!(markers.len(), 1, "{}: {markers:?}", String::from_utf8_lossy(src));
        let stamps = plan(src, &markers, uuid_random);
        let out = splice(src, &stamps);
        let id = stamps[0].id;
        let punct = if src.windows(8).any(|w| w == b"@claude:") { ':' } else { ',' };
        let stamped = format!("@claude[{id}]{punct} ");
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains(&stamped), "{stamped:?} not in {text}");
        let again = scan(lang, &out);
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].tag, &again[0].text), (Some(id), &markers[0].text));
        assert!(again[0].text.starts_with(&format!("@claude{punct} ")));
        let out = resolve(&out, &again, id).unwrap();
        assert_eq!(String::from_utf8_lossy(&out), resolved);
    }
}

fn is_break(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

fn line_bounds(src: &[u8], m: &Marker) -> (usize, usize) {
    let start = src[..m.comment.start].iter().rposition(|&b| is_break(b)).map_or(0, |i| i + 1);
    let end = src[m.comment.end..]
        .iter()
        .position(|&b| is_break(b))
        .map_or(src.len(), |i| m.comment.end + i);
    (start, end)
}

fn alone_on_its_line(src: &[u8], m: &Marker) -> bool {
    let (start, end) = line_bounds(src, m);
    let before = &src[start..m.comment.start];
    let before = before.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(before);
    let blank = |s: &[u8]| s.iter().all(|&b| b == b' ' || b == b'\t');
    blank(before) && blank(&src[m.comment.end..end])
}

/// The spec of resolve for a comment alone on its line: the line and its ending go; a last
/// line without an ending takes the ending before it; a BOM stays.
fn without_line(src: &[u8], m: &Marker) -> Vec<u8> {
    let (mut start, end) = line_bounds(src, m);
    let mut cut_end = end;
    if src[end..].starts_with(b"\r\n") {
        cut_end += 2;
    } else if end < src.len() {
        cut_end += 1;
    } else if start > 0 {
        start -= if start >= 2 && &src[start - 2..start] == b"\r\n" { 2 } else { 1 };
    }
    if start == 0 && src.starts_with(b"\xEF\xBB\xBF") {
        start = 3;
    }
    [&src[..start], &src[cut_end..]].concat()
}
