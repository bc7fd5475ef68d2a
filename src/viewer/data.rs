//! The viewer's data is an [`crate::archive::Session`]: one mapped archive, read in place (it
//! lives in `archive/` because the command-line answers read archives the same way).

pub use crate::archive::{DeviceData, Plane, Session, StackedRef};
