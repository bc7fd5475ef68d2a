//! zstd-compressed column chunks: the cold parts of the archive (raw events, tiles).

use memviz_format::rkyv;
use memviz_format::schema::Chunk;

/// Rows per event-column chunk: one chunk of a `u64` column is 512 KiB raw, which decompresses
/// in well under a millisecond, so a hover that needs one event pays for one chunk.
pub const CHUNK_ROWS: usize = 64 * 1024;
const LEVEL: i32 = 3;
/// zstd's level for the tiles' texels and keys ([`encode_fast`]): one thread makes the tiles
/// while the others run the allocator's pass, and their encoding was ~45 % of its time. gen9m's
/// tiles on one thread 0.335 → 0.306 s at 0.5 % more bytes (a fresh context a tile: level 3
/// 198 ms, level 1 108 ms).
const FAST_LEVEL: i32 = 1;

/// A value stored little-endian in a chunk.
pub trait Scalar: Copy + Default {
    const BYTES: usize;
    /// Writes the value into `out`, [`Self::BYTES`] long.
    fn write(self, out: &mut [u8]);
    fn get(b: &[u8]) -> Self;
}

macro_rules! scalar {
    ($t:ty) => {
        impl Scalar for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("width checked"))
            }
        }
    };
}
scalar!(u8);
scalar!(u32);
scalar!(u64);
scalar!(i64);

thread_local! {
    /// Each thread's zstd contexts, kept: a fresh one per chunk (`zstd::bulk::compress`) allocated
    /// and zeroed its tables every time — thousands of times an index, for tiles and chunks.
    static COMPRESSOR: Context = const { std::cell::RefCell::new(None) };
    static FAST_COMPRESSOR: Context = const { std::cell::RefCell::new(None) };
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    /// Each thread's buffers for a chunk's raw bytes and its compressed bytes, kept for the same
    /// reason: two ~512 KiB buffers allocated and freed per chunk made each worker's heap trim
    /// and fault fresh pages back in.
    static RAW: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    static OUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A thread's zstd compression context, made on first use and kept.
type Context = std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>>;
/// One of the kept contexts ([`COMPRESSOR`], [`FAST_COMPRESSOR`]).
type Kept = &'static std::thread::LocalKey<Context>;

/// A kept buffer larger than this is let go after use: a chunk's 512 KiB is kept, an allocator
/// state's megabytes are not (every pool thread keeps its own: 8 MiB each was hundreds of
/// megabytes of heap on a host of many cores).
const KEEP_BYTES: usize = 1 << 20;

/// Runs `f` on this thread's buffer in `kept`, emptied first.
fn with_buffer<R>(
    kept: &'static std::thread::LocalKey<std::cell::RefCell<Vec<u8>>>,
    f: impl FnOnce(&mut Vec<u8>) -> R,
) -> R {
    kept.with(|k| {
        // A buffer in use on this thread (never: neither user calls itself) makes a fresh one.
        let Ok(mut buf) = k.try_borrow_mut() else { return f(&mut Vec::new()) };
        buf.clear();
        let out = f(&mut buf);
        if buf.capacity() > KEEP_BYTES {
            *buf = Vec::new();
        }
        out
    })
}

/// Runs `f` on this thread's context in `kept`, made by `make` the first time.
fn with_kept<T, R>(
    kept: &'static std::thread::LocalKey<std::cell::RefCell<Option<T>>>,
    make: impl FnOnce() -> std::io::Result<T>,
    f: impl FnOnce(&mut T) -> std::io::Result<R>,
) -> std::io::Result<R> {
    kept.with(|k| {
        let mut k = k.borrow_mut();
        let context = match &mut *k {
            Some(context) => context,
            empty => empty.insert(make()?),
        };
        f(context)
    })
}

pub fn compress(raw: &[u8], rows: usize) -> Chunk {
    compress_at(&COMPRESSOR, LEVEL, raw, rows)
}

/// [`compress`] with this thread's context in `kept`, at `level`.
fn compress_at(kept: Kept, level: i32, raw: &[u8], rows: usize) -> Chunk {
    // Into the kept buffer, sized for the worst case, then copied out at its size.
    let compressed = with_kept(
        kept,
        || zstd::bulk::Compressor::new(level),
        |c| {
            with_buffer(&OUT, |out| {
                out.reserve(zstd::zstd_safe::compress_bound(raw.len()));
                c.compress_to_buffer(raw, out)?;
                Ok(out.to_vec())
            })
        },
    );
    Chunk { rows: rows as u32, data: compressed.expect("in-memory zstd compression cannot fail") }
}

/// Compresses one chunk of values.
pub fn encode<T: Scalar>(values: &[T]) -> Chunk {
    encode_rows(values.len(), values.iter().copied())
}

/// [`encode`] at zstd level 1 (`FAST_LEVEL`): a tile's texels or keys (read back alike).
pub fn encode_fast<T: Scalar>(values: &[T]) -> Chunk {
    encode_rows_at(&FAST_COMPRESSOR, FAST_LEVEL, values.len(), values.iter().copied())
}

/// Like [`encode`], but stores the first value and then wrapping differences (timestamps).
pub fn encode_deltas(values: &[i64]) -> Chunk {
    encode_rows(values.len(), deltas(values.iter()))
}

/// [`encode_deltas`] of `values` given last first (the allocator's series, made backwards).
pub fn encode_deltas_last_first(values: &[i64]) -> Chunk {
    encode_rows(values.len(), deltas(values.iter().rev()))
}

/// The first value, then each one's wrapping difference from the one before.
fn deltas<'v>(values: impl Iterator<Item = &'v i64>) -> impl Iterator<Item = i64> {
    values.scan(0i64, |prev, &v| Some(v.wrapping_sub(std::mem::replace(prev, v))))
}

/// Compresses `rows` values, written into this thread's raw buffer as they come.
fn encode_rows<T: Scalar>(rows: usize, values: impl Iterator<Item = T>) -> Chunk {
    encode_rows_at(&COMPRESSOR, LEVEL, rows, values)
}

/// [`encode_rows`] with this thread's context in `kept`, at `level`.
fn encode_rows_at<T: Scalar>(kept: Kept, level: i32, rows: usize, values: impl Iterator<Item = T>) -> Chunk {
    with_buffer(&RAW, |raw| {
        // Sized once, then written in place: pushed a value at a time (a length check each), the
        // copy was a seventh of the tiles' time.
        raw.resize(rows * T::BYTES, 0);
        let mut written = 0;
        for (out, v) in raw.chunks_exact_mut(T::BYTES).zip(values) {
            v.write(out);
            written += T::BYTES;
        }
        raw.truncate(written);
        compress_at(kept, level, raw, rows)
    })
}

/// Why a chunk could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("a compressed chunk is corrupted ({0})")]
pub struct ChunkError(String);

impl ChunkError {
    pub fn new(what: String) -> Self {
        ChunkError(what)
    }
}

thread_local! {
    static DECOMPRESSED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Chunks this thread has decompressed so far: what tests read to show that an answer touches
/// no compressed data (`memviz ranks` on archives with a summary).
pub fn decompressed_on_this_thread() -> u64 {
    DECOMPRESSED.with(std::cell::Cell::get)
}

pub fn decompress(chunk: &rkyv::Archived<Chunk>, width: usize) -> Result<Vec<u8>, ChunkError> {
    decompress_rows(chunk.data.as_slice(), chunk.rows.to_native() as usize, width)
}

/// `rows` values of `width` bytes from a chunk's compressed `data` (an archived or a built one).
fn decompress_rows(data: &[u8], rows: usize, width: usize) -> Result<Vec<u8>, ChunkError> {
    DECOMPRESSED.with(|n| n.set(n.get() + 1));
    let raw = with_kept(&DECOMPRESSOR, zstd::bulk::Decompressor::new, |d| d.decompress(data, rows * width))
        .map_err(|e| ChunkError(e.to_string()))?;
    if raw.len() != rows * width {
        return Err(ChunkError(format!("{} bytes, expected {}", raw.len(), rows * width)));
    }
    Ok(raw)
}

fn values<T: Scalar>(raw: &[u8]) -> Vec<T> {
    raw.chunks_exact(T::BYTES).map(T::get).collect()
}

/// Decodes one chunk of values.
pub fn decode<T: Scalar>(chunk: &rkyv::Archived<Chunk>) -> Result<Vec<T>, ChunkError> {
    Ok(values(&decompress(chunk, T::BYTES)?))
}

/// Decodes one chunk of values still in memory (one being built).
pub fn decode_owned<T: Scalar>(chunk: &Chunk) -> Result<Vec<T>, ChunkError> {
    Ok(values(&decompress_rows(&chunk.data, chunk.rows as usize, T::BYTES)?))
}

/// One column read value by value, keeping its last decoded chunk: a walk through the rows in
/// order (either way) decodes each chunk once. `C` is an archived chunk or one being built.
pub struct Cursor<'s, C, T> {
    chunks: &'s [C],
    rows: usize,
    decode: fn(&C) -> Result<Vec<T>, ChunkError>,
    last: std::cell::RefCell<Option<(usize, Vec<T>)>>,
}

impl<'s, C, T: Copy + Default> Cursor<'s, C, T> {
    /// `chunks` of `rows` rows each, decoded by `decode`.
    pub fn new(chunks: &'s [C], rows: usize, decode: fn(&C) -> Result<Vec<T>, ChunkError>) -> Self {
        Cursor { chunks, rows: rows.max(1), decode, last: std::cell::RefCell::new(None) }
    }

    /// The value at row `e` (the default when its chunk does not decode: the checks that
    /// opened the archive say so already).
    pub fn get(&self, e: usize) -> T {
        // Shifts for the usual power-of-two chunk (an undo reads three columns per event).
        let (c, i) = if self.rows.is_power_of_two() {
            (e >> self.rows.trailing_zeros(), e & (self.rows - 1))
        } else {
            (e / self.rows, e % self.rows)
        };
        let mut last = self.last.borrow_mut();
        if last.as_ref().is_none_or(|(have, _)| *have != c) {
            let values = self.chunks.get(c).and_then(|ch| (self.decode)(ch).ok()).unwrap_or_default();
            *last = Some((c, values));
        }
        last.as_ref().and_then(|(_, v)| v.get(i).copied()).unwrap_or_default()
    }
}

/// Decodes a chunk written by [`encode_deltas`].
pub fn decode_deltas(chunk: &rkyv::Archived<Chunk>) -> Result<Vec<i64>, ChunkError> {
    Ok(running_sums(decode::<i64>(chunk)?))
}

/// Decodes a chunk written by [`encode_deltas`] still in memory (one being built).
pub fn decode_deltas_owned(chunk: &Chunk) -> Result<Vec<i64>, ChunkError> {
    Ok(running_sums(decode_owned::<i64>(chunk)?))
}

/// The values a chunk's first value and differences stand for.
fn running_sums(mut deltas: Vec<i64>) -> Vec<i64> {
    let mut acc = 0i64;
    for d in &mut deltas {
        acc = acc.wrapping_add(*d);
        *d = acc;
    }
    deltas
}

/// Decodes a whole column (all its chunks, in order).
pub fn decode_column<T: Scalar>(chunks: &[rkyv::Archived<Chunk>]) -> Result<Vec<T>, ChunkError> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend(decode::<T>(c)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archived(chunk: &Chunk) -> rkyv::util::AlignedVec {
        rkyv::to_bytes::<rkyv::rancor::Error>(chunk).unwrap()
    }

    fn read<T>(bytes: &[u8], f: impl Fn(&rkyv::Archived<Chunk>) -> T) -> T {
        f(rkyv::access::<rkyv::Archived<Chunk>, rkyv::rancor::Error>(bytes).unwrap())
    }

    #[test]
    fn columns_round_trip_exactly() {
        let u64s: Vec<u64> = (0..1000).map(|i| i * 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i)).collect();
        let bytes = archived(&encode(&u64s));
        assert_eq!(read(&bytes, |c| decode::<u64>(c).unwrap()), u64s);
        let bytes = archived(&encode(&[7u8, 0, 255]));
        assert_eq!(read(&bytes, |c| decode::<u8>(c).unwrap()), [7, 0, 255]);
        // Times: deltas wrap, and "no time" (i64::MIN) survives between real times.
        let times = [1_796_017_411_354_839i64, i64::MIN, 1_796_017_411_354_900, 5, i64::MAX];
        let bytes = archived(&encode_deltas(&times));
        assert_eq!(read(&bytes, |c| decode_deltas(c).unwrap()), times);
        let empty = archived(&encode::<u32>(&[]));
        assert_eq!(read(&empty, |c| decode::<u32>(c).unwrap()), Vec::<u32>::new());
    }

    #[test]
    fn a_chunk_that_does_not_hold_its_rows_is_an_error() {
        let mut chunk = encode(&[1u32, 2, 3]);
        chunk.rows = 4;
        let bytes = archived(&chunk);
        let err = read(&bytes, |c| decode::<u32>(c).unwrap_err().to_string());
        assert!(err.starts_with("a compressed chunk is corrupted"), "{err}");
        let garbage = archived(&Chunk { rows: 3, data: vec![1, 2, 3, 4, 5] });
        assert!(read(&garbage, |c| decode::<u32>(c).is_err()));
    }
}
