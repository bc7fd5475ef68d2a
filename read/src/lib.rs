//! memviz-read: the read side of memviz, apart from the index pipeline and the file on disk so
//! that it builds for `wasm32-unknown-unknown` (a browser viewer). Nothing here maps, opens or
//! writes a file, starts a thread or reads a clock: the caller passes bytes in ([`archive::Source`])
//! and runs the work that wants a thread ([`archive::Session::check_everything`]).
//!
//! The layers (see ARCHITECTURE.md): `model` (plain data) and `schema` (the snapshot's field
//! rules and the builder every decoder writes into) → `layout` (timeline replay, checkpoints) →
//! `lod`, `derive`, `allocator` → `archive` (an archive's bytes validated and read: the session,
//! element attributes, events, the whole model restored, the consistency check) → `analysis`
//! (every answer). `pace` sits beside `model`: the long passes tick it, for a program that
//! keeps their columns in a spill file (`memviz index`).

pub mod allocator;
pub mod analysis;
pub mod archive;
pub mod derive;
pub mod layout;
pub mod lod;
pub mod model;
pub mod pace;
pub mod schema;

#[cfg(test)]
pub(crate) mod fixtures;
