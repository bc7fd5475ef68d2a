//! memviz: a native tool for PyTorch CUDA memory snapshots.
//!
//! The pipeline, each stage a module (see ARCHITECTURE.md): `ingest` (pickle / JSON → `model`)
//! → `index` (layout, derive, the allocator's pass, tiles → the archive) → `file` (the `.memviz`
//! file: mapped, checked, written) → `viewer` (egui + wgpu); `hub` fetches model configs;
//! `commands` runs each command for the thin binary. What reads an archive and answers from it
//! (`model`, `schema`, `layout`, `lod`, `derive`, `allocator`, `archive`, `analysis`, and
//! `pace`, the hook its long passes tick) is the `memviz-read` crate, re-exported here under the
//! same names.

pub use memviz_read::{allocator, analysis, archive, derive, layout, lod, model, pace, schema};
/// The viewer, crate `memviz-viewer`; [`native`] is what it runs on here.
pub use memviz_viewer as viewer;

pub mod cli;
pub mod commands;
pub mod file;
pub mod hub;
pub mod index;
pub mod ingest;
pub mod native;
pub mod output;
pub mod serve;
pub mod spill;
pub mod temp_files;
pub mod timings;
pub mod web_page;
