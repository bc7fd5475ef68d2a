//! Long jobs shared out on the pool by taking: each of the pool's threads takes the next job not
//! yet taken until none is left — except a thread busy with other long work ([`Elsewhere`]).
//!
//! Why: the allocator's pass runs in spans beside the tiles, which one thread makes. Waiting in
//! one of the tiles' joins, that thread runs whatever job rayon finds for it, and a span left in
//! a queue is a long one: gen9m at `--jobs 4` on this project's VM, the tiles took 0.94 s
//! instead of ~0.3 s, a third of the pass run on their thread (instrumented); on the device's
//! host at 8 threads the tiles took 0.71 s, likely the same.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

thread_local! {
    static ELSEWHERE: Cell<bool> = const { Cell::new(false) };
}

/// Held by a thread while it does other long work: it takes no job of [`take_each`] meanwhile.
pub struct Elsewhere(());

impl Elsewhere {
    pub fn start() -> Elsewhere {
        ELSEWHERE.set(true);
        Elsewhere(())
    }
}

impl Drop for Elsewhere {
    fn drop(&mut self) {
        ELSEWHERE.set(false);
    }
}

/// `run` of every item, on the pool's threads (each taking the next item until none is left,
/// none while it holds [`Elsewhere`]); what no thread took runs here. In the items' order.
pub fn take_each<I: Send, T: Send>(items: Vec<I>, run: impl Fn(I) -> T + Sync) -> Vec<T> {
    let n = items.len();
    let todo: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let done: Vec<Mutex<Option<T>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    // A taker for every thread, however few the items: one that a busy thread found ends at
    // once, and another is left for the next thread that comes free.
    (0..rayon::current_num_threads()).into_par_iter().with_max_len(1).for_each(|_| {
        while !ELSEWHERE.get() {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = todo.get(i).and_then(take) else { break };
            #[cfg(test)]
            TAKEN.set(TAKEN.get() + 1);
            let out = run(item);
            *done[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(out);
        }
    });
    let left =
        |(d, t): (&Mutex<Option<T>>, &Mutex<Option<I>>)| take(d).unwrap_or_else(|| run(take(t).expect("taken once")));
    done.iter().zip(&todo).map(left).collect()
}

fn take<X>(m: &Mutex<Option<X>>) -> Option<X> {
    m.lock().unwrap_or_else(PoisonError::into_inner).take()
}

#[cfg(test)]
thread_local! {
    /// Items this thread took in [`take_each`]'s loop (not its fallback).
    static TAKEN: Cell<usize> = const { Cell::new(0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
    }

    /// Every item runs once, in order, at any thread count; a thread holding `Elsewhere` takes
    /// none (on one thread the caller, busy, takes none in the loop: all run in the fallback).
    #[test]
    fn every_item_runs_once_and_a_busy_thread_takes_none() {
        let items: Vec<u64> = (0..40).collect();
        let want: Vec<u64> = items.iter().map(|i| i * 3).collect();
        for threads in [1, 2, 4] {
            for busy in [false, true] {
                let (outs, taken) = pool(threads).install(|| {
                    let _busy = busy.then(Elsewhere::start);
                    let outs = take_each(items.clone(), |i| i * 3);
                    (outs, TAKEN.get())
                });
                assert_eq!(outs, want, "{threads} threads, busy {busy}");
                if busy {
                    assert_eq!(taken, 0, "{threads} threads: the busy caller took items");
                }
                if threads == 1 && !busy {
                    assert_eq!(taken, items.len());
                }
            }
        }
    }
}
