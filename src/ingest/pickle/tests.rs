//! Decoder tests on pickles written here byte by byte (protocol 4 opcodes, as torch writes).

use super::decode;
use crate::model::Snapshot;

/// Writes the opcodes of a snapshot: just enough of a pickler for these tests.
#[derive(Default)]
struct Pickler {
    out: Vec<u8>,
    memo: u32,
}

impl Pickler {
    fn memoize(&mut self) -> u32 {
        self.out.push(0x94);
        self.memo += 1;
        self.memo - 1
    }

    fn str(&mut self, s: &str) -> u32 {
        self.out.push(0x8c);
        self.out.push(s.len() as u8);
        self.out.extend_from_slice(s.as_bytes());
        self.memoize()
    }

    fn get(&mut self, slot: u32) {
        self.out.push(b'j');
        self.out.extend_from_slice(&slot.to_le_bytes());
    }

    fn int(&mut self, i: u32) {
        self.out.push(b'J');
        self.out.extend_from_slice(&i.to_le_bytes());
    }

    /// `{` then `MARK`: the items follow, then [`Self::end_dict`].
    fn dict(&mut self) -> u32 {
        self.out.push(b'}');
        let slot = self.memoize();
        self.out.push(b'(');
        slot
    }

    fn end_dict(&mut self) {
        self.out.push(b'u');
    }

    fn list(&mut self) -> u32 {
        self.out.push(b']');
        let slot = self.memoize();
        self.out.push(b'(');
        slot
    }

    fn end_list(&mut self) {
        self.out.push(b'e');
    }

    /// The start of a one-device snapshot up to its first event — `{segments: [], device_traces:
    /// [[` — with `keys` memoized (and popped: they only live in the memo); their slots.
    fn begin_trace(&mut self, keys: &[&str]) -> Vec<u32> {
        self.out.extend_from_slice(&[0x80, 4]);
        self.dict();
        self.str("segments");
        self.list();
        self.end_list();
        self.str("device_traces");
        self.list();
        self.list();
        let slots: Vec<u32> = keys.iter().map(|k| self.str(k)).collect();
        for _ in &slots {
            self.out.push(b'0'); // POP
        }
        slots
    }

    /// Closes what [`Self::begin_trace`] opened and stops.
    /// Writes frame dicts (`f{n}` in a.py at line n; `keys`: name, filename, line) until there is
    /// a frame `f`, each left on the stack and memoized (its slot in `frames`), popped (`0`).
    fn frames_up_to(&mut self, f: usize, frames: &mut Vec<u32>, keys: &[u32]) {
        while frames.len() <= f {
            let slot = self.dict();
            self.get(keys[0]);
            self.str(&format!("f{}", frames.len()));
            self.get(keys[1]);
            self.str("a.py");
            self.get(keys[2]);
            self.int(frames.len() as u32);
            self.end_dict();
            self.out.push(b'0');
            frames.push(slot);
        }
    }

    fn end_trace(&mut self) {
        self.end_list(); // the device's events
        self.end_list(); // device_traces
        self.end_dict();
        self.out.push(b'.');
    }
}

/// A snapshot whose one device has an `alloc` event per frame list in `stacks` (frame indices).
fn snapshot_with_stacks(stacks: &[&[usize]]) -> Snapshot {
    let mut p = Pickler::default();
    let keys = p.begin_trace(&["action", "addr", "size", "frames", "name", "filename", "line"]);
    let mut frames: Vec<u32> = Vec::new();
    for (i, stack) in stacks.iter().enumerate() {
        p.dict();
        p.get(keys[0]);
        p.str("alloc");
        p.get(keys[1]);
        p.int(4096 * (i as u32 + 1));
        p.get(keys[2]);
        p.int(512);
        p.get(keys[3]);
        p.list();
        for &f in *stack {
            // A frame dict is written where first used, then fetched from the memo.
            p.frames_up_to(f, &mut frames, &keys[4..7]);
            p.get(frames[f]);
        }
        p.end_list();
        p.end_dict();
    }
    p.end_trace();
    decode(&p.out[..]).expect("a valid snapshot").0
}

#[test]
fn each_event_gets_its_own_stack() {
    let stacks: [&[usize]; 8] = [&[0, 1], &[0, 1], &[0], &[0, 1], &[], &[], &[1, 0], &[0, 1]];
    let snap = snapshot_with_stacks(&stacks);
    assert_eq!(snap.event_count(), stacks.len());
    for (i, want) in stacks.iter().enumerate() {
        let got: Vec<String> = snap.stack_frames(snap.events.stack[i]).map(|f| snap.str(f.name).to_owned()).collect();
        let want: Vec<String> = want.iter().map(|f| format!("f{f}")).collect();
        assert_eq!(got, want, "event {i}");
    }
    assert_eq!(snap.stacks.len(), 4, "[0 1], [0], [], [1 0]");
    assert_eq!(snap.events.stack[0], snap.events.stack[3]);
    assert_eq!(snap.events.stack[4], snap.events.stack[5]);
}

/// A pickler may split an event dict over two SETITEMS. The row goes to the reader's row sink
/// when it is pushed (at the first), so the second must tell the sink again, reading the row
/// back from it: an index's compressed chunk and layout walk of that row would be stale
/// otherwise.
#[test]
fn a_row_rewritten_after_it_was_handed_over_is_handed_over_again() {
    let mut p = Pickler::default();
    let keys = p.begin_trace(&["action", "addr", "size", "time_us"]);
    for i in 0..5u32 {
        p.dict();
        p.get(keys[0]);
        p.str("alloc");
        p.get(keys[1]);
        p.int(4096 * (i + 1));
        p.get(keys[2]);
        p.int(512);
        if i != 1 {
            p.get(keys[3]);
            p.int(10 + i);
        }
        p.end_dict();
        if i == 1 {
            // Event 1 completes the first two rows; its time comes in a second batch.
            p.out.push(b'(');
            p.get(keys[3]);
            p.int(99);
            p.end_dict();
        }
    }
    p.end_trace();

    /// A sink that holds the rows' values and notes what it is told: (pushed?, event, time).
    struct Log(std::sync::Arc<std::sync::Mutex<Vec<(bool, u32, i64)>>>, Vec<crate::model::RowValues>);
    impl crate::ingest::RowSink for Log {
        fn push(&mut self, _: &crate::model::Events, id: u32, v: crate::model::RowValues) {
            self.0.lock().unwrap().push((true, id, v.time_us));
            self.1.push(v);
        }
        fn set(&mut self, _: &crate::model::Events, id: u32, v: crate::model::RowValues) {
            self.0.lock().unwrap().push((false, id, v.time_us));
            self.1[id as usize] = v;
        }
        fn values(&mut self, id: u32) -> Option<crate::model::RowValues> {
            self.1.get(id as usize).copied()
        }
        fn finish(&mut self, events: &crate::model::Events) {
            assert!(!events.holds_values(), "the values went to the sink, not the model");
            assert_eq!(
                self.1[1],
                crate::model::RowValues { addr: 8192, size: 512, time_us: 99, stack: crate::model::NONE }
            );
        }
    }
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Log(seen.clone(), Vec::new());
    let snap = super::decode_observed(&p.out[..], Some(Box::new(sink))).expect("a valid snapshot").0;
    assert_eq!(snap.events.len(), 5);
    let none = crate::model::NO_TIME;
    let told = [(true, 0, 10), (true, 1, none), (false, 1, 99), (true, 2, 12), (true, 3, 13), (true, 4, 14)];
    assert_eq!(*seen.lock().unwrap(), told);
}

/// The snapshot read with and without the event fast path (`convert/fast.rs`), as the model's
/// debug text, and how many events the fast path read; read in ranges, it must be the same (and
/// how many events were read in ranges).
fn both_ways(bytes: &[u8]) -> (String, String, usize, usize) {
    use super::convert::knob;
    let general = |only: bool| {
        knob::GENERAL_ONLY.set(only);
        let got = decode(bytes).map(|(snap, _)| format!("{snap:?}")).map_err(|e| e.to_string());
        knob::GENERAL_ONLY.set(false);
        got.unwrap_or_else(|e| format!("error: {e}"))
    };
    let slow = general(true);
    knob::FAST_EVENTS.set(0);
    let fast = general(false);
    let read_fast = knob::FAST_EVENTS.get();
    // And in ranges on the pool (`convert/ranged.rs`), down to a batch a range.
    knob::RANGED_EVENTS.set(0);
    for every in [1, 4096] {
        let ranged = super::decode_in_ranges(bytes, every).map(|(snap, _)| format!("{snap:?}"));
        let ranged = ranged.unwrap_or_else(|e| format!("error: {e}"));
        assert!(ranged == fast, "read in ranges of {every} bytes, it differs:\n{ranged}\n{fast}");
    }
    let ranged_events = knob::RANGED_EVENTS.get() / 2;
    // And mapped (`ingest::mapped`: the window moved over the bytes, not filled), serially and
    // in ranges, told how far it read as it goes.
    for every in [None, Some(1), Some(4096)] {
        let (reached, last) = (std::cell::Cell::new(0), std::cell::Cell::new(true));
        let behind = |at: u64| {
            last.set(last.get() && at >= reached.get() && at <= bytes.len() as u64);
            reached.set(at);
        };
        let src = super::Mapped { bytes, behind: &behind };
        let mapped = super::decode_mapped_with(src, None, every).map(|(snap, _)| format!("{snap:?}"));
        let mapped = mapped.unwrap_or_else(|e| format!("error: {e}"));
        assert!(mapped == fast, "read mapped ({every:?}), it differs:\n{mapped}\n{fast}");
        assert!(last.get(), "told of offsets going back or past the end");
    }
    (slow, fast, read_fast, ranged_events)
}

/// The fast path builds the very model the VM builds — strings, stacks and frames interned in the
/// same order, the same memo — on every real fixture (most of whose events it reads) and on
/// events it must hand back half-read: frames written inline, a frame given as text, a `None`
/// value, a value the dict memoized itself, an event split over two `SETITEMS`, a dict with an
/// `action` that is not an event, a truncated event.
#[test]
fn the_event_fast_path_builds_what_the_vm_builds() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut fixtures = 0;
    // The real recordings, then the synthetic ones (other protocols, legacy lists, odd values).
    for (dir, real) in [(data.clone(), true), (data.join("synth"), false)] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "pickle") {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let (slow, fast, read_fast, _) = both_ways(&bytes);
            assert!(slow == fast, "{}: the two ways differ", path.display());
            if real {
                let events = decode(&bytes[..]).unwrap().0.event_count();
                assert!(read_fast * 2 > events, "{}: {read_fast} of {events} events read fast", path.display());
            }
            fixtures += 1;
        }
    }
    assert!(fixtures >= 15, "the fixtures are there");

    let mut odd = Vec::new();
    for variant in 0..8 {
        let mut p = Pickler::default();
        let keys = p.begin_trace(&["action", "addr", "size", "frames", "name", "filename", "line", "user_metadata"]);
        // A frame in the memo, for the events that fetch theirs.
        let frame = p.dict();
        p.get(keys[4]);
        p.str("f");
        p.get(keys[5]);
        p.str("a.py");
        p.get(keys[6]);
        p.int(1);
        p.end_dict();
        p.out.push(b'0');
        for i in 0..4u32 {
            p.dict();
            p.get(keys[0]);
            let action = p.str("alloc");
            p.get(keys[1]);
            p.int(4096 * (i + 1));
            p.get(keys[2]);
            p.int(512);
            if i == 2 {
                match variant {
                    0 => {
                        // Frames written inline.
                        p.get(keys[3]);
                        p.list();
                        p.dict();
                        p.get(keys[4]);
                        p.str("g");
                        p.get(keys[5]);
                        p.str("b.py");
                        p.end_dict();
                        p.end_list();
                    }
                    1 => {
                        p.get(keys[3]);
                        p.list();
                        p.str("text frame");
                        p.end_list();
                    }
                    2 => {
                        p.get(keys[7]);
                        p.out.push(b'N');
                    }
                    3 => {
                        p.get(keys[7]);
                        p.get(action);
                    }
                    4 => {
                        p.end_dict();
                        p.out.push(b'(');
                        p.get(keys[7]);
                        p.str("late");
                    }
                    5 => {
                        p.get(keys[3]);
                        p.list();
                        p.get(frame);
                        p.get(frame);
                        p.end_list();
                        p.get(keys[3]);
                        p.list();
                        p.end_list();
                    }
                    6 => {
                        // A key that is not a string (counted as an unknown key).
                        p.int(7);
                        p.int(8);
                    }
                    _ => {
                        // Cut off inside the event: truncated, whichever way.
                        p.out.truncate(p.out.len() - 2);
                        break;
                    }
                }
            }
            p.get(keys[3]);
            p.list();
            p.get(frame);
            p.end_list();
            p.end_dict();
        }
        p.end_trace();
        let (slow, fast, _, _) = both_ways(&p.out);
        assert!(slow == fast, "variant {variant}: the two ways differ:\n{slow}\n{fast}");
        odd.push(slow);
    }
    assert!(odd[7].starts_with("error:"), "{}", odd[7]);
    assert!(odd[..7].iter().all(|o| !o.starts_with("error:")), "{odd:?}");
}

/// A trace in batches as torch writes them (`MARK events APPENDS`, 50 events each) whose events
/// fetch frames and a string made in earlier batches: batch 0 writes its frames inline and batch
/// 2 one more (those batches are the serial reader's; the others fetch what they made, across
/// ranges), batch 1 memoizes the `compile_context` the later ones fetch.
fn batched_trace() -> Vec<u8> {
    batched_trace_with(Odd::None)
}

/// What [`batched_trace_with`] writes into batch 4.
#[derive(Clone, Copy, PartialEq)]
enum Odd {
    None,
    /// Addresses whose bytes are a batch's first four (`( } MEMOIZE (`): a candidate batch start
    /// in the middle of an event.
    LookAlike,
    /// An event whose `compile_context` fetches a memo entry made only later.
    Unmade,
}

fn batched_trace_with(odd: Odd) -> Vec<u8> {
    let mut p = Pickler::default();
    p.out.extend_from_slice(&[0x80, 4]);
    p.dict();
    let names = ["action", "addr", "size", "frames", "name", "filename", "line", "compile_context"];
    let keys: Vec<u32> = names
        .iter()
        .map(|k| {
            let slot = p.str(k);
            p.out.push(b'0'); // POP
            slot
        })
        .collect();
    p.str("segments");
    p.list();
    p.end_list();
    p.str("device_traces");
    p.list();
    p.out.push(b']'); // the device's events, appended to batch by batch
    p.memoize();
    let (mut frames, mut action, mut context) = (Vec::new(), None, None);
    for batch in 0..6u32 {
        p.out.push(b'(');
        for i in 0..50u32 {
            p.dict();
            p.get(keys[0]);
            match action {
                Some(slot) => p.get(slot),
                None => action = Some(p.str("alloc")),
            }
            p.get(keys[1]);
            match odd {
                Odd::LookAlike if batch == 4 => {
                    // LONG1 of 8 bytes: the look-alike, then `i` (so addresses differ).
                    p.out.extend_from_slice(b"\x8a\x08(}\x94(");
                    p.out.extend_from_slice(&(i + 1).to_le_bytes());
                }
                _ => p.int(4096 * (batch * 50 + i + 1)),
            }
            p.get(keys[2]);
            p.int(512);
            if batch >= 1 {
                p.get(keys[7]);
                match context {
                    _ if odd == Odd::Unmade && batch == 4 && i == 30 => p.get(p.memo + 2),
                    Some(slot) => p.get(slot),
                    None => context = Some(p.str("ctx")),
                }
            }
            p.get(keys[3]);
            p.list();
            let f = if batch == 2 && i >= 10 { 3 } else { (i % 3) as usize };
            p.frames_up_to(f, &mut frames, &keys[4..7]);
            p.get(frames[f]);
            p.get(frames[(f + 1) % frames.len()]);
            p.end_list();
            p.end_dict();
        }
        p.out.push(b'e');
    }
    p.end_list(); // device_traces
    p.end_dict();
    p.out.push(b'.');
    p.out
}

/// Read in ranges, the batches that fetch what earlier batches made (frames and strings made in
/// the wave before their range: aliases the join looks up) are read on the pool, the two with
/// frames written inline by the serial reader, and the snapshot is the serial reader's.
#[test]
fn batches_read_in_ranges_build_what_the_serial_reader_builds() {
    let bytes = batched_trace();
    let (slow, fast, _, ranged) = both_ways(&bytes);
    assert!(slow == fast, "the fast path differs:\n{slow}\n{fast}");
    assert!(!fast.starts_with("error"), "{fast}");
    assert_eq!(ranged, 200, "batches 1, 3, 4 and 5 read in ranges");
    let (snap, _) = decode(&bytes[..]).unwrap();
    assert_eq!(snap.event_count(), 300);
}

/// Bytes that look like a batch's start inside an event (an address) start a range in ranges of
/// a byte; the serial reader never stands there, so it is never joined, and the snapshot is the
/// serial reader's. A fetch of a memo entry not yet made, which a range cannot tell from one of
/// its own, is the serial reader's error.
#[test]
fn look_alike_batch_starts_and_fetches_of_unmade_entries_read_as_the_serial_reader_reads_them() {
    let bytes = batched_trace_with(Odd::LookAlike);
    let candidates = bytes.windows(4).filter(|w| *w == b"(}\x94(").count();
    assert!(candidates >= 6 + 50, "six batches and 50 look-alikes: {candidates}");
    let (slow, fast, _, ranged) = both_ways(&bytes);
    assert!(slow == fast && !fast.starts_with("error"), "{fast}");
    assert!(ranged >= 150, "{ranged} events read in ranges");
    let bytes = batched_trace_with(Odd::Unmade);
    let (slow, fast, _, _) = both_ways(&bytes);
    assert!(slow == fast && fast.contains("memo key read before it was written"), "{fast}");
}

/// Damaged real pickles (bytes flipped, runs cut out, cut short) decode to the same model or the
/// same error, offset and all, with and without the fast path.
#[test]
fn damaged_events_read_the_same_either_way() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for name in ["cudagraph", "fx_meta"] {
        let clean = std::fs::read(dir.join(format!("{name}.pickle"))).unwrap();
        for case in 0..400 {
            let mut bytes = clean.clone();
            let at = next(bytes.len());
            match case % 3 {
                0 => bytes[at] = next(256) as u8,
                1 => drop(bytes.drain(at..(at + 1 + next(64)).min(bytes.len()))),
                _ => bytes.truncate(at),
            }
            let (slow, fast, _, _) = both_ways(&bytes);
            assert!(slow == fast, "{name} case {case} at {at}: the two ways differ");
        }
    }
}

/// A pickle that adds a key to an event dict long after making it (legal, though torch never
/// does): an index read has let go of that row by then (`index::held`), so the read is lost and
/// the pipeline reads the file again, letting go of nothing. The archive is the one
/// built from the whole model.
#[test]
fn an_event_dict_rewritten_long_after_is_indexed_by_reading_again() {
    use crate::archive::chunks::CHUNK_ROWS;
    use crate::file::write;
    use crate::index::{cache, held, pipeline, reading};
    let mut p = Pickler::default();
    let keys = p.begin_trace(&["action", "addr", "size", "time_us"]);
    let mut fifth = 0;
    for i in 0..((held::FORGET_EVERY + 1) * CHUNK_ROWS + 100) as u32 {
        let slot = p.dict();
        if i == 5 {
            fifth = slot;
        }
        p.get(keys[0]);
        p.str(if i % 2 == 0 { "alloc" } else { "free_completed" });
        p.get(keys[1]);
        p.int(4096 * (i / 2 % 1000 + 1));
        p.get(keys[2]);
        p.int(512 * (i / 2 % 7 + 1));
        p.get(keys[3]);
        p.int(10 + i);
        p.end_dict();
    }
    // Event 5's dict again, a key added, popped off the trace list's items.
    p.get(fifth);
    p.out.push(b'(');
    p.get(keys[3]);
    p.int(7);
    p.end_dict();
    p.out.push(b'0');
    p.end_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rewritten.pickle");
    std::fs::write(&path, &p.out).unwrap();

    // Read as an index reads it: the rewrite finds its row let go.
    let (beside, rows) = reading::WhileReading::start(true).unwrap();
    let (mut model, _) = crate::ingest::read_path_observed(&path, &|_| {}, Some(rows)).unwrap();
    assert!(!model.events.holds_values());
    assert!(beside.finish(&mut model).is_none());

    let stamp = write::stamp(&path).unwrap();
    let indexed = dir.path().join("indexed.memviz");
    pipeline::build_archive(&path, stamp, &indexed, &|_| {}, &|_| {}).unwrap();
    let (whole, source) = crate::ingest::read_path(&path).unwrap();
    assert_eq!(whole.events.time_us[5], 7);
    let layouts = reading::lay_out(&whole);
    let from_whole = dir.path().join("whole.memviz");
    let pending = cache::PendingCache { path: from_whole.clone(), stamp, source, name: cache::file_name(&path) };
    pipeline::write_archive(&pending, whole, layouts, None, &|_| {}, std::time::Instant::now()).unwrap();
    assert!(std::fs::read(&indexed).unwrap() == std::fs::read(&from_whole).unwrap(), "the archives differ");
}
