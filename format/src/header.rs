//! The fixed 64-byte header that precedes the rkyv archive.
//!
//! It sits outside the archive so it can be read before any layout-dependent validation:
//! magic, version and layout flags say whether the rest is ours to read at all; the lengths and
//! hashes catch truncation and corruption; the source stamp says whether a cached archive still
//! matches the snapshot it was built from. All integers are little-endian.
//!
//! Since version 6 the archive is followed by its block table: the XXH64 of every
//! [`BLOCK_LEN`]-byte block of the archive, so that a reader checks what it reads when it
//! reads it instead of the whole file; the header's hash covers the table.

use crate::hash::xxh64;

/// PNG-style magic: a high byte, the name, and CR LF / EOF / LF to catch text-mode transfers.
pub const MAGIC: [u8; 8] = *b"\x89MVZ\r\n\x1a\n";
/// Bumped on every change to an archived type (validation proves memory safety, not schema).
pub const FORMAT_VERSION: u32 = 8;
/// The first version whose stored steps follow the step rules (`derive::step_rules`): found from
/// spans of any family, the optimizer's marks or the trace itself; a step row's `span` may be
/// `u32::MAX`. Readers recompute the steps of older archives.
pub const STEP_RULES_VERSION: u32 = 8;
/// The first version with a block table (older ones hash the whole archive).
pub const FIRST_BLOCKED_VERSION: u32 = 6;
/// Bytes of the archive each block-table entry covers (the last block may be shorter).
pub const BLOCK_LEN: usize = 64 * 1024;
/// The oldest version this build still reads (older archives are upgraded in memory on open).
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// Header size; a multiple of the archive's alignment (16), so the body stays aligned in a mmap.
pub const HEADER_LEN: usize = 64;

/// rkyv layout this build writes: little-endian, aligned, 64-bit relative pointers, rkyv 0.8.
pub const LAYOUT_FLAGS: u32 = 1 | 1 << 1 | 64 << 8 | 8 << 24;

/// What the archive was built from, to decide whether a cached archive is still valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SourceStamp {
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch (0 when unknown).
    pub mtime_ns: i64,
    /// XXH64 of the first 64 KiB followed by the last 64 KiB of the source file.
    pub fingerprint: u64,
}

/// Bytes of the source's head and of its tail that the fingerprint covers.
pub const FINGERPRINT_SPAN: usize = 64 * 1024;

impl SourceStamp {
    /// Fingerprint of a head and tail slice (each at most [`FINGERPRINT_SPAN`]).
    pub fn fingerprint(head: &[u8], tail: &[u8]) -> u64 {
        xxh64(tail, xxh64(head, 0))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub format_version: u32,
    pub layout_flags: u32,
    pub archive_len: u64,
    /// XXH64 of the block table (since version 6), or of the archive bytes (versions 1 to 5).
    pub archive_hash: u64,
    pub source: SourceStamp,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("not a .memviz archive (bad magic)")]
    Magic,
    #[error("the archive is truncated: {have} bytes, the header promises {want}")]
    Truncated { have: u64, want: u64 },
    #[error("the archive header is corrupted")]
    Corrupt,
    #[error(
        "made by a newer memviz (format {found}; this memviz reads formats {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}): upgrade memviz"
    )]
    Newer { found: u32 },
    #[error(
        "archive format version {found} is not one this memviz reads ({OLDEST_READABLE_VERSION} to {FORMAT_VERSION})"
    )]
    Version { found: u32 },
    #[error("archive written with a different binary layout (flags {found:#x})")]
    Layout { found: u32 },
}

/// The block table of `archive`: each block's XXH64 (seed 0), little-endian.
pub fn block_table(archive: &[u8]) -> Vec<u8> {
    archive.chunks(BLOCK_LEN).flat_map(|b| xxh64(b, 0).to_le_bytes()).collect()
}

/// A whole current-version file: header, `archive`, its block table.
pub fn seal(archive: &[u8], source: SourceStamp) -> Vec<u8> {
    let table = block_table(archive);
    let header = Header::with_table(archive.len() as u64, &table, source);
    let mut file = Vec::with_capacity(HEADER_LEN + archive.len() + table.len());
    file.extend_from_slice(&header.to_bytes());
    file.extend_from_slice(archive);
    file.extend_from_slice(&table);
    file
}

impl Header {
    /// A current-version header for an archive of `archive_len` bytes whose block table
    /// (computed while streaming it) is `table`.
    pub fn with_table(archive_len: u64, table: &[u8], source: SourceStamp) -> Header {
        let archive_hash = xxh64(table, 0);
        Header { format_version: FORMAT_VERSION, layout_flags: LAYOUT_FLAGS, archive_len, archive_hash, source }
    }

    /// Blocks of the block table (0 before version 6).
    pub fn blocks(&self) -> usize {
        if self.format_version >= FIRST_BLOCKED_VERSION {
            self.archive_len.div_ceil(BLOCK_LEN as u64) as usize
        } else {
            0
        }
    }

    /// Bytes of the block table.
    pub fn table_len(&self) -> u64 {
        self.blocks() as u64 * 8
    }

    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.format_version.to_le_bytes());
        b[12..16].copy_from_slice(&self.layout_flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.archive_len.to_le_bytes());
        b[24..32].copy_from_slice(&self.archive_hash.to_le_bytes());
        b[32..40].copy_from_slice(&self.source.size.to_le_bytes());
        b[40..48].copy_from_slice(&self.source.mtime_ns.to_le_bytes());
        b[48..56].copy_from_slice(&self.source.fingerprint.to_le_bytes());
        let h = xxh64(&b[..56], 0);
        b[56..64].copy_from_slice(&h.to_le_bytes());
        b
    }

    /// Parses and checks the header of a whole file (`file` = header + archive).
    pub fn parse(file: &[u8]) -> Result<Header, HeaderError> {
        if file.len() < 8 || file[..8] != MAGIC {
            return Err(HeaderError::Magic);
        }
        if file.len() < HEADER_LEN {
            return Err(HeaderError::Truncated { have: file.len() as u64, want: HEADER_LEN as u64 });
        }
        let u32_at = |i: usize| u32::from_le_bytes(file[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(file[i..i + 8].try_into().expect("8 bytes"));
        if xxh64(&file[..56], 0) != u64_at(56) {
            return Err(HeaderError::Corrupt);
        }
        let header = Header {
            format_version: u32_at(8),
            layout_flags: u32_at(12),
            archive_len: u64_at(16),
            archive_hash: u64_at(24),
            source: SourceStamp { size: u64_at(32), mtime_ns: u64_at(40) as i64, fingerprint: u64_at(48) },
        };
        if header.format_version > FORMAT_VERSION {
            return Err(HeaderError::Newer { found: header.format_version });
        }
        if header.format_version < OLDEST_READABLE_VERSION {
            return Err(HeaderError::Version { found: header.format_version });
        }
        if header.layout_flags != LAYOUT_FLAGS {
            return Err(HeaderError::Layout { found: header.layout_flags });
        }
        let want = (HEADER_LEN as u64).checked_add(header.archive_len).and_then(|n| n.checked_add(header.table_len()));
        let want = want.ok_or(HeaderError::Corrupt)?;
        if (file.len() as u64) < want {
            return Err(HeaderError::Truncated { have: file.len() as u64, want });
        }
        Ok(header)
    }

    /// The archive bytes of a whole file whose header parsed.
    pub fn archive<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        &file[HEADER_LEN..HEADER_LEN + self.archive_len as usize]
    }

    /// The block table of a whole file whose header parsed (empty before version 6).
    pub fn table<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        let start = HEADER_LEN + self.archive_len as usize;
        &file[start..start + self.table_len() as usize]
    }

    /// Checks the stored hash: of the block table since version 6 (then each block is checked
    /// against the table when read: [`Header::verify_block`]), of every archive byte before.
    pub fn verify(&self, file: &[u8]) -> bool {
        if self.format_version >= FIRST_BLOCKED_VERSION {
            xxh64(self.table(file), 0) == self.archive_hash
        } else {
            xxh64(self.archive(file), 0) == self.archive_hash
        }
    }

    /// Checks block `i` (its bytes `bytes`) against a table that [`Header::verify`] accepted.
    pub fn verify_block(table: &[u8], i: usize, bytes: &[u8]) -> bool {
        table.get(i * 8..i * 8 + 8).is_some_and(|h| h == xxh64(bytes, 0).to_le_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let archive: Vec<u8> = (0..BLOCK_LEN as u32 + 100).map(|i| (i % 251) as u8).collect();
        let stamp = SourceStamp { size: 5, mtime_ns: -3, fingerprint: 9 };
        let file = seal(&archive, stamp);
        let h = Header::parse(&file).unwrap();
        assert_eq!((h.archive_len, h.blocks(), h.source), (archive.len() as u64, 2, stamp));
        assert_eq!(file.len(), HEADER_LEN + archive.len() + 16);
        assert!(h.verify(&file));
        let table = h.table(&file);
        assert!(Header::verify_block(table, 0, &archive[..BLOCK_LEN]));
        assert!(Header::verify_block(table, 1, &archive[BLOCK_LEN..]));
        assert!(!Header::verify_block(table, 1, &archive[BLOCK_LEN + 1..]));
        assert!(!Header::verify_block(table, 2, &[]), "no block past the table");

        assert_eq!(Header::parse(&file[..50]), Err(HeaderError::Truncated { have: 50, want: 64 }));
        let whole = file.len() as u64;
        assert_eq!(Header::parse(&file[..120]), Err(HeaderError::Truncated { have: 120, want: whole }));
        assert_eq!(
            Header::parse(&file[..file.len() - 1]),
            Err(HeaderError::Truncated { have: whole - 1, want: whole }),
            "the block table is part of the file"
        );
        assert_eq!(Header::parse(b"hello world, this is not it"), Err(HeaderError::Magic));
        let mut bad = file.clone();
        bad[20] ^= 1;
        assert_eq!(Header::parse(&bad), Err(HeaderError::Corrupt));
        let mut other = h;
        other.format_version = 99;
        let mut file2 = other.to_bytes().to_vec();
        file2.extend_from_slice(&archive);
        assert_eq!(Header::parse(&file2), Err(HeaderError::Newer { found: 99 }));
        other.format_version = 0;
        let mut file3 = other.to_bytes().to_vec();
        file3.extend_from_slice(&archive);
        assert_eq!(Header::parse(&file3), Err(HeaderError::Version { found: 0 }));
        let mut flipped = file.clone();
        flipped[80] ^= 1;
        let p = Header::parse(&flipped).unwrap();
        assert!(p.verify(&flipped), "the table is intact");
        assert!(!Header::verify_block(p.table(&flipped), 0, &p.archive(&flipped)[..BLOCK_LEN]), "the block is not");
        let mut table_flipped = file.clone();
        let n = table_flipped.len();
        table_flipped[n - 1] ^= 1;
        let p = Header::parse(&table_flipped).unwrap();
        assert!(!p.verify(&table_flipped), "table corruption is caught by the header's hash");
    }
}
