//! Writing an archive atomically: header placeholder, the rkyv archive streamed to a temp file
//! (each block hashed on its way) — its first part while the rest is still being derived
//! ([`Writing`]) —, its block table, then the real header (with the archive's length and the
//! table's hash), fsync, rename.
//!
//! The bytes bypass the page cache where the file system allows it (`O_DIRECT`, `Sink`): the
//! archive is fsynced anyway, so a buffered write would copy every byte into fresh page-cache
//! pages only to write them out (the kernel time that costs: docs/design/10).

use memviz_format::rkyv;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use anyhow::Context as _;
use memviz_format::hash::Xxh64;
use memviz_format::schema::{Checkpoints, Device, Root, TileLevel, staged};
use memviz_format::{BLOCK_LEN, FINGERPRINT_SPAN, HEADER_LEN, Header, SourceStamp};
use rkyv::rancor::{BoxedError, Strategy};
use rkyv::ser::Serializer;
use rkyv::ser::allocator::Arena;
use rkyv::ser::sharing::Share;
use rkyv::ser::writer::IoWriter;

/// What exists of an archive when its derive stage begins: the root's fields before `devices`
/// (`root.devices` empty), and each device's fields before `checkpoints` (the later ones
/// default). They are written while the rest is derived ([`Writing`]); the derive stage reads
/// them (the event table's chunks, the layouts' columns) meanwhile.
#[derive(Debug, Default)]
pub struct Heads {
    pub root: Root,
    pub devices: Vec<Device>,
}

/// An archive being written on a thread of its own (`memviz-write`) while its derive stage
/// runs: the heads at once — the first device's element columns, actions and totals, usually
/// most of the archive —, the first device's checkpoints and tiles when [`FirstLods`] hands
/// them over (while the allocator's pass still runs), the rest once [`Writing::finish`] hands it
/// over. The bytes equal a whole-root serialization's (`staged` in the format crate); a writer
/// dropped unfinished removes its temp file.
pub struct Writing {
    handed: Option<SyncSender<Handed>>,
    thread: Option<std::io::Result<JoinHandle<Written>>>,
    path: PathBuf,
}

/// What the derive stage hands the writer after the heads.
enum Handed {
    /// The first device's `checkpoints` and `tiles` (its other fields default).
    FirstLods(Box<Device>),
    /// Each device's fields from `checkpoints` on (the first's `checkpoints` and `tiles` default
    /// when they were handed over before).
    Tails(Vec<Device>),
}

/// What the writer thread ends with: the archive's length and its temp file, to be renamed.
type Written = anyhow::Result<(u64, crate::temp_files::TempFile)>;

/// Hands the first device's checkpoints and tiles to a [`Writing`] as soon as they exist: they
/// follow the heads in the archive, so they are written while the allocator's pass runs rather
/// than after it.
pub struct FirstLods(SyncSender<Handed>);

impl FirstLods {
    /// `checkpoints` and `tiles` of the first device (they are not handed over again with its
    /// tail). A writer that already stopped has its error to show at `finish`.
    pub fn hand(&self, checkpoints: Checkpoints, tiles: Vec<TileLevel>) {
        let _ = self.0.send(Handed::FirstLods(Box::new(Device { checkpoints, tiles, ..Device::default() })));
    }
}

impl Writing {
    /// Starts writing the archive of `heads` to a temp file beside `path`.
    pub fn start(heads: Arc<Heads>, path: &Path, source: SourceStamp) -> Writing {
        let (tx, rx) = sync_channel(2);
        // Made here, where a failure to make it is the command's error at `finish`.
        let made = crate::temp_files::TempFile::beside(path);
        let thread = std::thread::Builder::new().name("memviz-write".into()).spawn(move || {
            let (tmp, file) = made?;
            write_staged(heads, rx, tmp.path(), file, source).map(|len| (len, tmp))
        });
        Writing { handed: Some(tx), thread: Some(thread), path: path.to_owned() }
    }

    /// Where the first device's checkpoints and tiles go once they exist.
    pub fn first_lods(&self) -> FirstLods {
        FirstLods(self.handed.clone().expect("not finished yet"))
    }

    /// Hands over each device's fields from `checkpoints` on (`tails[i]` for device `i`, its
    /// other fields default, and the first's `checkpoints` and `tiles` too when [`FirstLods`]
    /// handed them over; nothing else may hold the heads by now), waits until the archive is
    /// written and moves it to its path (all or nothing); returns the file size.
    pub fn finish(mut self, tails: Vec<Device>) -> anyhow::Result<u64> {
        let path = self.path.clone();
        let result = (|| -> anyhow::Result<u64> {
            let thread = self.thread.take().expect("finished once")?;
            // A send fails only when the writer has already stopped; its error is the one to show.
            let _ = self.handed.take().expect("finished once").send(Handed::Tails(tails));
            let (size, tmp) = thread.join().map_err(|_| anyhow::anyhow!("the archive's writer panicked"))??;
            tmp.persist(&path)?;
            Ok(size)
        })();
        // The error names the archive asked for, never the temporary file beside it.
        result.with_context(|| format!("cannot write {}", path.display()))
    }
}

impl Drop for Writing {
    /// Unfinished (the derive stage failed or panicked): the writer sees its channel close,
    /// removes its temp file and ends; this waits for that.
    fn drop(&mut self) {
        self.handed = None;
        if let Some(Ok(thread)) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The writer thread: header placeholder, the heads, then (once handed over) the first device's
/// checkpoints and tiles and the tails, the devices and the root object, the block table, the
/// real header, fsync.
fn write_staged(
    heads: Arc<Heads>,
    handed: Receiver<Handed>,
    tmp: &Path,
    file: File,
    source: SourceStamp,
) -> anyhow::Result<u64> {
    let mut w = Sink::create(tmp, file);
    w.write_all(&[0u8; HEADER_LEN])?;
    let hashing = Hashing { inner: w, block: Xxh64::new(0), table: Vec::new(), len: 0 };
    let mut arena = Arena::new();
    let mut ser = Serializer::new(IoWriter::new(hashing), arena.acquire(), Share::new());
    let s = Strategy::<_, BoxedError>::wrap(&mut ser);
    let rkyv_error = |e: BoxedError| anyhow::anyhow!("serializing the archive: {e}");
    let head = staged::root_head(&heads.root, s).map_err(rkyv_error)?;
    let first = heads.devices.first().map(|d| staged::device_head(d, s)).transpose().map_err(rkyv_error)?;
    let mut first_lods = None;
    let tails = loop {
        match handed.recv().context("the archive's derive stage ended before its end was made")? {
            Handed::FirstLods(d) if first.is_some() && first_lods.is_none() => {
                let written = staged::device_lods(&d, s).map_err(rkyv_error)?;
                first_lods = Some((*d, written));
            }
            Handed::FirstLods(_) => anyhow::bail!("the first device's checkpoints and tiles were handed over twice"),
            Handed::Tails(tails) => break tails,
        }
    };
    let Heads { mut root, devices } =
        Arc::try_unwrap(heads).map_err(|_| anyhow::anyhow!("the archive's heads are still in use"))?;
    anyhow::ensure!(tails.len() == devices.len(), "{} devices but {} device tails", devices.len(), tails.len());
    let (mut lods, written) = first_lods.unzip();
    root.devices = devices.into_iter().zip(tails).map(|(h, t)| staged::joined(h, lods.take(), t)).collect();
    let first = first.map(|h| (h, written));
    staged::finish(&root, head, first, s).map_err(rkyv_error)?;
    let (mut w, table, len) = ser.into_writer().into_inner().finish();
    w.write_all(&table)?;
    let header = Header::with_table(len, &table, source);
    let (file, len) = w.finish()?;
    file.write_all_at(&header.to_bytes(), 0)?;
    file.sync_all()?;
    Ok(len)
}

/// Direct I/O's alignment of buffers, lengths and offsets (a logical block of 512 or 4096 bytes
/// divides it).
const DIRECT_ALIGN: usize = 4096;
/// The bytes collected before each write.
const SINK_BUF: usize = 4 << 20;

/// The archive's file, written a [`SINK_BUF`] at a time through a second descriptor opened with
/// `O_DIRECT` while the file system takes it, else through the page cache (a file system without
/// direct I/O refuses the open or the first write with `EINVAL`; from there every write is
/// buffered). The unaligned tail and the header go through the buffered descriptor.
struct Sink {
    file: File,
    direct: Option<File>,
    /// `SINK_BUF + DIRECT_ALIGN` bytes; the block collected is `buf[start..start + fill]`.
    buf: Vec<u8>,
    start: usize,
    fill: usize,
    /// The file offset of the block collected.
    pos: u64,
}

impl Sink {
    /// The sink of `file`, the temp file made at `path` (opened again for direct I/O, never
    /// through a link).
    fn create(path: &Path, file: File) -> Sink {
        let direct = Self::open_direct(path);
        let buf = vec![0u8; SINK_BUF + DIRECT_ALIGN];
        let start = buf.as_ptr().align_offset(DIRECT_ALIGN);
        Sink { file, direct, buf, start, fill: 0, pos: 0 }
    }

    #[cfg(target_os = "linux")]
    fn open_direct(path: &Path) -> Option<File> {
        use std::os::unix::fs::OpenOptionsExt as _;
        File::options().write(true).custom_flags(libc::O_DIRECT | libc::O_NOFOLLOW).open(path).ok()
    }

    #[cfg(not(target_os = "linux"))]
    fn open_direct(_: &Path) -> Option<File> {
        None
    }

    /// Writes the first `n` bytes collected (all of them aligned, when direct) at their offset.
    fn write_out(&mut self, n: usize, aligned: bool) -> std::io::Result<()> {
        let bytes = &self.buf[self.start..self.start + n];
        let direct = if aligned { self.direct.as_ref() } else { None };
        match direct.map(|d| d.write_all_at(bytes, self.pos)) {
            Some(Ok(())) => {}
            Some(Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => {
                self.direct = None;
                self.file.write_all_at(bytes, self.pos)?;
            }
            Some(Err(e)) => return Err(e),
            None => self.file.write_all_at(bytes, self.pos)?,
        }
        self.pos += n as u64;
        self.buf.copy_within(self.start + n..self.start + self.fill, self.start);
        self.fill -= n;
        // The columns serialized into this block may be spilled: their pages dropped here as
        // they are read, at the writer's pace, where the watcher would drop them.
        crate::spill::relieve();
        Ok(())
    }

    /// Writes what is left and returns the file and its length.
    fn finish(mut self) -> std::io::Result<(File, u64)> {
        let aligned = self.fill - self.fill % DIRECT_ALIGN;
        if aligned > 0 {
            self.write_out(aligned, true)?;
        }
        if self.fill > 0 {
            self.write_out(self.fill, false)?;
        }
        Ok((self.file, self.pos))
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(SINK_BUF - self.fill);
        let at = self.start + self.fill;
        self.buf[at..at + n].copy_from_slice(&buf[..n]);
        self.fill += n;
        if self.fill == SINK_BUF {
            self.write_out(SINK_BUF, true)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Hashes each block of the archive bytes on their way to the file and counts them, so nothing
/// is read back.
struct Hashing<W> {
    inner: W,
    /// The hash of the block being written.
    block: Xxh64,
    /// The block table so far.
    table: Vec<u8>,
    len: u64,
}

impl<W> Hashing<W> {
    /// The writer, the block table and the archive's length.
    fn finish(mut self) -> (W, Vec<u8>, u64) {
        if !self.len.is_multiple_of(BLOCK_LEN as u64) {
            self.table.extend_from_slice(&self.block.finish().to_le_bytes());
        }
        (self.inner, self.table, self.len)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            let room = BLOCK_LEN - (self.len % BLOCK_LEN as u64) as usize;
            let (now, later) = rest.split_at(room.min(rest.len()));
            self.block.update(now);
            self.len += now.len() as u64;
            if now.len() == room {
                self.table.extend_from_slice(&self.block.finish().to_le_bytes());
                self.block = Xxh64::new(0);
            }
            rest = later;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Size, mtime and head/tail fingerprint of a source snapshot.
pub fn stamp(path: &Path) -> std::io::Result<SourceStamp> {
    let mut file = File::open(path)?;
    let meta = file.metadata()?;
    let size = meta.len();
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    let span = FINGERPRINT_SPAN as u64;
    let mut head = vec![0u8; size.min(span) as usize];
    file.read_exact(&mut head)?;
    let mut tail = vec![0u8; size.saturating_sub(span).min(span) as usize];
    if !tail.is_empty() {
        file.seek(SeekFrom::Start(size - tail.len() as u64))?;
        file.read_exact(&mut tail)?;
    }
    Ok(SourceStamp { size, mtime_ns, fingerprint: SourceStamp::fingerprint(&head, &tail) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// Writes `total` bytes through a sink in pieces of uneven sizes, the way rkyv hands them
    /// over, and returns what the file holds.
    fn through_sink(total: usize, direct: bool) -> (Vec<u8>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.memviz");
        let bytes: Vec<u8> = (0..total as u64).map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8).collect();
        let mut sink = Sink::create(&path, File::create(&path).unwrap());
        if !direct {
            sink.direct = None;
        }
        let mut rest = &bytes[..];
        for piece in [0usize, 7, 4096, 1, 3 << 20, 5 << 20, 12_345].iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (now, later) = rest.split_at((*piece).min(rest.len()));
            sink.write_all(now).unwrap();
            rest = later;
        }
        let (file, len) = sink.finish().unwrap();
        assert_eq!(len, total as u64);
        file.write_all_at(b"HEAD", 0).unwrap();
        drop(file);
        (bytes, fs::read(&path).unwrap())
    }

    /// A writer dropped before its tails arrive, or handed the wrong number of them, leaves no
    /// file behind; handed them, it writes an archive that opens.
    #[test]
    fn a_staged_write_is_all_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.memviz");
        let heads =
            || Arc::new(Heads { root: Root::default(), devices: vec![Device { device: 3, ..Device::default() }] });
        drop(Writing::start(heads(), &path, SourceStamp::default()));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "dropped unfinished: nothing left");
        let e = Writing::start(heads(), &path, SourceStamp::default()).finish(Vec::new()).unwrap_err();
        assert!(format!("{e:#}").contains("1 devices but 0 device tails"), "{e:#}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "refused: nothing left");
        let size = Writing::start(heads(), &path, SourceStamp::default()).finish(vec![Device::default()]).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), size);
        let archive = crate::file::open(&path).unwrap();
        assert_eq!(archive.root().devices.len(), 1);
        assert_eq!(archive.root().devices[0].device, 3);
    }

    /// The first device's checkpoints and tiles handed over early give the bytes handing them
    /// with its tail gives.
    #[test]
    fn first_lods_handed_early_write_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let heads = || {
            let device = |d| Device { device: d, actions: vec![d; 5], ..Device::default() };
            Arc::new(Heads { root: Root::default(), devices: vec![device(0), device(1)] })
        };
        let lods = |d: u32| Device {
            checkpoints: Checkpoints { every: 2, starts: vec![0, d], ids: vec![d; 3] },
            tiles: vec![TileLevel { level: d, columns: 2, sample: vec![0, 1], tiles: Vec::new() }],
            spans: vec![memviz_format::schema::Span { name: d, start_us: 1, end_us: 2, depth: 0 }],
            ..Device::default()
        };
        let written = |early: bool| {
            let path = dir.path().join(format!("{early}.memviz"));
            let w = Writing::start(heads(), &path, SourceStamp::default());
            let mut tails = vec![lods(0), lods(1)];
            if early {
                let first = &mut tails[0];
                w.first_lods().hand(std::mem::take(&mut first.checkpoints), std::mem::take(&mut first.tiles));
            }
            w.finish(tails).unwrap();
            fs::read(&path).unwrap()
        };
        assert!(written(true) == written(false));
    }

    #[test]
    fn the_sink_writes_every_byte_where_it_belongs_direct_or_buffered() {
        for direct in [true, false] {
            for total in [0, 3, DIRECT_ALIGN, SINK_BUF, SINK_BUF + 1, 2 * SINK_BUF + DIRECT_ALIGN + 17] {
                let (mut want, got) = through_sink(total, direct);
                want[..4.min(total)].copy_from_slice(&b"HEAD"[..4.min(total)]);
                if total < 4 {
                    want = b"HEAD".to_vec();
                }
                assert!(want == got, "{total} bytes, direct {direct}: the file differs");
            }
        }
    }
}
