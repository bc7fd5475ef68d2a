//! Reading snapshots: file → (decompress) → pickle or JSON → [`Snapshot`].
//!
//! Compression and format are detected from the bytes, never from the file name:
//! gzip `1f 8b`, zstd `28 b5 2f fd`, xz `fd 37 7a 58 5a 00`, bzip2 `42 5a 68`, lz4 frame
//! `04 22 4d 18`; pickle `80 NN` (or a protocol 0/1 opcode), JSON `{` / `[`. Other compressors
//! are named in the error. Everything streams: the input is read once, front to back, so
//! standard input (`-`) and pipes work like files.

mod ahead;
mod behind;
pub mod builder;
pub mod json;
pub mod pickle;
pub mod schema;

pub use builder::{Forget, RowObserver, observe_rows};

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::model::Snapshot;

/// How the snapshot was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
    Bzip2,
    Lz4,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
            Compression::Bzip2 => "bzip2",
            Compression::Lz4 => "lz4",
        }
    }
}

/// Compressed formats memviz does not read, by their magic bytes (offset 0).
const UNSUPPORTED: [(&[u8], &str); 7] = [
    (&[0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c], "7-Zip (a 7z archive)"),
    (b"PK\x03\x04", "zip (a zip archive)"),
    (b"LZIP", "lzip"),
    (&[0x1f, 0x9d], "compress (.Z)"),
    (&[0x1f, 0xa0], "compress (LZH)"),
    (&[0xff, 0x06, 0x00, 0x00, 0x73, 0x4e, 0x61, 0x50, 0x70, 0x59], "snappy (framed)"),
    (&[0x5d, 0x00, 0x00], "lzma (legacy .lzma)"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pickle { protocol: u8 },
    Json,
}

/// Facts about the input, for summaries and benchmarks.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    pub compression: Compression,
    pub format: Format,
    /// Size of the file on disk.
    pub file_bytes: u64,
    /// Bytes of pickle / JSON after decompression.
    pub decoded_bytes: u64,
}

impl fmt::Display for SourceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.format {
            Format::Pickle { protocol } => write!(f, "pickle protocol {protocol}")?,
            Format::Json => write!(f, "JSON")?,
        }
        match self.compression {
            Compression::None => Ok(()),
            c => write!(f, ", {}", c.name()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("cannot read the file: {0}")]
    Open(io::Error),
    #[error("the file is empty")]
    Empty,
    #[error(transparent)]
    Pickle(#[from] pickle::PickleError),
    #[error(transparent)]
    Json(#[from] json::JsonError),
    #[error("{what}: {error}")]
    Decompress { what: &'static str, error: io::Error },
    /// An error inside compressed input: its offsets count decompressed bytes.
    #[error("{inner} (in the {kind}-decompressed data)")]
    Compressed { kind: &'static str, inner: Box<IngestError> },
    #[error("compressed with {0}, which memviz does not read (decompress it first)")]
    UnsupportedCompression(&'static str),
    #[error("this is a .memviz archive, which is mapped rather than streamed: give its path instead")]
    ArchiveStream,
}

/// `-`: read the snapshot from standard input.
pub const STDIN: &str = "-";

/// True for an input that can be read only once, front to back: standard input (`-`), a pipe or
/// FIFO, a character device (`/dev/stdin`). Such inputs are never stamped, cached or sniffed
/// twice: reading them is the only look.
pub fn is_stream(path: &Path) -> bool {
    // `/dev/stdin` or `/proc/self/fd/0` redirected from a file look like that file, but they
    // are no place to stamp or cache anything beside.
    let special = path.starts_with("/dev") || path.starts_with("/proc");
    path.as_os_str() == STDIN || special || std::fs::metadata(path).is_ok_and(|m| !m.is_file())
}

/// Reads a snapshot file of any supported kind.
pub fn read_path(path: &Path) -> Result<(Snapshot, SourceInfo), IngestError> {
    read_path_progress(path, &|_| {})
}

/// [`read_path`], calling `progress` with the number of file bytes read so far. A compressed
/// regular file is decompressed on a thread of its own ([`ahead`]) while the decoder reads.
pub fn read_path_progress(path: &Path, progress: &dyn Fn(u64)) -> Result<(Snapshot, SourceInfo), IngestError> {
    let read_bytes = AtomicU64::new(0);
    let report = Report { n: &read_bytes, report: progress };
    if path.as_os_str() == STDIN {
        // Never read ahead of a stream: the thread could wait on it after the decoder stopped.
        return read_inner(FileBytes { inner: io::stdin(), n: &read_bytes }, 0, Some(report), false);
    }
    let file = File::open(path).map_err(IngestError::Open)?;
    let meta = file.metadata().map_err(IngestError::Open)?;
    let (file_bytes, ahead) = if meta.is_file() { (meta.len(), true) } else { (0, false) };
    let inner = behind::DropBehind::new(file, file_bytes);
    read_inner(FileBytes { inner, n: &read_bytes }, file_bytes, Some(report), ahead)
}

/// Counts the bytes read from the file (before decompression), wherever it is read.
struct FileBytes<'a, R> {
    inner: R,
    n: &'a AtomicU64,
}

impl<R: Read> Read for FileBytes<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Relaxed);
        Ok(k)
    }
}

/// Reports the file bytes read so far each time the decoder reads (on the decoder's thread).
struct Report<'a> {
    n: &'a AtomicU64,
    report: &'a dyn Fn(u64),
}

impl Report<'_> {
    fn now(&self) {
        (self.report)(self.n.load(Relaxed));
    }
}

/// The decoder's reads, each followed by a progress report.
struct Reported<'a, R> {
    inner: R,
    report: Option<Report<'a>>,
}

impl<R: Read> Read for Reported<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        if let Some(r) = &self.report {
            r.now();
        }
        Ok(k)
    }
}

/// Reads a snapshot from any byte stream (`file_bytes` is only reported back).
pub fn read<R: Read + Send>(reader: R, file_bytes: u64) -> Result<(Snapshot, SourceInfo), IngestError> {
    read_inner(reader, file_bytes, None, false)
}

/// `ahead`: decompress on a thread of its own (a regular file only).
fn read_inner<'r, R: Read + Send + 'r>(
    reader: R,
    file_bytes: u64,
    report: Option<Report<'_>>,
    ahead: bool,
) -> Result<(Snapshot, SourceInfo), IngestError> {
    let mut raw = BufReader::with_capacity(1 << 16, reader);
    let head = raw.fill_buf().map_err(IngestError::Open)?;
    if head.is_empty() {
        return Err(IngestError::Empty);
    }
    if head.starts_with(&memviz_format::MAGIC) {
        return Err(IngestError::ArchiveStream);
    }
    if let Some((_, name)) = UNSUPPORTED.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Err(IngestError::UnsupportedCompression(name));
    }
    let (compression, inner): (Compression, Box<dyn Read + Send + 'r>) = if head.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::read::MultiGzDecoder::new(raw);
        (Compression::Gzip, Box::new(Named { inner: gz, what: "gzip stream" }))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let zs = zstd::stream::read::Decoder::with_buffer(raw)
            .map_err(|error| IngestError::Decompress { what: "zstd stream", error })?;
        (Compression::Zstd, Box::new(Named { inner: zs, what: "zstd stream" }))
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        // Concatenated .xz streams (`xz -T` output, `cat a.xz b.xz`) decode as one.
        let xz = liblzma::bufread::XzDecoder::new_multi_decoder(raw);
        (Compression::Xz, Box::new(Named { inner: xz, what: "xz stream" }))
    } else if head.starts_with(b"BZh") {
        let bz = bzip2::bufread::MultiBzDecoder::new(raw);
        (Compression::Bzip2, Box::new(Named { inner: bz, what: "bzip2 stream" }))
    } else if head.starts_with(&[0x04, 0x22, 0x4d, 0x18]) {
        let lz = lz4_flex::frame::FrameDecoder::new(raw);
        (Compression::Lz4, Box::new(Named { inner: lz, what: "lz4 stream" }))
    } else {
        (Compression::None, Box::new(raw))
    };
    std::thread::scope(|scope| {
        // The thread ends when the decoder's side is dropped, before the scope does.
        let inner: Box<dyn Read + '_> = match ahead && compression != Compression::None {
            true => ahead::read_ahead(scope, inner),
            false => inner,
        };
        decode(Reported { inner, report }, compression, file_bytes)
    })
}

/// Decodes the (decompressed) bytes as JSON or pickle, by their first byte.
fn decode<R: Read>(inner: R, compression: Compression, file_bytes: u64) -> Result<(Snapshot, SourceInfo), IngestError> {
    let mut counted = Counted { inner, n: 0 };
    let mut peek = BufReader::with_capacity(1 << 16, &mut counted);
    let first = {
        let head = peek.fill_buf().map_err(|error| IngestError::Decompress { what: "reading", error })?;
        if head.is_empty() {
            return Err(IngestError::Empty);
        }
        head.iter().copied().find(|b| !b.is_ascii_whitespace()).unwrap_or(b' ')
    };
    let decoded = if matches!(first, b'{' | b'[') {
        json::decode(&mut peek).map(|s| (s, Format::Json)).map_err(IngestError::from)
    } else {
        pickle::decode(&mut peek)
            .map(|(s, info)| (s, Format::Pickle { protocol: info.protocol }))
            .map_err(IngestError::from)
    };
    let (snap, format) = decoded.map_err(|inner| match compression {
        Compression::None => inner,
        c => IngestError::Compressed { kind: c.name(), inner: Box::new(inner) },
    })?;
    drop(peek);
    let info = SourceInfo { compression, format, file_bytes, decoded_bytes: counted.n };
    Ok((snap, info))
}

/// Counts decompressed bytes.
struct Counted<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n += k as u64;
        Ok(k)
    }
}

/// Prefixes decompressor errors so that "corrupt deflate stream" says which stream.
struct Named<R> {
    inner: R,
    what: &'static str,
}

impl<R: Read> Read for Named<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.what)))
    }
}
