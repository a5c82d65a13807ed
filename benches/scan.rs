//! Scan throughput per grammar language on ≥100 KB inputs built from `benches/samples/`:
//! (a) a file without the trigger, (b) the same file with a marker every 50 lines, and beside
//! them a plain memmem pass over the same bytes: case (a) is that pass and nothing more.
//!
//! `cargo bench --bench scan`; `benches/table.py` turns criterion's output into a table.

use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use filewatch_mcp::languages::{Language, LanguageTable};
use filewatch_mcp::scan::{Scanner, DEFAULT_TRIGGER};
use memchr::memmem;

const MIN_SIZE: usize = 100 * 1024;
const MARKER_EVERY: usize = 50;

/// Sample file → language name in `grammars.toml`.
const SAMPLES: &[(&str, &str)] = &[
    ("sample.c", "c"),
    ("sample.cpp", "cpp"),
    ("sample.cs", "c-sharp"),
    ("sample.css", "css"),
    ("sample.dockerfile", "dockerfile"),
    ("sample.elm", "elm"),
    ("sample.go", "go"),
    ("sample.hs", "haskell"),
    ("sample.html", "html"),
    ("sample.java", "java"),
    ("sample.js", "javascript"),
    ("sample.json", "json"),
    ("sample.kt", "kotlin"),
    ("sample.lua", "lua"),
    ("sample.md", "markdown"),
    ("sample.mk", "make"),
    ("sample.php", "php"),
    ("sample.py", "python"),
    ("sample.rb", "ruby"),
    ("sample.rs", "rust"),
    ("sample.scala", "scala"),
    ("sample.sh", "bash"),
    ("sample.sql", "sql"),
    ("sample.swift", "swift"),
    ("sample.toml", "toml"),
    ("sample.ts", "typescript"),
    ("sample.tsx", "tsx"),
    ("sample.xml", "xml"),
    ("sample.yaml", "yaml"),
];

/// The sample repeated to at least [`MIN_SIZE`] bytes.
fn clean_input(sample: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MIN_SIZE + sample.len());
    while out.len() < MIN_SIZE {
        out.extend_from_slice(sample);
    }
    out
}

/// `clean` with a whole-line marker comment after every [`MARKER_EVERY`]th line.
fn marked_input(clean: &[u8], lang: &Language) -> Vec<u8> {
    let comment = match (lang.line_comments.first(), lang.block_comments.first()) {
        (Some(token), _) => format!("{token} {DEFAULT_TRIGGER} make this faster\n"),
        (None, Some(d)) => format!("{} {DEFAULT_TRIGGER} make this faster {}\n", d.open, d.close),
        (None, None) => unreachable!("every row has a comment token"),
    };
    let mut out = Vec::with_capacity(clean.len() * 2);
    for (i, line) in clean.split_inclusive(|&b| b == b'\n').enumerate() {
        out.extend_from_slice(line);
        if i % MARKER_EVERY == MARKER_EVERY - 1 {
            out.extend_from_slice(comment.as_bytes());
        }
    }
    out
}

fn bench_scan(c: &mut Criterion) {
    let table = LanguageTable::builtin();
    let scanner = Scanner::new(table, DEFAULT_TRIGGER).expect("default trigger");
    let finder = memmem::Finder::new(DEFAULT_TRIGGER);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/samples");
    for &(file, name) in SAMPLES {
        let lang = table.get(name).expect("sample language in the table");
        let sample = std::fs::read(dir.join(file)).expect("sample file");
        let clean = clean_input(&sample);
        let marked = marked_input(&clean, lang);
        assert!(scanner.scan(lang, &clean).is_empty(), "{file} holds the trigger");
        let found = scanner.scan(lang, &marked).len();
        eprintln!(
            "{name}: {} KB clean, {} KB with {found} markers",
            clean.len() / 1024,
            marked.len() / 1024
        );

        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Bytes(clean.len() as u64));
        group.bench_function(BenchmarkId::new("memmem", "clean"), |b| {
            b.iter(|| finder.find_iter(std::hint::black_box(&clean)).count())
        });
        group.bench_function(BenchmarkId::new("scan", "clean"), |b| {
            b.iter(|| scanner.scan(lang, std::hint::black_box(&clean)))
        });
        group.throughput(Throughput::Bytes(marked.len() as u64));
        group.bench_function(BenchmarkId::new("memmem", "markers"), |b| {
            b.iter(|| finder.find_iter(std::hint::black_box(&marked)).count())
        });
        group.bench_function(BenchmarkId::new("scan", "markers"), |b| {
            b.iter(|| scanner.scan(lang, std::hint::black_box(&marked)))
        });
        group.finish();
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_scan
}
criterion_main!(benches);
