//! filewatch-mcp: hears `// @claude <ask>` comments the moment a file is saved.
//!
//! ```text
//!  path ──► fsio::read_source ──(bytes)──► scan ──(markers)──► stamp ──(asks)──► announce
//!           regular files only,            memmem prefilter,
//!           size and binary checks         tree-sitter or fallback table
//! ```
//! [`languages`] loads the language table (`grammars.toml`), [`grammar`] maps its grammar names
//! to compiled-in tree-sitter languages, [`walk`] lists the files of a tree the way `git` would.
#![deny(clippy::print_stdout)]

pub mod fsio;
pub mod grammar;
pub mod languages;
pub mod pipeline;
pub mod scan;
pub mod server;
pub mod stamp;
pub mod walk;
pub mod watch;
