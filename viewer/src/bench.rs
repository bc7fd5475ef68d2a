//! `--bench`: a fixed script of zooms, pans and hovers replayed offscreen; frame times are
//! measured on the UI side including the GPU's work (each frame waits for the GPU), the UI
//! thread's own CPU time beside them, and the chunks the UI thread decompressed after the first
//! frame (the goal is none: what a frame needs from the whole trace is made once, on a worker).

use std::time::Instant;

use eframe::egui::{self, Event, Modifiers, MouseWheelSource, MouseWheelUnit, PointerButton, TouchPhase, pos2, vec2};

use super::app::ViewerApp;
use super::offscreen::Offscreen;
use crate::archive::chunks;

pub struct BenchResult {
    pub frames: usize,
    pub frame_ms: serde_json::Value,
    /// The UI thread's CPU time a frame: the UI, tessellation, uploads and recording the pass,
    /// neither the GPU's work nor the wait for it ([`Offscreen::ui_cpu_ms`]).
    pub ui_ms: serde_json::Value,
    /// Chunks the UI thread decompressed during the script, after the first frame settled.
    pub ui_thread_chunks: u64,
    pub hover_ms: serde_json::Value,
    /// In the Allocator State view: frames of stepping 1,000 events with → held down (one
    /// key repeat a frame; each frame asks the state worker for the next state and draws the
    /// last one that came back, without waiting for it).
    pub step_ms: Option<serde_json::Value>,
}

/// The events of one wheel notch at `at` (a test or bench's scroll).
pub fn wheel(at: egui::Pos2, dy: f32, shift: bool) -> Vec<Event> {
    let modifiers = if shift { Modifiers::SHIFT } else { Modifiers::NONE };
    vec![
        Event::PointerMoved(at),
        Event::MouseWheel {
            unit: MouseWheelUnit::Point,
            delta: vec2(0.0, dy),
            phase: TouchPhase::Move,
            source: MouseWheelSource::Unknown,
            modifiers,
        },
    ]
}

/// A key pressed (`repeat`: held down, the key repeating) with no modifiers: a bench's or a
/// test's keystroke.
pub fn key(key: egui::Key, repeat: bool) -> Event {
    Event::Key { key, physical_key: None, pressed: true, repeat, modifiers: Modifiers::NONE }
}

fn percentiles(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0);
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    serde_json::json!({ "p50": r(at(0.5)), "p90": r(at(0.9)), "p99": r(at(0.99)), "max": r(at(1.0)) })
}

pub fn run(gpu: &mut Offscreen, app: &mut ViewerApp) -> BenchResult {
    gpu.settle(app, 500);
    // The plot, or the whole window for the rank strip (its cells fill it).
    let rect = match app.timeline() {
        Some(t) => t.plot.plot_rect,
        None if app.ranks.is_some() => {
            egui::Rect::from_min_size(pos2(0.0, 0.0), vec2(gpu.width as f32, gpu.height as f32)).shrink(40.0)
        }
        None => {
            return BenchResult {
                frames: 0,
                frame_ms: serde_json::Value::Null,
                ui_ms: serde_json::Value::Null,
                ui_thread_chunks: 0,
                hover_ms: serde_json::Value::Null,
                step_ms: None,
            };
        }
    };
    let chunks_before = chunks::decompressed_on_this_thread();
    let at = |fx: f32, fy: f32| pos2(rect.left() + rect.width() * fx, rect.top() + rect.height() * fy);
    let mut script: Vec<Vec<Event>> = Vec::new();
    for &(fx, fy) in &[(0.3, 0.5), (0.6, 0.4), (0.45, 0.6)] {
        for _ in 0..12 {
            script.push(wheel(at(fx, fy), 60.0, false));
            script.push(vec![Event::PointerMoved(at(fx + 0.01, fy))]);
        }
        // Pan right and back.
        let start = at(0.5, 0.5);
        script.push(vec![Event::PointerButton {
            pos: start,
            button: PointerButton::Primary,
            pressed: true,
            modifiers: Modifiers::NONE,
        }]);
        for i in 1..=20 {
            script.push(vec![Event::PointerMoved(start + vec2(-8.0 * i as f32, 0.0))]);
        }
        script.push(vec![Event::PointerButton {
            pos: start + vec2(-160.0, 0.0),
            button: PointerButton::Primary,
            pressed: false,
            modifiers: Modifiers::NONE,
        }]);
        for _ in 0..4 {
            script.push(wheel(at(fx, fy), 60.0, true));
        }
        for i in 0..30 {
            script.push(vec![Event::PointerMoved(at(0.1 + 0.027 * i as f32, 0.5))]);
        }
        for _ in 0..4 {
            script.push(wheel(at(fx, fy), -60.0, true));
        }
        for _ in 0..16 {
            script.push(wheel(at(fx, fy), -60.0, false));
        }
    }
    let mut times = Vec::with_capacity(script.len());
    let mut ui = Vec::with_capacity(script.len());
    for events in script {
        let t = Instant::now();
        gpu.frame(app, events);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        ui.push(gpu.ui_cpu_ms);
    }
    let mut hover = Vec::new();
    if let Some(t) = app.timeline() {
        for i in 0..2000 {
            let p = at((i % 97) as f32 / 97.0, (i % 89) as f32 / 89.0);
            let s = Instant::now();
            std::hint::black_box(t.pick(p));
            hover.push(s.elapsed().as_secs_f64() * 1e3);
        }
    }
    let step_ms = (app.tab == super::tabs::Tab::State).then(|| {
        gpu.frame(app, vec![Event::PointerGone, key(egui::Key::Home, false)]);
        let mut steps = Vec::with_capacity(1000);
        for _ in 0..1000 {
            let right = key(egui::Key::ArrowRight, true);
            let t = Instant::now();
            gpu.frame(app, vec![right]);
            steps.push(t.elapsed().as_secs_f64() * 1e3);
            ui.push(gpu.ui_cpu_ms);
        }
        percentiles(steps)
    });
    BenchResult {
        frames: times.len(),
        frame_ms: percentiles(times),
        ui_ms: percentiles(ui),
        ui_thread_chunks: chunks::decompressed_on_this_thread() - chunks_before,
        hover_ms: percentiles(hover),
        step_ms,
    }
}
