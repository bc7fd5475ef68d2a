//! The bytes a browser's web worker sends the page back ([`crate::platform::Offload`]'s
//! answers): little-endian words, lengths before what they count. A [`Reader`] refuses (`None`)
//! anything short, long or out of range, never panics. Written here rather than with a crate:
//! the answers are a few flat columns, and the page reads them without serde or rkyv's
//! alignment rules (a worker's `Uint8Array` comes at any offset).

/// Answers' bytes, as they are written.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u64(&mut self, v: u64) {
        self.0.extend(v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.0.extend(v.to_le_bytes());
    }
    /// `v`'s length, then its bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.0.extend_from_slice(v);
    }
    /// `v`'s length, then each word.
    pub fn u64s(&mut self, v: &[u64]) {
        self.u64(v.len() as u64);
        v.iter().for_each(|&w| self.u64(w));
    }
}

/// Reads what a [`Writer`] wrote.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let (got, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        Some(got)
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// A count of things at least `each` bytes long that the rest can still hold.
    pub fn count(&mut self, each: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(each.max(1))? <= self.0.len()).then_some(n)
    }
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.count(1)?;
        self.take(n)
    }
    pub fn u64s(&mut self) -> Option<Vec<u64>> {
        let n = self.count(8)?;
        Some(self.take(n * 8)?.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))).collect())
    }
    /// The end: `Some` only when nothing is left.
    pub fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_and_nothing_else_does() {
        let mut w = Writer::default();
        w.u64(7);
        w.i64(-3);
        w.bytes(b"oom");
        w.u64s(&[1, u64::MAX]);
        let mut r = Reader(&w.0);
        assert_eq!(
            (r.u64(), r.i64(), r.bytes(), r.u64s()),
            (Some(7), Some(-3), Some(&b"oom"[..]), Some(vec![1, u64::MAX]))
        );
        assert_eq!(r.end(), Some(()));
        // A count larger than what follows is refused before anything is allocated for it.
        let mut huge = Writer::default();
        huge.u64(u64::MAX / 8);
        assert_eq!(Reader(&huge.0).u64s(), None);
        let mut short = Reader(&w.0[..w.0.len() - 1]);
        assert!(short.u64().is_some() && short.i64().is_some() && short.bytes().is_some());
        assert_eq!(short.u64s(), None);
    }
}
