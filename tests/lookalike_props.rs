//! Property test of issue 26: a multi-line string of every form a language has (shell '…',
//! heredocs with arguments after the opener, Perl POD, YAML block scalars with properties, C#
//! verbatim strings, JS templates nested in holes, JSX text), holding marker-like lines, in a
//! file broken at a random point before it. Never is a marker found inside the string, and the
//! ask on the line after it (where the break cannot reach) is found.

use filewatch_mcp::languages::LanguageTable;
use filewatch_mcp::scan::{Scanner, DEFAULT_TRIGGER};
use proptest::prelude::*;

/// One string form: its language, code before it (where the break goes), how to open and close
/// it around its body lines, and a comment line for the ask after it.
struct Form {
    name: &'static str,
    language: &'static str,
    prefix: &'static [&'static str],
    /// The opener line(s); the body lines follow.
    open: &'static str,
    close: &'static str,
    /// Bytes that body lines must not hold (the closer's).
    forbidden: &'static [u8],
    /// A line the body must not be (a heredoc's word).
    terminator: Option<&'static str>,
    after: &'static str,
    /// Lines that break the prefix: an unclosed bracket, a stray keyword, a deleted closer.
    breaks: &'static [&'static str],
}

const SHELL_PREFIX: &[&str] = &[
    "set -eu",
    "for f in *.c; do",
    "  echo \"$f\"",
    "done",
    "x=`sed -e 's/a/b/' \\",
    "  -e 's/c/d/'`",
];
const SHELL_BREAKS: &[&str] = &["if then fi (", "case $x in a) ;; esac )", "{", "f() {", "[[ -n"];
const JS_PREFIX: &[&str] = &[
    "import { a } from './a';",
    "export function f(x) {",
    "  return [x].map((i) => i * 2);",
    "}",
    "const o = { a: [1, 2], b: 'x' };",
];
const JS_BREAKS: &[&str] = &["foo(bar,", "const o = { a: 1,", "if (x) {", "[1, 2", ") ("];
const RUBY_PREFIX: &[&str] =
    &["module Foo", "  def initialize(a, b)", "    @a = [a, { c: b }]", "  end", "end"];
const RUBY_BREAKS: &[&str] = &["def broken(", "x = [1, 2", "class (Bar", "{", "end end"];
const PERL_PREFIX: &[&str] =
    &["use strict;", "sub f { my ($a) = @_; return $a; }", "my %h = (a => 1);"];
const PERL_BREAKS: &[&str] = &["sub g {", "my @x = (1, 2", "if ($x) {", "local $\" = ', ';", "}"];

const FORMS: &[Form] = &[
    Form {
        name: "shell single-quoted assignment",
        language: "bash",
        prefix: SHELL_PREFIX,
        open: "IFS='",
        close: "'",
        forbidden: b"'",
        terminator: None,
        after: "# @claude real",
        breaks: SHELL_BREAKS,
    },
    Form {
        name: "shell trap",
        language: "bash",
        prefix: SHELL_PREFIX,
        open: "trap '",
        close: "' EXIT",
        forbidden: b"'",
        terminator: None,
        after: "# @claude real",
        breaks: SHELL_BREAKS,
    },
    Form {
        name: "shell awk program",
        language: "bash",
        prefix: SHELL_PREFIX,
        open: "awk '",
        close: "' \"$f\"",
        forbidden: b"'",
        terminator: None,
        after: "# @claude real",
        breaks: SHELL_BREAKS,
    },
    Form {
        name: "shell perl -e",
        language: "bash",
        prefix: SHELL_PREFIX,
        open: "perl -e 'print 1;",
        close: "' \"$@\"",
        forbidden: b"'",
        terminator: None,
        after: "# @claude real",
        breaks: SHELL_BREAKS,
    },
    Form {
        name: "shell heredoc with a redirection to a quoted file",
        language: "bash",
        prefix: SHELL_PREFIX,
        open: "cat <<EOF > \"$out\"",
        close: "EOF",
        forbidden: b"",
        terminator: Some("EOF"),
        after: "# @claude real",
        breaks: SHELL_BREAKS,
    },
    Form {
        name: "tsx jsx text",
        language: "tsx",
        prefix: &["function X() {", "  return (", "    <ul>", "      <li>a</li>"],
        open: "      <li>",
        close: "      </li>\n    </ul>\n  );\n}",
        forbidden: b"<>{}`;",
        terminator: None,
        after: "// @claude real",
        breaks: &[
            "      {items.map((x) => (",
            "      {cond && (",
            "      <Foo bar={{ a: 1 }>",
            "  const v = f(a,",
        ],
    },
    Form {
        name: "javascript template nested in a hole",
        language: "javascript",
        prefix: JS_PREFIX,
        open: "const t = `outer ${items.map((i) => `inner ${i}",
        close: "`).join(\"\")} end`;",
        forbidden: b"`$\\",
        terminator: None,
        after: "// @claude real",
        breaks: JS_BREAKS,
    },
    Form {
        name: "ruby heredoc with arguments after the opener",
        language: "ruby",
        prefix: RUBY_PREFIX,
        open: "module_eval(<<-EOS, __FILE__, __LINE__ + 1)",
        close: "EOS",
        forbidden: b"",
        terminator: Some("EOS"),
        after: "# @claude real",
        breaks: RUBY_BREAKS,
    },
    Form {
        name: "ruby heredoc with a string after the opener",
        language: "ruby",
        prefix: RUBY_PREFIX,
        open: "class_eval <<-RUBY, \"generated.rb\", 1",
        close: "RUBY",
        forbidden: b"",
        terminator: Some("RUBY"),
        after: "# @claude real",
        breaks: RUBY_BREAKS,
    },
    Form {
        name: "ruby second heredoc of a line",
        language: "ruby",
        prefix: RUBY_PREFIX,
        open: "foo(<<~A, <<~B)\nA",
        close: "B",
        forbidden: b"",
        terminator: Some("B"),
        after: "# @claude real",
        breaks: RUBY_BREAKS,
    },
    Form {
        name: "perl heredoc with arguments after the opener",
        language: "perl",
        prefix: PERL_PREFIX,
        open: "push @m, sprintf <<'MAKE', $a, 'x';",
        close: "MAKE",
        forbidden: b"",
        terminator: Some("MAKE"),
        after: "# @claude real",
        breaks: PERL_BREAKS,
    },
    Form {
        name: "perl pod",
        language: "perl",
        prefix: PERL_PREFIX,
        open: "=head3 Notes",
        close: "=cut",
        forbidden: b"=",
        terminator: None,
        after: "# @claude real",
        breaks: PERL_BREAKS,
    },
    Form {
        name: "perl single-quoted string after a punctuation variable",
        language: "perl",
        prefix: PERL_PREFIX,
        open: "local $\" = $' . '",
        close: "';",
        forbidden: b"'\\",
        terminator: None,
        after: "# @claude real",
        breaks: PERL_BREAKS,
    },
    Form {
        name: "yaml binary block scalar",
        language: "yaml",
        prefix: &["a: 1", "b:", "  - x", "  - y"],
        open: "picture: !!binary |",
        close: "other: x",
        forbidden: b"",
        terminator: None,
        after: "# @claude real",
        breaks: &["  c: [1, 2", "%TAG ! tag:x,2000:", " bad: indent", "d: {e: 1"],
    },
    Form {
        name: "c# verbatim string with doubled quotes",
        language: "c-sharp",
        prefix: &["namespace N {", "  class C {", "    int F(int a) { return Math.Max(a, 1); }"],
        open: "    string P = @\"He said \"\"hi\"\"",
        close: "and C:\\path\\\";",
        forbidden: b"\"",
        terminator: None,
        after: "    // @claude real",
        breaks: &["    void G( {", "end end", "    int x = (1 + ;", "  }"],
    },
];

/// A marker-like line: the comment tokens of many languages, indented or not.
fn body_line() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec!["#", "//", "--", "/*", ";", "%", "'", "*"]);
    prop_oneof![
        3 => ("[ \t]{0,6}", token, "[a-z ]{0,12}")
            .prop_map(|(indent, token, text)| format!("{indent}{token} @claude look-alike {text}")),
        1 => ("[a-z =]{1,10}", "[a-z ]{0,8}")
            .prop_map(|(code, text)| format!("  {code} # @claude look-alike {text}")),
        1 => "[a-zA-Z0-9 ,.()]{0,30}",
    ]
}

fn case() -> impl Strategy<Value = (usize, Vec<String>, usize, usize)> {
    (0..FORMS.len(), prop::collection::vec(body_line(), 1..6), any::<usize>(), any::<usize>())
}

/// The file: the prefix with a break line inserted before line `at`, the string, the ask.
fn build(form: &Form, body: &[String], at: usize, which: usize) -> String {
    let mut lines: Vec<String> = form.prefix.iter().map(|s| s.to_string()).collect();
    let at = at % (lines.len() + 1);
    lines.insert(at, form.breaks[which % form.breaks.len()].to_string());
    lines.push(form.open.to_string());
    for l in body {
        let mut l: String =
            l.bytes().filter(|b| !form.forbidden.contains(b)).map(char::from).collect();
        // A line that starts with the heredoc's word may end the body (`EOS)`): not here.
        if form.terminator.is_some_and(|t| l.trim_start().starts_with(t)) {
            l.insert_str(0, "x ");
        }
        // The body of a block scalar is indented deeper than its key.
        if form.language == "yaml" {
            l = format!("  {}", l.trim_start());
        }
        lines.push(l);
    }
    lines.push(form.close.to_string());
    lines.push(form.after.to_string());
    lines.join("\n") + "\n"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn no_marker_inside_a_string_after_a_break((form, body, at, which) in case()) {
        let form = &FORMS[form];
        let table = LanguageTable::builtin();
        let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
        let lang = table.get(form.language).unwrap();
        let src = build(form, &body, at, which);
        let found = scanner.scan(lang, src.as_bytes());
        for m in &found {
            prop_assert!(
                !m.text.contains("look-alike"),
                "{}: line {} `{}` reported\n{src}", form.name, m.line, m.text
            );
        }
    }
}

/// The forms above read without a break: the string is a string and the ask after it is found
/// (so the property above cannot pass by finding nothing at all).
#[test]
fn every_form_finds_the_ask_after_its_string() {
    let table = LanguageTable::builtin();
    let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
    let body = ["# @claude look-alike one".to_string(), "  // @claude look-alike two".to_string()];
    for form in FORMS {
        for which in 0..form.breaks.len() {
            let src = build(form, &body, form.prefix.len() / 2, which);
            let found = scanner.scan(table.get(form.language).unwrap(), src.as_bytes());
            let texts: Vec<&str> = found.iter().map(|m| m.text.as_str()).collect();
            assert!(
                texts.iter().all(|t| !t.contains("look-alike")),
                "{}: {texts:?}\n{src}",
                form.name
            );
            assert!(
                texts.iter().any(|t| t.starts_with("@claude real")),
                "{} with break {:?}: the ask after the string is missed: {texts:?}\n{src}",
                form.name,
                form.breaks[which]
            );
        }
    }
}
