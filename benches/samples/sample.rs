//! A tiny INI-style configuration parser with typed lookups.
//!
//! Sections are written as `[name]`, keys as `key = value`, and lines that
//! start with `#` or `;` are comments.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Errors produced while parsing a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// A line that is neither a section, a pair, nor a comment.
    Malformed { line: usize, text: String },
    /// A key appeared before any section header.
    NoSection { line: usize },
    /// A value could not be converted to the requested type.
    BadValue { key: String, expected: &'static str },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Malformed { line, text } => write!(f, "line {line}: cannot parse {text:?}"),
            ParseError::NoSection { line } => write!(f, "line {line}: key outside of a section"),
            ParseError::BadValue { key, expected } => {
                write!(f, "value of `{key}` is not a valid {expected}")
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// A parsed configuration: section name to ordered key/value pairs.
#[derive(Debug, Default, Clone)]
pub struct Config {
    sections: BTreeMap<String, BTreeMap<String, String>>,
}

impl Config {
    /// Returns the raw string stored under `section.key`, if any.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.sections.get(section)?.get(key).map(String::as_str)
    }

    /// Looks a value up and converts it with [`FromStr`].
    pub fn get_as<T: FromStr>(&self, section: &str, key: &str) -> Result<Option<T>, ParseError> {
        match self.get(section, key) {
            None => Ok(None),
            Some(raw) => raw.parse::<T>().map(Some).map_err(|_| ParseError::BadValue {
                key: format!("{section}.{key}"),
                expected: std::any::type_name::<T>(),
            }),
        }
    }

    /// Interprets common spellings of booleans.
    pub fn get_bool(&self, section: &str, key: &str) -> Option<bool> {
        let raw = self.get(section, key)?;
        match raw.to_ascii_lowercase().as_str() {
            "1" | "yes" | "true" | "on" => Some(true),
            "0" | "no" | "false" | "off" => Some(false),
            _ => None,
        }
    }

    pub fn sections(&self) -> impl Iterator<Item = &str> + '_ {
        self.sections.keys().map(|s| s.as_str())
    }

    pub fn len(&self) -> usize {
        self.sections.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn unquote(value: &str) -> &str {
    let bytes = value.as_bytes();
    if bytes.len() >= 2 && (bytes[0] == b'"' || bytes[0] == b'\'') && bytes[bytes.len() - 1] == bytes[0] {
        &value[1..value.len() - 1]
    } else {
        value
    }
}

impl FromStr for Config {
    type Err = ParseError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let mut config = Config::default();
        let mut current: Option<String> = None;

        for (index, raw_line) in input.lines().enumerate() {
            let line = raw_line.trim();
            let number = index + 1;
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let name = name.trim().to_owned();
                config.sections.entry(name.clone()).or_default();
                current = Some(name);
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(ParseError::Malformed { line: number, text: raw_line.to_string() });
            };
            let section = current.as_ref().ok_or(ParseError::NoSection { line: number })?;
            config
                .sections
                .get_mut(section)
                .expect("section inserted above")
                .insert(key.trim().to_owned(), unquote(value.trim()).to_owned());
        }
        Ok(config)
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, pairs)) in self.sections.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(f, "[{name}]")?;
            for (k, v) in pairs {
                writeln!(f, "{k} = {v}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
# global settings
[server]
host = "127.0.0.1"
port = 8080
verbose = yes

[paths]
root = '/var/www'
"#;

    #[test]
    fn parses_sections_and_values() {
        let cfg: Config = SAMPLE.parse().unwrap();
        assert_eq!(cfg.get("server", "host"), Some("127.0.0.1"));
        assert_eq!(cfg.get_as::<u16>("server", "port").unwrap(), Some(8080));
        assert_eq!(cfg.get_bool("server", "verbose"), Some(true));
        assert_eq!(cfg.get("paths", "root"), Some("/var/www"));
        assert_eq!(cfg.len(), 4);
    }

    #[test]
    fn rejects_keys_without_section() {
        let err = "a = 1".parse::<Config>().unwrap_err();
        assert_eq!(err, ParseError::NoSection { line: 1 });
    }
}
