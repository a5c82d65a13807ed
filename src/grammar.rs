//! The one match from a grammar name in `grammars.toml` to a compiled-in tree-sitter language.
//!
//! Every grammar sits behind a cargo feature (`lang-*`, all on by default). A name listed in
//! [`KNOWN`] whose feature is off resolves to `None`, and its language falls back to the table.

use tree_sitter::Language;

/// Every grammar name the table may use, compiled in or not. A name outside this list is a
/// typo in `grammars.toml`, not a disabled feature.
pub const KNOWN: &[&str] = &[
    "bash",
    "c",
    "c-sharp",
    "cpp",
    "css",
    "dockerfile",
    "elm",
    "go",
    "haskell",
    "html",
    "java",
    "javascript",
    "json",
    "kotlin",
    "lua",
    "make",
    "markdown",
    "markdown-inline",
    "php",
    "python",
    "ruby",
    "rust",
    "scala",
    "sql",
    "swift",
    "toml",
    "tsx",
    "typescript",
    "xml",
    "yaml",
];

/// The tree-sitter language for `name`, or `None` when it is unknown or its feature is off.
pub fn language(name: &str) -> Option<Language> {
    let lang: Language = match name {
        #[cfg(feature = "lang-bash")]
        "bash" => tree_sitter_bash::LANGUAGE.into(),
        #[cfg(feature = "lang-c")]
        "c" => tree_sitter_c::LANGUAGE.into(),
        #[cfg(feature = "lang-c-sharp")]
        "c-sharp" => tree_sitter_c_sharp::LANGUAGE.into(),
        #[cfg(feature = "lang-cpp")]
        "cpp" => tree_sitter_cpp::LANGUAGE.into(),
        #[cfg(feature = "lang-css")]
        "css" => tree_sitter_css::LANGUAGE.into(),
        #[cfg(feature = "lang-dockerfile")]
        "dockerfile" => arborium_dockerfile::language().into(),
        #[cfg(feature = "lang-elm")]
        "elm" => tree_sitter_elm::LANGUAGE.into(),
        #[cfg(feature = "lang-go")]
        "go" => tree_sitter_go::LANGUAGE.into(),
        #[cfg(feature = "lang-haskell")]
        "haskell" => tree_sitter_haskell::LANGUAGE.into(),
        #[cfg(feature = "lang-html")]
        "html" => tree_sitter_html::LANGUAGE.into(),
        #[cfg(feature = "lang-java")]
        "java" => tree_sitter_java::LANGUAGE.into(),
        #[cfg(feature = "lang-javascript")]
        "javascript" => tree_sitter_javascript::LANGUAGE.into(),
        #[cfg(feature = "lang-json")]
        "json" => tree_sitter_json::LANGUAGE.into(),
        #[cfg(feature = "lang-kotlin")]
        "kotlin" => tree_sitter_kotlin_ng::LANGUAGE.into(),
        #[cfg(feature = "lang-lua")]
        "lua" => tree_sitter_lua::LANGUAGE.into(),
        #[cfg(feature = "lang-make")]
        "make" => tree_sitter_make::LANGUAGE.into(),
        #[cfg(feature = "lang-markdown")]
        "markdown" => tree_sitter_md::LANGUAGE.into(),
        #[cfg(feature = "lang-markdown")]
        "markdown-inline" => tree_sitter_md::INLINE_LANGUAGE.into(),
        #[cfg(feature = "lang-php")]
        "php" => tree_sitter_php::LANGUAGE_PHP.into(),
        #[cfg(feature = "lang-python")]
        "python" => tree_sitter_python::LANGUAGE.into(),
        #[cfg(feature = "lang-ruby")]
        "ruby" => tree_sitter_ruby::LANGUAGE.into(),
        #[cfg(feature = "lang-rust")]
        "rust" => tree_sitter_rust::LANGUAGE.into(),
        #[cfg(feature = "lang-scala")]
        "scala" => tree_sitter_scala::LANGUAGE.into(),
        #[cfg(feature = "lang-sql")]
        "sql" => tree_sitter_sequel::LANGUAGE.into(),
        #[cfg(feature = "lang-swift")]
        "swift" => tree_sitter_swift::LANGUAGE.into(),
        #[cfg(feature = "lang-toml")]
        "toml" => tree_sitter_toml_ng::LANGUAGE.into(),
        #[cfg(feature = "lang-typescript")]
        "tsx" => tree_sitter_typescript::LANGUAGE_TSX.into(),
        #[cfg(feature = "lang-typescript")]
        "typescript" => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        #[cfg(feature = "lang-xml")]
        "xml" => tree_sitter_xml::LANGUAGE_XML.into(),
        #[cfg(feature = "lang-yaml")]
        "yaml" => tree_sitter_yaml::LANGUAGE.into(),
        _ => return None,
    };
    Some(lang)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_is_sorted_and_every_default_grammar_loads() {
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]), "KNOWN must stay sorted");
        let mut parser = tree_sitter::Parser::new();
        for name in KNOWN {
            let lang = language(name).unwrap_or_else(|| panic!("grammar {name} not compiled in"));
            parser
                .set_language(&lang)
                .unwrap_or_else(|e| panic!("grammar {name} does not load: {e}"));
        }
    }
}
