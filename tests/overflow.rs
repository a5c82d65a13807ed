//! A queue overflow makes the watcher look at every file again; that rescan must not fire
//! markers nobody saved (a vendored file's), and must fire those written while events were
//! lost.
//!
//! The queue is made tiny for real (`/proc/sys/fs/inotify/max_queued_events`, root only, read
//! when the watcher's inotify instance is made) and restored at once; this test is alone in
//! its binary so no other test's watcher gets the tiny queue.
#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::{Sysctl, WatchProcess};

const QUEUE_FILE: &str = "/proc/sys/fs/inotify/max_queued_events";
const DEADLINE: Duration = Duration::from_secs(20);

#[test]
fn a_rescan_after_lost_events_fires_only_what_was_saved() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("vendor")).unwrap();
    std::fs::write(root.join("vendor/lib.py"), "# @claude from someone else's tarball\n").unwrap();
    let Some(restore) = Sysctl::set(QUEUE_FILE, "16") else { return };
    let watch = WatchProcess::start(&root, &["--debounce", "100ms"], &[], DEADLINE);
    let (asks, log) = (&watch.asks, &watch.log);
    drop(restore); // the watcher's queue is made; nobody else gets the tiny one

    // A burst far over the queue, one file of it with an ask of the user's.
    for i in 0..400 {
        std::fs::write(root.join(format!("burst{i:03}.py")), format!("x = {i}\n")).unwrap();
    }
    std::fs::write(root.join("burst-mine.py"), "# @claude saved during the burst\n").unwrap();
    let overflowed = loop {
        match log.recv_timeout(Duration::from_secs(5)) {
            Ok(line) if line.contains("events were lost") => break true,
            Ok(_) => {}
            Err(_) => break false,
        }
    };
    // Barrier: once the sentinel's ask is out, everything before it has been handled.
    std::fs::write(root.join("sentinel.py"), "# @claude sentinel\n").unwrap();
    let mut files = Vec::new();
    loop {
        let ask = asks.recv_timeout(DEADLINE).expect("the sentinel's ask");
        let file = ask["file"].as_str().unwrap().to_string();
        if file == "sentinel.py" {
            break;
        }
        files.push(file);
    }
    drop(watch);
    assert!(files.contains(&"burst-mine.py".to_string()), "the user's ask was lost: {files:?}");
    if !overflowed {
        // A machine fast enough to drain 16 events at a time saw no overflow: no rescan ran.
        eprintln!("SKIPPED the rescan check: the burst did not overflow a 16-event queue");
        return;
    }
    assert_eq!(files, ["burst-mine.py"], "the rescan fired what nobody saved");
}
