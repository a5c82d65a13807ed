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

/// Our temp file names under `dir` (not below).
fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".fw-tmp"))
        .collect()
}

/// A file of about `size` bytes with one ask, `n`, at the top: big enough that writing and
/// syncing its stamped copy takes a while.
fn big_ask(n: u32, size: usize) -> String {
    let mut text = format!("# @claude ask {n}\n");
    while text.len() < size {
        text.push_str("x = 1  # padding, so that a stamp takes a while to write\n");
    }
    text
}

/// The owner killed (SIGKILL) while it stamps leaves its temp file behind; the next owner of
/// the root removes it when it starts, and nothing else: a file of the user's that merely looks
/// like one of ours stays. Kills the owner just as it starts a stamp, again and again, until a
/// kill leaves a temp file (or gives up at the deadline: then nothing was shown).
#[test]
fn a_killed_owners_temp_files_are_removed_by_the_next_owner() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let lookalike = root.join(".notes.py.Ab12Cd.fw-tmp");
    std::fs::write(&lookalike, "the user's own file\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let env = [("FILEWATCH_STATE_DIR", state.path())];
    let args = ["--debounce", "1ms", "--log-level", "debug"];
    let started = Instant::now();
    let (mut kills, mut caught, mut n) = (0, 0, 0);
    while caught == 0 && started.elapsed() < Duration::from_secs(90) {
        let mut watch = WatchProcess::start(&root, &args, &env, DEADLINE);
        // Kill it as soon as it has scanned the file and is about to stamp it.
        n += 1;
        std::fs::write(root.join("big.py"), big_ask(n, 900_000)).unwrap();
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            match watch.log.recv_timeout(DEADLINE) {
                Ok(line) if line.contains("big.py: 1 marker(s)") => break,
                Ok(_) => {}
                Err(e) => panic!("the watch never scanned big.py: {e}"),
            }
        }
        watch.child.kill().unwrap();
        watch.child.wait().unwrap();
        kills += 1;
        let mut left: Vec<String> = temp_files(&root);
        left.retain(|n| !lookalike.ends_with(n));
        if left.is_empty() {
            continue;
        }
        caught += 1;
        eprintln!("kill {kills} left {left:?}");
        // The next owner, at its start, removes them.
        let _next = WatchProcess::start(&root, &args, &env, DEADLINE);
        let deadline = Instant::now() + DEADLINE;
        loop {
            let mut still: Vec<String> = temp_files(&root);
            still.retain(|n| !lookalike.ends_with(n));
            if still.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "the next owner left {still:?} (were {left:?})");
            std::thread::sleep(Duration::from_millis(20)); // polling the directory
        }
        let now = std::fs::read_to_string(root.join("big.py")).unwrap();
        assert!(now.starts_with("# @claude"), "big.py: {:?}", &now[..40]);
    }
    eprintln!("{kills} kills, {caught} left a temp file");
    assert!(caught > 0, "no kill in {kills} landed in a stamp: nothing was shown");
    assert_eq!(std::fs::read_to_string(&lookalike).unwrap(), "the user's own file\n");
}

/// A directory moved out of the root while a stamp of a file in it is under way (a symlink to
/// it put in its place, then removed): the file, now outside the root, is never written.
/// Moves the directory just as the stamp begins, again and again, until the deadline.
#[test]
fn a_directory_moved_out_of_the_root_during_a_stamp_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let (root, outside) = (top.join("root"), top.join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let args = ["--debounce", "1ms", "--log-level", "debug"];
    let watch = WatchProcess::start(&root, &args, &[], DEADLINE);
    let started = Instant::now();
    let mut moved = Vec::new();
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(20) {
        i += 1;
        let sub = root.join("sub");
        std::fs::create_dir(&sub).unwrap();
        // Written beside the root and renamed in: the first read is of the whole file.
        let staged = top.join("staged.py");
        std::fs::write(&staged, big_ask(i, 300_000)).unwrap();
        std::fs::rename(&staged, sub.join("f.py")).unwrap();
        let deadline = Instant::now() + DEADLINE;
        loop {
            let line = watch.log.recv_timeout(DEADLINE).expect("the watch scans sub/f.py");
            if line.contains("sub/f.py: 1 marker(s)") {
                break;
            }
            assert!(Instant::now() < deadline, "sub/f.py never scanned");
        }
        // Then, at a point of the stamp that differs each time: as soon as its temp file is
        // there, or after a pseudo-random 0-3 ms.
        let until =
            Instant::now() + Duration::from_micros(u64::from(i.wrapping_mul(2_654_435_761) % 3000));
        while Instant::now() < until && temp_files(&sub).is_empty() {
            std::thread::yield_now();
        }
        let away = outside.join(format!("sub{i}"));
        std::fs::rename(&sub, &away).unwrap();
        std::os::unix::fs::symlink(&away, &sub).unwrap();
        let untagged = !std::fs::read_to_string(away.join("f.py")).unwrap().contains("[fw-");
        std::fs::remove_file(&sub).unwrap();
        if untagged {
            moved.push(away);
        }
    }
    // Barrier: once the sentinel's ask is out, every stamp before it is over.
    std::fs::write(root.join("sentinel.py"), "# @claude sentinel\n").unwrap();
    loop {
        let ask = watch.asks.recv_timeout(DEADLINE).expect("the sentinel's ask");
        if ask["file"] == "sentinel.py" {
            break;
        }
    }
    let written: Vec<_> = moved
        .iter()
        .filter(|away| std::fs::read_to_string(away.join("f.py")).unwrap().contains("[fw-"))
        .collect();
    eprintln!("{i} moves, {} caught before their stamp, {} written", moved.len(), written.len());
    assert!(written.is_empty(), "stamped outside the root: {written:?}");
    assert!(!moved.is_empty(), "no move landed before a stamp: nothing was shown");
}
