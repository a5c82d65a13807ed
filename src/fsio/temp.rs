//! Our temp files: where a replace's new bytes wait beside the file, what they are named, and
//! how the next owner of the root removes the ones a killed process left — only those.
//!
//! A temp file is `.NAME.PID-ID-SUM.fw-tmp`, in the directory of the file it replaces:
//! - `NAME` is the file's name, cut at a character boundary to at most [`MAX_STEM`] bytes, so
//!   that the whole fits the 255-byte name limit of every file system (255 UTF-16 units on
//!   Windows), with room for Windows' `.wasN` backup name beside it;
//! - `PID` is the process that made it (hex): while that process runs, its files are never
//!   touched;
//! - `ID` is the temp file's own inode number (file index on Windows; hex): a regular file at
//!   that name with that id is the one we made, since only our own exchange ever puts another
//!   file at one of our names;
//! - `SUM` is a 64-bit FNV-1a checksum of the bytes the replace found at the path (hex): after
//!   the exchange the temp name holds the file that was displaced, and a file there holding
//!   exactly those bytes is the file we read, checked and replaced — removing it loses none of
//!   the user's bytes (the path holds them, plus our tag).
//!
//! A temp file that holds a user's bytes being put back (a write that slipped in during a
//! stamp) is `.NAME.PID-keepID-0.fw-tmp`: never removed by the clean-up, since if the rename
//! that puts it in place never happens it is their only copy.
//!
//! On Linux the file is made with `O_TMPFILE`: written, given its metadata and synced without
//! any name, then named — a process killed meanwhile leaves nothing. Elsewhere (and where the
//! file system cannot) it is made empty as `.NAME.PID-newNONCE-SUM.fw-tmp` and renamed to its
//! id at once, before a byte is written.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::lines::fnv1a;
use crate::sys;

/// Every temp file name of ours ends so (the tree walk and the watcher skip such names).
pub const SUFFIX: &str = ".fw-tmp";

/// The most bytes of the file's name a temp name keeps: 255, less our 51 bytes at most (two
/// dots, a 32-bit pid, a 64-bit id and a 64-bit sum in hex with two dashes, the suffix), less 6
/// for Windows' `.wasN` beside it, and some to spare.
pub const MAX_STEM: usize = 192;

/// The part of `path`'s name a temp name keeps (see [`MAX_STEM`]); not UTF-8 is shown as
/// U+FFFD, so our names always are.
fn stem(path: &Path) -> String {
    let name = path.file_name().map(OsStr::to_string_lossy).unwrap_or_default();
    let mut end = name.len().min(MAX_STEM);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

/// What a name of ours says.
#[derive(Debug, PartialEq, Eq)]
pub struct TempName {
    /// The process that made it.
    pub pid: u32,
    /// What should be at the name.
    pub kind: Kind,
    /// The checksum of the bytes the replace found at the path.
    pub sum: u64,
}

/// Which of our names it is.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    /// `PID-ID-SUM`: the temp file whose inode number is `ID`, or what an exchange displaced.
    Made {
        /// The temp file's inode number (file index on Windows).
        id: u64,
    },
    /// `PID-newNONCE-SUM`: made a moment ago, empty, about to be renamed to its id.
    Fresh,
    /// `PID-keepID-0`: a user's bytes on their way back to the path; never removed.
    Rescue,
    /// `PID-ID-SUM.wasN`: Windows' backup name for what `ReplaceFileW` displaced.
    Backup,
}

/// The name of the temp file `id`, made by `pid`, beside a file named `stem`, replacing bytes
/// whose checksum is `sum` (`None`: a rescue).
fn made_name(stem: &str, pid: u32, id: u64, sum: Option<u64>) -> String {
    match sum {
        Some(sum) => format!(".{stem}.{pid:x}-{id:x}-{sum:x}{SUFFIX}"),
        None => format!(".{stem}.{pid:x}-keep{id:x}-0{SUFFIX}"),
    }
}

fn fresh_name(stem: &str, pid: u32, nonce: u64, sum: u64) -> String {
    format!(".{stem}.{pid:x}-new{nonce:x}-{sum:x}{SUFFIX}")
}

fn hex<T: TryFrom<u64>>(digits: &str) -> Option<T> {
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok().and_then(|n| T::try_from(n).ok())
}

/// What `name` says, if it is one of our temp names.
pub fn parse(name: &OsStr) -> Option<TempName> {
    let rest = name.to_str()?.strip_prefix('.')?.strip_suffix(SUFFIX)?;
    let (rest, backup) = match rest.rsplit_once(".was") {
        Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => (head, true),
        _ => (rest, false),
    };
    let (_stem, fields) = rest.rsplit_once('.')?;
    let mut parts = fields.split('-');
    let (pid, id, sum) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (pid, sum) = (hex(pid)?, hex(sum)?);
    let kind = if let Some(nonce) = id.strip_prefix("new").filter(|_| !backup) {
        hex::<u64>(nonce).map(|_| Kind::Fresh)?
    } else if let Some(id) = id.strip_prefix("keep").filter(|_| !backup) {
        hex::<u64>(id).map(|_| Kind::Rescue)?
    } else if backup {
        hex::<u64>(id).map(|_| Kind::Backup)?
    } else {
        Kind::Made { id: hex(id)? }
    };
    Some(TempName { pid, kind, sum })
}

/// A temp file of ours beside the file it is to replace: named (see the module doc), whole,
/// synced. Removed when dropped if its name still holds it.
pub struct Temp {
    /// Its name, in the replaced file's directory.
    pub path: PathBuf,
    /// Its device and inode (volume and file index on Windows).
    pub id: (u64, u64),
    /// Open read-write while it may be held back from readers ([`Temp::hold_back`]).
    file: Option<File>,
    /// Removed when dropped (unless a rename put it in place).
    remove: bool,
}

impl Temp {
    /// A temp file beside `path` holding `bytes`, with the metadata of `from` (open on `path`,
    /// whose metadata is `meta`; see [`sys::copy_metadata`]), synced. `replaced` are the bytes
    /// at `path` it is to replace — then it also gets `from`'s access and modification times
    /// ([`sys::keep_times`]): our tag or resolve is no newer version of the user's file for an
    /// editor that holds it. `None` for a rescue (a user's bytes going back: they are new).
    pub fn create(
        path: &Path,
        bytes: &[u8],
        from: &File,
        meta: &Metadata,
        replaced: Option<&[u8]>,
    ) -> io::Result<Temp> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let (stem, pid, sum) = (stem(path), std::process::id(), replaced.map(fnv1a));
        if let Some(mut file) = sys::unnamed_file_in(dir)? {
            fill(&mut file, bytes, from, meta, dir, replaced.is_some())?;
            let id = sys::file_id(&file)?;
            let named = dir.join(made_name(&stem, pid, id.1, sum));
            sys::name_unnamed(&file, &named)?;
            return Ok(Temp { path: named, id, file: Some(file), remove: true });
        }
        // Made empty under a fresh name and renamed to its id before anything is written: a
        // process killed meanwhile leaves an empty file (or one we can tell is ours).
        let nonce = crate::id::uuid_random() as u64;
        let fresh = dir.join(fresh_name(&stem, pid, nonce, sum.unwrap_or(0)));
        let file = sys::create_new_private(&fresh)?;
        let named = sys::file_id(&file).and_then(|id| {
            let named = dir.join(made_name(&stem, pid, id.1, sum));
            sys::rename_noreplace(&fresh, &named).map(|()| (named, id))
        });
        let (named, id) = match named {
            Ok(named) => named,
            Err(e) => {
                let _ = std::fs::remove_file(&fresh);
                return Err(e);
            }
        };
        let mut temp = Temp { path: named, id, file: Some(file), remove: true };
        let file = temp.file.as_mut().expect("just opened");
        fill(file, bytes, from, meta, &temp.path, replaced.is_some())?;
        Ok(temp)
    }

    /// Holds our file back from other programs for as long as it is at the path and might
    /// have to leave it: whoever opens it from now on waits in `open(2)` until
    /// [`Temp::release`] (Linux: a write lease). False where that cannot be (no leases here,
    /// or another program has it open); then the file is closed (Windows cannot move a file
    /// held open).
    pub fn hold_back(&mut self, allowed: bool) -> bool {
        let held = allowed
            && self.file.as_ref().is_some_and(|f| sys::take_write_lease(f) == sys::Lease::Held);
        if !held {
            self.file = None;
        }
        held
    }

    /// Gives whoever waits on our file (see [`Temp::hold_back`]), or is about to open it, the
    /// bytes of the file at `other` (what is back at the path instead of ours), as if they had
    /// opened that one. Only while it is held back (no one can have written into it), and best
    /// effort: nothing is done if `other` is not a regular file or cannot be read.
    pub fn become_copy_of(&mut self, other: &Path) {
        let Some(file) = self.file.as_mut() else { return };
        let Ok(mut source) = sys::open_read(other) else { return };
        if !source.metadata().is_ok_and(|m| m.is_file()) {
            return;
        }
        let copied = file.set_len(0).and_then(|()| file.rewind());
        let _ = copied.and_then(|()| io::copy(&mut source, file));
    }

    /// Makes our file, still held back, the file at `other` in all but its inode: its bytes,
    /// owner, mode, extended attributes, access and modification times, synced — so that
    /// whoever opens ours reads it, and wherever ours is now (at the path, or moved away by the
    /// user) it is what they saved. `other` can then go. Refused if ours is not held back, or
    /// `other` is not a regular file with one link, is open for writing (or opened so while it
    /// is copied), or has metadata ours cannot be given; ours may then hold its bytes already.
    pub fn become_file(&mut self, other: &Path) -> io::Result<()> {
        let refused = |why: &str| io::Error::other(why.to_string());
        let Some(file) = self.file.as_mut() else { return Err(refused("not held back")) };
        let mut source = sys::open_read(other)?;
        let meta = source.metadata()?;
        if !meta.is_file() || sys::link_count(other, &meta)? != 1 {
            return Err(refused("not a regular file with one link"));
        }
        if sys::take_lease(&source) != sys::Lease::Held {
            return Err(refused("open for writing, or no lease"));
        }
        sys::copy_metadata(&source, &meta, file, &self.path)?;
        file.set_len(0)?;
        file.rewind()?;
        io::copy(&mut source, file)?;
        let times =
            std::fs::FileTimes::new().set_accessed(meta.accessed()?).set_modified(meta.modified()?);
        file.set_times(times)?;
        file.sync_all()?;
        if sys::lease_broken(&source) {
            return Err(refused("opened for writing while it was copied"));
        }
        Ok(())
    }

    /// Lets whoever waits on our file go on (ends the lease); true if it was held back.
    pub fn release(&mut self) -> bool {
        self.file.take().is_some()
    }

    /// Leaves the name alone when dropped: a rename put our file in place.
    pub fn keep(&mut self) {
        self.remove = false;
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        self.file = None;
        if self.remove && holds(&self.path, self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// True if `path` holds the file `id`, where an exchange keeps ids (on Windows it is trusted:
/// `ReplaceFileW` may give the replacement the replaced file's identity).
pub fn holds(path: &Path, id: (u64, u64)) -> bool {
    !sys::SWAP_KEEPS_FILE_IDS || matches!(sys::path_file_id(path), Ok(Some(now)) if now == id)
}

/// Writes `bytes` into `file` (named `to_path`), gives it `from`'s metadata (and times, if
/// `keep_times`: after the last write, which would move them), syncs it.
fn fill(
    file: &mut File,
    bytes: &[u8],
    from: &File,
    meta: &Metadata,
    to_path: &Path,
    keep_times: bool,
) -> io::Result<()> {
    file.write_all(bytes)?;
    sys::copy_metadata(from, meta, file, to_path)?;
    if keep_times {
        sys::keep_times(file, meta)?;
    }
    file.sync_all()
}

// ---- the start-up clean-up --------------------------------------------------------------------

/// What [`remove_leftovers_in`] did.
#[derive(Debug, Default)]
pub struct Leftovers {
    /// Removed: provably ours.
    pub removed: Vec<PathBuf>,
    /// Named like ours but not provably ours, with why: left as they are.
    pub kept: Vec<(PathBuf, &'static str)>,
}

/// What to do with a file named like one of ours.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Remove,
    Keep(&'static str),
    /// Its process may still be using it.
    Leave,
}

/// Removes the temp files a killed process of ours left in one directory of the tree (the
/// previous owner's, SIGKILLed in the middle of a stamp), `dir`, reached beneath the root and
/// held (`shown`: its path as the user knows it), and only what is provably ours: a name of
/// ours ([`parse`]) whose process is not running, holding a regular file with one link, owned
/// by this user, that is
/// - the temp file itself (its id is the one in its name), or
/// - what an exchange displaced, holding exactly the bytes the replace read (its checksum is
///   the one in its name), or
/// - an empty file made a moment before its rename.
///
/// Anything else named like ours — a directory, a symlink, a user's newer file an exchange
/// displaced in a race, a file of an older version's names — is kept, and reported in `done`.
/// (The walk over the tree's directories is [`crate::walk::remove_leftovers`].)
pub fn remove_leftovers_in(dir: &sys::Beneath, shown: &Path, done: &mut Leftovers) {
    let Ok(names) = std::fs::read_dir(dir.dir_path()) else { return };
    for name in names.flatten().map(|e| e.file_name()) {
        if !name.to_string_lossy().ends_with(SUFFIX) {
            continue;
        }
        let shown = shown.join(&name);
        match judge(dir, &name) {
            Verdict::Remove => {
                if std::fs::remove_file(dir.path(&name)).is_ok() {
                    done.removed.push(shown);
                }
            }
            Verdict::Keep(why) => done.kept.push((shown, why)),
            Verdict::Leave => {}
        }
    }
}

/// Whether the file `name` in `dir` is provably ours (see [`remove_leftovers_in`]).
fn judge(dir: &sys::Beneath, name: &OsStr) -> Verdict {
    let Some(ours) = parse(name) else {
        return Verdict::Keep("not in the form this version writes; left as it is");
    };
    if sys::process_alive(ours.pid) {
        return Verdict::Leave;
    }
    let path = dir.path(name);
    let Ok(meta) = std::fs::symlink_metadata(&path) else { return Verdict::Leave };
    if !meta.file_type().is_file() {
        return Verdict::Keep("not a regular file; left as it is");
    }
    if !sys::owned_by_me(&meta) || !sys::link_count(&path, &meta).is_ok_and(|n| n == 1) {
        return Verdict::Keep("another user's, or it has other names; left as it is");
    }
    match ours.kind {
        Kind::Fresh if meta.len() == 0 => return Verdict::Remove,
        Kind::Fresh => return Verdict::Keep("not empty; left as it is"),
        Kind::Made { id } if matches!(sys::path_file_id(&path), Ok(Some((_, now))) if now == id) => {
            return Verdict::Remove;
        }
        Kind::Rescue => return Verdict::Keep("it holds bytes of yours that were being put back"),
        Kind::Made { .. } | Kind::Backup => {}
    }
    // What an exchange displaced: removed only if it holds exactly the bytes the replace read.
    let displaced = "it may hold your newer version of the file beside it; left as it is";
    if meta.len() > crate::fsio::MAX_FILE_SIZE {
        return Verdict::Keep(displaced);
    }
    let mut bytes = Vec::new();
    let read = sys::open_read(&path)
        .and_then(|f| f.take(crate::fsio::MAX_FILE_SIZE + 1).read_to_end(&mut bytes));
    if read.is_ok() && fnv1a(&bytes) == ours.sum {
        Verdict::Remove
    } else {
        Verdict::Keep(displaced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_and_parse_back() {
        for name in ["a.py", &"x".repeat(255), &"é".repeat(127), "no-dots", ".hidden.py"] {
            let p = Path::new("/d").join(name);
            let made = made_name(&stem(&p), u32::MAX, u64::MAX, Some(u64::MAX));
            let rescue = made_name(&stem(&p), u32::MAX, u64::MAX, None);
            let fresh = fresh_name(&stem(&p), u32::MAX, u64::MAX, u64::MAX);
            let backup = format!("{}.was99{SUFFIX}", made.strip_suffix(SUFFIX).unwrap());
            for n in [&made, &fresh, &backup, &rescue] {
                assert!(n.len() <= 255, "{} bytes: {n}", n.len());
                assert!(n.starts_with(&format!(".{}", &name[..name.len().min(8)])), "{n}");
            }
            let parsed = |n: &str| parse(OsStr::new(n)).unwrap();
            assert_eq!(
                parsed(&made),
                TempName { pid: u32::MAX, kind: Kind::Made { id: u64::MAX }, sum: u64::MAX }
            );
            assert_eq!(parsed(&fresh).kind, Kind::Fresh);
            assert_eq!(parsed(&backup).kind, Kind::Backup);
            assert_eq!(parsed(&rescue).kind, Kind::Rescue);
        }
        // A cut name keeps whole characters.
        let cut = stem(Path::new(&"é".repeat(127)));
        assert_eq!(cut.len(), MAX_STEM);
        for other in [
            ".a.py.Ab12Cd.fw-tmp",
            ".a.py.1-2.fw-tmp",
            ".a.py.1-2-3-4.fw-tmp",
            "a.py.1-2-3.fw-tmp",
            ".a.py.1-+2-3.fw-tmp",
            ".a.py.1-2-3.fw-tmpx",
        ] {
            assert_eq!(parse(OsStr::new(other)), None, "{other}");
        }
    }

    /// A process id nobody runs any more.
    #[cfg(unix)]
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// Puts `bytes` at `dir/NAME` for our name `.{stem}.{pid}-{id}-{sum}.fw-tmp`, `id` being
    /// the new file's own inode number unless given; returns the path.
    #[cfg(unix)]
    fn plant(
        dir: &Path,
        stem: &str,
        pid: u32,
        id: Option<u64>,
        sum: Option<u64>,
        bytes: &[u8],
    ) -> PathBuf {
        use std::os::unix::fs::MetadataExt;
        let staged = dir.join("staged");
        std::fs::write(&staged, bytes).unwrap();
        let id = id.unwrap_or_else(|| std::fs::metadata(&staged).unwrap().ino());
        let path = dir.join(made_name(stem, pid, id, sum));
        std::fs::rename(&staged, &path).unwrap();
        path
    }

    /// The start-up clean-up removes a killed process's temp file (its own inode number in its
    /// name), what its exchange displaced if it holds exactly the bytes the name's checksum
    /// says, and an empty fresh file; and nothing else: not another file at such a name, not a
    /// rescue, not a live process's files, not a directory or a symlink (nor what it points
    /// to), not a file with two links, not an older version's names, not anything in a
    /// directory reached through a symlink, not the user's files.
    #[cfg(unix)]
    #[test]
    fn the_clean_up_removes_only_what_is_provably_ours() {
        use std::os::unix::fs::MetadataExt;
        let top = tempfile::tempdir().unwrap();
        let (root, outside) = (top.path().join("root"), top.path().join("outside"));
        let sub = root.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let (dead, alive) = (dead_pid(), std::process::id());
        let old = b"what the stamp read\n";
        let user = sub.join("a.py");
        std::fs::write(&user, "the user's file\n").unwrap();
        let other_ino = std::fs::metadata(&user).unwrap().ino();
        let mut gone = vec![
            plant(&sub, "a.py", dead, None, Some(fnv1a(old)), b"stamped\n"),
            plant(&root, "b.py", dead, Some(other_ino), Some(fnv1a(old)), old),
        ];
        let fresh = sub.join(fresh_name("c.py", dead, 7, 0));
        std::fs::write(&fresh, "").unwrap();
        gone.push(fresh);
        let mut stay = vec![
            // A newer file an exchange displaced: other bytes than the ones the stamp read.
            plant(&sub, "d.py", dead, Some(other_ino), Some(fnv1a(old)), b"newer\n"),
            // A rescue, and a fresh name that is not empty.
            plant(&sub, "e.py", dead, None, None, b"the user's late write\n"),
            sub.join(fresh_name("f.py", dead, 8, 0)),
            // Files of a process that runs.
            plant(&sub, "g.py", alive, None, Some(fnv1a(old)), b"stamped\n"),
            // An older version's name, and the user's own look-alike.
            sub.join(".h.py.Ab12Cd.fw-tmp"),
        ];
        std::fs::write(&stay[2], "not empty\n").unwrap();
        std::fs::write(&stay[4], "the user's\n").unwrap();
        // Two names.
        let linked = plant(&sub, "i.py", dead, None, Some(fnv1a(old)), b"stamped\n");
        std::fs::hard_link(&linked, sub.join("i-too.py")).unwrap();
        stay.push(linked);
        // A directory and a symlink at our names; the symlink points at a provable file
        // outside the root.
        let outside_temp = plant(&outside, "j.py", dead, None, Some(fnv1a(old)), b"stamped\n");
        let named_dir = sub.join(made_name("k.py", dead, 1, Some(fnv1a(b""))));
        std::fs::create_dir(&named_dir).unwrap();
        let named_link = sub.join(made_name("l.py", dead, 1, Some(fnv1a(b""))));
        std::os::unix::fs::symlink(&outside_temp, &named_link).unwrap();
        stay.extend([named_dir, named_link, outside_temp]);
        // A directory of the root that is a symlink to one holding a provable file.
        let through = plant(&outside, "m.py", dead, None, Some(fnv1a(old)), b"stamped\n");
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        stay.push(through);

        let done = crate::walk::remove_leftovers(&root);
        for p in &gone {
            assert!(std::fs::symlink_metadata(p).is_err(), "{} stays", p.display());
        }
        for p in &stay {
            assert!(std::fs::symlink_metadata(p).is_ok(), "{} was removed", p.display());
        }
        assert_eq!(std::fs::read(&user).unwrap(), b"the user's file\n");
        assert_eq!(done.removed.len(), gone.len(), "{:?}", done.removed);
        // Reported, each with why; the live process's are not (they are its own business).
        assert_eq!(done.kept.len(), stay.len() - 3, "{:#?}", done.kept);
    }
}
