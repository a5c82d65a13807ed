//! Helpers for the unit tests: a write that is over when it returns, and git as a test user.
//!
//! A descriptor open for writing is copied into every child any thread forks (git, setfattr,
//! mount in other tests; `git cat-file` in the pipeline) and lives there until the child's
//! `exec` closes it (`O_CLOEXEC` acts at exec, not at fork). Until then the file is still open
//! for writing, and a stamp rightly finds it Busy: in the product, that last close is the
//! `IN_CLOSE_WRITE` that brings the stamp. Tests that call the pipeline directly, with no
//! watcher, wait for that close instead.

use std::path::Path;
use std::time::{Duration, Instant};

/// [`std::fs::write`], then [`wait_closed`]: the file is written *and* closed everywhere.
pub fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    std::fs::write(path.as_ref(), contents)?;
    wait_closed(path.as_ref());
    Ok(())
}

/// Waits until no process has `path` open for writing (at once where leases cannot tell).
/// Panics after 10 s: a test left a writer open.
pub fn wait_closed(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    assert!(
        crate::fsio::wait_closed(path, deadline),
        "{}: still open for writing after 10 s",
        path.display()
    );
}

/// Runs git in `root` as a test user; its output, trimmed.
pub fn git_in(root: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "advice.detachedHead=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
