//! Languages inside languages: HTML `<script>`/`<style>` bodies and Markdown inline content
//! are parsed with their own grammar; and comment nodes a host grammar produces where its
//! language has no comment (HTML attribute values, RCDATA, CSS `url()`) are refused.

use std::ops::Range;

use tree_sitter::Node;

use super::steps::Steps;
use crate::languages::{Language, LanguageTable};

/// Where a hit lies with respect to a language embedded in the file's language.
pub(super) enum Embedded<'l> {
    /// In the file's own grammar.
    No,
    /// In a region whose content is not code we read (`<script type="text/template">`).
    Opaque,
    /// In a region another grammar owns: parse `Range` with that language.
    Yes(&'l Language, Range<usize>),
}

/// HTML `<script>`/`<style>` bodies are JavaScript/TypeScript/CSS; Markdown paragraphs are
/// parsed again with the inline grammar, where inline HTML comments live.
pub(super) fn embedded_region<'l, 'a>(
    table: &'l LanguageTable,
    lang: &Language,
    steps: &Steps<'a>,
    node: Node<'a>,
    src: &[u8],
) -> Embedded<'l> {
    let grammar = lang.grammar.as_deref();
    let mut n = Some(node);
    while let Some(cur) = n {
        match (grammar, cur.kind()) {
            (Some("html"), "raw_text") => {
                let Some(element) = steps.parent(cur) else { return Embedded::Opaque };
                let inner = match element.kind() {
                    "script_element" => script_language(element, src),
                    "style_element" => style_language(element, src),
                    _ => None,
                };
                return match inner.and_then(|name| table.get(name)) {
                    Some(row) => Embedded::Yes(row, cur.byte_range()),
                    None => Embedded::Opaque,
                };
            }
            (Some("markdown"), "inline" | "pipe_table_cell") => {
                return match table.get("markdown-inline") {
                    Some(row) => Embedded::Yes(row, cur.byte_range()),
                    None => Embedded::Opaque,
                };
            }
            _ => {}
        }
        n = steps.parent(cur);
    }
    Embedded::No
}

/// The value of attribute `name` on an element's start tag, lowercased and trimmed.
fn attribute(element: Node, src: &[u8], name: &str) -> Option<String> {
    let start = element.child(0).filter(|c| c.kind() == "start_tag")?;
    let mut cursor = start.walk();
    for attr in start.children(&mut cursor).filter(|c| c.kind() == "attribute") {
        let mut ac = attr.walk();
        let mut parts = attr.named_children(&mut ac);
        let Some(key) = parts.next() else { continue };
        if !src[key.byte_range()].eq_ignore_ascii_case(name.as_bytes()) {
            continue;
        }
        // `type=module`, `type="module"` and `type='module'` alike; no value is "".
        let value = parts.next().map_or(&b""[..], |v| &src[v.byte_range()]);
        let value = String::from_utf8_lossy(value);
        return Some(value.trim_matches(|c| c == '"' || c == '\'').trim().to_ascii_lowercase());
    }
    None
}

fn script_language(element: Node, src: &[u8]) -> Option<&'static str> {
    if let Some(lang) = attribute(element, src, "lang") {
        return match lang.as_str() {
            "ts" | "typescript" => Some("typescript"),
            "tsx" => Some("tsx"),
            "js" | "javascript" | "jsx" => Some("javascript"),
            _ => None,
        };
    }
    let ty = attribute(element, src, "type").unwrap_or_default();
    let ty = ty.split(';').next().unwrap_or_default().trim();
    const JS: &[&str] = &[
        "",
        "module",
        "text/javascript",
        "application/javascript",
        "text/ecmascript",
        "application/ecmascript",
        "application/x-javascript",
        "text/x-javascript",
        "text/jsx",
        "text/babel",
    ];
    JS.contains(&ty).then_some("javascript")
}

fn style_language(element: Node, src: &[u8]) -> Option<&'static str> {
    let ty = attribute(element, src, "type").unwrap_or_default();
    matches!(ty.as_str(), "" | "text/css").then_some("css")
}

/// Comment nodes that the file's grammar produces where the language has no comment: HTML
/// comments inside attribute values, `<textarea>` and `<title>` (both RCDATA); CSS comments
/// inside an unquoted `url()`.
pub(super) fn lang_hides_comment<'a>(
    lang: &Language,
    steps: &Steps<'a>,
    comment: Node<'a>,
    src: &[u8],
) -> bool {
    match lang.grammar.as_deref() {
        Some("html") => html_hides_comment(steps, comment, src),
        Some("css") => {
            // Everything inside an unquoted `url(...)` is the URL.
            let call = steps
                .parent(comment)
                .filter(|p| p.kind() == "arguments")
                .and_then(|a| steps.parent(a));
            call.and_then(|c| c.child(0))
                .is_some_and(|name| src[name.byte_range()].eq_ignore_ascii_case(b"url"))
        }
        _ => false,
    }
}

fn html_hides_comment<'a>(steps: &Steps<'a>, comment: Node<'a>, src: &[u8]) -> bool {
    let mut n = steps.parent(comment);
    while let Some(p) = n {
        match p.kind() {
            "quoted_attribute_value" | "attribute_value" | "attribute" | "start_tag" => {
                return true
            }
            "element" => {
                let tag = p
                    .child(0)
                    .filter(|c| c.kind() == "start_tag")
                    .and_then(|t| t.named_child(0))
                    .map(|name| {
                        String::from_utf8_lossy(&src[name.byte_range()]).to_ascii_lowercase()
                    });
                if matches!(tag.as_deref(), Some("textarea" | "title")) {
                    return true;
                }
            }
            _ => {}
        }
        n = steps.parent(p);
    }
    false
}
