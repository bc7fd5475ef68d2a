//! A buffered byte source that knows its absolute offset, for streaming the pickle VM.
//!
//! The decoder never holds the whole pickle: it reads through a fixed window, so peak memory is
//! the model being built plus this buffer, whatever the file size (and a decompressor can feed
//! it directly). A plain file is mapped instead ([`Mapped`]): the window is then a view of the
//! mapping, moved rather than filled, so the decoder's thread copies nothing (the window's fills
//! were 0.1–0.4 s of gen9m's read on its thread) and the pages are touched first by whoever
//! reads them — on many cores, the waves' workers.

use std::io::Read;

use super::PickleError;

const WINDOW: usize = 1 << 20;

/// Where the window's bytes come from.
pub trait Source {
    /// The bytes the window indexes into.
    fn data(&self) -> &[u8];

    /// The unread bytes being `pos..end` of [`Self::data`] (at absolute offset `base + pos`),
    /// makes at least `n` (≤ `cap`) of them available where the data goes on: the new `pos`,
    /// `end` and `base`, and whether the data ends at `end`.
    fn refill(&mut self, at: Window, n: usize, cap: usize) -> Result<(Window, bool), PickleError>;
}

/// The window's place in [`Source::data`]: the next byte, the end, and the absolute offset of
/// `data()[0]`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub pos: usize,
    pub end: usize,
    pub base: u64,
}

/// A reader's bytes, read into a buffer of the window's size.
pub struct Reading<R> {
    reader: R,
    buf: Box<[u8]>,
    /// The reader said it ended: it is not read again (a terminal would wait for more).
    ended: bool,
}

impl<R: Read> Source for Reading<R> {
    #[inline]
    fn data(&self) -> &[u8] {
        &self.buf
    }

    fn refill(&mut self, w: Window, n: usize, _cap: usize) -> Result<(Window, bool), PickleError> {
        debug_assert!(n <= self.buf.len());
        self.buf.copy_within(w.pos..w.end, 0);
        let (base, mut end) = (w.base + w.pos as u64, w.end - w.pos);
        while end < n && !self.ended {
            match self.reader.read(&mut self.buf[end..]) {
                Ok(0) => self.ended = true,
                Ok(k) => end += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(PickleError::Io { offset: base + end as u64, error }),
            }
        }
        Ok((Window { pos: 0, end, base }, self.ended))
    }
}

/// A mapped file's bytes: the window moves over them. `behind` is told how far the decoder
/// has read at each move (its pages behind may be dropped).
pub struct Mapped<'m> {
    pub bytes: &'m [u8],
    pub behind: &'m dyn Fn(u64),
}

impl Source for Mapped<'_> {
    #[inline]
    fn data(&self) -> &[u8] {
        self.bytes
    }

    fn refill(&mut self, w: Window, n: usize, cap: usize) -> Result<(Window, bool), PickleError> {
        (self.behind)(w.pos as u64);
        let end = self.bytes.len().min(w.pos.saturating_add(n.max(cap)));
        Ok((Window { pos: w.pos, end, base: 0 }, end == self.bytes.len()))
    }
}

pub struct Input<S> {
    src: S,
    pos: usize,
    end: usize,
    /// Absolute offset of `src.data()[0]`.
    base: u64,
    eof: bool,
    /// How many bytes the window holds at most.
    cap: usize,
}

impl<R: Read> Input<Reading<R>> {
    pub fn new(reader: R) -> Self {
        Input::with_window(reader, WINDOW)
    }

    /// An input whose window holds `bytes` (at least the default), for a reader that reads
    /// ahead of where it stands (waves of event batches read on every core).
    pub fn with_window(reader: R, bytes: usize) -> Self {
        let cap = bytes.max(WINDOW);
        let buf = vec![0; cap].into_boxed_slice();
        Input { src: Reading { reader, buf, ended: false }, pos: 0, end: 0, base: 0, eof: false, cap }
    }
}

impl<'m> Input<Mapped<'m>> {
    /// An input over mapped bytes, its window `bytes` long (at least the default).
    pub fn mapped(src: Mapped<'m>, bytes: usize) -> Self {
        Input { src, pos: 0, end: 0, base: 0, eof: false, cap: bytes.max(WINDOW) }
    }
}

impl<S: Source> Input<S> {
    /// The window's size.
    pub fn capacity(&self) -> usize {
        self.cap
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
        debug_assert!(n <= self.cap);
        let at = Window { pos: self.pos, end: self.end, base: self.base };
        let (w, eof) = self.src.refill(at, n, self.cap)?;
        (self.pos, self.end, self.base, self.eof) = (w.pos, w.end, w.base, eof);
        Ok(self.end - self.pos >= n)
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
        let b = self.src.data()[self.pos];
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        self.ensure(N)?;
        let a: [u8; N] = self.src.data()[self.pos..self.pos + N].try_into().expect("length checked");
        self.pos += N;
        Ok(a)
    }

    /// Consumes the next byte if it is `b` and already in the window; never reads, never fails.
    #[inline]
    pub fn eat(&mut self, b: u8) -> bool {
        if self.pos < self.end && self.src.data()[self.pos] == b {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// The window's bytes from the next one on.
    #[inline]
    pub fn window(&self) -> &[u8] {
        &self.src.data()[self.pos..self.end]
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
        let s = &self.src.data()[self.pos..self.pos + n];
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
            out.extend_from_slice(&self.src.data()[self.pos..self.pos + take]);
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
