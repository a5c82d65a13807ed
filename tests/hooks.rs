//! `filewatch-mcp hooks print|install|remove`: the hook set for a server registered with
//! `claude mcp add`, put into Claude Code's settings files as a user runs it (HOME a temporary
//! directory), and the JSON the docs show is what it prints.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

mod common;

fn hooks(args: &[&str], dir: &Path, home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_filewatch-mcp"))
        .arg("hooks")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The ```json blocks of a doc that run `filewatch-mcp`.
fn doc_blocks(doc: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    text.split("```json")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .filter(|b| b.contains("\"filewatch-mcp\""))
        .map(|b| serde_json::from_str(b).unwrap_or_else(|e| panic!("{doc}: {e}\n{b}")))
        .collect()
}

#[test]
fn the_docs_show_what_hooks_print_prints() {
    let dir = tempfile::tempdir().unwrap();
    let printed: Value =
        serde_json::from_str(&ok(&hooks(&["print"], dir.path(), dir.path()))).unwrap();
    for doc in ["docs/hooks.md", "docs/security.md"] {
        let blocks = doc_blocks(doc);
        assert_eq!(blocks.len(), 1, "{doc}: one settings snippet");
        assert_eq!(blocks[0], printed, "{doc}'s snippet is not what `hooks print` prints");
    }
    // The plugin's hooks are the same, through its wrapper.
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/hooks/hooks.json");
    let plugin = read(&plugin);
    let events = |v: &Value| v["hooks"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(events(&plugin), events(&printed));
}

#[test]
fn print_with_bin_writes_an_absolute_path() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("fw");
    std::fs::write(&bin, "").unwrap();
    let out = ok(&hooks(&["print", "--bin", "fw"], dir.path(), dir.path()));
    let v: Value = serde_json::from_str(&out).unwrap();
    let command = v["hooks"]["PostToolUse"][0]["hooks"][0]["command"].as_str().unwrap();
    assert_eq!(Path::new(command), bin.canonicalize().unwrap());
    assert_eq!(v["hooks"]["PostToolUse"][0]["hooks"][0]["args"], json!(["hook"]));
    let missing = hooks(&["print", "--bin", "nope"], dir.path(), dir.path());
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
}

/// Each scope's file, installed twice (the same file), beside the user's own hooks and keys;
/// removed, it is as it was.
#[test]
fn install_in_each_scope_is_idempotent_and_remove_undoes_it() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let cases: [(&str, PathBuf); 3] = [
        ("project", project.path().join(".claude/settings.json")),
        ("local", project.path().join(".claude/settings.local.json")),
        ("user", home.path().join(".claude/settings.json")),
    ];
    let theirs = r#"{
  "permissions": {"allow": ["Bash(ls)"]},
  "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./log.sh"}]}]},
  "model": "opus"
}
"#;
    for (scope, file) in &cases {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, theirs).unwrap();
        let said = ok(&hooks(&["install", "--scope", scope], project.path(), home.path()));
        assert!(said.contains("hooks installed in"), "{said}");
        let once = std::fs::read_to_string(file).unwrap();
        let said = ok(&hooks(&["install", "--scope", scope], project.path(), home.path()));
        assert!(said.contains("unchanged"), "{said}");
        assert_eq!(std::fs::read_to_string(file).unwrap(), once, "{scope}: twice is once");

        let v: Value = serde_json::from_str(&once).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["permissions", "hooks", "model"], "{scope}: keys in their order");
        assert_eq!(v["hooks"]["PostToolUse"][0]["hooks"][0]["command"], "./log.sh");
        assert_eq!(v["hooks"]["PostToolUse"][1]["hooks"][0]["command"], "filewatch-mcp");
        for event in ["SessionStart", "Stop", "UserPromptSubmit", "PreToolUse", "PostToolUse"] {
            assert!(v["hooks"][event].is_array(), "{scope}: no {event}");
        }
        assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["asyncRewake"], true);

        ok(&hooks(&["remove", "--scope", scope], project.path(), home.path()));
        assert_eq!(read(file), serde_json::from_str::<Value>(theirs).unwrap(), "{scope}");
    }
}

/// A settings file Claude Code could not read either: named, exit 2, not changed.
#[test]
fn a_settings_file_that_is_not_json_is_an_error_that_names_it() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join(".claude/settings.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "{\"model\": \"opus\",\n").unwrap();
    let out = hooks(&["install", "--scope", "user"], home.path(), home.path());
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&file.display().to_string()) && err.contains("not valid JSON"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\"model\": \"opus\",\n");
}

/// The real Claude Code (offline, tests/common/claude.rs): a server registered with `claude mcp
/// add` and the hooks `hooks install --scope user` wrote, `filewatch-mcp` found on PATH by
/// name. The scripted model writes an ask through Bash (as the user's own save looks) and
/// waits; the PostToolUse hook hands it to the model after that tool call (no channel in `-p`).
#[cfg(unix)]
#[test]
fn claude_code_runs_the_installed_hooks_and_hears_an_ask_through_them() {
    use common::claude::{self, Claude, Reply, ScriptedApi};
    let Some(claude_bin) = claude::bin() else { return };
    let api = ScriptedApi::start();
    api.push([
        Reply::bash("printf '# @claude say hello from the settings hooks\\n' > ask.py && sleep 3"),
        Reply::text("done"),
    ]);
    let mut claude = Claude::new(&claude_bin, &api);
    let state = tempfile::tempdir().unwrap();
    let ours = Path::new(env!("CARGO_BIN_EXE_filewatch-mcp")).parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(ours).chain(std::env::split_paths(&path)));
    claude.env("PATH", path.unwrap().to_str().unwrap());
    claude.env("FILEWATCH_STATE_DIR", state.path().to_str().unwrap());
    ok(&hooks(&["install", "--scope", "user"], &claude.project, &claude.home));
    let root = claude.project.display().to_string();
    claude.run(&["mcp", "add", "-s", "user", "filewatch", "--", "filewatch-mcp", "--root", &root]);
    claude.project_settings(json!({"permissions": {"allow": ["Bash"]}}));

    let out = claude.print("write the ask", &[]);
    assert!(out.status.success(), "claude -p: {}", String::from_utf8_lossy(&out.stderr));
    let heard = "PostToolUse:Bash hook additional context: filewatch: the user saved an ask";
    let request = api.wait_for_request_containing(heard, common::mcp::DEADLINE);
    assert!(request.text.contains("@claude say hello from the settings hooks"));
    // (The instructions in the system prompt show an `<ask id=…>` element too: count the ask's.)
    let asks = request.text.matches("from the settings hooks\\n</ask>").count();
    assert_eq!(asks, 1, "the ask once: {}", claude::summary(&api.requests()));
}
