//! Pure byte splices on scanned files: stamping tags after triggers, and resolving (removing) a
//! marker by id. Nothing but the tag bytes (or the removed marker) ever changes.

use crate::id::MarkerId;
use crate::languages::Language;
use crate::lines::line_start;
use crate::scan::Marker;

/// One tag to insert: `[id]` goes at `insert_at` (right after the trigger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// Byte offset right after the trigger.
    pub insert_at: usize,
    /// The new ask's id.
    pub id: MarkerId,
}

/// A resolve that found nothing to remove.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The file holds no marker tagged with this id.
    #[error("no marker with id {0} in this file")]
    UnknownId(MarkerId),
}

/// Stamps for every untagged marker, each with a fresh id unique in `src` and among themselves.
pub fn plan(src: &[u8], markers: &[Marker], mut random: impl FnMut() -> u128) -> Vec<Stamp> {
    let mut taken = MarkerId::all_in(src);
    let mut stamps = Vec::new();
    for m in markers.iter().filter(|m| !m.is_tagged()) {
        let id = MarkerId::fresh(&taken, &mut random);
        taken.insert(id);
        stamps.push(Stamp { insert_at: m.insert_at, id });
    }
    stamps
}

/// `src` with `[id]` inserted at each stamp's offset; every other byte is kept as it was.
///
/// # Panics
/// If an offset is past the end of `src` (stamps must come from a scan of these bytes).
pub fn splice(src: &[u8], stamps: &[Stamp]) -> Vec<u8> {
    let mut order: Vec<&Stamp> = stamps.iter().collect();
    order.sort_by_key(|s| s.insert_at);
    let mut out = Vec::with_capacity(src.len() + stamps.len() * MarkerId::TAG_LEN);
    let mut cursor = 0;
    for s in order {
        out.extend_from_slice(&src[cursor..s.insert_at]);
        out.extend_from_slice(s.id.tag().as_bytes());
        cursor = s.insert_at;
    }
    out.extend_from_slice(&src[cursor..]);
    out
}

/// `src` without the marker(s) tagged `id`: a comment alone on its line goes with its whole line
/// (line ending included); a comment after code goes with the whitespace before it; a comment
/// before code goes with the whitespace after it. Nothing else changes.
pub fn resolve(src: &[u8], markers: &[Marker], id: MarkerId) -> Result<Vec<u8>, ResolveError> {
    let tagged: Vec<&Marker> = markers.iter().filter(|m| m.tag == Some(id)).collect();
    if tagged.is_empty() {
        return Err(ResolveError::UnknownId(id));
    }
    Ok(remove(src, &tagged))
}

/// `src` without the given markers (each as [`resolve`] removes one); nothing else changes.
pub fn remove(src: &[u8], markers: &[&Marker]) -> Vec<u8> {
    let mut cuts: Vec<(usize, usize)> =
        markers.iter().map(|m| removal(src, m.comment.start, m.comment.end)).collect();
    cuts.sort_unstable();
    let mut out = Vec::with_capacity(src.len());
    let mut cursor = 0;
    for (start, end) in cuts {
        let start = start.max(cursor);
        out.extend_from_slice(&src[cursor..start]);
        cursor = cursor.max(end);
    }
    out.extend_from_slice(&src[cursor..]);
    out
}

/// True if the marker is a paragraph of line comments over several lines (not one block
/// comment): an ask whose lines can be told apart, and cut.
pub fn is_paragraph(lang: &Language, src: &[u8], m: &Marker) -> bool {
    let comment = &src[m.comment.clone()];
    m.end_line > m.line
        && !lang.block_comments.iter().any(|d| comment.starts_with(d.open.as_bytes()))
}

/// A paragraph marker cut to its first `lines` lines (at least one): its text, last line and
/// comment range shortened; any other marker as it is.
pub fn first_lines(lang: &Language, src: &[u8], m: &Marker, lines: usize) -> Marker {
    let lines = lines.max(1);
    if !is_paragraph(lang, src, m) || m.line + lines > m.end_line {
        return m.clone();
    }
    // The end of the `lines`-th physical line of the comment, without its line ending.
    let mut end = m.comment.start;
    for _ in 0..lines {
        let rest = &src[end..m.comment.end];
        end = memchr::memchr(b'\n', rest).map_or(m.comment.end, |i| end + i + 1);
    }
    let mut end = end.min(m.comment.end);
    while end > m.comment.start && matches!(src[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let text: Vec<&str> = m.text.split('\n').take(lines).collect();
    Marker {
        end_line: m.line + lines - 1,
        comment: m.comment.start..end,
        text: text.join("\n"),
        ..m.clone()
    }
}

/// The lines of ask `m` written with it — the one rule by which `scan`, `stamp`, the server
/// and every resolve read an ask: a paragraph of line comments ends before its first
/// continuation line that `was_there` (given the line without its ending) says the file held
/// already — a licence header, a `// SAFETY:` note, a doc comment the ask was written above.
/// A paragraph whose own first line (without its tag) was there was there as an ask (a
/// committed one), and is kept whole; any other marker is as it is.
pub fn written_with(
    lang: &Language,
    src: &[u8],
    m: &Marker,
    mut was_there: impl FnMut(&[u8]) -> bool,
) -> Marker {
    if !is_paragraph(lang, src, m) {
        return m.clone();
    }
    let start = line_start(src, m.comment.start);
    let first_end =
        memchr::memchr(b'\n', &src[m.insert_at..]).map_or(src.len(), |i| m.insert_at + i);
    let tag_len = m.tag.map_or(0, |id| id.tag().len());
    let mut first = src[start..m.insert_at].to_vec();
    first.extend_from_slice(&src[(m.insert_at + tag_len).min(first_end)..first_end]);
    if was_there(first.strip_suffix(b"\r").unwrap_or(&first)) {
        return m.clone();
    }
    let lines = src[start..m.comment.end].split(|&b| b == b'\n');
    let new = lines.skip(1).take_while(|l| !was_there(l.strip_suffix(b"\r").unwrap_or(l))).count();
    first_lines(lang, src, m, new + 1)
}

/// The byte range to delete for a comment at `start..end`.
fn removal(src: &[u8], start: usize, end: usize) -> (usize, usize) {
    let is_blank = |b: &u8| *b == b' ' || *b == b'\t';
    let line_start =
        src[..start].iter().rposition(|&b| b == b'\n' || b == b'\r').map_or(0, |i| i + 1);
    let line_end =
        src[end..].iter().position(|&b| b == b'\n' || b == b'\r').map_or(src.len(), |i| end + i);
    let before = &src[line_start..start];
    let before_blank = before.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(before).iter().all(is_blank);
    let after_blank = src[end..line_end].iter().all(is_blank);
    match (before_blank, after_blank) {
        (true, true) => {
            // The whole line, its ending too (`\r\n`, `\n` or a lone `\r`); a BOM stays.
            let keep_bom = if line_start == 0 && src.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
            let mut cut_end = line_end;
            if src[cut_end..].starts_with(b"\r\n") {
                cut_end += 2;
            } else if cut_end < src.len() {
                cut_end += 1;
            } else if line_start > 0 {
                // The last line has no ending: take the one before it instead, so the file
                // does not keep a trailing empty line it never had.
                let prev_end = line_start - 1;
                let prev_end = if prev_end > 0 && &src[prev_end - 1..=prev_end] == b"\r\n" {
                    prev_end - 1
                } else {
                    prev_end
                };
                return (prev_end, line_end);
            }
            (line_start + keep_bom, cut_end)
        }
        (false, _) => {
            let ws = src[..start].iter().rev().take_while(|b| is_blank(b)).count();
            (start - ws, end)
        }
        (true, false) => {
            let ws = src[end..].iter().take_while(|b| is_blank(b)).count();
            (start, end + ws)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::languages::LanguageTable;
    use crate::scan::Scanner;

    fn markers(lang: &str, src: &[u8]) -> Vec<Marker> {
        let table = LanguageTable::builtin();
        Scanner::new(table, "@claude").unwrap().scan(table.get(lang).unwrap(), src)
    }

    fn id(text: &str) -> MarkerId {
        text.parse().unwrap()
    }

    fn counter() -> impl FnMut() -> u128 {
        let mut n = 0u128;
        move || {
            n += 1;
            n << 96
        }
    }

    fn stamp_all(lang: &str, src: &[u8]) -> Vec<u8> {
        splice(src, &plan(src, &markers(lang, src), counter()))
    }

    #[test]
    fn stamp_changes_only_the_tag_bytes() {
        let cases: &[(&str, &[u8], &[u8])] = &[
            ("python", b"# @claude a\n", b"# @claude[fw-00000001] a\n"),
            // no final newline, CRLF, BOM, tabs and trailing spaces survive
            (
                "python",
                b"\xEF\xBB\xBFx = 1\r\n\t# @claude a  \r\n# b",
                b"\xEF\xBB\xBFx = 1\r\n\t# @claude[fw-00000001] a  \r\n# b",
            ),
            // CR-only and mixed endings
            (
                "go",
                b"package a\r// @claude x\n// @claude y\r\n",
                b"package a\r// @claude[fw-00000001] x\n// @claude[fw-00000002] y\r\n",
            ),
            // invalid UTF-8 elsewhere
            (
                "rust",
                b"// \xff\xfe\nfn a() {} // @claude b\n",
                b"// \xff\xfe\nfn a() {} // @claude[fw-00000001] b\n",
            ),
            // tagged markers are left alone
            (
                "rust",
                b"// @claude[fw-0000000a] old\n// @claude new\n",
                b"// @claude[fw-0000000a] old\n// @claude[fw-00000001] new\n",
            ),
        ];
        for (lang, src, want) in cases {
            assert_eq!(stamp_all(lang, src), *want, "{}", String::from_utf8_lossy(src));
        }
    }

    #[test]
    fn fresh_ids_avoid_ids_in_the_file_and_each_other() {
        let src = b"// fw-00000001 is mentioned here\n// @claude a\n// @claude b\n";
        let stamps = plan(src, &markers("rust", src), counter());
        let ids: Vec<String> = stamps.iter().map(|s| s.id.to_string()).collect();
        assert_eq!(ids, ["fw-00000002", "fw-00000003"]);
        let real = plan(src, &markers("rust", src), crate::id::uuid_random);
        assert_ne!(real[0].id, real[1].id);
    }

    #[test]
    fn resolve_removes_exactly_the_marker() {
        let cases: &[(&str, &[u8], &[u8])] = &[
            ("python", b"a = 1\n# @claude[fw-0000000a] x\nb = 2\n", b"a = 1\nb = 2\n"),
            ("python", b"a = 1\r\n  # @claude[fw-0000000a] x\r\nb = 2\r\n", b"a = 1\r\nb = 2\r\n"),
            ("python", b"a = 1  # @claude[fw-0000000a] x\nb = 2\n", b"a = 1\nb = 2\n"),
            ("python", b"a = 1\n# @claude[fw-0000000a] x", b"a = 1"),
            ("python", b"# @claude[fw-0000000a] x", b""),
            ("python", b"\xEF\xBB\xBF# @claude[fw-0000000a] x\nb\n", b"\xEF\xBB\xBFb\n"),
            ("c", b"/* @claude[fw-0000000a] x */ int a;\n", b"int a;\n"),
            ("c", b"int a; /* @claude[fw-0000000a] x */ int b;\n", b"int a; int b;\n"),
            ("go", b"package a\r// @claude[fw-0000000a] x\rvar b = 1\r", b"package a\rvar b = 1\r"),
        ];
        for (lang, src, want) in cases {
            let got = resolve(src, &markers(lang, src), id("fw-0000000a")).unwrap();
            assert_eq!(got, *want, "{}", String::from_utf8_lossy(src));
        }
        // Multi-line asks go whole: a paragraph, a block (its lines), nothing else.
        let multi: &[(&str, &[u8], &[u8])] = &[
            (
                "python",
                b"a = 1\n# @claude[fw-0000000a] x\n# more\n#\nb = 2\n",
                b"a = 1\n#\nb = 2\n",
            ),
            (
                "rust",
                b"fn a() {}\r\n/* @claude[fw-0000000a] x\r\n * y\r\n */\r\nfn b() {}\r\n",
                b"fn a() {}\r\nfn b() {}\r\n",
            ),
            (
                "go",
                b"x := 1 // @claude[fw-0000000a] x\n       // more\ny := 2\n",
                b"x := 1\ny := 2\n",
            ),
        ];
        for (lang, src, want) in multi {
            let got = resolve(src, &markers(lang, src), id("fw-0000000a")).unwrap();
            assert_eq!(got, *want, "{}", String::from_utf8_lossy(src));
        }
        let err =
            resolve(b"# @claude x\n", &markers("python", b"# @claude x\n"), id("fw-12345678"))
                .unwrap_err();
        assert_eq!(err.to_string(), "no marker with id fw-12345678 in this file");
    }

    #[test]
    fn a_paragraph_cut_to_its_first_lines() {
        let table = LanguageTable::builtin();
        let src = b"x = 1\n# @claude fix this\n# and that\n# SAFETY: old\ny = 2\n";
        let m = &markers("python", src)[0];
        assert_eq!((m.line, m.end_line), (2, 4));
        let cut = first_lines(table.get("python").unwrap(), src, m, 2);
        assert_eq!(
            (cut.line, cut.end_line, cut.text.as_str()),
            (2, 3, "@claude fix this\nand that")
        );
        assert_eq!(remove(src, &[&cut]), b"x = 1\n# SAFETY: old\ny = 2\n");
        // A block comment is one unit: never cut.
        let block = b"/* @claude a\n * b */\nfn f() {}\n";
        let m = &markers("rust", block)[0];
        assert_eq!(first_lines(table.get("rust").unwrap(), block, m, 1), *m);
    }
}
