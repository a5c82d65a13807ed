//! Which recorded ask each marker of a file is: the one rule, used by the live pipeline (on each
//! save, when it claims new asks, when it writes their tags), by `list_asks`, and by the
//! server's `resolve_ask` and the CLI's `resolve`. A tagged marker is its tag's ask. An untagged
//! one is the record whose text it has (an editor's stale copy, or `--tag never`): a pending
//! one — the one written at the same code first, then the nearest to where the save's diff put
//! it — or one resolved within the window at the very place it was resolved (a stale buffer
//! writing it back). One record per untagged marker: the same words in two places are two asks.

use std::cell::{LazyCell, OnceCell};
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::asks::{self, AskRecord};
use crate::autosave::LineDiff;
use crate::id::MarkerId;
use crate::languages::Language;
use crate::lines::{content_hash, line_start};
use crate::scan::Marker;
use crate::stamp;

/// One version of a file as a read of it found it: what its markers are paired with records in.
#[derive(Clone, Copy)]
pub struct InFile<'a> {
    /// The file's language.
    pub lang: &'a Language,
    /// Its bytes.
    pub src: &'a [u8],
    /// The file relative to the root, `/`-separated, as records name it.
    pub file: &'a str,
    /// Its markers, in file order, as scanned from `src`.
    pub markers: &'a [Marker],
    /// How this version's lines differ from the version the records were last placed in (the
    /// save's diff), when the live path knows it.
    pub diff: Option<LineDiff>,
}

impl<'a> InFile<'a> {
    /// The markers of `src`, with no diff known (the records' places are this version's, or
    /// unknown: a one-shot look).
    pub fn new(lang: &'a Language, src: &'a [u8], file: &'a str, markers: &'a [Marker]) -> Self {
        InFile { lang, src, file, markers, diff: None }
    }

    /// The same markers, seen through the save's `diff` (see [`InFile::diff`]).
    pub fn after(self, diff: Option<LineDiff>) -> Self {
        InFile { diff, ..self }
    }

    /// Where record `r` is expected in this version: the line it was last seen at, moved by
    /// the save's diff when it is known — so that two asks with the same words keep their ids
    /// when lines are inserted above them.
    fn expected_line(&self, r: &AskRecord) -> usize {
        self.diff.map_or(r.line, |d| d.map(r.line))
    }
}

/// Which recorded ask each marker of `found` is: an index into `records` per marker (see the
/// module's rule), `None` for a marker that is no recorded ask.
pub fn pair(found: &InFile, records: &[AskRecord]) -> Vec<Option<usize>> {
    let InFile { lang, src, file, markers, .. } = *found;
    let now = asks::now();
    let window = asks::RESOLVED_WINDOW.as_secs();
    let mine: Vec<usize> = (0..records.len())
        .filter(|&ri| records[ri].file == file)
        .filter(|&ri| records[ri].resolved.is_none_or(|at| now.saturating_sub(at) < window))
        .collect();
    // Indexed, so that a file with thousands of asks costs thousands of lookups, not millions
    // of comparisons: by id, and by (lines, text).
    let by_id: HashMap<MarkerId, usize> = mine.iter().map(|&ri| (records[ri].id, ri)).collect();
    let mut pairs: Vec<Option<usize>> =
        markers.iter().map(|m| m.tag.and_then(|id| by_id.get(&id).copied())).collect();
    let mut taken: HashSet<usize> = pairs.iter().flatten().copied().collect();
    let mut by_text: HashMap<(usize, &str), Vec<usize>> = HashMap::new();
    for &ri in mine.iter().filter(|ri| !taken.contains(ri)) {
        by_text.entry((records[ri].lines, records[ri].text.as_str())).or_default().push(ri);
    }
    let line_counts: BTreeSet<usize> = by_text.keys().map(|k| k.0).collect();
    // Every (marker, record) that could be a copy, best first: pending before resolved, then
    // the one written at what the marker is written at (the code around it moves with it,
    // whatever a save inserted above), then the nearest to where the record is expected.
    let mut candidates = Vec::new();
    for (mi, m) in markers.iter().enumerate().filter(|(_, m)| !m.is_tagged()) {
        let at = LazyCell::new(|| anchor(src, m));
        for &lines in &line_counts {
            let text = stamp::first_lines(lang, src, m, lines).text;
            for &ri in by_text.get(&(lines, text.as_str())).into_iter().flatten() {
                let r = &records[ri];
                let (resolved, line) = (r.resolved.is_some(), found.expected_line(r));
                let elsewhere = r.anchor != *at;
                if resolved && elsewhere && line != m.line {
                    continue; // the same words somewhere else: typed anew
                }
                candidates.push(((resolved, elsewhere, m.line.abs_diff(line)), mi, ri));
            }
        }
    }
    candidates.sort_unstable();
    for (_, mi, ri) in candidates {
        if pairs[mi].is_none() && taken.insert(ri) {
            pairs[mi] = Some(ri);
        }
    }
    pairs
}

/// The pending asks recorded for files that are gone (`gone`) which markers of `found` no
/// record of its own pairs with are, by [`pair`]'s rule as if recorded in this file — a tagged
/// marker its tag's, an untagged one only one written at the same code (its anchor) — as
/// indices into `records`. The file was moved (or its directory) without the watcher pairing
/// the rename: a directory moved into one made a moment before, a storm of moves. Only records
/// with a marker's words are looked at, and their files asked about.
pub fn moved_here(
    found: &InFile,
    records: &[AskRecord],
    gone: impl Fn(&str) -> bool,
) -> Vec<usize> {
    let InFile { src, file, markers, .. } = *found;
    let own = pair(found, records);
    let unpaired: Vec<usize> = (0..markers.len()).filter(|&mi| own[mi].is_none()).collect();
    if unpaired.is_empty() {
        return Vec::new();
    }
    let first = |t: &str| t.lines().next().unwrap_or_default().to_string();
    let words: HashSet<String> = unpaired.iter().map(|&mi| first(&markers[mi].text)).collect();
    let tags: HashSet<MarkerId> = unpaired.iter().filter_map(|&mi| markers[mi].tag).collect();
    let elsewhere: Vec<usize> = (0..records.len())
        .filter(|&ri| {
            let r = &records[ri];
            r.is_pending()
                && r.file != file
                && (tags.contains(&r.id) || words.contains(&first(&r.text)))
                && gone(&r.file)
        })
        .collect();
    if elsewhere.is_empty() {
        return Vec::new();
    }
    let here: Vec<AskRecord> = elsewhere
        .iter()
        .map(|&ri| AskRecord { file: file.to_string(), ..records[ri].clone() })
        .collect();
    let pairs = pair(found, &here);
    unpaired
        .into_iter()
        .filter_map(|mi| {
            let r = &here[pairs[mi]?];
            let m = &markers[mi];
            (m.is_tagged() || r.anchor == anchor(src, m)).then_some(elsewhere[pairs[mi]?])
        })
        .collect()
}

/// The markers of `found` that are the ask `record`: its tagged markers, or, with none, the one
/// untagged copy of its words nearest to where it was, or the untagged marker at its place
/// that the user cut short (see [`cut_short`]) — each cut to the lines of it that were
/// announced ([`own_lines`]).
pub fn markers_of(found: &InFile, record: &AskRecord) -> Vec<Marker> {
    let records = std::slice::from_ref(record);
    let pairs = cut_short(found, records, pair(found, records));
    let InFile { lang, src, markers, .. } = *found;
    markers
        .iter()
        .zip(pairs)
        .filter(|(_, p)| p.is_some())
        .map(|(m, _)| own_lines(lang, src, m, record))
        .collect()
}

/// Each marker of `found` with the ask it is, as a listing shows it: a tagged marker is its
/// tag's ask (recorded or not); an untagged one paired with a pending record (a copy of its
/// words, or the ask cut short at its place) is that ask, cut to the lines announced; any
/// other is no ask yet.
pub fn listed(found: &InFile, records: &[AskRecord]) -> Vec<(Marker, Option<MarkerId>)> {
    let pairs = cut_short(found, records, pair(found, records));
    let InFile { lang, src, markers, .. } = *found;
    markers
        .iter()
        .zip(pairs)
        .map(|(m, p)| match (m.tag, p.map(|ri| &records[ri])) {
            (Some(id), _) => (m.clone(), Some(id)),
            (None, Some(r)) if r.is_pending() => (own_lines(lang, src, m, r), Some(r.id)),
            (None, _) => (m.clone(), None),
        })
        .collect()
}

/// `pairs` with each pending record no marker is paired with given the untagged marker at its
/// place whose first line is still the record's: the user deleted or changed the lines after
/// it before the ask was tagged (an edit the live path announces as a revision once it
/// settles). It is still that ask for a lookup by id: `resolve_ask` removes what is left of
/// it, `list_asks` lists it under its id.
fn cut_short(
    found: &InFile,
    records: &[AskRecord],
    mut pairs: Vec<Option<usize>>,
) -> Vec<Option<usize>> {
    let paired: HashSet<usize> = pairs.iter().flatten().copied().collect();
    let places = Places::new(found);
    let unpaired = (0..records.len()).filter(|ri| !paired.contains(ri));
    for ri in unpaired.filter(|&ri| records[ri].file == found.file && records[ri].is_pending()) {
        let r = &records[ri];
        let Some(mi) = places.free_at(r, &pairs) else { continue };
        if first_line(&found.markers[mi].text) == first_line(&r.text) {
            pairs[mi] = Some(ri);
        }
    }
    pairs
}

/// Where the markers of a file stand, to find the one at a record's place.
pub struct Places<'f, 'a> {
    found: &'f InFile<'a>,
    /// The untagged markers by what they were written at ([`anchor`]), made when first asked.
    by_anchor: OnceCell<HashMap<u64, Vec<usize>>>,
}

impl<'f, 'a> Places<'f, 'a> {
    pub fn new(found: &'f InFile<'a>) -> Self {
        Places { found, by_anchor: OnceCell::new() }
    }

    /// The untagged marker no record is paired with (in `pairs`) that stands at record `r`'s
    /// place, whatever its words (what the user made of that ask since): on the line where
    /// the record is expected ([`InFile::expected_line`]), else written at the same code.
    pub fn free_at(&self, r: &AskRecord, pairs: &[Option<usize>]) -> Option<usize> {
        let markers = self.found.markers;
        let free = |mi: &usize| pairs[*mi].is_none() && !markers[*mi].is_tagged();
        let line = self.found.expected_line(r);
        let on_line = markers.partition_point(|m| m.line < line);
        let on_line = Some(on_line).filter(|&mi| markers.get(mi).is_some_and(|m| m.line == line));
        on_line.filter(free).or_else(|| {
            let by_anchor = self.by_anchor.get_or_init(|| {
                let mut by_anchor: HashMap<u64, Vec<usize>> = HashMap::new();
                for (mi, m) in markers.iter().enumerate().filter(|(_, m)| !m.is_tagged()) {
                    by_anchor.entry(anchor(self.found.src, m)).or_default().push(mi);
                }
                by_anchor
            });
            by_anchor.get(&r.anchor)?.iter().copied().find(free)
        })
    }
}

/// The lines of `m` that are the ask `r` as it was announced: its leading lines that still
/// read as the record has them (the first always: it is that ask), at most the record's — so
/// that a resolve takes neither a comment that moved up under an ask cut short nor a line
/// the user rewrote since.
pub fn own_lines(lang: &Language, src: &[u8], m: &Marker, r: &AskRecord) -> Marker {
    let same = m.text.split('\n').zip(r.text.split('\n')).skip(1).take_while(|(a, b)| a == b);
    stamp::first_lines(lang, src, m, (1 + same.count()).min(r.lines))
}

/// The first line of an ask's text.
fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap_or_default()
}

/// What a marker was written at: the code before it on its line and the next line after it
/// that is not blank, trimmed, hashed.
pub fn anchor(src: &[u8], m: &Marker) -> u64 {
    let start = line_start(src, m.comment.start);
    let before = src[start..m.comment.start].trim_ascii();
    let after = src[m.comment.end.min(src.len())..]
        .split(|&b| b == b'\n')
        .skip(1)
        .map(<[u8]>::trim_ascii)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let mut bytes = before.to_vec();
    bytes.push(b'\n');
    bytes.extend_from_slice(after);
    content_hash(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::languages::LanguageTable;
    use crate::scan::{Scanner, DEFAULT_TRIGGER};

    fn record(id: &str, line: usize, resolved: Option<u64>) -> AskRecord {
        AskRecord {
            id: id.parse().unwrap(),
            file: "a.py".into(),
            text: "@claude why?".into(),
            lines: 1,
            line,
            anchor: 0,
            announced: asks::now(),
            resolved,
            heard: None,
            unsent: false,
        }
    }

    /// The rule, on one file: a tagged marker is its tag's ask; two untagged copies of the same
    /// words are two asks, each the nearest record; a record resolved elsewhere is no copy.
    #[test]
    fn each_marker_is_at_most_one_record_the_nearest() {
        let table = LanguageTable::builtin();
        let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
        let lang = table.get("python").unwrap();
        let src = b"# @claude why?\nx = 1\n# @claude why?\ny = 2\n# @claude[fw-0000000c] why?\n";
        let markers = scanner.scan(lang, src);
        let records = [
            record("fw-0000000a", 3, None),
            record("fw-0000000b", 1, None),
            record("fw-0000000c", 5, None),
            record("fw-0000000d", 9, Some(asks::now())),
        ];
        let found = InFile::new(lang, src, "a.py", &markers);
        assert_eq!(pair(&found, &records), [Some(1), Some(0), Some(2)]);
        let ids: Vec<Option<String>> =
            listed(&found, &records[..1]).iter().map(|(_, id)| id.map(|i| i.to_string())).collect();
        assert_eq!(ids, [None, Some("fw-0000000a".into()), Some("fw-0000000c".into())]);
        let lines: Vec<usize> = markers_of(&found, &records[1]).iter().map(|m| m.line).collect();
        assert_eq!(lines, [1]);
    }

    /// Issue 30 (1): the same words above `f` (line 1) and `g` (line 6), recorded there; five
    /// lines inserted above both. Each marker is its own record — seen through the save's diff
    /// (the live path), and without one (`resolve_ask`, `list_asks`: by what it was written at).
    #[test]
    fn a_record_follows_its_marker_through_lines_inserted_above() {
        let table = LanguageTable::builtin();
        let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
        let lang = table.get("python").unwrap();
        let old: &[u8] = b"# @claude why?\ndef f(): pass\n\n\n\n# @claude why?\ndef g(): pass\n";
        let old_markers = scanner.scan(lang, old);
        let mut records = [record("fw-0000000f", 1, None), record("fw-00000009", 6, None)];
        records[0].anchor = anchor(old, &old_markers[0]);
        records[1].anchor = anchor(old, &old_markers[1]);
        let new = [b"import a\nimport b\nimport c\nimport d\nimport e\n".as_slice(), old].concat();
        let markers = scanner.scan(lang, &new);
        let diff = LineDiff::between(old, &new);
        let found = InFile::new(lang, &new, "a.py", &markers);
        assert_eq!(pair(&found.after(Some(diff)), &records), [Some(0), Some(1)], "with the diff");
        assert_eq!(pair(&found, &records), [Some(0), Some(1)], "without a diff");
    }
}
