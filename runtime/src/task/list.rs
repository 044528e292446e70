//! The owned-task list: every live task of a runtime, so shutdown can drop every future
//! even when no queue holds the task (it waits on a waker somebody else owns).
//!
//! An intrusive doubly-linked list through `Header::owned`, split into shards by task id
//! so that spawns and completions on different workers rarely share a lock. A task is
//! linked at spawn ([`OwnedTasks::bind`]) and unlinked at completion
//! ([`OwnedTasks::remove`]); the list holds one reference while the task is linked.
//!
//! Shutdown protocol: [`OwnedTasks::close_and_pop`] closes each shard (later binds fail,
//! so a task spawned during shutdown is cancelled at once) and pops the tasks one at a
//! time, handing the caller the list's reference. No user code runs under a shard lock.

use super::raw::Header;
use crate::loom::{lock, Mutex};
use std::ptr::NonNull;

pub(crate) struct OwnedTasks {
    shards: Box<[Mutex<Shard>]>,
    mask: u64,
}

struct Shard {
    head: Option<NonNull<Header>>,
    len: usize,
    closed: bool,
}

// SAFETY: the raw pointers in a shard are only dereferenced under the shard's lock, and
// each points at a live task because the list holds a reference to every linked task.
unsafe impl Send for Shard {}

impl OwnedTasks {
    /// A list with at least `min_shards` shards (rounded up to a power of two).
    pub(crate) fn new(min_shards: usize) -> OwnedTasks {
        let n = min_shards.max(1).next_power_of_two();
        let shards = (0..n).map(|_| Mutex::new(Shard { head: None, len: 0, closed: false })).collect();
        OwnedTasks { shards, mask: n as u64 - 1 }
    }

    fn shard(&self, task: NonNull<Header>) -> &Mutex<Shard> {
        // SAFETY: callers pass live tasks.
        let id = unsafe { task.as_ref() }.id;
        &self.shards[(id & self.mask) as usize]
    }

    /// Link a new task (taking the list's reference). Returns false if the list is
    /// closed; the caller then cancels the task.
    pub(crate) fn bind(&self, task: NonNull<Header>) -> bool {
        let mut shard = lock(self.shard(task));
        if shard.closed {
            return false;
        }
        // SAFETY: under the shard lock; `task` is not yet linked anywhere.
        unsafe {
            task.as_ref().owned.with_mut(|l| {
                (*l).prev = None;
                (*l).next = shard.head;
                (*l).linked = true;
            });
            if let Some(old) = shard.head {
                old.as_ref().owned.with_mut(|l| (*l).prev = Some(task));
            }
        }
        shard.head = Some(task);
        shard.len += 1;
        true
    }

    /// Unlink a task if it is linked. Returns true if it was: the caller now owns the
    /// list's reference.
    pub(crate) fn remove(&self, task: NonNull<Header>) -> bool {
        let mut shard = lock(self.shard(task));
        // SAFETY: under the shard lock.
        unsafe { unlink(&mut shard, task) }
    }

    /// Close every shard and pop tasks one at a time, calling `f` with each (and its
    /// reference) outside the lock. Tasks bound meanwhile are refused by `bind`.
    pub(crate) fn close_and_pop(&self, mut f: impl FnMut(NonNull<Header>)) {
        for shard in self.shards.iter() {
            lock(shard).closed = true;
        }
        for shard in self.shards.iter() {
            loop {
                let task = {
                    let mut s = lock(shard);
                    let Some(head) = s.head else { break };
                    // SAFETY: under the shard lock; `head` is linked.
                    unsafe { unlink(&mut s, head) };
                    head
                };
                f(task);
            }
        }
    }
}

impl OwnedTasks {
    /// Call `f` with the linked task whose id is `id`, if there is one: under that id's
    /// shard lock only, walking that shard up to the task. `f` must not touch the list.
    pub(crate) fn with_task<R>(&self, id: u64, f: impl FnOnce(NonNull<Header>) -> R) -> Option<R> {
        let s = lock(&self.shards[(id & self.mask) as usize]);
        let mut cur = s.head;
        while let Some(t) = cur {
            // SAFETY: under the shard lock every linked task is alive (the list holds a
            // reference) and its links are stable.
            let (tid, next) = unsafe { (t.as_ref().id, t.as_ref().owned.with(|l| (*l).next)) };
            if tid == id {
                return Some(f(t));
            }
            cur = next;
        }
        None
    }

    /// Visit every linked task, one shard lock at a time (for `Telemetry::tasks`). `f`
    /// must not touch the list.
    pub(crate) fn for_each(&self, mut f: impl FnMut(NonNull<Header>)) {
        for shard in self.shards.iter() {
            let s = lock(shard);
            let mut cur = s.head;
            while let Some(t) = cur {
                // SAFETY: under the shard lock every linked task is alive (the list holds a
                // reference) and its links are stable.
                f(t);
                // SAFETY: as above.
                cur = unsafe { t.as_ref().owned.with(|l| (*l).next) };
            }
        }
    }
}

/// # Safety
/// The caller holds the lock of `shard`, which is the shard of `task`.
unsafe fn unlink(shard: &mut Shard, task: NonNull<Header>) -> bool {
    // SAFETY: under the shard lock (caller), every linked pointer is live.
    unsafe {
        let (prev, next, linked) = task.as_ref().owned.with(|l| ((*l).prev, (*l).next, (*l).linked));
        if !linked {
            return false;
        }
        match prev {
            Some(p) => p.as_ref().owned.with_mut(|l| (*l).next = next),
            None => shard.head = next,
        }
        if let Some(n) = next {
            n.as_ref().owned.with_mut(|l| (*l).prev = prev);
        }
        task.as_ref().owned.with_mut(|l| *l = super::raw::OwnedLinks::default());
    }
    shard.len -= 1;
    true
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::test_util::{spawn, MockScheduler};

    /// `with_task` finds every linked task by its id, under its own shard, and nothing
    /// once the task is unlinked (or for an id never given).
    #[test]
    fn with_task_finds_each_linked_task_and_only_those() {
        let sched = MockScheduler::new();
        let handles: Vec<_> = (0..20).map(|_| spawn(&sched, async {})).collect();
        let ids: Vec<u64> = handles.iter().map(|h| h.id()).collect();
        for &id in &ids {
            // SAFETY: `with_task` hands over a linked, live task.
            assert_eq!(sched.owned.with_task(id, |t| unsafe { t.as_ref() }.id), Some(id));
        }
        assert_eq!(sched.owned.with_task(u64::MAX, |_| ()), None);
        assert_eq!(sched.run_all(), 20);
        for &id in &ids {
            assert!(sched.owned.with_task(id, |_| ()).is_none(), "task {id} still found once complete");
        }
        drop(handles);
    }
}
