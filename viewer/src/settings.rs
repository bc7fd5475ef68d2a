//! The Allocator Settings view: the snapshot's `allocator_settings`, one setting a row, with what
//! each means and a note when expandable segments were off.

use eframe::egui;

use super::theme;

/// What a setting of PyTorch's caching allocator does (`PYTORCH_CUDA_ALLOC_CONF`).
fn meaning(key: &str) -> &'static str {
    match key {
        "PYTORCH_CUDA_ALLOC_CONF" => "the environment variable the settings below came from",
        "max_split_size" => "blocks this large or larger are never split (-1: no limit)",
        "garbage_collection_threshold" => "reclaim cached blocks once usage passes this fraction (0: off)",
        "expandable_segments" => "segments grow and shrink in place instead of new segments per size",
        "roundup_power2_divisions" => "requests are rounded up to power-of-two divisions per size",
        "release_lock_on_cudamalloc" => "the allocator's lock is released around cudaMalloc",
        "pinned_num_register_threads" => "threads that register pinned host memory",
        "pinned_use_cuda_host_register" => "pinned memory comes from cudaHostRegister instead of cudaHostAlloc",
        "graph_capture_record_stream_reuse" => "blocks freed during graph capture can be reused by the graph",
        "per_process_memory_fraction" => "the fraction of the device this process may use",
        _ => "",
    }
}

/// The rows: `(setting, value, meaning)` by name; nested values as JSON.
pub fn rows(settings: &serde_json::Value) -> Vec<(String, String, &'static str)> {
    let Some(map) = settings.as_object() else { return Vec::new() };
    map.iter()
        .map(|(k, v)| {
            let value = match v {
                serde_json::Value::String(s) if s.is_empty() => "(empty)".to_owned(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), value, meaning(k))
        })
        .collect()
}

/// The note under the table, when the settings say something about fragmentation.
pub fn note(settings: &serde_json::Value) -> Option<String> {
    let off = settings.get("expandable_segments").is_some_and(|v| v.as_bool() == Some(false) || v.as_i64() == Some(0));
    off.then(|| {
        "expandable segments were off: each size class reserves its own segments, and free memory stranded \
         between them cannot serve a larger request (see `memviz oom`); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
            .to_owned()
    })
}

pub fn ui(ui: &mut egui::Ui, settings: Option<&serde_json::Value>) {
    egui::Frame::new().inner_margin(16.0).show(ui, |ui| {
        ui.heading("Allocator Settings");
        let Some(value) = settings else {
            ui.label("The snapshot recorded no allocator_settings (torch before 2.1, or a re-export without them).");
            return;
        };
        egui::Grid::new("settings").striped(true).num_columns(3).show(ui, |ui| {
            for (k, v, m) in rows(value) {
                ui.monospace(k);
                ui.monospace(v);
                ui.weak(m);
                ui.end_row();
            }
        });
        if let Some(n) = note(value) {
            ui.add_space(8.0);
            ui.colored_label(theme::CAPACITY, n);
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn rows_and_the_expandable_note() {
        let v: serde_json::Value = serde_json::json!({
            "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "expandable_segments": false,
            "roundup_power2_divisions": {"1": 0}
        });
        let rows = super::rows(&v);
        let value = |k: &str| rows.iter().find(|r| r.0 == k).map(|r| (r.1.as_str(), r.2)).unwrap();
        assert_eq!(value("PYTORCH_CUDA_ALLOC_CONF"), ("(empty)", super::meaning("PYTORCH_CUDA_ALLOC_CONF")));
        assert_eq!(value("max_split_size").0, "-1");
        assert_eq!(value("roundup_power2_divisions").0, r#"{"1":0}"#);
        assert_eq!(rows.len(), 4);
        assert!(super::note(&v).unwrap().contains("expandable_segments:True"));
        assert_eq!(super::note(&serde_json::json!({"expandable_segments": true})), None);
    }
}
