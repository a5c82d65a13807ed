//! The cost of a stamp on a 100 KB file: the pure splice alone, and the whole
//! read → scan → splice → checked atomic replace (temp file, fsync, exchange) that `stamp` does.
//! On Linux also the cost of the open-writer check on a 5 KB file: the read lease that
//! `replace_checked` takes and checks (`F_SETLEASE F_RDLCK`, `F_GETLEASE`), against the same
//! open and close without it, and the whole `replace_checked` for scale.
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

/// The open-writer check alone: what a stamp pays for its lease is the difference between
/// "open, lease, check, close" and "open, close".
#[cfg(target_os = "linux")]
fn bench_lease(c: &mut Criterion) {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("five.py");
    let five_kb: Vec<u8> =
        b"x = 1  # a line of code\n".iter().copied().cycle().take(5 * 1024).collect();
    std::fs::write(&path, &five_kb).unwrap();
    c.bench_function("lease/open+close 5KB (no check)", |b| {
        b.iter(|| drop(std::fs::File::open(&path).unwrap()))
    });
    c.bench_function("lease/open+F_SETLEASE+F_GETLEASE+close 5KB", |b| {
        b.iter(|| {
            let file = std::fs::File::open(&path).unwrap();
            // SAFETY: plain fcntls on an open descriptor.
            unsafe {
                assert_eq!(libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK), 0);
                assert_eq!(libc::fcntl(file.as_raw_fd(), libc::F_GETLEASE), libc::F_RDLCK);
            }
        })
    });
    let stamped = [b"# @claude[fw-00000000] x\n".as_slice(), &five_kb].concat();
    let original = [b"# @claude x\n".as_slice(), &five_kb].concat();
    c.bench_function("lease/replace_checked 5KB (lease, fsync, exchange)", |b| {
        b.iter_batched(
            || std::fs::write(&path, &original).unwrap(),
            |()| filewatch_mcp::replace_checked(&path, &original, &stamped).unwrap(),
            BatchSize::PerIteration,
        )
    });
}

#[cfg(not(target_os = "linux"))]
fn bench_lease(_c: &mut Criterion) {}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench_stamp, bench_lease
}
criterion_main!(benches);
