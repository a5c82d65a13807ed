//! Nothing of the user's is lost to a stamp, through the real binary: a program that keeps its
//! descriptor open across a pause longer than the debounce still has every byte it wrote, and
//! its ask is announced once, stamped, when it is done.
#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::WatchProcess;

const DEADLINE: Duration = Duration::from_secs(20);

#[test]
fn a_shell_writing_across_a_pause_keeps_both_lines_and_asks_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let watch = WatchProcess::start(&root, &["--debounce", "100ms"], &[], DEADLINE);
    let status = std::process::Command::new("sh")
        .args(["-c", "( echo '# @claude x'; sleep 1; echo more ) > f.py"])
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(status.success());

    // Wait for the stamped file to hold both lines (or give up and show what it holds).
    let path = root.join("f.py");
    let deadline = Instant::now() + DEADLINE;
    let mut now = String::new();
    while Instant::now() < deadline {
        now = std::fs::read_to_string(&path).unwrap_or_default();
        if now.contains("[fw-") && now.ends_with("more\n") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(now.ends_with("more\n"), "the line written after the pause was lost: {now:?}");
    assert!(now.starts_with("# @claude[fw-") && now.lines().count() == 2, "{now:?}");

    // Barrier: once the sentinel's ask is out, every ask of f.py has been announced.
    std::fs::write(root.join("sentinel.py"), "# @claude sentinel\n").unwrap();
    let mut asks_of_f = Vec::new();
    loop {
        let ask = watch.asks.recv_timeout(DEADLINE).expect("the sentinel's ask");
        match ask["file"].as_str().unwrap() {
            "sentinel.py" => break,
            "f.py" => asks_of_f.push(ask),
            other => panic!("an ask from {other}"),
        }
    }
    assert_eq!(asks_of_f.len(), 1, "{asks_of_f:?}");
    let id = asks_of_f[0]["id"].as_str().unwrap_or_default().to_string();
    assert!(now.contains(&id), "announced {id}, the file holds {now:?}");
}

/// A file still open for writing is left alone; the writer's close — with nothing more
/// written — is itself the change that stamps it: the watcher passes close-write events on.
#[test]
fn a_writers_close_alone_brings_the_stamp() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let args = ["--debounce", "100ms", "--settle", "200ms", "--log-level", "debug"];
    let watch = WatchProcess::start(&root, &args, &[], DEADLINE);
    let path = root.join("slow.py");
    let mut writer = std::fs::File::create(&path).unwrap();
    writer.write_all(b"# @claude written slowly\n").unwrap();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let line = watch.log.recv_timeout(DEADLINE).expect("a log line");
        if line.contains("slow.py") && line.contains("still open for writing") {
            break;
        }
        assert!(Instant::now() < deadline, "the open file was never looked at");
    }
    assert!(watch.asks.try_recv().is_err(), "announced while still being written");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# @claude written slowly\n");
    drop(writer);
    let ask = watch.asks.recv_timeout(DEADLINE).expect("the ask, once the writer closed");
    assert_eq!(ask["file"], "slow.py");
    // The tag follows, once the file has been quiet for the settle time.
    let tag = format!("# @claude[{}] written slowly\n", ask["id"].as_str().unwrap());
    let deadline = Instant::now() + DEADLINE;
    while std::fs::read_to_string(&path).unwrap() != tag {
        assert!(Instant::now() < deadline, "not stamped: {:?}", std::fs::read_to_string(&path));
        std::thread::sleep(Duration::from_millis(20)); // polling the file
    }
}
