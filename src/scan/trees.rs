//! Incremental parsing for files that change again and again: the last syntax tree of each
//! recently changed file is kept (a bounded LRU), the edit between its bytes and the new ones
//! (common prefix and suffix: a save is one edit, seen from far enough) is applied to it, and
//! the parser re-reads only what changed.
//!
//! The markers found must be exactly those of a parse from scratch. Tree-sitter re-parses an
//! edited tree to the same tree as a fresh parse where the file parses soundly, but its error
//! recovery may take another path when it reuses nodes. So a tree with errors is never a base,
//! and an incremental result with errors is parsed again from scratch.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tree_sitter::{InputEdit, Tree};

use super::nodes::{parse, point};

/// At most this many files' trees are kept.
const MAX_FILES: usize = 64;

/// At most about this many bytes of trees (and the bytes they were parsed from) are kept.
const MAX_BYTES: usize = 64 * 1024 * 1024;

/// What one visible node of a syntax tree costs in memory, roughly: measured as the growth of
/// the process's resident memory over 40 trees of a 100 KB file (Python 117, Rust 107,
/// JavaScript 90 bytes per visible node, hidden nodes and child arrays included): about 4 MB of
/// tree for 100 KB of source, so the byte bound, not the file count, binds for big files.
const BYTES_PER_NODE: usize = 120;

/// The syntax trees of recently parsed files, by path, for [`Scanner::scan_incremental`].
///
/// [`Scanner::scan_incremental`]: super::Scanner::scan_incremental
#[derive(Default)]
pub struct TreeCache {
    entries: HashMap<PathBuf, Entry>,
    /// Sum of the entries' `cost`.
    bytes: usize,
    /// Ticks on every use: the entry with the smallest `used` goes first.
    clock: u64,
    counts: ParseCounts,
}

struct Entry {
    grammar: String,
    /// The bytes the tree was parsed from.
    src: Vec<u8>,
    tree: Tree,
    /// Estimated memory of the tree and its bytes.
    cost: usize,
    used: u64,
}

/// How the trees asked of a [`TreeCache`] were made: for tests and benchmarks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ParseCounts {
    /// Parsed from scratch: no tree kept, another grammar, or a tree with errors.
    pub full: usize,
    /// Edited and re-parsed from the kept tree.
    pub incremental: usize,
    /// The same bytes as the kept tree's: no parse at all.
    pub unchanged: usize,
}

/// A cache and the key of the file at hand, threaded through a scan.
pub(super) struct Reuse<'c> {
    pub(super) trees: &'c mut TreeCache,
    pub(super) key: &'c Path,
}

impl TreeCache {
    /// An empty cache.
    pub fn new() -> TreeCache {
        TreeCache::default()
    }

    /// How the trees handed out so far were made.
    pub fn counts(&self) -> ParseCounts {
        self.counts
    }

    /// Estimated memory held by the kept trees and their bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets the tree of `key` (evicted, or replaced by a new one).
    fn forget(&mut self, key: &Path) {
        if let Some(gone) = self.entries.remove(key) {
            self.bytes -= gone.cost;
        }
    }

    /// The syntax tree of `src`, file `key` in `grammar`, from the kept tree where there is a
    /// sound one; kept in turn. `None` if the parser gave up.
    pub(super) fn parse(
        &mut self,
        key: &Path,
        grammar: &str,
        ts: &tree_sitter::Language,
        src: &[u8],
    ) -> Option<Tree> {
        self.clock += 1;
        let base = self.entries.get(key).filter(|e| e.grammar == grammar);
        let incremental = match base {
            Some(entry) => match edit_between(&entry.src, src) {
                None => {
                    self.counts.unchanged += 1;
                    let tree = entry.tree.clone();
                    let clock = self.clock;
                    if let Some(entry) = self.entries.get_mut(key) {
                        entry.used = clock;
                    }
                    return Some(tree);
                }
                Some(edit) => {
                    let mut old = entry.tree.clone();
                    old.edit(&edit);
                    parse(grammar, ts, src, None, Some(&old)).filter(|t| !t.root_node().has_error())
                }
            },
            None => None,
        };
        let tree = match incremental {
            Some(tree) => {
                self.counts.incremental += 1;
                tree
            }
            None => {
                self.counts.full += 1;
                parse(grammar, ts, src, None, None)?
            }
        };
        self.keep(key, grammar, src, tree.clone());
        Some(tree)
    }

    /// Keeps `tree` for `key`, unless it has parse errors: such a tree is never a base for an
    /// incremental parse (an edit could hide a marker behind the error), so it would only take
    /// room from trees that are.
    fn keep(&mut self, key: &Path, grammar: &str, src: &[u8], tree: Tree) {
        self.forget(key);
        if tree.root_node().has_error() {
            return;
        }
        let cost = src.len() + tree.root_node().descendant_count() * BYTES_PER_NODE;
        if cost > MAX_BYTES {
            return;
        }
        while self.entries.len() >= MAX_FILES || self.bytes + cost > MAX_BYTES {
            let Some(oldest) =
                self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
            else {
                break;
            };
            self.forget(&oldest);
        }
        let entry =
            Entry { grammar: grammar.to_string(), src: src.to_vec(), tree, cost, used: self.clock };
        self.bytes += cost;
        self.entries.insert(key.to_path_buf(), entry);
    }
}

/// The one edit that turns `old` into `new`: what lies between their common prefix and their
/// common suffix. `None` when they are equal.
fn edit_between(old: &[u8], new: &[u8]) -> Option<InputEdit> {
    let prefix = common_prefix(old, new);
    if prefix == old.len() && prefix == new.len() {
        return None;
    }
    // The suffix may not reach into the prefix of either side.
    let room = old.len().min(new.len()) - prefix;
    let suffix = common_suffix(&old[old.len() - room..], &new[new.len() - room..]);
    let (old_end, new_end) = (old.len() - suffix, new.len() - suffix);
    Some(InputEdit {
        start_byte: prefix,
        old_end_byte: old_end,
        new_end_byte: new_end,
        start_position: point(old, prefix),
        old_end_position: point(old, old_end),
        new_end_position: point(new, new_end),
    })
}

/// Compared a block at a time (a slice comparison is a `memcmp`), then byte by byte.
const BLOCK: usize = 256;

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let len = a.len().min(b.len());
    let mut n = 0;
    while n + BLOCK <= len && a[n..n + BLOCK] == b[n..n + BLOCK] {
        n += BLOCK;
    }
    n + a[n..len].iter().zip(&b[n..len]).take_while(|(x, y)| x == y).count()
}

fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let len = a.len().min(b.len());
    let (a, b) = (&a[a.len() - len..], &b[b.len() - len..]);
    let mut n = 0;
    while n + BLOCK <= len && a[len - n - BLOCK..len - n] == b[len - n - BLOCK..len - n] {
        n += BLOCK;
    }
    n + a[..len - n].iter().rev().zip(b[..len - n].iter().rev()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tree_sitter::Point;

    /// Byte offsets and rows/columns of an edit, with `\n` and `\r\n` line endings, and an
    /// edit whose suffix could overlap its prefix (`aa` → `aaa`).
    #[test]
    fn edits_have_the_right_offsets_and_points() {
        let e = edit_between(b"ab\ncd\nef", b"ab\ncXd\nef").unwrap();
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (4, 4, 5));
        assert_eq!(e.start_position, Point::new(1, 1));
        assert_eq!(e.new_end_position, Point::new(1, 2));
        let e = edit_between(b"ab\r\ncd\r\nef", b"ab\r\nef").unwrap();
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (4, 8, 4));
        assert_eq!(e.start_position, Point::new(1, 0));
        assert_eq!(e.old_end_position, Point::new(2, 0));
        assert_eq!(e.new_end_position, Point::new(1, 0));
        let e = edit_between(b"x\r\naa", b"x\r\naaa").unwrap();
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (5, 5, 6));
        assert_eq!(e.new_end_position, Point::new(1, 3));
        let e = edit_between(b"one\r\n", b"one\r\ntwo\r\n").unwrap();
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (5, 5, 10));
        assert_eq!((e.old_end_position, e.new_end_position), (Point::new(1, 0), Point::new(2, 0)));
        assert!(edit_between(b"same", b"same").is_none());
        let long: Vec<u8> = (0..2000).map(|i| b"ab\r\n"[i % 4]).collect();
        let mut longer = long.clone();
        longer.insert(1001, b'Z');
        let e = edit_between(&long, &longer).unwrap();
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (1001, 1001, 1002));
        assert_eq!(e.start_position, Point::new(250, 1));
    }
}
