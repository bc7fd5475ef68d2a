//! The event list beside the memory map: every raw event of the device, virtualised (only the
//! rows on screen are read, on the state worker, from the archive), the memory map's event
//! highlighted; an address jumps to the next event at it. And the keys that step the map through
//! events: ←/→ one event, PgUp/PgDn one action of the timeline, Home/End the first and last.

use eframe::egui;

use super::document::Document;
use super::memory_map::{MemoryMap, action_before, action_event};
use crate::allocator::EventColumns as _;
use crate::archive::events::ArchiveEvents;

pub fn ui(ui: &mut egui::Ui, doc: &mut Document, map: &mut MemoryMap, at: Option<i64>) {
    let trace = doc.session.trace(doc.device);
    let n = trace.len();
    ui.strong(format!("events ({})", crate::analysis::units::thousands(n as u64)));
    let field = ui.make_persistent_id("memviz-address-jump");
    let mut text: String = ui.data_mut(|d| d.get_temp(field).unwrap_or_default());
    let edit = ui
        .add(egui::TextEdit::singleline(&mut text).hint_text("jump to an address (hex)").desired_width(f32::INFINITY));
    if edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)) {
        match parse_hex(&text) {
            Some(addr) => {
                if let Some(e) = next_at(doc, addr) {
                    doc.selection.event = Some(e);
                }
            }
            None => text = format!("not an address: {text}"),
        }
    }
    ui.data_mut(|d| d.insert_temp(field, text));
    let selected = at;
    // Scroll to the selection when it moved (keys, a jump, a click on the timeline).
    let last = ui.make_persistent_id("memviz-events-scrolled");
    let scrolled: Option<i64> = ui.data_mut(|d| d.get_temp(last).unwrap_or_default());
    let mut area = egui::ScrollArea::vertical().auto_shrink(false);
    if doc.selection.hovered.is_none() && doc.selection.event != scrolled {
        let row = doc.selection.event.unwrap_or(0).max(0) as f32;
        let pitch = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        area = area.vertical_scroll_offset((row * pitch - 120.0).max(0.0));
        ui.data_mut(|d| d.insert_temp(last, doc.selection.event));
    }
    let mut clicked = None;
    ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
    let row_h = ui.spacing().interact_size.y;
    // The rows on screen come from the state worker (each read decompresses a chunk of three
    // columns); until they do, the rows it sent last, or just the index.
    let worker = map.worker(doc, ui.ctx());
    area.show_rows(ui, row_h, n, |ui, rows| {
        worker.ask_rows((doc.device, rows.start, rows.end));
        let texts = worker.rows();
        for i in rows {
            let text = texts.and_then(|r| r.get(doc.device, i)).map_or_else(|| format!("{i:>8}"), str::to_owned);
            let label = egui::RichText::new(text).monospace().size(11.0);
            if ui.selectable_label(selected == Some(i as i64), label).clicked() {
                clicked = Some(i as i64);
            }
        }
    });
    if clicked.is_some() {
        doc.selection.event = clicked;
    }
}

/// ←/→, PgUp/PgDn, Home/End, unless a text field has the keyboard.
pub fn keys(ui: &egui::Ui, doc: &mut Document, at: Option<i64>) {
    if ui.ctx().memory(|m| m.focused().is_some()) {
        return;
    }
    let n = doc.session.trace(doc.device).len() as i64;
    let count = |k: egui::Key| ui.input_mut(|i| i.count_and_consume_key(egui::Modifiers::NONE, k)) as i64;
    let (right, left) = (count(egui::Key::ArrowRight), count(egui::Key::ArrowLeft));
    let (down, up) = (count(egui::Key::PageDown), count(egui::Key::PageUp));
    let (home, end) = (count(egui::Key::Home), count(egui::Key::End));
    if right + left + down + up + home + end == 0 {
        return;
    }
    let mut e = doc.selection.event.or(at).unwrap_or(-1);
    if home > 0 {
        e = -1;
    }
    if end > 0 {
        e = n - 1;
    }
    e += right - left;
    let actions = doc.session.elements(doc.device).layout.actions.len() as i64;
    for _ in 0..down {
        let k = action_before(doc, e) + 1;
        e = if k < actions { action_event(doc, k as usize) } else { n - 1 };
    }
    for _ in 0..up {
        let k = action_before(doc, e);
        let k = if k >= 0 && action_event(doc, k as usize) == e { k - 1 } else { k };
        e = if k >= 0 { action_event(doc, k as usize) } else { -1 };
    }
    doc.selection.event = Some(e.clamp(-1, n - 1));
    doc.selection.hovered = None;
}

fn parse_hex(s: &str) -> Option<u64> {
    let s = s.trim();
    u64::from_str_radix(s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s), 16).ok()
}

/// The next event after the selected one (wrapping around) whose address is `addr`.
fn next_at(doc: &Document, addr: u64) -> Option<i64> {
    let trace = doc.session.trace(doc.device);
    let n = trace.len() as i64;
    let events = ArchiveEvents::new(doc.session.root());
    let from = doc.selection.event.unwrap_or(-1);
    (1..=n).map(|d| (from + d).rem_euclid(n)).find(|&i| events.addr(trace.start + i as usize) == addr)
}

#[cfg(test)]
mod tests {
    #[test]
    fn addresses_parse_with_or_without_0x() {
        assert_eq!(super::parse_hex("0x7f43"), Some(0x7f43));
        assert_eq!(super::parse_hex(" 7F43 "), Some(0x7f43));
        assert_eq!(super::parse_hex("zz"), None);
    }
}
