//! The sync primitives tasks have waited on, as the console's resources view lists them
//! (`Telemetry::resources`).
//!
//! A primitive is listed from the first time a task that keeps statistics waits on it
//! (that is when it gets a probe, see `sync::track`) until it is dropped. Its kind is
//! known once a reading of the deadlock detector saw a task wait on it (the probe itself
//! does not say); where it was created is not recorded.
//!
//! The figures are the probe's: the primitive refreshes them whenever a task queues on
//! it, leaves its queue or is handed it, not on an uncontended acquire or release. So
//! while tasks wait on it they are current; once none does, they are as of the last
//! waiter (a lock released since without contention may still show its last holder).

use super::Telemetry;
use crate::sync::track;

/// The most resources one [`Telemetry::resources`] call returns.
pub const MAX_RESOURCES: usize = 1000;

/// A sync primitive with a probe: what [`Telemetry::resources`] lists.
///
/// Listed from the first time a task that keeps statistics waits on it until it is
/// dropped. Its figures are refreshed whenever a task queues on it, leaves its queue or
/// is handed it, not on an uncontended acquire or release: current while tasks wait on
/// it, and with no waiter as of the last one (a lock released since without contention
/// may still show its last holder).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resource {
    /// Its resource id (as in [`SyncWait::resource`](super::SyncWait::resource)).
    pub id: u64,
    /// `Mutex`, `Semaphore`, `RwLock`, `Notify`, `Barrier` or `OnceCell`; `None` until a
    /// reading of the wait graph (a [`Telemetry::deadlocks`] call, the console) saw a
    /// task wait on it.
    pub kind: Option<&'static str>,
    /// Who holds it alone (a `Mutex`, an `RwLock`'s writer, a `OnceCell`'s initializer).
    /// Current while tasks wait on it; with no waiter, as of the last one.
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
        let page = track::read_range(after, max.min(MAX_RESOURCES));
        let kinds = match &self.shared.recorder {
            Some(r) => r.deadlocks.kinds(page.iter().map(|(id, _)| *id)),
            None => vec![None; page.len()],
        };
        page.into_iter()
            .zip(kinds)
            .map(|((id, p), kind)| Resource {
                id,
                kind: kind.map(|tag| track::tag_words(tag).1),
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
