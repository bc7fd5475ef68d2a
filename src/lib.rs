//! memviz: a native tool for PyTorch CUDA memory snapshots.
//!
//! The pipeline, each stage a module (see ARCHITECTURE.md):
//! `ingest` (pickle / JSON → `model`) → `layout` (timeline replay, checkpoints) → `lod` (tiles,
//! minimap) → `archive` (the `.memviz` file) → `viewer` (egui + wgpu); `analysis` answers
//! questions (stats, exports, live sets, ranges, steps, diffs, tensor shapes) from either side;
//! `hub` fetches model configs; `commands` runs each command for the thin binary.

pub mod allocator;
pub mod analysis;
pub mod archive;
pub mod cli;
pub mod commands;
pub mod derive;
pub mod hub;
pub mod ingest;
pub mod layout;
pub mod lod;
pub mod model;
pub mod output;
pub mod spill;
pub mod temp_files;
pub mod timings;
pub mod viewer;
