//! Writing an archive atomically: header placeholder, the rkyv archive streamed to a temp file
//! (each block hashed on its way), its block table, then the real header (with the archive's
//! length and the table's hash), fsync, rename.

use memviz_format::rkyv;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::Context as _;
use memviz_format::hash::Xxh64;
use memviz_format::schema::Root;
use memviz_format::{BLOCK_LEN, FINGERPRINT_SPAN, HEADER_LEN, Header, SourceStamp};

use crate::output::temp_path;

/// Writes `root` to `path` (all or nothing) and returns the file size.
pub fn write(root: &Root, path: &Path, source: SourceStamp) -> anyhow::Result<u64> {
    let tmp = temp_path(path);
    let result = write_to(root, &tmp, source).and_then(|size| {
        fs::rename(&tmp, path)?;
        Ok(size)
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    // The error names the archive asked for, never the temporary file beside it.
    result.with_context(|| format!("cannot write {}", path.display()))
}

fn write_to(root: &Root, tmp: &Path, source: SourceStamp) -> anyhow::Result<u64> {
    let file = File::options().write(true).create(true).truncate(true).open(tmp)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    w.write_all(&[0u8; HEADER_LEN])?;
    let hashing = Hashing { inner: w, block: Xxh64::new(0), table: Vec::new(), len: 0 };
    let hashing =
        rkyv::api::high::to_bytes_in::<_, rkyv::rancor::BoxedError>(root, rkyv::ser::writer::IoWriter::new(hashing))
            .map_err(|e| anyhow::anyhow!("serializing the archive: {e}"))?
            .into_inner();
    let (mut w, table, len) = hashing.finish();
    w.write_all(&table)?;
    let header = Header::with_table(len, &table, source);
    let mut file = w.into_inner().map_err(|e| e.into_error())?;
    let len = file.stream_position()?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&header.to_bytes())?;
    file.sync_all()?;
    Ok(len)
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
