//! Claude Code's configuration as it concerns filewatch, read from its files as Claude Code
//! 2.1.332 writes them: `claude mcp add` writes `~/.claude.json` (`mcpServers` for the user
//! scope, `projects[DIR].mcpServers` for the local one) or the project's `.mcp.json`;
//! `claude plugin install` writes `~/.claude/plugins/installed_plugins.json` (each install's
//! scope, path and project) and `enabledPlugins` in the settings file of its scope; hooks live
//! in the settings files (`~/.claude/settings.json`, `.claude/settings.json`,
//! `.claude/settings.local.json`) and in an enabled plugin's `hooks/hooks.json`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::{run_for, shown, which, Json, Line, Place, Status};
use crate::hear::settings::{events_installed, runs_filewatch_hook, HOOKS, PLUGIN_COMMAND};

/// The plugin's name (`filewatch@<marketplace>` once installed) and its server's, as Claude
/// Code names it in its logs and caches.
const PLUGIN: &str = "filewatch";
const PLUGIN_SERVER: &str = "plugin:filewatch:filewatch";

/// How long a binary's `--version` may take.
const VERSION_WAIT: Duration = Duration::from_secs(5);

/// Claude Code's files, read once.
pub(super) struct ClaudeConfig {
    /// `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`), where it is.
    global: Option<(PathBuf, Json)>,
    /// The settings files, most specific first: local, project, user.
    settings: Vec<(PathBuf, Json)>,
    /// `~/.claude/plugins/installed_plugins.json`.
    plugins: Option<(PathBuf, Json)>,
    /// The project's `.mcp.json`.
    mcp_json: (PathBuf, Json),
}

impl ClaudeConfig {
    pub(super) fn load(place: &Place) -> ClaudeConfig {
        let read = |path: PathBuf| {
            let json = Json::read(&path);
            (path, json)
        };
        let global = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => Some(PathBuf::from(dir).join(".claude.json")),
            None => place.home.as_ref().map(|h| h.join(".claude.json")),
        };
        let mut settings = vec![
            read(place.root.join(".claude/settings.local.json")),
            read(place.root.join(".claude/settings.json")),
        ];
        if let Some(dir) = &place.claude_dir {
            settings.push(read(dir.join("settings.json")));
        }
        ClaudeConfig {
            global: global.map(read),
            settings,
            plugins: place
                .claude_dir
                .as_ref()
                .map(|d| read(d.join("plugins/installed_plugins.json"))),
            mcp_json: read(place.root.join(".mcp.json")),
        }
    }

    /// The first value of `key` in the settings files, most specific first.
    fn setting(&self, key: impl Fn(&Value) -> Option<&Value>) -> Option<&Value> {
        self.settings.iter().find_map(|(_, json)| key(json.value()))
    }

    /// `~/.claude.json`'s entries of the root and of the directories above it (Claude Code keys
    /// a project by the directory it was started in).
    fn project_entries<'a>(&'a self, root: &Path) -> Vec<(&'a str, &'a Value)> {
        let Some((_, global)) = &self.global else { return Vec::new() };
        let Some(projects) = global.value()["projects"].as_object() else { return Vec::new() };
        projects
            .iter()
            .filter(|(dir, _)| root.starts_with(Path::new(dir.as_str())))
            .map(|(dir, v)| (dir.as_str(), v))
            .collect()
    }

    /// Every registration of a filewatch server Claude Code would start in this project.
    pub(super) fn servers(&self, place: &Place) -> Servers {
        let mut found = Vec::new();
        let mut problems = Vec::new();
        let bad = |json: &Json| match json {
            Json::Bad(why) => Some(why.clone()),
            _ => None,
        };
        match &self.global {
            None => problems.push(
                "no home directory (HOME unset): ~/.claude.json and the plugins cannot be read"
                    .to_string(),
            ),
            Some((path, json)) => {
                problems.extend(bad(json));
                let file = shown(path);
                for (name, spec) in ours(&json.value()["mcpServers"]) {
                    found.push(Server::registered(name, spec, format!("{file} (user scope)")));
                }
                for (dir, entry) in self.project_entries(&place.root) {
                    for (name, spec) in ours(&entry["mcpServers"]) {
                        let scope = format!("{file} (local scope, project {dir})");
                        found.push(Server::registered(name, spec, scope));
                    }
                }
            }
        }
        let (mcp_path, mcp_json) = &self.mcp_json;
        problems.extend(bad(mcp_json));
        for (name, spec) in ours(&mcp_json.value()["mcpServers"]) {
            let mut server = Server::registered(
                name,
                spec,
                format!("{} (project scope)", place.shown(mcp_path)),
            );
            server.approval(self, &place.root);
            found.push(server);
        }
        if let Some((_, json)) = &self.plugins {
            problems.extend(bad(json));
            found.extend(self.plugin(place, json.value()));
        }
        let failed = self.remembered_failures(place, &found);
        Servers { found, problems, failed }
    }

    /// The filewatch plugin's installs that apply to this project, enabled or not.
    fn plugin(&self, place: &Place, installed: &Value) -> Option<Server> {
        let plugins = installed["plugins"].as_object()?;
        let (key, installs) =
            plugins.iter().find(|(key, _)| key.split('@').next() == Some(PLUGIN))?;
        let install = installs.as_array()?.iter().find(|i| {
            i["scope"] == "user"
                || i["projectPath"].as_str().is_some_and(|p| place.root.starts_with(p))
        })?;
        let path = PathBuf::from(install["installPath"].as_str().unwrap_or_default());
        let scope = install["scope"].as_str().unwrap_or("?");
        let enabled =
            self.setting(|s| s["enabledPlugins"].get(key.as_str())).and_then(Value::as_bool);
        let how = format!("the plugin {key} ({scope} scope), enabled");
        let mut server = Server {
            name: PLUGIN_SERVER.to_string(),
            how,
            problem: None,
            plugin: Some(Plugin { key: key.clone(), path: path.clone() }),
        };
        if enabled != Some(true) {
            let text = format!("the plugin {key} ({scope} scope), installed but not enabled");
            server.problem = Some((Status::Missing, text, format!("`claude plugin enable {key}`")));
        } else if !path.join("bin/filewatch-mcp-launch").is_file() {
            let text = format!("{}: its files are gone from {}", server.how, shown(&path));
            let fix = format!("`claude plugin uninstall {key}`, then install it again");
            server.problem = Some((Status::Missing, text, fix));
        } else if plugin_binary().is_none() && which("npx").is_none() {
            let text = format!("{}: no filewatch-mcp binary for it to run, and no npx", server.how);
            let fix = "install filewatch-mcp on PATH (docs/install.md), or Node.js for npx";
            server.problem = Some((Status::Missing, text, fix.to_string()));
        }
        Some(server)
    }

    /// Servers Claude Code remembers as failed (`~/.claude/mcp-needs-auth-cache.json`): it does
    /// not start them again, even once the cause is fixed.
    fn remembered_failures(&self, place: &Place, found: &[Server]) -> Vec<(String, PathBuf)> {
        let Some(dir) = &place.claude_dir else { return Vec::new() };
        let path = dir.join("mcp-needs-auth-cache.json");
        let json = Json::read(&path);
        let Some(cache) = json.value().as_object() else { return Vec::new() };
        found
            .iter()
            .filter(|s| cache.contains_key(&s.name))
            .map(|s| (s.name.clone(), path.clone()))
            .collect()
    }

    /// The `hooks` line: which of the hook set are installed where, and whether the binary
    /// they run runs.
    pub(super) fn hooks(&self, place: &Place, servers: &Servers) -> Line {
        const LINK: &str = "hooks";
        let mut sources: Vec<HookSource> = Vec::new();
        let mut problems = Vec::new();
        for (path, json) in &self.settings {
            match json {
                Json::Bad(why) => problems.push(format!("{why}: its hooks do not run")),
                Json::Value(v) if v["disableAllHooks"] == true => {
                    problems.push(format!("{}: disableAllHooks is set", place.shown(path)));
                }
                Json::Value(v) => {
                    let source = HookSource::of(place.shown(path), v);
                    if !source.events.is_empty() {
                        sources.push(source);
                    }
                }
                Json::Missing => {}
            }
        }
        if let Some(plugin) = servers.enabled_plugin() {
            let file = plugin.path.join("hooks/hooks.json");
            match Json::read(&file) {
                Json::Value(v) => {
                    sources.push(HookSource::of(format!("the plugin {}", plugin.key), &v))
                }
                Json::Bad(why) => problems.push(why),
                Json::Missing => problems.push(format!("{}: missing", shown(&file))),
            }
        }
        let fix = "`filewatch-mcp hooks install` in the project (docs/hooks.md)";
        if let Some(problem) = problems.first() {
            return Line::missing(LINK, problem.clone(), format!("fix or move that file; {fix}"));
        }
        if sources.is_empty() {
            let text = "no hook runs `filewatch-mcp hook` (no enabled plugin; none in the \
                        settings files): asks a channel does not carry never reach Claude";
            return Line::missing(LINK, text, fix);
        }
        let absent: Vec<&str> = HOOKS
            .iter()
            .filter(|h| {
                !sources
                    .iter()
                    .any(|s| s.events.iter().any(|(e, w)| e == h.event && (*w || !h.wait)))
            })
            .map(|h| h.event)
            .collect();
        let whence: Vec<String> = sources.iter().map(|s| s.whence.clone()).collect();
        if !absent.is_empty() {
            let text = format!("{} missing (found in {})", absent.join(", "), whence.join(", "));
            return Line::missing(LINK, text, fix);
        }
        let hooks: Vec<Value> = sources.into_iter().flat_map(|s| s.hooks).collect();
        match runnable(&hooks) {
            Ok(runs) => Line::ok(
                LINK,
                format!("all {} in {}; they run {runs}", HOOKS.len(), whence.join(", ")),
            ),
            Err((text, fix)) => Line::missing(LINK, text, fix),
        }
    }
}

/// Where some of the hooks are: a settings file, or the plugin.
struct HookSource {
    whence: String,
    /// The events with a hook of ours, each with whether one of them waits.
    events: Vec<(String, bool)>,
    /// Those hooks.
    hooks: Vec<Value>,
}

impl HookSource {
    fn of(whence: String, settings: &Value) -> HookSource {
        HookSource { whence, events: events_installed(settings), hooks: our_hooks(settings) }
    }
}

/// The `mcpServers` entries of `servers` that run filewatch-mcp.
fn ours(servers: &Value) -> Vec<(&str, &Value)> {
    let Some(servers) = servers.as_object() else { return Vec::new() };
    servers.iter().filter(|(_, spec)| is_filewatch(spec)).map(|(n, s)| (n.as_str(), s)).collect()
}

/// True if the server `spec` runs filewatch-mcp: its command (`filewatch-mcp`, a path to it,
/// the plugin's launcher), or an argument naming the npm package (`npx -y filewatch-mcp`).
fn is_filewatch(spec: &Value) -> bool {
    let base = |w: &str| w.rsplit(['/', '\\']).next().unwrap_or_default().to_ascii_lowercase();
    let command = base(spec["command"].as_str().unwrap_or_default());
    let named = |w: &str| w.starts_with("filewatch-mcp");
    named(&command)
        || spec["args"]
            .as_array()
            .is_some_and(|a| a.iter().filter_map(Value::as_str).any(|w| named(&base(w))))
}

/// The hook entries of a settings (or hooks.json) value that run `filewatch-mcp hook`.
fn our_hooks(settings: &Value) -> Vec<Value> {
    let Some(events) = settings["hooks"].as_object() else { return Vec::new() };
    events
        .values()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|g| g["hooks"].as_array())
        .flatten()
        .filter(|h| runs_filewatch_hook(h))
        .cloned()
        .collect()
}

/// The binaries the hooks run, each run with `--version`: what they are, or what is wrong.
fn runnable(hooks: &[Value]) -> Result<String, (String, String)> {
    let mut commands: Vec<String> =
        hooks.iter().filter_map(|h| h["command"].as_str()).map(str::to_string).collect();
    commands.sort();
    commands.dedup();
    let mut runs = Vec::new();
    for command in commands {
        let first = command.split_whitespace().next().unwrap_or_default().to_string();
        let bin = if command.starts_with(PLUGIN_COMMAND) {
            plugin_binary().ok_or_else(|| {
                (
                    "the plugin's hooks find no filewatch-mcp binary (FILEWATCH_MCP_BIN, PATH, \
                     ~/.cargo/bin): they do nothing"
                        .to_string(),
                    "install filewatch-mcp on PATH (docs/install.md)".to_string(),
                )
            })?
        } else {
            // An exec-form command is the binary; a shell-form one starts with it.
            let program = if which(&command).is_some() { command.clone() } else { first };
            which(&program).ok_or_else(|| {
                (
                    format!("the hooks run `{program}`, which is not on PATH: they cannot run"),
                    "put filewatch-mcp on PATH, or `filewatch-mcp hooks install --bin \
                     \"$(command -v filewatch-mcp)\"`"
                        .to_string(),
                )
            })?
        };
        runs.push(version_of(&bin)?);
    }
    Ok(runs.join(", "))
}

/// `PATH (filewatch-mcp 0.1.0)`, if `bin --version` says it is filewatch-mcp.
fn version_of(bin: &Path) -> Result<String, (String, String)> {
    let out = run_for(Command::new(bin).arg("--version"), VERSION_WAIT)
        .map_err(|why| (format!("{}: {why}", shown(bin)), "reinstall filewatch-mcp".to_string()))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !said.starts_with("filewatch-mcp") {
        let text =
            format!("{} --version said {said:?} ({}): not filewatch-mcp", shown(bin), out.status);
        return Err((text, "reinstall filewatch-mcp".to_string()));
    }
    Ok(format!("{} ({said})", shown(bin)))
}

/// The binary the plugin's launcher and hook wrapper run, found as they find it:
/// `$FILEWATCH_MCP_BIN`, `filewatch-mcp` on PATH, `${CARGO_HOME:-~/.cargo}/bin/filewatch-mcp`.
fn plugin_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("FILEWATCH_MCP_BIN").filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(bin)).filter(|b| b.is_file());
    }
    which("filewatch-mcp").or_else(|| {
        let cargo = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| crate::hear::settings::home_dir().map(|h| h.join(".cargo")))?;
        Some(cargo.join("bin/filewatch-mcp")).filter(|b| b.is_file())
    })
}

/// A registration of the server.
pub(super) struct Server {
    /// As Claude Code names it (`filewatch`, `plugin:filewatch:filewatch`).
    name: String,
    /// Where and how it is registered.
    how: String,
    /// What is wrong with it, if anything: the status, what, and the fix.
    problem: Option<(Status, String, String)>,
    plugin: Option<Plugin>,
}

/// An installed plugin.
pub(super) struct Plugin {
    /// `filewatch@filewatch-mcp`.
    key: String,
    /// Its files.
    path: PathBuf,
}

impl Server {
    /// A server registered by name in an `mcpServers` object; missing if its command is not
    /// where Claude Code would look for it.
    fn registered(name: &str, spec: &Value, whence: String) -> Server {
        let command = spec["command"].as_str().unwrap_or_default();
        let args: Vec<&str> =
            spec["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let how = format!("\"{name}\" in {whence}: {command} {}", args.join(" "));
        let problem = which(command).is_none().then(|| {
            (
                Status::Missing,
                format!(
                    "{}, but `{command}` is not on PATH: Claude Code cannot start it",
                    how.trim_end()
                ),
                "put filewatch-mcp on PATH, or register its absolute path".to_string(),
            )
        });
        Server { name: name.to_string(), how: how.trim_end().to_string(), problem, plugin: None }
    }

    /// A `.mcp.json` server runs only once approved in the project.
    fn approval(&mut self, config: &ClaudeConfig, root: &Path) {
        if self.problem.is_some() {
            return;
        }
        let listed = |key: &str| {
            let in_settings = config.setting(|s| s.get(key)).and_then(Value::as_array).cloned();
            let in_project = config
                .project_entries(root)
                .into_iter()
                .filter_map(|(_, e)| e[key].as_array().cloned());
            in_settings.into_iter().chain(in_project).flatten().any(|n| n == self.name.as_str())
        };
        if listed("disabledMcpjsonServers") {
            let text = format!("{}, but disabled in this project", self.how);
            self.problem = Some((
                Status::Missing,
                text,
                format!("enable \"{}\" in `claude`'s /mcp", self.name),
            ));
        } else if !listed("enabledMcpjsonServers")
            && config.setting(|s| s.get("enableAllProjectMcpServers")) != Some(&Value::Bool(true))
        {
            let text = format!("{}, pending approval", self.how);
            let fix = "start `claude` in the project once and approve it";
            self.problem = Some((Status::Warning, text, fix.to_string()));
        }
    }
}

/// The registrations found, and what kept some from being read.
pub(super) struct Servers {
    found: Vec<Server>,
    problems: Vec<String>,
    /// Servers Claude Code remembers as failed, and the file that remembers.
    failed: Vec<(String, PathBuf)>,
}

impl Servers {
    /// The names Claude Code gives them.
    pub(super) fn names(&self) -> Vec<String> {
        self.found.iter().map(|s| s.name.clone()).collect()
    }

    fn enabled_plugin(&self) -> Option<&Plugin> {
        self.found
            .iter()
            .find(|s| {
                s.plugin.is_some() && s.problem.as_ref().is_none_or(|p| p.0 != Status::Missing)
            })
            .and_then(|s| s.plugin.as_ref())
    }

    /// True if the server runs as the enabled plugin (its channel flag names the plugin).
    pub(super) fn plugin_enabled(&self) -> bool {
        self.enabled_plugin().is_some()
    }

    /// The `server` line.
    pub(super) fn line(&self) -> Line {
        const LINK: &str = "server";
        if let Some((name, file)) = self.failed.first() {
            let text = format!(
                "Claude Code remembers a failed start of \"{name}\" in {} and does not start it \
                 again",
                shown(file)
            );
            let fix =
                format!("remove the \"{name}\" entry from that file, then restart Claude Code");
            return Line::missing(LINK, text, fix);
        }
        let mut problems = self.problems.clone();
        problems.extend(self.found.iter().filter_map(|s| s.problem.as_ref().map(|p| p.1.clone())));
        let worst = self.found.iter().filter_map(|s| s.problem.as_ref()).max_by_key(|p| p.0);
        let fix = worst.map_or_else(
            || "fix what is named (Claude Code cannot read it either)".to_string(),
            |p| p.2.clone(),
        );
        let good: Vec<&str> =
            self.found.iter().filter(|s| s.problem.is_none()).map(|s| s.how.as_str()).collect();
        if self.found.is_empty() {
            let mut text = "not registered: no filewatch-mcp in ~/.claude.json or .mcp.json, and \
                            no filewatch plugin"
                .to_string();
            if problems.is_empty() {
                let register = "`claude mcp add filewatch -- filewatch-mcp --root .` in the \
                                project, or the plugin (docs/install.md)";
                return Line::missing(LINK, text, register);
            }
            text = format!("{text} that could be read: {}", problems.join("; "));
            return Line::missing(LINK, text, fix);
        }
        if problems.is_empty() {
            return Line::ok(LINK, good.join("; "));
        }
        if good.is_empty() {
            let status = worst.map_or(Status::Missing, |p| p.0);
            return Line { status, ..Line::missing(LINK, problems.join("; "), fix) };
        }
        Line::warning(LINK, format!("{}; but {}", good.join("; "), problems.join("; ")), fix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_filewatch_server_is_known_by_its_command() {
        for spec in [
            json!({"command": "filewatch-mcp", "args": ["--root", "."]}),
            json!({"command": "/home/u/.cargo/bin/filewatch-mcp"}),
            json!({"command": "C:\\bin\\filewatch-mcp.exe"}),
            json!({"command": "npx", "args": ["-y", "filewatch-mcp@0.1.0"]}),
            json!({"command": "/x/plugin/bin/filewatch-mcp-launch", "args": ["--root", "/p"]}),
        ] {
            assert!(is_filewatch(&spec), "{spec}");
        }
        for spec in [json!({"command": "node", "args": ["server.js"]}), json!({"url": "http://x"})]
        {
            assert!(!is_filewatch(&spec), "{spec}");
        }
    }
}
