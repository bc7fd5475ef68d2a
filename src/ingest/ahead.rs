//! Decompressing ahead: a named thread reads a compressed file and decompresses it a [`CHUNK`]
//! at a time into a few recycled buffers, while the decoder decodes the chunk before. Without
//! it one core does both, one after the other (and xz decompresses slower than the decoder
//! decodes).
//!
//! Errors travel in order with the bytes: the decoder sees every byte before the error, then the
//! error, as reading the source itself. Where the thread cannot be started, the source is read
//! directly.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::Scope;

/// Bytes each buffer holds.
const CHUNK: usize = 1 << 20;
/// Buffers filled ahead of the decoder (beside the one it reads and the one being filled).
const AHEAD: usize = 2;

/// What the thread sends: bytes (none at the end) or the error that stopped it.
type Filled = io::Result<Vec<u8>>;

/// `source`, read on a thread of `scope` (which ends when the reader returned is dropped).
pub fn read_ahead<'scope, R: Read + Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    source: R,
) -> Box<dyn Read + 'scope> {
    let (to_decoder, filled) = sync_channel::<Filled>(AHEAD);
    let (empty, recycled) = sync_channel::<Vec<u8>>(AHEAD + 2);
    let (give, take) = sync_channel::<R>(1);
    let spawned = std::thread::Builder::new().name("memviz-decompress".into()).spawn_scoped(scope, move || {
        if let Ok(mut source) = take.recv() {
            fill(&mut source, &to_decoder, &recycled);
        }
    });
    if spawned.is_err() {
        return Box::new(source);
    }
    match give.send(source) {
        Ok(()) => Box::new(Ahead { filled, empty, current: Vec::new(), pos: 0, done: false }),
        // The thread is gone before taking it.
        Err(back) => Box::new(back.0),
    }
}

/// The decoder's side.
struct Ahead {
    filled: Receiver<Filled>,
    /// Buffers read out, back to the thread.
    empty: SyncSender<Vec<u8>>,
    /// The buffer being read and how far.
    current: Vec<u8>,
    pos: usize,
    done: bool,
}

impl Read for Ahead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.current.len() {
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            match self.filled.recv() {
                Ok(Ok(bytes)) => {
                    let used = std::mem::replace(&mut self.current, bytes);
                    let _ = self.empty.try_send(used);
                    self.pos = 0;
                    self.done = self.current.is_empty();
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Err(io::Error::other("the decompressing thread stopped"));
                }
            }
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The thread: fills buffers until the end, an error, or the decoder's side is gone.
fn fill<R: Read>(source: &mut R, to_decoder: &SyncSender<Filled>, recycled: &Receiver<Vec<u8>>) {
    loop {
        let mut buf = recycled.try_recv().unwrap_or_default();
        buf.resize(CHUNK, 0);
        let mut n = 0;
        let result = loop {
            match source.read(&mut buf[n..]) {
                Ok(0) => break Ok(true),
                Ok(k) => {
                    n += k;
                    if n == buf.len() {
                        break Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        buf.truncate(n);
        if n > 0 && to_decoder.send(Ok(buf)).is_err() {
            return;
        }
        match result {
            Ok(false) => {}
            Ok(true) => {
                let _ = to_decoder.send(Ok(Vec::new()));
                return;
            }
            Err(e) => {
                let _ = to_decoder.send(Err(e));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that gives its bytes in odd pieces, then fails (or ends).
    struct Odd {
        bytes: Vec<u8>,
        at: usize,
        fail: bool,
    }

    impl Read for Odd {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.at == self.bytes.len() {
                return if self.fail { Err(io::Error::other("broken stream")) } else { Ok(0) };
            }
            let n = buf.len().min(self.bytes.len() - self.at).min(1 + self.at % 70_001);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    #[test]
    fn every_byte_arrives_in_order_then_the_end_or_the_error() {
        for (len, fail) in [(0, false), (5, false), (CHUNK, false), (3 * CHUNK + 123, false), (CHUNK + 9, true)] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let source = Odd { bytes: bytes.clone(), at: 0, fail };
            let (got, err) = std::thread::scope(|s| {
                let mut r = read_ahead(s, source);
                let mut got = Vec::new();
                let err = r.read_to_end(&mut got).err().map(|e| e.to_string());
                (got, err)
            });
            assert!(got == bytes, "{len} bytes: what arrived differs");
            assert_eq!(err, fail.then(|| "broken stream".to_owned()), "{len} bytes");
        }
    }

    #[test]
    fn dropping_the_reader_early_ends_the_thread() {
        let source = Odd { bytes: vec![7; 8 * CHUNK], at: 0, fail: false };
        std::thread::scope(|s| {
            let mut r = read_ahead(s, source);
            let mut first = [0u8; 10];
            r.read_exact(&mut first).unwrap();
            assert_eq!(first, [7; 10]);
        });
    }
}
