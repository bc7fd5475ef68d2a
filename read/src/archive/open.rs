//! Opening an archive's bytes: header checks, one bytecheck validation, then zero-copy access.
//! Where the bytes come from is the caller's ([`Source`]): the native side maps a file, a
//! browser fetches it; nothing here opens, maps or reads a file.
//!
//! An archive's bytes (since version 6) are checked block by block against its block table (whose
//! hash the header holds) as they are read: a command checks, before it prints, every block
//! it read ([`Archive::verify_read`]: the blocks its source says were read), and the
//! viewer checks every block on a background thread with reads that map nothing
//! ([`Source::read_at`]). Older archives have one hash over the whole body.
//!
//! Archives of an older format version (down to `OLDEST_READABLE_VERSION`) keep opening: their
//! root is validated with that version's frozen types, converted to the current schema and
//! re-serialized in memory once (what the old version lacks reads as empty); the mapped file
//! is kept for the checksum. An archive of a newer version says to upgrade memviz.
//!
//! This file holds the crate's only `unsafe`: reading the root without re-validating it after
//! [`Archive::new`] validated it once.

#![allow(unsafe_code)]

use memviz_format::rkyv;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU64, Ordering};

use memviz_format::schema::{ArchivedRoot, Root};
use memviz_format::{BLOCK_LEN, FIRST_BLOCKED_VERSION, HEADER_LEN, Header, HeaderError, v1, v2, v3, v4};

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

/// Where an archive's bytes live, and what their owner can do beyond handing them out: a mapped
/// file (the native side) or a buffer (a download, a test, the fuzz target: [`Memory`]).
pub trait Source: Send + Sync {
    /// The whole file: header, body and block table. Must not change while the archive lives.
    fn bytes(&self) -> &[u8];
    /// Reads `buf.len()` bytes at `offset` of the file without mapping them into this process;
    /// `None` where the source cannot (then the checks read [`Self::bytes`]).
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> Option<std::io::Result<()>> {
        None
    }
    /// Which blocks of `BLOCK_LEN` bytes of `body` (a part of [`Self::bytes`]) were read so far;
    /// `None` where that cannot be told (then every block counts as read).
    fn blocks_read(&self, _body: &[u8]) -> Option<Vec<usize>> {
        None
    }
    /// What is read next spans the archive, not a few scattered pages (a mapping may read ahead
    /// again after the validation's scattered reads).
    fn read_widely(&self) {}
    /// Lets go of what reading cost (a mapping's resident pages), after a large pass.
    fn release(&self) {}
    /// The same bytes again, for a pass whose cost goes when it is dropped; `None` when it would
    /// cost as much as reading these.
    fn again(&self) -> Option<std::io::Result<Box<dyn Source>>> {
        None
    }
}

/// An archive held in memory, 16-byte aligned as rkyv wants it.
pub struct Memory(pub rkyv::util::AlignedVec);

impl Memory {
    pub fn copy_of(file: &[u8]) -> Memory {
        let mut bytes = rkyv::util::AlignedVec::<16>::with_capacity(file.len());
        bytes.extend_from_slice(file);
        Memory(bytes)
    }
}

impl Source for Memory {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A validated archive over its [`Source`].
pub struct Archive {
    map: Box<dyn Source>,
    /// The root of an older-version archive, upgraded to the current schema.
    upgraded: Option<rkyv::util::AlignedVec>,
    header: Header,
    /// One bit per block of the block table: checked (always empty before version 6).
    checked: Box<[AtomicU64]>,
    /// What the archive is called in messages (its file's path, a URL).
    pub path: PathBuf,
}

impl Archive {
    /// An archive held in memory (`file` = header + body + block table), validated.
    pub fn from_memory(file: &[u8], path: &Path) -> Result<Archive, ArchiveError> {
        Archive::new(Box::new(Memory::copy_of(file)), path)
    }

    /// Validates the archive in `source`: header, version, length and the rkyv structure (every
    /// pointer in bounds, every string UTF-8). Does not read the bulk data: see [`Self::verify`].
    pub fn new(source: Box<dyn Source>, path: &Path) -> Result<Archive, ArchiveError> {
        let map = source;
        if map.bytes().is_empty() {
            return Err(HeaderError::Magic.into());
        }
        let bytes = map.bytes();
        let header = Header::parse(bytes)?;
        let body = header.archive(bytes);
        if body.as_ptr().align_offset(16) != 0 {
            return Err(ArchiveError::Corrupt("misaligned archive".into()));
        }
        if header.format_version >= FIRST_BLOCKED_VERSION && !header.verify(bytes) {
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
        let a = Archive { map, upgraded, header, checked, path: path.to_owned() };
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

    /// True for an archive of an older format upgraded in memory: its root is not the file's.
    pub fn is_upgraded(&self) -> bool {
        self.upgraded.is_some()
    }

    /// The format version the file was written in (older ones lack newer sections).
    pub fn format_version(&self) -> u32 {
        self.header.format_version
    }

    /// The same archive over its bytes again ([`Source::again`]: the same file mapped again), for
    /// a pass whose pages go when it is dropped (the viewer's background id check); `None` for an
    /// archive in memory or upgraded from an older format (opening it again would upgrade it
    /// again: check that one in place).
    pub fn remap(&self) -> Option<Result<Archive, ArchiveError>> {
        if self.upgraded.is_some() {
            return None;
        }
        let again = self.map.again()?;
        Some(again.map_err(ArchiveError::from).and_then(|m| Archive::new(m, &self.path)))
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
            return match self.header.verify(self.map.bytes()) {
                true => Ok(()),
                false => Err(ArchiveError::Corrupt("checksum mismatch".into())),
            };
        }
        self.check_blocks(0..self.header.blocks(), false)
    }

    /// [`Self::verify_checksum`] with file reads instead of the mapping, so that the pages it
    /// reads are never mapped into this process (the viewer's background check holds none).
    pub fn verify_checksum_unmapped(&self) -> Result<(), ArchiveError> {
        match self.header.format_version < FIRST_BLOCKED_VERSION {
            true => self.verify_checksum(),
            false => self.check_blocks(0..self.header.blocks(), true),
        }
    }

    /// Checks every block this process has read (for a mapped file: a page of it is mapped here)
    /// and not checked yet: what a command calls before it answers, so a corrupted archive is an
    /// error, never a wrong answer, while what it did not read is never read. Where what was read
    /// cannot be told (in memory; not Linux, no `/proc`), every block; before version 6, the
    /// whole body.
    pub fn verify_read(&self) -> Result<(), ArchiveError> {
        if self.header.format_version < FIRST_BLOCKED_VERSION {
            return self.verify_checksum();
        }
        match self.map.blocks_read(self.header.archive(self.map.bytes())) {
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
        let table = self.header.table(self.map.bytes());
        let body = self.header.archive(self.map.bytes());
        let mut buf = Vec::new();
        for i in blocks {
            let (word, bit) = (&self.checked[i / 64], 1u64 << (i % 64));
            if word.load(Ordering::Relaxed) & bit != 0 {
                continue;
            }
            let range = i * BLOCK_LEN..((i + 1) * BLOCK_LEN).min(body.len());
            buf.resize(range.len(), 0);
            let read = with_reads.then(|| self.map.read_at(&mut buf, (HEADER_LEN + range.start) as u64)).flatten();
            let bytes = match read {
                Some(done) => {
                    done?;
                    &buf[..]
                }
                None => &body[range.clone()],
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
        let release = || self.map.release();
        super::consistency::check_releasing(self.root(), &release).map_err(ArchiveError::Corrupt)
    }

    /// Where the bytes are.
    pub fn source(&self) -> &dyn Source {
        &*self.map
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Size of the file.
    pub fn file_len(&self) -> u64 {
        self.map.bytes().len() as u64
    }

    pub fn root(&self) -> &ArchivedRoot {
        let body = match &self.upgraded {
            Some(bytes) => bytes.as_slice(),
            None => &self.map.bytes()[HEADER_LEN..HEADER_LEN + self.header.archive_len as usize],
        };
        // SAFETY: `open` validated exactly these bytes with `rkyv::access` as an `ArchivedRoot`
        // (the mapped body of a current archive, or the upgraded bytes of an older one), and
        // neither the mapping nor the vector changes for our lifetime.
        unsafe { rkyv::access_unchecked::<ArchivedRoot>(body) }
    }
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
