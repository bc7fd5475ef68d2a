//! Counts of the odd values a reader accepted under the reading policy (ARCHITECTURE.md):
//! descriptive fields degrade instead of failing, and every degradation is counted here so that
//! `stats` can say what was tolerated. Nothing is silently wrong.

/// One kind of tolerated oddity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Oddity {
    /// A frame `line` beyond 64 bits signed (inductor writes 2⁶⁴−1): shown as `?`.
    LineOutOfRange,
    /// A negative frame `line`: shown as `?`.
    LineNegative,
    /// A frame `line` that is None: shown as `?`.
    LineNone,
    /// A frame `line` that is not an integer at all: shown as `?`.
    LineNotInt,
    /// A frame `name` that is None or not a string: shown as `??`.
    NameNotStr,
    /// A frame `filename` that is None or not a string: shown as `??`.
    FilenameNotStr,
    /// A float `time_us`, truncated to whole microseconds.
    FloatTime,
    /// A `time_us` that is not a number: the event has no time.
    TimeNotNumber,
    /// A tuple where the schema has a list (frames, blocks, segments, traces): read as the list.
    TupleAsList,
    /// `user_metadata` / `internal_metadata` / `compile_context` / fx keys that were dicts,
    /// lists or numbers: kept as compact JSON text.
    MetadataAsJson,
    /// A merged `free` action (older torch, or a viewer's re-export): ends the allocation like
    /// `free_completed`.
    MergedFree,
    /// A block without `address`: placed at the running sum from its segment's start.
    BlockWithoutAddress,
    /// An item of a frame list that is not a frame dict: left out of the stack.
    NotAFrame,
    /// A descriptive key with a value of the wrong type (`stream`, `frames`, `pool_id`,
    /// `segment_type`, sizes of a segment's summary, an annotation's `stage` …): ignored.
    WrongTypeIgnored,
}

impl Oddity {
    pub const ALL: [Oddity; 14] = [
        Oddity::LineOutOfRange,
        Oddity::LineNegative,
        Oddity::LineNone,
        Oddity::LineNotInt,
        Oddity::NameNotStr,
        Oddity::FilenameNotStr,
        Oddity::FloatTime,
        Oddity::TimeNotNumber,
        Oddity::TupleAsList,
        Oddity::MetadataAsJson,
        Oddity::MergedFree,
        Oddity::BlockWithoutAddress,
        Oddity::NotAFrame,
        Oddity::WrongTypeIgnored,
    ];

    /// Stable key (JSON, archives).
    pub fn key(self) -> &'static str {
        match self {
            Oddity::LineOutOfRange => "frame_line_out_of_range",
            Oddity::LineNegative => "frame_line_negative",
            Oddity::LineNone => "frame_line_none",
            Oddity::LineNotInt => "frame_line_not_int",
            Oddity::NameNotStr => "frame_name_not_str",
            Oddity::FilenameNotStr => "frame_filename_not_str",
            Oddity::FloatTime => "float_time_us",
            Oddity::TimeNotNumber => "time_us_not_number",
            Oddity::TupleAsList => "tuple_as_list",
            Oddity::MetadataAsJson => "metadata_as_json",
            Oddity::MergedFree => "merged_free",
            Oddity::BlockWithoutAddress => "block_without_address",
            Oddity::NotAFrame => "not_a_frame",
            Oddity::WrongTypeIgnored => "wrong_type_ignored",
        }
    }

    pub fn from_key(key: &str) -> Option<Oddity> {
        Oddity::ALL.into_iter().find(|o| o.key() == key)
    }

    /// What `stats` prints after the count (plural, the count is > 0 when printed).
    pub fn describe(self, n: u64) -> String {
        let s = |one: &str, many: &str| if n == 1 { one.to_owned() } else { many.to_owned() };
        match self {
            Oddity::LineOutOfRange => s("frame line out of range", "frame lines out of range"),
            Oddity::LineNegative => s("negative frame line", "negative frame lines"),
            Oddity::LineNone => s("frame line that is None", "frame lines that are None"),
            Oddity::LineNotInt => s("frame line that is not an integer", "frame lines that are not integers"),
            Oddity::NameNotStr => s("frame name that is not a string", "frame names that are not strings"),
            Oddity::FilenameNotStr => s("frame filename that is not a string", "frame filenames that are not strings"),
            Oddity::FloatTime => s("float time_us (truncated)", "float time_us (truncated)"),
            Oddity::TimeNotNumber => s("time_us that is not a number", "time_us that are not numbers"),
            Oddity::TupleAsList => s("tuple read as a list", "tuples read as lists"),
            Oddity::MetadataAsJson => s("metadata value kept as JSON text", "metadata values kept as JSON text"),
            Oddity::MergedFree => s("merged free action", "merged free actions"),
            Oddity::BlockWithoutAddress => s("block without address", "blocks without address"),
            Oddity::NotAFrame => s("frame-list item that is not a frame", "frame-list items that are not frames"),
            Oddity::WrongTypeIgnored => {
                s("descriptive value of the wrong type (ignored)", "descriptive values of the wrong type (ignored)")
            }
        }
    }
}

/// How often each [`Oddity`] was tolerated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tolerated {
    counts: [u64; Oddity::ALL.len()],
}

impl Tolerated {
    #[inline]
    pub fn add(&mut self, o: Oddity) {
        self.counts[o as usize] += 1;
    }

    pub fn add_n(&mut self, o: Oddity, n: u64) {
        self.counts[o as usize] += n;
    }

    pub fn get(&self, o: Oddity) -> u64 {
        self.counts[o as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&n| n == 0)
    }

    /// The kinds seen, in [`Oddity::ALL`] order, with their counts.
    pub fn iter(&self) -> impl Iterator<Item = (Oddity, u64)> + '_ {
        Oddity::ALL.into_iter().map(|o| (o, self.get(o))).filter(|&(_, n)| n > 0)
    }

    /// `"38 frame lines out of range, 2 tuples read as lists"`.
    pub fn summary(&self) -> String {
        self.iter().map(|(o, n)| format!("{n} {}", o.describe(n))).collect::<Vec<_>>().join(", ")
    }
}
