//! The id a stamp gives an ask: `fw-` and 8 lowercase hex digits, written into the file as a
//! tag `[fw-…]` right after the trigger. The one definition of that format.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use memchr::memmem;

/// The id of one ask, `fw-1a2b3c4d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MarkerId(u32);

/// Text that is not an ask id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an ask id (fw- and 8 lowercase hex digits)")]
pub struct BadId(pub String);

const PREFIX: &str = "fw-";
const HEX_DIGITS: usize = 8;

impl MarkerId {
    /// Length of a tag in a file: `[`, the id, `]`.
    pub const TAG_LEN: usize = 1 + PREFIX.len() + HEX_DIGITS + 1;

    /// The id of a tag at the start of `bytes` (`[fw-xxxxxxxx]…`), as it follows a trigger.
    pub fn from_tag(bytes: &[u8]) -> Option<MarkerId> {
        let tag = bytes.get(..Self::TAG_LEN)?;
        let inner = tag.strip_prefix(b"[")?.strip_suffix(b"]")?;
        Self::from_bytes(inner)
    }

    /// A random id (`random` yields e.g. a v4 UUID's bits) that is not in `taken`: redrawn
    /// until it is. With the ids of [`MarkerId::all_in`] the file in `taken`, a new tag never
    /// names an old ask.
    pub fn fresh(taken: &HashSet<MarkerId>, mut random: impl FnMut() -> u128) -> MarkerId {
        loop {
            let id = MarkerId((random() >> 96) as u32);
            if !taken.contains(&id) {
                return id;
            }
        }
    }

    /// Every id written anywhere in `src`, in a tag or not, also as the start of a longer run
    /// of hex digits: one pass over the bytes, so that drawing many fresh ids for one file costs
    /// a lookup each, not a search of the file each.
    pub fn all_in(src: &[u8]) -> HashSet<MarkerId> {
        let len = PREFIX.len() + HEX_DIGITS;
        memmem::find_iter(src, PREFIX.as_bytes())
            .filter_map(|at| src.get(at..at + len))
            .filter_map(MarkerId::from_bytes)
            .collect()
    }

    /// The tag as written into a file: `[fw-xxxxxxxx]`.
    pub fn tag(&self) -> String {
        format!("[{self}]")
    }

    /// `fw-` + exactly 8 lowercase hex digits, nothing around them.
    fn from_bytes(bytes: &[u8]) -> Option<MarkerId> {
        let hex = bytes.strip_prefix(PREFIX.as_bytes())?;
        let lower_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        if hex.len() != HEX_DIGITS || !hex.iter().all(lower_hex) {
            return None;
        }
        let hex = std::str::from_utf8(hex).ok()?;
        u32::from_str_radix(hex, 16).ok().map(MarkerId)
    }
}

/// A v4 UUID's bits: the randomness [`MarkerId::fresh`] draws from in production.
pub fn uuid_random() -> u128 {
    uuid::Uuid::new_v4().as_u128()
}

impl fmt::Display for MarkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{:0width$x}", self.0, width = HEX_DIGITS)
    }
}

/// Parses an id as a user or a client may type it: `fw-1a2b3c4d`, optionally in the tag's
/// brackets and surrounded by whitespace.
impl FromStr for MarkerId {
    type Err = BadId;

    fn from_str(text: &str) -> Result<MarkerId, BadId> {
        let trimmed = text.trim();
        let inner = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(trimmed);
        Self::from_bytes(inner.as_bytes()).ok_or_else(|| BadId(text.to_string()))
    }
}

impl serde::Serialize for MarkerId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for MarkerId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_the_exact_shape() {
        let id: MarkerId = "fw-0123abcd".parse().unwrap();
        assert_eq!(id.to_string(), "fw-0123abcd");
        assert_eq!(id.tag(), "[fw-0123abcd]");
        assert_eq!(" [fw-0123abcd] ".parse::<MarkerId>(), Ok(id));
        for bad in ["fw-0123ABCD", "fw-0123abc", "fw-0123abcde", "[fw-0123abcd", "0123abcd", ""] {
            let err = bad.parse::<MarkerId>().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("{bad:?} is not an ask id (fw- and 8 lowercase hex digits)")
            );
        }
    }

    #[test]
    fn tags_after_a_trigger() {
        assert_eq!(
            MarkerId::from_tag(b"[fw-0123abcd] x").map(|i| i.to_string()).as_deref(),
            Some("fw-0123abcd")
        );
        assert_eq!(MarkerId::from_tag(b"[fw-0123ABCD] x"), None);
        assert_eq!(MarkerId::from_tag(b"[fw-0123abc] x"), None);
        assert_eq!(MarkerId::from_tag(b"[fw-0123abcd"), None);
        assert_eq!(MarkerId::TAG_LEN, "[fw-0123abcd]".len());
    }

    #[test]
    fn fresh_ids_avoid_taken_ones_and_ids_in_the_file() {
        let mut n = 0u128;
        let mut counter = || {
            n += 1;
            n << 96
        };
        let mut taken = MarkerId::all_in(b"see fw-00000001, fw-000000049 and fw-0000005 fw-");
        let ids = |set: &HashSet<MarkerId>| {
            let mut ids: Vec<String> = set.iter().map(|id| id.to_string()).collect();
            ids.sort();
            ids
        };
        assert_eq!(ids(&taken), ["fw-00000001", "fw-00000004"]);
        taken.insert("fw-00000002".parse().unwrap());
        let id = MarkerId::fresh(&taken, &mut counter);
        assert_eq!(id.to_string(), "fw-00000003");
        taken.insert(id);
        assert_eq!(MarkerId::fresh(&taken, &mut counter).to_string(), "fw-00000005");
    }
}
