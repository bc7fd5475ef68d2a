//! Opening an archive in the viewer with what the options ask for — the device, the view, the
//! instant, the x range, the pinned element — and the link ("copy link") that opens it again.

use std::path::Path;
use std::sync::Arc;

use eframe::egui;

use super::app::ViewerOptions;
use super::data::Session;
use super::document::Document;
use super::tabs::{OpenAt, Tab};
use super::timeline::Timeline;

/// Opens the archive at `path` (any thread: `memviz open` starts it beside the window).
pub fn open_file(platform: &crate::platform::PlatformRef, path: &Path) -> Result<Arc<Session>, String> {
    platform.open_archive(path)
}

/// A timeline of an opened archive with the settings the options ask for (its ids and checksum
/// are checked, and the action times read for the time axis, in the background:
/// `Platform::start_checks`).
pub(super) fn new_timeline(options: &ViewerOptions, session: Arc<Session>, ctx: &egui::Context) -> Timeline {
    let first_frame = Arc::new(crate::platform::FirstFrame::default());
    options.platform.start_checks(&session, &first_frame);
    let mut t = Timeline::new(session, ctx);
    t.doc.first_frame = first_frame;
    t.doc.max_entries = options.max_entries;
    t.doc.capacity = options.gpu.map(|g| g.1);
    t.fit();
    t.doc.colour_by_category = options.by_category;
    t.doc.colour_by_site = !options.by_allocation;
    t
}

/// Applies the view options to a timeline just opened: the device, the instant, the x range and
/// the pinned element; what does not exist is said the way the commands say it.
pub(super) fn apply_view(t: &mut Timeline, o: &ViewerOptions) -> Result<(), String> {
    if let Some(want) = o.device {
        let ordinals: Vec<_> = t.doc.session.device_indices().map(|d| t.doc.session.ordinal(d)).collect();
        let d = crate::model::pick_devices(&ordinals, Some(want))?;
        t.select_device(crate::model::DeviceIdx(d[0]));
    }
    if let Some(at) = o.at {
        open_at(t, at)?;
    }
    let n = t.stacked().layout.actions.len() as f64;
    if let Some((a, b)) = o.x_range {
        if !(a < b && b > 0.0 && a < n) {
            return Err(format!("--x {a}..{b} is not a range of the actions (0..{n})"));
        }
        t.doc.time_axis = false;
        t.doc.view.x0 = a;
        t.doc.view.x1 = b;
        t.doc.view.clamp_x(n);
    }
    match o.pin {
        None => {}
        Some(super::tabs::Pin::Element(id)) => {
            let count = t.stacked().layout.elements.len();
            if id as usize >= count {
                return Err(format!("element {id} is out of range (0..{count})"));
            }
            let view = t.doc.view;
            t.go_to_element(crate::model::ElementId(id));
            if o.x_range.is_some() || o.at.is_some() {
                t.doc.view = view;
            }
        }
        Some(super::tabs::Pin::Addr(addr)) => {
            let session = Arc::clone(&t.doc.session);
            let data = crate::archive::DeviceData::new(&session, t.doc.device);
            let hits = crate::analysis::find::matching(
                &data.timeline(),
                session.root(),
                &crate::analysis::find::Query::Addr(addr),
            );
            let l = t.stacked().layout;
            let centre = ((t.doc.view.x0 + t.doc.view.x1) / 2.0).floor() as i64;
            let live = |id: &crate::model::ElementId| {
                let e = l.element(*id);
                e.start_opt().is_none_or(|s| s.signed() <= centre) && e.end_opt().is_none_or(|x| x.signed() > centre)
            };
            let pick = hits.iter().copied().find(live).or_else(|| hits.last().copied());
            let id = pick.ok_or_else(|| format!("no allocation ever covered address {addr:#x}"))?;
            let view = t.doc.view;
            t.go_to_element(id);
            if o.x_range.is_some() || o.at.is_some() {
                t.doc.view = view;
            }
        }
    }
    Ok(())
}

/// The command line that reopens what `t` shows (file, device, view, x range, pinned element).
pub fn link(path: &Path, doc: &Document, tab: Tab) -> String {
    let quote = |s: &str| {
        if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:,=".contains(c)) {
            s.to_owned()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    let mut cmd = format!(
        "memviz open {} --device {} --view {}",
        quote(&path.display().to_string()),
        doc.session.ordinal(doc.device),
        tab.arg()
    );
    if !doc.time_axis {
        cmd.push_str(&format!(" --x {:.1}..{:.1}", doc.view.x0, doc.view.x1));
    }
    if let Some(p) = doc.selection.pinned {
        cmd.push_str(&format!(" --element {}", p.element.0));
    }
    if doc.colour_by_category {
        cmd.push_str(" --colour category");
    } else if !doc.colour_by_site {
        cmd.push_str(" --colour allocation");
    }
    cmd
}

/// Applies `--event`, `--action` or `--oom` to a timeline just opened: the memory map's event,
/// and the view centred on its action; what does not exist is said the way the commands say it.
pub(super) fn open_at(t: &mut Timeline, at: OpenAt) -> Result<(), String> {
    let device = t.doc.session.ordinal(t.doc.device);
    let events = t.doc.session.trace(t.doc.device).len() as i64;
    let actions = t.doc.session.elements(t.doc.device).layout.actions.len() as i64;
    let event = match at {
        OpenAt::Event(e) if (-1..events).contains(&e) => e,
        OpenAt::Event(e) => return Err(format!("event {e} is out of range on device {device} (-1..{events})")),
        OpenAt::Action(k) if (0..actions).contains(&k) => super::memory_map::action_event(&t.doc, k as usize),
        OpenAt::Action(k) => return Err(format!("action {k} is out of range on device {device} (0..{actions})")),
        OpenAt::Time(us) => {
            let data = crate::archive::DeviceData::new(&t.doc.session, t.doc.device);
            let tl = data.timeline();
            let base = tl.time_base_us.ok_or_else(|| format!("device {device} recorded no times; use --action"))?;
            let k = i64::from(tl.actions_until(base + us)) - 1;
            if k < 0 {
                return Err(format!(
                    "no action at or before {} on device {device}",
                    crate::analysis::units::duration_us(us)
                ));
            }
            super::memory_map::action_event(&t.doc, k as usize)
        }
        OpenAt::Oom(n) => {
            let marks = super::ooms::marks(&t.doc.session, t.doc.device);
            let pick = if n == 0 { marks.last() } else { marks.get(n - 1) };
            match pick {
                Some(m) => m.event - 1,
                None => {
                    let have = crate::analysis::units::count(marks.len() as u64, "OOM event", "OOM events");
                    let asked = if n == 0 { "last".to_owned() } else { n.to_string() };
                    return Err(format!("device {device} has {have} (asked for OOM {asked})"));
                }
            }
        }
    };
    t.doc.selection.event = Some(event);
    let k = super::memory_map::action_before(&t.doc, event);
    t.centre_on(k.max(0) as f64 + 0.5);
    Ok(())
}
