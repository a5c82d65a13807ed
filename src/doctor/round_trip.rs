//! The live round trip: this binary's `watch --json` on a scratch directory with a state
//! directory of its own, a scratch ask written there, its announcement read, and the ask
//! resolved (`filewatch-mcp resolve`) and gone. No Claude Code session can hear it: the
//! scratch directory is outside the project, its state directory (owner lock, ledger, hook
//! endpoints) is its own, and it lies inside a `node_modules/` that every watcher of this
//! program skips, in case another session watches a directory above it. It is made on the
//! root's file system where a writable place there is found (the same kind of events).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{run_for, shown, Line, Place};

/// How long each step may take: the watch's start, the announcement, the resolve.
const STEP: Duration = Duration::from_secs(10);

const LINK: &str = "round-trip";

/// The `round-trip` line.
pub(super) fn run(place: &Place) -> Line {
    let (base, same_fs) = scratch_base(place);
    let scratch = match tempfile::Builder::new().prefix("filewatch-doctor.").tempdir_in(&base) {
        Ok(dir) => dir,
        Err(e) => {
            let text = format!("cannot make a scratch directory in {}: {e}", shown(&base));
            return Line::warning(LINK, text, "set TMPDIR to a writable directory");
        }
    };
    let root = scratch.path().join("node_modules").join("probe");
    let state = scratch.path().join("state");
    let made = std::fs::create_dir_all(&root).and_then(|()| std::fs::create_dir_all(&state));
    if let Err(e) = made {
        return Line::warning(
            LINK,
            format!("{}: {e}", shown(&root)),
            "set TMPDIR to a writable directory",
        );
    }
    let root = root.canonicalize().unwrap_or(root);
    let where_ = format!(
        "in {} (its own state directory{})",
        shown(&root),
        if same_fs { ", the root's file system" } else { "; not the root's file system" }
    );
    match trip(place, &root, &state) {
        Ok((id, took)) => Line::ok(
            LINK,
            format!(
                "a scratch ask written, announced as {id} {} ms later, and removed (`resolve`), \
                 {where_}",
                took.as_millis()
            ),
        ),
        Err(why) => Line::missing(
            LINK,
            format!("{why}, {where_}"),
            "run `filewatch-mcp watch` in the project, save an `@claude` comment and read what \
             it says",
        ),
    }
}

/// Where the scratch directory goes: the first of the temporary directory, the root's parent,
/// the state directory and HOME that is writable on the root's file system; else the
/// temporary directory. True if on the root's file system.
fn scratch_base(place: &Place) -> (PathBuf, bool) {
    let device = |dir: &Path| {
        std::fs::File::open(dir).ok().and_then(|f| crate::sys::file_id(&f).ok()).map(|id| id.0)
    };
    let root_device = device(&place.root);
    let candidates = [
        Some(std::env::temp_dir()),
        place.root.parent().map(Path::to_path_buf),
        place.state_dir.clone(),
        place.home.clone(),
    ];
    for dir in candidates.into_iter().flatten() {
        let inside_root = dir.canonicalize().is_ok_and(|d| d.starts_with(&place.root));
        if root_device.is_some()
            && device(&dir) == root_device
            && !inside_root
            && crate::sys::writable(&dir)
        {
            return (dir, true);
        }
    }
    (std::env::temp_dir(), false)
}

/// A `watch` child, killed (and waited for) on drop.
struct Watching(Child);

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the trip: the id the ask was announced with, and how long that took after the write.
fn trip(place: &Place, root: &Path, state: &Path) -> Result<(String, Duration), String> {
    let mut watch = Command::new(&place.binary);
    watch
        .args([
            "watch",
            "--json",
            "--tag",
            "never",
            "--settle",
            "0",
            "--debounce",
            "50ms",
            "--root",
        ])
        .arg(root)
        .env("FILEWATCH_STATE_DIR", state)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Watching(
        watch
            .spawn()
            .map_err(|e| format!("cannot start `{} watch`: {e}", place.binary.display()))?,
    );
    let stdout = lines(child.0.stdout.take());
    let stderr = lines(child.0.stderr.take());
    // Ready once it says what it watches.
    let deadline = Instant::now() + STEP;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match stderr.recv_timeout(left) {
            Ok(line) if line.contains("watching") => break,
            Ok(_) => {}
            Err(_) => return Err("`watch` did not start within 10 s".to_string()),
        }
    }
    let nonce = format!("{:08x}", crate::id::uuid_random() as u32);
    let file = root.join("probe.py");
    let text = format!("# @claude doctor round trip {nonce}\n");
    let written = Instant::now();
    std::fs::write(&file, &text).map_err(|e| format!("cannot write {}: {e}", shown(&file)))?;
    let id = loop {
        let left = (written + STEP).saturating_duration_since(Instant::now());
        let line = stdout
            .recv_timeout(left)
            .map_err(|_| "the scratch ask was not announced within 10 s".to_string())?;
        let Ok(ask) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if ask["text"].as_str().is_some_and(|t| t.contains(&nonce)) {
            break ask["id"].as_str().unwrap_or_default().to_string();
        }
    };
    let took = written.elapsed();
    let mut resolve = Command::new(&place.binary);
    resolve.args(["resolve", &id]).arg(root).env("FILEWATCH_STATE_DIR", state);
    let out = run_for(&mut resolve, STEP).map_err(|why| format!("`resolve {id}`: {why}"))?;
    let left = std::fs::read_to_string(&file).unwrap_or_default();
    if !out.status.success() || left.contains(&nonce) {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "announced as {id}, but `resolve` left it ({}): {}",
            out.status,
            said.trim()
        ));
    }
    Ok((id, took))
}

/// The lines of a child's pipe, as they come.
fn lines(pipe: Option<impl std::io::Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(pipe) = pipe {
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}
