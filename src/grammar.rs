//! The one table of the grammars compiled in: a grammar name in `grammars.toml` → its
//! tree-sitter language and the symbol queries it uses.
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

/// A grammar compiled in: its tree-sitter language, and the symbol queries it uses to find the
/// definition an ask is about, in order — the tags query its crate ships where that is usable,
/// then the project's own `queries/<grammar>/symbols.scm` (see `queries/README.md`). None for a
/// data format or markup.
pub struct Grammar {
    /// Its name in `grammars.toml`.
    pub name: &'static str,
    pub language: fn() -> Language,
    pub symbol_queries: &'static [&'static str],
}

/// The project's symbol query of a grammar, from `queries/`.
macro_rules! project_query {
    ($dir:literal) => {
        include_str!(concat!("../queries/", $dir, "/symbols.scm"))
    };
}

/// Every grammar compiled in, sorted by name, with what it uses. TypeScript's tags query adds
/// to JavaScript's, as the grammar's own configuration says.
pub const COMPILED: &[Grammar] = &[
    #[cfg(feature = "lang-bash")]
    Grammar {
        name: "bash",
        language: || tree_sitter_bash::LANGUAGE.into(),
        symbol_queries: &[project_query!("bash")],
    },
    #[cfg(feature = "lang-c")]
    Grammar {
        name: "c",
        language: || tree_sitter_c::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_c::TAGS_QUERY, project_query!("c")],
    },
    #[cfg(feature = "lang-c-sharp")]
    Grammar {
        name: "c-sharp",
        language: || tree_sitter_c_sharp::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_c_sharp::TAGS_QUERY, project_query!("c-sharp")],
    },
    #[cfg(feature = "lang-cpp")]
    Grammar {
        name: "cpp",
        language: || tree_sitter_cpp::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_cpp::TAGS_QUERY, project_query!("cpp")],
    },
    #[cfg(feature = "lang-css")]
    Grammar { name: "css", language: || tree_sitter_css::LANGUAGE.into(), symbol_queries: &[] },
    #[cfg(feature = "lang-dockerfile")]
    Grammar {
        name: "dockerfile",
        language: || arborium_dockerfile::language().into(),
        symbol_queries: &[],
    },
    #[cfg(feature = "lang-elm")]
    Grammar {
        name: "elm",
        language: || tree_sitter_elm::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_elm::TAGS_QUERY, project_query!("elm")],
    },
    #[cfg(feature = "lang-go")]
    Grammar {
        name: "go",
        language: || tree_sitter_go::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_go::TAGS_QUERY, project_query!("go")],
    },
    #[cfg(feature = "lang-haskell")]
    Grammar {
        name: "haskell",
        language: || tree_sitter_haskell::LANGUAGE.into(),
        symbol_queries: &[project_query!("haskell")],
    },
    #[cfg(feature = "lang-html")]
    Grammar { name: "html", language: || tree_sitter_html::LANGUAGE.into(), symbol_queries: &[] },
    #[cfg(feature = "lang-java")]
    Grammar {
        name: "java",
        language: || tree_sitter_java::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_java::TAGS_QUERY, project_query!("java")],
    },
    #[cfg(feature = "lang-javascript")]
    Grammar {
        name: "javascript",
        language: || tree_sitter_javascript::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_javascript::TAGS_QUERY, project_query!("javascript")],
    },
    #[cfg(feature = "lang-json")]
    Grammar { name: "json", language: || tree_sitter_json::LANGUAGE.into(), symbol_queries: &[] },
    #[cfg(feature = "lang-kotlin")]
    Grammar {
        name: "kotlin",
        language: || tree_sitter_kotlin_ng::LANGUAGE.into(),
        symbol_queries: &[project_query!("kotlin")],
    },
    #[cfg(feature = "lang-lua")]
    Grammar {
        name: "lua",
        language: || tree_sitter_lua::LANGUAGE.into(),
        symbol_queries: &[project_query!("lua")],
    },
    #[cfg(feature = "lang-make")]
    Grammar { name: "make", language: || tree_sitter_make::LANGUAGE.into(), symbol_queries: &[] },
    #[cfg(feature = "lang-markdown")]
    Grammar { name: "markdown", language: || tree_sitter_md::LANGUAGE.into(), symbol_queries: &[] },
    #[cfg(feature = "lang-markdown")]
    Grammar {
        name: "markdown-inline",
        language: || tree_sitter_md::INLINE_LANGUAGE.into(),
        symbol_queries: &[],
    },
    #[cfg(feature = "lang-php")]
    Grammar {
        name: "php",
        language: || tree_sitter_php::LANGUAGE_PHP.into(),
        symbol_queries: &[tree_sitter_php::TAGS_QUERY, project_query!("php")],
    },
    #[cfg(feature = "lang-python")]
    Grammar {
        name: "python",
        language: || tree_sitter_python::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_python::TAGS_QUERY, project_query!("python")],
    },
    #[cfg(feature = "lang-ruby")]
    Grammar {
        name: "ruby",
        language: || tree_sitter_ruby::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_ruby::TAGS_QUERY, project_query!("ruby")],
    },
    #[cfg(feature = "lang-rust")]
    Grammar {
        name: "rust",
        language: || tree_sitter_rust::LANGUAGE.into(),
        symbol_queries: &[tree_sitter_rust::TAGS_QUERY, project_query!("rust")],
    },
    #[cfg(feature = "lang-scala")]
    Grammar {
        name: "scala",
        language: || tree_sitter_scala::LANGUAGE.into(),
        symbol_queries: &[project_query!("scala")],
    },
    #[cfg(feature = "lang-sql")]
    Grammar { name: "sql", language: || tree_sitter_sequel::LANGUAGE.into(), symbol_queries: &[] },
    #[cfg(feature = "lang-swift")]
    Grammar {
        name: "swift",
        language: || tree_sitter_swift::LANGUAGE.into(),
        symbol_queries: &[project_query!("swift")],
    },
    #[cfg(feature = "lang-toml")]
    Grammar {
        name: "toml",
        language: || tree_sitter_toml_ng::LANGUAGE.into(),
        symbol_queries: &[],
    },
    #[cfg(feature = "lang-typescript")]
    Grammar {
        name: "tsx",
        language: || tree_sitter_typescript::LANGUAGE_TSX.into(),
        symbol_queries: &[
            tree_sitter_javascript::TAGS_QUERY,
            tree_sitter_typescript::TAGS_QUERY,
            project_query!("typescript"),
        ],
    },
    #[cfg(feature = "lang-typescript")]
    Grammar {
        name: "typescript",
        language: || tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        symbol_queries: &[
            tree_sitter_javascript::TAGS_QUERY,
            tree_sitter_typescript::TAGS_QUERY,
            project_query!("typescript"),
        ],
    },
    #[cfg(feature = "lang-xml")]
    Grammar { name: "xml", language: || tree_sitter_xml::LANGUAGE_XML.into(), symbol_queries: &[] },
    #[cfg(feature = "lang-yaml")]
    Grammar { name: "yaml", language: || tree_sitter_yaml::LANGUAGE.into(), symbol_queries: &[] },
];

/// The grammar `name`, if it is compiled in.
pub fn compiled(name: &str) -> Option<&'static Grammar> {
    COMPILED.iter().find(|g| g.name == name)
}

/// The tree-sitter language for `name`, or `None` when it is unknown or its feature is off.
pub fn language(name: &str) -> Option<Language> {
    compiled(name).map(|g| (g.language)())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_grammars_are_known_and_sorted() {
        assert!(COMPILED.windows(2).all(|w| w[0].name < w[1].name), "COMPILED must stay sorted");
        for g in COMPILED {
            assert!(KNOWN.contains(&g.name), "{} is compiled in but not KNOWN", g.name);
        }
    }

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
