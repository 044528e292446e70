//! [`DelayQueue`]: values that come out once their deadline has passed, on Volt's timer.

use futures_core::Stream;
use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use volt::time::{Instant, Sleep};

/// Names a value in a [`DelayQueue`] until it comes out or is removed (after which the
/// key may name a later value).
#[derive(Debug, Clone, Copy, Hash, Eq, PartialEq)]
pub struct Key {
    index: usize,
}

/// A value out of a [`DelayQueue`], with its deadline and key.
#[derive(Debug)]
pub struct Expired<T> {
    data: T,
    deadline: Instant,
    key: Key,
}

impl<T> Expired<T> {
    /// The value.
    pub fn get_ref(&self) -> &T {
        &self.data
    }

    /// The value, to change it.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.data
    }

    /// The value, taken out.
    pub fn into_inner(self) -> T {
        self.data
    }

    /// When it was due.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The key it had in the queue.
    pub fn key(&self) -> Key {
        self.key
    }
}

/// A value in the queue, with its key and deadline.
struct Entry<T> {
    data: T,
    when: Instant,
    /// Its place among values of one deadline (insertion or reset order).
    seq: u64,
    key: usize,
}

/// A queue of values that each come out at a deadline (tokio-util's `DelayQueue`, on
/// Volt's timer): [`insert`](DelayQueue::insert) a value with a timeout, and the queue,
/// polled as a `Stream` or through [`poll_expired`](DelayQueue::poll_expired), gives it
/// back once the timeout has passed, earliest deadline first. A value can be removed or
/// given a new deadline through its key meanwhile. The stream ends (`None`) whenever the
/// queue is empty; a later insert wakes the task that polled it.
///
/// Its one timer is made at the first poll, which must be inside a Volt runtime. A
/// deadline any distance ahead is accepted (tokio-util's panics beyond about two years);
/// one too far for the clock to hold waits for good.
pub struct DelayQueue<T> {
    /// The values, packed: a removal moves the last one into the hole, so the memory
    /// held is what `capacity` says, and `compact` gives back all that is unused.
    entries: Vec<Entry<T>>,
    /// Each key's place in `entries` (`None`: a free key).
    keys: Vec<Option<usize>>,
    /// Free keys, reused last-freed first.
    free_keys: Vec<usize>,
    /// The keys by deadline, then by `seq`.
    order: BTreeSet<(Instant, u64, usize)>,
    next_seq: u64,
    /// The timer, set to the earliest deadline while the queue waits for it.
    sleep: Option<Pin<Box<Sleep>>>,
    /// The task that polled last, woken when an insert or reset brings a deadline
    /// forward, or when the queue is emptied by hand.
    waker: Option<Waker>,
}

impl<T> DelayQueue<T> {
    /// An empty queue.
    pub fn new() -> DelayQueue<T> {
        DelayQueue::with_capacity(0)
    }

    /// An empty queue with room for `capacity` values.
    pub fn with_capacity(capacity: usize) -> DelayQueue<T> {
        DelayQueue {
            entries: Vec::with_capacity(capacity),
            keys: Vec::new(),
            free_keys: Vec::new(),
            order: BTreeSet::new(),
            next_seq: 0,
            sleep: None,
            waker: None,
        }
    }

    /// Add `value`, due at `when`; returns its key.
    #[track_caller]
    pub fn insert_at(&mut self, value: T, when: Instant) -> Key {
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = match self.free_keys.pop() {
            Some(k) => k,
            None => {
                self.keys.push(None);
                self.keys.len() - 1
            }
        };
        self.keys[key] = Some(self.entries.len());
        self.entries.push(Entry { data: value, when, seq, key });
        self.order.insert((when, seq, key));
        self.wake_if_first(key);
        Key { index: key }
    }

    /// Add `value`, due `timeout` from now; returns its key.
    #[track_caller]
    pub fn insert(&mut self, value: T, timeout: Duration) -> Key {
        self.insert_at(value, after(timeout))
    }

    /// The next value whose deadline has passed, or a wait for one; `Ready(None)` when
    /// the queue is empty.
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
        loop {
            let Some(&(when, _, key)) = self.order.first() else {
                self.sleep = None;
                return Poll::Ready(None);
            };
            // Due by the clock, or by the timer that fired for it (a timer fires at the
            // first millisecond tick at or after its deadline).
            let fired = self.sleep.as_ref().is_some_and(|s| s.deadline() >= when && s.is_elapsed());
            if when <= Instant::now() || fired {
                return Poll::Ready(Some(self.take(key)));
            }
            match &mut self.sleep {
                Some(sleep) => {
                    if sleep.deadline() != when {
                        sleep.as_mut().reset(when);
                    }
                }
                None => self.sleep = Some(Box::pin(volt::time::sleep_until(when))),
            }
            let sleep = self.sleep.as_mut().expect("just set");
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    /// The entry of `key`, if it names a value in the queue.
    fn entry(&self, key: &Key) -> Option<&Entry<T>> {
        let at = (*self.keys.get(key.index)?)?;
        Some(&self.entries[at])
    }

    /// When the value of `key` is due.
    ///
    /// # Panics
    /// If `key` names no value in the queue.
    #[track_caller]
    pub fn deadline(&self, key: &Key) -> Instant {
        self.entry(key).expect("invalid key").when
    }

    /// Take the value of `key` out.
    ///
    /// # Panics
    /// If `key` names no value in the queue.
    #[track_caller]
    pub fn remove(&mut self, key: &Key) -> Expired<T> {
        self.try_remove(key).expect("invalid key")
    }

    /// Take the value of `key` out, if it is there.
    pub fn try_remove(&mut self, key: &Key) -> Option<Expired<T>> {
        self.entry(key)?;
        let out = self.take(key.index);
        if self.order.is_empty() {
            // A task waiting for it must learn that the queue is empty now.
            self.wake();
        }
        Some(out)
    }

    /// Make the value of `key` due at `when` instead.
    ///
    /// # Panics
    /// If `key` names no value in the queue.
    #[track_caller]
    pub fn reset_at(&mut self, key: &Key, when: Instant) {
        let at = self.keys.get(key.index).copied().flatten().expect("invalid key");
        let seq = self.next_seq;
        self.next_seq += 1;
        let e = &mut self.entries[at];
        self.order.remove(&(e.when, e.seq, key.index));
        (e.when, e.seq) = (when, seq);
        self.order.insert((when, seq, key.index));
        self.wake_if_first(key.index);
    }

    /// Make the value of `key` due `timeout` from now instead.
    ///
    /// # Panics
    /// If `key` names no value in the queue.
    #[track_caller]
    pub fn reset(&mut self, key: &Key, timeout: Duration) {
        self.reset_at(key, after(timeout));
    }

    /// The key of the value due first.
    pub fn peek(&self) -> Option<Key> {
        self.order.first().map(|&(_, _, index)| Key { index })
    }

    /// Remove every value.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.keys.clear();
        self.free_keys.clear();
        self.order.clear();
        self.sleep = None;
        self.wake();
    }

    /// Values it can hold without allocating.
    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Values in the queue.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Make room for `additional` more values.
    ///
    /// # Panics
    /// If the memory cannot be had (a panic that names the call, rather than the
    /// allocator's abort of the process).
    #[track_caller]
    pub fn reserve(&mut self, additional: usize) {
        if let Err(e) = self.entries.try_reserve(additional) {
            panic!("DelayQueue::reserve({additional}): {e}");
        }
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Give back the memory the values do not use (keys stay valid).
    pub fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
    }

    /// Give back the memory the values and free keys do not use (keys stay valid).
    pub fn compact(&mut self) {
        while matches!(self.keys.last(), Some(None)) {
            self.keys.pop();
        }
        let n = self.keys.len();
        self.free_keys.retain(|&k| k < n);
        self.entries.shrink_to_fit();
        self.keys.shrink_to_fit();
        self.free_keys.shrink_to_fit();
    }

    /// Take the value of `key` (which is in the queue) out.
    fn take(&mut self, key: usize) -> Expired<T> {
        let at = self.keys[key].take().expect("a queued key has an entry");
        let e = self.entries.swap_remove(at);
        if let Some(moved) = self.entries.get(at) {
            self.keys[moved.key] = Some(at);
        }
        self.order.remove(&(e.when, e.seq, key));
        self.free_keys.push(key);
        Expired { data: e.data, deadline: e.when, key: Key { index: key } }
    }

    /// An insert or reset put `key` first: the polling task must set its timer again.
    fn wake_if_first(&self, key: usize) {
        if self.order.first().is_some_and(|&(_, _, k)| k == key) {
            self.wake();
        }
    }

    fn wake(&self) {
        if let Some(w) = &self.waker {
            w.wake_by_ref();
        }
    }
}

/// `now + d`, or as far ahead as the clock goes for a `d` too large to add.
fn after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d).unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

impl<T> Default for DelayQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Unpin for DelayQueue<T> {}

impl<T> Stream for DelayQueue<T> {
    type Item = Expired<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.get_mut().poll_expired(cx)
    }
}

impl<T: fmt::Debug> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.entries.iter().map(|e| (Key { index: e.key }, e.when, &e.data));
        f.debug_list().entries(values).finish()
    }
}
