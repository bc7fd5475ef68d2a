//! Every id of an archive in range, every column the length its table says, the totals the
//! running sums of the elements' sizes: what makes reading an archive in place safe from panics
//! and overflows when its bytes are valid rkyv with a valid checksum but were not written by
//! memviz (a colleague's file is untrusted input). One pass over the hot data, no chunk
//! decompressed (chunks are checked when they are decompressed).

use memviz_format::schema::{
    ArchivedAllocatorSection, ArchivedCheckpoints, ArchivedDevice, ArchivedElements, ArchivedRoot, ArchivedSummary,
    ArchivedTileLevel,
};
use memviz_format::view::{u32s, u64s};
use memviz_format::{TILE_H, TILE_W};

use crate::model::NONE;

/// `Err(what is wrong)` for the first inconsistency found.
pub fn check(r: &ArchivedRoot) -> Result<(), String> {
    check_releasing(r, &|| {})
}

/// [`check`], calling `release` after each pass over a large part (the viewer drops the pages
/// read so far there, so that checking a 10 GB archive never holds all of it).
pub fn check_releasing(r: &ArchivedRoot, release: &dyn Fn()) -> Result<(), String> {
    let strings = r.strings.len();
    let frames = r.frames.name.len();
    let f = &r.frames;
    same_len("frame columns", &[f.name.len(), f.filename.len(), f.line.len()])?;
    // Strings of frames may be absent (`u32::MAX`: a name or file the snapshot did not give).
    for &s in u32s(&f.name).iter().chain(u32s(&f.filename)) {
        id_or_none("a frame's name or file", s, strings)?;
    }
    for fx in f.fx.iter() {
        if fx.0.to_native() as usize >= frames {
            return Err("fx info of a frame out of range".into());
        }
        for s in fx.1.iter() {
            id_or_none("fx strings", s.to_native(), strings)?;
        }
    }
    let offsets = u32s(&r.stacks.offsets);
    let stack_frames = u32s(&r.stacks.frames);
    if offsets.first() != Some(&0) || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err("stack offsets are not ascending from 0".into());
    }
    if offsets.last().is_some_and(|&end| end as usize > stack_frames.len()) {
        return Err("a stack runs past the frame list".into());
    }
    ids_in("stack frames", stack_frames, frames)?;
    let stacks = offsets.len().saturating_sub(1);
    // Strings and stacks are interned: one of each, the id its place (restoring the model
    // interns them again, and a repeat would shift every later id).
    let mut seen = std::collections::HashSet::with_capacity(strings);
    if let Some(i) = r.strings.iter().position(|s| !seen.insert(s.as_str())) {
        return Err(format!("string {i} repeats an earlier one"));
    }
    let mut seen = std::collections::HashSet::with_capacity(stacks);
    if let Some(i) = offsets.windows(2).position(|w| !seen.insert(&stack_frames[w[0] as usize..w[1] as usize])) {
        return Err(format!("stack {i} repeats an earlier one"));
    }
    drop(seen);

    let events = r.events.len.to_native() as usize;
    for (what, column) in [
        ("action", &r.events.action),
        ("addr", &r.events.addr),
        ("size", &r.events.size),
        ("time_us", &r.events.time_us),
        ("stack", &r.events.stack),
    ] {
        let rows: u64 = column.iter().map(|c| u64::from(c.rows.to_native())).sum();
        if rows != events as u64 {
            return Err(format!("event column `{what}` holds {rows} rows, the table {events}"));
        }
    }
    let traces = r.traces.iter().chain([&r.host_trace]);
    for t in traces {
        let (a, b) = (t.0.to_native() as usize, t.1.to_native() as usize);
        if a > b || b > events {
            return Err(format!("a trace covers events {a}..{b} of {events}"));
        }
    }
    let blocks = r.blocks.len();
    let mut previous_end = 0;
    for s in r.segments.iter() {
        let (a, b) = (s.blocks.0.to_native(), s.blocks.1.to_native());
        if a > b || b as usize > blocks || a < previous_end {
            return Err(format!("a segment lists blocks {a}..{b} of {blocks}"));
        }
        previous_end = b;
        id_or_none("a segment's stack", s.stack.to_native(), stacks)?;
        id_or_none("a segment's segment_type", s.segment_type.to_native(), strings)?;
    }
    for b in r.blocks.iter() {
        id_or_none("a block's stack", b.stack.to_native(), stacks)?;
    }
    for a in r.annotations.iter() {
        id_or_none("an annotation's name", a.name.to_native(), strings)?;
        id_or_none("an annotation's stage", a.stage_str.to_native(), strings)?;
    }
    release();
    for d in r.devices.iter() {
        let ordinal = d.device.to_native();
        // A device's elements name events of its own trace.
        let trace = super::restore::trace_of(r, ordinal);
        let tables = Tables { trace, blocks, stacks, strings };
        device(d, tables, release).map_err(|e| format!("device {ordinal}: {e}"))?;
    }
    Ok(())
}

/// The counts every id of a device is checked against.
#[derive(Clone)]
struct Tables {
    /// The events of the device's trace: those its elements' events are among.
    trace: std::ops::Range<usize>,
    blocks: usize,
    stacks: usize,
    strings: usize,
}

/// The columns a stacked timeline (elements, or the segment timeline) has.
struct Stacked<'a> {
    elements: &'a ArchivedElements,
    actions: &'a [u32],
    totals: &'a [u64],
    initial: &'a [u32],
    initial_total: u64,
    checkpoints: &'a ArchivedCheckpoints,
    tiles: &'a [ArchivedTileLevel],
    /// The segment timeline's (its elements are segments: a ghost names no block).
    segments: bool,
}

fn device(d: &ArchivedDevice, tables: Tables, release: &dyn Fn()) -> Result<(), String> {
    let (stacks, strings) = (tables.stacks, tables.strings);
    let actions = u32s(&d.actions);
    stacked(
        &Stacked {
            elements: &d.elements,
            actions,
            totals: u64s(&d.totals),
            initial: u32s(&d.initial),
            initial_total: d.initial_total.to_native(),
            checkpoints: &d.checkpoints,
            tiles: &d.tiles,
            segments: false,
        },
        &tables,
        release,
    )?;
    let t = &d.segment_timeline;
    // A segment timeline written by memviz always has checkpoints; an upgraded archive has none.
    if t.checkpoints.every.to_native() != 0 {
        let timeline = Stacked {
            elements: &t.elements,
            actions: u32s(&t.actions),
            totals: u64s(&t.totals),
            initial: u32s(&t.initial),
            initial_total: t.initial_total.to_native(),
            checkpoints: &t.checkpoints,
            tiles: &t.tiles,
            segments: true,
        };
        stacked(&timeline, &tables, release).map_err(|e| format!("segment timeline: {e}"))?;
    }
    min_max_levels("the minimap", &d.minimap, actions.len())?;
    let timed: u64 = d.action_time_us.iter().map(|c| u64::from(c.rows.to_native())).sum();
    if !d.action_time_us.is_empty() && timed != actions.len() as u64 {
        return Err(format!("{timed} action times for {} actions", actions.len()));
    }
    allocator(&d.allocator, actions.len())?;
    for s in d.spans.iter() {
        id_or_none("a span's name", s.name.to_native(), strings)?;
        // Nesting deeper than there are spans is no trace's: the viewer divides by depth + 1.
        if s.depth.to_native() as usize >= d.spans.len() {
            return Err(format!("a span's depth {} with {} spans", s.depth.to_native(), d.spans.len()));
        }
    }
    if let Some(summary) = d.summary.as_ref() {
        let totals = (d.initial_total.to_native(), u64s(&d.totals));
        summary_ids(summary, d.spans.len(), totals, d.allocator.events.to_native() as usize, stacks)
            .map_err(|e| format!("summary: {e}"))?;
    }
    Ok(())
}

/// The summary's ids in range, and its steps' totals the layout's (`totals`: the initial total
/// and the total after each action, both checked by [`stacked`]).
fn summary_ids(
    s: &ArchivedSummary,
    spans: usize,
    (initial_total, totals): (u64, &[u64]),
    events: usize,
    stacks: usize,
) -> Result<(), String> {
    let actions = totals.len();
    let total_before = |k: u32| if k == 0 { initial_total } else { totals[k as usize - 1] };
    same_len("spans and their actions", &[spans, s.span_actions.len()])?;
    let range = |a: u32, b: u32| a <= b && b as usize <= actions;
    if let Some((a, b)) = s.span_actions.iter().map(|r| (r.0.to_native(), r.1.to_native())).find(|&(a, b)| !range(a, b))
    {
        return Err(format!("a span's actions {a}..{b} are not within 0..{actions}"));
    }
    ids_in("an OOM event", &s.oom_events.iter().map(|e| e.to_native()).collect::<Vec<_>>(), events)?;
    let Some(steps) = s.steps.as_ref() else { return Ok(()) };
    for r in steps.rows.iter() {
        id_or_none("a step's span", r.span.to_native(), spans)?;
        if !range(r.start_action.to_native(), r.end_action.to_native()) {
            return Err("a step's actions are out of range".into());
        }
        id_or_none("a step's peak action", r.peak_action.to_native(), actions)?;
        let peak = match r.peak_action.to_native() {
            NONE => total_before(r.start_action.to_native()),
            k => totals[k as usize],
        };
        let (start, end) = (total_before(r.start_action.to_native()), total_before(r.end_action.to_native()));
        if (r.total_start.to_native(), r.total_end.to_native(), r.peak_bytes.to_native()) != (start, end, peak) {
            return Err("a step's totals are not the layout's".into());
        }
    }
    for r in steps.retaining.iter() {
        id_or_none("a retaining site", r.stack.to_native(), stacks)?;
    }
    Ok(())
}

/// The largest total a device's live bytes may reach: below 2^63, so that the difference of any
/// two totals is an exact `i64`.
const MAX_TOTAL: u64 = i64::MAX as u64;

/// How many items a pass over a column reads between two calls of `release`: a pass over a
/// large column — or, reading ids at random, over the columns it points into — holds no more
/// than this many items' pages (and what they point at).
const RELEASE_EVERY: usize = 1 << 20;

/// The items of `col`, calling `release` once each [`RELEASE_EVERY`] of them were read and once
/// the last was (when the pass runs to the end).
fn releasing<'c, T>(col: &'c [T], release: &'c dyn Fn()) -> impl Iterator<Item = &'c T> + 'c {
    let blocks = col.chunks(RELEASE_EVERY).enumerate().flat_map(move |(i, block)| {
        if i > 0 {
            release();
        }
        block
    });
    blocks.chain(std::iter::from_fn(move || {
        release();
        None
    }))
}

fn stacked(t: &Stacked<'_>, tables: &Tables, release: &dyn Fn()) -> Result<(), String> {
    let e = t.elements;
    let n = e.addr.len();
    same_len(
        "element columns",
        &[
            n,
            e.size.len(),
            e.start.len(),
            e.end.len(),
            e.origin.len(),
            e.alloc_event.len(),
            e.free_event.len(),
            e.block.len(),
            e.stack.len(),
            e.slot.len(),
        ],
    )?;
    let actions = t.actions;
    ids_in_releasing("actions", actions, n, release)?;
    if t.totals.len() != actions.len() {
        return Err(format!("{} totals for {} actions", t.totals.len(), actions.len()));
    }
    for (what, col) in [("start", u32s(&e.start)), ("end", u32s(&e.end))] {
        if releasing(col, release).any(|&k| k != NONE && k as usize >= actions.len()) {
            return Err(format!("an element's {what} action is out of range"));
        }
    }
    for (what, col, ids) in [
        ("alloc event", u32s(&e.alloc_event), tables.trace.clone()),
        ("free event", u32s(&e.free_event), tables.trace.clone()),
        ("block", u32s(&e.block), 0..tables.blocks),
        ("stack", u32s(&e.stack), 0..tables.stacks),
    ] {
        if releasing(col, release).any(|&i| i != NONE && !ids.contains(&(i as usize))) {
            return Err(format!("an element's {what} is out of range"));
        }
    }
    origins(e, !t.segments, release)?;
    ids_in("initial elements", t.initial, n)?;
    let sizes = u64s(&e.size);
    let initial = t.initial.iter().try_fold(0u64, |sum, &i| sum.checked_add(sizes[i as usize]));
    if initial != Some(t.initial_total) || t.initial_total > MAX_TOTAL {
        return Err("the initial total is not the initial elements' sizes".into());
    }
    // The replay removes an element by binary search over slots and pushes one per start; every
    // answer that subtracts two totals (a step's net, a range's change, a diff) reads them as
    // running sums of the elements' sizes, each below 2^63 so that any difference is exact.
    let mut total = t.initial_total;
    for ((k, &id), &stored) in releasing(actions, release).enumerate().zip(t.totals) {
        let (start, end) = (u32s(&e.start)[id as usize], u32s(&e.end)[id as usize]);
        let size = sizes[id as usize];
        let next = if start as usize == k {
            total.checked_add(size)
        } else if end as usize == k {
            total.checked_sub(size)
        } else {
            return Err(format!("action {k} neither starts nor ends element {id}"));
        };
        match next.filter(|&v| v == stored && v <= MAX_TOTAL) {
            Some(v) => total = v,
            None => return Err(format!("the total after action {k} is not the running sum of the elements' sizes")),
        }
    }
    ids_in("annotated elements", u32s(&e.annotated), n)?;
    for &s in u32s(&e.annotation) {
        id_or_none("annotation texts", s, tables.strings)?;
    }
    same_len("annotation columns", &[e.annotated.len(), e.annotation.len()])?;
    let c = t.checkpoints;
    let (starts, ids) = (u32s(&c.starts), u32s(&c.ids));
    if c.every.to_native() == 0 || starts.len() < 2 || starts[0] != 0 || starts.windows(2).any(|w| w[0] > w[1]) {
        return Err("checkpoints are not in order".into());
    }
    if starts.last().is_some_and(|&end| end as usize > ids.len()) {
        return Err("a checkpoint runs past its ids".into());
    }
    ids_in_releasing("checkpoint elements", ids, n, release)?;
    for level in t.tiles {
        let (columns, samples) = (level.columns.to_native() as usize, u32s(&level.sample));
        if samples.len() != columns {
            return Err(format!("tile level {} has {} samples for {columns} columns", level.level, samples.len()));
        }
        ids_in("tile samples", samples, actions.len())?;
        // A chunk per tile, or (the coarse levels since format 7) that and a keys chunk per tile.
        let n = columns.div_ceil(TILE_W as usize);
        if level.tiles.len() != n && level.tiles.len() != 2 * n {
            return Err(format!("tile level {} has {} chunks for {n} tiles", level.level, level.tiles.len()));
        }
        // Each a whole tile: what the viewer uploads is exactly a tile's texels.
        if let Some(c) = level.tiles.iter().find(|c| c.rows.to_native() != TILE_W * TILE_H) {
            return Err(format!("a tile of level {} holds {} texels, not {}", level.level, c.rows, TILE_W * TILE_H));
        }
    }
    Ok(())
}

/// Each element's origin one of the three; with `named`, with what it names: an alloc event for
/// `Alloc`, a free event for `FreeOnly`, a block for `Ghost` (where its stack is read from).
fn origins(e: &ArchivedElements, named: bool, release: &dyn Fn()) -> Result<(), String> {
    let (alloc, free, block) = (u32s(&e.alloc_event), u32s(&e.free_event), u32s(&e.block));
    for (i, &o) in releasing(e.origin.as_slice(), release).enumerate() {
        let names = match o {
            0 => alloc[i],
            1 => free[i],
            2 => block[i],
            _ => return Err(format!("element {i} has origin {o}")),
        };
        if named && names == NONE {
            return Err(format!("element {i} of origin {o} names no event or block"));
        }
    }
    Ok(())
}

/// Min/max levels of a series of `n` values as [`crate::lod::minimap`] makes them: none, or
/// 64 values a bucket, then 4 times as many a level, up to one bucket.
fn min_max_levels(what: &str, levels: &[memviz_format::schema::ArchivedMinMax], n: usize) -> Result<(), String> {
    let mut per = crate::lod::minimap::FINEST_BUCKET;
    for (i, l) in levels.iter().enumerate() {
        let buckets = n.div_ceil(per as usize);
        if l.actions_per_bucket.to_native() != per || l.min.len() != buckets || l.max.len() != buckets {
            return Err(format!("{what} level {i} is not {buckets} buckets of {per} values"));
        }
        if buckets == 1 && i + 1 != levels.len() {
            return Err(format!("{what} has levels past one bucket"));
        }
        per = per.saturating_mul(4);
    }
    if levels.last().is_some_and(|l| l.min.len() != 1) {
        return Err(format!("{what} levels stop before one bucket"));
    }
    Ok(())
}

fn allocator(a: &ArchivedAllocatorSection, actions: usize) -> Result<(), String> {
    if a.every.to_native() != 0 {
        let expected = (a.events.to_native() as usize) / a.every.to_native() as usize + 1;
        if a.states.len() != expected {
            return Err(format!("{} allocator states for {} events every {}", a.states.len(), a.events, a.every));
        }
    }
    let series = [
        ("reserved", &a.reserved),
        ("allocated", &a.allocated),
        ("requested", &a.requested),
        ("pending free", &a.pending_free),
        ("unallocated", &a.unallocated),
        ("largest free block", &a.largest_free),
        ("segment count", &a.segments),
    ];
    for (what, s) in series {
        let rows: u64 = s.chunks.iter().map(|c| u64::from(c.rows.to_native())).sum();
        if !s.chunks.is_empty() && rows != actions as u64 {
            return Err(format!("the allocator's {what} series has {rows} values for {actions} actions"));
        }
        min_max_levels(&format!("the allocator's {what} series"), &s.levels, actions)?;
    }
    for p in a.pools.iter() {
        let points = u32s(&p.actions);
        if points.len() != p.reserved.len() || points.windows(2).any(|w| w[0] >= w[1]) {
            return Err("a pool's series is not in order".into());
        }
        ids_in("a pool's actions", points, actions.max(1))?;
    }
    Ok(())
}

fn same_len(what: &str, lens: &[usize]) -> Result<(), String> {
    if lens.windows(2).all(|w| w[0] == w[1]) { Ok(()) } else { Err(format!("{what} of different lengths: {lens:?}")) }
}

fn ids_in(what: &str, ids: &[u32], len: usize) -> Result<(), String> {
    ids_in_releasing(what, ids, len, &|| {})
}

/// [`ids_in`] over a large column, its pages released as it goes ([`releasing`]).
fn ids_in_releasing(what: &str, ids: &[u32], len: usize, release: &dyn Fn()) -> Result<(), String> {
    match releasing(ids, release).find(|&&i| i as usize >= len) {
        Some(i) => Err(format!("{what}: id {i} is out of range (0..{len})")),
        None => Ok(()),
    }
}

fn id_or_none(what: &str, id: u32, len: usize) -> Result<(), String> {
    if id == NONE || (id as usize) < len { Ok(()) } else { Err(format!("{what}: id {id} is out of range (0..{len})")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::Archive;

    use crate::fixtures::golden as golden_of;

    fn golden() -> Vec<u8> {
        golden_of(memviz_format::FORMAT_VERSION)
    }

    #[test]
    fn real_archives_of_every_version_are_consistent() {
        for version in 1..=memviz_format::FORMAT_VERSION {
            let a = Archive::from_memory(&golden_of(version), std::path::Path::new("g.memviz")).unwrap();
            assert_eq!(check(a.root()), Ok(()), "version {version}");
        }
    }

    /// An archive rebuilt with one id out of range, re-sealed with a valid checksum: verify says
    /// so instead of a later panic.
    #[test]
    fn an_id_out_of_range_is_an_error_even_with_a_valid_checksum() {
        use memviz_format::rkyv;
        let bytes = golden();
        let a = Archive::from_memory(&bytes, std::path::Path::new("g.memviz")).unwrap();
        let mut root: memviz_format::schema::Root = rkyv::deserialize::<_, rkyv::rancor::Error>(a.root()).unwrap();
        let good = root.clone();
        let n = root.devices[0].elements.addr.len() as u32;
        root.devices[0].actions[10] = n + 5;
        let verify = |root: &memviz_format::schema::Root| {
            let body = rkyv::to_bytes::<rkyv::rancor::Error>(root).unwrap();
            let file = memviz_format::seal(&body, a.header().source);
            // Refused at open (no device), or by the check.
            match Archive::from_memory(&file, std::path::Path::new("bad.memviz")) {
                Ok(bad) => bad.verify().unwrap_err().to_string(),
                Err(e) => e.to_string(),
            }
        };
        let err = verify(&root);
        assert!(err.contains("device 0: actions: id") && err.contains("out of range"), "{err}");
        // Each value the viewer or a command divides by, indexes with or trusts to name something
        // (issue 41, item 4): one line each, found by the check.
        type Mutation = fn(&mut memviz_format::schema::Root);
        let cases: [(Mutation, &str); 10] = [
            // A span nested deeper than there are spans (the viewer divided by depth + 1).
            (|r| r.devices[0].spans[0].depth = u32::MAX, "a span's depth 4294967295"),
            (|r| r.devices[0].minimap[0].actions_per_bucket = 0, "the minimap level 0 is not"),
            (|r| r.devices[0].allocator.reserved.levels[1].actions_per_bucket = 0, "reserved series level 1 is not"),
            (|r| r.devices[0].tiles[0].tiles[0].rows = 1, "a tile of level"),
            (|r| r.devices[0].elements.origin[0] = 7, "element 0 has origin 7"),
            (|r| r.annotations[0].name = 1 << 30, "an annotation's name"),
            // Refused at open (`Archive::from_bytes`), before any check.
            (|r| r.devices.clear(), "it holds no device"),
            (|r| r.traces.clear(), "an element's alloc event is out of range"),
            (|r| r.devices[0].action_time_us[0].rows += 1, "action times for"),
            (|r| r.strings[5] = r.strings[4].clone(), "string 5 repeats"),
        ];
        for (mutate, expected) in cases {
            let mut root = good.clone();
            mutate(&mut root);
            let err = verify(&root);
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }
}
