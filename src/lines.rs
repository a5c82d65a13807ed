//! Lines and hashes: where a line starts, and the hash that tells one version of a file's bytes
//! from another. Small, pure, and shared by every stage that looks at lines.

/// A hash of a file's bytes: what tells a change to new bytes from an event for bytes already
/// handled (our own stamp's rename, a touch).
pub fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// The byte offset where the line holding `offset` starts.
pub fn line_start(src: &[u8], offset: usize) -> usize {
    src[..offset].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}
