//! Answers computed from the model and its layouts — stats, exports, frame and annotation helpers —
//! and from one device's [`timeline::Timeline`] read in place.

pub mod annotations;
pub mod export;
pub mod frames;
pub mod reserved;
pub mod stats;
pub mod timeline;
pub mod units;
