//! What the watcher costs when nothing is saved (`cargo bench --bench idle`), on the generated
//! tree of 100k files in 10k directories (as `benches/watch.rs` makes it), for `watch` and for
//! the MCP server (`--root TREE`, stdin held open, session initialized):
//!
//! 1. wake-ups while idle: voluntary context switches of all its threads over 30 s (each is a
//!    thread going back to sleep after waking);
//! 2. CPU it uses while another program reads every file of the tree (`rg -uuu` when
//!    installed, else a read of each file): reads must not wake it.
//!
//! `FILEWATCH_BIN=path` measures another build (an older one, for before/after);
//! `FILEWATCH_TREE=dir` measures an existing tree instead of generating one;
//! `FILEWATCH_IDLE_SECS=n` changes the idle time. The functions below are meant to be reused.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Voluntary context switches of every live thread of `pid` so far.
pub fn voluntary_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}

/// CPU time (user + system) `pid` has used so far, all threads.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after `)`.
    let ticks = fields.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + fields.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

/// Wake-ups per second of `pid` over `idle`, with nothing happening.
pub fn idle_wakeups(pid: u32, idle: Duration) -> f64 {
    let before = voluntary_switches(pid);
    std::thread::sleep(idle); // measuring idle time is the point
    voluntary_switches(pid).saturating_sub(before) as f64 / idle.as_secs_f64()
}

/// Reads every file under `root`: `rg -uuu --files-with-matches zzzz` when installed (as a
/// build or an editor's search would), else each file in turn. Returns what did the reading.
pub fn read_every_file(root: &Path) -> &'static str {
    let rg = Command::new("rg")
        .args(["-uuu", "--files-with-matches", "zzzz"])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if rg.is_ok() {
        return "rg -uuu";
    }
    fn read_dir(dir: &Path) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => read_dir(&e.path()),
                Ok(t) if t.is_file() => drop(std::fs::read(e.path())),
                _ => {}
            }
        }
    }
    read_dir(root);
    "a read of each file"
}

/// CPU-seconds `pid` used while every file under `root` was read, and what read them. The
/// reading is followed by a short wait so that events queued by the end are handled too.
pub fn read_storm_cpu(pid: u32, root: &Path) -> (f64, &'static str) {
    let before = cpu_time(pid);
    let how = read_every_file(root);
    std::thread::sleep(Duration::from_millis(500));
    ((cpu_time(pid) - before).as_secs_f64(), how)
}

/// The tree `benches/watch.rs` generates: 100 packages × 100 modules × 10 Python files, in a
/// git repository.
pub fn generate_tree(root: &Path) {
    for a in 0..100 {
        for b in 0..100 {
            let d = root.join(format!("pkg{a:02}/mod{b:02}"));
            std::fs::create_dir_all(&d).unwrap();
            for f in 0..10 {
                std::fs::write(d.join(format!("f{f}.py")), "def f():\n    return 1\n").unwrap();
            }
        }
    }
    let _ = Command::new("git").arg("-C").arg(root).args(["init", "-q"]).status();
}

/// A running `filewatch-mcp`, ready (every directory watched), and its peak RSS and time to
/// ready.
pub struct Started {
    /// The process.
    pub child: Child,
    /// Held open: the server ends when its stdin does.
    pub stdin: Option<ChildStdin>,
    /// From spawn to ready.
    pub ready_after: Duration,
}

/// Starts `filewatch-mcp watch ROOT` and waits for its "watching" line.
pub fn start_watch(bin: &Path, root: &Path) -> Started {
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(["watch", "--json"])
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn filewatch-mcp");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("watcher output").unwrap();
        if line.starts_with("filewatch-mcp: watching") {
            break;
        }
    }
    let ready_after = started.elapsed();
    std::thread::spawn(move || for _ in lines {});
    Started { child, stdin: None, ready_after }
}

/// Starts the server (`filewatch-mcp --root ROOT`) and initializes a session: it answers
/// `initialize` once every directory is watched. stdin stays open.
pub fn start_server(bin: &Path, root: &Path) -> Started {
    const INITIALIZE: &str = r#"{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}},"jsonrpc":"2.0","id":0}"#;
    const INITIALIZED: &str = r#"{"method":"notifications/initialized","jsonrpc":"2.0"}"#;
    let started = Instant::now();
    let mut child = Command::new(bin)
        .arg("--root")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn filewatch-mcp");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut reply = String::new();
    out.read_line(&mut reply).unwrap();
    assert!(reply.contains("protocolVersion"), "{reply}");
    let ready_after = started.elapsed();
    writeln!(stdin, "{INITIALIZED}").unwrap();
    std::thread::spawn(move || for _ in out.lines() {});
    Started { child, stdin: Some(stdin), ready_after }
}

fn status_kb(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Measures one running process: idle wake-ups, then CPU under a read storm.
pub fn measure(name: &str, mut s: Started, root: &Path, idle: Duration) {
    let pid = s.child.id();
    let rss = status_kb(pid, "VmHWM:") as f64 / 1024.0;
    // Let start-up settle (the tree walk's events, a blocking thread's exit) before idling.
    std::thread::sleep(Duration::from_secs(2));
    let per_s = idle_wakeups(pid, idle);
    let (cpu, how) = read_storm_cpu(pid, root);
    println!(
        "{name}: ready {:.0} ms, peak RSS {rss:.1} MiB; idle {} s: {per_s:.2} wake-ups/s; \
         {how} over the tree: {cpu:.2} CPU-s",
        s.ready_after.as_secs_f64() * 1000.0,
        idle.as_secs(),
    );
    drop(s.stdin.take());
    let _ = s.child.kill();
    let _ = s.child.wait();
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it with no flag: skip then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let bin = std::env::var_os("FILEWATCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_filewatch-mcp")), PathBuf::from);
    let idle = Duration::from_secs(
        std::env::var("FILEWATCH_IDLE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(30),
    );
    let generated;
    let root = match std::env::var_os("FILEWATCH_TREE") {
        Some(tree) => PathBuf::from(tree).canonicalize().unwrap(),
        None => {
            generated = tempfile::tempdir().unwrap();
            let root = generated.path().canonicalize().unwrap();
            generate_tree(&root);
            root
        }
    };
    println!("{} on {}", bin.display(), root.display());
    measure("watch", start_watch(&bin, &root), &root, idle);
    measure("server", start_server(&bin, &root), &root, idle);
}
