//! Grouping a set of elements into a table: by allocation site, by its top frame, by the
//! annotation open when each was allocated, or by power-of-two size; and the table as text.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::frames::{self, FrameSource};
use super::units;
use crate::derive::timeline::{ElementAttrs, Innermost, TimelineRef, bucket_bounds, bucket_label, size_bucket};
use crate::model::ElementId;

/// What a table's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// Allocation site (stack), labelled by its best frame.
    #[serde(rename = "site")]
    Stack,
    /// The site's best frame as text (sites sharing it merge).
    Frame,
    /// The innermost `record_function` span open when the element was allocated.
    Annotation,
    /// Power-of-two size buckets.
    Size,
    /// The CUDA stream of the allocation.
    Stream,
    /// The private memory pool (`pool_id`; CUDA graphs, `MemPool`).
    Pool,
    /// `compile_context` (torch.compile's frame / kernel).
    CompileContext,
    /// The `annotate` label, else `user_metadata`.
    Metadata,
    /// What kind of memory (`analysis::categories`).
    Category,
}

impl GroupBy {
    /// As `--group-by` takes it and `--json` / `--csv` write it: `site`, `compile_context`, …
    pub fn key(self) -> &'static str {
        match self {
            GroupBy::CompileContext => "compile_context",
            other => other.name(),
        }
    }

    /// As a table's heading says it.
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Stack => "site",
            GroupBy::Frame => "frame",
            GroupBy::Annotation => "annotation",
            GroupBy::Size => "size",
            GroupBy::Stream => "stream",
            GroupBy::Pool => "pool",
            GroupBy::CompileContext => "compile context",
            GroupBy::Metadata => "metadata",
            GroupBy::Category => "category",
        }
    }

    /// Rows named by a text (with a "mostly from" column), not by a site.
    fn is_text(self) -> bool {
        !matches!(self, GroupBy::Stack | GroupBy::Frame)
    }
}

/// Label of elements with no recorded stack.
pub const NO_STACK: &str = "(no stack recorded)";
/// Label of elements allocated while no span was open.
pub const NO_SPAN: &str = "(none)";
/// Label of elements live before the trace (no alloc time).
pub const BEFORE: &str = "(before the trace)";
/// Label of elements without the grouped attribute (no pool, no metadata, ...).
pub const NOT_RECORDED: &str = "(none)";

/// One row of a table.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Group {
    /// The row's name: a frame, an annotation, or a size range.
    pub label: String,
    /// Group by stack: the site's stack id in this archive (not comparable across files).
    pub stack: Option<u32>,
    /// Group by size: the bucket's bounds `[size_from, size_to)` (`size_to` null: unbounded).
    pub size_from: Option<u64>,
    pub size_to: Option<u64>,
    pub bytes: u64,
    pub count: u64,
    /// Percent of the table's total bytes.
    pub share_pct: f64,
    /// The frame holding the most bytes in the row.
    pub top_frame: Option<String>,
    /// Group by site with `--stacks`: the site's whole (filtered) stack, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
}

/// Site → its best frame as text (and where inside it the allocation happened), computed once
/// per site.
pub struct SiteNames<'f, F: FrameSource> {
    frames: &'f F,
    cache: HashMap<u32, (Option<String>, String)>,
}

impl<'f, F: FrameSource> SiteNames<'f, F> {
    pub fn new(frames: &'f F) -> Self {
        SiteNames { frames, cache: HashMap::new() }
    }

    fn entry(&mut self, site: u32) -> &(Option<String>, String) {
        let src = self.frames;
        self.cache.entry(site).or_insert_with(|| {
            let best = frames::top_frame(src, site);
            let text = best.map(|f| frames::describe(src, f, true));
            // The innermost Python frame says where in the best frame's call the memory came from.
            let inner = frames::innermost_python(src, site);
            let label = match (&text, inner) {
                (None, _) => NO_STACK.to_owned(),
                (Some(t), Some(i)) if Some(i) != best => format!("{t} › {}", frames::describe(src, i, true)),
                (Some(t), _) => t.clone(),
            };
            (text, label)
        })
    }

    /// `name (file.py:line)` of the site's top frame, `None` when no stack was recorded.
    pub fn frame(&mut self, site: u32) -> Option<String> {
        self.entry(site).0.clone()
    }

    /// The best frame, then the innermost Python frame when it is another:
    /// `train (train.py:59) › dropout (functional.py:1443)`.
    pub fn label(&mut self, site: u32) -> String {
        self.entry(site).1.clone()
    }
}

/// Groups elements `ids` of the timeline; rows sorted by bytes, largest first (by size: largest
/// bucket first). Shares are of the rows' summed bytes.
pub fn group<'a, F: FrameSource>(
    t: &TimelineRef<'a>,
    names: &mut SiteNames<'_, F>,
    ids: impl IntoIterator<Item = ElementId>,
    by: GroupBy,
) -> Vec<Group> {
    let sizes = t.layout.elements.size;
    let innermost = (by == GroupBy::Annotation).then(|| Innermost::new(t.spans));
    // (bucket, text, site) → (bytes, count); the site is kept to find each row's top frame.
    let mut cells: HashMap<(u32, Cow<'a, str>, u32), (u64, u64)> = HashMap::new();
    for id in ids {
        let size = sizes[id.index()];
        let bucket = if by == GroupBy::Size { size_bucket(size) } else { 0 };
        let text = match (by, &innermost) {
            (GroupBy::Annotation, Some(inner)) => Cow::Borrowed(annotation_of(t, inner, id)),
            (GroupBy::Stream | GroupBy::Pool | GroupBy::CompileContext | GroupBy::Metadata, _) => {
                let mut attrs = t.attrs.attrs(id);
                if let (GroupBy::Pool, Some(pools)) = (by, t.pools) {
                    attrs.pool = pools.get(id.index()).copied().flatten();
                }
                attribute_label(by, &attrs)
            }
            (GroupBy::Category, _) => Cow::Borrowed(
                t.categories
                    .and_then(|c| c.get(id.index()))
                    .map_or(crate::model::Category::Unknown.name(), |c| c.name()),
            ),
            _ => Cow::Borrowed(""),
        };
        let cell = cells.entry((bucket, text, t.site(id))).or_default();
        cell.0 += size;
        cell.1 += 1;
    }
    let mut cells: Vec<_> = cells.into_iter().collect();
    cells.sort_unstable_by(|a, b| a.0.cmp(&b.0));

    #[derive(Default)]
    struct Row {
        bytes: u64,
        count: u64,
        by_frame: HashMap<Option<String>, u64>,
    }
    #[derive(PartialEq, Eq, Hash, PartialOrd, Ord, Clone)]
    enum Key {
        Bucket(u32),
        Site(u32),
        Text(String),
    }
    let mut rows: HashMap<Key, Row> = HashMap::new();
    for ((bucket, span, site), (bytes, count)) in cells {
        let frame = names.frame(site);
        let key = match by {
            GroupBy::Stack => Key::Site(site),
            GroupBy::Frame => Key::Text(frame.clone().unwrap_or_else(|| NO_STACK.to_owned())),
            GroupBy::Size => Key::Bucket(bucket),
            _ => Key::Text(span.into_owned()),
        };
        let row = rows.entry(key).or_default();
        row.bytes += bytes;
        row.count += count;
        *row.by_frame.entry(frame).or_default() += bytes;
    }
    let total: u64 = rows.values().map(|r| r.bytes).sum();
    let mut out: Vec<(Key, Group)> = rows
        .into_iter()
        .map(|(key, row)| {
            let top_frame =
                row.by_frame.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0))).and_then(|(f, _)| f);
            let (label, stack, bounds) = match &key {
                Key::Site(site) => (names.label(*site), (*site != crate::model::NONE).then_some(*site), None),
                Key::Text(text) => (text.clone(), None, None),
                Key::Bucket(b) => (bucket_label(*b), None, Some(bucket_bounds(*b))),
            };
            let group = Group {
                label,
                stack,
                size_from: bounds.map(|b| b.0),
                size_to: bounds.and_then(|b| b.1),
                bytes: row.bytes,
                count: row.count,
                share_pct: share(row.bytes, total),
                top_frame,
                frames: Vec::new(),
            };
            (key, group)
        })
        .collect();
    if by == GroupBy::Size {
        out.sort_by(|a, b| b.0.cmp(&a.0));
    } else {
        out.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
    }
    out.into_iter().map(|(_, g)| g).collect()
}

/// `part` as a percentage of `total` (0 when the total is 0).
pub fn share(part: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { part as f64 * 100.0 / total as f64 }
}

/// The table as aligned text: at most `top` rows, then one line summing the rest (unless the
/// rest is one row: then that row).
pub fn render(out: &mut String, groups: &[Group], by: GroupBy, top: usize) {
    let top = if groups.len() == top + 1 { groups.len() } else { top };
    let width = label_width(groups, top).max(by.name().len());
    let _ = write!(out, "    {:>10}  {:>9}  {:>6}  ", "bytes", "count", "share");
    if by.is_text() {
        let _ = writeln!(out, "{:<width$}  mostly from", by.name());
    } else {
        let _ = writeln!(out, "{}", by.name());
    }
    for g in groups.iter().take(top) {
        let _ =
            write!(out, "    {:>10}  {:>9}  {:>5.1}%  ", units::bytes(g.bytes), units::thousands(g.count), g.share_pct);
        match by {
            GroupBy::Stack => {
                let site = match g.top_frame {
                    Some(_) => g.stack.map_or(String::new(), |s| format!("  [stack {s}]")),
                    None => String::new(),
                };
                let _ = write!(out, "{}{site}", clip(&g.label));
            }
            GroupBy::Frame => out.push_str(&clip(&g.label)),
            _ => {
                let frame = clip(g.top_frame.as_deref().unwrap_or(NO_STACK));
                let _ = write!(out, "{:<width$}  {frame}", clip(&g.label));
            }
        }
        out.push('\n');
        super::frames::render_stack(out, &g.frames, 36);
    }
    if groups.len() > top {
        let rest = &groups[top..];
        let bytes: u64 = rest.iter().map(|g| g.bytes).sum();
        let count: u64 = rest.iter().map(|g| g.count).sum();
        let _ = writeln!(
            out,
            "    {:>10}  {:>9}  {:>5.1}%  … {} more row{}",
            units::bytes(bytes),
            units::thousands(count),
            rest.iter().map(|g| g.share_pct).sum::<f64>(),
            units::thousands(rest.len() as u64),
            if rest.len() == 1 { "" } else { "s" }
        );
    }
}

fn label_width(groups: &[Group], top: usize) -> usize {
    groups.iter().take(top).map(|g| g.label.chars().count().min(MAX_LABEL)).max().unwrap_or(0)
}

/// Longest label or frame in a text table (C++ frames can run to hundreds of characters).
pub const MAX_LABEL: usize = 120;

/// `text` cut to [`MAX_LABEL`] characters, with `…` when cut.
pub fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(MAX_LABEL - 1) {
        Some((at, _)) if text.chars().count() > MAX_LABEL => format!("{}…", &text[..at]).into(),
        _ => text.into(),
    }
}

/// The row an element falls in when grouping by one of its attributes.
fn attribute_label<'a>(by: GroupBy, a: &ElementAttrs<'a>) -> Cow<'a, str> {
    let text = |s: &'a str| if s.is_empty() { Cow::Borrowed(NOT_RECORDED) } else { Cow::Borrowed(s) };
    match by {
        GroupBy::Stream => match a.stream {
            None => Cow::Borrowed(NOT_RECORDED),
            Some(0) => Cow::Borrowed("stream 0 (default)"),
            Some(s) => Cow::Owned(format!("stream {s:#x}")),
        },
        GroupBy::Pool => match a.pool {
            None | Some((0, 0)) => Cow::Borrowed("(no private pool)"),
            Some((a, b)) => Cow::Owned(format!("pool ({a}, {b})")),
        },
        GroupBy::CompileContext => text(a.compile_context),
        _ => text(a.metadata()),
    }
}

fn annotation_of<'a>(t: &TimelineRef<'a>, inner: &Innermost<'a>, id: ElementId) -> &'a str {
    let Some(start) = t.layout.element(id).start_opt() else { return BEFORE };
    match t.times.time_us(start) {
        None => NO_SPAN,
        Some(at) => inner.at(at).map_or(NO_SPAN, |s| s.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_labels_are_clipped() {
        assert_eq!(clip("short"), "short");
        let exact = "x".repeat(MAX_LABEL);
        assert_eq!(clip(&exact), exact);
        let long = "é".repeat(MAX_LABEL + 5);
        let cut = clip(&long);
        assert_eq!(cut.chars().count(), MAX_LABEL);
        assert!(cut.ends_with("é…"));
    }
}
