//! What the user did not type: markers on lines git holds a version of (a checkout, a merge, a
//! stash brought them), on lines Claude's own file tools wrote (as its hooks recorded them),
//! and what a file renamed inside the root had at its old paths. What is left is the user's;
//! a paragraph ask is cut to the lines written with it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::asks::Asks;
use crate::claude_writes::{ClaudeWrites, Written};
use crate::git::{FromGit, GitLines, GitWindow};
use crate::languages::Language;
use crate::lines::{count_key, line_around, line_key, place_keys, HeldLines};
use crate::scan::Marker;
use crate::stamp;

use super::files::Seen;

/// How many renames [`Renames`] keeps.
const RENAMES: usize = 4096;

/// How long a marker at a place a `PreToolUse` proposed waits for its `PostToolUse` (Claude
/// Code runs it right after the write) before it is the user's: the user denied the call.
const AWAIT_POST: Duration = Duration::from_secs(3);

/// Where a file's lines came from, when not from the user's hands.
pub(super) struct Provenance {
    /// What git could have written into a file: no process spawned per save.
    pub(super) git: GitLines,
    /// What Claude's own file tools wrote (recorded by its hooks).
    pub(super) claude: ClaudeWrites,
    /// Untagged markers the user did not type (git brought them, Claude wrote them), by file
    /// and line at its place ([`place_keys`]): not announced this run. The same words typed
    /// somewhere else are not these.
    not_typed: HashSet<(PathBuf, u64)>,
    /// Where files renamed inside the root were before.
    renames: Renames,
    /// Markers at a place a `PreToolUse` proposed to write, by file and place: until when they
    /// wait for its `PostToolUse`, and whether the file was handed back to be looked at again.
    awaiting: HashMap<(PathBuf, u64), (Instant, bool)>,
    /// Where the reason a marker was not announced is told (`list_asks`).
    asks: Asks,
}

impl Provenance {
    /// What the user did not type, for asks that start with `trigger`; the markers found not
    /// typed are noted in `asks`, with the reason.
    pub fn new(trigger: &str, asks: Asks) -> Self {
        Provenance {
            git: GitLines::for_trigger(trigger),
            claude: ClaudeWrites::new(),
            not_typed: HashSet::new(),
            renames: Renames::default(),
            awaiting: HashMap::new(),
            asks,
        }
    }

    /// When the first marker waiting for a `PostToolUse` stops waiting.
    pub fn next_due(&self) -> Option<Instant> {
        self.awaiting.values().filter(|(_, handed)| !handed).map(|(at, _)| *at).min()
    }

    /// The files with a marker that stopped waiting for its `PostToolUse` at `now`: to be
    /// looked at again (each once).
    pub fn due_files(&mut self, now: Instant) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for ((path, _), (at, handed)) in &mut self.awaiting {
            if *at <= now && !*handed {
                *handed = true;
                if !files.contains(path) {
                    files.push(path.clone());
                }
            }
        }
        // What nothing looked at again for a while: its marker is gone.
        self.awaiting.retain(|_, (at, _)| now.saturating_duration_since(*at) < 10 * AWAIT_POST);
        files
    }

    /// The markers of `fresh` (new in the file `seen`) that the user typed: not on a line
    /// Claude's tools wrote, nor on one git holds (with `window`, in its history too), each cut
    /// to the lines written with it (`previous`: the file's bytes when last seen). The others
    /// stay quiet for the rest of the run.
    pub fn typed(
        &mut self,
        seen: &Seen,
        mut fresh: Vec<Marker>,
        window: Option<&GitWindow>,
        previous: Option<&[u8]>,
        now: Instant,
    ) -> Vec<Marker> {
        let (path, bytes) = (seen.path.as_path(), seen.bytes());
        if !fresh.is_empty() {
            fresh = self.drop_claude_lines(seen, fresh, now);
        }
        if !fresh.is_empty() {
            fresh = self.drop_git_lines(seen, fresh, window);
        }
        if !fresh.is_empty() {
            let old_lines = self.old_lines(path, previous);
            fresh = cut_to_new_lines(seen.lang, bytes, fresh, &old_lines);
        }
        fresh
    }

    /// True if the file `seen`, changed while git may have been writing (`window`), waits on a
    /// search of its history, now running in the background: nothing of it is announced before
    /// the answer is in (its file is woken then), and no other file waits for it.
    pub fn history_pending(&mut self, seen: &Seen, window: &GitWindow) -> bool {
        let bytes = seen.bytes();
        let untagged = seen.markers.iter().filter(|m| !m.is_tagged());
        let keys: HashSet<u64> = untagged.map(|m| line_key(&line_of(bytes, m))).collect();
        if keys.is_empty() {
            return false;
        }
        let paths = self.renames.chain(&seen.path);
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        self.git.history_pending(&paths, FromGit { window, bytes }, &keys)
    }

    /// True if `m` was found not typed before, at its place, in this file or at a path it was
    /// renamed from.
    pub fn was_not_typed(&self, path: &Path, bytes: &[u8], m: &Marker) -> bool {
        if self.not_typed.is_empty() {
            return false; // the usual case, and a file of thousands of asks asks it of each
        }
        let keys = place_of(bytes, m);
        let chain = self.renames.chain(path);
        chain.iter().any(|p| keys.iter().any(|&k| self.not_typed.contains(&(p.clone(), k))))
    }

    /// `path` was renamed from `from` (by way of `to`, the newer name of a chain of renames):
    /// it keeps that path's versions in git, Claude's records and the markers found not typed
    /// there.
    pub fn renamed(&mut self, path: &Path, to: &Path, from: &Path) {
        self.renames.insert(to, from);
        let keys: Vec<u64> =
            self.not_typed.iter().filter(|(p, _)| p == from).map(|(_, k)| *k).collect();
        self.not_typed.extend(keys.into_iter().map(|k| (path.to_path_buf(), k)));
    }

    /// The lines the file held before: at `HEAD` (its own path's and those it was renamed
    /// from) and in the version we last saw (`previous`).
    fn old_lines(&mut self, path: &Path, previous: Option<&[u8]>) -> HeldLines {
        let paths = self.renames.chain(path);
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let at_head = HeldLines::new(self.git.head_lines(&paths));
        match previous {
            Some(bytes) => at_head.and_text(bytes),
            None => at_head,
        }
    }

    /// Drops the markers that arrived through git rather than from the user's hands: their
    /// trigger line is in a version of the file (or of a path it was renamed from) that git
    /// holds. With `window` (it changed while git held its lock: git wrote it), anywhere in
    /// such a version, and in the file's history too (see [`GitLines::held`]). Otherwise where
    /// git holds it ([`held_in_place`]): a committed ask's words typed again above
    /// another function are the user's.
    fn drop_git_lines(
        &mut self,
        seen: &Seen,
        fresh: Vec<Marker>,
        window: Option<&GitWindow>,
    ) -> Vec<Marker> {
        let (path, bytes) = (seen.path.as_path(), seen.bytes());
        let paths = self.renames.chain(path);
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let gits: HashSet<usize> = if window.is_some() {
            let keys = fresh.iter().map(|m| line_key(&line_of(bytes, m))).collect();
            let from_git = window.map(|window| FromGit { window, bytes });
            let held = self.git.held(&paths, from_git, &keys);
            let held = |m: &&Marker| held.contains(&line_key(&line_of(bytes, m)));
            fresh.iter().filter(held).map(|m| m.insert_at).collect()
        } else if self.git.holds_none_of(&paths) {
            HashSet::new() // in no repository: nothing to look up line by line
        } else {
            held_in_place(&mut self.git, &paths, seen, &fresh)
        };
        let gits = |m: &Marker| gits.contains(&m.insert_at);
        self.drop_not_typed(seen, fresh, gits, "git brought it (a checkout, merge or stash)")
    }

    /// Drops the markers at a place Claude's own file tools wrote (as their `PostToolUse` hook
    /// recorded it, for the file or a path it was renamed from). A marker at a place only
    /// proposed (a `PreToolUse` without its `PostToolUse` yet) waits for it, up to
    /// [`AWAIT_POST`]; then it is the user's (the user denied the call and typed the line).
    fn drop_claude_lines(&mut self, seen: &Seen, fresh: Vec<Marker>, now: Instant) -> Vec<Marker> {
        let (path, bytes) = (seen.path.as_path(), seen.bytes());
        let chain = self.renames.chain(path);
        let claude = &self.claude;
        let records = chain.iter().fold(Written::default(), |w, p| w.and(claude.written(p)));
        if records.written.is_empty() && records.proposed.is_empty() {
            return fresh; // Claude wrote nothing here: no line to look up
        }
        let claudes = |m: &Marker| place_of(bytes, m).iter().any(|k| records.written.contains(k));
        let mut fresh = self.drop_not_typed(seen, fresh, claudes, "Claude's file tool wrote it");
        fresh.retain(|m| {
            let place = place_of(bytes, m);
            if !place.iter().any(|k| records.proposed.contains(k)) {
                return true;
            }
            let keys = place.map(|k| (path.to_path_buf(), k));
            let until = keys.iter().filter_map(|k| self.awaiting.get(k)).map(|(at, _)| *at).min();
            let until = until.unwrap_or_else(|| {
                tracing::debug!(
                    "{}:{}: Claude proposed it; waiting for the write",
                    path.display(),
                    m.line
                );
                let until = now + AWAIT_POST;
                self.awaiting.extend(keys.iter().map(|k| (k.clone(), (until, false))));
                until
            });
            until <= now
        });
        fresh
    }

    /// Drops the markers `theirs` says the user did not type, remembering them (at their
    /// place) as not typed, and telling `why` ([`Asks::not_announced`]).
    fn drop_not_typed(
        &mut self,
        seen: &Seen,
        mut fresh: Vec<Marker>,
        theirs: impl Fn(&Marker) -> bool,
        why: &str,
    ) -> Vec<Marker> {
        let (path, bytes) = (seen.path.as_path(), seen.bytes());
        fresh.retain(|m| {
            let not_typed = theirs(m);
            if not_typed {
                tracing::debug!("{}:{}: {why}, not announced", path.display(), m.line);
                let place = place_of(bytes, m);
                self.not_typed.extend(place.map(|k| (path.to_path_buf(), k)));
                self.asks.not_announced(&seen.file, place, why);
            }
            !not_typed
        });
        fresh
    }
}

/// Where files renamed inside the root were before (new path → old path), for the latest
/// renames: what tells a moved file's old lines from new ones on its later saves too.
#[derive(Default)]
struct Renames {
    from: HashMap<PathBuf, PathBuf>,
    order: VecDeque<PathBuf>,
}

impl Renames {
    fn insert(&mut self, to: &Path, from: &Path) {
        if self.from.insert(to.to_path_buf(), from.to_path_buf()).is_none() {
            self.order.push_back(to.to_path_buf());
        }
        while self.order.len() > RENAMES {
            if let Some(oldest) = self.order.pop_front() {
                self.from.remove(&oldest);
            }
        }
    }

    /// `path`, then the paths it had before, newest first (a few at most, no cycles).
    fn chain(&self, path: &Path) -> Vec<PathBuf> {
        let mut chain = vec![path.to_path_buf()];
        while let Some(from) = self.from.get(chain.last().unwrap_or(&PathBuf::new())) {
            if chain.contains(from) || chain.len() > 8 {
                break;
            }
            chain.push(from.clone());
        }
        chain
    }
}

/// Each ask cut to the lines written with it ([`stamp::written_with`]: the rule `scan` and
/// `stamp` read an ask by too), where `old` (the file at `HEAD`, and as we last saw it) says
/// which lines the file held already.
fn cut_to_new_lines(
    lang: &Language,
    src: &[u8],
    fresh: Vec<Marker>,
    old: &HeldLines,
) -> Vec<Marker> {
    fresh
        .into_iter()
        .map(|m| {
            if old.is_empty() {
                return m;
            }
            stamp::written_with(lang, src, &m, |l| old.contains(l))
        })
        .collect()
}

/// The whole line holding the marker's trigger, without its line ending: what git's versions
/// of the file are searched for (a multi-line ask is known by its first line).
fn line_of(src: &[u8], m: &Marker) -> Vec<u8> {
    let line = &src[line_around(src, m.insert_at..m.insert_at)];
    line.strip_suffix(b"\r").unwrap_or(line).to_vec()
}

/// Of the `fresh` markers of the file `seen` (by `insert_at`), those git holds where they
/// stand: their line is in a version of one of `paths` next to the line before it or the one
/// after it there. Copies of a line git holds that stand at none of its places are git's as
/// long as git holds as many (the user moved its lines around), in file order; any more are
/// the same words typed again, the user's. Every marker of the file with those words counts,
/// the fresh ones and those found git's before.
fn held_in_place(
    git: &mut GitLines,
    paths: &[&Path],
    seen: &Seen,
    fresh: &[Marker],
) -> HashSet<usize> {
    let bytes = seen.bytes();
    let texts: HashSet<u64> = fresh.iter().map(|m| line_key(&line_of(bytes, m))).collect();
    let mut by_text: HashMap<u64, Vec<&Marker>> = HashMap::new();
    for m in seen.markers.iter() {
        let text = line_key(&line_of(bytes, m));
        if texts.contains(&text) {
            by_text.entry(text).or_default().push(m);
        }
    }
    let count_keys = |ms: &[&Marker]| {
        let line = line_of(bytes, ms[0]);
        (1..=ms.len()).map(move |n| count_key(&line, n))
    };
    let mut keys = HashSet::new();
    for ms in by_text.values() {
        keys.extend(count_keys(ms));
        keys.extend(ms.iter().flat_map(|m| place_of(bytes, m)));
    }
    let held = git.held(paths, None, &keys);
    let mut gits = HashSet::new();
    for ms in by_text.values() {
        let copies = count_keys(ms).take_while(|k| held.contains(k)).count();
        let (placed, elsewhere): (Vec<&Marker>, Vec<&Marker>) =
            ms.iter().partition(|m| place_of(bytes, m).iter().any(|k| held.contains(k)));
        let moved = copies.saturating_sub(placed.len());
        gits.extend(placed.iter().chain(elsewhere.iter().take(moved)).map(|m| m.insert_at));
    }
    let fresh: HashSet<usize> = fresh.iter().map(|m| m.insert_at).collect();
    gits.retain(|at| fresh.contains(at));
    gits
}

/// The keys of the marker's trigger line at its place ([`place_keys`]).
fn place_of(src: &[u8], m: &Marker) -> [u64; 2] {
    place_keys(src, line_around(src, m.insert_at..m.insert_at))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::asks::{Asks, TagMode};
    use crate::claude_writes::ClaudeWrites;
    use crate::live::testing::{live, live_at, resolve, scanner};
    use crate::live::LivePipeline;
    use crate::scan::DEFAULT_TRIGGER;
    use crate::test_support::git_in;
    use crate::watch::Change;

    /// A multi-line ask committed in HEAD is git's, known by its first line.
    #[test]
    fn multi_line_asks_from_head_are_not_announced() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let root = live.files.root.clone();
        let git = |args: &[&str]| git_in(&root, args);
        git(&["init", "-q"]);
        let p = root.join("a.rs");
        crate::test_support::write(&p, "/* @claude committed\n   over two lines */\nfn a() {}\n")
            .unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "x"]);
        crate::test_support::write(
            &p,
            "/* @claude committed\n   over two lines */\nfn a() {}\n// @claude new\n",
        )
        .unwrap();
        let asks = live.process(&p, None);
        let texts: Vec<&str> = asks.iter().map(|a| a.marker.text.as_str()).collect();
        assert_eq!(texts, ["@claude new"]);
    }

    /// Issue 30 (3): provenance is place plus text. A committed ask's words typed again above
    /// another function (same indentation) are the user's ask — on the first save the server
    /// sees, and after the committed one was found git's — while the committed one stays quiet,
    /// also when the user edits the code right below it.
    #[test]
    fn a_committed_asks_words_typed_elsewhere_are_an_ask() {
        let committed = "class A:\n    # @claude explain this\n    def f(self):\n        pass\n";
        let copy = "\n    # @claude explain this\n    def g(self):\n        pass\n";
        for first_save in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let mut live = live(dir.path());
            let root = live.files.root.clone();
            git_in(&root, &["init", "-q"]);
            let p = root.join("a.py");
            crate::test_support::write(&p, committed).unwrap();
            git_in(&root, &["add", "."]);
            git_in(&root, &["commit", "-qm", "x"]);
            if !first_save {
                crate::test_support::write(&p, format!("{committed}\n    x = 1\n")).unwrap();
                assert!(live.process(&p, None).is_empty(), "git's marker announced");
            }
            crate::test_support::write(&p, format!("{committed}{copy}")).unwrap();
            let asks = live.process(&p, None);
            let lines: Vec<usize> = asks.iter().map(|a| a.marker.line).collect();
            assert_eq!(lines, [6], "first save {first_save}: the copy above g()");
            let now = std::fs::read_to_string(&p).unwrap();
            crate::test_support::write(&p, now.replace("def f(self):", "def f(self, x):")).unwrap();
            assert!(
                live.process(&p, None).is_empty(),
                "first save {first_save}: git's ask announced"
            );
        }
    }

    /// A repository deleted and cloned again at the same place: its files' markers are the
    /// clone's commits, not the user's, although the reader started for the old repository is
    /// still running (in a directory that is gone).
    #[test]
    fn a_repository_cloned_again_in_place_is_read_anew() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let sub = live.files.root.join("sub");
        std::fs::create_dir(&sub).unwrap();
        git_in(&sub, &["init", "-q"]);
        let p = sub.join("a.py");
        crate::test_support::write(&p, "x = 1\n").unwrap();
        git_in(&sub, &["add", "."]);
        git_in(&sub, &["commit", "-qm", "one"]);
        crate::test_support::write(&p, "x = 1\n# @claude mine\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        assert_eq!(live.provenance.git.processes_started(), 2, "the two cat-file readers");

        let upstream = tempfile::tempdir().unwrap();
        let theirs = upstream.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        git_in(&theirs, &["init", "-q"]);
        crate::test_support::write(theirs.join("a.py"), "# @claude injected\n").unwrap();
        git_in(&theirs, &["add", "."]);
        git_in(&theirs, &["commit", "-qm", "theirs"]);
        std::fs::remove_dir_all(&sub).unwrap();
        git_in(&live.files.root, &["clone", "-q", theirs.to_str().unwrap(), "sub"]);
        let texts: Vec<String> =
            live.process(&p, None).into_iter().map(|a| a.marker.text).collect();
        assert!(texts.is_empty(), "a marker of the clone's commit was announced: {texts:?}");
    }

    /// Saves in a repository start git's two readers once, not a process each (one is started
    /// again after git wrote its index: it reads the index once); git's lines follow `HEAD` as
    /// it moves: a commit, refs packed, a detached `HEAD`, a linked worktree.
    #[test]
    fn saves_spawn_no_git_and_follow_head() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let root = live.files.root.clone();
        git_in(&root, &["init", "-q"]);
        let p = root.join("a.py");
        crate::test_support::write(&p, "x = 1\n").unwrap();
        git_in(&root, &["add", "."]);
        git_in(&root, &["commit", "-qm", "one"]);
        for i in 0..5 {
            crate::test_support::write(&p, format!("x = 1\n# @claude ask {i}\n")).unwrap();
            assert_eq!(live.process(&p, None).len(), 1, "save {i}");
        }
        assert_eq!(live.provenance.git.processes_started(), 2, "a git process per save");
        // Untracked, with a space in its name: git answers `HEAD:b c.py missing`.
        let spaced = root.join("b c.py");
        for i in 0..3 {
            crate::test_support::write(&spaced, format!("# @claude spaced {i}\n")).unwrap();
            assert_eq!(live.process(&spaced, None).len(), 1, "spaced save {i}");
        }
        assert_eq!(
            live.provenance.git.processes_started(),
            2,
            "a git process per save of a spaced name"
        );
        let mut head_moves = |commit: &str, setup: &dyn Fn()| {
            crate::test_support::write(&p, format!("# @claude {commit}\n")).unwrap();
            git_in(&root, &["commit", "-qam", commit]);
            setup();
            crate::test_support::write(&p, format!("# @claude {commit}\ny = 2\n")).unwrap();
            assert!(live.process(&p, None).is_empty(), "{commit}: git's marker announced");
        };
        head_moves("committed", &|| {});
        head_moves("packed", &|| drop(git_in(&root, &["pack-refs", "--all", "--prune"])));
        git_in(&root, &["checkout", "-q", "--detach"]);
        head_moves("detached", &|| {});
        // One reader started again per index git wrote (three commits, one checkout).
        assert!(
            live.provenance.git.processes_started() <= 2 + 4,
            "{}",
            live.provenance.git.processes_started()
        );
        // A linked worktree: its own HEAD, refs in the main repository's git directory.
        let other = tempfile::tempdir().unwrap();
        let wt = other.path().canonicalize().unwrap().join("wt");
        git_in(&root, &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
        let mut in_wt = live_at(&wt);
        let q = wt.join("a.py");
        crate::test_support::write(&q, "# @claude detached\n# @claude in the worktree\n").unwrap();
        git_in(&wt, &["commit", "-qam", "side"]);
        git_in(&wt, &["pack-refs", "--all", "--prune"]);
        crate::test_support::write(
            &q,
            "# @claude detached\n# @claude in the worktree\n# @claude new\n",
        )
        .unwrap();
        let texts: Vec<String> =
            in_wt.process(&q, None).into_iter().map(|a| a.marker.text).collect();
        assert_eq!(texts, ["@claude new"]);
    }

    /// A file moved inside the root keeps what its old path had: a marker committed there is
    /// git's (its new path is untracked), an ask recorded there is the same ask (`--tag
    /// never`, the record moved with the file), and the bytes last seen there are not new. A
    /// file the move left a copy of (an editor's backup dance) keeps its own records.
    #[test]
    fn a_moved_file_keeps_what_its_old_path_had() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        git_in(&root, &["init", "-q"]);
        let asks = Asks::with_ledger_in(state.path(), &root, DEFAULT_TRIGGER).unwrap();
        let mut live = LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks);
        let committed = root.join("committed.py");
        crate::test_support::write(
            &committed,
            "# @claude theirs
",
        )
        .unwrap();
        git_in(&root, &["add", "."]);
        git_in(&root, &["commit", "-qm", "theirs"]);
        let old = root.join("old.py");
        crate::test_support::write(
            &old,
            "x = 1
# @claude mine
",
        )
        .unwrap();
        let id = live.process(&old, None)[0].id().unwrap();
        let moved = |live: &mut LivePipeline, from: &Path, to: &Path| {
            std::fs::rename(from, to).unwrap();
            let change = Change {
                path: to.to_path_buf(),
                from_git: None,
                rescan: None,
                renamed_from: vec![from.to_path_buf()],
            };
            let asks = live.process_change(&change, usize::MAX);
            live.delivered(&asks, true);
            asks
        };
        let new = root.join("sub/new.py");
        std::fs::create_dir(root.join("sub")).unwrap();
        assert!(moved(&mut live, &old, &new).is_empty(), "the same ask, announced again");
        assert_eq!(live.scanned(), 1, "the same bytes, scanned again");
        assert_eq!(live.ledger.asks.by_id(id).unwrap().file, "sub/new.py");
        let theirs = root.join("theirs.py");
        assert!(moved(&mut live, &committed, &theirs).is_empty(), "git's marker announced");
        // Later saves of the moved files: still git's, still the same ask; a new ask is new.
        crate::test_support::write(
            &theirs,
            "# @claude theirs
x = 2
",
        )
        .unwrap();
        assert!(live.process(&theirs, None).is_empty(), "git's marker announced on a save");
        crate::test_support::write(
            &new,
            "x = 1
# @claude mine
# @claude more
",
        )
        .unwrap();
        let texts: Vec<String> =
            live.process(&new, None).into_iter().map(|a| a.marker.text).collect();
        assert_eq!(texts, ["@claude more"]);
        // The backup dance: renamed to a backup, the file written anew; the records stay.
        let backup = root.join("sub/new.py.bak.py");
        std::fs::copy(&new, &backup).unwrap();
        let change = Change {
            path: backup.clone(),
            from_git: None,
            rescan: None,
            renamed_from: vec![new.clone()],
        };
        live.process_change(&change, usize::MAX);
        assert_eq!(
            live.ledger.asks.by_id(id).unwrap().file,
            "sub/new.py",
            "the record left its file"
        );
    }

    /// A marker on a line Claude's file tools wrote (recorded by its hook) is not announced, on
    /// this save or a later one; the user's ask saved with it is, once.
    #[test]
    fn a_marker_claude_wrote_is_not_an_ask() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        live.provenance.claude = ClaudeWrites::in_dir(state.path());
        let p = live.files.root.join("a.py");
        let text = "# @claude follow-up: did that work?\n# @claude mine\n";
        let place = crate::lines::place_keys(text.as_bytes(), 0..35);
        live.provenance.claude.record(&p, "post", "toolu_1", &place);
        crate::test_support::write(&p, text).unwrap();
        let texts: Vec<String> =
            live.process(&p, None).into_iter().map(|a| a.marker.text).collect();
        assert_eq!(texts, ["@claude mine"]);
        let now = std::fs::read_to_string(&p).unwrap();
        crate::test_support::write(
            &p,
            format!(
                "{now}x = 1
"
            ),
        )
        .unwrap();
        assert!(live.process(&p, None).is_empty(), "Claude's marker announced on a later save");
    }

    /// An ask written right above comments that were already there is only its own lines:
    /// it is announced so, and resolving it gives back the original file, byte for byte.
    #[test]
    fn an_ask_is_only_the_lines_written_with_it() {
        let originals = [
            (
                "safety.rs",
                "fn f() {\n    // SAFETY: the pointer is valid\n    unsafe { g() }\n}\n",
                1,
                "    // @claude is this sound?\n    // think about aliasing\n",
            ),
            (
                "licence.py",
                "# Copyright 2024 Alice\n# SPDX-License-Identifier: MIT\nimport os\n",
                0,
                "# @claude check the licence year\n",
            ),
            (
                "doc.rs",
                "/// Adds one.\n/// Panics never.\nfn inc(x: u8) -> u8 { x + 1 }\n",
                0,
                "// @claude overflow?\n// at 255\n",
            ),
            (
                "todo.go",
                "package a\n\n// TODO(alice): remove\nvar x = 1\n",
                2,
                "// @claude who is alice?\n",
            ),
        ];
        for (name, original, at, ask) in originals {
            let dir = tempfile::tempdir().unwrap();
            let mut live = live(dir.path());
            let p = live.files.root.join(name);
            crate::test_support::write(&p, original).unwrap();
            assert!(live.process(&p, None).is_empty(), "{name}: no ask yet");
            let mut lines: Vec<&str> = original.split_inclusive('\n').collect();
            lines.insert(at, ask);
            crate::test_support::write(&p, lines.concat()).unwrap();
            let asks = live.process(&p, None);
            assert_eq!(asks.len(), 1, "{name}");
            let want: Vec<&str> =
                ask.lines().map(|l| l.trim_start().trim_start_matches(['/', '#']).trim()).collect();
            assert_eq!(asks[0].marker.text, want.join("\n"), "{name}");
            assert_eq!(
                asks[0].marker.end_line - asks[0].marker.line + 1,
                ask.lines().count(),
                "{name}"
            );
            resolve(&live, asks[0].id().unwrap());
            assert_eq!(std::fs::read_to_string(&p).unwrap(), original, "{name}: resolve took more");
        }
    }
}
