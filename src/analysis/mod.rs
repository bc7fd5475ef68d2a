//! Answers computed from the model and its layouts: stats, exports, frame and annotation helpers.

pub mod annotations;
pub mod export;
pub mod frames;
pub mod reserved;
pub mod shapes;
pub mod stats;
pub mod units;
