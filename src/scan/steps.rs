//! Steps around a syntax tree whose cost does not grow with the file. tree-sitter keeps no
//! parent links: a node's parent, its siblings and the node at an offset are found by walking
//! down from the root, child by child — so in a file of thousands of top-level nodes (a module
//! of consecutive `# @claude …` lines) each step costs thousands, and a scan of its asks
//! millions. [`Steps`] keeps the root's children in order and takes each step from the
//! top-level node that holds it; what it cannot place that way it leaves to tree-sitter.

use std::cell::RefCell;
use std::collections::HashMap;

use tree_sitter::Node;

/// A tree's root and its children, in order.
pub(crate) struct Steps<'t> {
    root: Node<'t>,
    top: Vec<Node<'t>>,
    /// Runs of comments measured from an offset: see [`Steps::comment_run`].
    runs: RefCell<HashMap<usize, CommentRun>>,
}

/// What lies from an offset on, past the comments there: how many comments, and where the
/// first node that is no comment starts (`None`: the walk ends first — the end of the file,
/// or text where no node starts).
pub(crate) type CommentRun = (usize, Option<usize>);

impl<'t> Steps<'t> {
    /// The children of `root`, listed once (one pass of a cursor).
    pub fn new(root: Node<'t>) -> Self {
        let mut cursor = root.walk();
        let top = root.children(&mut cursor).collect();
        Steps { root, top, runs: RefCell::default() }
    }

    /// The [`CommentRun`] from `pos` on, with `step` telling what starts at an offset: the end
    /// of the comment there, or `Err` with what stops the run. Each run is measured once for
    /// every offset in it: in a file of consecutive comments each marker's look below would
    /// otherwise walk the same run again.
    pub fn comment_run(
        &self,
        pos: usize,
        mut step: impl FnMut(usize) -> Result<usize, Option<usize>>,
    ) -> CommentRun {
        let mut runs = self.runs.borrow_mut();
        let mut passed = Vec::new();
        let mut p = pos;
        let (mut n, stop) = loop {
            if let Some(&known) = runs.get(&p) {
                break known;
            }
            match step(p) {
                Ok(end) if end > p => {
                    passed.push(p);
                    p = end;
                }
                Ok(_) => break (0, None), // an empty comment: no way on
                Err(stop) => {
                    runs.insert(p, (0, stop));
                    break (0, stop);
                }
            }
        };
        for &q in passed.iter().rev() {
            n += 1;
            runs.insert(q, (n, stop));
        }
        runs.get(&pos).copied().unwrap_or((n, stop))
    }

    /// The root.
    pub fn root(&self) -> Node<'t> {
        self.root
    }

    /// The top-level node that holds offset `at`, if any: where a query about `at` may start
    /// instead of the root.
    pub fn top_at(&self, at: usize) -> Option<Node<'t>> {
        self.top_for(at, at + 1)
    }

    /// The first top-level node that ends at or after `end` and after `start` (at it, for an
    /// empty node) — the child tree-sitter's own descent from the root would take — if it also
    /// starts at or before `start`.
    fn top_for(&self, start: usize, end: usize) -> Option<Node<'t>> {
        let before = |n: &Node| {
            let e = n.end_byte();
            let empty = n.start_byte() == e;
            e < end || if empty { e < start } else { e <= start }
        };
        let i = self.top.partition_point(before);
        self.top.get(i).copied().filter(|n| n.start_byte() <= start)
    }

    /// [`Node::descendant_for_byte_range`] of the root: the smallest node that spans
    /// `start..end`.
    pub fn descendant(&self, start: usize, end: usize) -> Option<Node<'t>> {
        if start > end {
            return None;
        }
        match self.top_for(start, end) {
            Some(top) => top.descendant_for_byte_range(start, end),
            None => Some(self.root),
        }
    }

    /// [`Node::parent`]: from the top-level node that holds `node`, down.
    pub fn parent(&self, node: Node<'t>) -> Option<Node<'t>> {
        if node.id() == self.root.id() {
            return None;
        }
        if let Some(top) = self.top_holding(node) {
            if top.id() == node.id() {
                return Some(self.root);
            }
            let mut cur = top;
            while let Some(child) = cur.child_with_descendant(node) {
                if child.id() == node.id() {
                    return Some(cur);
                }
                if child.id() == cur.id() {
                    break;
                }
                cur = child;
            }
        }
        node.parent() // not under a top-level node found so (another tree, an empty node)
    }

    /// [`Node::prev_sibling`].
    pub fn prev_sibling(&self, node: Node<'t>) -> Option<Node<'t>> {
        self.sibling(node, -1)
    }

    /// [`Node::next_sibling`].
    pub fn next_sibling(&self, node: Node<'t>) -> Option<Node<'t>> {
        self.sibling(node, 1)
    }

    /// The sibling `step` places from `node` among its parent's children.
    fn sibling(&self, node: Node<'t>, step: isize) -> Option<Node<'t>> {
        let parent = self.parent(node)?;
        let at = |kids: &[Node<'t>]| {
            let i = kids.iter().position(|k| k.id() == node.id())?;
            kids.get(i.checked_add_signed(step)?).copied()
        };
        if parent.id() == self.root.id() {
            // Found by its offset; empty nodes share theirs with their neighbours.
            let i = self.top.partition_point(|n| n.start_byte() < node.start_byte());
            let mut near = (i.saturating_sub(1)..self.top.len()).take(4);
            let i = near.find(|&j| self.top[j].id() == node.id());
            let i = i.or_else(|| self.top.iter().position(|k| k.id() == node.id()))?;
            return self.top.get(i.checked_add_signed(step)?).copied();
        }
        let mut cursor = parent.walk();
        let kids: Vec<Node<'t>> = parent.children(&mut cursor).collect();
        at(&kids)
    }

    /// The top-level node that is `node` or holds it.
    fn top_holding(&self, node: Node<'t>) -> Option<Node<'t>> {
        let (start, end) = (node.start_byte(), node.end_byte());
        let i = self.top.partition_point(|n| n.end_byte() < end);
        // Empty nodes share their offset with their neighbours: look at those around it too.
        self.top[i.saturating_sub(1)..(i + 2).min(self.top.len())].iter().copied().find(|n| {
            n.id() == node.id()
                || (n.start_byte() <= start
                    && end <= n.end_byte()
                    && n.child_with_descendant(node).is_some())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::languages::LanguageTable;

    /// Every step agrees with tree-sitter's own, at every offset and for every node, in files
    /// of several languages: flat ones, nested ones, and ones with syntax errors.
    #[test]
    fn steps_agree_with_tree_sitters() {
        let table = LanguageTable::builtin();
        let cases: &[(&str, &str)] = &[
            ("python", "# @claude a\n# @claude b\nx = 1\n\nclass A:\n    # c\n    def f(self):\n        return [1, (2, 3)]\n# end\n"),
            ("python", "def f(:\n    # @claude broken\n  x = \"\nclass\n"),
            ("rust", "// a\nfn f() { let x = 1; /* b */ }\nimpl A { fn g(&self) {} }\n// @claude c\n"),
            ("javascript", "const a = () => { // x\n  return `t ${1}`; };\n/* y */ f(1, 2\n"),
            ("html", "<p>a</p>\n<script>// @claude s\nlet x = 1;</script>\n<!-- c -->\n"),
            ("go", "package a\n\n// c\nfunc f() {}\nvar x = 1\n"),
        ];
        for (name, text) in cases {
            let lang = table.get(name).unwrap();
            let ts = lang.ts_language.as_ref().unwrap();
            let mut parser = tree_sitter::Parser::new();
            parser.set_language(ts).unwrap();
            let tree = parser.parse(text, None).unwrap();
            let nodes = Steps::new(tree.root_node());
            let src = text.as_bytes();
            for start in 0..=src.len() {
                for end in [start, start + 1, start + 3] {
                    let want = tree.root_node().descendant_for_byte_range(start, end);
                    let got = nodes.descendant(start, end);
                    assert_eq!(got.map(|n| n.id()), want.map(|n| n.id()), "{name} {start}..{end}");
                }
            }
            let mut all = vec![tree.root_node()];
            let mut i = 0;
            while i < all.len() {
                let n = all[i];
                let mut cursor = n.walk();
                all.extend(n.children(&mut cursor));
                i += 1;
            }
            for n in all {
                let id = |n: Option<Node>| n.map(|n| n.id());
                assert_eq!(id(nodes.parent(n)), id(n.parent()), "{name} parent of {n:?}");
                assert_eq!(id(nodes.prev_sibling(n)), id(n.prev_sibling()), "{name} prev {n:?}");
                assert_eq!(id(nodes.next_sibling(n)), id(n.next_sibling()), "{name} next {n:?}");
            }
        }
    }
}
