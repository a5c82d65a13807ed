//! A file's name under the root as asks carry it — in messages, in `list_asks`, as the key of
//! its records in the ledger: `/`-separated, and lossless. A name that is UTF-8 (and holds no
//! `\`) is itself; any other is written with each byte that is not UTF-8 as `\xHH` and each
//! `\` as `\\` (`caf\xE9.py`), so that every file has a name of its own and the name leads back
//! to the file.

use std::path::{Path, PathBuf};

/// `path` relative to `root`, `/`-separated, written losslessly (see the module).
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let parts: Vec<&[u8]> = rel.components().map(|c| c.as_os_str().as_encoded_bytes()).collect();
    let bytes = parts.join(&b'/');
    match std::str::from_utf8(&bytes) {
        Ok(text) if !text.contains('\\') => text.to_string(),
        _ => escape(&bytes),
    }
}

/// The path under `root` that [`relative`] wrote as `file`; `None` if `file` cannot name one
/// (a bad escape, or bytes this OS cannot make a name of).
pub fn resolve(root: &Path, file: &str) -> Option<PathBuf> {
    if !file.contains('\\') {
        return Some(root.join(file));
    }
    let bytes = unescape(file)?;
    let mut path = root.to_path_buf();
    for part in bytes.split(|&b| b == b'/') {
        path.push(crate::sys::os_string_from_bytes(part.to_vec())?);
    }
    Some(path)
}

/// `bytes` with its UTF-8 runs kept, each other byte as `\xHH`, each `\` as `\\`.
fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// The bytes [`escape`] wrote as `text`.
fn unescape(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match rest {
            [b'\\', tail @ ..] => {
                out.push(b'\\');
                rest = tail;
            }
            [b'x', h, l, tail @ ..] => {
                let hex = std::str::from_utf8(&[*h, *l]).ok()?.to_string();
                out.push(u8::from_str_radix(&hex, 16).ok()?);
                rest = tail;
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_names_are_themselves() {
        let root = Path::new("/r");
        assert_eq!(relative(root, Path::new("/r/src/é.py")), "src/é.py");
        assert_eq!(resolve(root, "src/é.py").unwrap(), Path::new("/r/src/é.py"));
    }

    #[cfg(unix)]
    #[test]
    fn other_names_are_escaped_and_lead_back() {
        use std::os::unix::ffi::OsStrExt;
        let root = Path::new("/r");
        for (name, shown) in [
            (&b"caf\xe9.py"[..], r"caf\xE9.py"),
            (&b"a\\b.py"[..], r"a\\b.py"),
            (&b"x\xff\\\xfe/y.py"[..], r"x\xFF\\\xFE/y.py"),
        ] {
            let path = root.join(std::ffi::OsStr::from_bytes(name));
            assert_eq!(relative(root, &path), shown);
            assert_eq!(resolve(root, shown).unwrap(), path, "{shown}");
        }
        // A name written literally as `caf\xE9.py` has a name of its own.
        let literal = root.join(r"caf\xE9.py");
        assert_eq!(relative(root, &literal), r"caf\\xE9.py");
        assert_eq!(resolve(root, r"caf\\xE9.py").unwrap(), literal);
        assert_eq!(resolve(root, r"bad\q"), None);
    }
}
