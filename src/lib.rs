//! filewatch-mcp: hears `// @claude <ask>` comments the moment a file is saved.
//!
//! ```text
//!  notify ──► watch ──(path)──► fsio::read_source ──► scan ──(markers)──► stamp ──► announce
//!             ignore rules,      regular files only,   memmem prefilter,   tag splice,  MCP channel
//!             debounce,          size and binary       tree-sitter or      checked      notification
//!             git hold           checks                fallback table      atomic write (or terminal)
//! ```
//! [`languages`] loads the language table (`grammars.toml`), [`grammar`] maps its grammar names
//! to compiled-in tree-sitter languages, [`walk`] lists a tree the way `git` would, [`pipeline`]
//! strings the stages together, and [`server`] speaks MCP to Claude Code.
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
