//! Issue 29's numbers with the real Claude Code, offline (`cargo bench --bench hearing`; needs
//! `FILEWATCH_CLAUDE_BIN` and tmux — `.ci/run` installs Claude Code under target/): the plugin
//! from this repository, default server flags, no channel flag, a scripted model
//! (tests/common/hearing.rs). The model's request log is what Claude heard, so each time below
//! ends when the request that carries the ask reached the scripted API.
//!
//! 1. save → heard in an idle session: N saves (`FILEWATCH_HEARING_SAVES`, default 20), one at
//!    a time, each once the session is idle again and its `Stop` hook waits; p50, p99, max;
//! 2. busy: asks saved while a tool runs (`Bash(sleep 2)`), and which request heard them (the
//!    one after that tool call: "at the next tool call");
//! 3. the waiting hook (`filewatch-mcp hook --wait`, Claude Code's asyncRewake `Stop` hook):
//!    wake-ups per second over 10 s and its resident memory;
//! 4. a `PostToolUse` hook run (it runs after every tool call): the hook binary started 200
//!    times as Claude Code starts it, with no ask pending; p50, p99, max of the whole run.

#[cfg(unix)]
mod common;
#[cfg(unix)]
#[path = "../tests/common/mod.rs"]
mod session;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it with no flag: skip then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    #[cfg(unix)]
    bench::run();
    #[cfg(not(unix))]
    eprintln!("hearing: Unix only (tmux, shell-script wrappers)");
}

#[cfg(unix)]
mod bench {
    use std::io::Write;
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::json;

    use crate::common::{percentile, settle, status_kb, voluntary_switches};
    use crate::session::claude::{self, ScriptedApi};
    use crate::session::hearing::{heard, model, news, tool_calls_before, Setup, BUSY, DEADLINE};

    pub fn run() {
        let Some(bin) = claude::bin() else { return };
        let saves: usize = std::env::var("FILEWATCH_HEARING_SAVES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(20);
        let version = Command::new(&bin).arg("--version").output().unwrap();
        println!("Claude Code {}", String::from_utf8_lossy(&version.stdout).trim());
        let api = ScriptedApi::start();
        api.respond_with(model);
        let setup = Setup::new(&bin, &api);
        let mut session = setup.start("bench", true);
        let claude_pid = session.pid();

        // 1. Idle: one save at a time, each once the session's Stop hook (or, for the first,
        // its SessionStart hook) waits again.
        let (mut idle, mut printed) = (Vec::new(), Vec::new());
        for i in 0..saves {
            let hook = waiting_hook(claude_pid);
            let file = format!("idle{i:02}.py");
            setup
                .save(&file, &format!("def f{i}():\n    # @claude idle ask {i}\n    return {i}\n"));
            let saved = Instant::now();
            // The hook's part: until it has printed the ask and exited (that wakes Claude).
            if let Some(hook) = hook {
                wait_until("the waiting hook's exit", || {
                    !Path::new(&format!("/proc/{hook}")).exists()
                });
                printed.push(saved.elapsed().as_secs_f64() * 1000.0);
            }
            let (request, _) = heard(&api, &file);
            idle.push(request.at.duration_since(saved).as_secs_f64() * 1000.0);
            // The woken turn ends (the model says `ok`) and the Stop hook starts again.
            wait_until(&format!("the hook after ask {i}"), || {
                waiting_hook(claude_pid).is_some_and(|h| Some(h) != hook)
            });
        }
        idle.sort_by(f64::total_cmp);
        printed.sort_by(f64::total_cmp);
        println!(
            "save → heard, idle, {saves} saves: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            percentile(&idle, 0.5),
            percentile(&idle, 0.99),
            idle.last().unwrap()
        );
        println!(
            "  of which save → the waiting hook printed it and exited: p50 {:.0} ms, p99 {:.0} ms",
            percentile(&printed, 0.5),
            percentile(&printed, 0.99),
        );

        // 3. The waiting hook, while nothing happens.
        let hook = waiting_hook(claude_pid).unwrap();
        settle(hook, Duration::from_secs(1), Duration::from_secs(10));
        let before = voluntary_switches(hook);
        std::thread::sleep(Duration::from_secs(10)); // measuring idle time is the point
        let wakeups = voluntary_switches(hook).saturating_sub(before) as f64 / 10.0;
        let rollup = |key: &str| smaps_kb(hook, key) as f64 / 1024.0;
        println!(
            "the waiting hook (pid {hook}): {wakeups:.2} wake-ups/s over 10 s, RSS {:.1} MiB \
             (anonymous {:.1} MiB, pages of files {:.1} MiB: the binary, shared with the server; \
             PSS {:.1} MiB)",
            status_kb(hook, "VmRSS:") as f64 / 1024.0,
            status_kb(hook, "RssAnon:") as f64 / 1024.0,
            status_kb(hook, "RssFile:") as f64 / 1024.0,
            rollup("Pss:"),
        );

        // 2. Busy: an ask saved while the first and while the second of three sleeps runs.
        let mut next_call = 0;
        let rounds = 3;
        for round in 0..rounds {
            let from = api.requests().len();
            session.prompt(BUSY);
            for call in 0..2 {
                after_call(&api, from, call);
                let file = format!("busy{round}{call}.py");
                setup.save(&file, &format!("# @claude busy ask {round} {call}\ny = 1\n"));
                let (request, _) = heard(&api, &file);
                if tool_calls_before(&request) == call + 1 {
                    next_call += 1;
                }
            }
            after_call(&api, from, 3);
            wait_until("a waiting hook after the busy turn", || waiting_hook(claude_pid).is_some());
            std::thread::sleep(Duration::from_secs(1)); // the turn's end on screen
        }
        println!("busy: {next_call} of {} asks heard at the next tool call", rounds * 2);

        // 4. The PostToolUse hook as Claude Code runs it, with no ask pending.
        let server = crate::session::bin();
        let mut runs = Vec::new();
        for _ in 0..200 {
            runs.push(post_tool_use(&server, setup.project(), claude_pid));
        }
        runs.sort_by(f64::total_cmp);
        println!(
            "PostToolUse hook run, 200 runs: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            percentile(&runs, 0.5),
            percentile(&runs, 0.99),
            runs.last().unwrap()
        );
        session.exit();
    }

    /// A field of `/proc/PID/smaps_rollup`, in KiB (0 if unreadable).
    fn smaps_kb(pid: u32, key: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        let line = text.lines().find(|l| l.starts_with(key)).unwrap_or_default();
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    /// Waits for the request of the busy turn started at request `from` that follows its
    /// `n`th tool call (0: the prompt's own), so that the next tool call runs.
    fn after_call(api: &ScriptedApi, from: usize, n: u32) {
        api.wait_for(&format!("the request after tool call {n}"), DEADLINE, |requests| {
            let mut turns = requests.get(from..)?.iter().filter(|r| r.is_turn());
            if n == 0 {
                return turns.next().cloned();
            }
            turns.find(|r| news(r).contains("tool_result") && tool_calls_before(r) == n).cloned()
        });
    }

    /// The pid of the `filewatch-mcp hook --wait` process that runs under Claude Code's
    /// process `claude`, if one runs.
    fn waiting_hook(claude: u32) -> Option<u32> {
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let waits = args.contains(&&b"hook"[..]) && args.contains(&&b"--wait"[..]);
            (waits && descends_from(pid, claude)).then_some(pid)
        })
    }

    /// True if `ancestor` is among `pid`'s parents.
    fn descends_from(mut pid: u32, ancestor: u32) -> bool {
        while pid > 1 {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let after = &stat[stat.rfind(')').unwrap_or(0) + 2..];
            pid = after.split(' ').nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
            if pid == ancestor {
                return true;
            }
        }
        false
    }

    /// One `PostToolUse` hook run (`filewatch-mcp hook`, its input on stdin, `CLAUDE_PID` and
    /// `CLAUDE_PROJECT_DIR` set as Claude Code sets them), start to exit, in milliseconds.
    fn post_tool_use(server: &std::ffi::OsStr, project: &Path, claude_pid: u32) -> f64 {
        let input = json!({
            "session_id": "bench-session",
            "transcript_path": project.join("no-transcript.jsonl"),
            "cwd": project,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "true"},
            "tool_response": {"stdout": "", "stderr": ""},
        });
        let started = Instant::now();
        let mut child = Command::new(server)
            .arg("hook")
            .env("CLAUDE_PID", claude_pid.to_string())
            .env("CLAUDE_PROJECT_DIR", project)
            .current_dir(project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let took = started.elapsed().as_secs_f64() * 1000.0;
        assert!(out.status.success(), "the hook failed: {out:?}");
        assert!(out.stdout.is_empty(), "no ask is pending, yet: {out:?}");
        took
    }

    /// Polls `done` until it holds; panics after [`DEADLINE`].
    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let end = Instant::now() + DEADLINE;
        while !done() {
            assert!(Instant::now() < end, "waited {DEADLINE:?} for {what}");
            std::thread::sleep(Duration::from_millis(2)); // polling /proc
        }
    }
}
