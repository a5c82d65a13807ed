//! Near misses, for `scan --verbose`: where a comment almost holds an ask (`@Claude fix`,
//! `@claudefix`, `@claude:` and nothing more, the trigger after other words) and why it is none.
//!
//! The scan itself decides: the reading of one comment notes why a hit in it is no ask
//! ([`note`]), and [`Scanner::near_misses`] scans once more with that note-taking on, the hits
//! that differ from the trigger only in case written as the trigger, so that each is read as an
//! ask would be. Nothing is noted (one thread-local check, on a hit that is no ask) unless a
//! `near_misses` call is under way on this thread.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use super::Scanner;
use crate::languages::Language;

/// Why a hit in a comment is no ask: what the reading of its comment noted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Miss {
    pub(super) why: Why,
    /// Where what the hint quotes ends (it starts at the hit).
    pub(super) end: usize,
}

/// Why a comment that almost holds an ask holds none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// `@Claude fix this`: the trigger is matched case for case.
    Case,
    /// `// see @claude fix this`: the trigger must start the comment's text.
    NotAtStart,
    /// `@claude`, `@claude:` with nothing after it.
    NothingToAsk,
    /// `@claudefix`, `@claudette`: a longer word, not the trigger.
    Glued,
    /// `@claude:fix`: the `:` or `,` must be followed by whitespace.
    NoSpace(char),
    /// `@claude[fw-XYZ]`: brackets right after the trigger that are no tag.
    BadTag,
}

/// A comment that almost holds an ask: where, what was typed, and why it is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearMiss {
    /// 1-based line of the hit.
    pub line: usize,
    /// 1-based byte column of the hit on its line (a BOM does not count).
    pub column: usize,
    /// The text the hint quotes, from the hit on (`@Claude`, `@claude:`, `@claudefix`).
    pub typed: String,
    /// The trigger the scan looked for.
    pub trigger: String,
    /// Why it is no ask.
    pub why: Why,
}

impl fmt::Display for NearMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (typed, trigger) = (&self.typed, &self.trigger);
        match self.why {
            Why::Case => write!(f, "`{typed}` is not the trigger `{trigger}`: it is case-sensitive"),
            Why::NotAtStart => write!(
                f,
                "`{trigger}` must start the comment (right after `//`, `#` … and spaces) to be an ask"
            ),
            Why::NothingToAsk => write!(f, "nothing to ask after `{typed}`"),
            Why::Glued => write!(
                f,
                "`{typed}` is another word: the trigger must be followed by whitespace, `:` or `,`"
            ),
            Why::NoSpace(p) => {
                write!(f, "`{typed}`: `{p}` after the trigger must be followed by whitespace")
            }
            Why::BadTag => write!(
                f,
                "`{typed}`: brackets right after the trigger must hold a tag (`[fw-` and 8 \
                 lowercase hex digits `]`)"
            ),
        }
    }
}

thread_local! {
    /// The misses noted on this thread while a [`Scanner::near_misses`] call runs: (hit, miss).
    static NOTES: RefCell<Option<Vec<(usize, Miss)>>> = const { RefCell::new(None) };
}

/// Notes why the hit at `hit` is no ask, if a [`Scanner::near_misses`] call is listening.
pub(super) fn note(hit: usize, miss: Miss) {
    NOTES.with(|notes| {
        if let Some(notes) = notes.borrow_mut().as_mut() {
            notes.push((hit, miss));
        }
    });
}

/// Runs `scan` with note-taking on, and returns what it noted.
fn noting<T>(scan: impl FnOnce() -> T) -> (T, Vec<(usize, Miss)>) {
    let previous = NOTES.with(|notes| notes.borrow_mut().replace(Vec::new()));
    let out = scan();
    let noted = NOTES.with(|notes| std::mem::replace(&mut *notes.borrow_mut(), previous));
    (out, noted.unwrap_or_default())
}

impl Scanner<'_> {
    /// The comments of `src` that almost hold an ask, and why each holds none, in file order.
    /// Hits outside comments (strings, code) and in words (`me@claude.ai`) are none of these.
    pub fn near_misses(&self, lang: &Language, src: &[u8]) -> Vec<NearMiss> {
        let trigger = self.trigger.as_bytes();
        let hits = hits_in_any_case(src, trigger);
        if hits.is_empty() {
            return Vec::new();
        }
        let asks: HashSet<usize> =
            self.scan(lang, src).iter().map(|m| m.insert_at - trigger.len()).collect();
        let mut folded = src.to_vec();
        for &hit in &hits {
            folded[hit..hit + trigger.len()].copy_from_slice(trigger);
        }
        let (found, noted) = noting(|| self.scan_untagged(lang, &folded, &hits, None));
        let exact = |hit: usize| &src[hit..hit + trigger.len()] == trigger;
        let mut misses: Vec<(usize, Miss)> = found
            .iter()
            .filter(|f| !exact(f.hit) && !asks.contains(&f.hit))
            .map(|f| (f.hit, Miss { why: Why::Case, end: f.hit + trigger.len() }))
            .collect();
        // A hit in another case that is no ask even as the trigger is not almost one.
        misses.extend(noted.into_iter().filter(|(hit, _)| exact(*hit) && !asks.contains(hit)));
        misses.sort_by_key(|(hit, _)| *hit);
        misses.dedup_by_key(|(hit, _)| *hit);
        misses.into_iter().map(|(hit, miss)| self.place(src, hit, miss)).collect()
    }

    fn place(&self, src: &[u8], hit: usize, miss: Miss) -> NearMiss {
        let line_start = src[..hit].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let bom = if line_start == 0 && src.starts_with(super::BOM) { super::BOM.len() } else { 0 };
        let end = miss.end.clamp(hit, src.len());
        NearMiss {
            line: 1 + memchr::memchr_iter(b'\n', &src[..hit]).count(),
            column: hit - line_start - bom + 1,
            typed: String::from_utf8_lossy(&src[hit..end]).into_owned(),
            trigger: self.trigger.clone(),
            why: miss.why,
        }
    }
}

/// The offsets where `trigger` is, ASCII letters in any case.
fn hits_in_any_case(src: &[u8], trigger: &[u8]) -> Vec<usize> {
    if trigger.is_empty() || src.len() < trigger.len() {
        return Vec::new();
    }
    let first = trigger[0];
    let mut hits = Vec::new();
    let mut from = 0;
    let last = src.len() - trigger.len();
    while let Some(i) =
        memchr::memchr2(first.to_ascii_lowercase(), first.to_ascii_uppercase(), &src[from..])
    {
        let at = from + i;
        if at > last {
            break;
        }
        if src[at..at + trigger.len()].eq_ignore_ascii_case(trigger) {
            hits.push(at);
            from = at + trigger.len();
        } else {
            from = at + 1;
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::languages::LanguageTable;

    fn near(lang: &str, src: &str) -> Vec<(usize, usize, String, Why)> {
        let table = LanguageTable::builtin();
        let scanner = Scanner::new(table, "@claude").unwrap();
        let misses = scanner.near_misses(table.get(lang).unwrap(), src.as_bytes());
        misses.into_iter().map(|m| (m.line, m.column, m.typed, m.why)).collect()
    }

    #[test]
    fn in_a_fallback_language_and_a_block_comment() {
        let crystal =
            "# @claude:\nx = 1\n# @CLAUDE fix\ny = 2\n# mail me@claude.ai\n# @claude: ok\n";
        assert_eq!(
            near("crystal", crystal),
            [
                (1, 3, "@claude:".to_string(), Why::NothingToAsk),
                (3, 3, "@CLAUDE".to_string(), Why::Case)
            ]
        );
        let css = "/* @claude,why */\na {}\n/* @claude[fw-XYZ] x */\n/* @claude.foo x */\n";
        assert_eq!(
            near("css", css),
            [
                (1, 4, "@claude,why".to_string(), Why::NoSpace(',')),
                (3, 4, "@claude[fw-XYZ]".to_string(), Why::BadTag)
            ]
        );
        // A string is no comment: nothing almost asks there.
        assert!(near("python", "s = '# @Claude fix'\n").is_empty());
    }
}
