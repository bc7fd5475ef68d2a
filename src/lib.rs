//! memviz: a native tool for PyTorch CUDA memory snapshots.
//!
//! The pipeline, each stage a module (see ARCHITECTURE.md):
//! `ingest` (pickle / JSON → `model`) → `layout` (timeline replay) → `analysis` (stats, exports),
//! driven by `commands`, which the thin binary calls.

pub mod analysis;
pub mod archive;
pub mod cli;
pub mod commands;
pub mod hub;
pub mod ingest;
pub mod layout;
pub mod lod;
pub mod model;
pub mod output;
pub mod viewer;
