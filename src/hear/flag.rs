//! Whether a Claude Code session was started with a channel flag (`--channels`,
//! `--dangerously-load-development-channels`): without one no channel message reaches Claude,
//! and the hooks carry every ask. Read from the command lines of the processes above a server.

use super::hub::ChannelState;

/// The flags that ask Claude Code for channels.
pub const FLAGS: [&str; 2] = ["--channels", "--dangerously-load-development-channels"];

/// What the command lines above a server say of the channel flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelFlag {
    /// Process `pid` was started with it: the flag and what follows it on its command line.
    Given {
        /// The process (Claude Code).
        pid: u32,
        /// `--dangerously-load-development-channels server:filewatch`.
        words: String,
    },
    /// The command lines were read, and none has it.
    Absent,
    /// No command line could be read (Windows): it may have been given.
    Unknown,
}

impl ChannelFlag {
    /// The flag among the command lines of `ancestors` (nearest first).
    pub fn of(ancestors: &[u32]) -> ChannelFlag {
        let mut read_any = false;
        for &pid in ancestors {
            let Some(args) = crate::sys::command_line(pid) else { continue };
            read_any = true;
            let is_flag =
                |a: &String| FLAGS.iter().any(|f| a == f || a.starts_with(&format!("{f}=")));
            if let Some(at) = args.iter().position(is_flag) {
                // The flag's values run to the next flag.
                let values = args[at + 1..].iter().take_while(|a| !a.starts_with("--"));
                let words = std::iter::once(&args[at]).chain(values).cloned();
                return ChannelFlag::Given { pid, words: words.collect::<Vec<_>>().join(" ") };
            }
        }
        if read_any {
            ChannelFlag::Absent
        } else {
            ChannelFlag::Unknown
        }
    }

    /// What the hub expects of the channel: deaf without a flag, unknown with one (or where
    /// command lines cannot be read).
    pub fn channel_state(&self) -> ChannelState {
        match self {
            ChannelFlag::Absent => ChannelState::Deaf,
            ChannelFlag::Given { .. } | ChannelFlag::Unknown => ChannelState::Unknown,
        }
    }
}
