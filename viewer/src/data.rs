//! The viewer's data is an [`crate::archive::Session`]: one archive, read in place (it lives in
//! the read crate, `memviz-read`, because the command-line answers read archives the same way).

pub use crate::archive::{DeviceData, Plane, Session, StackedRef};
