//! Derivations written into the archive, and the read model the answers share — the layer
//! between `layout` / `lod` and `archive`. Pure: no I/O, no rkyv, no egui.
//!
//! - `attrs`: an in-memory model's element attributes, and the rule for an element's pool.
//! - `spans`: `record_function` START/END markers paired into spans.
//! - `sites`: element → the stack that explains it (its allocation site).
//! - `reserved`: reserved (segment) memory over time.
//! - `frames`: [`frames::FrameSource`], stacks read the same way from the model or an archive.
//! - `steps`: the spans of one family as a loop's steps, and the sites retaining memory.
//! - `timeline`: [`timeline::TimelineRef`], one device's timeline as borrowed slices (from a
//!   mapped archive or a hand-made layout), with its action times, spans and attributes.

pub mod attrs;
pub mod frames;
pub mod reserved;
pub mod sites;
pub mod spans;
pub mod step_rules;
pub mod steps;
pub mod timeline;
