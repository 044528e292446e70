//! The sync primitives tasks have waited on, as the console's resources view lists them
//! (`Telemetry::resources`).
//!
//! A primitive is listed from the first time a task that keeps statistics waits on it
//! (that is when it gets a probe, see `sync::track`) until it is dropped. Its kind and
//! where it was created are fixed when the probe is made.
//!
//! The figures are the probe's, which the primitive refreshes on every change once it
//! has one: when a task queues on it, leaves its queue or is handed it, and on an
//! uncontended acquire or release too. So a lock released with no waiter left shows no
//! holder, and the next holder shows as soon as it has taken it.

use super::Telemetry;
use crate::sync::track;
use std::panic::Location;

/// The most resources one [`Telemetry::resources`] call returns.
pub const MAX_RESOURCES: usize = 1000;

/// A sync primitive with a probe: what [`Telemetry::resources`] lists.
///
/// Listed from the first time a task that keeps statistics waits on it until it is
/// dropped. Its figures are kept current by the primitive (each acquire and release,
/// contended or not, refreshes them): a reading shows them as of a moment ago.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resource {
    /// Its resource id (as in [`SyncWait::resource`](super::SyncWait::resource)).
    pub id: u64,
    /// `Mutex`, `Semaphore`, `RwLock`, `Notify`, `Barrier` or `OnceCell` (`None` only
    /// for a kind this version does not name).
    pub kind: Option<&'static str>,
    /// Where it was created: the caller of its constructor (`Mutex::new`, ...); `None`
    /// for one made by a `const_new` constructor (`Location::caller` is not usable in a
    /// `const fn` on stable Rust).
    pub created_at: Option<&'static Location<'static>>,
    /// Who holds it alone (a `Mutex`, an `RwLock`'s writer, a `OnceCell`'s initializer).
    pub holder: Option<ResourceHolder>,
    /// Tasks queued on it.
    pub waiters: u64,
    /// Free permits (a `Semaphore`; an `RwLock`'s reader slots).
    pub free: u64,
    /// All permits (a `Semaphore`), readers allowed (an `RwLock`), parties (a `Barrier`).
    pub total: u64,
    /// Readers holding an `RwLock`, or tasks arrived at a `Barrier`.
    pub aux: u64,
}

/// Who holds a [`Resource`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResourceHolder {
    /// A task, by id.
    Task(u64),
    /// Code outside any task (`blocking_lock`, a plain thread).
    Outside,
}

impl Telemetry {
    /// The sync primitives that have probes (see [`Resource`]), by id, at most
    /// [`MAX_RESOURCES`] of them with ids above `after` (0: from the first): page through
    /// them with the last id returned. One short hold of the registry's lock; never
    /// blocks a worker.
    pub fn resources(&self, after: u64) -> Vec<Resource> {
        self.resources_page(after, MAX_RESOURCES)
    }

    /// Up to `max` resources after `after`.
    pub(crate) fn resources_page(&self, after: u64, max: usize) -> Vec<Resource> {
        track::read_range(after, max.min(MAX_RESOURCES))
            .into_iter()
            .map(|(id, p)| Resource {
                id,
                kind: match track::tag_words(p.kind).1 {
                    "sync" => None,
                    k => Some(k),
                },
                created_at: p.created_at,
                holder: match p.holder {
                    0 => None,
                    track::OUTSIDE => Some(ResourceHolder::Outside),
                    t => Some(ResourceHolder::Task(t)),
                },
                waiters: p.waiters,
                free: p.free,
                total: p.total,
                aux: p.aux,
            })
            .collect()
    }

    /// How many resources have probes now.
    pub fn resource_count(&self) -> usize {
        track::count()
    }
}
