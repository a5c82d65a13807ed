//! When inotify runs out of watches, the watcher says so once, naming the sysctl, keeps
//! watching what it could, and reports how many directories are left unwatched.
//!
//! The limit is lowered for real (`/proc/sys/fs/inotify/max_user_watches`, root only) and
//! restored afterwards; this test is alone in its binary so no other test runs meanwhile.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

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

struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(LIMIT_FILE, &self.0);
    }
}

#[test]
fn running_out_of_watches_is_reported_and_survived() {
    let Ok(old) = std::fs::read_to_string(LIMIT_FILE) else {
        eprintln!("no {LIMIT_FILE}; skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for i in 0..60 {
        std::fs::create_dir_all(root.join(format!("d{i:02}"))).unwrap();
    }
    let limit = watches_in_use() + 20;
    if std::fs::write(LIMIT_FILE, limit.to_string()).is_err() {
        eprintln!("cannot lower {LIMIT_FILE} (not root?); skipped");
        return;
    }
    let _restore = Restore(old);

    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_filewatch-mcp"))
        .env("FILEWATCH_STATE_DIR", state.path())
        .args(["watch", "--json", "--debounce", "100ms"])
        .arg(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[watch] {line}");
            let _ = tx.send(line);
        }
    });
    let mut limit_errors = 0;
    let ready = loop {
        let line = rx.recv_timeout(Duration::from_secs(20)).expect("watcher output");
        if line.contains("fs.inotify.max_user_watches") {
            limit_errors += 1;
        }
        if line.starts_with("filewatch-mcp: watching") {
            break line;
        }
    };
    assert_eq!(limit_errors, 1, "the limit is reported once");
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
    let stdout = child.stdout.take().unwrap();
    let line = BufReader::new(stdout).lines().next().unwrap().unwrap();
    assert!(line.contains("@claude still heard"), "{line}");
    let _ = child.kill();
    let _ = child.wait();
}
