//! Opening an archive in the viewer with what the options ask for — the device, the view, the
//! instant, the x range, the pinned element — and the link ("copy link") that opens it again.

use std::path::Path;
use std::sync::Arc;

use eframe::egui;

use super::app::ViewerOptions;
use super::data::Session;
use super::document::Document;
use super::tabs::{OpenAt, Pin, Tab};
use super::timeline::Open;

/// Opens the archive at `path` (any thread: `memviz open` starts it beside the window).
pub fn open_file(platform: &crate::platform::PlatformRef, path: &Path) -> Result<Arc<Session>, String> {
    platform.open_archive(path)
}

/// A timeline of an opened archive with the settings the options ask for (its ids and checksum
/// are checked, and the action times read for the time axis, in the background:
/// `Platform::start_checks`).
pub(super) fn new_timeline(options: &ViewerOptions, session: Arc<Session>, ctx: &egui::Context) -> Open {
    let first_frame = Arc::new(crate::platform::FirstFrame::default());
    options.platform.start_checks(&session, &first_frame);
    let mut t = configured(options, session, ctx);
    t.doc.first_frame = first_frame;
    t
}

/// A timeline of an archive whose first-frame parts alone are here (`Document::preview`): no
/// check starts (the checks read every byte); the whole archive replaces it once it is in.
pub(super) fn preview_timeline(options: &ViewerOptions, session: Arc<Session>, ctx: &egui::Context) -> Open {
    let mut t = configured(options, session, ctx);
    t.doc.preview = true;
    t
}

/// A timeline of `session` with the options' settings, the whole trace in view.
fn configured(options: &ViewerOptions, session: Arc<Session>, ctx: &egui::Context) -> Open {
    let mut t = Open::new(session, ctx);
    t.plot.platform = options.platform.clone();
    t.doc.max_entries = options.max_entries;
    t.doc.capacity = options.gpu.map(|g| g.1);
    t.fit();
    t.doc.colour_by_category = options.by_category;
    t.doc.colour_by_site = !options.by_allocation;
    t
}

/// Applies the view options to a timeline just opened: the device, the instant, the x range and
/// the pinned element; what does not exist is said the way the commands say it.
pub(super) fn apply_view(t: &mut Open, o: &ViewerOptions) -> Result<(), String> {
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
    // A first frame (`Document::preview`) has no element's columns to find or pin one with:
    // the view the options ask for (or the whole trace), the pin once the rest is here.
    let pin = if t.doc.preview { None } else { o.pin };
    match pin {
        None => {}
        Some(Pin::Element(id)) => {
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
        Some(Pin::Addr(addr)) => {
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

/// What a link reopens: the view on screen (device, view, x range, pinned element, colouring),
/// as `memviz open`'s options name them — the same names on a command line and in a page's URL.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewState {
    pub device: u32,
    pub tab: Tab,
    /// The actions across the plot, when the axis is the actions.
    pub x: Option<(f64, f64)>,
    pub element: Option<u32>,
    pub colour: Option<&'static str>,
}

impl ViewState {
    pub fn of(doc: &Document, tab: Tab) -> ViewState {
        ViewState {
            device: doc.session.ordinal(doc.device).0,
            tab,
            x: (!doc.time_axis).then_some((doc.view.x0, doc.view.x1)),
            element: doc.selection.pinned.map(|p| p.element.0),
            colour: if doc.colour_by_category {
                Some("category")
            } else {
                (!doc.colour_by_site).then_some("allocation")
            },
        }
    }

    /// The options, in order, as `(name, value)`.
    pub fn options(&self) -> Vec<(&'static str, String)> {
        let mut o = vec![("device", self.device.to_string()), ("view", self.tab.arg().to_owned())];
        if let Some((a, b)) = self.x {
            o.push(("x", format!("{a:.1}..{b:.1}")));
        }
        if let Some(e) = self.element {
            o.push(("element", e.to_string()));
        }
        if let Some(c) = self.colour {
            o.push(("colour", c.to_owned()));
        }
        o
    }

    /// The command line that reopens this view of the file at `path`.
    pub fn command(&self, path: &Path) -> String {
        let quote = |s: &str| {
            if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:,=".contains(c)) {
                s.to_owned()
            } else {
                format!("'{}'", s.replace('\'', r"'\''"))
            }
        };
        let mut cmd = format!("memviz open {}", quote(&path.display().to_string()));
        for (name, value) in self.options() {
            cmd.push_str(&format!(" --{name} {value}"));
        }
        cmd
    }
}

impl ViewerOptions {
    /// The view a page's URL asks for (`?archive=…&device=0&view=pools&x=10..20&element=7`):
    /// `memviz open`'s option names, the ones [`ViewState::options`] writes. Names that are not
    /// a view's (the archive, a token) are the page's.
    pub fn with_query(mut self, query: &str) -> Result<ViewerOptions, String> {
        for pair in query.trim_start_matches('?').split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let int = |what: &str| value.parse::<i64>().map_err(|_| format!("{name}={value}: not {what}"));
            match name {
                "device" => {
                    self.device = Some(crate::model::DeviceId(
                        int("a device")?.try_into().map_err(|_| format!("device={value}: not a device"))?,
                    ))
                }
                "view" => self.tab = Tab::from_arg(value).ok_or_else(|| format!("view={value}: not a view"))?,
                "x" => self.x_range = Some(crate::analysis::range::parse_x_range(value)?),
                "element" => {
                    self.pin = Some(Pin::Element(
                        int("an element")?.try_into().map_err(|_| format!("element={value}: out of range"))?,
                    ))
                }
                "pin" => self.pin = Some(Pin::Addr(crate::analysis::find::parse_addr(value)?)),
                "event" => self.at = Some(OpenAt::Event(int("an event")?)),
                "action" => self.at = Some(OpenAt::Action(int("an action")?)),
                "oom" => {
                    self.at = Some(OpenAt::Oom(
                        int("an OOM's number")?.try_into().map_err(|_| format!("oom={value}: not an OOM's number"))?,
                    ))
                }
                "colour" => {
                    (self.by_category, self.by_allocation) = match value {
                        "category" => (true, false),
                        "allocation" => (false, true),
                        "site" => (false, false),
                        _ => return Err(format!("colour={value}: not site, category or allocation")),
                    }
                }
                _ => {}
            }
        }
        Ok(self)
    }
}

/// Applies `--event`, `--action` or `--oom` to a timeline just opened: the memory map's event,
/// and the view centred on its action; what does not exist is said the way the commands say it.
pub(super) fn open_at(t: &mut Open, at: OpenAt) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_written_as_a_query_reads_back_as_the_same_options() {
        let view = ViewState {
            device: 1,
            tab: Tab::Segments,
            x: Some((812.5, 1290.0)),
            element: Some(377),
            colour: Some("category"),
        };
        let query: Vec<String> = view.options().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        let query = format!("?archive=%2Farchive%2F0%2Fa.memviz&{}", query.join("&"));
        let o = ViewerOptions::default().with_query(&query).unwrap();
        assert_eq!(o.device, Some(crate::model::DeviceId(1)));
        assert_eq!(o.tab, Tab::Segments);
        assert_eq!(o.x_range, Some((812.5, 1290.0)));
        assert_eq!(o.pin, Some(Pin::Element(377)));
        assert!(o.by_category && !o.by_allocation);
        assert_eq!(
            view.command(Path::new("run 42.memviz")),
            "memviz open 'run 42.memviz' --device 1 --view segments --x 812.5..1290.0 --element 377 --colour category"
        );
    }

    #[test]
    fn a_query_that_names_no_view_is_refused_with_what_it_named() {
        let err = |q: &str| ViewerOptions::default().with_query(q).unwrap_err();
        assert_eq!(err("view=flame"), "view=flame: not a view");
        assert_eq!(err("element=-3"), "element=-3: out of range");
        assert!(err("x=5..2").contains("expected actions A..B"));
        assert_eq!(err("colour=red"), "colour=red: not site, category or allocation");
    }
}
