//! A large-snapshot generator for benchmarks: stream-writes a snapshot pickle of about N events
//! with bounded memory by repeating a real recording's steady steps.
//!
//! ```text
//! cargo bench --bench gen_snapshot -- IN.pickle OUT.pickle --events N
//! ```
//!
//! The real trace is cut into prefix · window · suffix, where the window is the longest stretch
//! whose end leaves the allocator exactly as its start found it (the same blocks at the same
//! addresses, the same segments): a run of training steps in steady state. The output is the
//! prefix, the window repeated until about N events, then the suffix — each copy's times shifted
//! by the window's duration, its addresses the ones the allocator really reused, its frames the
//! recording's, pickled as torch pickles them (every dict memoized, each frame dict written once
//! and fetched from the memo after into a fresh list per event, a fresh `'N/A'` per event where
//! the recording has a compile context) — and the recording's dump, which stays true since every copy leaves the state as it
//! found it. Annotations inside the window repeat with it. Memory: the source model and one
//! output buffer, whatever N.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use memviz::model::{Action, BlockState, NO_TIME, Snapshot, Stage};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let events: u64 = match args.iter().position(|a| a == "--events") {
        Some(i) => {
            let n = args.get(i + 1).and_then(|v| v.replace(['_', ','], "").parse().ok());
            args.drain(i..(i + 2).min(args.len()));
            n.unwrap_or_else(|| usage())
        }
        None => usage(),
    };
    let [input, output] = <[String; 2]>::try_from(args).unwrap_or_else(|_| usage());
    let (snap, _) = memviz::ingest::read_path(&PathBuf::from(&input)).unwrap_or_else(|e| {
        eprintln!("error: {input}: {e}");
        std::process::exit(1)
    });
    let file = std::fs::File::create(&output).unwrap_or_else(|e| {
        eprintln!("error: {output}: {e}");
        std::process::exit(1)
    });
    let written = write(&snap, events, BufWriter::with_capacity(1 << 20, file)).unwrap_or_else(|e| {
        eprintln!("error: writing {output}: {e}");
        std::process::exit(1)
    });
    eprintln!("wrote {output}: {written} events");
}

fn usage() -> ! {
    eprintln!("usage: cargo bench --bench gen_snapshot -- IN OUT --events N");
    std::process::exit(2)
}

/// The device-relative events `a..b` of device 0's trace that leave the allocator as they found
/// it, so that `n + (copies − 1) × (b − a)` comes closest to `target` events: a running hash of
/// the state (a sum of per-block and per-segment hashes, updated per event) repeats. The start is
/// that of the longest such stretch; the end, among the points where the state comes back to it
/// (step boundaries, in training), the one whose length fits the target best.
fn steady_window(snap: &Snapshot, target: u64) -> Option<(usize, usize)> {
    let ev = &snap.events;
    let trace = snap.trace(memviz::model::DeviceId(0));
    let mix = |a: u64, b: u64, kind: u64| {
        let mut x = a ^ b.rotate_left(29) ^ kind.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^ (x >> 29)
    };
    let (alloc, pending, segment, mapped) = (1, 2, 3, 4);
    let mut pending_at: HashMap<u64, bool> = HashMap::new();
    let mut h = 0u64;
    let mut first: HashMap<u64, usize> = HashMap::new();
    let mut best: Option<(usize, usize)> = None;
    let mut hashes = vec![h];
    first.insert(h, 0);
    for (i, e) in trace.clone().enumerate() {
        let (a, s) = (ev.addr[e], ev.size[e]);
        match ev.action[e] {
            Action::Alloc => {
                h = h.wrapping_add(mix(a, s, alloc));
                pending_at.insert(a, false);
            }
            Action::FreeRequested => {
                h = h.wrapping_sub(mix(a, s, alloc)).wrapping_add(mix(a, s, pending));
                pending_at.insert(a, true);
            }
            Action::FreeCompleted | Action::Free => {
                let kind = if pending_at.remove(&a) == Some(true) { pending } else { alloc };
                h = h.wrapping_sub(mix(a, s, kind));
            }
            Action::SegmentAlloc => h = h.wrapping_add(mix(a, s, segment)),
            Action::SegmentFree => h = h.wrapping_sub(mix(a, s, segment)),
            Action::SegmentMap => h = h.wrapping_add(mix(a, s, mapped)),
            Action::SegmentUnmap => h = h.wrapping_sub(mix(a, s, mapped)),
            _ => {}
        }
        hashes.push(h);
        // After event i: a window start..=i exists when the state repeats.
        match first.get(&h) {
            Some(&start) if best.is_none_or(|(a, b)| i + 1 - start > b - a) => best = Some((start, i + 1)),
            Some(_) => {}
            None => {
                first.insert(h, i + 1);
            }
        }
    }
    let (a, b) = best.filter(|(a, b)| b > a)?;
    let n = trace.len() as u64;
    let misfit = |end: usize| {
        let w = (end - a) as u64;
        let copies = (target.saturating_sub(n) as f64 / w as f64).round() as u64 + 1;
        (n + (copies - 1) * w).abs_diff(target)
    };
    let end = (a + 1..=b).filter(|&p| hashes[p] == hashes[a] && p - a >= 1000.min(b - a)).min_by_key(|&p| misfit(p))?;
    Some((a, end))
}

/// Writes the snapshot; returns the number of trace events written.
pub fn write(snap: &Snapshot, target: u64, out: impl Write) -> std::io::Result<u64> {
    let trace = snap.trace(memviz::model::DeviceId(0));
    let n = trace.len();
    let (a, b) = steady_window(snap, target).unwrap_or((0, n));
    let window = (b - a).max(1);
    let copies = (target.saturating_sub(n as u64) as f64 / window as f64).round() as u64 + 1;
    let time = |i: usize| Some(snap.events.time_us[trace.start + i]).filter(|&t| t != NO_TIME);
    let duration = match (time(a), time(b - 1)) {
        // The copies follow each other with the gap the recording had between two events.
        (Some(t0), Some(t1)) => (t1 - t0).max(0) + 1,
        _ => 0,
    };
    eprintln!(
        "window: events {a}..{b} of {n} ({window} events, {duration} µs) written {copies} times; \
         prefix {a}, suffix {} events",
        n - b
    );
    let mut p = Pickler::new(out);
    p.raw(&[0x80, 4])?;
    p.raw(b"}")?;
    p.raw(b"(")?;
    p.key("segments")?;
    p.raw(b"]")?;
    p.raw(b"(")?;
    for s in &snap.segments {
        p.segment(snap, s)?;
    }
    p.raw(b"e")?;
    p.key("device_traces")?;
    p.raw(b"]")?;
    p.raw(b"(")?;
    p.raw(b"]")?;
    let mut written = 0u64;
    // Prefix, the copies of the window, the suffix: (event, time shift).
    let plan = (0..a)
        .map(|i| (i, 0))
        .chain((0..copies).flat_map(|c| (a..b).map(move |i| (i, c as i64 * duration))))
        .chain((b..n).map(|i| (i, (copies as i64 - 1) * duration)));
    let mut batch = 0;
    for (i, shift) in plan {
        if batch == 0 {
            p.raw(b"(")?;
        }
        p.event(snap, trace.start + i, shift)?;
        written += 1;
        batch += 1;
        if batch == 1000 {
            p.raw(b"e")?;
            batch = 0;
        }
    }
    if batch > 0 {
        p.raw(b"e")?;
    }
    p.raw(b"e")?;
    p.key("external_annotations")?;
    p.raw(b"]")?;
    p.raw(b"(")?;
    let (t_a, t_b) = (time(a).unwrap_or(i64::MIN), time(b - 1).unwrap_or(i64::MIN));
    for an in &snap.annotations {
        let repeats = if an.time_us >= t_a && an.time_us <= t_b { copies } else { 1 };
        let base = if an.time_us > t_b { (copies as i64 - 1) * duration } else { 0 };
        for c in 0..repeats {
            p.annotation(snap, an, base + c as i64 * duration)?;
        }
    }
    p.raw(b"e")?;
    p.raw(b"u")?;
    p.raw(b".")?;
    p.out.flush()?;
    Ok(written)
}

/// A pickle protocol 4 writer for the snapshot's shapes: keys and frame dicts are memoized the
/// first time and fetched after.
struct Pickler<W: Write> {
    out: W,
    memo: u32,
    strings: HashMap<String, u32>,
    frames: HashMap<u32, u32>,
}

impl<W: Write> Pickler<W> {
    fn new(out: W) -> Self {
        Pickler { out, memo: 0, strings: HashMap::new(), frames: HashMap::new() }
    }

    /// A dict: EMPTY_DICT, memoized as pickle memoizes every container, then MARK; its memo id.
    fn dict(&mut self) -> std::io::Result<u32> {
        self.raw(b"}")?;
        let id = self.memoize()?;
        self.raw(b"(")?;
        Ok(id)
    }

    fn raw(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.out.write_all(b)
    }

    fn memoize(&mut self) -> std::io::Result<u32> {
        self.raw(&[0x94])?;
        self.memo += 1;
        Ok(self.memo - 1)
    }

    fn get(&mut self, id: u32) -> std::io::Result<()> {
        if id < 256 {
            return self.raw(&[b'h', id as u8]);
        }
        self.raw(b"j")?;
        self.raw(&id.to_le_bytes())
    }

    /// A string written afresh (torch writes a new `'N/A'` per event), memoized.
    fn fresh(&mut self, s: &str) -> std::io::Result<()> {
        self.raw(&[0x8c, s.len().min(255) as u8])?;
        self.raw(&s.as_bytes()[..s.len().min(255)])?;
        self.memoize().map(|_| ())
    }

    /// A string, memoized (keys, action names, frame names and files repeat).
    fn key(&mut self, s: &str) -> std::io::Result<()> {
        if let Some(&id) = self.strings.get(s) {
            return self.get(id);
        }
        if s.len() < 256 {
            self.raw(&[0x8c, s.len() as u8])?;
        } else {
            self.raw(b"X")?;
            self.raw(&(s.len() as u32).to_le_bytes())?;
        }
        self.raw(s.as_bytes())?;
        let id = self.memoize()?;
        self.strings.insert(s.to_owned(), id);
        Ok(())
    }

    fn int(&mut self, v: i128) -> std::io::Result<()> {
        if (0..256).contains(&v) {
            self.raw(&[b'K', v as u8])
        } else if (i32::MIN as i128..=i32::MAX as i128).contains(&v) {
            self.raw(b"J")?;
            self.raw(&(v as i32).to_le_bytes())
        } else {
            // LONG1: the shortest little-endian two's complement.
            let bytes = v.to_le_bytes();
            let mut len = 16;
            while len > 1 {
                let (top, next) = (bytes[len - 1], bytes[len - 2]);
                if (top == 0 && next < 0x80) || (top == 0xff && next >= 0x80) {
                    len -= 1;
                } else {
                    break;
                }
            }
            self.raw(&[0x8a, len as u8])?;
            self.raw(&bytes[..len])
        }
    }

    fn item_int(&mut self, k: &str, v: i128) -> std::io::Result<()> {
        self.key(k)?;
        self.int(v)
    }

    fn item_str(&mut self, k: &str, v: &str) -> std::io::Result<()> {
        self.key(k)?;
        self.key(v)
    }

    /// `frames`: a fresh list of the stack's frame dicts, each written once and fetched after.
    fn frames(&mut self, snap: &Snapshot, stack: u32) -> std::io::Result<()> {
        self.key("frames")?;
        self.raw(b"]")?;
        self.memoize()?;
        if stack == memviz::model::NONE {
            return Ok(());
        }
        self.raw(b"(")?;
        for &id in snap.stacks.get(stack) {
            if let Some(&m) = self.frames.get(&id) {
                self.get(m)?;
                continue;
            }
            let f = &snap.frames[id as usize];
            let m = self.dict()?;
            self.item_str("name", snap.str(f.name))?;
            self.item_str("filename", snap.str(f.filename))?;
            self.item_int("line", i128::from(f.line.max(0)))?;
            self.raw(b"u")?;
            self.frames.insert(id, m);
        }
        self.raw(b"e")
    }

    fn event(&mut self, snap: &Snapshot, e: usize, shift: i64) -> std::io::Result<()> {
        let ev = &snap.events;
        self.dict()?;
        self.item_str("action", ev.action_name(e as u32, &snap.strings))?;
        self.item_int("addr", i128::from(ev.addr[e]))?;
        self.item_int("size", i128::from(ev.size[e]))?;
        self.item_int("stream", i128::from(ev.stream.get(e as u32)))?;
        if ev.time_us[e] != NO_TIME {
            self.item_int("time_us", i128::from(ev.time_us[e] + shift))?;
        }
        if let Some(free) = ev.device_free_of(e as u32) {
            self.item_int("device_free", i128::from(free))?;
        }
        let context = ev.compile_context.get(e as u32);
        if context != memviz::model::NONE {
            self.key("compile_context")?;
            self.fresh(snap.str(context))?;
        }
        let metadata = ev.user_metadata.get(e as u32);
        if metadata != memviz::model::NONE {
            self.item_str("user_metadata", snap.str(metadata))?;
        }
        self.frames(snap, ev.stack[e])?;
        self.raw(b"u")
    }

    fn segment(&mut self, snap: &Snapshot, s: &memviz::model::Segment) -> std::io::Result<()> {
        self.dict()?;
        self.item_int("device", i128::from(s.device.0))?;
        self.item_int("address", i128::from(s.address))?;
        self.item_int("total_size", i128::from(s.total_size))?;
        self.item_int("allocated_size", i128::from(s.allocated_size))?;
        self.item_int("active_size", i128::from(s.active_size))?;
        self.item_int("requested_size", i128::from(s.requested_size))?;
        self.item_int("stream", i128::from(s.stream))?;
        self.item_str("segment_type", snap.str(s.segment_type))?;
        if let Some((p0, p1)) = s.pool_id {
            self.key("segment_pool_id")?;
            self.int(i128::from(p0))?;
            self.int(i128::from(p1))?;
            self.raw(&[0x86])?; // TUPLE2
        }
        self.key("is_expandable")?;
        self.raw(&[if s.is_expandable { 0x88 } else { 0x89 }])?;
        self.frames(snap, s.stack)?;
        self.key("blocks")?;
        self.raw(b"]")?;
        self.raw(b"(")?;
        for b in snap.segment_blocks(s) {
            self.dict()?;
            self.item_int("address", i128::from(b.address))?;
            self.item_int("size", i128::from(b.size))?;
            self.item_int("requested_size", i128::from(b.requested_size))?;
            let state = match b.state {
                BlockState::ActiveAllocated => "active_allocated",
                BlockState::ActivePendingFree => "active_pending_free",
                BlockState::Inactive => "inactive",
                BlockState::Other(s) => snap.str(s),
            };
            self.item_str("state", state)?;
            self.frames(snap, b.stack)?;
            self.raw(b"u")?;
        }
        self.raw(b"e")?;
        self.raw(b"u")
    }

    fn annotation(&mut self, snap: &Snapshot, a: &memviz::model::Annotation, shift: i64) -> std::io::Result<()> {
        self.dict()?;
        self.item_int("device", i128::from(a.device))?;
        let stage = match a.stage {
            Stage::Start => "START",
            Stage::End => "END",
            Stage::Other(s) => snap.str(s),
        };
        self.item_str("stage", stage)?;
        self.item_str("name", snap.str(a.name))?;
        self.item_int("time_us", i128::from(a.time_us + shift))?;
        self.raw(b"u")
    }
}
