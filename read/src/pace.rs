//! Long passes over a layout's columns say how far they got, every so often ([`tick`]), to a
//! hook the program sets once ([`set`]): `memviz index` keeps those columns in a spill file past
//! its memory budget, and its hook drops the file's pages from the process — helping a drop
//! under way, or starting one past the mark — instead of letting the pass fault more in
//! (`src/spill.rs`). Without a hook a tick is one load of a static.

use std::sync::OnceLock;

static HOOK: OnceLock<fn()> = OnceLock::new();

/// Items a pass goes through between two ticks.
pub const EVERY: usize = 1 << 18;

/// Sets the hook a tick calls; the first set stays.
pub fn set(hook: fn()) {
    let _ = HOOK.set(hook);
}

/// A pass got [`EVERY`] items further (or through one unit of its work).
#[inline]
pub fn tick() {
    if let Some(hook) = HOOK.get() {
        hook();
    }
}

/// Ticks at every [`EVERY`]th item `i` of a pass.
#[inline]
pub fn at(i: usize) {
    if i.is_multiple_of(EVERY) {
        tick();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static TICKS: Cell<usize> = const { Cell::new(0) };
    }

    /// The hook counts this thread's ticks only: other tests' passes tick it too.
    #[test]
    fn a_pass_ticks_the_hook_every_so_many_items() {
        set(|| TICKS.with(|t| t.set(t.get() + 1)));
        for i in 0..3 * EVERY + 1 {
            at(i);
        }
        tick();
        assert_eq!(TICKS.with(Cell::get), 4 + 1);
    }
}
