//! A file's markers reconciled with the ledger of asks ([`crate::asks`]), under its lock: the
//! records whose marker is still there are brought to its place, those whose marker is gone
//! are closed, the asks the user is still typing are found (revisions), and the new ones are
//! claimed under new ids. Which record a marker is, is [`crate::pairing`]'s one rule.

use std::collections::HashSet;
use std::time::Duration;

use crate::asks::{self, AskRecord, Asks, TagMode};
use crate::autosave::Draft;
use crate::id::{uuid_random, MarkerId};
use crate::pairing::{self, anchor, InFile, Places};
use crate::scan::Marker;
use crate::stamp::Stamp;

use super::Ask;

/// An ask announced this long ago or less whose text then changes under the user's hands is
/// being typed still: its new text is announced under the same id, as a revision.
const REVISE_WINDOW: Duration = Duration::from_secs(60);

/// A revision this soon after the announcement may mean the editor saved a fragment on its own:
/// if the ask grew, a piece of evidence that the root autosaves ([`crate::autosave`]).
const LEARN_WINDOW: Duration = Duration::from_secs(10);

/// An ask whose text the user is still typing.
pub(super) struct Revision {
    /// The marker that now holds it (an index into the file's markers).
    pub marker: usize,
    /// The ask's id.
    pub id: MarkerId,
    /// Announced within [`LEARN_WINDOW`]: the editor may have saved a fragment on its own.
    pub soon: bool,
    /// Its text as announced.
    pub before: String,
}

/// A file's markers reconciled with the ledger ([`Ledger::reconcile`]).
pub(super) struct Reconciled {
    /// The record each marker is, if any (an index into the records).
    pub pairs: Vec<Option<usize>>,
    /// The asks still being typed.
    pub revisions: Vec<Revision>,
    /// Markers (by index) whose record was never sent, with its id.
    pub unsent: Vec<(usize, MarkerId)>,
    /// The count of others' changes it was made knowing (see
    /// [`Asks::update_knowing_others`]).
    pub others: Option<u64>,
}

/// The asks of the root, and where their ids go.
pub(super) struct Ledger {
    pub(super) asks: Asks,
    /// Into the file, or only into the ledger.
    pub(super) mode: TagMode,
}

impl Ledger {
    /// True if, as last read, a pending ask lives in `file` (see [`Asks::may_have_pending`]).
    pub fn may_have_pending(&self, file: &str) -> bool {
        self.asks.may_have_pending(file)
    }

    /// Reconciles the markers of a save with the records: returns which record each marker is
    /// and, when `revising`, the asks still being typed. The asks of the file whose marker is
    /// gone are closed, and every other one's place is brought up to date.
    /// Also returns the markers that are asks recorded and never sent (their owner died in
    /// between: see [`AskRecord::unsent`]), with their ids: to be announced again.
    pub fn reconcile(&self, found: &InFile, revising: bool) -> Reconciled {
        self.asks.update_knowing_others(|records, others| {
            let pairs = pairing::pair(found, records);
            let revisions =
                if revising { find_revisions(found, &pairs, records) } else { Vec::new() };
            close_gone(found, &pairs, &revisions, records);
            let unsent = pairs.iter().enumerate().filter_map(|(mi, p)| {
                let r = &records[(*p)?];
                let revised = revisions.iter().any(|v| v.marker == mi);
                (r.unsent && r.is_pending() && !revised).then_some((mi, r.id))
            });
            let unsent = unsent.collect();
            Reconciled { pairs, revisions, unsent, others }
        })
    }

    /// Records the ready asks of the file — new ones under new ids (unless another server on
    /// the root just did), revisions under the id they had — and returns them as (claimed,
    /// revised), each with its record's id as its tag. `reconciled`: the count of others'
    /// changes the file's markers were reconciled knowing ([`Seen::reconciled`]); while it is
    /// still the count, no other server can have recorded the fresh ones (they paired with no
    /// record then), and the file's markers need not be paired again — for a file of
    /// thousands of asks going out in rounds, that pairing was most of each round.
    ///
    /// [`Seen::reconciled`]: super::files::Seen::reconciled
    pub fn record(
        &self,
        found: &InFile,
        ready: Vec<Draft>,
        reconciled: Option<u64>,
    ) -> (Vec<Marker>, Vec<Marker>) {
        let (fresh, revisions): (Vec<Draft>, Vec<Draft>) =
            ready.into_iter().partition(|d| d.revises.is_none());
        let fresh: Vec<Marker> = fresh.into_iter().map(|d| d.marker).collect();
        self.asks.update_knowing_others(|records, others| {
            let known = reconciled.is_some() && reconciled == others;
            let claimed = claim(found, fresh, records, !known);
            let revised = revise(found.src, revisions, records);
            (claimed, revised)
        })
    }

    /// Forgets the new asks among `asks` (they never reached the client).
    pub fn forget(&self, asks: &[Ask]) {
        let ids: HashSet<MarkerId> = asks.iter().filter(|a| !a.revised).map(|a| a.record).collect();
        self.asks.update(|records| records.retain(|r| !ids.contains(&r.id)));
    }

    /// The asks of file `old` follow it to `new`; returns their ids.
    pub fn move_file(&self, old: &str, new: &str) -> Vec<MarkerId> {
        self.asks.update(|records| {
            let mut ids = Vec::new();
            for r in records.iter_mut().filter(|r| r.file == old) {
                tracing::debug!("{old} → {new}: {} follows its file", r.id);
                r.file = new.to_string();
                ids.push(r.id);
            }
            ids
        })
    }

    /// The pending asks of files that are gone (`gone`) which markers of this one are
    /// ([`pairing::moved_here`]) follow them here: the file was moved without its rename
    /// being seen. Returns their ids. Costs nothing unless a marker no record of the file
    /// pairs with has the words of a pending ask of another file.
    pub fn adopt_moved(&self, found: &InFile, gone: impl Fn(&str) -> bool) -> Vec<MarkerId> {
        // Sets of the other files' pending asks (few), not of this file's markers (a file can
        // hold tens of thousands).
        fn first(text: &str) -> &str {
            text.lines().next().unwrap_or_default()
        }
        let maybe = self.asks.view(|records| {
            let others = || records.iter().filter(|r| r.is_pending() && r.file != found.file);
            let words: HashSet<&str> = others().map(|r| first(&r.text)).collect();
            let ids: HashSet<MarkerId> = others().map(|r| r.id).collect();
            !ids.is_empty()
                && found.markers.iter().any(|m| {
                    m.tag.is_some_and(|t| ids.contains(&t)) || words.contains(first(&m.text))
                })
        });
        if !maybe {
            return Vec::new();
        }
        self.asks.update(|records| {
            let moved = pairing::moved_here(found, records, &gone);
            let mut ids = Vec::new();
            for ri in moved {
                let r = &mut records[ri];
                tracing::debug!("{} → {}: {} followed its file", r.file, found.file, r.id);
                r.file = found.file.to_string();
                ids.push(r.id);
            }
            ids
        })
    }

    /// The tags owed to the file: its untagged markers that are pending asks in `owed`, with
    /// their ids — never a resolved ask's copy that an editor wrote back. The file's asks are
    /// placed in this version (the one the tags go into).
    pub fn stamps_owed(&self, found: &InFile, owed: &HashSet<MarkerId>) -> Vec<Stamp> {
        self.asks.update(|records| {
            let pairs = pairing::pair(found, records);
            place(found, &pairs, records);
            found
                .markers
                .iter()
                .zip(&pairs)
                .filter(|(m, _)| !m.is_tagged())
                .filter_map(|(m, p)| {
                    let record = &records[(*p)?];
                    let id = record.id;
                    let owed = owed.contains(&id) && record.is_pending();
                    owed.then_some(Stamp { insert_at: m.insert_at, id })
                })
                .collect()
        })
    }
}

/// The asks of this save whose text the user is still typing: a pending ask announced within
/// [`REVISE_WINDOW`] whose own lines now read otherwise — its tagged marker (the editor
/// reloaded our tag and the user typed on after it), or, with its marker gone, the untagged
/// one at its place (the editor wrote its buffer back over our tag).
fn find_revisions(found: &InFile, pairs: &[Option<usize>], records: &[AskRecord]) -> Vec<Revision> {
    let InFile { lang, src, file, markers, .. } = *found;
    let now = asks::now();
    let recent = |r: &AskRecord| {
        r.file == file
            && r.is_pending()
            && now.saturating_sub(r.announced) < REVISE_WINDOW.as_secs()
    };
    let revision = |marker: usize, r: &AskRecord| Revision {
        marker,
        id: r.id,
        soon: now.saturating_sub(r.announced) < LEARN_WINDOW.as_secs(),
        before: r.text.clone(),
    };
    let mut out = Vec::new();
    for (mi, m) in markers.iter().enumerate() {
        let Some(r) = pairs[mi].map(|ri| &records[ri]) else { continue };
        if m.is_tagged()
            && recent(r)
            && crate::stamp::first_lines(lang, src, m, r.lines).text != r.text
        {
            out.push(revision(mi, r));
        }
    }
    let paired: HashSet<usize> = pairs.iter().flatten().copied().collect();
    let places = Places::new(found);
    for (ri, r) in records.iter().enumerate() {
        if paired.contains(&ri) || !recent(r) || out.iter().any(|v: &Revision| v.id == r.id) {
            continue;
        }
        let at_its_place = places.free_at(r, pairs).filter(|&mi| markers[mi].text != r.text);
        if let Some(mi) = at_its_place {
            if !out.iter().any(|v| v.marker == mi) {
                out.push(revision(mi, r));
            }
        }
    }
    out
}

/// Closes the asks of the file whose marker is gone after a save: a pending one whose marker
/// is gone (resolved by hand, deleted) is resolved now, so a stale buffer that brings it back
/// within the window does not ask again; every one still there has its place brought up to
/// date.
fn close_gone(
    found: &InFile,
    pairs: &[Option<usize>],
    revisions: &[Revision],
    records: &mut [AskRecord],
) {
    let file = found.file;
    place(found, pairs, records);
    let paired: HashSet<usize> = pairs.iter().flatten().copied().collect();
    for (ri, r) in records.iter_mut().enumerate() {
        let revising = revisions.iter().any(|v| v.id == r.id);
        if r.file == file && r.is_pending() && !paired.contains(&ri) && !revising {
            tracing::debug!("{file}: {} is gone; closed", r.id);
            r.resolved = Some(asks::now());
        }
    }
}

/// Brings the place of every pending ask still in the file up to date: its line and anchor in
/// this version, the one the next save's diff starts from.
fn place(found: &InFile, pairs: &[Option<usize>], records: &mut [AskRecord]) {
    let InFile { src, markers, .. } = *found;
    for (mi, m) in markers.iter().enumerate() {
        let Some(r) = pairs[mi].map(|ri| &mut records[ri]) else { continue };
        let place = (m.line, anchor(src, m));
        if r.is_pending() && (r.line, r.anchor) != place {
            (r.line, r.anchor) = place;
        }
    }
}

/// Gives each fresh marker a new id and records it — unless, looked at under the ledger's lock,
/// another server on the root has just recorded it (when `by_others` says one may have:
/// `found`'s markers, all of the file's, are paired with the records again). Returns the
/// markers claimed, with their ids as tags.
fn claim(
    found: &InFile,
    fresh: Vec<Marker>,
    records: &mut Vec<AskRecord>,
    by_others: bool,
) -> Vec<Marker> {
    let InFile { src, file, markers, .. } = *found;
    let recorded: HashSet<usize> = if by_others {
        let pairs = pairing::pair(found, records);
        let paired = markers.iter().zip(&pairs).filter(|(_, p)| p.is_some());
        paired.map(|(m, _)| m.insert_at).collect()
    } else {
        HashSet::new()
    };
    let mut taken = MarkerId::all_in(src);
    taken.extend(records.iter().map(|r| r.id));
    let mut claimed = Vec::new();
    for m in fresh {
        if recorded.contains(&m.insert_at) {
            continue; // another server on the root recorded it a moment ago
        }
        let id = MarkerId::fresh(&taken, uuid_random);
        taken.insert(id);
        records.push(record(src, file, &m, id));
        claimed.push(Marker { tag: Some(id), ..m });
    }
    claimed
}

/// Gives the revisions their records' new text, lines and place; returns them with their ids.
fn revise(src: &[u8], revisions: Vec<Draft>, records: &mut [AskRecord]) -> Vec<Marker> {
    let mut out = Vec::new();
    for d in revisions {
        let Some(id) = d.revises else { continue };
        let Some(r) = records.iter_mut().find(|r| r.id == id && r.is_pending()) else { continue };
        let m = Marker { tag: Some(id), ..d.marker };
        *r = AskRecord { announced: r.announced, ..record(src, &r.file.clone(), &m, id) };
        out.push(m);
    }
    out
}

/// The record of an ask announced now.
fn record(src: &[u8], file: &str, m: &Marker, id: MarkerId) -> AskRecord {
    AskRecord {
        id,
        file: file.to_string(),
        text: m.text.clone(),
        lines: m.end_line - m.line + 1,
        line: m.line,
        anchor: anchor(src, m),
        announced: asks::now(),
        resolved: None,
        heard: None,
        unsent: true,
    }
}

#[cfg(test)]
mod tests {
    use crate::asks::{Asks, TagMode};
    use crate::live::testing::{live, resolve, scanner};
    use crate::live::LivePipeline;
    use crate::scan::DEFAULT_TRIGGER;
    use crate::watch::Change;

    /// An editor's stale buffer writes the marker back without its tag (with another edit),
    /// and saves again; the ask is resolved; the stale buffer is saved once more. One ask, one
    /// id, the tag tried again once (the edit was elsewhere: at most two tries, issue 34) and
    /// not after the same copy took it out again, and the file ends as the user's bytes minus
    /// the ask.
    #[test]
    fn a_stale_buffer_is_the_same_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.rs");
        crate::test_support::write(&p, "fn a() {}\n// @claude why?\nfn b() {}\n").unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        let id = asks[0].id().unwrap();
        assert!(asks[0].stamped);
        let stale = "fn a() { 1 }\n// @claude why?\nfn b() {}\n";
        let tagged = stale.replace("@claude", &format!("@claude[{id}]"));
        for want in [tagged.as_str(), stale] {
            crate::test_support::write(&p, stale).unwrap();
            assert!(live.process(&p, None).is_empty(), "a stale copy asked again");
            assert_eq!(std::fs::read_to_string(&p).unwrap(), want, "tried again, then not");
        }
        resolve(&live, id);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "fn a() { 1 }\nfn b() {}\n");
        crate::test_support::write(&p, stale).unwrap();
        assert!(live.process(&p, None).is_empty(), "a resolved ask came back from a stale buffer");
        // The same place, new words: a new ask.
        crate::test_support::write(&p, "fn a() { 1 }\n// @claude why not?\nfn b() {}\n").unwrap();
        let again = live.process(&p, None);
        assert_eq!(again.len(), 1);
        assert_ne!(again[0].id(), Some(id));
    }

    /// The same words in another file are another ask.
    #[test]
    fn the_same_text_in_another_file_is_another_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        for name in ["a.py", "b.py"] {
            let p = live.files.root.join(name);
            crate::test_support::write(&p, "# @claude add tests\n").unwrap();
            assert_eq!(live.process(&p, None).len(), 1, "{name}");
        }
    }

    /// An ask is its place and its text: the same words typed above another function, while
    /// the first is still pending (tagged), are a second ask; saved again, neither fires.
    #[test]
    fn the_same_words_in_another_place_are_another_ask() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.py");
        crate::test_support::write(&p, "# @claude add a docstring\ndef f(): pass\n").unwrap();
        assert_eq!(live.process(&p, None).len(), 1);
        let tagged = std::fs::read_to_string(&p).unwrap();
        assert!(tagged.contains("@claude[fw-"), "{tagged}");
        let both = format!("{tagged}\n# @claude add a docstring\ndef g(): pass\n");
        crate::test_support::write(&p, &both).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1, "the ask above g() was taken for the one above f()");
        assert_eq!(asks[0].marker.line, 4);
        crate::test_support::write(&p, format!("{}x = 1\n", std::fs::read_to_string(&p).unwrap()))
            .unwrap();
        assert!(live.process(&p, None).is_empty());
    }

    /// `--tag never`: two identical markers saved together are two asks, each with its own id,
    /// and neither fires again.
    #[test]
    fn tag_never_two_identical_markers_are_two_asks() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let asks = Asks::with_ledger_in(state.path(), &root, DEFAULT_TRIGGER).unwrap();
        let mut live = LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks);
        let p = root.join("a.py");
        let text = "# @claude add a docstring\ndef f(): pass\n\n# @claude add a docstring\ndef g(): pass\n";
        crate::test_support::write(&p, text).unwrap();
        let asks = live.process(&p, None);
        let lines: Vec<usize> = asks.iter().map(|a| a.marker.line).collect();
        assert_eq!(lines, [1, 4], "two identical markers");
        assert_ne!(asks[0].id(), asks[1].id());
        crate::test_support::write(&p, format!("{text}x = 1\n")).unwrap();
        assert!(live.process(&p, None).is_empty(), "announced again");
        // Resolving the second removes it, and only it.
        resolve(&live, asks[1].id().unwrap());
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "# @claude add a docstring\ndef f(): pass\n\ndef g(): pass\nx = 1\n"
        );
    }

    /// Issue 30 (1): two asks with the same words, above `f` (line 1) and `g` (line 6); the user
    /// adds five lines at the top and saves. Each id follows its marker through the save's
    /// diff: with `--tag never`, resolving g's ask removes g's marker and only it; with tags,
    /// written after the insertion, each lands on its own marker.
    #[test]
    fn ids_follow_their_markers_when_lines_are_inserted_above() {
        let text = "# @claude explain this\ndef f():\n    pass\n\n\n# @claude explain this\ndef g():\n    pass\n";
        let imports = "import a\nimport b\nimport c\nimport d\nimport e\n";
        for mode in [TagMode::Never, TagMode::File] {
            let dir = tempfile::tempdir().unwrap();
            let state = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            let asks = Asks::with_ledger_in(state.path(), &root, DEFAULT_TRIGGER).unwrap();
            let mut live = LivePipeline::with_asks(root.clone(), scanner(), mode, asks);
            let p = root.join("a.py");
            crate::test_support::write(&p, text).unwrap();
            let change =
                Change { path: p.clone(), from_git: None, rescan: None, renamed_from: vec![] };
            let asks = live.process_change(&change, usize::MAX);
            let lines: Vec<usize> = asks.iter().map(|a| a.marker.line).collect();
            assert_eq!(lines, [1, 6], "{mode:?}");
            let (f, g) = (asks[0].record, asks[1].record);
            live.delivered(&asks, true); // heard: tags owed, not written yet
            crate::test_support::write(&p, format!("{imports}{text}")).unwrap();
            assert!(live.process_change(&change, usize::MAX).is_empty(), "{mode:?}: asked again");
            if mode == TagMode::File {
                live.write_all_tags();
                let tagged = std::fs::read_to_string(&p).unwrap();
                let want = format!(
                    "{imports}# @claude[{f}] explain this\ndef f():\n    pass\n\n\n# @claude[{g}] explain this\ndef g():\n    pass\n"
                );
                assert_eq!(tagged, want, "the tags landed on the wrong markers");
            }
            resolve(&live, g);
            let left = std::fs::read_to_string(&p).unwrap();
            let f_tag = if mode == TagMode::File { format!("[{f}]") } else { String::new() };
            assert_eq!(
                left,
                format!("{imports}# @claude{f_tag} explain this\ndef f():\n    pass\n\n\ndef g():\n    pass\n"),
                "{mode:?}: resolving g's ask removed another"
            );
        }
    }

    /// Issue 30 (2): a two-line ask whose second line the user deletes right after it was
    /// announced (untagged, inside the settle time: a revision waiting for its text to settle)
    /// is still its ask: resolved by its record, what is left of it goes, and only that.
    #[test]
    fn an_ask_cut_short_before_its_tag_is_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut live =
            LivePipeline::with_asks(root.clone(), scanner(), TagMode::File, Asks::in_memory())
                .settling(std::time::Duration::from_secs(5), None);
        let p = root.join("a.py");
        crate::test_support::write(
            &p,
            "# @claude explain this\n# and say why\ndef f():\n    pass\n",
        )
        .unwrap();
        let change = Change { path: p.clone(), from_git: None, rescan: None, renamed_from: vec![] };
        let asks = live.process_change(&change, usize::MAX);
        assert_eq!(asks.len(), 1);
        live.delivered(&asks, true);
        crate::test_support::write(&p, "# @claude explain this\ndef f():\n    pass\n").unwrap();
        assert!(live.process_change(&change, usize::MAX).is_empty(), "announced before it settled");
        resolve(&live, asks[0].record);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "def f():\n    pass\n");
        // Above a comment that was there before: cut short, the ask now runs into it in the
        // file's paragraph, and only what is left of the ask goes. (A new run: the first one
        // took the revision for an editor that autosaves.)
        let mut live =
            LivePipeline::with_asks(root.clone(), scanner(), TagMode::File, Asks::in_memory())
                .settling(std::time::Duration::from_secs(5), None);
        let q = root.join("b.py");
        crate::test_support::write(&q, "# NOTE: keep\ndef f():\n    pass\n").unwrap();
        let change = Change { path: q.clone(), from_git: None, rescan: None, renamed_from: vec![] };
        assert!(live.process_change(&change, usize::MAX).is_empty());
        crate::test_support::write(
            &q,
            "# @claude explain this\n# and say why\n# NOTE: keep\ndef f():\n    pass\n",
        )
        .unwrap();
        let asks = live.process_change(&change, usize::MAX);
        assert_eq!(asks.len(), 1);
        assert_eq!(asks[0].marker.text, "@claude explain this\nand say why");
        live.delivered(&asks, true);
        crate::test_support::write(
            &q,
            "# @claude explain this\n# NOTE: keep\ndef f():\n    pass\n",
        )
        .unwrap();
        live.process_change(&change, usize::MAX);
        resolve(&live, asks[0].record);
        assert_eq!(std::fs::read_to_string(&q).unwrap(), "# NOTE: keep\ndef f():\n    pass\n");
    }

    /// A marker removed by hand (not through `resolve_ask`) is settled too.
    #[test]
    fn a_marker_deleted_by_hand_does_not_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = live(dir.path());
        let p = live.files.root.join("a.py");
        crate::test_support::write(&p, "# @claude one\nx = 1\n").unwrap();
        let id = live.process(&p, None)[0].id().unwrap();
        crate::test_support::write(&p, "x = 1\n").unwrap();
        assert!(live.process(&p, None).is_empty());
        assert!(!live.ledger.asks.by_id(id).unwrap().is_pending());
        crate::test_support::write(&p, "# @claude one\nx = 1\n").unwrap();
        assert!(live.process(&p, None).is_empty());
    }

    /// `--tag never`: no byte of the file changes; the ledger remembers the ask across a
    /// restart, and resolve is the only write.
    #[test]
    fn tag_never_writes_nothing_and_remembers_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let start = || {
            let asks = Asks::with_ledger_in(state.path(), &root, DEFAULT_TRIGGER).unwrap();
            LivePipeline::with_asks(root.clone(), scanner(), TagMode::Never, asks)
        };
        let mut live = start();
        let p = root.join("a.py");
        let text = "x = 1\n# @claude rename x\n";
        crate::test_support::write(&p, text).unwrap();
        let asks = live.process(&p, None);
        assert_eq!(asks.len(), 1);
        assert!(!asks[0].stamped);
        let id = asks[0].id().expect("an id from the ledger");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text, "the file was written");
        crate::test_support::write(&p, format!("{text}y = 2\n")).unwrap();
        assert!(live.process(&p, None).is_empty());
        drop(live);
        let mut restarted = start();
        crate::test_support::write(&p, format!("{text}y = 3\n")).unwrap();
        assert!(restarted.process(&p, None).is_empty(), "announced again after a restart");
        resolve(&restarted, id);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x = 1\ny = 3\n");
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1, "nothing else in the tree");
    }
}
