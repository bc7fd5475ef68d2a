//! An opened archive, read in place, plus the few derived tables that are decompressed on
//! demand (action times, a few chunks at a time). The viewer shares one between its UI and its
//! tile workers; the command-line answers (`at`, `range`, `steps`, `diff`) read one the same way.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};

use memviz_format::rkyv;
use memviz_format::schema::{
    ArchivedAllocatorSection, ArchivedDevice, ArchivedRoot, ArchivedSeries, ArchivedTileLevel,
};
use memviz_format::view::{i64s, u32s, u64s};
use memviz_format::{TILE_H, TILE_W};

use super::{Archive, chunks, restore};
use crate::derive::timeline::{ActionTimes, NamedSpan, TimelineRef};
use crate::layout::{CheckpointsRef, LayoutRef};
use crate::lod::raster::SortedTimes;
use crate::model::{ActionIdx, DeviceId, DeviceIdx, NO_TIME};

/// An opened archive shared by the UI and the tile workers.
pub struct Session {
    pub archive: Archive,
    /// Why the archive is corrupted, once something found it out: the background checksum (its
    /// bytes do not match the header) or a chunk that did not decompress ([`Self::mark_corrupt`]).
    corrupt: OnceLock<String>,
    /// The background check of every id ([`Self::check_everything`]): the one line when one is out of
    /// range (a file memviz did not write).
    pub ids: OnceLock<Result<(), String>>,
    /// Held while a session whose check failed lives: panics of its readers stay quiet.
    quiet: Mutex<Option<super::guard::Deferring>>,
    /// Per device: each chunk of `action_time_us` summed up for the time axis, once every
    /// chunk was read ([`Self::time_axis`]).
    time_index: Vec<OnceLock<Vec<ChunkTimes>>>,
    /// The chunks of action times decompressed last, newest first (device, chunk, times): the
    /// time axis and the answers read the times they need without holding the column.
    time_cache: Mutex<Vec<CachedTimes>>,
    /// Chunks of action times a [`TimeAxis::sampled`] lookup wanted and did not find decoded:
    /// (device, chunk), for whoever decodes them off the UI thread ([`Self::take_wanted_times`]).
    wanted_times: Mutex<Vec<(usize, usize)>>,
    /// Per device: the first action of each chunk of `action_time_us`, and the number of actions.
    chunk_starts: Vec<Vec<u64>>,
    /// The earliest timed event over every device, once found.
    time_base: OnceLock<Option<i64>>,
}

/// A walk back through one device's allocator events from a saved state
/// ([`Session::allocator_walk`]): kept by whoever asks for neighbouring events.
pub struct AllocatorWalk<'e> {
    pub device: DeviceIdx,
    /// Its state is the allocator's after the event the walk stands at.
    pub undo: crate::allocator::Undo<'e>,
}

/// What one [`Session::allocator_walk`] did: saved states decoded (0 or 1) and events undone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkCost {
    pub states_decoded: u64,
    pub events_undone: u64,
}

impl Session {
    pub fn from_archive(archive: Archive) -> Session {
        let devices = &archive.root().devices;
        let n = devices.len();
        let chunk_starts: Vec<Vec<u64>> = devices
            .iter()
            .map(|d| {
                let mut at = 0u64;
                let mut starts = vec![0];
                for c in d.action_time_us.iter() {
                    at += u64::from(c.rows.to_native());
                    starts.push(at);
                }
                starts
            })
            .collect();
        Session {
            archive,
            corrupt: OnceLock::new(),
            ids: OnceLock::new(),
            quiet: Mutex::new(None),
            time_index: (0..n).map(|_| OnceLock::new()).collect(),
            time_cache: Mutex::new(Vec::new()),
            wanted_times: Mutex::new(Vec::new()),
            chunk_starts,
            time_base: OnceLock::new(),
        }
    }

    /// Notes that the archive is corrupted (the first reason found is kept): the viewer shows
    /// the one line instead of the timeline ([`Self::corruption`]).
    pub fn mark_corrupt(&self, why: impl std::fmt::Display) {
        let _ = self.corrupt.set(why.to_string());
    }

    /// Whether the archive is known to be bad (its check failed, or a chunk or the checksum did):
    /// nothing more should be read from it.
    pub fn is_bad(&self) -> bool {
        self.corruption().is_some() || self.ids.get().is_some_and(Result::is_err)
    }

    /// Why the archive is corrupted, if something found out.
    pub fn corruption(&self) -> Option<&str> {
        self.corrupt.get().map(String::as_str)
    }

    /// `result`, its error noted as the archive's corruption ([`Self::mark_corrupt`]).
    pub fn noting<T, E: std::fmt::Display>(&self, result: Result<T, E>) -> Option<T> {
        result.map_err(|e| self.mark_corrupt(e)).ok()
    }

    /// The time every printed time counts from: the earliest timed event of the snapshot, over
    /// all devices (µs since the Unix epoch). One instant has one time on every device.
    pub fn time_base_us(&self) -> Option<i64> {
        *self.time_base.get_or_init(|| self.device_indices().filter_map(|d| self.trace_start_us(d)).min())
    }

    pub fn root(&self) -> &ArchivedRoot {
        self.archive.root()
    }

    pub fn device(&self, d: DeviceIdx) -> &ArchivedDevice {
        &self.root().devices[d.index()]
    }

    pub fn devices(&self) -> usize {
        self.root().devices.len()
    }

    /// The CUDA ordinal (or the host) of device `d`.
    pub fn ordinal(&self, d: DeviceIdx) -> DeviceId {
        DeviceId(self.device(d).device.to_native())
    }

    /// Every device of the archive, in order.
    pub fn device_indices(&self) -> impl Iterator<Item = DeviceIdx> + use<> {
        (0..self.devices()).map(DeviceIdx)
    }

    pub fn layout(&self, d: DeviceIdx) -> LayoutRef<'_> {
        restore::layout_ref(self.device(d))
    }

    pub fn checkpoints(&self, d: DeviceIdx) -> CheckpointsRef<'_> {
        restore::checkpoints_ref(self.device(d))
    }

    /// Element id → stack id (the allocation site), for colouring and tooltips.
    pub fn sites(&self, d: DeviceIdx) -> &[u32] {
        u32s(&self.device(d).elements.stack)
    }

    pub fn str(&self, id: u32) -> &str {
        restore::str_at(self.root(), id)
    }

    /// Chunk `c` of device `d`'s action times (empty when it does not decompress), from the
    /// cache of the last [`TIME_CHUNKS_KEPT`].
    fn time_chunk(&self, d: DeviceIdx, c: usize) -> Arc<Vec<i64>> {
        let key = (d.index(), c);
        {
            let mut cache = self.time_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(i) = cache.iter().position(|&(dev, chunk, _)| (dev, chunk) == key) {
                let hit = cache.remove(i);
                let times = Arc::clone(&hit.2);
                cache.insert(0, hit);
                return times;
            }
        }
        let times = Arc::new(self.decode_time_chunk(d, c));
        let mut cache = self.time_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.insert(0, (key.0, key.1, Arc::clone(&times)));
        cache.truncate(TIME_CHUNKS_KEPT);
        times
    }

    /// Chunk `c` of device `d`'s action times if it is decoded already (never decodes it).
    fn cached_time_chunk(&self, d: DeviceIdx, c: usize) -> Option<Arc<Vec<i64>>> {
        let cache = self.time_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.iter().find(|&&(dev, chunk, _)| (dev, chunk) == (d.index(), c)).map(|hit| Arc::clone(&hit.2))
    }

    /// Notes that a sampled lookup wanted chunk `c` of device `d` decoded.
    fn want_times(&self, d: DeviceIdx, c: usize) {
        let mut wanted = self.wanted_times.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !wanted.contains(&(d.index(), c)) && wanted.len() < TIME_CHUNKS_KEPT {
            wanted.push((d.index(), c));
        }
    }

    /// The chunks of action times sampled lookups wanted since the last call, the newest first.
    pub fn take_wanted_times(&self) -> Vec<(DeviceIdx, usize)> {
        let mut wanted = self.wanted_times.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut *wanted).into_iter().rev().map(|(d, c)| (DeviceIdx(d), c)).collect()
    }

    /// Decodes chunk `c` of device `d`'s action times into the session's cache (a worker's
    /// answer to [`Self::take_wanted_times`]).
    pub fn load_time_chunk(&self, d: DeviceIdx, c: usize) {
        self.time_chunk(d, c);
    }

    fn decode_time_chunk(&self, d: DeviceIdx, c: usize) -> Vec<i64> {
        self.device(d)
            .action_time_us
            .get(c)
            .and_then(|chunk| self.noting(chunks::decode_deltas(chunk)))
            .unwrap_or_default()
    }

    /// Time of action `k`, decompressing only its chunk (`None`: no time, or out of range).
    pub fn action_time(&self, d: DeviceIdx, k: ActionIdx) -> Option<i64> {
        self.raw_action_time(d, k.index()).filter(|&t| t != NO_TIME)
    }

    /// Time of action `k` as stored (`NO_TIME` included).
    fn raw_action_time(&self, d: DeviceIdx, k: usize) -> Option<i64> {
        let starts = &self.chunk_starts[d.index()];
        let k = k as u64;
        if k >= *starts.last()? {
            return None;
        }
        let c = starts.partition_point(|&s| s <= k) - 1;
        self.time_chunk(d, c).get((k - starts[c]) as usize).copied()
    }

    /// Device `d`'s action times for the time axis, once [`Self::time_axis_now`] has read every
    /// chunk once ([`Self::check_everything`] does it after the first frame; never blocks the UI).
    pub fn time_axis(&self, d: DeviceIdx) -> Option<TimeAxis<'_>> {
        Some(self.axis_over(d, self.time_index[d.index()].get()?))
    }

    /// Device `d`'s time axis over its chunks' `index`, decoding what lookups need.
    fn axis_over<'s>(&'s self, d: DeviceIdx, index: &'s [ChunkTimes]) -> TimeAxis<'s> {
        TimeAxis {
            session: self,
            device: d,
            index,
            starts: &self.chunk_starts[d.index()],
            sampled: false,
            wants: false,
        }
    }

    /// As [`Self::time_axis`], for the UI thread: it never decodes a chunk. A lookup in a chunk
    /// that is not decoded answers from the chunk's samples (a time every [`TIME_SAMPLE`]
    /// actions: within that many actions of the exact answer) and notes the chunk as wanted
    /// ([`Self::take_wanted_times`]); once a worker decoded it, the answer is exact.
    pub fn time_axis_sampled(&self, d: DeviceIdx) -> Option<TimeAxis<'_>> {
        Some(TimeAxis { sampled: true, wants: true, ..self.time_axis(d)? })
    }

    /// As [`Self::time_axis`], reading every chunk first if no one has: what each chunk starts and
    /// ends with is kept (24 bytes a chunk of 64K actions), not its times.
    pub fn time_axis_now(&self, d: DeviceIdx) -> TimeAxis<'_> {
        let index = self.time_index[d.index()].get_or_init(|| {
            (0..self.device(d).action_time_us.len())
                .map(|c| {
                    let times = self.decode_time_chunk(d, c);
                    ChunkTimes {
                        first: times.first().copied().unwrap_or(NO_TIME),
                        first_timed: times.iter().copied().find(|&t| t != NO_TIME),
                        last: times.last().copied().unwrap_or(NO_TIME),
                        samples: times.iter().copied().step_by(TIME_SAMPLE).collect(),
                    }
                })
                .collect()
        });
        self.axis_over(d, index)
    }

    /// A device's action times as [`ActionTimes`], decompressed chunk by chunk as they are read.
    pub fn times(&self, d: DeviceIdx) -> DeviceTimes<'_> {
        DeviceTimes { session: self, device: d }
    }

    /// Time of the device's first timed trace event (what "into the trace" counts from, as in
    /// `memviz stats`); reads the event times' first chunk or two, not the whole column.
    pub fn trace_start_us(&self, d: DeviceIdx) -> Option<i64> {
        if let Some(summary) = self.device(d).summary.as_ref() {
            let t = summary.trace_start_us.to_native();
            return (t != NO_TIME).then_some(t);
        }
        let root = self.root();
        let from_events = (|| {
            let trace = self.trace(d);
            let rows = root.events.chunk_rows.to_native().max(1) as usize;
            let mut e = trace.start;
            while e < trace.end {
                let c = e / rows;
                let times = self.noting(chunks::decode_deltas(root.events.time_us.get(c)?))?;
                let stop = trace.end.min((c + 1) * rows);
                if let Some(&t) = times.get(e - c * rows..stop - c * rows)?.iter().find(|&&t| t != NO_TIME) {
                    return Some(t);
                }
                e = stop;
            }
            None
        })();
        from_events.or_else(|| (0..self.layout(d).actions.len()).find_map(|k| self.action_time(d, ActionIdx::at(k))))
    }

    /// Every check of the archive, for a background thread the caller runs it on (the viewer
    /// starts it once its first frame is drawn): every id (over [`Archive::remap`], whose
    /// pages go with it), then the checksum (with reads that map nothing), then every device's
    /// action times once for the time axis ([`Self::time_axis_now`]). Until the ids are checked,
    /// panics are deferred (`deferring`, made before the first read: [`super::guard`]): the
    /// viewer catches one, waits for [`Self::ids`] and shows the error.
    pub fn check_everything(&self, deferring: super::guard::Deferring) {
        let ids = match self.archive.remap() {
            Some(Ok(own)) => own.check_ids_releasing(),
            Some(Err(e)) => Err(e),
            None => self.archive.check_ids(),
        };
        let ids = ids.map_err(|e| format!("{}: {e}", self.archive.path.display()));
        match &ids {
            Ok(()) => super::guard::print_deferred(),
            Err(_) => drop(super::guard::take_deferred()),
        }
        let bad = ids.is_err();
        let _ = self.ids.set(ids);
        if bad {
            // Panics of readers still going over the bad archive (a worker's job begun before
            // the check ended) are its consequences too: they stay quiet while it is open.
            *self.quiet.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(deferring);
        } else {
            drop(deferring);
        }
        // Opening validated the structure; the checksum reads every byte, so it runs here,
        // after the first frame.
        if self.archive.verify_checksum_unmapped().is_err() {
            self.mark_corrupt("the archive is corrupted (checksum mismatch)");
            return;
        }
        for d in self.device_indices() {
            self.time_axis_now(d);
        }
    }

    /// [`Self::check_everything`]'s id check alone, here and now (where no thread can be started).
    pub fn check_ids_here(&self) {
        let _ = self.ids.set(self.archive.check_ids().map_err(|e| format!("{}: {e}", self.archive.path.display())));
    }

    /// The device a rank's snapshot is summed up by: the one with the highest peak (a rank's
    /// snapshot usually has one; ties: the first).
    pub fn main_device(&self) -> DeviceIdx {
        self.device_indices()
            .max_by_key(|&d| (self.elements(d).layout.peak_bytes, std::cmp::Reverse(d)))
            .unwrap_or(DeviceIdx(0))
    }

    /// The minimap's min/max levels of device `d`: (actions per bucket, mins, maxes), finest first.
    /// A level no index writes (no bucket width, or mins and maxes apart) is left out, so that a
    /// frame drawn before the background check says the archive is corrupted never divides by 0.
    pub fn minimap(&self, d: DeviceIdx) -> Vec<(u64, &[u64], &[u64])> {
        let levels =
            self.device(d).minimap.iter().map(|m| (m.actions_per_bucket.to_native(), u64s(&m.min), u64s(&m.max)));
        levels.filter(|&(per, min, max)| per != 0 && !min.is_empty() && min.len() == max.len()).collect()
    }

    /// Annotation spans of a device with their names, in archive order (by start time), with
    /// their actions when the archive's summary has them.
    pub fn named_spans(&self, d: DeviceIdx) -> Vec<NamedSpan<'_>> {
        let dev = self.device(d);
        let actions = dev.summary.as_ref().map(|s| &s.span_actions).filter(|a| a.len() == dev.spans.len());
        dev.spans
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let end = s.end_us.to_native();
                NamedSpan {
                    name: self.str(s.name.to_native()),
                    start_us: s.start_us.to_native(),
                    end_us: (end != i64::MIN).then_some(end),
                    depth: s.depth.to_native(),
                    actions: actions.map(|a| (a[i].0.to_native(), a[i].1.to_native())),
                }
            })
            .collect()
    }

    /// The allocator's segments and blocks after raw event `event` of device `d` (−1: before
    /// the first), from the archive's saved states: one chunk decoded, fewer than K events
    /// undone. `None` for an archive made before format 3 (re-index to see this).
    pub fn allocator_state(&self, d: DeviceIdx, event: i64) -> Option<crate::allocator::State> {
        let events = super::events::ArchiveEvents::new(self.root());
        self.allocator_walk(&events, d, event, None).map(|(walk, _)| walk.undo.state)
    }

    /// A walk back through device `d`'s allocator events standing just after raw event `event`
    /// (−1: before the first). `kept`, an earlier walk, goes on when it is of the same device and
    /// stands at or after the event by fewer than K events (so a step back is one more undo);
    /// otherwise the walk starts from the saved state at or after the event.
    /// Either way at most one saved state is decoded and fewer than K (`every`) events are
    /// undone, which the returned [`WalkCost`] counts. `None` for an archive made before
    /// format 3, or a saved state that does not decode.
    pub fn allocator_walk<'e>(
        &self,
        events: &'e dyn crate::allocator::EventColumns,
        d: DeviceIdx,
        event: i64,
        kept: Option<AllocatorWalk<'e>>,
    ) -> Option<(AllocatorWalk<'e>, WalkCost)> {
        use crate::layout::Replay as _;
        let a = &self.device(d).allocator;
        let (every, n) = (a.every.to_native() as usize, i64::from(a.events.to_native()));
        if every == 0 || a.states.is_empty() {
            return None;
        }
        let undone = (n - 1 - event.clamp(-1, n - 1)) as usize;
        let j = (undone / every).min(a.states.len() - 1);
        let mut cost = WalkCost::default();
        let goes_on =
            |w: &AllocatorWalk<'_>| w.device == d && w.undo.applied() <= undone && undone - w.undo.applied() < every;
        let mut undo = match kept.filter(goes_on) {
            Some(w) => w.undo,
            None => {
                let words = self.noting(chunks::decode::<u64>(&a.states[j]))?;
                cost.states_decoded = 1;
                crate::allocator::Undo::resume(events, self.trace(d), &words, j * every)
            }
        };
        let from = undo.applied();
        while undo.applied() < undone && undo.step() {}
        cost.events_undone = (undo.applied() - from) as u64;
        Some((AllocatorWalk { device: d, undo }, cost))
    }

    /// The device-relative raw event of element-timeline action `k` of device `d` (the last event
    /// for the synthetic action of a trace without actions).
    pub fn event_of_action(&self, d: DeviceIdx, k: ActionIdx) -> i64 {
        let trace = self.trace(d);
        match self.layout(d).action_event(k).get() {
            Some(e) => e.index() as i64 - trace.start as i64,
            None => trace.len() as i64 - 1,
        }
    }

    /// The snapshot's `allocator_settings`, parsed (`None`: not recorded).
    pub fn allocator_settings(&self) -> Option<serde_json::Value> {
        self.root().allocator_settings.as_ref().and_then(|s| serde_json::from_str(s.as_str()).ok())
    }

    /// Every `oom` event of device `d` with the allocator's state just before it, from the saved
    /// states (the action column is read to find them). `None` before format 3.
    pub fn oom_states(&self, d: DeviceIdx) -> Option<Vec<crate::allocator::OomState>> {
        use crate::allocator::EventColumns as _;
        if self.device(d).allocator.states.is_empty() {
            return None;
        }
        let start = self.trace(d).start;
        let events = super::events::ArchiveEvents::new(self.root());
        self.oom_events(d)
            .into_iter()
            .map(|i| {
                let e = start + i as usize;
                Some(crate::allocator::OomState {
                    event: i,
                    requested: events.size(e),
                    device_free: events.device_free(e),
                    before: self.allocator_state(d, i - 1)?.summary(i - 1),
                })
            })
            .collect()
    }

    /// The device-relative events of device `d` that are `oom`s (the action column is read).
    pub fn oom_events(&self, d: DeviceIdx) -> Vec<i64> {
        use crate::allocator::EventColumns as _;
        if let Some(summary) = self.device(d).summary.as_ref() {
            return summary.oom_events.iter().map(|e| i64::from(e.to_native())).collect();
        }
        let trace = self.trace(d);
        let events = super::events::ArchiveEvents::new(self.root());
        trace
            .clone()
            .filter(|&e| events.action(e) == crate::model::Action::Oom)
            .map(|e| (e - trace.start) as i64)
            .collect()
    }

    /// The absolute event range of device `d`'s trace.
    pub fn trace(&self, d: DeviceIdx) -> std::ops::Range<usize> {
        restore::trace_of(self.root(), self.device(d).device.to_native())
    }

    /// One of the allocator's per-action series of device `d`, decompressed (empty when the
    /// archive predates it): `series(d, |a| &a.reserved)`.
    pub fn allocator_series(
        &self,
        d: DeviceIdx,
        which: impl Fn(&ArchivedAllocatorSection) -> &ArchivedSeries,
    ) -> Vec<u64> {
        let s = which(&self.device(d).allocator);
        s.chunks
            .iter()
            .flat_map(|chunk| self.noting(chunks::decode_deltas(chunk)).unwrap_or_default())
            .map(|v| v as u64)
            .collect()
    }

    /// Reserved memory points (time µs, bytes) of a device.
    pub fn reserved(&self, d: DeviceIdx) -> (u64, &[i64], &[u64]) {
        let r = &self.device(d).reserved;
        (r.initial.to_native(), i64s(&r.time_us), u64s(&r.bytes))
    }

    /// The private pool of each segment of the segment timeline (`None`: the default pool): what
    /// its events recorded, else — for a segment still there at the end, and a ghost — the
    /// dump's `pool_id` at its address (torch 2.11 records no pool on segment events). One rule
    /// for the segment timeline's colours, the pools view and the allocator's state.
    pub fn segment_pools(&self, d: DeviceIdx) -> Vec<Option<(i64, i64)>> {
        use crate::derive::timeline::Attributes as _;
        let Some(seg) = self.stacked(d, Plane::Segments) else { return Vec::new() };
        let root = self.root();
        let ordinal = self.ordinal(d).0;
        let dump: std::collections::HashMap<u64, Option<(i64, i64)>> = root
            .segments
            .iter()
            .filter(|s| s.device.to_native() == ordinal)
            .map(|s| (s.address.to_native(), s.pool_id.as_ref().map(|p| (p.0.to_native(), p.1.to_native()))))
            .collect();
        let attrs = super::attrs::DeviceAttrs { root, layout: seg.layout };
        crate::derive::attrs::segment_pools(seg.layout, |id| attrs.attrs(id).pool, &dump)
    }

    /// The private pool of each element (`None`: the default pool): its event's `pool_id`, else
    /// the pool of the segment holding its address when it was allocated ([`Self::segment_pools`]).
    pub fn element_pools(&self, d: DeviceIdx) -> Vec<Option<(i64, i64)>> {
        use crate::derive::timeline::Attributes as _;
        let el = self.layout(d);
        let attrs = super::attrs::DeviceAttrs { root: self.root(), layout: el };
        let own = |id| attrs.attrs(id).pool;
        match self.stacked(d, Plane::Segments) {
            Some(seg) => crate::derive::attrs::element_pools(el, own, seg.layout, &self.segment_pools(d)),
            None => crate::derive::attrs::element_pools(el, own, el, &[]),
        }
    }

    /// The highest reserved bytes over the trace, the initial ones included.
    pub fn reserved_peak(&self, d: DeviceIdx) -> u64 {
        if let Some(summary) = self.device(d).summary.as_ref() {
            return summary.reserved_peak.to_native();
        }
        let (initial, _, bytes) = self.reserved(d);
        bytes.iter().copied().chain([initial]).max().unwrap_or(0)
    }

    /// The default steps the archive stores (`None`: none were found, or the archive is older
    /// than its summary or than the step rules of version 8: then they are computed afresh).
    /// Their rule is read off the rows and `spans` ([`crate::derive::step_rules::StepRule::of_stored`]).
    pub fn stored_steps(&self, d: DeviceIdx, spans: &[NamedSpan<'_>]) -> Option<crate::derive::steps::FamilySteps> {
        use crate::derive::steps::{FamilySteps, Retained, StepRow, StepRule};
        if self.archive.format_version() < memviz_format::STEP_RULES_VERSION {
            return None;
        }
        let summary = self.device(d).summary.as_ref()?;
        let none = |v: u32| (v != u32::MAX).then_some(v);
        let mut found = summary.steps.as_ref().map(|s| FamilySteps {
            family: s.family.as_str().to_owned(),
            rule: StepRule::default(),
            rows: s
                .rows
                .iter()
                .map(|r| StepRow {
                    span: none(r.span.to_native()).map(|i| i as usize),
                    start_action: r.start_action.to_native(),
                    end_action: r.end_action.to_native(),
                    total_start: r.total_start.to_native(),
                    total_end: r.total_end.to_native(),
                    peak_bytes: r.peak_bytes.to_native(),
                    peak_action: none(r.peak_action.to_native()),
                    before_trace: r.before_trace,
                })
                .collect(),
            retaining: s
                .retaining
                .iter()
                .map(|r| Retained {
                    stack: r.stack.to_native(),
                    bytes_per_step: r.bytes_per_step.to_native(),
                    steps: r.steps.to_native() as usize,
                })
                .collect(),
        })?;
        found.rule = StepRule::of_stored(&found, spans);
        Some(found)
    }
}

/// Which stacked timeline of a device: the elements' (the Active Memory Timeline) or the
/// segments' (the Active Cached Segment Timeline). Both are laid out by the same rules and read
/// the same way; a view draws one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Plane {
    #[default]
    Elements,
    Segments,
}

/// One stacked timeline of a device, read in place: its layout, checkpoints, tiles, and the
/// stack of each element (for segments: of its `segment_alloc`).
#[derive(Clone, Copy)]
pub struct StackedRef<'s> {
    pub layout: LayoutRef<'s>,
    pub checkpoints: CheckpointsRef<'s>,
    pub tiles: &'s rkyv::vec::ArchivedVec<ArchivedTileLevel>,
    /// Whether the coarse tiles' stored colour keys are by site (the element timeline's; the
    /// segment timeline stores none).
    pub keyed: bool,
    pub sites: &'s [u32],
}

impl StackedRef<'_> {
    /// Tile `tile` of level `level` (an index into `tiles`), decompressed: its texels, and the
    /// colour keys by site stored for them (`None` where the archive has none). An error for a
    /// tile the archive does not have or whose chunk does not decompress to a whole tile.
    pub fn tile(&self, level: usize, tile: usize) -> Result<(Vec<u32>, Option<Vec<u32>>), String> {
        let l = self.tiles.get(level).ok_or_else(|| format!("no tile level {level}"))?;
        let chunk = |chunks: &'_ [memviz_format::schema::ArchivedChunk]| {
            let chunk = chunks.get(tile).ok_or_else(|| format!("no tile {tile} at level {level}"))?;
            let values = chunks::decode::<u32>(chunk).map_err(|e| e.to_string())?;
            if values.len() != (TILE_W * TILE_H) as usize {
                return Err(format!("a tile of {} texels", values.len()));
            }
            Ok(values)
        };
        let texels = chunk(l.texel_chunks())?;
        let keys = match l.key_chunks().filter(|_| self.keyed) {
            Some(k) => Some(chunk(k)?),
            None => None,
        };
        Ok((texels, keys))
    }
}

impl Session {
    /// Device `d`'s timeline of `plane`; `None` for the segments of an archive made before
    /// format 4.
    pub fn stacked(&self, d: DeviceIdx, plane: Plane) -> Option<StackedRef<'_>> {
        let dev = self.device(d);
        Some(match plane {
            Plane::Elements => self.elements(d),
            Plane::Segments => StackedRef {
                layout: restore::segment_layout_ref(dev)?,
                checkpoints: restore::segment_checkpoints_ref(dev),
                tiles: &dev.segment_timeline.tiles,
                keyed: false,
                sites: u32s(&dev.segment_timeline.elements.stack),
            },
        })
    }
}

impl Session {
    /// Device `d`'s element timeline (every archive has one).
    pub fn elements(&self, d: DeviceIdx) -> StackedRef<'_> {
        let dev = self.device(d);
        StackedRef {
            layout: restore::layout_ref(dev),
            checkpoints: restore::checkpoints_ref(dev),
            tiles: &dev.tiles,
            keyed: true,
            sites: u32s(&dev.elements.stack),
        }
    }
}

/// The states at the peak and before each OOM from the saved states: one chunk decoded and
/// fewer than K events undone each (`None` for an archive made before format 3).
impl crate::allocator::SavedStates for Session {
    fn states(
        &self,
        device: DeviceId,
        wanted: &BTreeSet<i64>,
    ) -> Option<(Vec<crate::allocator::Summary>, Vec<crate::allocator::OomState>)> {
        let d = self.device_indices().find(|&d| self.ordinal(d) == device)?;
        let ooms = self.oom_states(d)?;
        let n = self.trace(d).len() as i64;
        let mut all: BTreeSet<i64> = wanted.iter().copied().filter(|i| (-1..n).contains(i)).collect();
        all.insert(n - 1);
        all.extend(ooms.iter().map(|o| o.event - 1));
        let states = all.into_iter().map(|e| Some(self.allocator_state(d, e)?.summary(e))).collect::<Option<_>>()?;
        Some((states, ooms))
    }
}

/// A decompressed chunk of action times: (device, chunk, times).
type CachedTimes = (usize, usize, Arc<Vec<i64>>);

/// How many chunks of action times a session keeps decompressed (8 bytes an action, 64K actions
/// a chunk: 16 MB).
pub const TIME_CHUNKS_KEPT: usize = 32;

/// Actions between two samples of the time axis ([`Session::time_axis_sampled`]): 8 bytes a
/// sample, 2 KB a chunk.
pub const TIME_SAMPLE: usize = 256;

/// What a chunk of action times starts and ends with, for searching the time axis without it,
/// and the time of every [`TIME_SAMPLE`]-th action in it.
#[derive(Debug, Clone)]
pub struct ChunkTimes {
    first: i64,
    first_timed: Option<i64>,
    last: i64,
    samples: Vec<i64>,
}

/// A device's action times (`NO_TIME` included, as stored) read a chunk at a time: a time, a
/// partition point (as on a slice, for the non-decreasing times a trace has) and the extent.
#[derive(Clone, Copy)]
pub struct TimeAxis<'s> {
    session: &'s Session,
    device: DeviceIdx,
    index: &'s [ChunkTimes],
    /// The first action of each chunk, and the number of actions.
    starts: &'s [u64],
    /// Lookups never decode a chunk ([`Session::time_axis_sampled`]).
    sampled: bool,
    /// Sampled lookups note the chunks they did not find decoded as wanted.
    wants: bool,
}

impl TimeAxis<'_> {
    pub fn len(&self) -> usize {
        self.starts.last().map_or(0, |&n| n as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same lookups, noting no chunk as wanted: for a view so wide that the samples are
    /// finer than its pixels.
    pub fn wanting_nothing(self) -> Self {
        TimeAxis { wants: false, ..self }
    }

    fn want(&self, c: usize) {
        if self.wants {
            self.session.want_times(self.device, c);
        }
    }

    /// Action `k`'s time as stored (`NO_TIME`: none); `None` past the end. Sampled: the time of
    /// the sample at or before it while its chunk is not decoded.
    pub fn get(&self, k: usize) -> Option<i64> {
        if !self.sampled {
            return self.session.raw_action_time(self.device, k);
        }
        let k64 = k as u64;
        if k64 >= *self.starts.last()? {
            return None;
        }
        let c = self.starts.partition_point(|&s| s <= k64) - 1;
        let at = (k64 - self.starts[c]) as usize;
        match self.session.cached_time_chunk(self.device, c) {
            Some(times) => times.get(at).copied(),
            None => {
                self.want(c);
                self.index[c].samples.get(at / TIME_SAMPLE).copied()
            }
        }
    }

    /// The first time that is one.
    pub fn first_timed(&self) -> Option<i64> {
        self.index.iter().find_map(|c| c.first_timed)
    }

    /// The last action's time as stored.
    pub fn last(&self) -> Option<i64> {
        self.index.last().map(|c| c.last)
    }

    /// As `[i64]::partition_point`: the chunk from each chunk's first time, then one chunk
    /// searched.
    pub fn partition_point<P: Fn(i64) -> bool>(&self, pred: P) -> usize {
        let c = self.index.partition_point(|ct| pred(ct.first));
        let Some(c) = c.checked_sub(1) else { return 0 };
        let rows = (self.starts[c + 1] - self.starts[c]) as usize;
        let within = if self.sampled {
            // The cached chunk is taken once: a worker filling the cache could evict it between
            // a check and a second lookup, which would then decode it here, on the UI thread.
            match self.session.cached_time_chunk(self.device, c) {
                Some(times) => times.partition_point(|&t| pred(t)),
                None => {
                    // Sample m − 1 holds and sample m does not: the answer is in ((m − 1)·S, m·S].
                    self.want(c);
                    self.index[c].samples.partition_point(|&t| pred(t)) * TIME_SAMPLE
                }
            }
        } else {
            self.session.time_chunk(self.device, c).partition_point(|&t| pred(t))
        };
        self.starts[c] as usize + within.min(rows)
    }
}

impl SortedTimes for TimeAxis<'_> {
    fn partition_point<P: Fn(i64) -> bool>(&self, pred: P) -> usize {
        TimeAxis::partition_point(self, pred)
    }
}

/// One device's action times, read through the session's chunk cache.
#[derive(Clone, Copy)]
pub struct DeviceTimes<'a> {
    session: &'a Session,
    device: DeviceIdx,
}

impl ActionTimes for DeviceTimes<'_> {
    fn time_us(&self, k: ActionIdx) -> Option<i64> {
        self.session.action_time(self.device, k)
    }
}

/// What a device's [`TimelineRef`] borrows that is not in the archive as is.
pub struct DeviceData<'s> {
    session: &'s Session,
    d: DeviceIdx,
    pub spans: Vec<NamedSpan<'s>>,
    times: DeviceTimes<'s>,
    trace_start_us: Option<i64>,
    time_base_us: Option<i64>,
    attrs: super::attrs::DeviceAttrs<'s>,
    /// The default steps, when the archive stores them.
    steps: Option<crate::derive::steps::FamilySteps>,
}

impl<'s> DeviceData<'s> {
    pub fn new(session: &'s Session, d: DeviceIdx) -> Self {
        let mut spans = session.named_spans(d);
        spans.sort_by_key(|s| s.start_us);
        let attrs = super::attrs::DeviceAttrs { root: session.root(), layout: session.layout(d) };
        let steps = session.stored_steps(d, &spans);
        DeviceData {
            session,
            d,
            spans,
            times: session.times(d),
            trace_start_us: session.trace_start_us(d),
            time_base_us: session.time_base_us(),
            attrs,
            steps,
        }
    }

    pub fn timeline(&self) -> TimelineRef<'_> {
        TimelineRef {
            layout: self.session.layout(self.d),
            checkpoints: self.session.checkpoints(self.d),
            sites: self.session.sites(self.d),
            spans: &self.spans,
            times: &self.times,
            trace_start_us: self.trace_start_us,
            time_base_us: self.time_base_us,
            attrs: &self.attrs,
            steps: self.steps.as_ref(),
            categories: None,
            pools: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundled snapshot's archive ([`crate::fixtures`]).
    fn session_of(rel: &str) -> Session {
        crate::fixtures::session(rel.trim_end_matches(".pickle"))
    }

    /// The allocator's state from the archive's saved states equals the model's backward pass
    /// at every event, and the per-action series equals the state after each action's event.
    #[test]
    fn allocator_state_from_the_archive_equals_the_model() {
        for name in ["frag_oom.pickle", "expandable.pickle", "cudagraph.pickle"] {
            let s = session_of(name);
            let snap = crate::fixtures::snapshot(name.trim_end_matches(".pickle"));
            let d = DeviceId(0);
            let n = snap.trace(d).len() as i64;
            let (all, _) = crate::allocator::states(&snap, d, &(-1..n).collect());
            for st in all.iter().step_by(7) {
                let got = s.allocator_state(DeviceIdx(0), st.event).unwrap().summary(st.event);
                assert!(got == *st, "{name}: event {}", st.event);
            }
            let (reserved, allocated) =
                (s.allocator_series(DeviceIdx(0), |a| &a.reserved), s.allocator_series(DeviceIdx(0), |a| &a.allocated));
            let l = s.layout(DeviceIdx(0));
            assert_eq!(reserved.len(), l.actions.len());
            for k in (0..l.actions.len() as u32).step_by(5) {
                let e = l.action_event(ActionIdx(k)).index() as i64;
                let st = &all[(e + 1) as usize];
                assert_eq!(
                    (reserved[k as usize], allocated[k as usize]),
                    (st.reserved, st.allocated),
                    "{name}: action {k}"
                );
            }
        }
    }

    /// A kept walk steps back one undo at a time, a step forward starts again from a saved
    /// state, and both give the state made afresh; no walk decodes two states or undoes K events.
    #[test]
    fn a_kept_walk_steps_back_one_undo_at_a_time() {
        let s = session_of("frag_oom.pickle");
        let d = DeviceIdx(0);
        let every = s.device(d).allocator.every.to_native() as u64;
        let n = i64::from(s.device(d).allocator.events.to_native());
        assert!(n > 3 * every as i64, "{n} events, K = {every}: several saved states");
        let events = super::super::events::ArchiveEvents::new(s.root());
        let (mut kept, mut decoded, mut last) = (None, 0, n - 1);
        for event in (0..n - 1).rev().take(2 * every as usize) {
            let (walk, cost) = s.allocator_walk(&events, d, event, kept.take()).unwrap();
            assert!(cost.states_decoded <= 1 && cost.events_undone < every, "event {event}: {cost:?}");
            if cost.states_decoded == 0 {
                assert_eq!(cost.events_undone, 1, "event {event}: a step back is one undo");
            }
            decoded += cost.states_decoded;
            assert!(walk.undo.state == s.allocator_state(d, event).unwrap(), "event {event}");
            (kept, last) = (Some(walk), event);
        }
        assert_eq!(decoded, 1, "one saved state decoded over 2K steps back");
        let (walk, cost) = s.allocator_walk(&events, d, last + 1, kept).unwrap();
        assert_eq!(cost.states_decoded, 1, "a step forward starts from a saved state");
        assert!(walk.undo.state == s.allocator_state(d, last + 1).unwrap());
    }

    #[test]
    fn one_action_time_decompresses_one_chunk() {
        let s = session_of("gpt2_small.pickle");
        let n = s.layout(DeviceIdx(0)).actions.len() as u32;
        assert_eq!(s.chunk_starts[0].len(), 2, "3,307 actions fit one chunk");
        let cached = || s.time_cache.lock().unwrap().len();
        assert_eq!(cached(), 0);
        let t = s.action_time(DeviceIdx(0), ActionIdx(1077)).unwrap();
        assert_eq!(cached(), 1, "its chunk is cached");
        assert!(s.time_axis(DeviceIdx(0)).is_none(), "the time axis was not read");
        let all = chunks::decode_deltas(&s.device(DeviceIdx(0)).action_time_us[0]).unwrap();
        assert_eq!(all[1077], t);
        assert!(
            (0..n)
                .all(|k| s.action_time(DeviceIdx(0), ActionIdx(k)) == Some(all[k as usize]).filter(|&x| x != NO_TIME))
        );
        let axis = s.time_axis_now(DeviceIdx(0));
        assert_eq!(axis.len(), all.len());
        assert_eq!(
            (axis.first_timed(), axis.last()),
            (all.iter().copied().find(|&t| t != NO_TIME), all.last().copied())
        );
        for x in [i64::MIN, all[0], all[1077], all[1077] + 1, *all.last().unwrap(), i64::MAX] {
            assert_eq!(axis.partition_point(|t| t < x), all.partition_point(|&t| t < x), "{x}");
            assert_eq!(axis.partition_point(|t| t <= x), all.partition_point(|&t| t <= x), "{x}");
        }
        assert_eq!(s.action_time(DeviceIdx(0), ActionIdx(n)), None, "past the end");
        // The time base is the earliest event, at or before the first action.
        assert!(s.time_base_us().unwrap() <= all[0]);
    }
}
