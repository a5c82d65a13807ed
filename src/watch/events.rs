//! Each path of an OS event sorted into what it is to the watcher before anything is done with
//! it (as watchexec does): a git directory's, the root's, a repository made, a path gone from
//! the tree, or one changed in it. [`super::state`] then acts on the kind.

use std::ffi::OsStr;
use std::path::Path;

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind, RenameMode};

use super::repos::Repos;

/// What one path of an event is to the watcher.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PathEvent {
    /// In the git directory of repository `repo` (its index lock, its exclude file);
    /// `moved_away`: deleted or renamed away.
    InGitDir { repo: usize, moved_away: bool },
    /// The root's parent went while the root was gone: nothing is left to watch.
    ParentGone,
    /// Outside the root: none of ours.
    Outside,
    /// The root itself: gone (`moved_away`), or, while it is gone, perhaps made again.
    Root { moved_away: bool },
    /// A `.git` in the tree: a repository from now on (`git init`, a clone), unless
    /// `moved_away`.
    DotGit { moved_away: bool },
    /// Deleted or renamed away from inside the root; `renamed`: a rename's first half, whose
    /// second half may follow.
    Gone { renamed: bool },
    /// Made, written, or a rename's second half, inside the root; `written`: the event can
    /// mean new content (not a read, nor an attribute the content does not depend on).
    Changed { written: bool },
}

/// What the root, the root's state and its repositories make path `i` of `event`, `path`.
pub(super) fn classify(
    event: &notify::Event,
    (i, path): (usize, &Path),
    root: &Path,
    root_gone: bool,
    repos: &Repos,
) -> PathEvent {
    let kind = &event.kind;
    let moved_away = is_moved_away(kind, i, path);
    if let Some(repo) = repos.git_dir_holding(path) {
        return PathEvent::InGitDir { repo, moved_away };
    }
    if root_gone && moved_away && Some(path) == root.parent() {
        return PathEvent::ParentGone;
    }
    if !path.starts_with(root) {
        return PathEvent::Outside;
    }
    if path == root {
        return PathEvent::Root { moved_away };
    }
    if path.file_name() == Some(OsStr::new(".git")) {
        return PathEvent::DotGit { moved_away };
    }
    if moved_away {
        return PathEvent::Gone { renamed: is_renamed_away(kind, i, path) };
    }
    PathEvent::Changed { written: is_written(kind) }
}

/// Deleted, or renamed away (a two-path rename names the old path first).
fn is_moved_away(kind: &EventKind, i: usize, path: &Path) -> bool {
    matches!(kind, EventKind::Remove(_)) || is_renamed_away(kind, i, path)
}

/// A rename's first half (a deletion moves nothing anywhere).
fn is_renamed_away(kind: &EventKind, i: usize, path: &Path) -> bool {
    match kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::From)) => true,
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => i == 0,
        _ => renamed_from_here(kind, path),
    }
}

/// A rename's second half: path `i` of the event, `path`, is where something was renamed to.
pub(super) fn is_second_half(kind: &EventKind, i: usize, path: &Path) -> bool {
    match kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => true,
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => i == 1,
        // FSEvents: "renamed", the old path first (gone), then the new one.
        EventKind::Modify(ModifyKind::Name(RenameMode::Any)) => path.exists(),
        _ => false,
    }
}

/// True if an event of this kind can mean new content.
fn is_written(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Create(_)
            | EventKind::Modify(_)
            | EventKind::Any
            | EventKind::Other
            | EventKind::Access(AccessKind::Close(AccessMode::Write))
    )
}

/// FSEvents says "renamed" without saying from or to: the path that no longer exists is the
/// one renamed away.
fn renamed_from_here(kind: &EventKind, path: &Path) -> bool {
    matches!(kind, EventKind::Modify(ModifyKind::Name(RenameMode::Any)))
        && std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use notify::event::{CreateKind, DataChange, RemoveKind};

    use super::*;

    /// Each path of an event is sorted by where it is and what the event says of it.
    #[test]
    fn paths_are_sorted_into_kinds() {
        let root = Path::new("/nowhere/root");
        let repos = Repos::of_root(root);
        let event = |kind: EventKind, paths: &[&str]| {
            let paths = paths.iter().map(PathBuf::from).collect();
            notify::Event { kind, paths, attrs: Default::default() }
        };
        let sort = |e: &notify::Event| -> Vec<PathEvent> {
            let paths = e.paths.iter().enumerate();
            paths.map(|(i, p)| classify(e, (i, p), root, false, &repos)).collect()
        };
        let renamed = event(
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            &["/nowhere/root/a.py", "/nowhere/root/b.py"],
        );
        let written = PathEvent::Changed { written: true };
        assert_eq!(sort(&renamed), [PathEvent::Gone { renamed: true }, written]);
        let removed = event(EventKind::Remove(RemoveKind::File), &["/nowhere/root/a.py"]);
        assert_eq!(sort(&removed), [PathEvent::Gone { renamed: false }]);
        let made = event(EventKind::Create(CreateKind::Folder), &["/nowhere/root/.git", "/x"]);
        assert_eq!(sort(&made), [PathEvent::DotGit { moved_away: false }, PathEvent::Outside]);
        let data = EventKind::Modify(ModifyKind::Data(DataChange::Content));
        assert_eq!(sort(&event(data, &["/nowhere/root"])), [PathEvent::Root { moved_away: false }]);
        let read = event(EventKind::Access(AccessKind::Read), &["/nowhere/root/a.py"]);
        assert_eq!(sort(&read), [PathEvent::Changed { written: false }]);
    }
}
