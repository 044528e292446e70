//! The worker's side of the driver: when a running worker fires timers and polls the
//! reactor, and whom it wakes for what that delivers. (Parking in the reactor is part of
//! `park`, in `run`.)
//!
//! # When a worker polls
//! A worker that runs out of work takes the driver if it is free and parks in the
//! reactor (see `io` for that protocol): one blocking poll that returns at once with the
//! events already waiting. A running worker polls the reactor without blocking only once
//! every [`IO_POLL_INTERVAL`] (64) polls (`maintain_driver`, at a budget tick's start or
//! within the tick), so that events are still collected while every worker stays busy;
//! due timers are fired at the start of every tick. Polling the reactor at every tick
//! would cost an `epoll_wait(0)` for every few requests under an HTTP load, many of them
//! finding nothing, where blocking polls collect the events in batches. Timer and I/O
//! wakes are dispatched on the worker's own thread, so the woken tasks land in its LIFO
//! slot and ring.
//!
//! # Waking others after a dispatch
//! While a worker delivers a batch of driver wakes (`dispatch_driver`), `schedule_local`
//! does not call `notify_parked` for each task. Once the batch is queued, the worker wakes
//! one parked worker if more than one task is queued here (the LIFO slot and the ring
//! together) and it is not itself searching (then the last searcher's wake covers it).
//! That is the per-push rule's outcome (the first task fills the slot, the second pushes
//! one into the ring and notifies) with one decision per batch instead of a fence and a
//! check per task. A single task needs nobody else: this worker runs it next. With two
//! or more, all but the one in the slot sit in the ring, where the woken worker steals
//! them, so none waits behind a long poll of the first.

use super::worker::Worker;
use crate::scheduler::handle::Handle;
use std::time::{Duration, Instant};

/// Polls a running worker makes between two non-blocking reactor polls of its own. A
/// worker that runs out of work polls the reactor anyway, blocking, on its way to park.
pub(crate) const IO_POLL_INTERVAL: u32 = 64;

impl Handle {
    /// The non-blocking driver pass, run from the loop so timers and I/O make progress
    /// while every worker stays busy:
    /// at the start of every tick for due timers, and whenever [`IO_POLL_INTERVAL`] polls
    /// have run since this worker last polled the reactor, at a tick's start or within it.
    /// An atomic load and a compare when there is nothing to do.
    pub(super) fn maintain_driver(&self, w: &Worker, now: Instant) {
        let core = &w.core;
        let io_due = self.io_poll_due(w);
        if !io_due && !self.driver.time.is_due(now) {
            return;
        }
        let Some(mut d) = self.driver.try_lock() else { return };
        if io_due {
            core.last_io_poll.set(core.tick.get());
            self.driver.poll_io(&mut d, Some(Duration::ZERO));
        }
        self.dispatch_driver(w, &mut d, now);
        drop(d);
        // A system call and timer work: not part of the next poll's time.
        self.metrics.refresh_clock(&w.rec);
    }

    /// Whether this worker has run `IO_POLL_INTERVAL` polls since it last polled the
    /// reactor, and anything is registered to poll for.
    #[inline]
    pub(super) fn io_poll_due(&self, w: &Worker) -> bool {
        w.core.tick.get().wrapping_sub(w.core.last_io_poll.get()) >= IO_POLL_INTERVAL && self.driver.has_io_sources()
    }

    /// Deliver what the driver holds (polled events, due timers) into this worker's own
    /// queues, then wake one parked worker if more than one task is queued here: this
    /// worker runs the first itself, and the rest must be visible to a thief that is
    /// awake, in case that first one polls for long. One decision for the batch instead
    /// of one per woken task (see "Waking others after a dispatch").
    pub(super) fn dispatch_driver(&self, w: &Worker, d: &mut crate::reactor::DriverCore, now: Instant) {
        w.core.dispatching.set(true);
        self.driver.dispatch(d, now, |c| self.metrics.on_dispatched(&w.rec, c.io_events, c.timers_fired));
        w.core.dispatching.set(false);
        let queued_here = w.lifo.peek().is_some() as u32 + w.queue.len();
        self.idle.notify_after_batch(queued_here, w.core.is_searching.get(), |i| self.unpark_worker(i));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn busy_workers_still_poll_the_reactor() {
        // Four tasks that yield forever keep both workers busy, so neither runs out of
        // work and parks in the reactor. A socket's readiness must reach its task all the
        // same: a running worker polls the reactor every `IO_POLL_INTERVAL` polls.
        use futures::AsyncReadExt;
        use std::io::Write;
        use std::sync::atomic::Ordering::SeqCst;
        let rt = crate::runtime::Builder::new().worker_threads(2).build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..4 {
            let stop = stop.clone();
            rt.spawn(async move {
                while !stop.load(SeqCst) {
                    crate::task::yield_now().await;
                }
            });
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let mut s = crate::net::TcpStream::connect(addr).await.unwrap();
            let mut byte = [0u8; 1];
            s.read_exact(&mut byte).await.unwrap();
            tx.send(byte[0]).unwrap();
        });
        let (mut peer, _) = listener.accept().unwrap();
        peer.write_all(&[42]).unwrap();
        // A bound only so that a reactor nobody polls fails the test instead of hanging it.
        let got = rx.recv_timeout(Duration::from_secs(60));
        stop.store(true, SeqCst);
        assert_eq!(got, Ok(42), "the read never completed while the workers stayed busy");
    }
}
