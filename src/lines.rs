//! Lines and hashes: where a line starts and ends, the key a line is compared by (with git's
//! versions of a file and with what Claude wrote), the lines a version of a file holds, the
//! fixed FNV-1a hash for names and keys that outlive a build, and the hash that tells one
//! version of a file's bytes from another. Small, pure, and shared by every stage that looks
//! at lines.

use std::collections::HashSet;
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
}
