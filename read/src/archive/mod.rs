//! A `.memviz` archive's bytes, read: validated once at open (`open`: header, block table,
//! rkyv structure; older format versions upgraded in memory), checked block by block as read,
//! every id checked (`consistency`), and read in place (`session`, `attrs`, `events`) or as the
//! whole model (`restore`). `chunks` is the codec of the compressed columns (the index writes
//! them with it). The byte layout belongs to the `memviz-format` crate (see format/FORMAT.md).

pub mod attrs;
pub mod chunks;
pub mod consistency;
pub mod events;
pub mod guard;
pub mod open;
pub mod parts;
pub mod restore;
pub mod session;

pub use open::{Archive, ArchiveError, Memory, Source};
pub use session::{DeviceData, DeviceTimes, Plane, Session, StackedRef, TimeAxis};
