//! The live stage behind `watch` and the server: a changed file is read, its fresh markers
//! are found, those git brought or the user already asked are dropped, a paragraph is cut to
//! the lines written with it, and the rest are recorded and handed on as [`Ask`]s — by one
//! worker, [`Live`], that both front ends run. An ask is announced first and tagged after:
//! once it reached the client, and once its file has been quiet for the settle time, so that
//! no tag lands under an editor's unsaved typing and nothing is tagged that nobody heard. On a
//! root whose editor saves while its user types (see [`crate::autosave`]) an ask waits until
//! its text has settled, and its id stays in the record instead of the file.
//!
//! Its rooms, in the order a change goes through them:
//! - `worker`: [`Live`], the thread that takes the watcher's changes to the pipeline and its
//!   asks to a [`Sink`];
//! - `pipeline`: [`LivePipeline`], a change's way, step by step, over the parts below;
//! - `files`: reading a file of the root safely; what each file held when we last left it;
//! - `aside`: big files parsed and scanned on a thread of their own, so no other file waits;
//! - `reconcile`: the file's markers against the ledger: closed, revised, claimed;
//! - `provenance`: what the user did not type (git's lines, Claude's writes, renames);
//! - `typing`: asks the user may still be typing (autosaving editors);
//! - `tag_queue`: delivered asks waiting for their file to be quiet to get their tags.

mod aside;
mod files;
mod pipeline;
mod provenance;
mod reconcile;
mod tag_queue;
mod typing;
mod worker;

use std::path::PathBuf;

use crate::id::MarkerId;
use crate::scan::Marker;

pub use pipeline::LivePipeline;
pub use worker::{Delivery, Live, LiveOptions, Sink};

/// A new ask: a marker the user just wrote, with its id.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The file, absolute.
    pub path: PathBuf,
    /// The file relative to the root, `/`-separated.
    pub file: String,
    /// The marker as announced (a paragraph cut to the lines written with it); `tag` holds the
    /// ask's id, unless the file could not be written in `--tag file` mode.
    pub marker: Marker,
    /// The id of its record in the ledger: the same as its tag, also where the file cannot be
    /// tagged (what hearing it is tracked by).
    pub record: MarkerId,
    /// True when the id is written into the file as a tag (once the ask has been heard and the
    /// file is quiet).
    pub stamped: bool,
    /// True when this is the whole text of an ask announced before under the same id (its
    /// first words, saved by an editor while the user was still typing): it replaces that one.
    pub revised: bool,
}

impl Ask {
    /// The id the ask is known by: `None` only for a file that could not be stamped.
    pub fn id(&self) -> Option<MarkerId> {
        self.marker.tag
    }

    /// The id for logs, or `untagged`.
    pub fn label(&self) -> String {
        self.id().map_or_else(|| "untagged".to_string(), |id| id.to_string())
    }
}

/// What the tests of the live rooms share: pipelines on a temporary root, and a resolve.
#[cfg(test)]
mod testing {
    use std::path::Path;

    use super::LivePipeline;
    use crate::id::MarkerId;
    use crate::languages::LanguageTable;
    use crate::scan::{Scanner, DEFAULT_TRIGGER};

    /// A pipeline on `root` (canonicalized).
    pub fn live(root: &Path) -> LivePipeline<'static> {
        LivePipeline::new(root.canonicalize().unwrap(), scanner())
    }

    /// A pipeline on `root`, as given.
    pub fn live_at(root: &Path) -> LivePipeline<'static> {
        LivePipeline::new(root.to_path_buf(), scanner())
    }

    pub fn scanner() -> Scanner<'static> {
        Scanner::new(LanguageTable::builtin(), DEFAULT_TRIGGER).unwrap()
    }

    /// Resolves the recorded ask `id` as `resolve_ask` does: by its record, then in the ledger.
    pub fn resolve(live: &LivePipeline, id: MarkerId) {
        let asks = &live.ledger.asks;
        let record = asks.by_id(id).expect("a recorded ask");
        let (scanner, root) = (&live.files.scanner, &live.files.root);
        assert!(crate::pipeline::resolve_recorded(scanner, root, &record).unwrap());
        asks.resolve(id);
    }
}
