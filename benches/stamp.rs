//! The cost of a stamp on a 100 KB file: the pure splice alone, and the whole
//! read → scan → splice → checked atomic replace (temp file, fsync, exchange) that `stamp` does.
//!
//! `cargo bench --bench stamp`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use filewatch_mcp::languages::LanguageTable;
use filewatch_mcp::scan::{Scanner, DEFAULT_TRIGGER};
use filewatch_mcp::stamp::{plan, splice};
use filewatch_mcp::{stamp_file, uuid_random};

fn input() -> Vec<u8> {
    let sample = include_bytes!("samples/sample.py");
    let mut out = Vec::new();
    while out.len() < 100 * 1024 {
        out.extend_from_slice(sample);
    }
    out.extend_from_slice(b"# @claude make this module faster\n");
    out
}

fn bench_stamp(c: &mut Criterion) {
    let table = LanguageTable::builtin();
    let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
    let python = table.get("python").unwrap();
    let src = input();
    let markers = scanner.scan(python, &src);
    assert_eq!(markers.len(), 1);

    c.bench_function("stamp/splice 100KB", |b| {
        b.iter(|| splice(&src, &plan(&src, &markers, uuid_random)))
    });

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.py");
    c.bench_function("stamp/file 100KB (read, scan, splice, fsync, exchange)", |b| {
        b.iter_batched(
            || std::fs::write(&path, &src).unwrap(),
            |()| assert_eq!(stamp_file(&scanner, &path, false, 1).unwrap().len(), 1),
            BatchSize::PerIteration,
        )
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench_stamp
}
criterion_main!(benches);
