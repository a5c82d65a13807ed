//! A change written into the file itself rather than by an exchange: for a file with several
//! hard links, which a new file would split.

use std::io::{self, Read, Seek};
use std::path::Path;

use super::{file_kind, WriteError};
use crate::sys;

/// A file with several hard links is one file under each name, and a new file would split
/// them: a change that only takes bytes out of it (a resolve) is written into it in place
/// instead — the bytes from the first one that differs, then the file cut to its new length,
/// then synced. Never more is written than the file holds, so a full disk cannot leave it
/// short. It is written under a write lease where the OS has them (whoever opens the file
/// meanwhile waits; [`WriteError::Busy`] while another program has it open), after it was
/// read again through the descriptor written to and found to hold exactly `expected`
/// ([`WriteError::Conflict`] if not). A change that would make it longer is refused.
pub fn shrink_in_place(path: &Path, expected: &[u8], new: &[u8]) -> Result<(), WriteError> {
    use std::io::{SeekFrom, Write};
    let io_err = WriteError::io(path);
    let mut file = sys::open_read_write(path).map_err(|e| match sys::refusal_kind(&e) {
        Some(kind) => WriteError::NotRegular { path: path.to_path_buf(), kind },
        None => io_err(e),
    })?;
    let meta = file.metadata().map_err(&io_err)?;
    if !meta.file_type().is_file() {
        return Err(WriteError::NotRegular { path: path.to_path_buf(), kind: file_kind(&meta) });
    }
    if new.len() > expected.len() {
        let why = "it has several hard links (a new file would split them), and the change \
                   would make it longer";
        return Err(WriteError::Untaggable { path: path.to_path_buf(), why: why.to_string() });
    }
    let lease = sys::take_write_lease(&file);
    if lease == sys::Lease::Busy {
        return Err(WriteError::Busy { path: path.to_path_buf() });
    }
    let mut write = || -> io::Result<bool> {
        let mut now = Vec::with_capacity(expected.len());
        (&file).take(expected.len() as u64 + 1).read_to_end(&mut now)?;
        if now != expected {
            return Ok(false);
        }
        let from = new.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(new.len());
        file.seek(SeekFrom::Start(from as u64))?;
        file.write_all(&new[from..])?;
        file.set_len(new.len() as u64)?;
        file.sync_all()?;
        Ok(true)
    };
    let written = write();
    if lease == sys::Lease::Held {
        sys::release_lease(&file);
    }
    match written {
        Ok(true) => Ok(()),
        Ok(false) => Err(WriteError::Conflict { path: path.to_path_buf() }),
        Err(e) => Err(io_err(e)),
    }
}
