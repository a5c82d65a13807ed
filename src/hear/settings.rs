//! The hooks filewatch-mcp needs in Claude Code — one list ([`HOOKS`]), from which both the
//! plugin's `plugin/hooks/hooks.json` and the settings hooks of a server registered with
//! `claude mcp add` are made — and putting them into a Claude Code settings file, or taking
//! them out (`filewatch-mcp hooks install|remove`), without touching anything else in it.
//!
//! A hook is ours when its command runs `filewatch-mcp hook` (by name or by path, in exec or
//! shell form; an older version's two-hook set included): those are replaced, nothing else is.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

/// How long a waiting hook (`SessionStart`, `Stop` with `asyncRewake`) may run, in seconds.
/// Claude Code's default for a hook is 600 s and it has no cap; at the limit it SIGTERMs the
/// hook silently, and nothing waits again until the next turn ends: an idle session could no
/// longer be woken. So: about 23 days (docs/claude-code-hooks.md, 1).
pub const WAIT_TIMEOUT: u64 = 2_000_000;

/// How long a quick hook may run, in seconds (it takes milliseconds; its server answers
/// within 1.5 s or is given up on).
pub const QUICK_TIMEOUT: u64 = 10;

/// One hook of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hook {
    /// Claude Code's event.
    pub event: &'static str,
    /// The tools it runs for (`PreToolUse`, `PostToolUse`), as Claude Code's matcher.
    pub matcher: Option<&'static str>,
    /// `hook --wait` with `asyncRewake`: it waits in the background and wakes an idle session.
    pub wait: bool,
}

/// The hook set, in the order it is written:
/// - `SessionStart`, `Stop`: wait in the background until an ask is saved, then wake the idle
///   session with it (`asyncRewake`);
/// - `UserPromptSubmit`, `PostToolUse` (every tool): hand Claude the asks it has not heard yet
///   as `additionalContext`;
/// - `PreToolUse` of the file tools (and `PostToolUse`): record the lines Claude writes, so a
///   marker Claude writes is never taken for the user's ask.
pub const HOOKS: &[Hook] = &[
    Hook { event: "SessionStart", matcher: None, wait: true },
    Hook { event: "Stop", matcher: None, wait: true },
    Hook { event: "UserPromptSubmit", matcher: None, wait: false },
    Hook { event: "PreToolUse", matcher: Some("Write|Edit|MultiEdit|NotebookEdit"), wait: false },
    Hook { event: "PostToolUse", matcher: Some("*"), wait: false },
];

/// What a hook entry runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookCommand {
    /// `filewatch-mcp hook`, found on the `PATH` Claude Code runs hooks with.
    ByName,
    /// The binary at this (absolute) path, `hook`.
    Path(PathBuf),
    /// The plugin's wrapper, `${CLAUDE_PLUGIN_ROOT}/hooks/filewatch-hook` (it adds `hook`).
    Plugin,
}

/// The plugin's wrapper, as its hooks.json names it.
pub const PLUGIN_COMMAND: &str = "${CLAUDE_PLUGIN_ROOT}/hooks/filewatch-hook";

impl HookCommand {
    /// The entry of `hook`, in exec form (`command` and `args`: no shell, so a path with spaces
    /// or quotes needs no quoting on any OS).
    pub fn entry(&self, hook: &Hook) -> Value {
        let (command, mut args) = match self {
            HookCommand::ByName => ("filewatch-mcp".to_string(), vec!["hook"]),
            HookCommand::Path(path) => (path.display().to_string(), vec!["hook"]),
            HookCommand::Plugin => (PLUGIN_COMMAND.to_string(), vec![]),
        };
        if hook.wait {
            args.push("--wait");
        }
        let mut entry = json!({"type": "command", "command": command, "args": args});
        if hook.wait {
            entry["asyncRewake"] = json!(true);
            entry["timeout"] = json!(WAIT_TIMEOUT);
        } else {
            entry["timeout"] = json!(QUICK_TIMEOUT);
        }
        entry
    }

    /// The group (matcher and hooks) of `hook` under its event.
    fn group(&self, hook: &Hook) -> Value {
        let mut group = Map::new();
        if let Some(matcher) = hook.matcher {
            group.insert("matcher".into(), json!(matcher));
        }
        group.insert("hooks".into(), json!([self.entry(hook)]));
        Value::Object(group)
    }

    /// `{"hooks": {EVENT: [group], …}}`: what `hooks print` prints and `hooks install` merges.
    pub fn settings(&self) -> Value {
        let mut events = Map::new();
        for hook in HOOKS {
            events.insert(hook.event.into(), json!([self.group(hook)]));
        }
        json!({ "hooks": events })
    }
}

/// True if the hook entry `hook` runs `filewatch-mcp hook` (exec or shell form, by name or
/// path, `.exe` or not) or the plugin's wrapper.
pub fn runs_filewatch_hook(hook: &Value) -> bool {
    let mut words = words(hook["command"].as_str().unwrap_or_default());
    if let Some(args) = hook["args"].as_array() {
        words.extend(args.iter().filter_map(Value::as_str).map(str::to_string));
    }
    let name = |w: &str| w.rsplit(['/', '\\']).next().unwrap_or_default().to_ascii_lowercase();
    let binary = |w: &str| {
        matches!(name(w).as_str(), "filewatch-mcp" | "filewatch-mcp.exe" | "filewatch-mcp.cmd")
    };
    words.first().is_some_and(|w| name(w) == "filewatch-hook")
        || words.windows(2).any(|w| binary(&w[0]) && w[1] == "hook")
}

/// The words of a shell command line, with `'…'` and `"…"` quotes taken off (enough to find a
/// program and its first argument; nothing is run).
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quote, mut in_word) = (None, false);
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The events whose hooks in `settings` (a settings file's JSON) run `filewatch-mcp hook`,
/// each with whether one of them waits (`--wait` with `asyncRewake`).
pub fn events_installed(settings: &Value) -> Vec<(String, bool)> {
    let Some(events) = settings["hooks"].as_object() else { return Vec::new() };
    let mut found = Vec::new();
    for (event, groups) in events {
        let ours: Vec<&Value> = groups
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["hooks"].as_array())
            .flatten()
            .filter(|h| runs_filewatch_hook(h))
            .collect();
        if !ours.is_empty() {
            let waits = ours.iter().any(|h| {
                h["asyncRewake"] == json!(true)
                    && (words(h["command"].as_str().unwrap_or_default())
                        .iter()
                        .any(|w| w == "--wait")
                        || h["args"].as_array().is_some_and(|a| a.contains(&json!("--wait"))))
            });
            found.push((event.clone(), waits));
        }
    }
    found
}

/// Where Claude Code keeps settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The project's `.claude/settings.json`, shared with everyone who clones it.
    Project,
    /// The project's `.claude/settings.local.json`: yours, for this project.
    Local,
    /// `~/.claude/settings.json`: yours, in every project.
    User,
}

/// Claude Code's configuration directory: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub fn claude_config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    home_dir().map(|home| home.join(".claude"))
}

/// The user's home directory: `$HOME`, else `%USERPROFILE%`.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

impl Scope {
    /// The settings file of this scope, for the project at `root`.
    pub fn settings_file(self, root: &Path) -> Result<PathBuf, SettingsError> {
        let root = &std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        Ok(match self {
            Scope::Project => root.join(".claude").join("settings.json"),
            Scope::Local => root.join(".claude").join("settings.local.json"),
            Scope::User => claude_config_dir().ok_or(SettingsError::NoHome)?.join("settings.json"),
        })
    }
}

/// Why a settings file was not changed.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// Neither `HOME`, `USERPROFILE` nor `CLAUDE_CONFIG_DIR` says where `~/.claude` is.
    #[error("no home directory: neither HOME, USERPROFILE nor CLAUDE_CONFIG_DIR is set")]
    NoHome,
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The settings file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not JSON: Claude Code cannot read it either.
    #[error("{path}: not valid JSON ({source}); nothing changed: fix or move the file first")]
    NotJson {
        /// The settings file.
        path: PathBuf,
        /// Where and why.
        source: serde_json::Error,
    },
    /// The file is JSON, but not a settings object.
    #[error("{path}: {what}; nothing changed")]
    Shape {
        /// The settings file.
        path: PathBuf,
        /// What is wrong.
        what: &'static str,
    },
    /// The new file could not be written.
    #[error("{path}: cannot write: {source}")]
    Write {
        /// The settings file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What [`install`] or [`remove`] did to a settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The file (a symlink's target, if it was one).
    pub path: PathBuf,
    /// False if it already was as asked (it was not written).
    pub written: bool,
}

/// Puts the hook set into the settings file at `path` (made if missing): any hook that runs
/// `filewatch-mcp hook` is replaced by the set's, where the first of them was; every other
/// hook and key stays as it was, in its order. Written atomically, and only if it changes.
pub fn install(path: &Path, command: &HookCommand) -> Result<Changed, SettingsError> {
    edit(path, |hooks| {
        for hook in HOOKS {
            let groups = hooks.entry(hook.event).or_insert_with(|| json!([]));
            let Some(groups) = groups.as_array_mut() else {
                return Err("a hook event is not a list");
            };
            let at = strip_ours(groups).unwrap_or(groups.len());
            groups.insert(at.min(groups.len()), command.group(hook));
        }
        // What an older version put under other events goes.
        let events: Vec<&str> = HOOKS.iter().map(|h| h.event).collect();
        strip_ours_elsewhere(hooks, &events);
        Ok(())
    })
}

/// Takes every hook that runs `filewatch-mcp hook` out of the settings file at `path`, and the
/// groups and events left empty by that; nothing else changes. A missing file stays missing.
pub fn remove(path: &Path) -> Result<Changed, SettingsError> {
    if !path.exists() {
        return Ok(Changed { path: path.to_path_buf(), written: false });
    }
    edit(path, |hooks| {
        strip_ours_elsewhere(hooks, &[]);
        Ok(())
    })
}

/// Takes our hooks out of `groups`; a group left with no hooks goes. Returns where the first
/// group that held one was.
fn strip_ours(groups: &mut Vec<Value>) -> Option<usize> {
    let mut first = None;
    let mut i = 0;
    while i < groups.len() {
        let Some(list) = groups[i].get_mut("hooks").and_then(Value::as_array_mut) else {
            i += 1;
            continue;
        };
        let before = list.len();
        list.retain(|h| !runs_filewatch_hook(h));
        if list.len() == before {
            i += 1;
            continue;
        }
        first.get_or_insert(i);
        if list.is_empty() {
            groups.remove(i);
        } else {
            i += 1;
        }
    }
    first
}

/// Takes our hooks out of every event but those in `except`; an event left empty by that goes.
fn strip_ours_elsewhere(hooks: &mut Map<String, Value>, except: &[&str]) {
    let events: Vec<String> =
        hooks.keys().filter(|e| !except.contains(&e.as_str())).cloned().collect();
    for event in events {
        let Some(groups) = hooks.get_mut(&event).and_then(Value::as_array_mut) else { continue };
        if strip_ours(groups).is_some() && groups.is_empty() {
            hooks.remove(&event);
        }
    }
}

/// Reads the settings at `path` (none: `{}`), lets `change` edit its `hooks` object, and
/// writes the result back if it changed: the file's JSON unchanged but for what `change` did.
fn edit(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> Result<(), &'static str>,
) -> Result<Changed, SettingsError> {
    // A symlinked settings file (dotfiles kept elsewhere) is written where it points.
    // Named as people write it: without the `\\?\` that canonical paths carry on Windows.
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = crate::sys::plain_path(&path).into_owned();
    let before = read_settings(&path)?;
    let mut after = before.clone();
    let shape = |what| SettingsError::Shape { path: path.clone(), what };
    let object = after.as_object_mut().ok_or_else(|| shape("not a JSON object"))?;
    let hooks = object.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks.as_object_mut().ok_or_else(|| shape("\"hooks\" is not an object"))?;
    let had_some = !hooks.is_empty();
    change(hooks).map_err(shape)?;
    // No `hooks` left behind that was not there, or that only ours filled.
    if hooks.is_empty() && (had_some || before.get("hooks").is_none()) {
        object.remove("hooks");
    }
    if after == before && path.exists() {
        return Ok(Changed { path, written: false });
    }
    write_settings(&path, &after)?;
    Ok(Changed { path, written: true })
}

/// The settings at `path`: `{}` if there is no file or it is blank.
pub fn read_settings(path: &Path) -> Result<Value, SettingsError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(json!({})),
        Err(source) => return Err(SettingsError::Read { path: path.to_path_buf(), source }),
    };
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(&text)
        .map_err(|source| SettingsError::NotJson { path: path.to_path_buf(), source })
}

/// Writes `settings` to `path` atomically: a temp file beside it, with the old file's
/// permissions, renamed over it. Its directory is made if missing.
fn write_settings(path: &Path, settings: &Value) -> Result<(), SettingsError> {
    let error = |source| SettingsError::Write { path: path.to_path_buf(), source };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(error)?;
    let mut text = serde_json::to_string_pretty(settings).map_err(|e| error(e.into()))?;
    text.push('\n');
    let mut tmp = tempfile::Builder::new()
        .prefix(".settings.")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(error)?;
    tmp.write_all(text.as_bytes()).map_err(error)?;
    if let Ok(meta) = std::fs::metadata(path) {
        tmp.as_file().set_permissions(meta.permissions()).map_err(error)?;
    }
    tmp.as_file().sync_all().map_err(error)?;
    tmp.persist(path).map_err(|e| error(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".claude/settings.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// The plugin's hooks.json is the set with the plugin's wrapper for the command.
    #[test]
    fn the_plugin_hooks_are_the_set() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/hooks/hooks.json");
        let plugin: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let set = HookCommand::Plugin.settings();
        assert_eq!(plugin["hooks"], set["hooks"], "plugin/hooks/hooks.json differs from HOOKS");
        // In the same order, too (serde_json keeps the order of keys here).
        let order = |v: &Value| v["hooks"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(order(&plugin), order(&set));
    }

    #[test]
    fn our_hooks_are_found_in_every_form() {
        for command in [
            json!({"command": "filewatch-mcp hook"}),
            json!({"command": "filewatch-mcp hook --wait"}),
            json!({"command": "\"/opt/my tools/filewatch-mcp\" hook"}),
            json!({"command": "C:\\Tools\\filewatch-mcp.exe hook"}),
            json!({"command": "filewatch-mcp", "args": ["hook", "--wait"]}),
            json!({"command": "/home/u/.cargo/bin/filewatch-mcp", "args": ["hook"]}),
            json!({"command": PLUGIN_COMMAND, "args": []}),
        ] {
            assert!(runs_filewatch_hook(&command), "{command}");
        }
        for command in [
            json!({"command": "filewatch-mcp scan"}),
            json!({"command": "echo filewatch-mcp"}),
            json!({"command": "my-hook", "args": ["hook"]}),
            json!({"type": "prompt"}),
        ] {
            assert!(!runs_filewatch_hook(&command), "{command}");
        }
    }

    /// Other hooks and keys stay, in their order; an older version's two hooks are replaced;
    /// a second install changes nothing.
    #[test]
    fn install_replaces_ours_only_and_twice_is_once() {
        let (_dir, path) = file_with(
            r#"{
  "model": "opus",
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]},
      {"matcher": "Write|Edit|MultiEdit|NotebookEdit",
       "hooks": [{"type": "command", "command": "filewatch-mcp hook", "timeout": 10}]}
    ],
    "PostToolUse": [
      {"matcher": "Write|Edit|MultiEdit|NotebookEdit",
       "hooks": [{"type": "command", "command": "filewatch-mcp hook", "timeout": 10},
                 {"type": "command", "command": "./fmt.sh"}]}
    ],
    "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]
  },
  "permissions": {"allow": ["Bash"]}
}"#,
        );
        let changed = install(&path, &HookCommand::ByName).unwrap();
        assert!(changed.written);
        let once = std::fs::read_to_string(&path).unwrap();
        let v: Value = serde_json::from_str(&once).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["model", "hooks", "permissions"]);
        let events: Vec<&String> = v["hooks"].as_object().unwrap().keys().collect();
        assert_eq!(
            events,
            [
                "PreToolUse",
                "PostToolUse",
                "Notification",
                "SessionStart",
                "Stop",
                "UserPromptSubmit"
            ]
        );
        assert_eq!(v["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "./guard.sh");
        assert_eq!(v["hooks"]["PreToolUse"][1], HookCommand::ByName.group(&HOOKS[3]));
        assert_eq!(v["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        // The user's hook that shared a group with ours keeps its group, after ours.
        assert_eq!(v["hooks"]["PostToolUse"][0], HookCommand::ByName.group(&HOOKS[4]));
        assert_eq!(
            v["hooks"]["PostToolUse"][1],
            json!({"matcher": "Write|Edit|MultiEdit|NotebookEdit",
                   "hooks": [{"type": "command", "command": "./fmt.sh"}]})
        );
        assert_eq!(v["hooks"]["Notification"][0]["hooks"][0]["command"], "notify-send hi");
        let installed: Vec<(String, bool)> = events_installed(&v);
        assert_eq!(installed.len(), 5, "{installed:?}");
        assert!(installed.contains(&("Stop".to_string(), true)));

        let again = install(&path, &HookCommand::ByName).unwrap();
        assert!(!again.written);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), once);
        // Another command replaces ours where they are.
        let bin = HookCommand::Path(PathBuf::from("/opt/fw/filewatch-mcp"));
        install(&path, &bin).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["hooks"]["PreToolUse"][1], bin.group(&HOOKS[3]));
        assert_eq!(v["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 1);
    }

    /// Remove takes ours out and what it left empty, and nothing else.
    #[test]
    fn remove_leaves_the_rest() {
        let (_dir, path) = file_with(
            r#"{"hooks": {"Notification": [{"hooks": [{"type": "command", "command": "x"}]}]}, "env": {}}"#,
        );
        let original: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        install(&path, &HookCommand::ByName).unwrap();
        assert!(remove(&path).unwrap().written);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v, original);
        assert!(!remove(&path).unwrap().written);
        // A file that held only our hooks is left `{}`.
        let (_dir, path) = file_with("");
        install(&path, &HookCommand::ByName).unwrap();
        remove(&path).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v, json!({}));
    }

    /// A file Claude Code could not read either is an error that names it; nothing changes.
    #[test]
    fn a_file_that_is_not_json_is_named_and_left_alone() {
        for text in ["{\"hooks\": {", "[1, 2]", "{\"hooks\": []}"] {
            let (_dir, path) = file_with(text);
            let e = install(&path, &HookCommand::ByName).unwrap_err();
            // Named as the file is: its canonical path, without Windows' `\\?\`.
            let named = crate::sys::plain_path(&std::fs::canonicalize(&path).unwrap()).into_owned();
            assert!(e.to_string().contains(&named.display().to_string()), "{e}");
            assert!(e.to_string().contains("nothing changed"), "{e}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
            let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
            assert_eq!(left.len(), 1, "no temp file left");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_settings_file_is_written_where_it_points() {
        let (dir, target) = file_with("{\"model\": \"opus\"}");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        install(&link, &HookCommand::ByName).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
        assert_eq!(events_installed(&v).len(), 5);
        assert_eq!(v["model"], "opus");
    }
}
