//! Reading a large file without keeping it: the pages the decoder has read are dropped from
//! the page cache behind it (`POSIX_FADV_DONTNEED` every [`STRIDE`] bytes), so the kernel's
//! read-ahead, and whatever else the index allocates meanwhile, take the pages just freed
//! instead of ever more fresh memory.
//!
//! A 10 GB snapshot read into the page cache takes 10 GB of memory that the system must then
//! reclaim — on a 16 GB laptop, from the spill file and everything else — and on a virtual
//! machine whose host takes freed memory back (free page reporting) every fresh page costs a
//! fault on the host. Files below [`LARGE`] are read as before (the page cache keeps them for
//! the next index of the same file).
//!
//! Neither reading with `O_DIRECT` (no page-cache pages at all) on the read-ahead thread nor
//! these drops on that thread do as well: a third busy thread on two cores, and without the
//! drops the spill file's fresh pages get no freed memory to reuse (measured: docs/design/10).

use std::fs::File;
use std::io::{self, Read};

/// Files at least this large are dropped from the page cache behind the reader.
pub(super) const LARGE: u64 = 1 << 30;
/// Bytes read between two drops (here and behind a mapped pickle's decoder, `super::mapped`).
pub(super) const STRIDE: u64 = 32 << 20;

/// A file read front to back, its pages dropped from the page cache once read when it is large.
pub struct DropBehind {
    file: File,
    drops: bool,
    /// Bytes read so far, and how many of them were dropped.
    read: u64,
    dropped: u64,
}

impl DropBehind {
    /// `file` of `len` bytes (0 when it is not a regular file): only a file of [`LARGE`] bytes
    /// or more is dropped behind; a smaller one is read as it is.
    pub fn new(file: File, len: u64) -> DropBehind {
        let drops = len >= LARGE;
        // Sequential: the kernel reads ahead twice as far.
        #[cfg(target_os = "linux")]
        if drops {
            let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::Sequential);
        }
        DropBehind { file, drops, read: 0, dropped: 0 }
    }

    fn drop_read(&mut self) {
        let len = self.read - self.dropped;
        // Advice only: a file system that ignores it keeps the pages, as before.
        #[cfg(target_os = "linux")]
        if let Some(len) = std::num::NonZeroU64::new(len) {
            let _ = rustix::fs::fadvise(&self.file, self.dropped, Some(len), rustix::fs::Advice::DontNeed);
        }
        self.dropped += len;
    }
}

impl Read for DropBehind {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.file.read(buf)?;
        self.read += k as u64;
        if self.drops && (self.read - self.dropped >= STRIDE || k == 0) {
            self.drop_read();
        }
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With reads of every size and drops between them, the bytes come out as the file holds
    /// them, and everything read was dropped by the end; a small file is never dropped.
    #[test]
    fn reads_the_file_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let bytes: Vec<u8> = (0..3 * STRIDE as usize + 12_345).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        for (len, dropped) in [(LARGE, bytes.len() as u64), (bytes.len() as u64, 0)] {
            let mut f = DropBehind::new(File::open(&path).unwrap(), len);
            let (mut got, mut out) = (Vec::new(), vec![0u8; 1 << 20]);
            for size in [1usize, 100, 4096, 65_536, 1 << 20].iter().cycle() {
                let k = f.read(&mut out[..*size]).unwrap();
                if k == 0 {
                    break;
                }
                got.extend_from_slice(&out[..k]);
            }
            assert!(got == bytes);
            assert_eq!((f.read, f.dropped), (bytes.len() as u64, dropped));
        }
    }
}
