//! Hearing: whether an ask entered Claude's context, and the second door it enters by.
//!
//! A channel notification written to stdout is not delivery: Claude Code listens on the channel
//! only in some sessions, and drops some messages even then. Its hooks reach every session, so
//! an ask goes pending → heard → resolved, and is heard only on evidence:
//! - a hook printed it into the conversation (`additionalContext` of `PostToolUse` and
//!   `UserPromptSubmit`; the stderr of a `SessionStart`/`Stop` hook with `asyncRewake`, which
//!   wakes an idle session when it exits 2);
//! - the session's transcript holds its id (its channel message arrived, or Claude read it);
//! - Claude named it in a call of a filewatch tool.
//!
//! ```text
//!   server (owner of the root)                         Claude Code session
//!   Live ─(ask sent on the channel)─► Hub ◄─TCP 127.0.0.1─ `filewatch-mcp hook` (each hook run)
//!                     ◄─(heard ids)──  │                     prints the asks it is handed, acks
//!                                      └─ transcript: reads the ids Claude Code wrote there
//! ```
//! The hub ([`hub`]) lives in the server and hands each unheard ask to exactly one hook run of
//! its own session; the hook ([`hook`]) finds its session's server through an endpoint file in
//! the state directory ([`wire`]). Only the owner's hub hands asks out, so with two sessions on
//! a root only the owner's session hears them.

pub mod flag;
pub mod hook;
pub mod hub;
pub mod settings;
mod text;
mod transcript;
pub mod wire;

pub use flag::ChannelFlag;
pub use hook::{run_hook, HookRun};
pub use hub::Hub;
pub use text::{channel_content, for_model, MAX_ASK, RESOLVE_LINE};
pub use wire::Offer;
