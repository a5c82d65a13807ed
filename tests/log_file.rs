//! The log a user can read (issue 29, item 5): Claude Code keeps none of a server's stderr
//! written after the handshake, so the server writes its log to `<state dir>/logs/<key>.log` by
//! default, at `info` (stderr stays at `warn`), or to `--log-file PATH` (`serve` and `watch`);
//! never to stdout.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::mcp::{handshake, Server, DEADLINE};

/// The text of the `.log` files under `dir` (and `dir/logs`), once one holds `text`.
fn log_holding(dir: &Path, text: &str) -> (PathBuf, String) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        for d in [dir.to_path_buf(), dir.join("logs")] {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "log") {
                    let log = std::fs::read_to_string(&path).unwrap_or_default();
                    if log.contains(text) {
                        return (path, log);
                    }
                }
            }
        }
        assert!(Instant::now() < deadline, "no log under {} holds {text:?}", dir.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// By default the server logs at info to the state directory: its start, and each ask it
/// sends; nothing of it reaches stdout (every line there is JSON-RPC) or stderr.
#[test]
fn the_server_logs_to_the_state_directory_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut server = Server::start_with_args(&root, state.path(), Stdio::piped(), &[]);
    handshake(&mut server);
    std::fs::write(root.join("a.py"), "# @claude log me\n").unwrap();
    let note = server.note(|v| v["params"]["meta"]["file"] == "a.py");
    let id = note["params"]["meta"]["replyTo"].as_str().unwrap().to_string();
    let (path, log) = log_holding(state.path(), &id);
    assert_eq!(path.parent().unwrap(), state.path().join("logs"), "{}", path.display());
    assert!(path.file_name().unwrap().to_string_lossy().ends_with(".log"));
    let pid = server.child.id();
    assert!(log.contains(&format!(" INFO pid {pid}: ")), "{log}");
    assert!(log.contains(&root.display().to_string()), "the start names the root: {log}");
    assert!(!log.contains("DEBUG"), "info by default: {log}");
    drop(server.stdin.take());
    server.wait_exit();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut server.child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!stderr.contains(&id), "stderr stays at warn: {stderr}");
}

/// `--log-file PATH` for `serve` and `watch`; stdout is refused.
#[test]
fn log_file_names_where_it_goes_and_never_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let serve_log = logs.path().join("serve.log");
    let args = ["--log-file", serve_log.to_str().unwrap()];
    let mut server = Server::start_with_args(&root, state.path(), Stdio::inherit(), &args);
    handshake(&mut server);
    let (path, _) = log_holding(logs.path(), " serve on ");
    assert_eq!(path, serve_log);
    drop(server);

    let watch_log = logs.path().join("watch.log");
    let other = tempfile::tempdir().unwrap();
    let mut watch = Command::new(common::bin())
        .args(["watch", "--log-file", watch_log.to_str().unwrap()])
        .arg(other.path())
        .env("FILEWATCH_STATE_DIR", state.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (path, _) = log_holding(logs.path(), " watch on ");
    assert_eq!(path, watch_log);
    let _ = watch.kill();
    let _ = watch.wait();

    #[cfg(unix)]
    {
        let out = Command::new(common::bin())
            .args(["serve", "--root"])
            .arg(&root)
            .args(["--log-file", "/dev/stdout"])
            .env("FILEWATCH_STATE_DIR", state.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty(), "nothing on stdout: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--log-file /dev/stdout") && err.contains("stdout"), "{err}");
    }
}
