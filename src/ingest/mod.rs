//! Reading snapshots: file → (decompress) → pickle or JSON → [`Snapshot`].
//!
//! Compression and format are detected from the bytes, never from the file name:
//! gzip `1f 8b`, zstd `28 b5 2f fd`, xz `fd 37 7a 58 5a 00`, bzip2 `42 5a 68`, lz4 frame
//! `04 22 4d 18`; pickle `80 NN` (or a protocol 0/1 opcode), JSON `{` / `[`. Other compressors
//! are named in the error. Everything streams: the input is read once, front to back, so
//! standard input (`-`) and pipes work like files.
//!
//! [`sniff`] tells a snapshot from the other files of a job's folder the same way, from the
//! first bytes (a snapshot's keys in its first 64 KiB), so that a `config.json` or a
//! `weights.pt` beside the ranks is skipped rather than read and failed on.

mod ahead;
mod behind;
pub mod json;
mod mapped;
pub mod pickle;

pub use crate::schema;
pub use crate::schema::builder;
pub use crate::schema::builder::RowSink;

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

pub use crate::model::{COMPRESSED_SUFFIXES, SNAPSHOT_SUFFIXES, snapshot_stem};

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
/// regular file is decompressed on a thread of its own (`ahead`) while the decoder reads.
pub fn read_path_progress(path: &Path, progress: &dyn Fn(u64)) -> Result<(Snapshot, SourceInfo), IngestError> {
    read_path_observed(path, progress, None)
}

/// [`read_path_progress`], its events' large columns going to `rows` as the decoder pushes them (`None`: into the model).
pub fn read_path_observed(
    path: &Path,
    progress: &dyn Fn(u64),
    rows: Option<Box<dyn RowSink>>,
) -> Result<(Snapshot, SourceInfo), IngestError> {
    let read_bytes = AtomicU64::new(0);
    let report = Report { n: &read_bytes, report: progress };
    if path.as_os_str() == STDIN {
        // Never read ahead of a stream: the thread could wait on it after the decoder stopped.
        return read_inner(FileBytes { inner: io::stdin(), n: &read_bytes }, 0, Some(report), false, rows);
    }
    let file = File::open(path).map_err(IngestError::Open)?;
    let meta = file.metadata().map_err(IngestError::Open)?;
    if meta.is_file()
        && meta.len() < behind::LARGE
        && let Some(map) = mapped::map(&file, meta.len())
        && map.first() == Some(&PROTO)
    {
        return read_mapped(&map, progress, rows);
    }
    let (file_bytes, ahead) = if meta.is_file() { (meta.len(), true) } else { (0, false) };
    let inner = behind::DropBehind::new(file, file_bytes);
    read_inner(FileBytes { inner, n: &read_bytes }, file_bytes, Some(report), ahead, rows)
}

/// The first byte of a pickle of protocol 2 or later.
const PROTO: u8 = 0x80;

/// A plain pickle (it starts with `PROTO`: no compression, no JSON, no archive) below 1 GB, its
/// file mapped: the decoder's window moves over the mapping (`mapped`).
fn read_mapped(
    map: &memmap2::Mmap,
    progress: &dyn Fn(u64),
    rows: Option<Box<dyn RowSink>>,
) -> Result<(Snapshot, SourceInfo), IngestError> {
    let len = map.len() as u64;
    let behind = mapped::Behind::new(map, progress);
    let at = |offset: u64| behind.at(offset);
    let (snap, info) = pickle::decode_mapped(pickle::Mapped { bytes: map, behind: &at }, rows)?;
    progress(len);
    // Every byte of the file counts as decoded, as when it is read through a buffer to its end.
    let format = Format::Pickle { protocol: info.protocol };
    Ok((snap, SourceInfo { compression: Compression::None, format, file_bytes: len, decoded_bytes: len }))
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
    read_inner(reader, file_bytes, None, false, None)
}

/// `ahead`: decompress on a thread of its own (a regular file only).
fn read_inner<'r, R: Read + Send + 'r>(
    reader: R,
    file_bytes: u64,
    report: Option<Report<'_>>,
    ahead: bool,
    rows: Option<Box<dyn RowSink>>,
) -> Result<(Snapshot, SourceInfo), IngestError> {
    let read_in = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut raw = BufReader::with_capacity(1 << 16, Counting { inner: reader, bytes: std::sync::Arc::clone(&read_in) });
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
    let (compression, inner) = decompressor(raw)?;
    let inner: Box<dyn Read + Send + '_> = match compression {
        Compression::None => inner,
        _ => Box::new(BombGuard { inner, read_in, out: 0 }),
    };
    std::thread::scope(|scope| {
        // The thread ends when the decoder's side is dropped, before the scope does.
        let inner: Box<dyn Read + '_> = match ahead && compression != Compression::None {
            true => ahead::read_ahead(scope, inner),
            false => inner,
        };
        decode(Reported { inner, report }, compression, file_bytes, rows)
    })
}

/// The decompressor the first bytes of `raw` call for (none: `raw` itself).
fn decompressor<'r, R: Read + Send + 'r>(
    mut raw: BufReader<R>,
) -> Result<(Compression, Box<dyn Read + Send + 'r>), IngestError> {
    let head = raw.fill_buf().map_err(IngestError::Open)?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
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
        // Concatenated frames (`cat a.lz4 b.lz4`, which `lz4 -dc` reads whole) decode as one.
        let lz = MultiLz4 { frame: Some(lz4_flex::frame::FrameDecoder::new(raw)) };
        (Compression::Lz4, Box::new(Named { inner: lz, what: "lz4 stream" }))
    } else {
        (Compression::None, Box::new(raw))
    })
}

/// What a file's first bytes say it is ([`sniff`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// A pickle or JSON that starts like a snapshot, maybe compressed; also compressed data
    /// whose head does not decompress (reading it says why).
    Snapshot,
    /// A `.memviz` archive.
    Archive,
    /// Anything else: a model's `config.json`, torch weights (a zip, or a pickle without a
    /// snapshot's keys), a log, an empty file.
    Other,
}

/// Decompressed bytes a sniff looks at.
const SNIFF_BYTES: u64 = 64 << 10;

/// A snapshot's head holds one of these keys: its dict's first (`segments`, `device_traces`),
/// or, for a legacy list of segments, one of the first segment's.
const SNAPSHOT_KEYS: [&[u8]; 3] = [b"segments", b"device_traces", b"total_size"];

/// Tells a snapshot from the other files of a folder by its first bytes, never its name: the
/// compression and format magic of [`read`], then one of a snapshot's keys in the first
/// 64 KiB (decompressed). Cheap enough for every file of a job's folder.
pub fn sniff(path: &Path) -> io::Result<Sniffed> {
    let mut raw = BufReader::with_capacity(1 << 16, File::open(path)?);
    let head = raw.fill_buf()?;
    if head.starts_with(&memviz_format::MAGIC) {
        return Ok(Sniffed::Archive);
    }
    if head.is_empty() || UNSUPPORTED.iter().any(|(magic, _)| head.starts_with(magic)) {
        return Ok(Sniffed::Other);
    }
    let Ok((compression, inner)) = decompressor(raw) else { return Ok(Sniffed::Snapshot) };
    let mut start = Vec::new();
    if inner.take(SNIFF_BYTES).read_to_end(&mut start).is_err() && compression != Compression::None {
        return Ok(Sniffed::Snapshot);
    }
    Ok(if starts_like_a_snapshot(&start) { Sniffed::Snapshot } else { Sniffed::Other })
}

/// A pickle (`PROTO`, or a protocol 0/1 dict or list) or JSON (`{`, `[`) holding one of
/// [`SNAPSHOT_KEYS`].
fn starts_like_a_snapshot(start: &[u8]) -> bool {
    let first = start.iter().copied().find(|b| !b.is_ascii_whitespace());
    let format = matches!(first, Some(0x80 | b'{' | b'[' | b'}' | b']' | b'('));
    format && SNAPSHOT_KEYS.iter().any(|k| start.windows(k.len()).any(|w| w == *k))
}

/// Decodes the (decompressed) bytes as JSON or pickle, by their first byte.
fn decode<R: Read>(
    inner: R,
    compression: Compression,
    file_bytes: u64,
    rows: Option<Box<dyn RowSink>>,
) -> Result<(Snapshot, SourceInfo), IngestError> {
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
        json::decode_observed(&mut peek, rows).map(|s| (s, Format::Json)).map_err(IngestError::from)
    } else {
        pickle::decode_observed(&mut peek, rows)
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

/// Counts the bytes read from the file (what the decompressed size is compared with).
struct Counting<R> {
    inner: R,
    bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// Decompressed data past [`BOMB_FLOOR`] that is more than [`BOMB_RATIO`] times what was read
/// to make it is a decompression bomb (real snapshots compress 5–30×; a 360 KB zstd of a
/// 10 GiB string is 30,000×): an error within seconds, not gigabytes later.
pub const BOMB_RATIO: u64 = 1000;
pub const BOMB_FLOOR: u64 = 1 << 30;

struct BombGuard<'r> {
    inner: Box<dyn Read + Send + 'r>,
    read_in: std::sync::Arc<std::sync::atomic::AtomicU64>,
    out: u64,
}

impl Read for BombGuard<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out += n as u64;
        let read_in = self.read_in.load(std::sync::atomic::Ordering::Relaxed).max(1);
        if self.out > BOMB_FLOOR && self.out / read_in > BOMB_RATIO {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} bytes decompressed from {read_in}: more than {BOMB_RATIO}× — a decompression bomb, not a snapshot",
                    self.out
                ),
            ));
        }
        Ok(n)
    }
}

/// lz4 frames one after another, read as one stream.
struct MultiLz4<R: BufRead> {
    frame: Option<lz4_flex::frame::FrameDecoder<R>>,
}

impl<R: BufRead> Read for MultiLz4<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(frame) = self.frame.as_mut() else { return Ok(0) };
            let n = frame.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // This frame ended: another follows when bytes remain.
            let mut rest = self.frame.take().expect("a frame").into_inner();
            if rest.fill_buf()?.is_empty() {
                return Ok(0);
            }
            self.frame = Some(lz4_flex::frame::FrameDecoder::new(rest));
        }
    }
}

impl<R: Read> Read for Named<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.what)))
    }
}
