//! The app's side of texture residency: which textures the GPU holds (an LRU, the app decides
//! evictions), their CPU texels (hover reads the same ids the GPU draws), and a per-frame
//! upload budget so a burst of arriving tiles never stalls a frame.

use std::collections::HashMap;

use super::gpu::{TexData, TexKey};

/// Textures resident on the GPU at most.
pub const MAX_TEXTURES: usize = 96;
/// Texture uploads per frame at most (a tile is 512 KiB).
pub const UPLOADS_PER_FRAME: usize = 6;

#[derive(Default)]
pub struct Textures {
    /// Resident (or about to be: uploaded with this frame's paint) textures and their texels.
    resident: HashMap<TexKey, (TexData, u64)>,
    /// Arrived from the workers, waiting for upload budget.
    waiting: Vec<TexData>,
    frame: u64,
    /// Evicted outside `begin_frame`, to tell the GPU at the next one.
    evicted: Vec<TexKey>,
    pub uploaded: u64,
}

/// What this frame's paint must do on the GPU.
pub struct FrameUploads {
    pub uploads: Vec<TexData>,
    pub evict: Vec<TexKey>,
}

impl Textures {
    pub fn arrived(&mut self, data: TexData) {
        self.waiting.retain(|w| w.key != data.key);
        self.waiting.push(data);
    }

    pub fn is_resident(&self, key: &TexKey) -> bool {
        self.resident.contains_key(key)
    }

    pub fn is_known(&self, key: &TexKey) -> bool {
        self.resident.contains_key(key) || self.waiting.iter().any(|w| w.key == *key)
    }

    pub fn texels(&self, key: &TexKey) -> Option<&TexData> {
        self.resident.get(key).map(|(t, _)| t)
    }

    /// Marks a texture as drawn this frame (for the LRU).
    pub fn touch(&mut self, key: &TexKey) {
        if let Some(e) = self.resident.get_mut(key) {
            e.1 = self.frame;
        }
    }

    pub fn pending(&self) -> usize {
        self.waiting.len()
    }

    /// Starts a frame: moves up to the budget of waiting textures into residency (they are
    /// uploaded with this frame's paint) and evicts the least recently drawn beyond the cap.
    pub fn begin_frame(&mut self) -> FrameUploads {
        self.frame += 1;
        let n = self.waiting.len().min(UPLOADS_PER_FRAME);
        let uploads: Vec<TexData> = self.waiting.drain(..n).collect();
        for t in &uploads {
            self.resident.insert(t.key, (t.clone(), self.frame));
        }
        self.uploaded += uploads.len() as u64;
        let mut evict = std::mem::take(&mut self.evicted);
        while self.resident.len() > MAX_TEXTURES {
            let oldest = self.resident.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k);
            let Some(k) = oldest else { break };
            self.resident.remove(&k);
            evict.push(k);
        }
        FrameUploads { uploads, evict }
    }

    /// Drops every texture whose key matches (e.g. rasters of older views).
    pub fn evict_where(&mut self, gone: impl Fn(&TexKey) -> bool) {
        self.waiting.retain(|w| !gone(&w.key));
        let keys: Vec<TexKey> = self.resident.keys().filter(|k| gone(k)).copied().collect();
        for k in keys {
            self.resident.remove(&k);
            self.evicted.push(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn tile(index: u32) -> TexData {
        TexData {
            key: TexKey::Tile { device: 0, plane: 0, level: 8, index },
            width: 1,
            height: 1,
            texels: Arc::new(vec![index]),
            site_keys: None,
        }
    }

    #[test]
    fn uploads_are_budgeted_per_frame() {
        let mut t = Textures::default();
        for i in 0..10 {
            t.arrived(tile(i));
        }
        t.arrived(tile(3)); // arriving again replaces the waiting copy
        assert_eq!(t.pending(), 10);
        let first = t.begin_frame();
        assert_eq!(first.uploads.len(), UPLOADS_PER_FRAME);
        assert!(t.is_resident(&tile(0).key) && !t.is_resident(&tile(9).key) && t.is_known(&tile(9).key));
        assert_eq!(t.begin_frame().uploads.len(), 10 - UPLOADS_PER_FRAME);
        assert_eq!((t.pending(), t.uploaded), (0, 10));
        assert_eq!(t.texels(&tile(7).key).map(|d| d.texels[0]), Some(7), "hover reads what the GPU got");
    }

    #[test]
    fn the_least_recently_drawn_is_evicted_past_the_cap() {
        let mut t = Textures::default();
        for i in 0..MAX_TEXTURES as u32 {
            t.arrived(tile(i));
        }
        while t.pending() > 0 {
            assert!(t.begin_frame().evict.is_empty(), "nothing evicted under the cap");
        }
        // Every tile but 5 is drawn in the next frame; then one more arrives.
        t.begin_frame();
        for i in (0..MAX_TEXTURES as u32).filter(|&i| i != 5) {
            t.touch(&tile(i).key);
        }
        t.arrived(tile(1000));
        let frame = t.begin_frame();
        assert_eq!(frame.evict, [tile(5).key]);
        assert!(!t.is_resident(&tile(5).key) && t.is_resident(&tile(1000).key));
        // Rasters of an old view go when asked, and the GPU is told at the next frame.
        t.evict_where(|k| matches!(k, TexKey::Tile { index, .. } if *index < 3));
        assert_eq!(t.begin_frame().evict.len(), 3);
    }
}
