//! filewatch-mcp: hears `// @claude <ask>` comments the moment a file is saved and hands them to
//! Claude Code, once each.
//!
//! ```text
//!  notify ──► watch ──(Change)──► pipeline: read ──► scan ──(Marker)──► git ──► stamp ──(Ask)──► announce
//!             ignore rules,       regular files,      memmem prefilter,  drop what  tag splice,    MCP channel
//!             debounce,           size and binary     tree-sitter or     git wrote  checked        notification
//!             git lock            checks (fsio)       fallback table                atomic write   (or terminal)
//! ```
//! The pure stages are public modules: [`scan`] finds [`Marker`]s in bytes, [`stamp`] splices
//! tags in and resolves asks out, [`languages`] is the language table (`grammars.toml`). The
//! rest is private behind this facade: the one-shot pipelines ([`scan_paths`], [`stamp_file`],
//! [`resolve_in_tree`]), the live one ([`Live`], [`LivePipeline`]), the checked atomic replace
//! ([`replace_checked`]) and the MCP server ([`server`]). [`owner`] decides which process on a
//! root announces when several run there (two Claude Code sessions in one repository).
#![deny(clippy::print_stdout)]
#![deny(missing_docs)]

mod asks;
mod autosave;
mod claude_writes;
pub mod doctor;
mod error;
mod fsio;
mod git;
mod grammar;
pub mod hear;
mod id;
pub mod languages;
mod lines;
mod live;
pub mod log_file;
pub mod owner;
mod pairing;
mod pipeline;
mod relpath;
pub mod scan;
pub mod server;
pub mod stamp;
mod state;
mod sys;
#[cfg(test)]
mod test_support;
mod vscode_settings;
mod walk;
mod watch;

pub use asks::{AskRecord, Asks, TagMode, RESOLVED_WINDOW};
pub use autosave::{
    mode_line as autosave_mode_line, reset as autosave_reset, show as autosave_show, ModeSwitch,
};
pub use claude_writes::{record_hook, HookError};
pub use error::{Problem, StartError};
pub use fsio::{read_source, replace_checked, ReadError, Source, WriteError, MAX_FILE_SIZE};
pub use git::GitWindow;
pub use id::{uuid_random, BadId, MarkerId};
pub use languages::{Language, LanguageTable};
pub use live::{Ask, Delivery, Live, LiveOptions, LivePipeline, Sink};
pub use pipeline::{
    candidate_files, near_misses, relative, resolve_file, resolve_in_tree, resolve_recorded,
    scan_file, scan_paths, stamp_file, EditError, FileMarkers, ScanReport, WRITE_ATTEMPTS,
};
pub use scan::{
    escaped, DecidedBy, FallbackReason, Marker, MarkerView, NearMiss, NearMissWhy, Scanner,
    DEFAULT_TRIGGER,
};
pub use sys::{shutdown_signal, slash_path};
pub use walk::Listing;
pub use watch::{Change, Watch, WatchStats};
