//! `--csv`: each table command's main table as rows of fields (the command writes them with
//! the `csv` crate). Numbers are raw (bytes, actions, µs), never formatted; one row per table
//! row, with the device first where a report is per device.

use super::diff::DiffReport;
use super::find::FindReport;
use super::live::LiveSet;
use super::oom::OomReport;
use super::range::RangeReport;
use super::ranks::RanksReport;
use super::segments::MemoryMap;
use super::steps::StepsReport;

/// A report's table.
pub trait Table {
    fn header(&self) -> Vec<&'static str>;
    fn rows(&self) -> Vec<Vec<String>>;
}

/// A table of borrowed reports (`oom` gathers its reports by device).
impl<T: Table> Table for &T {
    fn header(&self) -> Vec<&'static str> {
        (**self).header()
    }
    fn rows(&self) -> Vec<Vec<String>> {
        (**self).rows()
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

impl Table for LiveSet {
    /// `--list`: the live allocations; else the grouped rows.
    fn header(&self) -> Vec<&'static str> {
        if self.allocations.is_some() {
            vec!["device", "action", "element", "addr", "size", "category", "alloc_action", "stack", "site"]
        } else {
            vec!["device", "action", "group_by", "label", "bytes", "count", "share_pct", "top_frame"]
        }
    }
    fn rows(&self) -> Vec<Vec<String>> {
        let (d, k) = (self.device.to_string(), self.action.to_string());
        if let Some(list) = &self.allocations {
            return list
                .iter()
                .map(|a| {
                    vec![
                        d.clone(),
                        k.clone(),
                        a.element.0.to_string(),
                        format!("{:#x}", a.addr),
                        a.size.to_string(),
                        a.category.name().to_owned(),
                        opt(a.alloc_action),
                        opt(a.stack),
                        a.site.clone(),
                    ]
                })
                .collect();
        }
        self.groups
            .iter()
            .map(|g| {
                vec![
                    d.clone(),
                    k.clone(),
                    self.group_by.key().to_owned(),
                    g.label.clone(),
                    g.bytes.to_string(),
                    g.count.to_string(),
                    format!("{:.3}", g.share_pct),
                    g.top_frame.clone().unwrap_or_default(),
                ]
            })
            .collect()
    }
}

impl Table for RangeReport {
    /// What the range left live, by site (the leak candidates).
    fn header(&self) -> Vec<&'static str> {
        vec!["device", "start", "end", "site", "stack", "still_live_bytes", "count", "share_pct"]
    }
    fn rows(&self) -> Vec<Vec<String>> {
        self.still_live_by_site
            .iter()
            .map(|g| {
                vec![
                    self.device.to_string(),
                    self.start.to_string(),
                    self.end.to_string(),
                    g.label.clone(),
                    opt(g.stack),
                    g.bytes.to_string(),
                    g.count.to_string(),
                    format!("{:.3}", g.share_pct),
                ]
            })
            .collect()
    }
}

impl Table for StepsReport {
    fn header(&self) -> Vec<&'static str> {
        vec![
            "device",
            "family",
            "span",
            "start_action",
            "end_action",
            "start_us",
            "end_us",
            "total_start",
            "total_end",
            "peak_bytes",
            "peak_action",
            "net_bytes",
            "retained_bytes",
            "before_trace",
        ]
    }
    fn rows(&self) -> Vec<Vec<String>> {
        self.steps
            .iter()
            .map(|s| {
                vec![
                    self.device.to_string(),
                    self.family.clone(),
                    s.name.clone(),
                    s.start_action.to_string(),
                    s.end_action.to_string(),
                    opt(s.start_us),
                    opt(s.end_us),
                    s.total_start.to_string(),
                    s.total_end.to_string(),
                    s.peak_bytes.to_string(),
                    opt(s.peak_action),
                    s.net_bytes.to_string(),
                    opt(s.retained_bytes),
                    s.before_trace.to_string(),
                ]
            })
            .collect()
    }
}

impl Table for DiffReport {
    /// Every site live at either peak.
    fn header(&self) -> Vec<&'static str> {
        vec!["device_a", "device_b", "site", "frame", "a_bytes", "b_bytes", "delta_bytes", "a_count", "b_count"]
    }
    fn rows(&self) -> Vec<Vec<String>> {
        self.sites
            .iter()
            .map(|s| {
                vec![
                    self.a.device.to_string(),
                    self.b.device.to_string(),
                    s.site.clone(),
                    s.frame.clone(),
                    s.a_bytes.to_string(),
                    s.b_bytes.to_string(),
                    s.delta_bytes.to_string(),
                    s.a_count.to_string(),
                    s.b_count.to_string(),
                ]
            })
            .collect()
    }
}

impl Table for FindReport {
    fn header(&self) -> Vec<&'static str> {
        vec![
            "device",
            "element",
            "addr",
            "size",
            "alloc_action",
            "free_action",
            "alloc_time_us",
            "free_time_us",
            "site",
        ]
    }
    fn rows(&self) -> Vec<Vec<String>> {
        self.hits
            .iter()
            .map(|h| {
                vec![
                    self.device.to_string(),
                    h.element.0.to_string(),
                    format!("{:#x}", h.addr),
                    h.size.to_string(),
                    opt(h.alloc_action),
                    opt(h.free_action),
                    opt(h.alloc_time_us),
                    opt(h.free_time_us),
                    h.site.clone(),
                ]
            })
            .collect()
    }
}

impl Table for RanksReport {
    fn header(&self) -> Vec<&'static str> {
        vec![
            "rank",
            "file",
            "peak_bytes",
            "peak_action",
            "peak_step",
            "reserved_peak_bytes",
            "oom_events",
            "retained_per_step_bytes",
            "steady_growth",
            "outlier",
        ]
    }
    fn rows(&self) -> Vec<Vec<String>> {
        self.ranks
            .iter()
            .map(|r| {
                vec![
                    opt(r.rank),
                    r.file.clone(),
                    r.peak_bytes.to_string(),
                    r.peak_action.to_string(),
                    r.peak_step.clone().unwrap_or_default(),
                    r.reserved_peak_bytes.to_string(),
                    r.oom_events.to_string(),
                    opt(r.retained_per_step_bytes),
                    r.steady_growth.to_string(),
                    self.outliers.iter().any(|o| o.file == r.file).to_string(),
                ]
            })
            .collect()
    }
}

impl Table for MemoryMap {
    /// One row per segment.
    fn header(&self) -> Vec<&'static str> {
        vec![
            "device",
            "event",
            "addr",
            "size",
            "stream",
            "pool",
            "used_bytes",
            "free_bytes",
            "largest_hole_bytes",
            "blocks",
            "holes",
        ]
    }
    fn rows(&self) -> Vec<Vec<String>> {
        self.segments
            .iter()
            .map(|s| {
                vec![
                    self.device.to_string(),
                    self.event.to_string(),
                    format!("{:#x}", s.addr),
                    s.size.to_string(),
                    s.stream.to_string(),
                    opt(s.pool.map(|(a, b)| format!("{a},{b}"))),
                    s.used_bytes.to_string(),
                    s.free_bytes.to_string(),
                    s.largest_hole_bytes.to_string(),
                    s.blocks.len().to_string(),
                    s.holes.len().to_string(),
                ]
            })
            .collect()
    }
}

impl Table for OomReport {
    /// One row per OOM event.
    fn header(&self) -> Vec<&'static str> {
        vec![
            "device",
            "event",
            "action",
            "requested_bytes",
            "rounded_bytes",
            "device_free_bytes",
            "allocated_bytes",
            "reserved_bytes",
            "reserved_unallocated_bytes",
            "largest_free_bytes",
            "pending_free_bytes",
            "fragmentation",
            "kind",
            "frame",
            "verdict",
        ]
    }
    fn rows(&self) -> Vec<Vec<String>> {
        vec![vec![
            self.device.to_string(),
            self.event.to_string(),
            self.action.to_string(),
            self.requested_bytes.to_string(),
            self.rounded_bytes.to_string(),
            opt(self.device_free_bytes),
            self.allocated_bytes.to_string(),
            self.reserved_bytes.to_string(),
            self.reserved_unallocated_bytes.to_string(),
            self.largest_free_bytes.to_string(),
            self.pending_free_bytes.to_string(),
            self.fragmentation.to_string(),
            self.kind.name().to_owned(),
            self.frame.clone().unwrap_or_default(),
            self.verdict.clone(),
        ]]
    }
}
