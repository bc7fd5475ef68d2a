//! A small, fast, non-cryptographic hasher for the interning tables (the Fx hash of rustc and
//! Firefox: add a word, multiply by a constant).
//!
//! The default SipHash resists hash flooding, but here it ran millions of times per snapshot
//! on short keys (frame-id lists, short strings) and showed up in profiles. The tables only
//! map content to ids; nothing iterates them, so the hash never affects output.

use std::hash::{BuildHasherDefault, Hasher};

/// `HashMap` hasher state; use through [`FxBuildHasher`].
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;

/// An odd constant with well-spread bits (rustc-hash 2).
const K: u64 = 0xf135_7aea_2e62_a9c5;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = self.hash.wrapping_add(word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The top byte holds the length, so that "a" and "a\0" differ.
            let tail = rest.iter().rev().fold(0u64, |v, &b| v << 8 | b as u64);
            self.add(tail | (rest.len() as u64) << 56);
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves its best bits at the top; the table indexes with the low bits.
        self.hash.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn distinct_short_keys_spread_over_low_bits() {
        let b = FxBuildHasher::default();
        let mut buckets = std::collections::HashSet::new();
        for i in 0u32..1024 {
            buckets.insert(b.hash_one([i, 7]) & 0xfff);
        }
        assert!(buckets.len() > 900, "{} buckets used", buckets.len());
        assert_ne!(b.hash_one("ab"), b.hash_one("ba"));
        assert_ne!(b.hash_one(""), b.hash_one("\0"));
        assert_ne!(b.hash_one("a"), b.hash_one("a\0"));
    }
}
