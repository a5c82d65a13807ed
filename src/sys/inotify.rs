//! Linux: the tree's inotify watches, with a mask of what changes files and nothing else.
//!
//! notify 8's inotify backend adds every watch with a fixed mask that includes `IN_OPEN`, and
//! its `Config` has no say in it: every file any other program merely *read* (a build, a
//! language server, `rg` over the tree) woke the watcher, and listing a watched directory did
//! too. We read inotify here instead, through the `inotify` crate notify itself is built on.
//! A patched notify was the other way; but `[patch]` only applies to the workspace that
//! declares it, so `cargo install filewatch-mcp` would have built the unpatched one, and a fork
//! is more to keep up than this file. macOS and Windows stay on notify (FSEvents and
//! `ReadDirectoryChangesW` report no reads).
//!
//! The events are notify's own types, shaped as notify's inotify backend shapes them (less the
//! reads), so `watch.rs` is the same on every OS: the two halves of a rename (`IN_MOVED_FROM`,
//! `IN_MOVED_TO`) carry the kernel's cookie as their tracker, which pairs them. One thread reads the inotify descriptor; it
//! sleeps in `poll(2)` with no timeout until an event comes or the [`Watcher`] is dropped.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use notify::event::{
    AccessKind, AccessMode, CreateKind, DataChange, EventKind, Flag, MetadataKind, ModifyKind,
    RemoveKind, RenameMode,
};
use notify::{Event, EventHandler, RecursiveMode};

/// What a file change can be, and nothing a read does (`IN_OPEN`, `IN_ACCESS`,
/// `IN_CLOSE_NOWRITE`): created, deleted, renamed in or out (editors' atomic saves, git's
/// `index.lock` → `index`), written, closed after writing (a writer that held the file open is
/// looked at again when it closes), chmod-ed; and the watched directory itself deleted or
/// moved. The queue overflow (`IN_Q_OVERFLOW`) and `IN_IGNORED` come whatever the mask.
const MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::MODIFY)
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::ATTRIB)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF);

/// Room for a few hundred events per `read(2)`.
const BUFFER: usize = 16 * 1024;

/// The watched directories by descriptor, and back.
#[derive(Default)]
struct Table {
    /// Each watch's directory, and whether its new subdirectories are watched too.
    dirs: HashMap<WatchDescriptor, (PathBuf, bool)>,
    by_path: HashMap<PathBuf, WatchDescriptor>,
}

impl Table {
    fn insert(&mut self, wd: WatchDescriptor, dir: &Path, recursive: bool) {
        // A directory reached by two paths (a bind mount) has one descriptor: the last path
        // names its events.
        self.dirs.insert(wd.clone(), (dir.to_path_buf(), recursive));
        self.by_path.insert(dir.to_path_buf(), wd);
    }

    /// The kernel dropped the watch (its directory is gone, or it was removed).
    fn forget(&mut self, wd: &WatchDescriptor) {
        if let Some((dir, _)) = self.dirs.remove(wd) {
            if self.by_path.get(&dir) == Some(wd) {
                self.by_path.remove(&dir);
            }
        }
    }
}

/// An inotify instance and its reader thread; implements [`notify::Watcher`] so that the rest
/// of the crate does not tell it from notify's watchers.
pub struct Watcher {
    watches: Watches,
    table: Arc<Mutex<Table>>,
    /// Dropping it hangs up the pipe the reader polls: the reader ends.
    stop: Option<io::PipeWriter>,
    reader: Option<JoinHandle<()>>,
}

impl notify::Watcher for Watcher {
    fn new<F: EventHandler>(handler: F, _config: notify::Config) -> notify::Result<Self> {
        let inotify = Inotify::init().map_err(notify::Error::io)?;
        let watches = inotify.watches();
        let table = Arc::new(Mutex::new(Table::default()));
        let (stop_rx, stop) = io::pipe().map_err(notify::Error::io)?;
        let reader = {
            let table = table.clone();
            std::thread::Builder::new()
                .name("inotify".into())
                .spawn(move || read_events(inotify, &stop_rx, &table, handler))
                .map_err(notify::Error::io)?
        };
        Ok(Watcher { watches, table, stop: Some(stop), reader: Some(reader) })
    }

    fn watch(&mut self, path: &Path, mode: RecursiveMode) -> notify::Result<()> {
        let recursive = mode == RecursiveMode::Recursive;
        add_tree(&mut self.watches, &mut lock(&self.table), path, recursive)
    }

    fn unwatch(&mut self, path: &Path) -> notify::Result<()> {
        let mut table = lock(&self.table);
        let Some(wd) = table.by_path.remove(path) else {
            return Err(notify::Error::watch_not_found().add_path(path.to_path_buf()));
        };
        let recursive = table.dirs.get(&wd).is_some_and(|(_, r)| *r);
        let mut gone = vec![wd];
        if recursive {
            let below: Vec<PathBuf> =
                table.by_path.keys().filter(|p| p.starts_with(path)).cloned().collect();
            gone.extend(below.iter().filter_map(|p| table.by_path.remove(p)));
        }
        for wd in gone {
            if table.dirs.get(&wd).is_some_and(|(dir, _)| dir.starts_with(path)) {
                table.dirs.remove(&wd);
                // Already gone if the directory was deleted: nothing to undo.
                let _ = self.watches.remove(wd);
            }
        }
        Ok(())
    }

    fn kind() -> notify::WatcherKind {
        notify::WatcherKind::Inotify
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Watches `dir`, and with `recursive` every directory below it (symlinks not followed).
/// Called with the table locked, so that no event of a new watch is read before its
/// directory is known.
fn add_tree(
    watches: &mut Watches,
    table: &mut Table,
    dir: &Path,
    recursive: bool,
) -> notify::Result<()> {
    let wd = watches.add(dir, MASK).map_err(|e| watch_error(e, dir))?;
    table.insert(wd, dir, recursive);
    if recursive {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                match add_tree(watches, table, &entry.path(), true) {
                    Err(e) if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) => return Err(e),
                    _ => {} // gone meanwhile, or unreadable: as notify does, skipped
                }
            }
        }
    }
    Ok(())
}

/// inotify's watch limit is `ENOSPC`; notify calls it `MaxFilesWatch`.
fn watch_error(e: io::Error, dir: &Path) -> notify::Error {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        notify::Error::new(notify::ErrorKind::MaxFilesWatch)
    } else {
        notify::Error::io(e).add_path(dir.to_path_buf())
    }
}

/// The reader thread: sleeps until inotify has events (or the watcher is dropped), hands each
/// on, and sleeps again.
fn read_events(
    mut inotify: Inotify,
    stop: &io::PipeReader,
    table: &Mutex<Table>,
    mut handler: impl EventHandler,
) {
    let mut watches = inotify.watches();
    let mut buffer = vec![0u8; BUFFER];
    loop {
        let mut fds = [
            libc::pollfd { fd: inotify.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            handler.handle_event(Err(notify::Error::io(e)));
            return;
        }
        if fds[1].revents != 0 {
            return; // the watcher was dropped
        }
        // The descriptor is non-blocking: read until it is empty.
        loop {
            let events = match inotify.read_events(&mut buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    handler.handle_event(Err(notify::Error::io(e)));
                    return;
                }
            };
            let mut table = lock(table);
            for event in events {
                for out in translate(&mut watches, &mut table, &event) {
                    handler.handle_event(out);
                }
            }
        }
    }
}

/// One inotify event as notify's inotify backend reports it.
fn translate(
    watches: &mut Watches,
    table: &mut Table,
    event: &inotify::Event<&std::ffi::OsStr>,
) -> Vec<notify::Result<Event>> {
    let mask = event.mask;
    if mask.contains(EventMask::Q_OVERFLOW) {
        return vec![Ok(Event::new(EventKind::Other).set_flag(Flag::Rescan))];
    }
    if mask.contains(EventMask::IGNORED) {
        table.forget(&event.wd);
        return Vec::new();
    }
    let Some((dir, recursive)) = table.dirs.get(&event.wd).cloned() else {
        return Vec::new(); // a watch removed while its events were queued
    };
    let path = match event.name {
        Some(name) => dir.join(name),
        None => dir,
    };
    let is_dir = mask.contains(EventMask::ISDIR);
    let mut kinds = Vec::new();
    if mask.contains(EventMask::MOVED_FROM) {
        kinds.push(EventKind::Modify(ModifyKind::Name(RenameMode::From)));
    }
    // The watched directory itself moved. Its parent's watch, if it has one, told where to
    // (a rename's two halves, before this); by now this watch may even name the new path. Said
    // only for a directory whose parent nobody watches (the root).
    let parent_watched = path.parent().is_some_and(|p| table.by_path.contains_key(p));
    if mask.contains(EventMask::MOVE_SELF) && !parent_watched {
        kinds.push(EventKind::Remove(RemoveKind::Other));
    }
    if mask.contains(EventMask::MOVED_TO) {
        kinds.push(EventKind::Modify(ModifyKind::Name(RenameMode::To)));
    }
    if mask.contains(EventMask::CREATE) {
        kinds.push(EventKind::Create(if is_dir { CreateKind::Folder } else { CreateKind::File }));
    }
    if mask.contains(EventMask::DELETE) {
        kinds.push(EventKind::Remove(if is_dir { RemoveKind::Folder } else { RemoveKind::File }));
    }
    if mask.contains(EventMask::DELETE_SELF) {
        kinds.push(EventKind::Remove(RemoveKind::Folder));
    }
    if mask.contains(EventMask::MODIFY) {
        kinds.push(EventKind::Modify(ModifyKind::Data(DataChange::Any)));
    }
    if mask.contains(EventMask::CLOSE_WRITE) {
        kinds.push(EventKind::Access(AccessKind::Close(AccessMode::Write)));
    }
    if mask.contains(EventMask::ATTRIB) {
        kinds.push(EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)));
    }
    let mut out = Vec::new();
    // A directory made (or moved) inside a recursive watch is watched too, as notify does.
    if recursive && is_dir && mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
        if let Err(e) = add_tree(watches, table, &path, true) {
            out.push(Err(e));
        }
    }
    // The kernel's cookie pairs a rename's two halves.
    let tracker = (event.cookie != 0).then_some(event.cookie as usize);
    out.extend(kinds.into_iter().map(|kind| {
        let event = Event::new(kind).add_path(path.clone());
        Ok(match tracker {
            Some(cookie) => event.set_tracker(cookie),
            None => event,
        })
    }));
    out
}
