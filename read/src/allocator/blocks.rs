//! The allocator's blocks by address: an ordered map from a block's address to the block that
//! also answers a block's neighbours cheaply, which the tracked pass asks for on every block
//! event (the hole a block splits or re-joins lies between them).
//!
//! Two levels: runs of at most [`RUN`] blocks sorted by address, and the first address of each
//! run, sorted. A lookup is a binary search over the runs' first addresses, then one inside a
//! run — contiguous memory, where `BTreeMap` descended a node chain for each of the three
//! searches a block event made (an insert or remove, and a range query on each side: each
//! `range` finds both its ends), and those descents were a large part of the allocator's pass
//! (docs/design/05). A run that fills splits in two, one that empties goes; with
//! ~1,300 live blocks that is ~40 runs, with 1 M ~30 K, so a split's insert into the run list
//! stays small next to the events between splits. Written here because no well-kept crate
//! offers an ordered map with neighbour queries from one search on stable Rust (std's
//! `BTreeMap` cursors are unstable).

use super::Block;

/// What [`Blocks::set`] replaced, and the neighbours of its address.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Set {
    pub old: Option<Block>,
    pub before: Option<Block>,
    pub after: Option<Block>,
}

/// Blocks a run holds before it splits.
const RUN: usize = 64;

#[derive(Debug, Clone, Default)]
pub struct Blocks {
    /// Non-empty runs, each sorted by address; every address of a run is below the next run's.
    runs: Vec<Vec<Block>>,
    /// `runs[i][0].addr`.
    firsts: Vec<u64>,
    len: usize,
}

impl PartialEq for Blocks {
    fn eq(&self, other: &Blocks) -> bool {
        self.len == other.len && self.values().eq(other.values())
    }
}

impl Blocks {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The run that holds `addr` or would: the last whose first address is at most `addr`
    /// (the first run for an address below every run).
    fn run_of(&self, addr: u64) -> usize {
        self.firsts.partition_point(|&f| f <= addr).saturating_sub(1)
    }

    /// Where `addr` is in its run: `Ok(i)` if there, `Err(i)` where it would go.
    fn find(&self, addr: u64) -> (usize, Result<usize, usize>) {
        let r = self.run_of(addr);
        let at = self.runs.get(r).map_or(Err(0), |run| run.binary_search_by_key(&addr, |b| b.addr));
        (r, at)
    }

    pub fn get_mut(&mut self, addr: u64) -> Option<&mut Block> {
        match self.find(addr) {
            (r, Ok(i)) => Some(&mut self.runs[r][i]),
            _ => None,
        }
    }

    /// Puts `b` at `b.addr`; the block that was there, if any.
    pub fn insert(&mut self, b: Block) -> Option<Block> {
        self.set(b.addr, Some(b)).old
    }

    /// Puts `new` at `addr` (`None`: takes the block there out), from one search: the block
    /// that was there and its two neighbours, the blocks just below and just above `addr` (which
    /// a change at `addr` does not move; the tracked pass's hole lies between them).
    pub fn set(&mut self, addr: u64, new: Option<Block>) -> Set {
        let (r, at) = self.find(addr);
        let (before, after) = self.neighbours(r, at);
        let (before, after) = (before.copied(), after.copied());
        let old = match (at, new) {
            (Ok(i), Some(b)) => Some(std::mem::replace(&mut self.runs[r][i], b)),
            (Ok(i), None) => Some(self.remove_at(r, i)),
            (Err(i), Some(b)) => {
                self.insert_at(r, i, b);
                None
            }
            (Err(_), None) => None,
        };
        Set { old, before, after }
    }

    /// Inserts `b` at position `i` of run `r` (where [`Self::find`] said it goes).
    fn insert_at(&mut self, r: usize, i: usize, b: Block) {
        self.len += 1;
        if self.runs.is_empty() {
            self.runs.push(vec![b]);
            self.firsts.push(b.addr);
            return;
        }
        let run = &mut self.runs[r];
        run.insert(i, b);
        self.firsts[r] = run[0].addr;
        if run.len() > RUN {
            let tail = run.split_off(run.len() / 2);
            self.firsts.insert(r + 1, tail[0].addr);
            self.runs.insert(r + 1, tail);
        }
    }

    /// Takes out the block at position `i` of run `r`.
    fn remove_at(&mut self, r: usize, i: usize) -> Block {
        self.len -= 1;
        let run = &mut self.runs[r];
        let b = run.remove(i);
        if run.is_empty() {
            self.runs.remove(r);
            self.firsts.remove(r);
        } else {
            self.firsts[r] = run[0].addr;
        }
        b
    }

    /// The block with the highest address below the one [`Self::find`] placed at `(r, at)` and
    /// the one with the lowest above it. Before: the one before that place in its run, else the
    /// previous run's last (every run's addresses are below the next run's first). After: the
    /// one after that place in its run, else the next run's first, which is above the address
    /// since its run is the last starting at or below it.
    fn neighbours(&self, r: usize, at: Result<usize, usize>) -> (Option<&Block>, Option<&Block>) {
        let Some(run) = self.runs.get(r) else { return (None, None) };
        let (below, above) = match at {
            Ok(i) => (i, i + 1),
            Err(i) => (i, i),
        };
        let before = match below.checked_sub(1) {
            Some(j) => run.get(j),
            None => r.checked_sub(1).and_then(|p| self.runs[p].last()),
        };
        let after = run.get(above).or_else(|| self.runs.get(r + 1).and_then(|next| next.first()));
        (before, after)
    }

    /// Every block, by address.
    pub fn values(&self) -> impl Iterator<Item = &Block> + Clone {
        self.runs.iter().flatten()
    }

    /// The blocks whose addresses lie in `range`, by address.
    pub fn range(&self, range: std::ops::Range<u64>) -> impl Iterator<Item = &Block> {
        let (r, at) = self.find(range.start);
        let i = at.unwrap_or_else(|i| i);
        let first = self.runs.get(r).map_or(&[][..], |run| &run[i.min(run.len())..]);
        let end = range.end;
        first.iter().chain(self.runs.iter().skip(r + 1).flatten()).take_while(move |b| b.addr < end)
    }
}

impl FromIterator<Block> for Blocks {
    /// Blocks in any order; of two at one address the last stays.
    fn from_iter<I: IntoIterator<Item = Block>>(iter: I) -> Blocks {
        let mut all: Vec<Block> = iter.into_iter().collect();
        // A stable sort keeps each address's blocks in arrival order: the last one wins below.
        all.sort_by_key(|b| b.addr);
        let mut dedup: Vec<Block> = Vec::with_capacity(all.len());
        for b in all {
            match dedup.last_mut() {
                Some(last) if last.addr == b.addr => *last = b,
                _ => dedup.push(b),
            }
        }
        let len = dedup.len();
        let runs: Vec<Vec<Block>> = dedup.chunks(RUN / 2).map(<[Block]>::to_vec).collect();
        let firsts = runs.iter().map(|r| r[0].addr).collect();
        Blocks { runs, firsts, len }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn block(addr: u64) -> Block {
        Block { addr, size: addr % 7 + 1, requested: 1, pending_free: addr.is_multiple_of(3) }
    }

    /// Random inserts, removes and queries give what a `BTreeMap` gives, through many splits
    /// and emptied runs.
    #[test]
    fn blocks_answer_as_an_ordered_map_does() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut ours, mut map) = (Blocks::default(), BTreeMap::<u64, Block>::new());
        for step in 0..60_000 {
            // Addresses from a few thousand, so inserts hit present ones and removes absent ones.
            let addr = next() % 3000 * 16;
            match next() % 5 {
                0 => assert_eq!(ours.insert(block(addr)), map.insert(addr, block(addr)), "step {step}"),
                // Set, take out, or set again what is there (the neighbours alone), at a present
                // address or an absent one (`addr + 1`).
                1 | 2 => {
                    let at = addr + next() % 2;
                    let new = match next() % 3 {
                        0 => Some(block(at)),
                        1 => None,
                        _ => map.get(&at).copied(),
                    };
                    let before = map.range(..at).next_back().map(|(_, b)| *b);
                    let after = map.range(at + 1..).next().map(|(_, b)| *b);
                    let old = match new {
                        Some(b) => map.insert(at, b),
                        None => map.remove(&at),
                    };
                    assert_eq!(ours.set(at, new), Set { old, before, after }, "step {step}");
                }
                _ => {
                    assert_eq!(ours.get_mut(addr).copied(), map.get(&addr).copied());
                    let hi = addr + next() % 4000;
                    assert!(ours.range(addr..hi).eq(map.range(addr..hi).map(|(_, b)| b)), "step {step}");
                }
            }
            assert_eq!(ours.len(), map.len());
            if step % 20_000 == 0 {
                // Drain most, so runs empty and go.
                for a in map.keys().copied().collect::<Vec<_>>().into_iter().take(map.len() * 9 / 10) {
                    assert_eq!(ours.set(a, None).old, map.remove(&a));
                }
            }
        }
        assert!(ours.values().eq(map.values()));
        let rebuilt: Blocks = map.values().rev().copied().collect();
        assert_eq!(rebuilt, ours);
        assert!(rebuilt.values().eq(map.values()));
        // Queries on an empty map.
        let empty = Blocks::default();
        assert!(empty.clone().set(5, None) == Set { old: None, before: None, after: None });
        assert!(empty.range(0..9).next().is_none());
    }
}
