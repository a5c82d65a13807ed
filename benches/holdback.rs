//! Issue 30's "nothing held back" numbers, `cargo bench --bench holdback` (`-- --quick`: the
//! small cases only; `-- --history`: the long history only; `-- --asks=N`: a file of N asks only), through `watch --json --debounce 50ms --settle 0s` (release build):
//!
//! - a file of N consecutive asks (`#@claude xyz`, N = 1,000, 4,000, 20,000, 80,000 — 80,000 is
//!   as many as fit under the 1 MiB file limit): time from its save to its first ask, and to its
//!   last; and, for the largest, a one-ask file saved right after it: its save → ask beyond the
//!   debounce, and how many of the big file's asks were out by then;
//! - a file with 20,000 committed versions of 17 KB (`git fast-import`; its history passes the
//!   256 MiB the search reads): saved with a new ask while a `git status` holds the index lock
//!   for 0.3 s, the time to its ask, and another file's ask saved meanwhile.
//!
//! Progress goes to stderr, the results to stdout.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Running, DEBOUNCE_MS};

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let history_only = std::env::args().any(|a| a == "--history");
    let bin = std::path::PathBuf::from(env!("CARGO_BIN_EXE_filewatch-mcp"));
    // `-- --asks=N`: one file of N asks, with the other file saved after it.
    let one: Vec<usize> =
        std::env::args().filter_map(|a| a.strip_prefix("--asks=")?.parse().ok()).collect();
    let sizes: &[usize] = match (quick, history_only) {
        _ if !one.is_empty() => &one,
        (_, true) => &[],
        (true, _) => &[1_000, 4_000],
        _ => &[1_000, 4_000, 20_000, 80_000],
    };
    println!("| what | measured |\n|---|---|");
    for &n in sizes {
        many_asks(&bin, n, n == *sizes.last().unwrap());
    }
    if !quick && one.is_empty() {
        long_history(&bin);
    }
}

/// `n` distinct asks, one a line, as short as an ask can be.
fn asks(n: usize) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let code = |mut i: usize| {
        let mut s = String::new();
        for _ in 0..3 {
            s.push(DIGITS[i % DIGITS.len()] as char);
            i /= DIGITS.len();
        }
        s
    };
    (0..n).map(|i| format!("#@claude {}\n", code(i))).collect()
}

/// The file of `n` asks: save → first ask, save → last; with `other`, a one-ask file saved right
/// after it.
fn many_asks(bin: &Path, n: usize, other: bool) {
    eprintln!("{n} asks");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let w = Running::start(bin, &root);
    let saved = Instant::now();
    std::fs::write(root.join("big.py"), asks(n)).unwrap();
    let mut other_saved = None;
    if other {
        // After it, as a user's next save (`-- --other-after=MS`: that long after it).
        let after = std::env::args().find_map(|a| a.strip_prefix("--other-after=")?.parse().ok());
        std::thread::sleep(Duration::from_millis(after.unwrap_or(10)));
        std::fs::write(root.join("small.py"), "# @claude the one ask\n").unwrap();
        other_saved = Some(Instant::now());
    }
    let (mut first, mut big, mut small) = (None, 0, None);
    while big < n || (other && small.is_none()) {
        let Ok((at, line)) = w.asks.recv_timeout(Duration::from_secs(600)) else { break };
        if line.contains("\"small.py\"") {
            small = Some((at, big));
        } else {
            big += 1;
            first.get_or_insert(at);
            if big == n {
                let last = at.duration_since(saved).as_secs_f64();
                let first = first.unwrap().duration_since(saved).as_secs_f64();
                println!("| {n} asks in one file: save → first ask / last ask | {first:.3} s / {last:.3} s |");
            }
        }
    }
    if let (Some((at, out)), Some(saved)) = (small, other_saved) {
        let ms = at.duration_since(saved).as_secs_f64() * 1000.0 - DEBOUNCE_MS as f64;
        println!("| a one-ask file saved right after the {n}-ask one: save → ask beyond the debounce | {ms:.1} ms ({out} of the {n} out by then) |");
    }
}

/// A repository whose `hist.py` has 20,000 versions of 17,920 bytes; returns the last.
fn repository(root: &Path) -> Vec<u8> {
    let git = |args: &[&str]| {
        let ok = Command::new("git").arg("-C").arg(root).args(args).status().unwrap();
        assert!(ok.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    let line = |tag: char, i: usize| {
        format!("{tag}{i:07} = {i:07}  # a line of a file that is seventeen KB, padded\n")
    };
    let mut text: Vec<u8> = (0..280).flat_map(|i| line('x', i).into_bytes()).collect();
    let width = line('x', 0).len();
    let mut import = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stream = std::io::BufWriter::new(import.stdin.take().unwrap());
    for v in 0..20_000 {
        let at = (v % 280) * width;
        text[at..at + width].copy_from_slice(line('v', v).as_bytes());
        let time = 1_700_000_000 + v;
        write!(stream, "commit refs/heads/main\ncommitter t <t@t> {time} +0000\ndata 1\nv\n")
            .unwrap();
        write!(stream, "M 100644 inline hist.py\ndata {}\n", text.len()).unwrap();
        stream.write_all(&text).unwrap();
        stream.write_all(b"\n").unwrap();
    }
    drop(stream);
    assert!(import.wait().unwrap().success());
    git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    git(&["reset", "-q", "--hard"]);
    text
}

/// The save under a `git status`'s lock in the repository of [`repository`].
fn long_history(bin: &Path) {
    eprintln!("a history of 20,000 versions");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut text = repository(&root);
    let w = Running::start(bin, &root);
    let lock = root.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    text.extend_from_slice(b"# @claude a fresh ask\n");
    let saved = Instant::now();
    std::fs::write(root.join("hist.py"), &text).unwrap();
    std::fs::write(root.join("other.py"), "# @claude the other file\n").unwrap();
    let other_saved = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(&lock).unwrap();
    let (mut hist, mut other) = (None, None);
    while hist.is_none() || other.is_none() {
        let Ok((at, line)) = w.asks.recv_timeout(Duration::from_secs(120)) else { break };
        if line.contains("\"hist.py\"") {
            hist = Some(at.duration_since(saved).as_secs_f64());
        } else if line.contains("\"other.py\"") {
            other = Some(at.duration_since(other_saved).as_secs_f64() * 1000.0);
        }
    }
    let show =
        |v: Option<f64>, unit: &str| v.map_or("never (120 s)".into(), |v| format!("{v:.1} {unit}"));
    println!("| 20,000 versions of 17 KB, saved with a new ask under a 0.3 s index lock: save → ask | {} |", show(hist, "s"));
    println!("| another file saved meanwhile: save → ask | {} |", show(other, "ms"));
}
