//! What the watcher benchmarks share (`watch.rs`, `idle.rs`, `perf.rs`): the synthetic tree,
//! `watch` and the MCP server as child processes, Python files of a given size, and readings from
//! `/proc` (Linux; they read as zero elsewhere).

// Each bench binary compiles this module and uses what it needs of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// The debounce the watcher is started with; latencies are reported beyond it.
pub const DEBOUNCE_MS: u64 = 50;

/// Files per directory and directories per package of the synthetic tree.
const FILES_PER_DIR: usize = 10;
const DIRS_PER_PACKAGE: usize = 100;

/// Writes the synthetic tree under `root`: `packages` × 100 directories of 10 small Python files
/// (`packages = 100` is the issue's tree: 100,000 files in 10,100 directories), and makes it a git
/// repository, as a real project is (the watcher watches the git directory for its lock).
/// A tree this wrote before with as many packages is kept as it is (`.git/synthetic-tree` says
/// how many). Returns the number of files and directories.
pub fn synthetic_tree(root: &Path, packages: usize) -> (usize, usize) {
    let files = packages * DIRS_PER_PACKAGE * FILES_PER_DIR;
    let dirs = packages * (DIRS_PER_PACKAGE + 1);
    let stamp = root.join(".git/synthetic-tree");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == packages.to_string()) {
        eprintln!("reusing the {files} files in {dirs} directories under {}", root.display());
        return (files, dirs);
    }
    let made = Instant::now();
    for a in 0..packages {
        for b in 0..DIRS_PER_PACKAGE {
            let d = root.join(format!("pkg{a:02}/mod{b:02}"));
            std::fs::create_dir_all(&d).unwrap();
            for f in 0..FILES_PER_DIR {
                std::fs::write(d.join(format!("f{f}.py")), "def f():\n    return 1\n").unwrap();
            }
        }
    }
    eprintln!(
        "generated {files} files in {dirs} directories in {:.1} s",
        made.elapsed().as_secs_f64()
    );
    let _ = Command::new("git").arg("-C").arg(root).args(["init", "-q"]).status();
    let _ = std::fs::write(stamp, packages.to_string());
    (files, dirs)
}

/// A Python file of at least `bytes` bytes: whole copies of `benches/samples/sample.py` (5,037
/// bytes), which opens with a docstring, so a cut copy would leave an ask inside a string.
pub fn python_body(bytes: usize) -> Vec<u8> {
    let sample =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/samples/sample.py")).unwrap();
    let mut body = Vec::new();
    while body.len() < bytes {
        body.extend_from_slice(&sample);
    }
    body
}

/// `filewatch-mcp watch --json` as a child process: its asks on a channel with their arrival
/// times. It has a state directory of its own (owner lock, ledger): none in the user's, and a
/// server started beside it on the same root owns that root too. Killed when dropped.
pub struct Running {
    pub child: Child,
    pub asks: Receiver<(Instant, String)>,
    pub ready_after: Duration,
    _state: tempfile::TempDir,
}

impl Running {
    /// Starts `bin watch --json --debounce 50ms --settle 0s ROOT` and returns once it says it is
    /// watching. `--settle 0s`: every save is deliberate and tagged at once, as the latency runs
    /// need — each of their saves puts a new ask where the last one was, which the default
    /// settle would take for an editor autosaving while its user types (the ask then waits for
    /// its text to settle: seconds, not the pipeline's cost). Builds before `--settle` existed
    /// (issue 20) cannot be measured with it.
    pub fn start(bin: &Path, root: &Path) -> Running {
        Running::start_with(
            bin,
            root,
            &["--debounce", &format!("{DEBOUNCE_MS}ms"), "--settle", "0s"],
        )
    }

    /// Starts `bin watch --json ARGS… ROOT` and returns once it says it is watching.
    pub fn start_with(bin: &Path, root: &Path, args: &[&str]) -> Running {
        Running::start_in(bin, root, args, tempfile::tempdir().unwrap())
    }

    /// [`Running::start_with`] on a state directory made beforehand (a ledger in it, say).
    pub fn start_in(bin: &Path, root: &Path, args: &[&str], state: tempfile::TempDir) -> Running {
        let started = Instant::now();
        let mut child = Command::new(bin)
            .args(["watch", "--json"])
            .args(args)
            .arg(root)
            .env("FILEWATCH_STATE_DIR", state.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let (tx, asks) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        let ready_after = wait_for_line(&mut child, "filewatch-mcp: watching", started);
        Running { child, asks, ready_after, _state: state }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The MCP server (`filewatch-mcp --root ROOT`) in an initialized session, as Claude Code runs
/// it: stdin held open, stdout read, a state directory of its own. Killed when dropped.
pub struct Session {
    pub child: Child,
    /// Held open: the server ends when its stdin does.
    stdin: Option<ChildStdin>,
    /// What it writes to stdout, a line each (read as it comes, whether used or not).
    pub lines: Receiver<String>,
    /// From spawn to the `initialize` answer, which comes once every directory is watched.
    pub ready_after: Duration,
    _state: tempfile::TempDir,
}

impl Session {
    /// Starts the server and initializes a session.
    pub fn start(bin: &Path, root: &Path) -> Session {
        const INITIALIZE: &str = r#"{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}},"jsonrpc":"2.0","id":0}"#;
        const INITIALIZED: &str = r#"{"method":"notifications/initialized","jsonrpc":"2.0"}"#;
        let state = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let mut child = Command::new(bin)
            .arg("--root")
            .arg(root)
            .env("FILEWATCH_STATE_DIR", state.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{INITIALIZE}").unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut reply = String::new();
        out.read_line(&mut reply).unwrap();
        assert!(reply.contains("protocolVersion"), "{reply}");
        let ready_after = started.elapsed();
        writeln!(stdin, "{INITIALIZED}").unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Session { child, stdin: Some(stdin), lines, ready_after, _state: state }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the child's stderr until a line starts with `prefix` and returns the time since
/// `started`; the rest of stderr is drained on a thread so the child never blocks on it.
pub fn wait_for_line(child: &mut Child, prefix: &str, started: Instant) -> Duration {
    let stderr = BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut lines = stderr.lines();
    let ready_after = loop {
        match lines.next() {
            Some(Ok(line)) if line.starts_with(prefix) => break started.elapsed(),
            Some(Ok(_)) => {}
            _ => panic!("the process ended before saying {prefix:?}"),
        }
    };
    std::thread::spawn(move || for _ in lines {});
    ready_after
}

/// A `kB` field of `/proc/PID/status` (`VmRSS:`, `VmHWM:`), 0 when unreadable.
pub fn status_kb(pid: u32, key: &str) -> u64 {
    status_field(&format!("/proc/{pid}/status"), key)
}

fn status_field(file: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The ids of the process's threads.
fn tasks(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    dir.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned())).collect()
}

/// Voluntary context switches (wake-ups after waiting) of all the process's live threads.
pub fn voluntary_switches(pid: u32) -> u64 {
    tasks(pid)
        .iter()
        .map(|t| status_field(&format!("/proc/{pid}/task/{t}/status"), "voluntary_ctxt_switches:"))
        .sum()
}

/// CPU time the process has used: the nanosecond sum of its live threads' `schedstat`, or the
/// clock ticks of `/proc/PID/stat` (which also count threads that ended) when those are more.
pub fn cpu_time(pid: u32) -> Duration {
    let schedstat: u64 = tasks(pid)
        .iter()
        .filter_map(|t| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/task/{t}/schedstat")).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after `)`, in USER_HZ
    // (100 on Linux) ticks.
    let ticks = fields.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + fields.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_nanos(schedstat).max(Duration::from_millis(ticks * 10))
}

/// Waits until the process used no CPU for `quiet` (or `at_most` passed): it has settled.
pub fn settle(pid: u32, quiet: Duration, at_most: Duration) {
    let t0 = Instant::now();
    let mut last = cpu_time(pid);
    let mut still_since = Instant::now();
    while t0.elapsed() < at_most {
        std::thread::sleep(Duration::from_millis(100)); // polling another process's counters
        let now = cpu_time(pid);
        if now.saturating_sub(last) > Duration::from_micros(500) {
            still_since = Instant::now();
        } else if still_since.elapsed() >= quiet {
            return;
        }
        last = now;
    }
}

/// Reads every file under `root`, hidden and ignored ones too: `rg -uuu -c zzzz` when installed
/// (as a build or an editor's search would), else each file in turn. Returns what did the
/// reading.
pub fn read_every_file(root: &Path) -> &'static str {
    let rg = Command::new("rg")
        .args(["-uuu", "-c", "zzzz"])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if rg.is_ok() {
        return "`rg -uuu -c zzzz`";
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
    "a read of each file (no rg)"
}

/// The value at fraction `p` of `sorted` (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}
