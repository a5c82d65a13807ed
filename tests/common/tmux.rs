//! Editors in a terminal, driven as a person drives them: an editor in its own tmux server,
//! keys sent with `send-keys`, the screen read with `capture-pane`; the questions editors ask
//! when a file changed on disk under their buffer are answered (and recorded) on the way.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

/// Questions editors ask when the file changed on disk, and the answer that keeps our buffer.
pub const QUESTIONS: &[(&str, &str)] = &[
    ("Do you really want to write to it (y/n)?", "y"), // vim, nvim at :w
    ("changed on disk; really edit the buffer?", "y"), // emacs, on the first keystroke
    ("Save anyway? (yes or no)", "yes\n"),             // emacs, at save
];

/// True if `cmd` is on `PATH`.
pub fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// An editor in its own tmux server, sized like a terminal.
pub struct Tmux {
    socket: String,
    /// Every question the editor asked, in order.
    pub asked: Vec<String>,
}

impl Tmux {
    pub fn start(name: &str, editor: &[&str], dir: &Path) -> Tmux {
        let socket = format!("fw-{name}-{}", std::process::id());
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "30"])
            .arg("-c")
            .arg(dir)
            .args(editor)
            .env("TERM", "xterm-256color")
            .status()
            .unwrap();
        assert!(status.success(), "tmux");
        Tmux { socket, asked: Vec::new() }
    }

    pub fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Literal text, not key names.
    pub fn type_text(&self, text: &str) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The process the pane runs.
    pub fn pane_pid(&self) -> u32 {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "list-panes", "-F", "#{pane_pid}"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim().parse().unwrap_or_else(|_| panic!("tmux list-panes: {text:?}"))
    }

    pub fn screen(&self) -> String {
        let out =
            Command::new("tmux").args(["-L", &self.socket, "capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `done(screen)` holds, answering (and recording) any changed-on-disk question
    /// on the way; returns the last screen.
    pub fn until(&mut self, what: &str, mut done: impl FnMut(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let screen = self.screen();
            if let Some((q, answer)) = QUESTIONS.iter().find(|(q, _)| screen.contains(q)) {
                self.asked.push(q.to_string());
                self.type_text(answer.trim_end_matches('\n'));
                if answer.ends_with('\n') {
                    self.keys(&["Enter"]);
                }
                // The question must go before we look again.
                while self.screen().contains(q) {
                    assert!(Instant::now() < deadline, "{q:?} stays on the screen");
                    std::thread::sleep(Duration::from_millis(20)); // polling the screen
                }
                continue;
            }
            if done(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "waited for {what}; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(20)); // polling the screen
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .stderr(std::process::Stdio::null())
            .status();
    }
}
