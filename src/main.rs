//! The `filewatch-mcp` command line: the MCP server (`serve`, the default), `watch`, `scan`,
//! `stamp`, `resolve` and `languages`.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use filewatch_mcp::languages::FileType;
use filewatch_mcp::owner::{self, Claim};
mod cli;

use cli::{AutosaveAction, Cli, Command, HooksAction, LiveArgs, LogLevel};
use filewatch_mcp::{
    Asks, EditError, FallbackReason, LanguageTable, Live, Marker, MarkerId, Scanner, TagMode,
    WRITE_ATTEMPTS,
};

fn main() -> ExitCode {
    let cli = parse_cli();
    let command = cli.command.unwrap_or(Command::Serve(cli.serve));
    let default_level = match command {
        Command::Watch { .. } => LogLevel::Info,
        // Claude Code shows a hook's stderr (and a waiting hook's is the ask): nothing else.
        Command::Hook { .. } => LogLevel::Off,
        _ => LogLevel::Warn,
    };
    let log_file = match log_file(&command) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("filewatch-mcp: {}", error_chain(&e));
            return ExitCode::from(2);
        }
    };
    init_logging(cli.log_level, default_level, log_file);
    let result = match command {
        Command::Serve(args) => serve(args),
        Command::Scan { json, verbose, trigger, paths } => scan(json, verbose, &trigger, &paths),
        Command::Watch { dir, live, json } => watch(dir.as_deref(), &live, json),
        Command::Stamp { dry_run, json, trigger, paths } => stamp(dry_run, json, &trigger, &paths),
        Command::Resolve { id, trigger, paths } => resolve(&id, &trigger, &paths),
        Command::Languages { json } => languages(json),
        Command::Hooks { action } => hooks(action),
        Command::Doctor { root } => doctor(root),
        Command::Autosave { action } => autosave(action),
        Command::Hook { wait } => {
            let (mut out, mut err) = (io::stdout().lock(), io::stderr().lock());
            let run = filewatch_mcp::hear::run_hook(io::stdin().lock(), wait, &mut out, &mut err);
            return ExitCode::from(run.exit);
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A closed stdout (`| head`) is not an error worth a message.
            if e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("filewatch-mcp: {}", error_chain(&e));
            ExitCode::from(2)
        }
    }
}

/// The command line. The server's flags may come without a subcommand; with one, they belong
/// after it (`watch --root DIR`), and a server flag before it is an error, not ignored.
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    let matches = command.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Some((name, _)) = matches.subcommand() {
        let shared = <LiveArgs as clap::Args>::augment_args(clap::Command::new("shared"));
        for arg in shared.get_arguments() {
            let (id, flag) = (arg.get_id().as_str(), arg.get_long().unwrap_or_default());
            if matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
                let message = format!("--{flag} goes after the subcommand: `{name} --{flag} …`");
                command.error(clap::error::ErrorKind::ArgumentConflict, message).exit();
            }
        }
    }
    cli
}

/// An error and its causes, each said once: a message that already quotes its cause (as
/// `{path}: {source}` messages do) is not followed by it again.
fn error_chain(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause);
        }
    }
    text
}

/// The log file of a `serve` or `watch` run: `--log-file PATH` (an error if it cannot be
/// opened, or is stdout), else for `serve` its default in the state directory (none if that
/// cannot be had: the state directory's own troubles are said elsewhere).
fn log_file(command: &Command) -> anyhow::Result<Option<filewatch_mcp::log_file::LogFile>> {
    use filewatch_mcp::log_file::LogFile;
    let (asked, serve) = match command {
        Command::Serve(args) => (args.log_file.as_deref(), Some(args)),
        Command::Watch { live, .. } => (live.log_file.as_deref(), None),
        _ => return Ok(None),
    };
    if let Some(path) = asked {
        let file = LogFile::open(path, false);
        return file.map(Some).with_context(|| format!("--log-file {}", path.display()));
    }
    let Some(args) = serve else { return Ok(None) };
    let Ok(root) = args.root.canonicalize() else { return Ok(None) };
    Ok(LogFile::open_default(&root, &args.trigger).ok())
}

/// Sets up stderr, and the log file if there is one. Asked for — `--log-level` or `RUST_LOG` —
/// stderr is a log: a time and a level on each line. By default it is the CLI speaking, in the
/// voice of its other messages (`filewatch-mcp: …`), and only what a user should read:
/// warnings and errors (and `watch`'s progress). The file gets `info` and up (more if
/// `--log-level` asks for more), one event a line with the time and the pid.
fn init_logging(
    asked: Option<LogLevel>,
    default: LogLevel,
    file: Option<filewatch_mcp::log_file::LogFile>,
) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{fmt, EnvFilter, Layer};
    let env = EnvFilter::try_from_default_env().ok();
    let log = asked.is_some() || env.is_some();
    let level = asked.unwrap_or(default);
    let stderr_only = format!("{},{}=off", directives(level), filewatch_mcp::log_file::FILE_ONLY);
    let filter = env.unwrap_or_else(|| EnvFilter::new(stderr_only));
    let stderr = fmt::layer().with_writer(io::stderr);
    let stderr = if log {
        stderr.with_ansi(io::IsTerminal::is_terminal(&io::stderr())).with_target(false).boxed()
    } else {
        stderr.with_ansi(false).event_format(CliVoice).boxed()
    };
    // The file is for reading later: info at least, whatever stderr shows.
    let file = file.map(|file| {
        let level = asked.map_or(LogLevel::Info, |l| l.max(LogLevel::Info));
        fmt::layer()
            .with_writer(file)
            .with_ansi(false)
            .event_format(filewatch_mcp::log_file::FileLine)
            .with_filter(EnvFilter::new(directives(level)))
    });
    tracing_subscriber::registry().with(stderr.with_filter(filter)).with(file).init();
}

/// The filter for `level`: ours at that level; up to debug, the libraries' chatter (every
/// JSON-RPC message, glob sets, watch removals) kept to warnings; trace lets it in.
fn directives(level: LogLevel) -> String {
    let ours = match level {
        LogLevel::Off => "off",
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
        LogLevel::Trace => "trace",
    };
    let libraries = match level {
        LogLevel::Trace => "trace",
        LogLevel::Off | LogLevel::Error => ours,
        _ => "warn",
    };
    format!("{libraries},filewatch_mcp={ours}")
}

/// A log event as the CLI's other messages read: `filewatch-mcp: MESSAGE`.
struct CliVoice;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for CliVoice
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "filewatch-mcp: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// A runtime for what waits: the server's session, and signals for every live front end.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    // Two: the MCP session's tasks and the tools' blocking walks; the pipeline has its thread.
    const ASYNC_THREADS: usize = 2;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(ASYNC_THREADS)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn watch(dir: Option<&Path>, args: &LiveArgs, json: bool) -> anyhow::Result<ExitCode> {
    let root = dir.unwrap_or(&args.root);
    filewatch_mcp::log_file::started("watch", root);
    let options = args.options(root);
    let (debounce, tag) = (args.debounce, args.tag);
    let runtime = runtime()?;
    // A terminal is a consumer like a session: it gets the asks only while it owns the root.
    let (_owner, since) = match owner::claim(root, &options.trigger, "watch", tag)? {
        Claim::Owner(owner) => (owner, None),
        Claim::Standby(standby) => {
            let who = standby.owner.as_ref().map(|o| format!(" ({})", o.describe()));
            eprintln!(
                "filewatch-mcp: another session owns {}{}: its asks go there. Waiting for it \
                 to exit…",
                filewatch_mcp::slash_path(standby.root()),
                who.unwrap_or_default()
            );
            let since = standby.since;
            let taken = runtime.block_on(async {
                tokio::select! {
                    () = filewatch_mcp::shutdown_signal() => None,
                    taken = standby.wait_in_background() => Some(taken),
                }
            });
            match taken {
                None => return Ok(ExitCode::SUCCESS),
                Some(Ok(Ok(owner))) => (owner, Some(since)),
                Some(Ok(Err(e))) => return Err(e).context("waiting for the root's owner"),
                Some(Err(_)) => anyhow::bail!("cannot wait for the root's owner"),
            }
        }
    };
    let (failed, failed_rx) = std::sync::mpsc::channel::<io::Error>();
    let sink = Terminal { json, failed };
    let mut live = match since {
        None => Live::start(&options, sink)?,
        Some(since) => Live::take_over(&options, None, since, sink)?,
    };
    let stats = live.stats();
    eprintln!(
        "filewatch-mcp: watching {} under {} ({} ms){}; debounce {} ms",
        count(stats.dirs_watched, "directory", "directories"),
        live.root().display(),
        stats.took.as_millis(),
        if stats.dirs_unwatched > 0 {
            format!(", {} NOT watched (inotify limit, see above)", stats.dirs_unwatched)
        } else {
            String::new()
        },
        debounce.as_millis()
    );
    let stopped = runtime.block_on(async {
        tokio::select! {
            () = filewatch_mcp::shutdown_signal() => true,
            () = live.finished() => false,
        }
    });
    live.stop();
    match failed_rx.try_recv() {
        Ok(e) => Err(e.into()),
        Err(_) if stopped => Ok(ExitCode::SUCCESS),
        // The watch ended by itself (nothing left to watch), and has said why.
        Err(_) => Ok(ExitCode::from(2)),
    }
}

/// `1 directory`, `2 directories`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `watch`'s output: each ask on stdout; with `--json`, also the root's switches between
/// deliberate saves and autosave, as events (stderr says them in any case).
struct Terminal {
    json: bool,
    /// Where a failed write goes: the watch ends with it.
    failed: std::sync::mpsc::Sender<io::Error>,
}

impl filewatch_mcp::Sink for Terminal {
    fn deliver(&mut self, ask: filewatch_mcp::Ask) -> filewatch_mcp::Delivery {
        match print_ask(&ask, self.json) {
            Ok(()) => filewatch_mcp::Delivery::Delivered,
            Err(e) => {
                let _ = self.failed.send(e);
                filewatch_mcp::Delivery::Closed
            }
        }
    }

    fn switched(&mut self, switch: &filewatch_mcp::ModeSwitch) {
        if !self.json {
            return;
        }
        let event = serde_json::json!({
            "event": "autosave",
            "root": switch.root.to_string_lossy(),
            "autosave": switch.autosave,
            "message": switch.line,
        });
        let mut out = io::stdout().lock();
        // A closed stdout ends the watch at its next ask.
        let _ = writeln!(out, "{event}").and_then(|()| out.flush());
    }
}

/// `filewatch-mcp autosave show|reset`: one line on stdout.
fn autosave(action: AutosaveAction) -> anyhow::Result<ExitCode> {
    let line = match action {
        AutosaveAction::Show { root } => filewatch_mcp::autosave_show(&root),
        AutosaveAction::Reset { root } => filewatch_mcp::autosave_reset(&root),
    };
    writeln!(io::stdout().lock(), "{}", line?)?;
    Ok(ExitCode::SUCCESS)
}

/// One ask on stdout, as it is found.
fn print_ask(ask: &filewatch_mcp::Ask, json: bool) -> io::Result<()> {
    let mut out = io::stdout().lock();
    if json {
        let mut view = ask.marker.view(&ask.file);
        // An ask is announced before its tag is written (once it was heard and its file is
        // quiet): the file does not hold it yet, and the line says whether it will.
        view.stamped = Some(false);
        view.tagged = false;
        view.tag = Some(if ask.stamped { "pending" } else { "none" });
        view.revised = ask.revised.then_some(true);
        writeln!(out, "{}", serde_json::to_string(&view)?)?;
    } else {
        let id = ask.id().map_or_else(|| "not stamped".to_string(), |id| id.to_string());
        // The whole text of an ask printed before, in part, under the same id.
        let id = if ask.revised { format!("{id}, revised") } else { id };
        writeln!(
            out,
            "{}:{}  {}{}  [{id}]",
            terminal_name(&ask.file),
            lines(&ask.marker),
            one_line(&ask.marker.text),
            symbol_note(&ask.marker)
        )?;
    }
    out.flush()
}

fn serve(args: LiveArgs) -> anyhow::Result<ExitCode> {
    filewatch_mcp::log_file::started("serve", &args.root);
    let runtime = runtime()?;
    let options = args.options(&args.root);
    let result = runtime.block_on(filewatch_mcp::server::run(options));
    // stdin is read by a blocking thread that never returns while the client keeps the pipe
    // open: do not wait for it. Claude Code sends SIGTERM ~150 ms after SIGINT.
    runtime.shutdown_background();
    result?;
    Ok(ExitCode::SUCCESS)
}

/// Every path named on the command line must exist, and a directory must be listable: a
/// mistyped or unreadable path is the user's error (exit 2), not an empty result.
fn check_paths(paths: &[PathBuf]) -> anyhow::Result<()> {
    for p in paths {
        let meta =
            std::fs::symlink_metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        if meta.is_dir() {
            std::fs::read_dir(p)
                .with_context(|| format!("cannot list directory {}", p.display()))?;
        }
    }
    Ok(())
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn stamp(dry_run: bool, json: bool, trigger: &str, paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let scanner = Scanner::new(LanguageTable::builtin(), trigger)?;
    check_paths(paths)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let listing = filewatch_mcp::candidate_files(scanner.table(), paths, threads());
    let mut failed = listing.unlisted.len();
    for err in listing.unlisted {
        filewatch_mcp::Problem::Walk(err).log();
    }
    for path in listing.files {
        match filewatch_mcp::stamp_file(&scanner, &path, dry_run, WRITE_ATTEMPTS) {
            Ok(mut asks) => {
                let shown = filewatch_mcp::slash_path(&path); // `/` on every OS
                for m in &mut asks {
                    // A dry run's ids are drawn at random like the real stamp's, and so are not
                    // the ones a real stamp would write: none is shown.
                    if dry_run {
                        m.tag = None;
                    }
                    if json {
                        let view = filewatch_mcp::MarkerView { tagged: !dry_run, ..m.view(&shown) };
                        writeln!(out, "{}", serde_json::to_string(&view)?)?;
                    } else {
                        let what = match m.tag {
                            Some(id) => format!("{id} new"),
                            None => "would stamp".to_string(),
                        };
                        let (name, text) = (terminal_name(&shown), one_line(&m.text));
                        writeln!(out, "{name}:{}: {text}  [{what}]", lines(m))?;
                    }
                }
            }
            Err(EditError::Read(e)) if e.is_skip() => say_skipped(e, paths),
            Err(e) => {
                failed += 1;
                eprintln!("filewatch-mcp: {e}");
            }
        }
    }
    out.flush()?;
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn resolve(id: &str, trigger: &str, paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let id: MarkerId = id.parse()?;
    let scanner = Scanner::new(LanguageTable::builtin(), trigger)?;
    check_paths(paths)?;
    // An ask announced with `--tag never` has its id in the ledger of the root it was announced
    // on, not in its file: each directory named (`.` by default) is looked up as such a root,
    // and its record found (by its text) as the server's `resolve_ask` finds it. An id in no
    // ledger is looked for as a tag in the files.
    let ledgers: Vec<(&PathBuf, PathBuf, Asks)> = paths
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .filter_map(|p| {
            let root = p.canonicalize().ok()?;
            match Asks::for_mode(TagMode::Never, &root, trigger) {
                Ok(asks) => Some((p, root, asks)),
                Err(e) => {
                    tracing::debug!("{}: no ask ledger: {e}", p.display());
                    None
                }
            }
        })
        .collect();
    let mut resolved: Vec<PathBuf> = Vec::new();
    for (shown, root, asks) in &ledgers {
        let Some(record) = asks.by_id(id).filter(|r| r.is_pending()) else { continue };
        match filewatch_mcp::resolve_recorded(&scanner, root, &record) {
            Ok(true) => resolved.push(shown.join(&record.file)),
            Ok(false) => {}
            Err(e) => {
                eprintln!("filewatch-mcp: {e}");
                return Ok(ExitCode::from(1));
            }
        }
    }
    if resolved.is_empty() {
        resolved = match filewatch_mcp::resolve_in_tree(&scanner, paths, id, threads()) {
            Ok(resolved) => resolved,
            Err(e) => {
                eprintln!("filewatch-mcp: {e}");
                return Ok(ExitCode::from(1));
            }
        };
    }
    if resolved.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!("no marker with id {id} in {}", shown.join(" "));
    }
    // The servers on these roots learn that the ask is done, as from their own `resolve_ask`.
    for (_, _, asks) in &ledgers {
        asks.resolve(id);
    }
    let mut out = io::stdout().lock();
    for path in &resolved {
        // `/` on every OS
        writeln!(out, "{}: removed {id}", terminal_name(&filewatch_mcp::slash_path(path)))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn scan(json: bool, verbose: bool, trigger: &str, paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let table = LanguageTable::builtin();
    let scanner = Scanner::new(table, trigger)?;
    check_paths(paths)?;
    let threads = threads();
    let mut report = filewatch_mcp::scan_paths(&scanner, paths, threads);
    // Skips (binary, too large, FIFOs) are expected in a tree; anything else fails the scan.
    let failed = report.unlisted.len() + report.errors.iter().filter(|e| !e.is_skip()).count();
    let skipped = report.errors.len();
    for err in std::mem::take(&mut report.unlisted) {
        filewatch_mcp::Problem::Walk(err).log();
    }
    for err in std::mem::take(&mut report.errors) {
        if err.is_skip() {
            say_skipped(err, paths);
        } else {
            filewatch_mcp::Problem::Read(err).log();
        }
    }
    let mut out = BufWriter::new(io::stdout().lock());
    for file in &report.files {
        let path = filewatch_mcp::slash_path(&file.path); // `/` on every OS
        for m in &file.markers {
            if json {
                writeln!(out, "{}", serde_json::to_string(&m.view(&path))?)?;
            } else {
                let tag = m.tag.map(|t| format!("  [{t} tagged]")).unwrap_or_default();
                let (name, symbol) = (terminal_name(&path), symbol_note(m));
                writeln!(out, "{name}:{}: {}{symbol}{tag}", lines(m), one_line(&m.text))?;
            }
        }
    }
    out.flush()?;
    if verbose {
        say_near_misses(&scanner, paths, threads);
    }
    tracing::debug!(
        "{} files read, {skipped} skipped or failed, {} markers",
        report.scanned,
        report.files.iter().map(|f| f.markers.len()).sum::<usize>()
    );
    // 0: everything was read; 1: some of it could not be (said on stderr); 2: usage errors.
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `scan --verbose`: each comment that almost holds an ask, on stderr (stdout stays the list
/// of asks), as `path:line:column: not an ask: why`.
fn say_near_misses(scanner: &Scanner, paths: &[PathBuf], threads: usize) {
    for (path, misses) in filewatch_mcp::near_misses(scanner, paths, threads) {
        let name = terminal_name(&filewatch_mcp::slash_path(&path)); // `/` on every OS
        for miss in misses {
            let why = terminal_text(&miss.to_string());
            eprintln!("{name}:{}:{}: not an ask: {why}", miss.line, miss.column);
        }
    }
}

/// `12` for a one-line ask, `12-14` for one over several lines.
fn lines(m: &Marker) -> String {
    if m.end_line > m.line {
        format!("{}-{}", m.line, m.end_line)
    } else {
        m.line.to_string()
    }
}

/// `  (in Cache.refresh 6-8)`: the definition the ask is about, if the syntax tree names one.
fn symbol_note(m: &Marker) -> String {
    m.symbol
        .as_ref()
        .map_or_else(String::new, |s| format!("  (in {} {})", terminal_text(&s.name), s.lines()))
}

/// A skip (a binary or big file, a FIFO, a symlink) is what a walk expects, and is said only
/// with `--log-level debug`; a file the user named on the command line was asked for by name,
/// so why it was not read is said in any case.
fn say_skipped(skip: filewatch_mcp::ReadError, named: &[PathBuf]) {
    if named.iter().any(|p| p == skip.path()) {
        // The message holds the path: shown as a terminal name would be, on one line.
        let message = terminal_text(&skip.to_string()).replace('\n', "\\n");
        eprintln!("filewatch-mcp: {message}; skipped");
    } else {
        filewatch_mcp::Problem::Read(skip).log();
    }
}

/// How a line break inside an ask is shown on a terminal: the grep-able output keeps one line
/// per ask (`--json` has the exact text).
const LINE_BREAK: &str = " ⏎ ";

/// An ask's text on one terminal line: control characters escaped, line breaks as ` ⏎ `.
fn one_line(text: &str) -> String {
    terminal_text(text).replace('\n', LINE_BREAK)
}

/// Ask text for a terminal: control characters shown escaped (`\u{1b}`), so a file cannot
/// move the cursor, retitle the window or overwrite earlier lines; the line breaks of a
/// multi-line ask and tabs stay.
fn terminal_text(text: &str) -> String {
    filewatch_mcp::escaped(text, true)
}

/// A file name for a terminal: as it is, unless it holds a control character (a newline would
/// fake another output line) or a quote; then quoted, with escapes.
fn terminal_name(name: &str) -> String {
    if name.chars().any(|c| c.is_control() || c == '"') {
        format!("{name:?}")
    } else {
        name.to_string()
    }
}

fn hooks(action: HooksAction) -> anyhow::Result<ExitCode> {
    use filewatch_mcp::hear::settings::{self, HookCommand};
    let command = |bin: Option<PathBuf>| -> anyhow::Result<HookCommand> {
        let Some(bin) = bin else { return Ok(HookCommand::ByName) };
        let path = bin.canonicalize().with_context(|| format!("--bin {}", bin.display()))?;
        anyhow::ensure!(path.is_file(), "--bin {}: not a file", bin.display());
        Ok(HookCommand::Path(path))
    };
    let mut out = io::stdout().lock();
    let (changed, what) = match action {
        HooksAction::Print { bin } => {
            writeln!(out, "{}", serde_json::to_string_pretty(&command(bin)?.settings())?)?;
            return Ok(ExitCode::SUCCESS);
        }
        HooksAction::Install { scope, bin, root } => {
            let command = command(bin)?;
            (settings::install(&scope.settings_file(&root)?, &command)?, "installed in")
        }
        HooksAction::Remove { scope, root } => {
            (settings::remove(&scope.settings_file(&root)?)?, "removed from")
        }
    };
    let path = filewatch_mcp::slash_path(&changed.path);
    if changed.written {
        writeln!(out, "filewatch-mcp: hooks {what} {path}")?;
    } else {
        writeln!(out, "filewatch-mcp: {path} unchanged (already so)")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn doctor(root: PathBuf) -> anyhow::Result<ExitCode> {
    let binary = std::env::current_exe().context("cannot find this program's own path")?;
    let options = filewatch_mcp::doctor::Options { root, binary };
    let ok = filewatch_mcp::doctor::run(&options, &mut io::stdout().lock())?;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn languages(json: bool) -> anyhow::Result<ExitCode> {
    let table = LanguageTable::builtin();
    let mut out = BufWriter::new(io::stdout().lock());
    for lang in table.iter() {
        let types: Vec<String> = lang.file_types.iter().map(FileType::to_string).collect();
        let symbols = lang.grammar.as_deref().is_some_and(|g| {
            lang.ts_language.is_some() && filewatch_mcp::scan::symbol_queries(g).is_some()
        });
        let decided = match FallbackReason::for_language(lang) {
            None if symbols => {
                format!("grammar {}, symbols", lang.grammar.as_deref().unwrap_or_default())
            }
            None => format!("grammar {}", lang.grammar.as_deref().unwrap_or_default()),
            Some(FallbackReason::NoGrammar) => "fallback, one-line asks, no symbols".to_string(),
            Some(reason) => format!("fallback, one-line asks, no symbols ({reason})"),
        };
        if json {
            let v = serde_json::json!({
                "name": lang.name,
                "file_types": types,
                "shebangs": lang.shebangs,
                "grammar": lang.grammar,
                "mode": if lang.ts_language.is_some() { "syntax" } else { "fallback" },
                "multi_line_asks": lang.ts_language.is_some(),
                "symbols": symbols,
                "embedded": lang.embedded,
            });
            writeln!(out, "{v}")?;
        } else {
            let types = if lang.embedded { "(embedded)".to_string() } else { types.join(" ") };
            writeln!(out, "{:<18} {:<36} {}", lang.name, decided, types)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
