//! Tokio's `sync::broadcast` channel: many senders, many receivers, and each receiver
//! sees every value sent while it lives, in order.
//!
//! # How it works
//! A ring of `capacity` slots (rounded up to a power of two, as Tokio does), each
//! guarded by one word of its own (`slot`), and one mutex for the tail (where the next
//! value goes, the counts, the waiters). A value takes the slot of its position, with a
//! count of the receivers that have yet to see it (those alive when it was sent); the
//! last of them drops it. A receiver keeps the position it reads next, clones the value
//! there and counts it as seen: one atomic operation on the slot's word, and none on
//! anything another receiver writes (see `slot` for why no lock is needed, and for the
//! one case, a sender overwriting a value a lagging receiver has yet to read, where
//! receivers enter the slot instead). Receivers that keep up read side by side and never
//! take the tail mutex; only a receiver that finds nothing for it (nothing new, lag,
//! close, a sender writing the slot) does, to learn which and to register its waker.
//! When senders get more than the capacity ahead of a receiver, its oldest values are
//! overwritten: its next `recv` returns [`RecvError::Lagged`](error::RecvError::Lagged)
//! with how many it missed, once, and then goes on from the oldest value still kept.
//! Receivers that wait keep one slot each in a reusable slab; a send takes their wakers
//! under the tail lock it already holds and wakes them after letting it go.
//!
//! Each receiver owns a mark (a word on lines of its own, allocated when it subscribes),
//! which it sets around each read that does not enter the slot.
//!
//! A receive that waits shows in the console as `recv broadcast`; [`Sender::closed`] as
//! `closed broadcast`.
//!
//! # Where it lives
//! This file holds the ring, the tail, the receivers' marks and the public types; `slot`
//! the slot, its word and the two ways to read it; `fence` the asymmetric fence between
//! a receiver's mark and a sender's flag; `sender` and `receiver` the methods, and
//! `error` the errors.

pub mod error;

mod fence;
mod receiver;
mod sender;
mod slot;

use crate::loom::{lock, Arc, AtomicBool, AtomicU64, Mutex, MutexGuard};
use crate::padded::CachePadded;
use crate::sync::waiters::{ClosedState, Waiters};
use slot::Slot;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

struct Shared<T> {
    // What every receive reads: the ring, its mask and the flag. Only the flag changes,
    // and rarely, so these lines stay in every reader's cache.
    slots: Box<[Slot<T>]>,
    mask: u64,
    /// Receivers enter each slot they read (see `slot`): a sender is overwriting values
    /// some receiver has yet to see, or the asymmetric fence is missing. Only senders
    /// change it, under the tail lock.
    careful: AtomicBool,
    fence: fence::Fence,
    /// On lines of its own: every send writes it.
    tail: CachePadded<Mutex<Tail>>,
}

/// A receiver's mark: `2 * position + 1` while it reads that position without entering
/// the slot, 0 otherwise. A careful sender about to overwrite a position waits until the
/// marks it saw reading it have changed. Both stores are `Release`: the sender may see
/// the next read's mark instead of the 0 before it, and must still learn from it that
/// the earlier clone is done.
struct Mark {
    word: CachePadded<AtomicU64>,
    /// Its place in `Tail::marks` (changed under the tail lock).
    index: std::sync::atomic::AtomicUsize,
}

/// Sends in a row that overwrote no value a receiver had yet to see, after which a
/// careful channel lets receivers read without entering again.
const CALM_SENDS: u32 = if cfg!(loom) { 1 } else { 1024 };

/// What the channel's mutex guards: where the next value goes, the counts, and the
/// waiters. Receivers take it only when the slot they read next holds no value for
/// them (nothing new, lag, close), so a receiver that keeps up never touches it.
struct Tail {
    /// The position of the next value sent.
    pos: u64,
    rx_count: usize,
    tx_count: usize,
    weak_count: usize,
    /// Receivers waiting for a value.
    waiters: Waiters,
    /// Waiters of `Sender::closed`.
    closed: Waiters,
    /// Every receiver's mark.
    marks: Vec<Arc<Mark>>,
    /// While careful: sends in a row that overwrote no value still to be seen.
    calm: u32,
    /// Reads without entering that were in flight when the channel turned careful, with
    /// the mark each had then (until it changes).
    in_flight: Vec<(Arc<Mark>, u64)>,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Tail> {
        lock(&self.tail)
    }

    fn slot(&self, pos: u64) -> &Slot<T> {
        &self.slots[(pos & self.mask) as usize]
    }

    fn capacity(&self) -> u64 {
        self.mask + 1
    }
}

/// A new receiver of `shared` at `next`, counted and with its mark listed (`tail` is
/// its locked tail).
///
/// # Panics
/// When the channel already has `u32::MAX` receivers.
fn add_receiver<T>(shared: &Arc<Shared<T>>, tail: &mut Tail, next: u64) -> Receiver<T> {
    assert!(tail.rx_count < slot::MAX_RECEIVERS, "broadcast channel: too many receivers");
    tail.rx_count += 1;
    let mark = Arc::new(Mark {
        word: CachePadded(AtomicU64::new(0)),
        index: std::sync::atomic::AtomicUsize::new(tail.marks.len()),
    });
    tail.marks.push(mark.clone());
    Receiver { shared: shared.clone(), next, key: None, mark }
}

impl<T> Shared<T> {
    /// Before a sender overwrites the value at position `old` that `remaining`
    /// receivers have yet to see (the tail lock held): the channel turns careful if some
    /// do (they lag, and may be reading it), and a careful channel calm for long enough
    /// stops being so. Waits for the receivers still reading `old` without entering.
    #[inline]
    fn before_overwrite(&self, tail: &mut Tail, old: u64, remaining: u64) {
        let careful = self.careful.load(Relaxed);
        if remaining > 0 {
            tail.calm = 0;
            if !careful {
                self.become_careful(tail);
            }
            if !tail.in_flight.is_empty() {
                wait_for_readers_of(tail, old);
            }
            return;
        }
        if careful {
            tail.calm += 1;
            if tail.calm >= CALM_SENDS && fence::available() {
                tail.calm = 0;
                tail.in_flight.clear();
                self.careful.store(false, Release);
            }
        }
    }

    /// From the fence on, every receiver enters the slots it reads. The reads in flight
    /// without entering are noted; a sender waits for one only before overwriting the
    /// value it reads, as a reader-writer lock per slot would make it (a wait for all of
    /// them, under the tail lock, would deadlock with a `Clone` that takes it).
    #[cold]
    fn become_careful(&self, tail: &mut Tail) {
        self.careful.store(true, Relaxed);
        // Each receiver's thread is now past its mark (seen below) or will see the flag.
        self.fence.heavy();
        let Tail { marks, in_flight, .. } = tail;
        in_flight.clear();
        for m in marks.iter() {
            let seen = m.word.load(Acquire);
            if seen & 1 == 1 {
                in_flight.push((m.clone(), seen));
            }
        }
    }
}

/// Forget the noted reads that have ended, and wait for those of position `old` (the
/// tail lock held). Such a read clones the value and counts it; it waits for nothing,
/// unless its `Clone` does, as a reader inside a slot's lock would.
#[cold]
fn wait_for_readers_of(tail: &mut Tail, old: u64) {
    tail.in_flight.retain(|(m, seen)| {
        let mut cur = m.word.load(Acquire);
        if cur == *seen && *seen >> 1 == old {
            let mut spins = 0;
            while cur == *seen {
                slot::backoff(&mut spins);
                cur = m.word.load(Acquire);
            }
        }
        cur == *seen
    });
}

/// Take a dropped receiver's mark off the list (the tail lock held).
fn remove_mark(tail: &mut Tail, mark: &Arc<Mark>) {
    let i = mark.index.load(Relaxed);
    debug_assert!(Arc::ptr_eq(&tail.marks[i], mark));
    tail.marks.swap_remove(i);
    if let Some(moved) = tail.marks.get(i) {
        moved.index.store(i, Relaxed);
    }
}

impl ClosedState for Tail {
    const CLOSED_LABEL: &'static str = "closed broadcast";

    fn rx_gone(&self) -> bool {
        self.rx_count == 0
    }

    fn closed_waiters(&mut self) -> &mut Waiters {
        &mut self.closed
    }
}

/// A channel that keeps the last `capacity` values (rounded up to a power of two) for
/// receivers that fall behind.
///
/// # Panics
/// When `capacity` is 0 or larger than `usize::MAX / 2`.
#[track_caller]
pub fn channel<T: Clone>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    assert!(capacity > 0, "broadcast channel capacity cannot be zero");
    assert!(capacity <= usize::MAX >> 1, "broadcast channel capacity exceeded `usize::MAX / 2`");
    let cap = capacity.next_power_of_two();
    // A slot never written holds a position no receiver reads (from 2^64 - cap - 1 up,
    // short of `u64::MAX`, which marks a slot being written).
    let slots = (0..cap).map(|i| Slot::new((i as u64).wrapping_sub(cap as u64).wrapping_sub(1))).collect();
    let shared = Arc::new(Shared {
        slots,
        tail: CachePadded(Mutex::new(Tail {
            pos: 0,
            rx_count: 0,
            tx_count: 1,
            weak_count: 0,
            waiters: Waiters::default(),
            closed: Waiters::default(),
            marks: Vec::new(),
            calm: 0,
            in_flight: Vec::new(),
        })),
        mask: cap as u64 - 1,
        careful: AtomicBool::new(!fence::available()),
        fence: fence::Fence::default(),
    });
    let rx = add_receiver(&shared, &mut shared.lock(), 0);
    (Sender { shared }, rx)
}

/// Sends values to every receiver; clone it for more producers.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// Receives every value sent while it lives, in order.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// The position it reads next.
    next: u64,
    /// Its slot among the waiters, once it has waited.
    key: Option<usize>,
    /// Its mark (only this receiver writes it).
    mark: Arc<Mark>,
}

/// A sender that does not keep the channel open: [`upgrade`](WeakSender::upgrade) it
/// while a [`Sender`] lives.
pub struct WeakSender<T> {
    shared: Arc<Shared<T>>,
}

#[cfg(all(loom, test))]
mod loom_tests;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::channel;
    use super::error::TryRecvError;
    use std::sync::Arc;

    /// A value whose clone panics counts as seen by that receiver, once: used again, the
    /// receiver goes on to the next value, and the other receiver still gets the first
    /// (counting it twice would drop it before that receiver saw it).
    #[test]
    fn a_clone_that_panics_counts_the_value_as_seen_once() {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        struct Touchy(u64, Arc<AtomicBool>, Arc<()>);
        impl Clone for Touchy {
            fn clone(&self) -> Self {
                if self.1.swap(false, Relaxed) {
                    panic!("this clone panics");
                }
                Touchy(self.0, self.1.clone(), self.2.clone())
            }
        }
        let live = Arc::new(());
        let (tx, mut a) = channel::<Touchy>(4);
        let mut b = tx.subscribe();
        let panics = Arc::new(AtomicBool::new(false));
        tx.send(Touchy(0, panics.clone(), live.clone())).unwrap();
        tx.send(Touchy(1, panics.clone(), live.clone())).unwrap();
        panics.store(true, Relaxed);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.try_recv()));
        assert!(r.is_err(), "the clone panicked");
        assert_eq!(a.try_recv().ok().map(|v| v.0), Some(1), "a goes on to the next value");
        assert_eq!(b.try_recv().ok().map(|v| v.0), Some(0), "b still gets the first");
        assert_eq!(b.try_recv().ok().map(|v| v.0), Some(1));
        assert!(matches!(a.try_recv(), Err(TryRecvError::Empty)));
        assert_eq!(Arc::strong_count(&live), 1, "both values went once both receivers saw them");
    }

    /// A value whose `Clone` uses the channel: it takes the tail lock (another thread's
    /// send is waiting under it meanwhile), or sends on the channel itself, while a
    /// lagging receiver makes that send overwrite a value it has yet to see. A sender
    /// waits only for reads of the position it overwrites, so neither deadlocks; each
    /// case runs on a thread of its own and must end within 10 s.
    #[test]
    #[cfg_attr(miri, ignore)] // sleeps, to order the threads
    fn a_clone_that_uses_the_channel_does_not_deadlock_a_send() {
        use super::error::TryRecvError;
        use std::sync::mpsc as std_mpsc;
        use std::sync::Mutex;
        use std::time::Duration;

        #[derive(Default)]
        struct Hook {
            /// Told when the clone has begun.
            started: Mutex<Option<std_mpsc::Sender<()>>>,
            /// A weak sender whose count the clone reads (under the tail lock).
            weak: Mutex<Option<super::WeakSender<V>>>,
            /// A sender the clone sends on.
            send: Mutex<Option<super::Sender<V>>>,
        }
        struct V(u64, Option<Arc<Hook>>);
        impl Clone for V {
            fn clone(&self) -> Self {
                if let Some(h) = &self.1 {
                    if let Some(tx) = h.started.lock().unwrap().take() {
                        tx.send(()).unwrap();
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    if let Some(w) = h.weak.lock().unwrap().take() {
                        assert_eq!(w.strong_count(), 1);
                    }
                    if let Some(s) = h.send.lock().unwrap().take() {
                        s.send(V(99, None)).unwrap();
                    }
                }
                V(self.0, None)
            }
        }
        let within = |f: Box<dyn FnOnce() + Send>| {
            let (done_tx, done_rx) = std_mpsc::channel();
            std::thread::spawn(move || {
                f();
                done_tx.send(()).unwrap();
            });
            done_rx.recv_timeout(Duration::from_secs(10)).expect("no deadlock within 10 s");
        };

        // Another thread's send waits under the tail lock while the clone takes it.
        within(Box::new(|| {
            let (tx, mut a) = channel::<V>(2);
            let _lagging = tx.subscribe();
            let hook = Arc::new(Hook::default());
            let (started_tx, started_rx) = std_mpsc::channel();
            *hook.started.lock().unwrap() = Some(started_tx);
            *hook.weak.lock().unwrap() = Some(tx.downgrade());
            tx.send(V(0, None)).unwrap();
            tx.send(V(1, Some(hook))).unwrap();
            assert_eq!(a.try_recv().ok().map(|v| v.0), Some(0));
            let reader = std::thread::spawn(move || a.try_recv().ok().map(|v| v.0));
            started_rx.recv().unwrap();
            // Overwrites position 0, which `_lagging` has yet to see.
            tx.send(V(2, None)).unwrap();
            assert_eq!(reader.join().unwrap(), Some(1));
        }));

        // The clone sends on the channel, overwriting a value another receiver lags on.
        within(Box::new(|| {
            let (tx, mut a) = channel::<V>(2);
            let _lagging = tx.subscribe();
            let hook = Arc::new(Hook::default());
            *hook.send.lock().unwrap() = Some(tx.clone());
            tx.send(V(0, None)).unwrap();
            tx.send(V(1, Some(hook))).unwrap();
            assert_eq!(a.try_recv().ok().map(|v| v.0), Some(0));
            assert_eq!(a.try_recv().ok().map(|v| v.0), Some(1));
            assert_eq!(a.try_recv().ok().map(|v| v.0), Some(99), "the clone's send arrived");
            assert!(matches!(a.try_recv(), Err(TryRecvError::Empty)));
        }));
    }

    /// Receivers on threads of their own read a ring of two with `try_recv` while a
    /// sender overruns it: reads without entering, careful reads, and the switches
    /// between them (under Miri too, which checks that no clone races a write). Each
    /// receiver sees increasing values, each value received or counted in one lag,
    /// and every value is dropped once.
    #[test]
    fn threads_that_lag_and_keep_up_account_for_every_value() {
        const VALUES: u64 = if cfg!(miri) { 60 } else { 20_000 };
        let live = Arc::new(());
        let (tx, rx) = channel::<(u64, Arc<()>)>(2);
        let rxs = vec![rx, tx.subscribe()];
        let readers: Vec<_> = rxs
            .into_iter()
            .map(|mut rx| {
                std::thread::spawn(move || {
                    let (mut expect, mut got) = (0u64, 0u64);
                    loop {
                        match rx.try_recv() {
                            Ok((n, _)) => {
                                assert_eq!(n, expect, "in order, none skipped without a lag");
                                expect += 1;
                                got += 1;
                            }
                            Err(TryRecvError::Lagged(n)) => expect += n,
                            Err(TryRecvError::Empty) => std::thread::yield_now(),
                            Err(TryRecvError::Closed) => return (expect, got),
                        }
                    }
                })
            })
            .collect();
        for n in 0..VALUES {
            tx.send((n, live.clone())).unwrap();
            if n % 16 == 0 {
                std::thread::yield_now();
            }
        }
        drop(tx);
        for r in readers {
            let (accounted, got) = r.join().unwrap();
            assert_eq!(accounted, VALUES, "each value received or counted as missed");
            assert!(got >= 1, "the last value is never overwritten");
        }
        assert_eq!(Arc::strong_count(&live), 1, "every value was dropped once");
    }
}
