//! The global injection queue: an intrusive singly-linked list (no allocation per push)
//! through `Header::queue_next`, under a mutex, with an atomic length so that emptiness
//! checks never take the lock.
//!
//! Tasks arrive here from threads that are not workers, from a worker that is
//! transitioning to park, and as 128-task overflow batches from a full local queue
//! (one lock for the whole batch). Workers take batches (`pop_n`, one lock per batch).
//! After `close` (shutdown), pushes are refused and the caller drops the entry; runtime
//! shutdown cancels such tasks through the owned-task list.

use crate::loom::{lock, AtomicUsize, Mutex};
use crate::task::header::Header;
use crate::task::notified::Notified;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Release};

pub(crate) struct Inject<S: 'static> {
    list: Mutex<List>,
    /// Written under the lock, read without it.
    len: AtomicUsize,
    _scheduler: PhantomData<S>,
}

struct List {
    head: Option<NonNull<Header>>,
    tail: Option<NonNull<Header>>,
    closed: bool,
}

// SAFETY: the list's pointers are queue references to `Send` tasks, only followed under
// the mutex.
unsafe impl Send for List {}

/// A chain of tasks linked through `queue_next`, built outside the lock.
pub(crate) struct Batch {
    head: Option<NonNull<Header>>,
    tail: Option<NonNull<Header>>,
    len: usize,
}

impl Batch {
    pub(crate) fn new() -> Batch {
        Batch { head: None, tail: None, len: 0 }
    }

    /// Append a queue entry (taking its reference).
    pub(crate) fn push<S>(&mut self, task: Notified<S>) {
        let ptr = task.into_raw();
        // SAFETY: the batch owns this entry; nobody else links it.
        unsafe { ptr.as_ref().queue_next.with_mut(|n| *n = None) };
        match self.tail {
            // SAFETY: `tail` is an entry this batch owns.
            Some(t) => unsafe { t.as_ref().queue_next.with_mut(|n| *n = Some(ptr)) },
            None => self.head = Some(ptr),
        }
        self.tail = Some(ptr);
        self.len += 1;
    }
}

impl<S: 'static> Inject<S> {
    pub(crate) fn new() -> Inject<S> {
        Inject {
            list: Mutex::new(List { head: None, tail: None, closed: false }),
            len: AtomicUsize::new(0),
            _scheduler: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Acquire)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Push one entry. Returns it back if the queue is closed.
    pub(crate) fn push(&self, task: Notified<S>) -> Result<(), Notified<S>> {
        let mut b = Batch::new();
        b.push(task);
        self.push_batch(b).map_err(|mut b| {
            let raw = b.head.take().expect("one entry");
            b.len = 0;
            // SAFETY: the batch owned the entry's reference.
            unsafe { Notified::from_raw(raw) }
        })
    }

    /// Push a chain with one lock. Returns it back if the queue is closed.
    pub(crate) fn push_batch(&self, batch: Batch) -> Result<(), Batch> {
        let (Some(head), Some(tail)) = (batch.head, batch.tail) else { return Ok(()) };
        let mut list = lock(&self.list);
        if list.closed {
            return Err(batch);
        }
        match list.tail {
            // SAFETY: under the lock; `t` is linked in this list.
            Some(t) => unsafe { t.as_ref().queue_next.with_mut(|n| *n = Some(head)) },
            None => list.head = Some(head),
        }
        list.tail = Some(tail);
        self.len.store(self.len.load(Acquire) + batch.len, Release);
        // The list owns the entries now; the batch must not release them.
        std::mem::forget(batch);
        Ok(())
    }

    /// Pop up to `n` entries with one lock, calling `f` for each in FIFO order.
    /// Returns how many were popped.
    pub(crate) fn pop_n(&self, n: usize, mut f: impl FnMut(Notified<S>)) -> usize {
        if self.is_empty() || n == 0 {
            return 0;
        }
        let (first, count) = {
            let mut list = lock(&self.list);
            let first = list.head;
            let mut cur = first;
            let mut count = 0;
            while count < n {
                let Some(t) = cur else { break };
                // SAFETY: under the lock; `t` is linked in this list.
                cur = unsafe { t.as_ref().queue_next.with(|n| *n) };
                count += 1;
            }
            list.head = cur;
            if cur.is_none() {
                list.tail = None;
            }
            self.len.store(self.len.load(Acquire) - count, Release);
            (first, count)
        };
        // Walk the detached chain outside the lock.
        let mut cur = first;
        for _ in 0..count {
            let t = cur.expect("chain length");
            // SAFETY: the detached chain is ours alone now.
            cur = unsafe { t.as_ref().queue_next.with(|n| *n) };
            // SAFETY: each entry carries its queue reference.
            f(unsafe { Notified::from_raw(t) });
        }
        count
    }

    pub(crate) fn pop(&self) -> Option<Notified<S>> {
        let mut out = None;
        self.pop_n(1, |t| out = Some(t));
        out
    }

    /// Refuse further pushes (shutdown). Entries already queued stay until popped.
    pub(crate) fn close(&self) {
        lock(&self.list).closed = true;
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // A refused batch (queue closed): release every entry's reference.
        let mut cur = self.head.take();
        for _ in 0..self.len {
            let Some(t) = cur else { break };
            // SAFETY: the batch owns its entries.
            cur = unsafe { t.as_ref().queue_next.with(|n| *n) };
            // SAFETY: each entry carries a queue reference; dropping a `Task` releases it.
            drop(unsafe { Notified::<()>::from_raw(t) });
        }
    }
}
