//! A writer rewrites a file as fast as it can — in place and by rename, with an increasing
//! counter — while stamping runs in a loop on the same file. No write of the writer may be lost
//! and every stamped id must be unique.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::temp_files;
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
    let leftovers = temp_files(dir.path());
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

/// The counter of a [`content`] version, once our tags are taken out.
fn counter_of(bytes: &[u8]) -> Option<u32> {
    let text = String::from_utf8_lossy(bytes);
    text.split("counter = ").nth(1)?.trim_end().parse().ok()
}

/// An editor saving as fast as it can, each save a new file renamed over the path (the
/// "atomic save"), while stamping runs in a loop and a reader (a build, a test runner) reads
/// the file all along: the reader must never get a version older than the last save made
/// before its read began — not even for the instant a stamp's exchange is visible before it
/// is undone. Runs until a stale read or the deadline.
#[test]
fn a_reader_never_sees_an_older_version_during_a_rename_storm() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("hot.py"));
    std::fs::write(&*path, content(0)).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU32::new(0));
    let saved = Arc::new(AtomicU32::new(0));
    let stamper = stamper(path.clone(), done.clone(), rounds.clone());
    let saver = {
        let (path, done, rounds, saved) =
            (path.clone(), done.clone(), rounds.clone(), saved.clone());
        let staged = dir.path().join("hot.py.staged");
        std::thread::spawn(move || {
            let mut i = 0;
            while !done.load(Ordering::Relaxed) {
                i += 1;
                std::fs::write(&staged, content(i)).unwrap();
                std::fs::rename(&staged, &*path).unwrap();
                saved.store(i, Ordering::SeqCst);
                // Every other save waits for a stamp attempt to begin on it, so that saves
                // land at every point of a stamp, not only between two.
                if i % 2 == 0 {
                    let (seen, deadline) = (rounds.load(Ordering::Relaxed), Instant::now() + WAIT);
                    while rounds.load(Ordering::Relaxed) == seen && Instant::now() < deadline {
                        std::thread::yield_now();
                    }
                }
            }
            i
        })
    };
    let started = Instant::now();
    let (mut reads, mut stamped_reads, mut stale) = (0u32, 0u32, Vec::new());
    while started.elapsed() < Duration::from_secs(8) && stale.is_empty() {
        let before = saved.load(Ordering::SeqCst);
        let bytes = std::fs::read(&*path).unwrap();
        reads += 1;
        if bytes.windows(4).any(|w| w == b"[fw-") {
            stamped_reads += 1;
        }
        match counter_of(&bytes) {
            Some(got) if got >= before => {}
            got => stale.push((before, got, String::from_utf8_lossy(&bytes).into_owned())),
        }
    }
    done.store(true, Ordering::Relaxed);
    let saves = saver.join().unwrap();
    let ids = stamper.join().unwrap();
    eprintln!(
        "stress (rename storm): {saves} saves, {} stamp rounds, {} stamps, {reads} reads \
         ({stamped_reads} of a stamped file), {} stale",
        rounds.load(Ordering::Relaxed),
        ids.len(),
        stale.len()
    );
    assert!(
        stale.is_empty(),
        "read an older version than the last save (saved, read, bytes): {stale:?}"
    );
    assert!(!ids.is_empty(), "never stamped: the test proves nothing");
    let left = temp_files(dir.path());
    assert!(left.is_empty(), "a save kept at a temp name: {left:?}");
}

/// Removes whatever is at `p` (`rm -rf`), without following a symlink.
#[cfg(unix)]
fn remove_any(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) => Err(e),
    }
}

/// A file is saved, stamps run on it in a loop, and the user swaps a directory in at its path
/// (deletes the file, makes a directory with a file in it), then does it again at once (`rm
/// -rf`, `mkdir`), as a script or a checkout may: once the stamp in flight is over, the path
/// holds the user's last directory, and none of our temp files (which would hold the other)
/// stays. Runs until something is wrong or the deadline.
#[cfg(unix)]
#[test]
fn a_directory_swapped_in_during_stamps_stays_where_it_was_put() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("swap.py"));
    let done = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU32::new(0));
    let stamper = stamper(path.clone(), done.clone(), rounds.clone());
    let started = Instant::now();
    let mut wrong = Vec::new();
    let mut round = 0u32;
    // A pseudo-random spin before each step, so that the steps land all over a stamp.
    let mut seed = 0x2545_f491_u32;
    let mut spin = || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        for _ in 0..seed % 64 {
            std::thread::yield_now();
        }
    };
    while started.elapsed() < Duration::from_secs(8) && wrong.is_empty() {
        round += 1;
        std::fs::write(&*path, content(round)).unwrap();
        let seen = rounds.load(Ordering::Relaxed);
        let deadline = Instant::now() + WAIT;
        while rounds.load(Ordering::Relaxed) == seen && Instant::now() < deadline {
            std::thread::yield_now(); // a stamp is under way on the file
        }
        spin();
        for (n, step) in ["first", "second"].into_iter().enumerate() {
            if let Err(e) = remove_any(&path) {
                wrong.push(format!("round {round}: rm -rf before the {step} directory: {e}"));
            }
            if let Err(e) = std::fs::create_dir(&*path) {
                wrong.push(format!("round {round}: mkdir of the {step} directory: {e}"));
                continue;
            }
            let inside = format!("round {round}, directory {n}\n");
            if let Err(e) = std::fs::write(path.join("inside.txt"), &inside) {
                wrong.push(format!("round {round}: writing into the {step} directory: {e}"));
            }
            spin();
        }
        // Once a stamp round has begun and ended since, none is in flight on the file.
        let seen = rounds.load(Ordering::Relaxed);
        let deadline = Instant::now() + WAIT;
        while rounds.load(Ordering::Relaxed) < seen + 2 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        let want = format!("round {round}, directory 1\n");
        match std::fs::read_to_string(path.join("inside.txt")) {
            Ok(got) if got == want => {}
            got => {
                wrong.push(format!("round {round}: the path holds {got:?}, not the last directory"))
            }
        }
        let temps = temp_files(dir.path());
        if !temps.is_empty() {
            wrong.push(format!("round {round}: temp files left: {temps:?}"));
        }
        if let Err(e) = remove_any(&path) {
            wrong.push(format!("round {round}: rm -rf of the last directory: {e}"));
        }
    }
    done.store(true, Ordering::Relaxed);
    let ids = stamper.join().unwrap();
    eprintln!(
        "stress (directory swaps): {round} rounds, {} stamp rounds, {} stamps, {} wrong",
        rounds.load(Ordering::Relaxed),
        ids.len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(!ids.is_empty(), "never stamped: the test proves nothing");
}
