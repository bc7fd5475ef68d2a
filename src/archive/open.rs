//! Opening an archive: mmap, header checks, one bytecheck validation, then zero-copy access.
//!
//! An archive's bytes (since version 6) are checked block by block against its block table (whose
//! hash the header holds) as they are read: a command checks, before it prints, every block
//! it read ([`Archive::verify_read`]: the blocks with a page mapped into this process), and the
//! viewer checks every block on a background thread with file reads, which map nothing.
//! Older archives have one hash over the whole body.
//!
//! Archives of an older format version (down to `OLDEST_READABLE_VERSION`) keep opening: their
//! root is validated with that version's frozen types, converted to the current schema and
//! re-serialized in memory once (what the old version lacks reads as empty); the mapped file
//! is kept for the checksum. An archive of a newer version says to upgrade memviz.
//!
//! This file holds the crate's only `unsafe`: mapping the file, and reading the root without
//! re-validating it after [`Archive::open`] validated it once.

#![allow(unsafe_code)]

use memviz_format::rkyv;
use std::fs::File;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::Mmap;
use memviz_format::schema::{ArchivedRoot, Root};
use memviz_format::{BLOCK_LEN, FIRST_BLOCKED_VERSION, HEADER_LEN, Header, HeaderError, MAGIC, v1, v2, v3, v4};

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("cannot read the archive: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}; re-run `memviz index` on the snapshot")]
    Header(HeaderError),
    #[error("{0}")]
    Newer(HeaderError),
    #[error("the archive is corrupted ({0}); re-run `memviz index` on the snapshot")]
    Corrupt(String),
}

impl From<HeaderError> for ArchiveError {
    fn from(e: HeaderError) -> Self {
        match e {
            HeaderError::Newer { .. } => ArchiveError::Newer(e),
            e => ArchiveError::Header(e),
        }
    }
}

/// The archive's bytes: a read-only mapping of the file, or (archives made in memory, the fuzz
/// target) an aligned buffer.
enum Bytes {
    Mapped(Mmap),
    Memory(rkyv::util::AlignedVec),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Memory(v) => v,
        }
    }
}

/// A mapped, validated archive.
pub struct Archive {
    map: Bytes,
    /// The file mapped, for checking blocks without mapping them (`None` in memory).
    file: Option<File>,
    /// The root of an older-version archive, upgraded to the current schema.
    upgraded: Option<rkyv::util::AlignedVec>,
    header: Header,
    /// One bit per block of the block table: checked (always empty before version 6).
    checked: Box<[AtomicU64]>,
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

/// True when `path` is a regular file that starts with the archive magic. Anything else (a
/// pipe, standard input) is not looked into: its bytes can be read only once.
pub fn is_archive(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok()
        && head == MAGIC
}

impl Archive {
    /// Maps and validates the archive: header, version, length and the rkyv structure (every
    /// pointer in bounds, every string UTF-8). Does not read the bulk data: see [`Self::verify`].
    pub fn open(path: &Path) -> Result<Archive, ArchiveError> {
        Archive::open_with(path, false)
    }

    /// [`Self::open`] for an answer, which reads a few scattered pages: the kernel is told not to
    /// read ahead (from the validation on), which would fault in, and then check, whole
    /// neighbourhoods it never looks at. Not for what reads everything (`stats`, `export`, the
    /// viewer's tiles).
    pub fn open_scattered(path: &Path) -> Result<Archive, ArchiveError> {
        Archive::open_with(path, true)
    }

    fn open_with(path: &Path, scattered: bool) -> Result<Archive, ArchiveError> {
        let file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Err(HeaderError::Magic.into());
        }
        let map = map(&file)?;
        // The validation reads the structure's few scattered pages: read-ahead would map whole
        // neighbourhoods around each (a third of a GB of a 3.5 GB archive, with 8 MB read-ahead).
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Random);
        let mut a = Archive::from_bytes(Bytes::Mapped(map), path)?;
        #[cfg(unix)]
        if let (false, Bytes::Mapped(m)) = (scattered, &a.map) {
            let _ = m.advise(memmap2::Advice::Normal);
        }
        a.file = Some(file);
        Ok(a)
    }

    /// An archive held in memory (`file` = header + body), validated like a file.
    pub fn from_memory(file: &[u8], path: &Path) -> Result<Archive, ArchiveError> {
        let mut bytes = rkyv::util::AlignedVec::<16>::with_capacity(file.len());
        bytes.extend_from_slice(file);
        Archive::from_bytes(Bytes::Memory(bytes), path)
    }

    fn from_bytes(map: Bytes, path: &Path) -> Result<Archive, ArchiveError> {
        let header = Header::parse(&map)?;
        let body = header.archive(&map);
        if body.as_ptr().align_offset(16) != 0 {
            return Err(ArchiveError::Corrupt("misaligned archive".into()));
        }
        if header.format_version >= FIRST_BLOCKED_VERSION && !header.verify(&map) {
            return Err(ArchiveError::Corrupt("checksum mismatch in the block table".into()));
        }
        // Versions 6 and 7 kept version 5's types: 6 added the block table after the body, 7 the
        // coarse tiles' key chunks inside `TileLevel.tiles` (`ArchivedTileLevel::key_chunks`).
        let upgraded = match header.format_version {
            5.. => {
                validate::<ArchivedRoot>(body)?;
                None
            }
            older => {
                let corrupt = |e: rkyv::rancor::BoxedError| ArchiveError::Corrupt(e.to_string());
                // Each older version converts to the next, up to the current one.
                let v4: v4::Root = match older {
                    1 => {
                        let old = validate::<v1::ArchivedRoot>(body)?;
                        let v2: v2::Root = rkyv::deserialize::<v1::Root, _>(old).map_err(corrupt)?.into();
                        v3::Root::from(v2).into()
                    }
                    2 => {
                        let old = validate::<v2::ArchivedRoot>(body)?;
                        v3::Root::from(rkyv::deserialize::<v2::Root, _>(old).map_err(corrupt)?).into()
                    }
                    3 => {
                        let old = validate::<v3::ArchivedRoot>(body)?;
                        rkyv::deserialize::<v3::Root, _>(old).map_err(corrupt)?.into()
                    }
                    _ => {
                        let old = validate::<v4::ArchivedRoot>(body)?;
                        rkyv::deserialize::<v4::Root, _>(old).map_err(corrupt)?
                    }
                };
                let bytes = rkyv::to_bytes::<rkyv::rancor::BoxedError>(&Root::from(v4)).map_err(corrupt)?;
                validate::<ArchivedRoot>(&bytes)?;
                Some(bytes)
            }
        };
        let checked = (0..header.blocks().div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        let a = Archive { map, file: None, upgraded, header, checked, path: path.to_owned() };
        // memviz writes no archive without a device, and whatever shows one starts at the first:
        // refused here, before any reader (the viewer's first frame) reaches for it.
        if a.root().devices.is_empty() {
            return Err(ArchiveError::Corrupt("it holds no device".into()));
        }
        Ok(a)
    }

    /// True when the archive has a block table, so what is read can be checked as it is read.
    pub fn checks_blocks(&self) -> bool {
        self.header.format_version >= FIRST_BLOCKED_VERSION
    }

    /// The format version the file was written in (older ones lack newer sections).
    pub fn format_version(&self) -> u32 {
        self.header.format_version
    }

    /// The same file mapped again, for a pass over it whose pages go when it is dropped (the
    /// viewer's background id check); `None` for an archive in memory or upgraded from an older
    /// format (mapping it again would upgrade it again: check that one in place).
    pub fn remap(&self) -> Option<Result<Archive, ArchiveError>> {
        let file = self.file.as_ref().filter(|_| self.upgraded.is_none())?;
        let opened =
            map(file).map_err(ArchiveError::from).and_then(|m| Archive::from_bytes(Bytes::Mapped(m), &self.path));
        Some(opened)
    }

    /// [`Self::open`], then [`Self::verify`].
    pub fn open_verified(path: &Path) -> Result<Archive, ArchiveError> {
        let a = Archive::open(path)?;
        a.verify()?;
        Ok(a)
    }

    /// Reads the whole archive and compares its hash with the header's, then checks that its
    /// ids are consistent (every index in range: a colleague's file is untrusted input, and a
    /// valid checksum only says the bytes are the ones written).
    pub fn verify(&self) -> Result<(), ArchiveError> {
        self.verify_checksum()?;
        self.check_ids()
    }

    /// The checksum alone, of every byte (every block not checked yet), read through the
    /// mapping.
    pub fn verify_checksum(&self) -> Result<(), ArchiveError> {
        if self.header.format_version < FIRST_BLOCKED_VERSION {
            return match self.header.verify(&self.map) {
                true => Ok(()),
                false => Err(ArchiveError::Corrupt("checksum mismatch".into())),
            };
        }
        self.check_blocks(0..self.header.blocks(), false)
    }

    /// [`Self::verify_checksum`] with file reads instead of the mapping, so that the pages it
    /// reads are never mapped into this process (the viewer's background check holds none).
    pub fn verify_checksum_unmapped(&self) -> Result<(), ArchiveError> {
        match self.header.format_version < FIRST_BLOCKED_VERSION || self.file.is_none() {
            true => self.verify_checksum(),
            false => self.check_blocks(0..self.header.blocks(), true),
        }
    }

    /// Checks every block this process has read (a page of it is mapped here) and not checked
    /// yet: what a command calls before it answers, so a corrupted archive is an error, never a
    /// wrong answer, while what it did not read is never read. Where the pages mapped cannot be
    /// told (not Linux, no `/proc`), every block; before version 6, the whole body.
    pub fn verify_read(&self) -> Result<(), ArchiveError> {
        if self.header.format_version < FIRST_BLOCKED_VERSION || !matches!(self.map, Bytes::Mapped(_)) {
            return self.verify_checksum();
        }
        match super::pages::mapped_blocks(self.header.archive(&self.map), BLOCK_LEN) {
            Some(blocks) => self.check_blocks(blocks.into_iter(), false),
            None => self.verify_checksum(),
        }
    }

    /// Which blocks of the block table have been checked so far (empty before version 6).
    pub fn checked_blocks(&self) -> Vec<bool> {
        (0..self.header.blocks()).map(|i| self.checked[i / 64].load(Ordering::Relaxed) >> (i % 64) & 1 == 1).collect()
    }

    /// Checks the blocks in `blocks` that are not checked yet against the block table.
    fn check_blocks(&self, blocks: impl Iterator<Item = usize>, with_reads: bool) -> Result<(), ArchiveError> {
        let table = self.header.table(&self.map);
        let body = self.header.archive(&self.map);
        let mut buf = Vec::new();
        for i in blocks {
            let (word, bit) = (&self.checked[i / 64], 1u64 << (i % 64));
            if word.load(Ordering::Relaxed) & bit != 0 {
                continue;
            }
            let range = i * BLOCK_LEN..((i + 1) * BLOCK_LEN).min(body.len());
            let bytes = match (&self.file, with_reads) {
                (Some(file), true) => {
                    buf.resize(range.len(), 0);
                    read_at(file, &mut buf, (HEADER_LEN + range.start) as u64)?;
                    &buf[..]
                }
                _ => &body[range.clone()],
            };
            if !Header::verify_block(table, i, bytes) {
                return Err(ArchiveError::Corrupt(format!(
                    "checksum mismatch in bytes {}..{}",
                    range.start, range.end
                )));
            }
            word.fetch_or(bit, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Every id in range ([`super::consistency`]): reading in place cannot panic after this.
    pub fn check_ids(&self) -> Result<(), ArchiveError> {
        super::consistency::check(self.root()).map_err(ArchiveError::Corrupt)
    }

    /// [`Self::check_ids`], dropping the pages read from this process after each large pass, so
    /// the check holds at most about one column of the file (the viewer's background check, on
    /// a mapping of its own: [`Self::remap`]).
    pub fn check_ids_releasing(&self) -> Result<(), ArchiveError> {
        let release = || {
            #[cfg(unix)]
            if let Bytes::Mapped(m) = &self.map {
                // SAFETY: the mapping is private and read-only, so dropping its pages loses
                // nothing: a later read faults the file's bytes back in. Nothing borrowed from
                // it is invalidated (the addresses stay mapped).
                let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
            }
        };
        super::consistency::check_releasing(self.root(), &release).map_err(ArchiveError::Corrupt)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Size of the file.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn root(&self) -> &ArchivedRoot {
        let body = match &self.upgraded {
            Some(bytes) => bytes.as_slice(),
            None => &self.map[HEADER_LEN..HEADER_LEN + self.header.archive_len as usize],
        };
        // SAFETY: `open` validated exactly these bytes with `rkyv::access` as an `ArchivedRoot`
        // (the mapped body of a current archive, or the upgraded bytes of an older one), and
        // neither the mapping nor the vector changes for our lifetime.
        unsafe { rkyv::access_unchecked::<ArchivedRoot>(body) }
    }
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

/// Checks the rkyv structure of `body` as `T` (every pointer in bounds, every string UTF-8).
fn validate<T>(body: &[u8]) -> Result<&T, ArchiveError>
where
    T: rkyv::Portable + for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, rkyv::rancor::Failure>>,
    T: for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, rkyv::rancor::BoxedError>>,
{
    match rkyv::access::<T, rkyv::rancor::Failure>(body) {
        Ok(root) => Ok(root),
        Err(_) => {
            let why = rkyv::access::<T, rkyv::rancor::BoxedError>(body)
                .err()
                .map_or_else(|| "invalid structure".to_owned(), |e| e.to_string());
            Err(ArchiveError::Corrupt(why.replace('\n', " ")))
        }
    }
}
