//! `memviz find` and the viewer's search: the allocations that ever covered an address (over
//! the whole trace, as Tracy searches one), or whose stack has a frame matching a text
//! (substring, or `/regex/`).

use std::collections::HashMap;
use std::fmt::Write as _;

use regex::Regex;
use serde::Serialize;

use super::frames::FrameSource;
use super::groups::{SiteNames, clip};
use super::units;
use crate::derive::timeline::TimelineRef;
use crate::model::{ElementId, NONE};

/// What to look for.
#[derive(Debug, Clone)]
pub enum Query {
    /// Every allocation with `addr ≤ A < addr + size`.
    Addr(u64),
    /// A frame of the allocation's stack (`name file:line`) containing the text, or matching
    /// the expression.
    Frame(Matcher),
}

#[derive(Debug, Clone)]
pub enum Matcher {
    Text(String),
    Regex(Regex),
}

impl Query {
    /// An address as typed ([`parse_addr`]).
    pub fn addr(text: &str) -> Result<Query, String> {
        parse_addr(text).map(Query::Addr)
    }

    /// Frame text as typed: `/…/` is a regular expression, anything else a substring (any case).
    pub fn frame(text: &str) -> Result<Query, String> {
        match text.strip_prefix('/').and_then(|r| r.strip_suffix('/')) {
            Some(re) if !re.is_empty() => Regex::new(re)
                .map(|r| Query::Frame(Matcher::Regex(r)))
                .map_err(|e| format!("/{re}/: {}", last_line(&e.to_string()))),
            _ => Ok(Query::Frame(Matcher::Text(text.to_lowercase()))),
        }
    }

    /// A search field's text: an address when it reads as one (`0x…`, or hex of 6+ digits),
    /// else frame text.
    pub fn parse_any(text: &str) -> Result<Query, String> {
        let t = text.trim();
        let hexish = t.len() >= 6 && t.trim_start_matches("0x").chars().all(|c| c.is_ascii_hexdigit());
        if t.starts_with("0x") || hexish { Query::addr(t) } else { Query::frame(t) }
    }

    pub fn describe(&self) -> String {
        match self {
            Query::Addr(a) => format!("address {a:#x}"),
            Query::Frame(Matcher::Text(t)) => format!("frame text \"{t}\""),
            Query::Frame(Matcher::Regex(r)) => format!("frame /{}/", r.as_str()),
        }
    }
}

/// An address as typed: hex with or without `0x` (`7fb4d4800000`, `0x7FB4…`).
pub fn parse_addr(text: &str) -> Result<u64, String> {
    let t = text.trim().trim_start_matches("0x").trim_start_matches("0X").replace('_', "");
    u64::from_str_radix(&t, 16).map_err(|_| format!("{text:?} is not a hex address"))
}

/// A regex error's last line (`error: unclosed group`), trimmed: its others draw a caret.
pub fn last_line(text: &str) -> &str {
    text.lines().rev().find(|l| !l.trim().is_empty()).map_or(text, str::trim)
}

/// The elements of `t` that match, in id (creation) order.
pub fn matching<F: FrameSource>(t: &TimelineRef<'_>, frames: &F, q: &Query) -> Vec<ElementId> {
    let e = t.layout.elements;
    match q {
        Query::Addr(a) => (0..e.len())
            .filter(|&i| e.addr[i] <= *a && *a < e.addr[i].saturating_add(e.size[i]))
            .map(ElementId::at)
            .collect(),
        Query::Frame(m) => {
            let mut by_site: HashMap<u32, bool> = HashMap::new();
            let hit = |site: u32| {
                site != NONE
                    && frames.stack(site).iter().any(|&f| {
                        let line = format!("{} {}:{}", frames.name(f), frames.file(f), frames.line(f));
                        match m {
                            Matcher::Text(t) => line.to_lowercase().contains(t.as_str()),
                            Matcher::Regex(r) => r.is_match(&line),
                        }
                    })
            };
            (0..e.len())
                .filter(|&i| {
                    let site = t.site(ElementId::at(i));
                    *by_site.entry(site).or_insert_with(|| hit(site))
                })
                .map(ElementId::at)
                .collect()
        }
    }
}

/// One match.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Hit {
    pub element: ElementId,
    pub addr: u64,
    pub size: u64,
    /// The actions that allocated and freed it (`null`: before the trace / never), and their
    /// times from the snapshot's start.
    pub alloc_action: Option<u32>,
    pub free_action: Option<u32>,
    pub alloc_time_us: Option<i64>,
    pub free_time_us: Option<i64>,
    pub site: String,
    /// The site's stack id in this archive (`null`: no stack recorded).
    pub stack: Option<u32>,
    /// With `--stacks`: the site's whole (filtered) stack, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FindReport {
    pub device: crate::model::DeviceId,
    pub query: String,
    pub count: usize,
    pub hits: Vec<Hit>,
}

impl FindReport {
    /// `--stacks`: each hit's whole stack.
    pub fn with_stacks<F: FrameSource>(&mut self, frames: &F) {
        for h in &mut self.hits {
            h.frames = super::frames::full_stack(frames, h.stack);
        }
    }
}

pub fn find<F: FrameSource>(t: &TimelineRef<'_>, frames: &F, q: &Query) -> FindReport {
    let l = t.layout;
    let mut names = SiteNames::new(frames);
    let hits: Vec<Hit> = matching(t, frames, q)
        .into_iter()
        .map(|id| {
            let el = l.element(id);
            let (a, f) = (el.start_opt().map(|k| k.0), el.end_opt().map(|k| k.0));
            Hit {
                element: id,
                addr: el.addr,
                size: el.size,
                alloc_action: a,
                free_action: f,
                alloc_time_us: a.and_then(|k| t.since_start(i64::from(k))),
                free_time_us: f.and_then(|k| t.since_start(i64::from(k))),
                site: names.label(t.site(id)),
                stack: Some(t.site(id)).filter(|&s| s != crate::model::NONE),
                frames: Vec::new(),
            }
        })
        .collect();
    FindReport { device: l.device, query: q.describe(), count: hits.len(), hits }
}

pub fn render_text(out: &mut String, r: &FindReport, top: usize) {
    let _ = writeln!(
        out,
        "device {} — {} match{} for {}",
        r.device,
        r.count,
        if r.count == 1 { "" } else { "es" },
        r.query
    );
    if r.hits.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "    {:>8}  {:>18}  {:>10}  {:>19}  {:>19}  site",
        "element", "address", "size", "allocated", "freed"
    );
    let at = |k: Option<u32>, t: Option<i64>, none: &str| match (k, t) {
        (Some(k), Some(t)) => format!("{} ({})", units::thousands(u64::from(k)), units::duration_us(t)),
        (Some(k), None) => units::thousands(u64::from(k)),
        (None, _) => none.to_owned(),
    };
    for h in r.hits.iter().take(top) {
        let _ = writeln!(
            out,
            "    {:>8}  {:>#18x}  {:>10}  {:>19}  {:>19}  {}",
            h.element.0,
            h.addr,
            units::bytes(h.size),
            at(h.alloc_action, h.alloc_time_us, "before the trace"),
            at(h.free_action, h.free_time_us, "never"),
            clip(&h.site)
        );
        super::frames::render_stack(out, &h.frames, 14);
    }
    if r.hits.len() > top {
        let _ =
            writeln!(out, "    … {} more (--top, or --json for all)", units::thousands((r.hits.len() - top) as u64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse() {
        assert!(matches!(Query::addr("0x7fb4d4800000"), Ok(Query::Addr(0x7fb4d4800000))));
        assert!(matches!(Query::addr("7FB4D4800000"), Ok(Query::Addr(0x7fb4d4800000))));
        assert!(Query::addr("xyz").is_err());
        assert!(matches!(Query::frame("/adam\\.py:1[0-9]+/"), Ok(Query::Frame(Matcher::Regex(_)))));
        assert!(Query::frame("/(/").unwrap_err().starts_with("/(/:"));
        assert!(matches!(Query::frame("_init_group"), Ok(Query::Frame(Matcher::Text(_)))));
        assert!(matches!(Query::parse_any("0x10"), Ok(Query::Addr(16))));
        assert!(matches!(Query::parse_any("7fb4d4800000"), Ok(Query::Addr(_))));
        assert!(matches!(Query::parse_any("backward"), Ok(Query::Frame(_))));
    }
}
