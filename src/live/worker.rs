//! The one live worker, for `watch` and the server: [`Live`] watches the root and runs a
//! [`LivePipeline`] on a thread of its own, handing each round of asks to a [`Sink`] (the
//! terminal, or the MCP server's announcer) and telling the pipeline which reached the client.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::asks::{Asks, TagMode};
use crate::autosave::ModeSwitch;
use crate::error::StartError;
use crate::id::MarkerId;
use crate::languages::LanguageTable;
use crate::scan::Scanner;
use crate::walk;
use crate::watch::{Change, Watch, WatchStats};

use super::{Ask, LivePipeline};

/// How many asks of one file are handed on before the next are claimed: a file with thousands
/// of markers goes out in rounds, in file order, each only once the one before reached the
/// client.
const ROUND: usize = 64;

/// How a live run is set up.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The directory to watch.
    pub root: PathBuf,
    /// Quiet time after a file's last event before it is read.
    pub debounce: Duration,
    /// How long a file must be quiet before a tag is written into it; and, on a root whose
    /// editor saves while its user types, the least time an ask's text must stay unchanged
    /// before it is announced. Zero: tags at once, and every save is a deliberate one.
    pub settle: Duration,
    /// The latest a heard ask's tag is written after its file's last save, when no save
    /// elsewhere in the file made a safe moment for it first.
    pub tag_after: Duration,
    /// The word that starts an ask.
    pub trigger: String,
    /// Where an ask's id goes: into the file, or only into the ledger.
    pub tag: TagMode,
}

/// What became of an ask handed to a [`Sink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// It reached the client (written and flushed to it).
    Delivered,
    /// It did not, and nothing more will: the client is gone.
    Closed,
}

/// Where the live worker's asks go: the terminal, or the MCP server's announcer.
pub trait Sink: Send + 'static {
    /// Hands one ask on, in order, and returns once it reached the client — or could not: an
    /// ask is tagged only once it was heard, so a tag on disk is an ask someone heard.
    fn deliver(&mut self, ask: Ask) -> Delivery;

    /// True if an ask delivered here is heard by being delivered (a terminal someone reads);
    /// false if hearing is told later, through [`Live::serve`]'s heard channel (Claude Code).
    fn hears(&self) -> bool {
        true
    }

    /// Hands a round of asks on, in order, and returns how many of them, from the first,
    /// reached the client (the rest did not, and nothing more will). One at a time unless a
    /// sink can keep several on their way at once.
    fn deliver_round(&mut self, asks: &[Ask]) -> usize {
        asks.iter().take_while(|a| self.deliver((*a).clone()) == Delivery::Delivered).count()
    }

    /// The root switched between deliberate saves and autosave (said in the log already): a
    /// front end that has more to tell its user about it does so here.
    fn switched(&mut self, _switch: &ModeSwitch) {}
}

/// A closure is a sink that has delivered the ask when it returns [`ControlFlow::Continue`]
/// (the terminal: the write is done).
impl<F: FnMut(Ask) -> ControlFlow<()> + Send + 'static> Sink for F {
    fn deliver(&mut self, ask: Ask) -> Delivery {
        match self(ask) {
            ControlFlow::Continue(()) => Delivery::Delivered,
            ControlFlow::Break(()) => Delivery::Closed,
        }
    }
}

/// How long [`Live::stop`] waits for the worker to finish the file at hand. A stamp takes
/// milliseconds; a worker still busy after this is blocked on a sink nobody reads, and is left.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// A running watch and the worker that turns its changes into asks, handing them to the
/// [`Sink`] given to [`Live::start`]; when the sink stops listening, the worker ends.
pub struct Live {
    asks: Asks,
    watch: Option<Watch>,
    worker: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    finished: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Closed (sender dropped) when the worker ends.
    ended: Receiver<()>,
}

impl Live {
    /// Watches the root and starts the worker; returns once every directory is watched.
    pub fn start(options: &LiveOptions, sink: impl Sink) -> Result<Live, StartError> {
        Live::launch(options, None, None, None, sink)
    }

    /// [`Live::start`] for the server: `asks` is the record the server's tools and hub share,
    /// `since` (if any) when the root was last watched — the files modified since are looked
    /// at first, so an ask saved while no session ran (or the owner was gone) is heard now —
    /// and `heard` brings the ids of asks Claude heard (only those are tagged).
    pub fn serve(
        options: &LiveOptions,
        asks: Asks,
        since: Option<SystemTime>,
        heard: Receiver<Vec<MarkerId>>,
        sink: impl Sink,
    ) -> Result<Live, StartError> {
        Live::launch(options, Some(asks), since, Some(heard), sink)
    }

    /// [`Live::start`] for a process taking the root over from its previous owner (see
    /// [`crate::owner`]): the files modified since `since` are looked at first, as after lost
    /// events, so that a save the owner never handled is handled now; what it stamped is
    /// tagged and stays quiet. `asks`, if given, is the record to share (the server's tools
    /// already use it).
    pub fn take_over(
        options: &LiveOptions,
        asks: Option<Asks>,
        since: SystemTime,
        sink: impl Sink,
    ) -> Result<Live, StartError> {
        Live::launch(options, asks, Some(since), None, sink)
    }

    fn launch(
        options: &LiveOptions,
        asks: Option<Asks>,
        since: Option<SystemTime>,
        heard: Option<Receiver<Vec<MarkerId>>>,
        sink: impl Sink,
    ) -> Result<Live, StartError> {
        let scanner = Scanner::new(LanguageTable::builtin(), &options.trigger)?;
        // A file's first event starts compiling its language's symbol query, which is then
        // ready when the debounce ends, instead of holding up the file's first save.
        let heads_up =
            |path: &Path| crate::scan::warm_symbol_query_for(LanguageTable::builtin(), path);
        let (watch, changes) =
            Watch::start_with_heads_up(&options.root, options.debounce, since, Box::new(heads_up))?;
        let root = watch.root().to_path_buf();
        // The previous owner may have been killed in the middle of a stamp.
        walk::remove_leftovers_in_background(&root);
        let asks = match asks {
            Some(asks) => asks,
            None => Asks::for_mode(options.tag, &root, &options.trigger)?,
        };
        let mut live = LivePipeline::with_asks(root, scanner, options.tag, asks.clone())
            .settling(options.settle, crate::state::state_dir().as_deref())
            .tagging_after(options.tag_after)
            .reading_vscode_settings();
        let stop = Arc::new(AtomicBool::new(false));
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let (end, ended) = std::sync::mpsc::channel::<()>();
        let (wake, inputs) = merge(changes, heard)?;
        live.wake_when_ready(move |path: &Path| {
            let _ = wake.send(Input::Unpark(path.to_path_buf()));
        });
        let worker = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("pipeline".into())
                .spawn(move || {
                    run_live(&mut live, &inputs, &stop, sink);
                    drop((done, end)); // tells `finished` and `stop`
                })
                .map_err(StartError::Thread)?
        };
        let finished = Some(finished);
        Ok(Live { asks, watch: Some(watch), worker: Some(worker), stop, finished, ended })
    }

    /// The asks this run records (shared with the worker).
    pub fn asks(&self) -> &Asks {
        &self.asks
    }

    /// The watched root, canonical.
    pub fn root(&self) -> &Path {
        self.watch.as_ref().map_or(Path::new(""), Watch::root)
    }

    /// What could be watched at start-up.
    pub fn stats(&self) -> WatchStats {
        self.watch.as_ref().map(|w| w.stats().clone()).unwrap_or_default()
    }

    /// Resolves when the worker has ended on its own (its sink stopped listening).
    pub async fn finished(&mut self) {
        if let Some(finished) = self.finished.as_mut() {
            let _ = finished.await;
        }
    }

    /// Stops watching, lets the worker finish the file at hand and write the tags it owes (a
    /// stamp is never left half-done, so no temp file stays behind) and waits for it — at most
    /// [`STOP_GRACE`]: a worker blocked on a sink nobody reads (a client that stopped reading)
    /// is left behind.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(watch) = self.watch.take() {
            watch.stop(); // ends the stream of changes: the worker's wait returns
        }
        if let Some(worker) = self.worker.take() {
            match self.ended.recv_timeout(STOP_GRACE) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    tracing::debug!("the pipeline is blocked on its output; not waiting for it");
                }
                _ => {
                    let _ = worker.join();
                }
            }
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The worker's loop: each change as it comes, and what falls due (a draft whose text settled,
/// a tag whose file is quiet, the next round of a file with many asks) when it does — no
/// polling, no timer while nothing is owed — until the changes end, `stop` is set, or the sink
/// breaks. The tags still owed then are written: their asks were delivered.
fn run_live(
    live: &mut LivePipeline,
    inputs: &Receiver<Input>,
    stop: &AtomicBool,
    mut sink: impl Sink,
) {
    loop {
        // A file with more asks than one round waits in the backlog, and its next round goes
        // out only when no input is waiting: a file of thousands of asks holds no other back.
        let wake = if live.has_backlog() { Some(Instant::now()) } else { live.next_due() };
        let input = match wake {
            None => inputs.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(at) => inputs.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let asks = match input {
            Ok(Input::Change(change)) => {
                tracing::debug!("changed: {}", change.path.display());
                live.process_change(&change, ROUND)
            }
            Ok(Input::Heard(ids)) => {
                live.heard(&ids);
                Vec::new()
            }
            Ok(Input::Unpark(path)) => live.unpark(&path, ROUND),
            Err(RecvTimeoutError::Timeout) => {
                let asks = live.run_due(Instant::now(), ROUND);
                if asks.is_empty() {
                    live.backlog(ROUND).unwrap_or_default()
                } else {
                    asks
                }
            }
            Ok(Input::End) | Err(RecvTimeoutError::Disconnected) => break,
        };
        for switch in live.switches() {
            sink.switched(&switch);
        }
        if hand_on(live, &mut sink, asks).is_break() {
            return;
        }
    }
    live.write_all_tags();
}

/// What wakes the worker: a change from the watch, word that asks were heard, or that the
/// search of a file's history or the scan of a big file is done.
enum Input {
    Change(Change),
    Heard(Vec<MarkerId>),
    Unpark(PathBuf),
    /// The watch has ended.
    End,
}

/// The watch's changes and the heard ids, as one stream for the worker (a thread each,
/// blocked on its own channel: nothing polls); and a sender into it, for the rest.
fn merge(
    changes: Receiver<Change>,
    heard: Option<Receiver<Vec<MarkerId>>>,
) -> Result<(Sender<Input>, Receiver<Input>), StartError> {
    let (tx, inputs) = std::sync::mpsc::channel();
    let more = tx.clone();
    let forward = |name: &str, job: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new().name(name.into()).spawn(job).map_err(StartError::Thread)
    };
    if let Some(heard) = heard {
        let tx = tx.clone();
        forward(
            "heard",
            Box::new(move || {
                for ids in heard {
                    if tx.send(Input::Heard(ids)).is_err() {
                        break;
                    }
                }
            }),
        )?;
    }
    forward(
        "changes",
        Box::new(move || {
            for change in changes {
                if tx.send(Input::Change(change)).is_err() {
                    return;
                }
            }
            let _ = tx.send(Input::End);
        }),
    )?;
    Ok((more, inputs))
}

/// Delivers `asks` in order and tells the pipeline which got through;
/// [`ControlFlow::Break`] once the client is gone.
fn hand_on(live: &mut LivePipeline, sink: &mut impl Sink, asks: Vec<Ask>) -> ControlFlow<()> {
    for ask in &asks {
        tracing::debug!("ask {}:{} {}", ask.file, ask.marker.line, ask.label());
    }
    let reached = if sink.hears() {
        // Marked sent just before each is shown, not after: a kill in between would have the
        // next owner say it again.
        let mut reached = 0;
        for ask in &asks {
            live.sending(std::slice::from_ref(ask));
            if sink.deliver_round(std::slice::from_ref(ask)) == 0 {
                break;
            }
            reached += 1;
        }
        reached
    } else {
        sink.deliver_round(&asks)
    };
    live.delivered(&asks[..reached], sink.hears());
    live.undelivered(&asks[reached..]);
    if reached < asks.len() {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::git_in as git;
    use std::sync::mpsc;

    /// Taking a root over looks at the files modified since the standby began: an untagged
    /// marker saved then fires (once); one the old owner tagged, those git brought (in `HEAD`,
    /// or from another branch: the old owner saw git's lock, the new one did not) and one in a
    /// file untouched since before stay quiet.
    #[test]
    fn a_takeover_fires_only_the_saves_the_owner_missed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        git(&root, &["init", "-q"]);
        let old = root.join("old.py");
        crate::test_support::write(&old, "# @claude dormant, untouched since before\n").unwrap();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&old).unwrap().set_modified(hour_ago).unwrap();
        crate::test_support::write(root.join("committed.py"), "# @claude from a commit\n").unwrap();
        git(&root, &["add", "committed.py"]);
        git(&root, &["commit", "-qm", "x"]);
        // A marker on another branch, which a checkout of that file brings while nobody
        // watches the git lock: git's too, though not in HEAD.
        git(&root, &["checkout", "-qb", "other"]);
        crate::test_support::write(root.join("branch.py"), "# @claude from another branch\n")
            .unwrap();
        git(&root, &["add", "branch.py"]);
        git(&root, &["commit", "-qm", "y"]);
        git(&root, &["checkout", "-q", "-"]);
        let since = SystemTime::now() - Duration::from_secs(1);
        git(&root, &["checkout", "other", "--", "branch.py"]);
        // Saved while the old owner ran (it tagged the first), or after it died.
        crate::test_support::write(
            root.join("tagged.py"),
            "# @claude[fw-0000abcd] handled by the owner\n",
        )
        .unwrap();
        crate::test_support::write(root.join("missed.py"), "# @claude saved as the owner died\n")
            .unwrap();
        crate::test_support::write(root.join("committed.py"), "# @claude from a commit\nx = 1\n")
            .unwrap();

        let options = quick_options(&root);
        let (tx, rx) = mpsc::channel();
        let asks = Some(Asks::in_memory());
        let live = Live::take_over(&options, asks, since, move |ask: Ask| {
            let _ = tx.send(ask.file);
            ControlFlow::Continue(())
        })
        .unwrap();
        // Changes come in the order files fell quiet, but a file whose history git is asked
        // about (missed.py: in no version at a ref) waits for the answer without holding up
        // the rest. The second sentinel comes after everything the takeover listed.
        crate::test_support::write(root.join("sentinel.py"), "# @claude sentinel\n").unwrap();
        let mut files = Vec::new();
        let next = || rx.recv_timeout(Duration::from_secs(20)).expect("the sentinels' asks");
        while !(files.contains(&"sentinel.py".to_string()) && files.contains(&"missed.py".into())) {
            files.push(next());
        }
        crate::test_support::write(root.join("sentinel2.py"), "# @claude sentinel\n").unwrap();
        while files.last().map(String::as_str) != Some("sentinel2.py") {
            files.push(next());
        }
        live.stop();
        files.sort();
        assert_eq!(files, ["missed.py", "sentinel.py", "sentinel2.py"]);
    }

    /// A live stage on `root` that reads a change 20 ms after it and tags at once.
    fn quick_options(root: &Path) -> LiveOptions {
        LiveOptions {
            root: root.to_path_buf(),
            debounce: Duration::from_millis(20),
            settle: Duration::ZERO,
            tag_after: Duration::ZERO,
            trigger: crate::scan::DEFAULT_TRIGGER.to_string(),
            tag: TagMode::File,
        }
    }

    /// `n` lines of distinct asks, `#@claude xyz`, as short as an ask can be: 80,000 of them
    /// fit under the 1 MiB file limit (100,000 cannot: an ask line takes at least 11 bytes).
    fn many_asks(n: usize) -> String {
        const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let code = |mut i: usize| {
            let mut s = String::new();
            for _ in 0..3 {
                s.push(DIGITS[i % DIGITS.len()] as char);
                i /= DIGITS.len();
            }
            s
        };
        (0..n).map(|i| format!("#@claude {}\n", code(i))).collect()
    }

    /// Issue 30 (10): a file of tens of thousands of consecutive asks holds no other file
    /// back: a one-ask file saved right after it is announced before the big file's first ask —
    /// the big file is parsed and scanned beside the worker, not on it — and not after the last
    /// of them (nor never).
    #[test]
    fn a_file_of_many_asks_holds_no_other_file_back() {
        const N: usize = 80_000;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let big = many_asks(N);
        assert!(big.len() as u64 <= crate::fsio::MAX_FILE_SIZE, "{}", big.len());
        let options = quick_options(&root);
        let (tx, rx) = mpsc::channel();
        let live = Live::start(&options, move |ask: Ask| {
            let _ = tx.send(ask.file);
            ControlFlow::Continue(())
        })
        .unwrap();
        crate::test_support::write(root.join("big.py"), &big).unwrap();
        // Falls quiet after big.py: it is handled after it, as changes come in that order.
        crate::test_support::write(root.join("small.py"), "# @claude the one ask\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut big_asks = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(file) if file == "small.py" => break,
                Ok(_) => big_asks += 1,
                Err(_) => panic!("no ask of small.py in 120 s; big.py's so far: {big_asks}"),
            }
        }
        assert_eq!(
            big_asks, 0,
            "small.py's ask waited for big.py's look: {big_asks} of its asks went out first"
        );
        // And big.py, scanned beside the worker, is looked at when its markers are in.
        let left = deadline.saturating_duration_since(Instant::now());
        assert_eq!(rx.recv_timeout(left).ok().as_deref(), Some("big.py"), "big.py never came");
        live.stop();
    }

    /// A repository whose `name` has `versions` committed versions of 17,920 bytes each (one line
    /// differs from one to the next), made with `git fast-import`; `HEAD` is the last, checked
    /// out. Returns its bytes.
    fn long_history(root: &Path, name: &str, versions: usize) -> Vec<u8> {
        use std::io::Write;
        git(root, &["init", "-q"]);
        let line = |tag: char, i: usize| {
            format!("{tag}{i:07} = {i:07}  # a line of a file that is seventeen KB, padded\n")
        };
        let mut text: Vec<u8> = (0..280).flat_map(|i| line('x', i).into_bytes()).collect();
        let width = line('x', 0).len();
        let mut import = std::process::Command::new("git")
            .args(["-C", root.to_str().unwrap(), "fast-import", "--quiet"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stream = std::io::BufWriter::new(import.stdin.take().unwrap());
        for v in 0..versions {
            let at = (v % 280) * width;
            text[at..at + width].copy_from_slice(line('v', v).as_bytes());
            let time = 1_700_000_000 + v;
            write!(stream, "commit refs/heads/main\ncommitter t <t@t> {time} +0000\ndata 1\nv\n")
                .unwrap();
            write!(stream, "M 100644 inline {name}\ndata {}\n", text.len()).unwrap();
            stream.write_all(&text).unwrap();
            stream.write_all(b"\n").unwrap();
        }
        drop(stream);
        assert!(import.wait().unwrap().success(), "git fast-import failed");
        git(root, &["symbolic-ref", "HEAD", "refs/heads/main"]);
        git(root, &["reset", "-q", "--hard"]);
        text
    }

    /// Issue 30 (14): a file with 20,000 committed versions of 17 KB — more than the 256 MiB of
    /// its history that is searched. Saved with a new ask while a `git status` holds git's index
    /// lock, it is announced (git wrote nothing to it: it is no version git holds), and the
    /// search holds up no other file: one saved meanwhile is announced first. After a takeover
    /// (the file modified while no process watched git's lock), the same.
    #[test]
    fn a_long_history_in_git_takes_no_fresh_ask_for_gits() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let committed = long_history(&root, "hist.py", 20_000);
        let hist = root.join("hist.py");
        let options = quick_options(&root);
        let sink = |tx: mpsc::Sender<(String, String)>| {
            move |ask: Ask| {
                let _ = tx.send((ask.file, ask.marker.text));
                ControlFlow::Continue(())
            }
        };
        let until = |rx: &mpsc::Receiver<(String, String)>, text: &str| {
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut files = Vec::new();
            while files.last() != Some(&"hist.py".to_string()) {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok((file, said)) if file != "hist.py" || said.ends_with(text) => {
                        files.push(file)
                    }
                    Ok(_) => {}
                    Err(_) => panic!("no ask {text:?} of hist.py in 120 s; asks so far: {files:?}"),
                }
            }
            files
        };
        let (tx, rx) = mpsc::channel();
        let live = Live::start(&options, sink(tx)).unwrap();
        let lock = root.join(".git/index.lock");
        std::fs::write(&lock, "").unwrap();
        let mut saved = committed.clone();
        saved.extend_from_slice(b"# @claude a fresh ask\n");
        crate::test_support::write(&hist, &saved).unwrap();
        crate::test_support::write(root.join("other.py"), "# @claude the other file\n").unwrap();
        std::thread::sleep(Duration::from_millis(300)); // the `git status` the user saved under
        std::fs::remove_file(&lock).unwrap();
        let files = until(&rx, "a fresh ask");
        live.stop();
        assert_eq!(files, ["other.py", "hist.py"], "the other file waited for the search");

        let since = SystemTime::now() - Duration::from_secs(1);
        let mut saved = std::fs::read(&hist).unwrap();
        saved.extend_from_slice(b"# @claude saved as the owner died\n");
        crate::test_support::write(&hist, &saved).unwrap();
        let (tx, rx) = mpsc::channel();
        let live = Live::take_over(&options, None, since, sink(tx)).unwrap();
        until(&rx, "saved as the owner died");
        live.stop();
    }
}
