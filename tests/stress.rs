//! A writer rewrites a file as fast as it can — in place and by rename, with an increasing
//! counter — while stamping runs in a loop on the same file. No write of the writer may be lost
//! and every stamped id must be unique.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use filewatch_mcp::languages::LanguageTable;
use filewatch_mcp::scan::{Scanner, DEFAULT_TRIGGER};
use filewatch_mcp::{stamp_file, MarkerId};

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
