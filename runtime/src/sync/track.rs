//! Named waits of the sync primitives, and the registry a reader resolves them through.
//!
//! A waiting task's record holds a compact reference, never a pointer: a tag (which
//! primitive, which operation) and the primitive's resource id (see
//! `task::wait::record_sync`). What a reader wants beside it (who holds the lock now,
//! how many permits are free, how many tasks reached a barrier) changes after the wait
//! was recorded, so it is not in the record: it is in the primitive's [`Probe`], which
//! the primitive keeps current under its waiter mutex and which this registry shares
//! with the reader. The registry owns a reference to each probe, so a reader never
//! follows a pointer into a primitive that moved or was freed; the primitive removes its
//! entry when it is dropped.
//!
//! A primitive gets a probe (and an id) only when a task that keeps statistics waits on
//! it (`watching`): a program whose runtime records no events never allocates one, and
//! never takes the registry's lock. The probe is made with what never changes: the
//! primitive's kind (the tag of the wait that made it: every tag names one kind) and
//! where the primitive was created (its constructor is `#[track_caller]`).
//!
//! A later deadlock detector reads the same graph: task → resource (the record's id) →
//! holder ([`ProbeReading::holder`], a task id).

use std::collections::BTreeMap;
use std::panic::Location;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

// Tags: which primitive a task waits on, and for what. Stored in the record's slot head;
// telemetry decodes them (`tag_words`). New primitives (the channels) add theirs here.
/// `Mutex::lock` (and its owned and blocking forms).
pub(crate) const T_MUTEX_LOCK: u8 = 1;
/// `Semaphore::acquire` and its forms.
pub(crate) const T_SEM_ACQUIRE: u8 = 2;
/// `RwLock::read`.
pub(crate) const T_RW_READ: u8 = 3;
/// `RwLock::write`.
pub(crate) const T_RW_WRITE: u8 = 4;
/// `Notify::notified`.
pub(crate) const T_NOTIFIED: u8 = 5;
/// `Barrier::wait`.
pub(crate) const T_BARRIER: u8 = 6;
/// `OnceCell::get_or_init` behind another task's initialization.
pub(crate) const T_ONCE_INIT: u8 = 7;
// Reserved for the channels (`mpsc`, `oneshot`, `broadcast`, `watch`), which
// name their waits with labels for now: see [`Named`] for how to switch.
/// `mpsc::Receiver::recv`.
#[allow(dead_code)]
pub(crate) const T_MPSC_RECV: u8 = 8;
/// `mpsc::Sender::send` on a full bounded channel (probe: `free`/`total` = capacity).
#[allow(dead_code)]
pub(crate) const T_MPSC_SEND: u8 = 9;
/// `oneshot::Receiver`.
#[allow(dead_code)]
pub(crate) const T_ONESHOT_RECV: u8 = 10;
/// `broadcast::Receiver::recv`.
#[allow(dead_code)]
pub(crate) const T_BROADCAST_RECV: u8 = 11;
/// `watch::Receiver::changed`.
#[allow(dead_code)]
pub(crate) const T_WATCH_CHANGED: u8 = 12;

/// `SetOnce::wait`.
pub(crate) const T_SET_ONCE: u8 = 13;

/// The operation's word and the primitive's name for a tag.
pub(crate) fn tag_words(tag: u8) -> (&'static str, &'static str) {
    match tag {
        T_MUTEX_LOCK => ("lock", "Mutex"),
        T_SEM_ACQUIRE => ("acquire", "Semaphore"),
        T_RW_READ => ("read", "RwLock"),
        T_RW_WRITE => ("write", "RwLock"),
        T_NOTIFIED => ("notified", "Notify"),
        T_BARRIER => ("wait", "Barrier"),
        T_ONCE_INIT => ("init", "OnceCell"),
        T_MPSC_RECV => ("recv", "mpsc"),
        T_MPSC_SEND => ("send", "mpsc"),
        T_ONESHOT_RECV => ("recv", "oneshot"),
        T_BROADCAST_RECV => ("recv", "broadcast"),
        T_WATCH_CHANGED => ("changed", "watch"),
        T_SET_ONCE => ("wait", "SetOnce"),
        _ => ("wait", "sync"),
    }
}

/// Whether a tag's primitive has one holder at a time (the holder is worth naming).
pub(crate) fn is_exclusive(tag: u8) -> bool {
    matches!(tag, T_MUTEX_LOCK | T_RW_WRITE | T_ONCE_INIT)
}

/// Where a primitive was created: its constructor's caller, `None` for the `const`
/// constructors (`Location::caller` is not usable in a `const fn` on stable Rust).
pub(crate) type CreatedAt = Option<&'static Location<'static>>;

/// What a reader shows beside a wait on a primitive, kept current by the primitive.
#[derive(Default, Debug)]
pub(crate) struct Probe {
    /// The tag of the wait that made it: its primitive's kind (`tag_words(kind).1`).
    pub(crate) kind: u8,
    /// Where the primitive was created.
    pub(crate) created_at: CreatedAt,
    /// The task holding it alone (a mutex, a write lock, a cell's initializer): its id,
    /// [`OUTSIDE`] for a holder outside any task, 0 for none.
    pub(crate) holder: AtomicU64,
    /// Free permits (a semaphore, an `RwLock`'s reader slots).
    pub(crate) free: AtomicU64,
    /// All permits (a semaphore), readers allowed (an `RwLock`), parties (a barrier).
    pub(crate) total: AtomicU64,
    /// Readers holding an `RwLock`; tasks arrived at a barrier.
    pub(crate) aux: AtomicU64,
    /// Tasks waiting in its queue.
    pub(crate) waiters: AtomicU64,
}

/// The holder id of a lock taken outside any task (`blocking_lock`, a plain thread).
pub(crate) const OUTSIDE: u64 = u64::MAX;

/// A probe as read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProbeReading {
    pub(crate) kind: u8,
    pub(crate) created_at: CreatedAt,
    pub(crate) holder: u64,
    pub(crate) free: u64,
    pub(crate) total: u64,
    pub(crate) aux: u64,
    pub(crate) waiters: u64,
}

impl Probe {
    pub(crate) fn read(&self) -> ProbeReading {
        ProbeReading {
            kind: self.kind,
            created_at: self.created_at,
            holder: self.holder.load(Relaxed),
            free: self.free.load(Relaxed),
            total: self.total.load(Relaxed),
            aux: self.aux.load(Relaxed),
            waiters: self.waiters.load(Relaxed),
        }
    }
}

static REGISTRY: Mutex<BTreeMap<u64, Arc<Probe>>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn registry() -> std::sync::MutexGuard<'static, BTreeMap<u64, Arc<Probe>>> {
    // Nothing panics while holding it; a poisoned map is still consistent.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A primitive's registration: its resource id and probe, removed from the registry
/// when dropped (with the primitive).
#[derive(Debug)]
pub(crate) struct Tracked {
    pub(crate) id: u64,
    pub(crate) probe: Arc<Probe>,
}

impl Tracked {
    /// Register a new resource: its kind is the primitive of `tag` (any of its waits'
    /// tags will do), created at `created_at`.
    pub(crate) fn new(tag: u8, created_at: CreatedAt) -> Tracked {
        let id = NEXT_ID.fetch_add(1, Relaxed);
        let probe = Arc::new(Probe { kind: tag, created_at, ..Probe::default() });
        registry().insert(id, probe.clone());
        Tracked { id, probe }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        registry().remove(&self.id);
    }
}

/// A primitive's registration, made the first time a watched task waits on it: what a
/// channel (or any new primitive) keeps to name its waits the structured way.
///
/// Switching from a label: keep a `Named` beside the waiter list (under the same mutex),
/// and where the wait now calls `record_label("recv mpsc")` right before `Pending`, call
/// `named.record(T_MPSC_RECV)` instead (add a tag above, and its words in `tag_words`,
/// for a new kind of wait). To show figures with the wait, store them in the probe
/// `record` returns (and wherever they change, under that mutex, through
/// [`Named::probe`]): `free`/`total` show as `(0 of 32 free)` for `T_MPSC_SEND` (see
/// `telemetry::wait::SyncWait::read`), `holder` as `(held by task N "name")` for the
/// exclusive tags.
///
/// Give it the channel's creation place (`Named::new(Location::caller())` in a
/// `#[track_caller]` constructor) for the resources view to show.
#[derive(Debug, Default)]
pub(crate) struct Named(Option<Tracked>, CreatedAt);

#[allow(dead_code)]
impl Named {
    pub(crate) const fn new() -> Named {
        Named(None, None)
    }

    /// A `Named` for a primitive created at `at`.
    pub(crate) const fn created_at(at: &'static Location<'static>) -> Named {
        Named(None, Some(at))
    }

    /// Record a wait with `tag` for the task polled on this thread, registering the
    /// primitive the first time a watched task waits (an unwatched task pays a
    /// thread-local load). Returns the probe, to refresh, once registered.
    pub(crate) fn record(&mut self, tag: u8) -> Option<&Probe> {
        if self.0.is_none() && watching() {
            self.0 = Some(Tracked::new(tag, self.1));
        }
        let t = self.0.as_ref()?;
        record(tag, t.id);
        Some(&t.probe)
    }

    /// The probe, if a watched task has waited here.
    pub(crate) fn probe(&self) -> Option<&Probe> {
        self.0.as_ref().map(|t| &*t.probe)
    }
}

/// The current reading of resource `id`, if it still exists.
pub(crate) fn read(id: u64) -> Option<ProbeReading> {
    registry().get(&id).map(|p| p.read())
}

/// Up to `max` resources with ids above `after`, in id order, each with its reading:
/// one hold of the registry's lock, for a reader that pages through them (the console's
/// resources view, the deadlock detector).
pub(crate) fn read_range(after: u64, max: usize) -> Vec<(u64, ProbeReading)> {
    use std::ops::Bound::{Excluded, Unbounded};
    registry().range((Excluded(after), Unbounded)).take(max).map(|(id, p)| (*id, p.read())).collect()
}

/// How many resources have probes now.
pub(crate) fn count() -> usize {
    registry().len()
}

/// Whether the task polled on this thread keeps statistics (its waits are recorded).
#[inline]
pub(crate) fn watching() -> bool {
    crate::task::wait::watching()
}

/// Record a wait on resource `id` for the task polled on this thread.
#[inline]
pub(crate) fn record(tag: u8, id: u64) {
    crate::task::wait::record_sync(tag, id)
}

/// The id of the task polled on this thread, or [`OUTSIDE`].
#[inline]
pub(crate) fn current_task_id() -> u64 {
    crate::task::wait::current_task_id().unwrap_or(OUTSIDE)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_tracked_resource_is_readable_until_dropped() {
        let here = Location::caller();
        let t = Tracked::new(T_MUTEX_LOCK, Some(here));
        t.probe.holder.store(7, Relaxed);
        let r = read(t.id).unwrap();
        assert_eq!((r.holder, r.kind, r.created_at), (7, T_MUTEX_LOCK, Some(here)));
        let id = t.id;
        drop(t);
        assert_eq!(read(id), None);
    }
}
