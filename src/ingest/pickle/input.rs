//! A buffered byte source that knows its absolute offset, for streaming the pickle VM.
//!
//! The decoder never holds the whole pickle: it reads through a fixed window, so peak memory is
//! the model being built plus this buffer, whatever the file size (and a decompressor can feed
//! it directly).

use std::io::Read;

use super::PickleError;

const WINDOW: usize = 1 << 20;

pub struct Input<R> {
    reader: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// Absolute offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl<R: Read> Input<R> {
    pub fn new(reader: R) -> Self {
        Input::with_window(reader, WINDOW)
    }

    /// An input whose window holds `bytes` (at least the default), for a reader that reads
    /// ahead of where it stands (waves of event batches read on every core).
    pub fn with_window(reader: R, bytes: usize) -> Self {
        let buf = vec![0; bytes.max(WINDOW)].into_boxed_slice();
        Input { reader, buf, pos: 0, end: 0, base: 0, eof: false }
    }

    /// The window's size.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Steps back over the byte just read (still in the window).
    pub fn unread(&mut self) {
        debug_assert!(self.pos > 0);
        self.pos -= 1;
    }

    /// Absolute offset of the next byte.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Makes at least `n` (≤ the window's size) bytes available; false at end of data.
    #[cold]
    fn refill(&mut self, n: usize) -> Result<bool, PickleError> {
        debug_assert!(n <= self.buf.len());
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        while self.end < n && !self.eof {
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    return Err(PickleError::Io { offset: self.base + self.end as u64, error });
                }
            }
        }
        Ok(self.end >= n)
    }

    #[inline]
    fn ensure(&mut self, n: usize) -> Result<(), PickleError> {
        if self.end - self.pos >= n || self.refill(n)? {
            Ok(())
        } else {
            Err(PickleError::Truncated { offset: self.base + self.end as u64 })
        }
    }

    #[inline]
    pub fn u8(&mut self) -> Result<u8, PickleError> {
        self.ensure(1)?;
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        self.ensure(N)?;
        let a: [u8; N] = self.buf[self.pos..self.pos + N].try_into().expect("length checked");
        self.pos += N;
        Ok(a)
    }

    /// Consumes the next byte if it is `b` and already in the window; never reads, never fails.
    #[inline]
    pub fn eat(&mut self, b: u8) -> bool {
        if self.pos < self.end && self.buf[self.pos] == b {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// The window's bytes from the next one on.
    #[inline]
    pub fn window(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Consumes `n` bytes of [`Self::window`].
    #[inline]
    pub fn advance(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.pos);
        self.pos += n;
    }

    /// Refills the window when fewer than `n` (≤ its size) bytes are left in it and the data goes
    /// on; never fails at the end of the data.
    #[inline]
    pub fn prefetch(&mut self, n: usize) -> Result<(), PickleError> {
        if self.end - self.pos < n && !self.eof {
            self.refill(n)?;
        }
        Ok(())
    }

    /// Borrows `n` bytes when they fit the window; `None` when the caller must use [`Self::read_long`].
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<Option<&[u8]>, PickleError> {
        if n > WINDOW / 2 {
            return Ok(None);
        }
        self.ensure(n)?;
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(Some(s))
    }

    /// Reads `n` bytes of any length into `out`, growing it only as data actually arrives, so a
    /// hostile length field cannot make us allocate more than the input holds.
    pub fn read_long(&mut self, n: u64, out: &mut Vec<u8>) -> Result<(), PickleError> {
        out.clear();
        let mut left = n;
        while left > 0 {
            if self.pos == self.end && !self.refill(1)? {
                return Err(PickleError::Truncated { offset: self.offset() });
            }
            let take = (self.end - self.pos).min(usize::try_from(left).unwrap_or(usize::MAX));
            out.extend_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
            left -= take as u64;
        }
        Ok(())
    }

    /// Passes over `n` bytes without keeping them (a `BINBYTES8` payload: the snapshot never uses
    /// one), in window-sized steps.
    pub fn skip_long(&mut self, n: u64) -> Result<(), PickleError> {
        let mut left = n;
        while left > 0 {
            if self.pos == self.end && !self.refill(1)? {
                return Err(PickleError::Truncated { offset: self.offset() });
            }
            let take = (self.end - self.pos).min(usize::try_from(left).unwrap_or(usize::MAX));
            self.pos += take;
            left -= take as u64;
        }
        Ok(())
    }

    /// Reads a text argument up to and excluding `\n` (protocol 0/1 opcodes), at most 256 bytes.
    pub fn line(&mut self) -> Result<Vec<u8>, PickleError> {
        let mut out = Vec::new();
        loop {
            match self.u8()? {
                b'\n' => return Ok(out),
                b if out.len() < 256 => out.push(b),
                _ => {
                    return Err(PickleError::Malformed {
                        what: "text argument longer than 256 bytes",
                        offset: self.offset(),
                    });
                }
            }
        }
    }
}
