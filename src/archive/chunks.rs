//! zstd-compressed column chunks: the cold parts of the archive (raw events, tiles).

use memviz_format::rkyv;
use memviz_format::schema::Chunk;

/// Rows per event-column chunk: one chunk of a `u64` column is 512 KiB raw, which decompresses
/// in well under a millisecond, so a hover that needs one event pays for one chunk.
pub const CHUNK_ROWS: usize = 64 * 1024;
const LEVEL: i32 = 3;

/// A value stored little-endian in a chunk.
pub trait Scalar: Copy + Default {
    const BYTES: usize;
    fn put(self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
}

macro_rules! scalar {
    ($t:ty) => {
        impl Scalar for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
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

pub fn compress(raw: &[u8], rows: usize) -> Chunk {
    let data = zstd::bulk::compress(raw, LEVEL).expect("in-memory zstd compression cannot fail");
    Chunk { rows: rows as u32, data }
}

/// Compresses one chunk of values.
pub fn encode<T: Scalar>(values: &[T]) -> Chunk {
    let mut raw = Vec::with_capacity(values.len() * T::BYTES);
    for &v in values {
        v.put(&mut raw);
    }
    compress(&raw, values.len())
}

/// Like [`encode`], but stores the first value and then wrapping differences (timestamps).
pub fn encode_deltas(values: &[i64]) -> Chunk {
    let mut prev = 0i64;
    let deltas: Vec<i64> = values
        .iter()
        .map(|&v| {
            let d = v.wrapping_sub(prev);
            prev = v;
            d
        })
        .collect();
    encode(&deltas)
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

pub fn decompress(chunk: &rkyv::Archived<Chunk>, width: usize) -> Result<Vec<u8>, ChunkError> {
    let rows = chunk.rows.to_native() as usize;
    let raw = zstd::bulk::decompress(chunk.data.as_slice(), rows * width).map_err(|e| ChunkError(e.to_string()))?;
    if raw.len() != rows * width {
        return Err(ChunkError(format!("{} bytes, expected {}", raw.len(), rows * width)));
    }
    Ok(raw)
}

/// Decodes one chunk of values.
pub fn decode<T: Scalar>(chunk: &rkyv::Archived<Chunk>) -> Result<Vec<T>, ChunkError> {
    let raw = decompress(chunk, T::BYTES)?;
    Ok(raw.chunks_exact(T::BYTES).map(T::get).collect())
}

/// Decodes a chunk written by [`encode_deltas`].
pub fn decode_deltas(chunk: &rkyv::Archived<Chunk>) -> Result<Vec<i64>, ChunkError> {
    let mut acc = 0i64;
    Ok(decode::<i64>(chunk)?
        .into_iter()
        .map(|d| {
            acc = acc.wrapping_add(d);
            acc
        })
        .collect())
}

/// Decodes a whole column (all its chunks, in order).
pub fn decode_column<T: Scalar>(chunks: &[rkyv::Archived<Chunk>]) -> Result<Vec<T>, ChunkError> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend(decode::<T>(c)?);
    }
    Ok(out)
}
