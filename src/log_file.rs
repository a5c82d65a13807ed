//! The log a user can read. Claude Code keeps none of a server's stderr written after the
//! handshake, so the server also writes its log to a file: `--log-file PATH`, or by default
//! `<state dir>/logs/<key>.log` (`<key>` the root's, as its owner lock's), at `info` level.
//! Bounded: a write that would take it past [`MAX_BYTES`] first renames it to `<name>.1` (the
//! one before is dropped) and starts a new one — a regular file only (`/dev/null`, a FIFO stay). Each write is one whole event (the fmt layer
//! formats an event, then writes it once) appended to a local file under a mutex: a logging
//! thread never waits on anything slower than the page cache, and a failed write is dropped,
//! never said on stderr.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// The target of events meant for the log file alone: stderr's filter leaves them out.
pub const FILE_ONLY: &str = "filewatch_mcp::log_file";

/// A run's first line in its log file: what runs (`serve`, `watch`), on which root, which
/// version (the pid is on every line).
pub fn started(command: &str, root: &Path) {
    let version = env!("CARGO_PKG_VERSION");
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    tracing::info!(target: FILE_ONLY, "filewatch-mcp {version} {command} on {} started", root.display());
}

/// A log file is renamed to `<name>.1` once it would grow past this.
pub const MAX_BYTES: u64 = 1 << 20;

/// The directory of the default logs, under the state directory.
const DIR: &str = "logs";

/// An open log file, rotated at [`MAX_BYTES`]; a `MakeWriter` for tracing's fmt layer.
pub struct LogFile {
    path: PathBuf,
    /// Opened as a state file is (the default log): no symlink followed, no FIFO waited for.
    careful: bool,
    inner: Mutex<Inner>,
}

struct Inner {
    /// None once a rotation could not open a new file: the rest is dropped.
    file: Option<File>,
    written: u64,
    /// Only a regular file is rotated: a rename would move a device or FIFO the user named
    /// (`--log-file /dev/null`) away and leave a regular file in its place.
    rotates: bool,
}

impl LogFile {
    /// Opens (makes) the log at `path` for appending; `careful` for one in the state directory.
    /// Refused if it is this process's stdout, which carries the server's JSON-RPC (or
    /// `watch`'s asks).
    pub fn open(path: &Path, careful: bool) -> io::Result<LogFile> {
        let file = open(path, careful)?;
        if is_stdout(&file) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "that is stdout, which carries the output: give a file",
            ));
        }
        let (written, rotates) = match file.metadata() {
            Ok(meta) => (meta.len(), meta.is_file()),
            Err(_) => (0, false),
        };
        let inner = Mutex::new(Inner { file: Some(file), written, rotates });
        Ok(LogFile { path: path.to_path_buf(), careful, inner })
    }

    /// The server's log by default: `<state dir>/logs/<key>.log` for `root` (canonical) and
    /// `trigger`, its directory made (for this user alone) if missing.
    pub fn open_default(root: &Path, trigger: &str) -> io::Result<LogFile> {
        let path = default_path(root, trigger).ok_or_else(crate::state::no_state_dir)?;
        crate::state::make_private_dir(path.parent().unwrap_or(Path::new(".")))?;
        LogFile::open(&path, true)
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends one event, rotating first if it would take the file past [`MAX_BYTES`].
    fn append(&self, bytes: &[u8]) {
        let mut inner = self.lock();
        if inner.rotates && inner.written > 0 && inner.written + bytes.len() as u64 > MAX_BYTES {
            self.rotate(&mut inner);
        }
        let Some(file) = inner.file.as_mut() else { return };
        if file.write_all(bytes).is_ok() {
            inner.written += bytes.len() as u64;
        }
    }

    /// `<name>` → `<name>.1` (replacing the one before), and a new `<name>`.
    fn rotate(&self, inner: &mut Inner) {
        inner.file = None;
        let _ = std::fs::rename(&self.path, rotated(&self.path));
        inner.file = open(&self.path, self.careful).ok();
        inner.written = 0;
    }
}

/// The server's default log for `root` (canonical) and `trigger`, if there is a state
/// directory: `<state dir>/logs/<key>.log`.
pub fn default_path(root: &Path, trigger: &str) -> Option<PathBuf> {
    let dir = crate::state::state_dir()?;
    let key = crate::state::Place::new(&dir, root, trigger).key().to_string();
    Some(dir.join(DIR).join(format!("{key}.log")))
}

/// Where a log goes once it is full: `<name>.1`.
pub fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".1");
    PathBuf::from(name)
}

fn open(path: &Path, careful: bool) -> io::Result<File> {
    if careful {
        crate::sys::open_append(path)
    } else {
        OpenOptions::new().append(true).create(true).open(path)
    }
}

/// True if `file` is what this process's stdout is (the same file, pipe or terminal).
fn is_stdout(file: &File) -> bool {
    let Some(stdout) = crate::sys::stdout_file() else { return false };
    matches!((crate::sys::file_id(file), crate::sys::file_id(&stdout)), (Ok(a), Ok(b)) if a == b)
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = Appender<'a>;

    fn make_writer(&'a self) -> Appender<'a> {
        Appender(self)
    }
}

/// One event's writer: what it is given is appended whole.
pub struct Appender<'a>(&'a LogFile);

impl Write for Appender<'_> {
    /// Never fails: a log that cannot be written is not worth a message on stderr per event.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A log file's line: `2026-12-02T10:03:51.123456Z  INFO pid 1234: MESSAGE` — the pid tells the
/// processes on one root apart (an owner and a standby share the root's log).
pub struct FileLine;

impl<S, N> FormatEvent<S, N> for FileLine
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut writer)?;
        write!(writer, " {:>5} pid {}: ", event.metadata().level(), std::process::id())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the limit the file becomes `.1` (the one before dropped) and a new one starts;
    /// every event is whole in one of the two.
    #[test]
    fn a_full_log_is_rotated_and_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        std::fs::write(rotated(&path), "the oldest\n").unwrap();
        let log = LogFile::open(&path, true).unwrap();
        let line = format!("{}\n", "a".repeat(999));
        let lines = 3 * MAX_BYTES as usize / line.len();
        for _ in 0..lines {
            log.make_writer().write_all(line.as_bytes()).unwrap();
        }
        let now = std::fs::read_to_string(&path).unwrap();
        let before = std::fs::read_to_string(rotated(&path)).unwrap();
        for text in [&now, &before] {
            assert!(text.len() as u64 <= MAX_BYTES, "{}", text.len());
            assert!(text.lines().all(|l| l.len() == 999), "only whole events");
        }
        assert_eq!(before.len(), MAX_BYTES as usize / line.len() * line.len());
        assert!(!before.contains("the oldest"));
        let entries = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(entries, 2, "the log and one .1");
    }

    /// A log the user named that is no regular file (`--log-file /dev/null`, a FIFO that
    /// `tail` reads) is written to and never renamed: a rotation would move the device or FIFO
    /// away (as root, `/dev/null` itself) and leave a regular file in its place.
    #[cfg(unix)]
    #[test]
    fn a_log_that_is_no_regular_file_is_never_rotated() {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.log");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // A reader that drains the FIFO until its last writer is gone.
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let (mut file, mut buf, mut read) =
                    (File::open(fifo).unwrap(), vec![0; 1 << 16], 0);
                while let Ok(n @ 1..) = file.read(&mut buf) {
                    read += n;
                }
                read
            })
        };
        let log = LogFile::open(&fifo, false).unwrap();
        let line = format!("{}\n", "b".repeat(999));
        let lines = 2 * MAX_BYTES as usize / line.len();
        for _ in 0..lines {
            log.make_writer().write_all(line.as_bytes()).unwrap();
        }
        drop(log);
        assert_eq!(reader.join().unwrap(), lines * line.len(), "every event reached the reader");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "still the FIFO");
        assert!(!rotated(&fifo).exists(), "nothing renamed");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_or_fifo_for_the_default_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        assert!(LogFile::open(&link, true).is_err());
        assert!(LogFile::open(&link, false).is_ok(), "a path the user names is followed");
    }
}
