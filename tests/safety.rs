//! Nothing of the user's is lost to a stamp, through the real binary: a program that keeps its
//! descriptor open across a pause longer than the debounce still has every byte it wrote, and
//! its ask is announced once, stamped, when it is done.
#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::{temp_files, WatchProcess};

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

/// A file of about `size` bytes with one ask, `n`, at the top: big enough that writing and
/// syncing its stamped copy takes a while.
fn big_ask(n: u32, size: usize) -> String {
    let mut text = format!("# @claude ask {n}\n");
    while text.len() < size {
        text.push_str("x = 1  # padding, so that a stamp takes a while to write\n");
    }
    text
}

/// 64-bit FNV-1a, as our temp names carry it (docs/guarantees.md).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// A process id nobody runs any more.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// The owner killed (SIGKILL) just as it stamps a big file, six times over: after each kill
/// the next owner of the root starts and removes the temp files a killed process of ours
/// left — planted before the first start as a killed stamp leaves them (the temp file itself,
/// named with its own inode number; the file an exchange displaced, holding the bytes whose
/// checksum the name carries), and whatever a kill left — and nothing else: the user's newer
/// file an exchange displaced (other bytes), a directory, and a file of the user's merely
/// named like one of ours stay, byte for byte.
#[test]
fn a_killed_owners_temp_files_are_removed_by_the_next_owner() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let pid = dead_pid();
    let plant = |bytes: &[u8], id_of: Option<&std::path::Path>, sum: u64| {
        let staged = root.join("staged");
        std::fs::write(&staged, bytes).unwrap();
        let ino = id_of.map_or_else(
            || std::fs::metadata(&staged).unwrap().ino(),
            |p| std::fs::metadata(p).unwrap().ino(),
        );
        let name = root.join(format!(".big.py.{pid:x}-{ino:x}-{sum:x}.fw-tmp"));
        std::fs::rename(&staged, &name).unwrap();
        name
    };
    let dir_named = root.join(format!(".d.py.{pid:x}-1-{:x}.fw-tmp", fnv1a(b"")));
    std::fs::create_dir(&dir_named).unwrap();
    std::fs::write(dir_named.join("inside.txt"), "kept\n").unwrap();
    let lookalike = root.join(".notes.py.Ab12Cd.fw-tmp");
    std::fs::write(&lookalike, "the user's own file\n").unwrap();
    // Three stamps' names (an exchange puts what it displaced at the temp file's name, so the
    // displaced files carry other files' inode numbers).
    let old = b"# @claude ask 0\nx = 1\n";
    plant(b"# @claude[fw-00000000] ask 0\nx = 1\n", None, fnv1a(old));
    plant(old, Some(&lookalike), fnv1a(old));
    let newer = plant(b"the user's newer version\n", Some(&dir_named), fnv1a(old));
    let stay: Vec<String> = [&newer, &dir_named, &lookalike]
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let state = tempfile::tempdir().unwrap();
    let env = [("FILEWATCH_STATE_DIR", state.path())];
    let args = ["--debounce", "1ms", "--log-level", "debug"];
    let mut left_by_kills = 0;
    for n in 1..=6 {
        let mut watch = WatchProcess::start(&root, &args, &env, DEADLINE);
        // Only what must stay is left, once the owner's start-up clean-up is done.
        let deadline = Instant::now() + DEADLINE;
        loop {
            let mut now = temp_files(&root);
            now.sort();
            let mut want = stay.clone();
            want.sort();
            if now == want {
                break;
            }
            assert!(Instant::now() < deadline, "start {n}: {now:?} are there, not only {want:?}");
            std::thread::sleep(Duration::from_millis(20)); // polling the directory
        }
        if n == 6 {
            break;
        }
        // Kill it as soon as it has scanned the file and is about to stamp it.
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
        if temp_files(&root).len() > stay.len() {
            left_by_kills += 1;
        }
    }
    eprintln!("5 kills, {left_by_kills} left a temp file");
    assert_eq!(std::fs::read(&newer).unwrap(), b"the user's newer version\n");
    assert_eq!(std::fs::read(dir_named.join("inside.txt")).unwrap(), b"kept\n");
    assert_eq!(std::fs::read_to_string(&lookalike).unwrap(), "the user's own file\n");
    let now = std::fs::read_to_string(root.join("big.py")).unwrap();
    assert!(now.starts_with("# @claude"), "big.py: {:?}", &now[..40]);
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
