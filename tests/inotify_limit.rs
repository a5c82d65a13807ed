//! When inotify runs out of watches, the watcher says so once, naming the sysctl, keeps
//! watching what it could, and reports how many directories are left unwatched.
//!
//! The limit is lowered for real (`/proc/sys/fs/inotify/max_user_watches`, root only) and
//! restored afterwards; this test is alone in its binary so no other test runs meanwhile.

use std::time::Duration;

mod common;
use common::{Sysctl, WatchProcess};

const LIMIT_FILE: &str = "/proc/sys/fs/inotify/max_user_watches";

/// Watches the whole machine holds now (every inotify fd's `inotify wd:` lines).
fn watches_in_use() -> usize {
    let mut n = 0;
    let Ok(procs) = std::fs::read_dir("/proc") else { return 0 };
    for p in procs.flatten() {
        let Ok(fds) = std::fs::read_dir(p.path().join("fdinfo")) else { continue };
        for fd in fds.flatten() {
            if let Ok(text) = std::fs::read_to_string(fd.path()) {
                n += text.lines().filter(|l| l.starts_with("inotify wd:")).count();
            }
        }
    }
    n
}

#[test]
fn running_out_of_watches_is_reported_and_survived() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for i in 0..60 {
        std::fs::create_dir_all(root.join(format!("d{i:02}"))).unwrap();
    }
    let limit = watches_in_use() + 20;
    let Some(_restore) = Sysctl::set(LIMIT_FILE, &limit.to_string()) else { return };

    let watch = WatchProcess::spawn(&root, &["--debounce", "100ms"], &[]);
    let said = watch.log_until("filewatch-mcp: watching", Duration::from_secs(20));
    let limit_errors = said.iter().filter(|l| l.contains("fs.inotify.max_user_watches")).count();
    assert_eq!(limit_errors, 1, "the limit is reported once");
    let ready = said.last().unwrap();
    assert!(ready.contains("NOT watched"), "{ready}");
    let unwatched: usize = ready
        .split(", ")
        .find_map(|part| {
            part.split(' ').next()?.parse().ok().filter(|_| part.contains("NOT watched"))
        })
        .expect("a count of unwatched directories");
    assert!(unwatched >= 30, "{ready}");

    // What is watched still works: the root was watched first.
    std::fs::write(root.join("a.py"), "# @claude still heard\n").unwrap();
    let ask = watch.asks.recv_timeout(Duration::from_secs(20)).expect("an ask");
    assert!(ask.to_string().contains("@claude still heard"), "{ask}");
}
