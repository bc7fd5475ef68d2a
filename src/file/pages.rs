//! Which blocks of a mapped archive this process has read: the pages of the mapping present in
//! its page table (`/proc/self/pagemap`, bit 63 of each page's entry). A file page is mapped in
//! only when something here touched it (or touched a neighbour: the kernel maps up to 64 KiB
//! around a fault), so these are the blocks whose bytes an answer may depend on.

/// The blocks of `block_len` bytes of `bytes` (a slice of a file mapping) with at least one page
/// mapped into this process, ascending; `None` where that cannot be told.
#[cfg(target_os = "linux")]
pub fn mapped_blocks(bytes: &[u8], block_len: usize) -> Option<Vec<usize>> {
    use std::os::unix::fs::FileExt as _;
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let page = page_size()?;
    let start = bytes.as_ptr() as usize;
    let (first, last) = (start / page, (start + bytes.len() - 1) / page);
    let pagemap = std::fs::File::open("/proc/self/pagemap").ok()?;
    let mut blocks: Vec<usize> = Vec::new();
    // 64 Ki entries (512 KiB) a read: a 4 GB archive's million pages in 16 reads.
    const BATCH: usize = 1 << 16;
    let mut buf = vec![0u8; BATCH * 8];
    let mut p = first;
    while p <= last {
        let n = (last + 1 - p).min(BATCH);
        pagemap.read_exact_at(&mut buf[..n * 8], p as u64 * 8).ok()?;
        for (j, entry) in buf[..n * 8].chunks_exact(8).enumerate() {
            if u64::from_le_bytes(entry.try_into().expect("8 bytes")) >> 63 == 0 {
                continue;
            }
            let page_start = ((p + j) * page).max(start) - start;
            let page_end = ((p + j + 1) * page).min(start + bytes.len()) - start;
            for b in page_start / block_len..=(page_end - 1) / block_len {
                if blocks.last() != Some(&b) {
                    blocks.push(b);
                }
            }
        }
        p += n;
    }
    Some(blocks)
}

#[cfg(not(target_os = "linux"))]
pub fn mapped_blocks(_bytes: &[u8], _block_len: usize) -> Option<Vec<usize>> {
    None
}

/// The page size, from the auxiliary vector the kernel gave this process (`AT_PAGESZ`).
#[cfg(target_os = "linux")]
fn page_size() -> Option<usize> {
    const AT_PAGESZ: u64 = 6;
    let auxv = std::fs::read("/proc/self/auxv").ok()?;
    let word = std::mem::size_of::<usize>();
    let value = |b: &[u8]| -> u64 {
        let mut v = [0u8; 8];
        v[..word].copy_from_slice(b);
        u64::from_le_bytes(v)
    };
    auxv.chunks_exact(2 * word)
        .find(|pair| value(&pair[..word]) == AT_PAGESZ)
        .map(|pair| value(&pair[word..]) as usize)
        .filter(|&p| p.is_power_of_two())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn only_the_pages_read_are_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let block = 64 * 1024;
        std::fs::write(&path, vec![7u8; 64 * block]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let map = crate::file::map(&file).unwrap();
        let _ = map.advise(memmap2::Advice::Random);
        assert_eq!(mapped_blocks(&map, block), Some(vec![]), "nothing read yet");
        let touched = [3usize, 40, 41];
        let sum: u32 = touched.iter().map(|&b| u32::from(map[b * block + 100])).sum();
        assert_eq!(sum, 21);
        // The kernel maps pages around a fault too (64 KiB, or the whole large folio a file just
        // written sits in), so more may come with them, never fewer.
        let mapped = mapped_blocks(&map, block).unwrap();
        assert!(touched.iter().all(|b| mapped.contains(b)), "{mapped:?}");
        assert!(page_size().is_some_and(|p| p >= 4096));
    }
}
