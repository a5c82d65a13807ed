//! The ask ledger when it is large (`cargo bench --bench ledger`: 100, 10k and 150k records;
//! `-- --quick` for the first two): what one change costs as the ledger grows — it must not grow with it —
//! and save → ask through `watch --tag never` with a ledger of 150,000 records, which must stay
//! within the debounce + 50 ms.
//!
//! 1. in the library: opening the ledger (read whole once, at start-up), one change (one ask
//!    recorded: one line appended and synced), p50/p99/max over 200 changes; a change that
//!    touches every record, and the one after it that also rewrites the log (compaction);
//! 2. end to end: `watch --json --tag never --debounce 50ms` started on a state directory
//!    holding that ledger, 200 saves of a new file with a marker each: save → ask beyond the
//!    debounce, p50/p99/max, and the watcher's peak RSS.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{percentile, Running, DEBOUNCE_MS};
use filewatch_mcp::{AskRecord, Asks, DEFAULT_TRIGGER};

const CHANGES: usize = 200;

/// `n` pending asks in `file`, with ids from `first` on.
fn records(first: u32, n: u32, file: &str) -> Vec<AskRecord> {
    (first..first + n)
        .map(|i| AskRecord {
            id: format!("fw-{i:08x}").parse().unwrap(),
            file: file.to_string(),
            text: format!("@claude review the handling of case number {i} in this function"),
            lines: 1,
            line: 1,
            anchor: u64::from(i),
            announced: now(),
            resolved: None,
            heard: None,
            unsent: false,
        })
        .collect()
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(samples: &mut [f64]) -> String {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(samples, 0.5),
        percentile(samples, 0.99),
        samples.last().unwrap()
    )
}

/// A state directory whose ledger for `root` holds `n` pending asks in `old.py` (which exists:
/// a pending ask whose file is gone is dropped at start-up).
fn ledger(root: &Path, n: u32) -> tempfile::TempDir {
    let state = tempfile::tempdir().unwrap();
    std::fs::write(root.join("old.py"), "x = 1\n").unwrap();
    let asks = Asks::with_ledger_in(state.path(), root, DEFAULT_TRIGGER).unwrap();
    asks.update(|r| r.extend(records(1, n, "old.py")));
    state
}

fn ledger_bytes(state: &Path) -> u64 {
    std::fs::read_dir(state)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn library(n: u32) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = ledger(&root, n);
    let t = Instant::now();
    let asks = Asks::with_ledger_in(state.path(), &root, DEFAULT_TRIGGER).unwrap();
    let opened = t.elapsed();
    println!(
        "ledger of {n} records ({:.1} MB): opened in {:.0} ms",
        ledger_bytes(state.path()) as f64 / 1e6,
        ms(opened)
    );
    let mut samples = Vec::new();
    for (i, r) in records(n + 1, CHANGES as u32, "new.py").into_iter().enumerate() {
        let t = Instant::now();
        asks.update(|records| {
            if i > 0 {
                let last = records.len() - 1;
                records[last].resolved = Some(now()); // the previous ask resolved
            }
            records.push(r);
        });
        samples.push(ms(t.elapsed()));
    }
    println!("  one change (an ask recorded, one resolved), {CHANGES}: {}", summary(&mut samples));
    let t = Instant::now();
    asks.update(|records| records.iter_mut().for_each(|r| r.lines += 1));
    let every = t.elapsed();
    let t = Instant::now();
    asks.update(|records| records.iter_mut().for_each(|r| r.lines += 1));
    let rewrite = t.elapsed();
    println!(
        "  a change to every record: {:.0} ms appended; the next, which also rewrites the log: {:.0} ms",
        ms(every),
        ms(rewrite)
    );
}

/// The watcher measured: this build's, or another (`FW_BIN=/path/to/filewatch-mcp`).
fn server_binary() -> PathBuf {
    std::env::var_os("FW_BIN")
        .map_or_else(|| env!("CARGO_BIN_EXE_filewatch-mcp").into(), Into::into)
}

fn end_to_end(n: u32) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = ledger(&root, n);
    let args = ["--debounce", &format!("{DEBOUNCE_MS}ms"), "--tag", "never"];
    let w = Running::start_in(&server_binary(), &root, &args, state);
    println!(
        "watch --tag never with a ledger of {n} records: ready in {:.0} ms",
        ms(w.ready_after)
    );
    let mut samples = Vec::new();
    for i in 0..CHANGES {
        // A new file each time: an ask whose words change in place from save to save is what
        // an autosaving editor looks like, and would wait for its text to settle.
        let path = root.join(format!("work{i}.py"));
        std::fs::write(&path, format!("def f():\n    pass  # @claude ask number {i}\n")).unwrap();
        let saved = Instant::now();
        let (at, line) = w
            .asks
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("save {i}: no ask ({e})"));
        assert!(line.contains(&format!("ask number {i}\"")), "{line}");
        samples.push(ms(at.duration_since(saved)) - DEBOUNCE_MS as f64);
    }
    let hwm = common::status_kb(w.pid(), "VmHWM:");
    println!(
        "  save → ask beyond the {DEBOUNCE_MS} ms debounce, {CHANGES} saves: {} (target: 50 ms); peak RSS {:.1} MB",
        summary(&mut samples),
        hwm as f64 / 1024.0
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `-- --quick` measures the small ledger only.
    let quick = std::env::args().any(|a| a == "--quick");
    // 100 records: the baseline a change's cost must stay near as the ledger grows.
    // `FW_LEDGER_SIZES=150000` measures other sizes; `FW_LEDGER_LIBRARY_ONLY=1` skips `watch`.
    let sizes: Vec<u32> = match std::env::var("FW_LEDGER_SIZES") {
        Ok(list) => list.split(',').map(|n| n.trim().parse().expect("FW_LEDGER_SIZES")).collect(),
        Err(_) if quick => vec![100, 10_000],
        Err(_) => vec![100, 10_000, 150_000],
    };
    let library_only = std::env::var_os("FW_LEDGER_LIBRARY_ONLY").is_some();
    for n in sizes {
        library(n);
        if !library_only {
            end_to_end(n);
        }
    }
}
