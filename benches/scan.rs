//! Scan throughput per grammar language on ≥100 KB inputs built from `benches/samples/`:
//! (a) a file without the trigger, (b) the same file with a marker every 50 lines, and beside
//! them a plain memmem pass over the same bytes: case (a) is that pass and nothing more.
//!
//! Next to syntax errors (group `errors-LANG`, measured in thread CPU time on Unix so that
//! other processes on the machine do not blur the ratio): file (b), and file (b) with a syntax error
//! every 500 lines, each an unclosed call with a trailing ask (`x = f(a,  // @claude …`, as
//! saved mid-edit). Scanning (c) must cost at most 1.5× (b). Beside both, the tree-sitter
//! parse alone, to tell the parser's own error recovery from the scanner's work.
//!
//! `cargo bench --bench scan` (`-- errors-` for the error group alone); `benches/table.py`
//! turns criterion's output into tables.

use std::path::Path;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use filewatch_mcp::languages::{Language, LanguageTable};
use filewatch_mcp::scan::{Scanner, DEFAULT_TRIGGER};
use memchr::memmem;

const MIN_SIZE: usize = 100 * 1024;
const MARKER_EVERY: usize = 50;
const ERROR_EVERY: usize = 500;

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

/// `marked` with a line holding an unclosed call and a trailing ask after every
/// [`ERROR_EVERY`]th line.
fn near_errors_input(marked: &[u8], lang: &Language) -> Vec<u8> {
    let ask = match (lang.line_comments.first(), lang.block_comments.first()) {
        (Some(token), _) => format!("{token} {DEFAULT_TRIGGER} which args?"),
        (None, Some(d)) => format!("{} {DEFAULT_TRIGGER} which args? {}", d.open, d.close),
        (None, None) => unreachable!("every row has a comment token"),
    };
    let mut out = Vec::with_capacity(marked.len() + marked.len() / 10);
    for (i, line) in marked.split_inclusive(|&b| b == b'\n').enumerate() {
        out.extend_from_slice(line);
        if i % ERROR_EVERY == ERROR_EVERY / 2 {
            out.extend_from_slice(format!("x = f(a,  {ask}\n").as_bytes());
        }
    }
    out
}

/// The samples as (language, file without the trigger, file with markers).
fn inputs(table: &LanguageTable) -> Vec<(&Language, Vec<u8>, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/samples");
    SAMPLES
        .iter()
        .map(|&(file, name)| {
            let lang = table.get(name).expect("sample language in the table");
            let sample = std::fs::read(dir.join(file)).expect("sample file");
            let clean = clean_input(&sample);
            let marked = marked_input(&clean, lang);
            (lang, clean, marked)
        })
        .collect()
}

fn bench_scan(c: &mut Criterion) {
    let table = LanguageTable::builtin();
    let scanner = Scanner::new(table, DEFAULT_TRIGGER).expect("default trigger");
    let finder = memmem::Finder::new(DEFAULT_TRIGGER);
    for (lang, clean, marked) in inputs(table) {
        let name = lang.name.as_str();
        assert!(scanner.scan(lang, &clean).is_empty(), "the {name} sample holds the trigger");
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

fn bench_near_errors(c: &mut Criterion<ThreadCpuTime>) {
    let table = LanguageTable::builtin();
    let scanner = Scanner::new(table, DEFAULT_TRIGGER).expect("default trigger");
    for (lang, _, marked) in inputs(table) {
        let name = lang.name.as_str();
        let broken = near_errors_input(&marked, lang);
        let ts = lang.ts_language.as_ref().expect("a grammar language");
        let found = scanner.scan(lang, &marked).len();
        let near = scanner.scan(lang, &broken).len();
        eprintln!("{name}: {found} markers; {near} with the asks next to errors");
        let mut group = c.benchmark_group(format!("errors-{name}"));
        for (case, input) in [("markers", &marked), ("near-errors", &broken)] {
            group.throughput(Throughput::Bytes(input.len() as u64));
            group.bench_function(BenchmarkId::new("scan", case), |b| {
                b.iter(|| scanner.scan(lang, std::hint::black_box(input)))
            });
            group.bench_function(BenchmarkId::new("parse", case), |b| {
                b.iter(|| parse(ts, std::hint::black_box(input)))
            });
        }
        group.finish();
    }
}

/// The tree-sitter parse alone, with a fresh parser (the scanner keeps one per thread;
/// creating one is cheap next to a 100 KB parse).
fn parse(ts: &tree_sitter::Language, src: &[u8]) -> Option<tree_sitter::Tree> {
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(ts).ok()?;
    parser.parse(src, None)
}

/// CPU time of the benchmark thread: what the scan costs, whatever else the machine runs
/// (wall time where there is no per-thread clock).
struct ThreadCpuTime;

impl ThreadCpuTime {
    #[cfg(unix)]
    fn now_ns() -> f64 {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `t` is a valid timespec for clock_gettime to write.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
    }

    #[cfg(not(unix))]
    fn now_ns() -> f64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as f64
    }
}

impl Measurement for ThreadCpuTime {
    type Intermediate = f64;
    type Value = f64;

    fn start(&self) -> f64 {
        Self::now_ns()
    }
    fn end(&self, start: f64) -> f64 {
        Self::now_ns() - start
    }
    fn add(&self, a: &f64, b: &f64) -> f64 {
        a + b
    }
    fn zero(&self) -> f64 {
        0.0
    }
    fn to_f64(&self, value: &f64) -> f64 {
        *value
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        // Nanoseconds, as wall time: its formatter prints them.
        static WALL: WallTime = WallTime;
        WALL.formatter()
    }
}

fn cpu_config() -> Criterion<ThreadCpuTime> {
    config().with_measurement(ThreadCpuTime)
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
criterion_group! {
    name = near_errors;
    config = cpu_config();
    targets = bench_near_errors
}
criterion_main!(benches, near_errors);
