//! Prints the syntax tree of a file, the way the scanner sees it: `cargo run --example tree -- LANG FILE`.
use filewatch_mcp::languages::LanguageTable;

fn dump(node: tree_sitter::Node, src: &[u8], depth: usize) {
    let text = String::from_utf8_lossy(&src[node.byte_range()]);
    let short: String = text.chars().take(40).collect();
    println!(
        "{}{}{}{} {:?} {:?}",
        "  ".repeat(depth),
        if node.is_named() { "" } else { "'" },
        node.kind(),
        if node.is_missing() { " MISSING" } else { "" },
        node.byte_range(),
        short
    );
    let mut c = node.walk();
    for child in node.children(&mut c) {
        dump(child, src, depth + 1);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let table = LanguageTable::builtin();
    let lang = table.get(&args[1]).expect("language name");
    let src = std::fs::read(&args[2]).expect("file");
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(lang.ts_language.as_ref().expect("grammar")).unwrap();
    let tree = parser.parse(&src, None).unwrap();
    dump(tree.root_node(), &src, 0);
}
