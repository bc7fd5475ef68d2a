//! A small cache of recently interned short strings, checked before the string table.
//!
//! PyTorch pickles some values as a fresh string per event: `compile_context` is a new `'N/A'`
//! in every trace event, so interning ran millions of times on the same three bytes. Here a
//! string of up to 15 bytes is packed, with its length, into one `u128` key; a direct-mapped
//! table of 64 slots maps that key to its id. A hit skips UTF-8 validation, hashing and the
//! table probe; a miss costs one compare.

use crate::model::StrId;

const SLOTS: usize = 64;
/// Longest string cached: 15 bytes, the 16th byte of the key is the length.
const MAX_LEN: usize = 15;
/// Never a key: its length byte would say 255.
const EMPTY: u128 = u128::MAX;

pub struct RecentStrings {
    slots: [(u128, StrId); SLOTS],
}

impl Default for RecentStrings {
    fn default() -> Self {
        RecentStrings { slots: [(EMPTY, 0); SLOTS] }
    }
}

impl RecentStrings {
    /// The key of `bytes`, or `None` when they are too long to cache.
    #[inline]
    pub fn key(bytes: &[u8]) -> Option<u128> {
        if bytes.len() > MAX_LEN {
            return None;
        }
        let packed = bytes.iter().rev().fold(0u128, |k, &b| k << 8 | b as u128);
        Some(packed | (bytes.len() as u128) << 120)
    }

    #[inline]
    fn slot(key: u128) -> usize {
        let folded = (key as u64) ^ ((key >> 64) as u64);
        (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize
    }

    #[inline]
    pub fn get(&self, key: u128) -> Option<StrId> {
        let (k, id) = self.slots[Self::slot(key)];
        (k == key).then_some(id)
    }

    #[inline]
    pub fn insert(&mut self, key: u128, id: StrId) {
        self.slots[Self::slot(key)] = (key, id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_slots_remember() {
        let words: [&[u8]; 6] = [b"", b"\0", b"N/A", b"N/A\0", b"a", b"fifteen bytes!!"];
        let keys: Vec<u128> = words.iter().map(|w| RecentStrings::key(w).unwrap()).collect();
        for (i, a) in keys.iter().enumerate() {
            assert!(keys[i + 1..].iter().all(|b| a != b), "{:?}", words[i]);
            assert_ne!(*a, EMPTY);
        }
        assert_eq!(RecentStrings::key(b"sixteen bytes!!!"), None);
        let mut cache = RecentStrings::default();
        assert_eq!(cache.get(keys[2]), None);
        cache.insert(keys[2], 7);
        assert_eq!(cache.get(keys[2]), Some(7));
        assert_eq!(cache.get(keys[3]), None);
    }
}
