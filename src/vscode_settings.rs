//! What VS Code's settings say about autosave, read at start: a root whose VS Code saves after
//! a delay (`"files.autoSave": "afterDelay"`) starts as a root whose editor saves while its user
//! types, so its first ask is not announced cut in half (issue 34). The settings are JSONC
//! (comments, trailing commas); the workspace's `.vscode/settings.json` overrides the user's.

use std::path::{Path, PathBuf};

/// A settings file larger than this is no settings file we read.
const MAX_SETTINGS: u64 = 1 << 20;

/// The VS Code family's user folders (each `<config dir>/<name>/User/settings.json`).
const FLAVOURS: &[&str] = &["Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf"];

/// The settings file that makes `root` an autosaving root, if one does: the workspace's
/// `.vscode/settings.json` when it sets `files.autoSave`, else a user settings file of VS Code
/// (or code-server, or a fork) that sets it to `afterDelay`.
pub fn autosave_settings(root: &Path) -> Option<PathBuf> {
    let workspace = root.join(".vscode").join("settings.json");
    if let Some(value) = auto_save(&workspace) {
        return (value == "afterDelay").then_some(workspace);
    }
    user_settings().into_iter().find(|file| auto_save(file).as_deref() == Some("afterDelay"))
}

/// The user settings files VS Code and its kin may keep: under `$XDG_CONFIG_HOME` (or
/// `~/.config`), `~/Library/Application Support` and `%APPDATA%`, and code-server's under
/// `$XDG_DATA_HOME` (or `~/.local/share`). Only those that exist are read.
fn user_settings() -> Vec<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = var("HOME");
    let config = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mac = home.as_ref().map(|h| h.join("Library").join("Application Support"));
    let data = var("XDG_DATA_HOME").or_else(|| home.as_ref().map(|h| h.join(".local/share")));
    let bases = [config, mac, var("APPDATA")].into_iter().flatten();
    let mut files: Vec<PathBuf> = bases
        .flat_map(|base| FLAVOURS.iter().map(move |f| base.join(f).join("User/settings.json")))
        .collect();
    files.extend(data.map(|d| d.join("code-server/User/settings.json")));
    files
}

/// The `files.autoSave` value of a settings file, if it exists, parses and sets one.
fn auto_save(file: &Path) -> Option<String> {
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() || meta.len() > MAX_SETTINGS {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let value: serde_json::Value = match serde_json::from_str(&strict_json(&text)) {
        Ok(value) => value,
        Err(e) => {
            tracing::debug!("{}: not read as settings: {e}", file.display());
            return None;
        }
    };
    Some(value.get("files.autoSave")?.as_str()?.to_string())
}

/// JSONC as JSON: `//` and `/* */` comments and commas before `}` or `]` taken out, strings
/// left as they are.
fn strict_json(text: &str) -> String {
    without_trailing_commas(&without_comments(text))
}

/// `text` with its comments taken out (a block comment becomes a space), strings kept.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                chars.by_ref().find(|&c| c == '\n');
                out.push('\n');
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                chars.by_ref().find(|&c| std::mem::replace(&mut last, c) == '*' && c == '/');
                out.push(' ');
            }
            _ => {
                in_string = c == '"';
                out.push(c);
            }
        }
    }
    out
}

/// JSON with commas before `}` or `]` (outside strings) taken out.
fn without_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            in_string = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            in_string = true;
        } else if c == ',' {
            let next = text[i + 1..].trim_start().chars().next();
            if matches!(next, Some('}' | ']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_settings_are_read() {
        let text = r#"{
            // autosave, please
            "files.autoSave": "afterDelay", /* a second */ "files.autoSaveDelay": 1000,
            "url": "http://x//y", "s": "a \" // b",
            "list": [1, 2, ],
        }"#;
        let v: serde_json::Value = serde_json::from_str(&strict_json(text)).unwrap();
        assert_eq!(v["files.autoSave"], "afterDelay");
        assert_eq!(v["url"], "http://x//y");
        assert_eq!(v["s"], "a \" // b");
        assert_eq!(v["list"], serde_json::json!([1, 2]));
    }

    #[test]
    fn the_workspace_overrides_the_user() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".vscode")).unwrap();
        let file = dir.path().join(".vscode/settings.json");
        std::fs::write(&file, "{\"files.autoSave\": \"afterDelay\",}").unwrap();
        assert_eq!(autosave_settings(dir.path()), Some(file.clone()));
        std::fs::write(&file, "{\"files.autoSave\": \"off\"}").unwrap();
        assert_eq!(autosave_settings(dir.path()), None);
    }
}
