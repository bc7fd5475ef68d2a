//! One device's derived view data worked out once on a named thread (the OOM markers, the pools,
//! the categories), so the UI never waits for it: [`Pending::ready`] is empty until it is in.

use std::sync::{Arc, OnceLock};

use super::data::Session;
use crate::model::DeviceIdx;

pub struct Pending<T> {
    pub device: DeviceIdx,
    pub ready: Arc<OnceLock<T>>,
}

impl<T: Send + Sync + 'static> Pending<T> {
    /// Starts `compute` for device `d` on a thread named `memviz-{what}`; if no thread can be
    /// started, says so once on standard error and stays empty.
    pub fn start(
        what: &'static str,
        session: &Arc<Session>,
        d: DeviceIdx,
        compute: impl FnOnce(&Session, DeviceIdx) -> T + Send + 'static,
    ) -> Pending<T> {
        let ready = Arc::new(OnceLock::new());
        let (out, session) = (Arc::clone(&ready), Arc::clone(session));
        let spawned = std::thread::Builder::new().name(format!("memviz-{what}")).spawn(move || {
            let _ = out.set(compute(&session, d));
        });
        if let Err(e) = spawned {
            eprintln!("warning: could not start the {what} thread ({e}): no {what}");
        }
        Pending { device: d, ready }
    }

    pub fn get(&self) -> Option<&T> {
        self.ready.get()
    }
}
