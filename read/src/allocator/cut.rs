//! Where a pass run as two parts is cut, settled while the late part already runs.
//!
//! The late part undoes the trace from the dump backwards and needs no cut to start; the early
//! part needs one before it begins (it first undoes the late part's events untracked, then
//! tracks the rest). So the worker that will run the early part — after whatever else it had
//! to do first, the checkpoints and tiles — settles the cut from how far the late part got, and
//! the late part reads it on its way: both parts then end together however long that other
//! work took, with no estimate of it.
//!
//! The late part reports its progress every [`CHECK`] undone events, under a lock; a cut is
//! settled at least `CHECK` events past the last report, so the late part has not passed it
//! when it next looks. A late part that reaches the trace's first event before a cut is settled
//! settles it there itself: it was the whole pass, and there is no early part.

use std::sync::Mutex;

/// Undone events between two of the late part's reports.
pub const CHECK: usize = 1024;

/// The cut of one device's pass: the number of events the late part undoes.
#[derive(Debug)]
pub struct Cut {
    /// Events in the device's trace.
    n: usize,
    at: Mutex<At>,
}

#[derive(Debug, Default)]
struct At {
    /// Events the late part had undone at its last report.
    reached: usize,
    settled: Option<usize>,
}

impl Cut {
    /// A cut not settled yet, for a trace of `n` events.
    pub fn open(n: usize) -> Cut {
        Cut { n, at: Mutex::new(At::default()) }
    }

    /// A cut settled from the start after `undone` events (at most `n`).
    pub fn at(n: usize, undone: usize) -> Cut {
        Cut { n, at: Mutex::new(At { reached: 0, settled: Some(undone.min(n)) }) }
    }

    /// Events in the trace.
    pub fn events(&self) -> usize {
        self.n
    }

    /// The late part's events, settled now if they are not yet: `choose` gets how many events
    /// the late part had undone at its last report and says where it should stop, which is moved
    /// to where the late part can still stop (at least `CHECK` events further, at most the
    /// whole trace). `n`: the late part is the whole pass.
    pub fn settle(&self, choose: impl FnOnce(usize) -> usize) -> usize {
        let mut at = self.at.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(settled) = at.settled {
            return settled;
        }
        let settled = choose(at.reached).max(at.reached + CHECK).min(self.n);
        at.settled = Some(settled);
        settled
    }

    /// The late part has undone `undone` events (a multiple of [`CHECK`], or all of them): where
    /// it stops, if that is settled. Reaching the trace's first event settles the cut there.
    pub(super) fn report(&self, undone: usize) -> Option<usize> {
        let mut at = self.at.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        at.reached = undone;
        if undone >= self.n && at.settled.is_none() {
            at.settled = Some(self.n);
        }
        at.settled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_is_settled_where_the_late_part_can_still_stop() {
        let cut = Cut::open(100_000);
        assert_eq!(cut.report(0), None);
        assert_eq!(cut.report(3 * CHECK), None);
        // Asked for a cut behind the late part: it goes to the next report.
        assert_eq!(cut.settle(|reached| reached / 2), 4 * CHECK);
        assert_eq!(cut.report(4 * CHECK), Some(4 * CHECK));
        // Settled once.
        assert_eq!(cut.settle(|_| 7), 4 * CHECK);
        // Never past the trace.
        assert_eq!(Cut::open(10).settle(|_| 50), 10);
    }

    #[test]
    fn a_late_part_that_ends_first_was_the_whole_pass() {
        let cut = Cut::open(5000);
        assert_eq!(cut.report(CHECK), None);
        assert_eq!(cut.report(5000), Some(5000));
        assert_eq!(cut.settle(|_| 0), 5000);
        assert_eq!(Cut::at(5000, 123).report(0), Some(123));
    }
}
