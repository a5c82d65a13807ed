//! Lines and hashes: where a line starts and ends, the key a line is compared by (with git's
//! versions of a file and with what Claude wrote), the lines a version of a file holds, the
//! fixed FNV-1a hash for names and keys that outlive a build, and the hash that tells one
//! version of a file's bytes from another. Small, pure, and shared by every stage that looks
//! at lines.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

/// Where 64-bit FNV-1a starts (its offset basis).
pub const FNV1A_START: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a of `bytes`: the same in every process, build and Rust version (std's
/// `DefaultHasher` may change), for what outlives the process that hashed it — temp names,
/// state file names, the line keys Claude's hooks record.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(FNV1A_START, bytes)
}

/// FNV-1a of `bytes` continued from `hash` (the hash of what came before them).
pub fn fnv1a_from(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A hash of a file's bytes, for this run only: what tells a change to new bytes from an event
/// for bytes already handled (our own stamp's rename, a touch).
pub fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// The byte offset where the line holding `offset` starts.
pub fn line_start(src: &[u8], offset: usize) -> usize {
    src[..offset].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

/// The whole line(s) holding `range`, without the line ending's `\n`.
pub fn line_around(src: &[u8], range: Range<usize>) -> Range<usize> {
    let start = line_start(src, range.start);
    let end = memchr::memchr(b'\n', &src[range.end..]).map_or(src.len(), |i| range.end + i);
    start..end
}

/// A work-tree line as git's versions are compared with it: no `\r`, keywords collapsed
/// (`$Id: 3e1f… $` → `$Id$`), since `ident` expands them on checkout. (`cat-file --filters`
/// would apply the filters exactly, but in batch mode it reports the unfiltered size, so its
/// output cannot be read reliably.)
pub fn normalize_line(line: &[u8]) -> Vec<u8> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(start) = memchr::memmem::find(line, b"$Id:") else { return line.to_vec() };
    let Some(len) = memchr::memchr(b'$', &line[start + 4..]) else { return line.to_vec() };
    let mut out = line[..start].to_vec();
    out.extend_from_slice(b"$Id$");
    out.extend_from_slice(&line[start + 4 + len + 1..]);
    normalize_line(&out)
}

/// The key of a line as it is compared with git's versions and with what Claude wrote: its
/// [`normalize_line`]d bytes, hashed with [`fnv1a`] (the same in every process and build, for
/// the records the hooks leave). Two lines alike in key only make a line count as old or not
/// typed: the safe side.
pub fn line_key(line: &[u8]) -> u64 {
    fnv1a(&normalize_line(line))
}

/// The keys of every line of `text`.
pub fn line_keys(text: &[u8]) -> HashSet<u64> {
    text.split(|&b| b == b'\n').map(line_key).collect()
}

/// The keys of every line of a version `text` ([`line_key`]), and of each line that holds
/// `trigger` also at its place ([`place_keys`]) and how often the version holds it
/// ([`count_key`]): what tells a marker a version held where it stands from the same words
/// written again somewhere else.
pub fn version_keys(text: &[u8], trigger: Option<&memchr::memmem::Finder>) -> HashSet<u64> {
    let mut keys = line_keys(text);
    let Some(trigger) = trigger.filter(|t| t.find(text).is_some()) else { return keys };
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| trigger.find(l).is_some()) {
        let next = lines[i + 1..].iter().copied().find(|l| !l.trim_ascii().is_empty());
        let prev = lines[..i].iter().rev().copied().find(|l| !l.trim_ascii().is_empty());
        keys.extend(place_key_pair(line, prev, next));
        let n = seen.entry(line_key(line)).or_default();
        *n += 1;
        keys.insert(count_key(line, *n));
    }
    keys
}

/// The key of "a version holds `line` at least `n` times" (for `n` = 1, its [`line_key`]);
/// [`version_keys`] holds it for the lines that hold the trigger.
pub fn count_key(line: &[u8], n: usize) -> u64 {
    if n <= 1 {
        return line_key(line);
    }
    let mut bytes = format!("\x03{n}\n").into_bytes();
    bytes.extend_from_slice(&normalize_line(line));
    fnv1a(&bytes)
}

/// The keys of the line `line` (a byte range of `src`, without its `\n`) at its place: with
/// the next line that is not blank, and with the previous one (either tells the place; both
/// must change for the line to be somewhere else). Compared with [`version_keys`].
pub fn place_keys(src: &[u8], line: Range<usize>) -> [u64; 2] {
    let next = src[line.end..].split(|&b| b == b'\n').skip(1).find(|l| !l.trim_ascii().is_empty());
    let mut before = src[..line.start].split(|&b| b == b'\n').rev().skip(1);
    let prev = before.find(|l| !l.trim_ascii().is_empty());
    place_key_pair(&src[line], prev, next)
}

/// [`place_keys`] of `line` between `prev` and `next` (none at the file's start or end).
fn place_key_pair(line: &[u8], prev: Option<&[u8]>, next: Option<&[u8]>) -> [u64; 2] {
    let key = |tag: &[u8], neighbour: Option<&[u8]>| {
        let mut bytes = tag.to_vec();
        bytes.extend_from_slice(&normalize_line(line));
        bytes.push(b'\n');
        bytes.extend_from_slice(normalize_line(neighbour.unwrap_or_default()).trim_ascii());
        fnv1a(&bytes)
    };
    [key(b"\x01before\n", next), key(b"\x02after\n", prev)]
}

/// The lines one version of a file holds, by [`line_key`] (shared, not copied, between git's
/// cache and its users).
pub type LineKeys = Arc<HashSet<u64>>;

/// The lines some versions of a file hold (`HEAD`'s, the one we last saw): what tells the
/// lines a user just wrote from those that were already there.
#[derive(Default)]
pub struct HeldLines {
    versions: Vec<LineKeys>,
}

impl HeldLines {
    /// The lines of these versions.
    pub fn new(versions: Vec<LineKeys>) -> Self {
        HeldLines { versions }
    }

    /// These lines and those of one more version, `text`.
    pub fn and_text(mut self, text: &[u8]) -> Self {
        self.versions.push(Arc::new(line_keys(text)));
        self
    }

    /// True if no version holds a line.
    pub fn is_empty(&self) -> bool {
        self.versions.iter().all(|v| v.is_empty())
    }

    /// True if a version holds `line`.
    pub fn contains(&self, line: &[u8]) -> bool {
        let key = line_key(line);
        self.versions.iter().any(|v| v.contains(&key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_fixed() {
        // FNV-1a's published values: names and keys outlive the build that wrote them.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_from(fnv1a(b"a"), b"b"), fnv1a(b"ab"));
    }

    /// A line holding the trigger is known at its place: by the lines around it, wherever it
    /// stands in the file, and not where the same words stand between other lines.
    #[test]
    fn a_line_is_known_at_its_place() {
        let trigger = memchr::memmem::Finder::new("@claude");
        let version: &[u8] = b"import os\n\n# @claude why?\r\ndef f(): pass\n";
        let keys = version_keys(version, Some(&trigger));
        let at = |src: &[u8]| {
            let start = memchr::memmem::find(src, b"# @claude").unwrap();
            let range = line_around(src, start..start);
            let range = range.start..range.end - usize::from(src[range.end - 1] == b'\r');
            place_keys(src, range).iter().filter(|k| keys.contains(k)).count()
        };
        assert_eq!(at(b"x = 1\nimport os\n# @claude why?\n\n\ndef f(): pass\n"), 2, "moved");
        assert_eq!(at(b"import os\n# @claude why?\ndef f(x): pass\n"), 1, "the code below edited");
        assert_eq!(at(b"def g(): pass\n# @claude why?\ndef h(): pass\n"), 0, "elsewhere");
        assert_eq!(line_keys(version).len() + 2, keys.len());
        let twice = version_keys(b"# @claude a\nx\n# @claude a\n", Some(&trigger));
        let held = |n| twice.contains(&count_key(b"# @claude a", n));
        assert_eq!((held(1), held(2), held(3)), (true, true, false));
    }
}
