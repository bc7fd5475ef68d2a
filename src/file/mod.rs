//! The `.memviz` file on disk: mapped and opened as a [`memviz_read::archive::Archive`] (whose
//! validation, checks and reading are the read crate's), and written atomically (`write`). `pages` tells which blocks of a mapping this process read.
//!
//! This file, `ingest/mapped.rs` and the spill allocator hold the root crate's `unsafe` for
//! mapping files (`temp_files.rs` its signal handlers).

#![allow(unsafe_code)]

pub mod pages;
pub mod write;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use crate::archive::{Archive, ArchiveError, Session, Source};
use memmap2::Mmap;
use memviz_format::{BLOCK_LEN, MAGIC};

/// Maps `file` read-only.
pub fn map(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: the mapping is read-only and private to this process. memviz never writes an
    // archive in place (writers create a temp file and rename it over the old one), so the bytes
    // cannot change under us unless another program truncates the file, which is the documented
    // risk of any mmap; every access goes through bounds we validated at open.
    unsafe { Mmap::map(file) }
}

/// An archive's file, mapped: what [`Archive`] reads on the native side.
pub struct Mapped {
    map: Mmap,
    file: File,
}

impl Source for Mapped {
    fn bytes(&self) -> &[u8] {
        &self.map
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Option<std::io::Result<()>> {
        Some(read_at(&self.file, buf, offset))
    }

    fn blocks_read(&self, body: &[u8]) -> Option<Vec<usize>> {
        pages::mapped_blocks(body, BLOCK_LEN)
    }

    fn release(&self) {
        #[cfg(unix)]
        {
            // SAFETY: the mapping is private and read-only, so dropping its pages loses nothing:
            // a later read faults the file's bytes back in. Nothing borrowed from it is
            // invalidated (the addresses stay mapped).
            let _ = unsafe { self.map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }

    fn read_widely(&self) {
        #[cfg(unix)]
        let _ = self.map.advise(memmap2::Advice::Normal);
    }

    fn again(&self) -> Option<std::io::Result<Box<dyn Source>>> {
        let mapped = self.file.try_clone().and_then(|file| Ok(Mapped { map: map(&file)?, file }));
        Some(mapped.map(|m| Box::new(m) as Box<dyn Source>))
    }
}

/// True when `path` is a regular file that starts with the archive magic. Anything else (a
/// pipe, standard input) is not looked into: its bytes can be read only once.
pub fn is_archive(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok()
        && head == MAGIC
}

/// Maps and validates the archive at `path` ([`Archive::new`]). Does not read the bulk data.
pub fn open(path: &Path) -> Result<Archive, ArchiveError> {
    open_with(path, false)
}

/// [`open`] for an answer, which reads a few scattered pages: the kernel is told not to read
/// ahead (from the validation on), which would fault in, and then check, whole neighbourhoods
/// it never looks at. Not for what reads everything (`stats`, `export`, the viewer's tiles).
pub fn open_scattered(path: &Path) -> Result<Archive, ArchiveError> {
    open_with(path, true)
}

/// [`open`], then [`Archive::verify`].
pub fn open_verified(path: &Path) -> Result<Archive, ArchiveError> {
    let a = open(path)?;
    a.verify()?;
    Ok(a)
}

/// [`open`] as a session shared by the viewer's threads.
pub fn open_session(path: &Path) -> Result<Arc<Session>, ArchiveError> {
    Ok(Arc::new(Session::from_archive(open(path)?)))
}

fn open_with(path: &Path, scattered: bool) -> Result<Archive, ArchiveError> {
    let file = File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Err(memviz_format::HeaderError::Magic.into());
    }
    let map = map(&file)?;
    // The validation reads the structure's few scattered pages: read-ahead would map whole
    // neighbourhoods around each (a tenth of a large archive, with 8 MB read-ahead).
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Random);
    let archive = Archive::new(Box::new(Mapped { map, file }), path)?;
    if !scattered {
        archive.source().read_widely();
    }
    Ok(archive)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match std::os::windows::fs::FileExt::seek_read(file, &mut buf[done..], offset + done as u64)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => done += n,
        }
    }
    Ok(())
}
