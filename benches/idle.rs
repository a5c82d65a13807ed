//! What the watcher costs when nothing is saved (`cargo bench --bench idle`), on the synthetic
//! tree of 100k files in 10k directories (`common::synthetic_tree`), for `watch` and for the MCP
//! server (`--root TREE`, stdin held open, session initialized):
//!
//! 1. wake-ups while idle: voluntary context switches of all its threads over 30 s (each is a
//!    thread going back to sleep after waking);
//! 2. CPU it uses while another program reads every file of the tree (`rg -uuu` when
//!    installed, else a read of each file): reads must not wake it.
//!
//! `FILEWATCH_BIN=path` measures another build (an older one, for before/after);
//! `FILEWATCH_TREE=dir` measures an existing tree instead of generating one;
//! `FILEWATCH_IDLE_SECS=n` changes the idle time. `cargo bench --bench perf` measures the same
//! beside `inotifywait`, with the rest of issue 15's table.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Running, Session};

/// Wake-ups per second of `pid` over `idle`, with nothing happening.
pub fn idle_wakeups(pid: u32, idle: Duration) -> f64 {
    let before = common::voluntary_switches(pid);
    std::thread::sleep(idle); // measuring idle time is the point
    common::voluntary_switches(pid).saturating_sub(before) as f64 / idle.as_secs_f64()
}

/// CPU-seconds `pid` used while every file under `root` was read, and what read them. The
/// reading is followed by a short wait so that events queued by the end are handled too.
pub fn read_storm_cpu(pid: u32, root: &Path) -> (f64, &'static str) {
    let before = common::cpu_time(pid);
    let how = common::read_every_file(root);
    std::thread::sleep(Duration::from_millis(500));
    (common::cpu_time(pid).saturating_sub(before).as_secs_f64(), how)
}

/// Measures one running process: idle wake-ups, then CPU under a read storm.
pub fn measure(name: &str, pid: u32, ready_after: Duration, root: &Path, idle: Duration) {
    let rss = common::status_kb(pid, "VmHWM:") as f64 / 1024.0;
    // Let start-up settle (the tree walk's events, a blocking thread's exit) before idling.
    std::thread::sleep(Duration::from_secs(2));
    let per_s = idle_wakeups(pid, idle);
    let (cpu, how) = read_storm_cpu(pid, root);
    println!(
        "{name}: ready {:.0} ms, peak RSS {rss:.1} MiB; idle {} s: {per_s:.2} wake-ups/s; \
         {how} over the tree: {cpu:.2} CPU-s",
        ready_after.as_secs_f64() * 1000.0,
        idle.as_secs(),
    );
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
            common::synthetic_tree(&root, 100);
            root
        }
    };
    println!("{} on {}", bin.display(), root.display());
    let w = Running::start(&bin, &root);
    measure("watch", w.pid(), w.ready_after, &root, idle);
    drop(w);
    let s = Session::start(&bin, &root);
    measure("server", s.pid(), s.ready_after, &root, idle);
}
