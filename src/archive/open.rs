//! Opening an archive: mmap, header checks, one bytecheck validation, then zero-copy access.
//!
//! This file holds the crate's only `unsafe`: mapping the file, and reading the root without
//! re-validating it after [`Archive::open`] validated it once.

#![allow(unsafe_code)]

use memviz_format::rkyv;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use memviz_format::schema::ArchivedRoot;
use memviz_format::{HEADER_LEN, Header, HeaderError, MAGIC};

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("cannot read the archive: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}; re-run `memviz index` on the snapshot")]
    Header(#[from] HeaderError),
    #[error("the archive is corrupted ({0}); re-run `memviz index` on the snapshot")]
    Corrupt(String),
}

/// A mapped, validated archive.
pub struct Archive {
    map: Mmap,
    header: Header,
    pub path: PathBuf,
}

/// Maps `file` read-only.
pub fn map(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: the mapping is read-only and private to this process. memviz never writes an
    // archive in place (writers create a temp file and rename it over the old one), so the bytes
    // cannot change under us unless another program truncates the file, which is the documented
    // risk of any mmap; every access goes through bounds we validated at open.
    unsafe { Mmap::map(file) }
}

/// True when the file starts with the archive magic.
pub fn is_archive(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok() && head == MAGIC
}

impl Archive {
    /// Maps and validates the archive: header, version, length and the rkyv structure (every
    /// pointer in bounds, every string UTF-8). Does not read the bulk data: see [`Self::verify`].
    pub fn open(path: &Path) -> Result<Archive, ArchiveError> {
        let file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Err(HeaderError::Magic.into());
        }
        let map = map(&file)?;
        let header = Header::parse(&map)?;
        let body = header.archive(&map);
        if body.as_ptr().align_offset(16) != 0 {
            return Err(ArchiveError::Corrupt("misaligned archive".into()));
        }
        if rkyv::access::<ArchivedRoot, rkyv::rancor::Failure>(body).is_err() {
            let why = rkyv::access::<ArchivedRoot, rkyv::rancor::BoxedError>(body)
                .err()
                .map_or_else(|| "invalid structure".to_owned(), |e| e.to_string());
            return Err(ArchiveError::Corrupt(why.replace('\n', " ")));
        }
        Ok(Archive { map, header, path: path.to_owned() })
    }

    /// [`Self::open`], then checks every byte against the header's hash.
    pub fn open_verified(path: &Path) -> Result<Archive, ArchiveError> {
        let a = Archive::open(path)?;
        a.verify()?;
        Ok(a)
    }

    /// Reads the whole archive and compares its hash with the header's.
    pub fn verify(&self) -> Result<(), ArchiveError> {
        if self.header.verify(self.header.archive(&self.map)) {
            Ok(())
        } else {
            Err(ArchiveError::Corrupt("checksum mismatch".into()))
        }
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Size of the file.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn root(&self) -> &ArchivedRoot {
        let body = &self.map[HEADER_LEN..HEADER_LEN + self.header.archive_len as usize];
        // SAFETY: `open` validated exactly these bytes with `rkyv::access`, and the mapping is
        // immutable for our lifetime.
        unsafe { rkyv::access_unchecked::<ArchivedRoot>(body) }
    }
}
