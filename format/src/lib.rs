//! The `.memviz` archive schema. See `FORMAT.md` beside this crate.
