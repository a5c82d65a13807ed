//! Renames inside the root, paired: a rename's first half (the path moved away, with what was
//! waiting there) waits for its second half — by the OS's cookie, or, where there is none, as
//! the very next event — and the files scheduled below the new path keep where they were.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use super::events::is_second_half;
use super::pending::Pending;

/// How many renames wait for their second half (a rename's two events are paired by the OS's
/// cookie; one moved out of the root never gets one).
const MOVES_WAITING: usize = 256;

/// The first half of a rename: the path moved away, and the files below it that were waiting
/// for quiet (by their path relative to it: `""` for the path itself).
pub(super) struct MovedAway {
    from: PathBuf,
    pending: HashMap<PathBuf, Pending>,
}

/// A rename's second half being handled: files scheduled below `to` were at `from`.
struct Moving {
    from: PathBuf,
    to: PathBuf,
    pending: HashMap<PathBuf, Pending>,
}

/// The renames waiting for their second half, and the one being handled.
#[derive(Default)]
pub(super) struct Renames {
    /// First halves by the OS's cookie (oldest first in `order`).
    moves: HashMap<usize, MovedAway>,
    order: VecDeque<usize>,
    /// A first half without a cookie (`ReadDirectoryChangesW`, FSEvents), paired with the very
    /// next event if that is a second half.
    untracked: Option<MovedAway>,
    /// Set while a rename's second half is being scheduled.
    moving: Option<Moving>,
}

impl Renames {
    /// A rename's first half: `from` moved away with what waited there (`pending`), to the
    /// second half if one comes (by the OS's cookie `tracker`, or, without one, as the very
    /// next event).
    pub fn moved_away(
        &mut self,
        from: &Path,
        pending: HashMap<PathBuf, Pending>,
        tracker: Option<usize>,
    ) {
        let away = MovedAway { from: from.to_path_buf(), pending };
        match tracker {
            Some(cookie) => {
                if self.moves.insert(cookie, away).is_none() {
                    self.order.push_back(cookie);
                }
                while self.order.len() > MOVES_WAITING {
                    if let Some(oldest) = self.order.pop_front() {
                        self.moves.remove(&oldest);
                    }
                }
            }
            None => self.untracked = Some(away),
        }
    }

    /// The first half of the rename whose second half is path `i` of `event` (`path`), if it
    /// is one. A first half without a cookie waits for the very next event only.
    pub fn moved_here(
        &mut self,
        event: &notify::Event,
        i: usize,
        path: &Path,
    ) -> Option<MovedAway> {
        let untracked = self.untracked.take();
        if !is_second_half(&event.kind, i, path) {
            return None;
        }
        match event.attrs.tracker() {
            Some(cookie) => {
                self.order.retain(|&c| c != cookie);
                self.moves.remove(&cookie)
            }
            None => untracked,
        }
    }

    /// Files scheduled below `to` from now on were where `away` was.
    pub fn arrive(&mut self, away: Option<MovedAway>, to: &Path) {
        self.moving =
            away.map(|m| Moving { from: m.from, to: to.to_path_buf(), pending: m.pending });
    }

    /// The rename being handled, if any, is done.
    pub fn done(&mut self) {
        self.moving = None;
    }

    /// The OS dropped events: a first half without a cookie will not get its second.
    pub fn lost_events(&mut self) {
        self.untracked = None;
    }

    /// Where `path` was, if it is below the path a rename being handled moved to, and what of
    /// it was waiting there.
    pub fn was(&mut self, path: &Path) -> Option<(PathBuf, Option<Pending>)> {
        let moving = self.moving.as_mut()?;
        let rel = path.strip_prefix(&moving.to).ok()?;
        let was =
            if rel.as_os_str().is_empty() { moving.from.clone() } else { moving.from.join(rel) };
        Some((was, moving.pending.remove(rel)))
    }
}
