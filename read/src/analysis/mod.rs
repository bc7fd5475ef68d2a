//! Answers computed from the model and its layouts — stats, exports, frame and annotation helpers —
//! and from one device's [`crate::derive::timeline::TimelineRef`] read in place: the live set at
//! an instant (`live`), a range of actions (`range`), annotated steps (`steps`), two traces
//! compared (`diff`); what kind of memory each allocation is (`categories`).

pub mod annotations;
pub mod categories;
pub mod category_rules;
pub mod diff;
pub mod export;
pub mod find;
pub mod flamegraph;
pub mod frames;
pub mod groups;
pub mod live;
pub mod oom;
pub mod range;
pub mod ranks;
pub mod segments;
pub mod shapes;
pub mod stats;
pub mod steps;
pub mod table;
#[cfg(test)]
pub(crate) mod tiny;
pub mod units;
