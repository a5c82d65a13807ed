//! The links on this machine's side: the state directory, the session that owns the root (and
//! whether its Claude Code was started with a channel flag), what was learned of the editor,
//! and the OS's watch limits against the directories to watch.

use std::path::Path;

use super::{shown, thousands, Line, Place};
use crate::hear::wire::{endpoints_dir, Endpoint};
use crate::hear::ChannelFlag;
use crate::owner::OwnerInfo;

/// The `state` line: where it is, that it is a directory this user can write, and the root's log.
pub(super) fn state_dir(place: &Place) -> Line {
    const LINK: &str = "state";
    let Some(dir) = &place.state_dir else {
        return Line::missing(
            LINK,
            "no state directory: neither FILEWATCH_STATE_DIR, XDG_STATE_HOME nor HOME is set",
            "set HOME (or FILEWATCH_STATE_DIR) in the environment Claude Code runs in",
        );
    };
    let fix = "make it a directory you can write, or point FILEWATCH_STATE_DIR at one";
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => {
            return Line::missing(LINK, format!("{}: not a directory", shown(dir)), fix);
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Line::missing(LINK, format!("{}: {e}", shown(dir)), fix);
        }
        _ => {}
    }
    // Made as a server makes it (this user's alone), then written to as a server writes.
    let written = crate::state::make_private_dir(dir)
        .and_then(|()| tempfile::Builder::new().prefix(".doctor.").tempfile_in(dir).map(drop))
        .and_then(|()| std::fs::read_dir(dir).map(drop));
    if let Err(e) = written {
        return Line::missing(LINK, format!("{}: cannot write there: {e}", shown(dir)), fix);
    }
    let log = crate::log_file::default_path(&place.root, &place.trigger);
    let log = match log.as_ref().map(|l| (l, std::fs::metadata(l))) {
        Some((path, Ok(meta))) => {
            format!("; the server's log: {} ({} bytes)", shown(path), thousands(meta.len()))
        }
        Some((path, Err(_))) => format!("; the server's log will be {}", shown(path)),
        None => String::new(),
    };
    Line::ok(LINK, format!("{}: writable{log}", shown(dir)))
}

/// Who owns the root, as the state directory says.
pub(super) struct Owner {
    /// The state directory could not be read for it: why.
    unknown: Option<String>,
    /// The owner's record, if it runs.
    running: Option<OwnerInfo>,
    /// The last owner's record, if none runs.
    last: Option<OwnerInfo>,
    /// The servers on the root that run, the owner's included.
    servers: Vec<Endpoint>,
    /// This session's Claude Code, if the doctor runs in one (`CLAUDE_PID`, or `CLAUDECODE`
    /// and the owner's Claude Code among this process's ancestors).
    this_session: Option<This>,
}

/// The Claude Code session the doctor runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum This {
    /// Its process.
    Pid(u32),
    /// In a session (`CLAUDECODE=1`), but which is not said: the owner's if its Claude Code is
    /// an ancestor of this process.
    Ancestors,
}

impl Owner {
    pub(super) fn find(place: &Place) -> Owner {
        let this_session = match std::env::var("CLAUDE_PID").ok().and_then(|p| p.parse().ok()) {
            Some(pid) => Some(This::Pid(pid)),
            None if std::env::var("CLAUDECODE").as_deref() == Ok("1") => Some(This::Ancestors),
            None => None,
        };
        let mut owner =
            Owner { unknown: None, running: None, last: None, servers: Vec::new(), this_session };
        let Some(dir) = place.state_dir.as_ref().filter(|d| d.is_dir()) else {
            owner.unknown = Some("no usable state directory (see `state`)".to_string());
            return owner;
        };
        let record = crate::owner::recorded(dir, &place.root, &place.trigger);
        match record {
            Some(info) if info.ended.is_none() && crate::sys::process_alive(info.pid) => {
                owner.running = Some(info)
            }
            other => owner.last = other,
        }
        owner.servers = Endpoint::all(&endpoints_dir(dir))
            .into_iter()
            .map(|(_, e)| e)
            .filter(|e| e.root == place.root && e.trigger == place.trigger)
            .filter(|e| crate::sys::process_alive(e.pid))
            .collect();
        owner
    }

    /// True if a process owns the root now (its directories are watched already).
    pub(super) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The owner's processes above it, nearest first: its endpoint's, or its parent alone.
    fn ancestors(&self, info: &OwnerInfo) -> Vec<u32> {
        match self.servers.iter().find(|e| e.pid == info.pid) {
            Some(endpoint) => endpoint.ancestors.clone(),
            None => info.parent_pid.into_iter().collect(),
        }
    }

    /// The `owner` line.
    pub(super) fn line(&self) -> Line {
        const LINK: &str = "owner";
        if let Some(why) = &self.unknown {
            return Line::warning(LINK, format!("cannot tell: {why}"), "fix the state directory");
        }
        let Some(info) = &self.running else {
            let last = self.last.as_ref().map_or(String::new(), |l| {
                format!(
                    " (the last: pid {}, {})",
                    l.pid,
                    if l.ended.is_some() { "ended" } else { "gone" }
                )
            });
            return Line::ok(
                LINK,
                format!("no session owns the root now{last}: the next one started here takes it"),
            );
        };
        let alive = |pid: u32| if crate::sys::process_alive(pid) { "alive" } else { "gone" };
        if info.command == "watch" {
            let text = format!(
                "`filewatch-mcp watch` pid {} ({}) owns the root: asks go to its terminal, not to \
                 Claude",
                info.pid,
                alive(info.pid)
            );
            return Line::warning(
                LINK,
                text,
                "stop it (Ctrl-C): a session's server then takes over",
            );
        }
        let claude = info.parent_pid.map_or("Claude Code pid ?".to_string(), |p| {
            format!("Claude Code pid {p} ({})", alive(p))
        });
        let who = format!("filewatch-mcp pid {} ({}), {claude}", info.pid, alive(info.pid));
        let others: Vec<&Endpoint> = self.servers.iter().filter(|e| e.pid != info.pid).collect();
        let theirs = info.parent_pid;
        let elsewhere = match self.this_session {
            Some(This::Pid(pid)) => theirs != Some(pid),
            Some(This::Ancestors) => theirs.is_none_or(|p| !crate::sys::ancestors(16).contains(&p)),
            None => false,
        };
        if elsewhere {
            let text = format!(
                "another session owns the root: {who}; this session hears no ask until it exits"
            );
            return Line::warning(
                LINK,
                text,
                "work in that session, or end it: this one's server takes over",
            );
        }
        if !others.is_empty() {
            let standing: Vec<String> = others
                .iter()
                .map(|e| {
                    format!(
                        "pid {} of Claude Code pid {}",
                        e.pid,
                        e.ancestors.first().copied().unwrap_or(0)
                    )
                })
                .collect();
            let text = format!(
                "{who}; {} other session(s) stand by and hear no ask: {}",
                others.len(),
                standing.join(", ")
            );
            return Line::warning(
                LINK,
                text,
                "one session per project, or end the owner's to move the asks",
            );
        }
        Line::ok(
            LINK,
            format!(
                "{who}, since {}",
                info.describe().rsplit("owner since ").next().unwrap_or_default()
            ),
        )
    }

    /// The `channel` line: whether the owner's Claude Code was started with a channel flag.
    pub(super) fn channel_line(&self, plugin: bool) -> Line {
        const LINK: &str = "channel";
        let Some(info) = self.running.as_ref().filter(|i| i.command != "watch") else {
            return Line::ok(LINK, "no session owns the root: no channel flag to look at");
        };
        let name = if plugin { "plugin:filewatch@filewatch-mcp" } else { "server:filewatch" };
        let fix = format!(
            "start `claude --dangerously-load-development-channels {name}` for the channel's \
             fast path (the hooks carry the asks meanwhile)"
        );
        match ChannelFlag::of(&self.ancestors(info)) {
            ChannelFlag::Given { pid, words }
                if words.contains("filewatch") || !words.contains(':') =>
            {
                let text = format!(
                    "Claude Code pid {pid} was started with `{words}`: the channel is asked for \
                     (whether Claude Code registered it: debug-log), the hooks fill its gaps"
                );
                Line::ok(LINK, text)
            }
            ChannelFlag::Given { pid, words } => Line::warning(
                LINK,
                format!(
                    "Claude Code pid {pid} was started with `{words}`, which does not name \
                     filewatch: asks come by the hooks alone"
                ),
                fix,
            ),
            ChannelFlag::Absent => Line::warning(
                LINK,
                format!(
                    "Claude Code pid {} was started without a channel flag: asks come by the \
                     hooks alone",
                    info.parent_pid.unwrap_or(0)
                ),
                fix,
            ),
            ChannelFlag::Unknown => {
                Line::ok(LINK, "cannot tell (command lines cannot be read here)")
            }
        }
    }
}

/// The `editor` line: what was learned of the root's editor and the evidence for it, as
/// `filewatch-mcp autosave show` says it (the one place the doctor asks the autosave stage).
pub(super) fn editor(place: &Place) -> Line {
    Line::ok("editor", crate::autosave::mode_line(place.state_dir.as_deref(), &place.root))
}

/// The `inotify` line: the directories to watch against the watches left.
pub(super) fn inotify(place: &Place, watched_already: bool) -> Line {
    const LINK: &str = "inotify";
    let caveat = crate::sys::watch_caveat(&place.root);
    let Some(limits) = crate::sys::watch_limits() else {
        let text = "no per-directory watch limit here (one recursive watch)";
        return match caveat {
            Some(c) => Line::warning(LINK, c, "see docs/platforms.md"),
            None => Line::ok(LINK, text),
        };
    };
    let dirs = dirs_to_watch(&place.root);
    let needed = if watched_already { 0 } else { dirs };
    let text = format!(
        "{} to watch{}; {} of {} watches in use by your processes; {} of {} instances",
        if dirs == 1 {
            "1 directory".to_string()
        } else {
            format!("{} directories", thousands(dirs))
        },
        if watched_already { " (watched now)" } else { "" },
        thousands(limits.watches_in_use),
        thousands(limits.max_watches),
        limits.instances_in_use,
        limits.max_instances
    );
    let total = limits.watches_in_use + needed;
    let raise = |n: u64| {
        format!(
            "`sudo sysctl fs.inotify.max_user_watches={n}` (and the same line in /etc/sysctl.conf)"
        )
    };
    let suggested = (total * 2).max(524_288);
    if total > limits.max_watches {
        return Line::missing(LINK, format!("{text}: not enough"), raise(suggested));
    }
    if limits.instances_in_use + u64::from(!watched_already) > limits.max_instances {
        return Line::missing(
            LINK,
            format!("{text}: no instance left"),
            "`sudo sysctl fs.inotify.max_user_instances=1024`",
        );
    }
    if let Some(c) = caveat {
        return Line::warning(LINK, format!("{text}; {c}"), "see docs/platforms.md");
    }
    if total * 10 > limits.max_watches * 9 {
        return Line::warning(LINK, format!("{text}: nearly all"), raise(suggested));
    }
    Line::ok(LINK, text)
}

/// The directories the watcher would watch under `root`: those the ignore rules let through.
fn dirs_to_watch(root: &Path) -> u64 {
    let mut rules = crate::walk::IgnoreRules::new(root);
    let mut dirs = 0;
    for entry in crate::walk::builder(root).build().flatten() {
        let path = entry.path();
        if !entry.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        rules.load_dir(path);
        if path != root && rules.is_ignored(path, true) {
            continue;
        }
        dirs += 1;
    }
    dirs
}
