//! The one integration test binary: drives the `memviz` CLI and library on real fixtures.
//! Fixtures live in `tests/data/` (see tests/data/synth/README.md); only the scale golden reaches
//! for `../shared/fixtures`, and skips (saying so) where that folder is absent.

mod support;

mod allocator;
mod answers;
mod archive;
mod bad_input;
mod browser;
mod categories;
mod cli;
mod differential;
mod doc_examples;
mod expected;
mod find;
mod fixture_archives;
mod frames;
mod generator;
mod golden;
mod hostile;
mod layers;
mod mcp;
mod model;
mod ranks;
mod real_use;
mod recorder;
mod serve;
mod stats;
mod step_rules;
mod tolerance;
mod viewer;
