//! A writer rewrites a file as fast as it can — in place and by rename, with an increasing
//! counter — while stamping runs in a loop on the same file. No write of the writer may be lost
//! and every stamped id must be unique.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use filewatch_mcp::languages::LanguageTable;
use filewatch_mcp::scan::{Scanner, DEFAULT_TRIGGER};
use filewatch_mcp::{stamp_file, MarkerId};

/// How long a writer waits for the stamper before going on without it.
const WAIT: Duration = Duration::from_secs(5);

fn content(i: u32) -> String {
    format!("# header\n# @claude ask number {i}\ncounter = {i}\n")
}

/// The file's bytes with our tags taken out: what the user wrote.
fn user_bytes(path: &Path) -> String {
    let mut bytes = std::fs::read(path).unwrap_or_default();
    while let Some(i) = memchr::memmem::find(&bytes, b"[fw-") {
        bytes.drain(i..i + MarkerId::TAG_LEN);
    }
    String::from_utf8(bytes).unwrap()
}

#[test]
fn concurrent_writer_loses_nothing_and_ids_are_unique() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("hot.py"));
    std::fs::write(&*path, content(0)).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let ids = Arc::new(Mutex::new(Vec::<MarkerId>::new()));

    let stamper = {
        let (path, done, ids) = (path.clone(), done.clone(), ids.clone());
        std::thread::spawn(move || {
            let table = LanguageTable::builtin();
            let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
            let mut rounds = 0u32;
            while !done.load(Ordering::Relaxed) {
                rounds += 1;
                // One attempt per round: a conflict simply means the writer won this round.
                if let Ok(asks) = stamp_file(&scanner, &path, false, 1) {
                    ids.lock().unwrap().extend(asks.into_iter().filter_map(|m| m.tag));
                }
            }
            rounds
        })
    };

    let started = Instant::now();
    let staged = dir.path().join("hot.py.staged");
    let mut lost = Vec::new();
    let mut last = 0;
    for i in 1..=3000u32 {
        if started.elapsed() > Duration::from_secs(8) {
            break;
        }
        let text = content(i);
        if i % 2 == 0 {
            std::fs::write(&*path, &text).unwrap(); // in place: O_TRUNC + write
        } else {
            std::fs::write(&staged, &text).unwrap(); // editor-style: write a copy, rename it over
            std::fs::rename(&staged, &*path).unwrap();
        }
        last = i;
        // Every third write waits for the stamper to tag it, so stamps land between writes
        // as well as racing them.
        if i % 3 == 0 {
            let deadline = Instant::now() + Duration::from_secs(2);
            while !std::fs::read(&*path).unwrap_or_default().windows(4).any(|w| w == b"[fw-")
                && Instant::now() < deadline
            {
                std::thread::yield_now();
            }
        }
        // The write must be (or come back to be) what the file holds, give or take our tags. A
        // swap-back after a lost race takes microseconds; a lost write never comes back.
        let deadline = Instant::now() + Duration::from_secs(2);
        while user_bytes(&path) != text {
            if Instant::now() > deadline {
                lost.push(i);
                break;
            }
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Relaxed);
    let rounds = stamper.join().unwrap();

    let ids = ids.lock().unwrap();
    let unique: HashSet<&MarkerId> = ids.iter().collect();
    eprintln!(
        "stress: {last} writes, {rounds} stamp rounds, {} stamps, {} lost writes",
        ids.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "lost writes: {lost:?}");
    assert_eq!(user_bytes(&path), content(last), "the file must hold the writer's last write");
    assert_eq!(unique.len(), ids.len(), "every stamped id must be unique");
    assert!(!ids.is_empty(), "the stamper never won a round; the test proves nothing");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".fw-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left behind: {leftovers:?}");
}

/// Runs `stamp_file` on `path` in a loop until `done`; returns the rounds and the ids stamped.
/// `rounds` counts the attempts made.
fn stamper(
    path: Arc<std::path::PathBuf>,
    done: Arc<AtomicBool>,
    rounds: Arc<AtomicU32>,
) -> std::thread::JoinHandle<Vec<MarkerId>> {
    std::thread::spawn(move || {
        let table = LanguageTable::builtin();
        let scanner = Scanner::new(table, DEFAULT_TRIGGER).unwrap();
        let mut ids = Vec::new();
        while !done.load(Ordering::Relaxed) {
            if let Ok(asks) = stamp_file(&scanner, &path, false, 1) {
                ids.extend(asks.into_iter().filter_map(|m| m.tag));
            }
            rounds.fetch_add(1, Ordering::Relaxed);
        }
        ids
    })
}

/// The writer's lines the file lacks, holds twice, or holds out of order, and its NUL bytes.
fn missing_and_padded(now: &str, want: &[String]) -> (Vec<String>, usize) {
    let got: Vec<&str> = now.lines().collect();
    let missing = if got == want.iter().map(String::as_str).collect::<Vec<_>>() {
        Vec::new()
    } else {
        want.iter().filter(|l| !got.contains(&l.as_str())).cloned().collect()
    };
    (missing, now.bytes().filter(|&b| b == 0).count())
}

/// A logger: one descriptor held open (`O_APPEND`) for 250 numbered lines at a time, with
/// pauses, while stamping runs in a loop; each session starts with an ask and is followed by
/// a wait for its stamp, so stamps land between sessions and are tried throughout them.
#[test]
fn a_writer_holding_its_descriptor_across_stamps_loses_nothing() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("log.py"));
    std::fs::write(&*path, "").unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU32::new(0));
    let stamper = stamper(path.clone(), done.clone(), rounds.clone());
    let mut want = Vec::new();
    let (mut writes, mut stamped_sessions) = (0u32, 0u32);
    for session in 0..8 {
        let mut log = std::fs::OpenOptions::new().append(true).open(&*path).unwrap();
        let ask = format!("# @claude session {session}");
        writeln!(log, "{ask}").unwrap();
        want.push(ask);
        for j in 0..250 {
            let line = format!("line {session}.{j}");
            writeln!(log, "{line}").unwrap();
            want.push(line);
            writes += 1;
            if j % 50 == 0 {
                // A pause longer than a stamp: the stamper tries twice while the descriptor is
                // open (with a debounce, the pause that lets a watcher's change fire).
                let (seen, deadline) = (rounds.load(Ordering::Relaxed), Instant::now() + WAIT);
                while rounds.load(Ordering::Relaxed) < seen + 2 && Instant::now() < deadline {
                    std::thread::yield_now();
                }
            }
        }
        drop(log);
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let tags = std::fs::read(&*path).unwrap().windows(4).filter(|w| w == b"[fw-").count();
            if tags > session {
                stamped_sessions += 1;
                break;
            }
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Relaxed);
    let ids = stamper.join().unwrap();
    let rounds = rounds.load(Ordering::Relaxed);
    let (missing, nuls) = missing_and_padded(&user_bytes(&path), &want);
    eprintln!(
        "stress (held descriptor): {writes} writes, {rounds} stamp rounds, {} stamps \
         ({stamped_sessions} of 8 sessions), {} lost or out of order, {nuls} NUL bytes",
        ids.len(),
        missing.len()
    );
    assert!(missing.is_empty() && nuls == 0, "lost: {missing:?}; NULs: {nuls}");
    assert_eq!(user_bytes(&path).lines().count(), want.len(), "duplicated lines");
    assert!(!ids.is_empty(), "never stamped between sessions; the test proves nothing");
}

/// A file with two names, rewritten in place (`O_TRUNC` + write) as fast as possible while
/// stamping runs in a loop: every write must be what both names hold, never shorter, never
/// padded with NULs.
#[test]
fn a_hard_linked_file_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("linked.py"));
    let other = dir.path().join("other-name.py");
    std::fs::write(&*path, content(0)).unwrap();
    std::fs::hard_link(&*path, &other).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU32::new(0));
    let stamper = stamper(path.clone(), done.clone(), rounds.clone());
    let (mut lost, mut padded) = (Vec::new(), 0u32);
    let started = Instant::now();
    let mut last = 0;
    for i in 1..=2000u32 {
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
        let text = content(i);
        std::fs::write(&*path, &text).unwrap();
        last = i;
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let now = user_bytes(&path);
            if now.contains('\0') {
                padded += 1;
            }
            if now == text {
                break;
            }
            if Instant::now() > deadline {
                lost.push(i);
                break;
            }
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Relaxed);
    let ids = stamper.join().unwrap();
    let rounds = rounds.load(Ordering::Relaxed);
    eprintln!(
        "stress (hard-linked): {last} writes, {rounds} stamp rounds, {} stamps, {} lost, \
         {padded} padded reads",
        ids.len(),
        lost.len()
    );
    assert!(lost.is_empty() && padded == 0, "lost writes: {lost:?}; padded reads: {padded}");
    assert_eq!(last, 2000, "too slow to make 2,000 writes");
    assert_eq!(std::fs::read(&*path).unwrap(), std::fs::read(&other).unwrap());
}
