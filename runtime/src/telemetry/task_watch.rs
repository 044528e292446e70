//! Following the live tasks from outside the runtime: [`TaskRow`]'s accessors (one task
//! as a reading found it), [`TaskWaits`], and [`TaskWatch`], which hands a reader that keeps a row per
//! live task only the tasks that changed since its last read, through the change log
//! (`tasks.rs`): keeping up costs O(tasks that changed), not a walk of every task.

use super::{read_task, tasks, Holder, TaskRow, TaskState, Telemetry, WaitReason, WakeSource};
use crate::task::wait::WaitWords;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

impl TaskRow {
    /// The task's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Where it was spawned.
    pub fn spawned_at(&self) -> &'static std::panic::Location<'static> {
        self.spawned_at
    }

    /// Where it was in its life at the reading.
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// Polls so far.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// Nanoseconds spent being polled.
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns
    }

    /// Nanoseconds spent queued, between a wake and the poll that followed.
    pub fn scheduled_ns(&self) -> u64 {
        self.scheduled_ns
    }

    /// When its last poll ended, in nanoseconds since the runtime started, on the clock
    /// of [`Telemetry::now_ns`] (`None`: never polled). Kept as a point in time rather
    /// than an age, so a row kept for later still tells how long the task has waited.
    pub fn last_poll_end_ns(&self) -> Option<u64> {
        (self.last_poll_end_ns != 0).then_some(self.last_poll_end_ns)
    }

    /// It was idle, and nothing but its owner and its `JoinHandle` held a reference to
    /// it: every waker was dropped, so nothing can wake it again (as
    /// [`TaskInfo::lost_waker`](super::TaskInfo::lost_waker)).
    pub fn lost_waker(&self) -> bool {
        self.lost_waker
    }

    /// Who woke it last (`None`: never woken since its spawn).
    pub fn last_woken_by(&self) -> Option<WakeSource> {
        (self.woken_by != 0).then(|| WakeSource::from_packed(self.woken_by - 1))
    }

    /// When that wake was, in nanoseconds since the runtime started, on the clock of
    /// [`Telemetry::now_ns`].
    pub fn last_woken_ns(&self) -> Option<u64> {
        (self.woken_at_ns != 0).then_some(self.woken_at_ns)
    }

    /// Its waits as the reading found them recorded: its latest poll's while it was idle
    /// ([`WaitReason::Unknown`] when that poll named none), a yield for a task its own
    /// poll queued again, none otherwise. Kept undecoded (see [`TaskWaits`]).
    pub fn waits(&self) -> TaskWaits {
        TaskWaits(self.wait)
    }
}

/// A task's waits as recorded, from [`TaskRow::waits`]: a fixed-size copy, decoded only
/// when they are shown, so a reader that keeps a row per task pays for the text of the
/// few it shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskWaits(WaitWords);

impl TaskWaits {
    /// The waits, as [`TaskInfo::waits`](super::TaskInfo::waits) lists them, and how many
    /// more were recorded than listed. A deadline's time left is measured now, at this
    /// call, not at the reading.
    pub fn decode(&self) -> (Vec<WaitReason>, u32) {
        let (waits, more) = self.0.decode(std::time::Instant::now());
        (waits.into_iter().map(WaitReason::from_wait).collect(), more)
    }
}

/// Follows which live tasks change, for a reader that keeps its own copy of the task
/// list (a dashboard's table of a million tasks): from [`Telemetry::watch_tasks`].
///
/// The reader starts the watch, walks every task once ([`Telemetry::for_each_task`]),
/// and from then on reads only the tasks that changed ([`TaskWatch::read_changes`]): a
/// change made before the watch started is in that walk, and every change made after it
/// comes through the watch. While a watch exists, each spawn, wake, poll and completion
/// queues its task once until the next read (a few atomic operations on the worker);
/// with none, the runtime does no such work. Dropping the watch stops it and releases
/// what it holds.
pub struct TaskWatch {
    telemetry: Telemetry,
    /// A watch keeps the tasks' statistics too (`TaskStatistics::WhileWatched`).
    _stats: TaskStatisticsWatch,
}

/// Keeps the tasks' statistics while it lives, in a runtime built with
/// [`TaskStatistics::WhileWatched`](crate::runtime::TaskStatistics::WhileWatched): from
/// [`Telemetry::watch_task_statistics`]. (A [`TaskWatch`] holds one, and the console
/// server one while a client shows tasks.) Any number may exist; the statistics are kept
/// until the last is dropped. In a runtime that keeps them always, it changes nothing.
pub struct TaskStatisticsWatch {
    telemetry: Telemetry,
}

impl Drop for TaskStatisticsWatch {
    fn drop(&mut self) {
        if let Some(rec) = &self.telemetry.metrics.recorder {
            rec.unwatch_stats();
        }
    }
}

impl std::fmt::Debug for TaskStatisticsWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStatisticsWatch").finish_non_exhaustive()
    }
}

/// What a [`TaskWatch::read_changes`] could tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskChanges {
    /// Every task that changed since the previous read was handed over.
    Complete,
    /// Some changes could not be kept (more tasks changed between two reads than the
    /// watch holds, about 8,192 per worker): walk every task again to catch up. The watch
    /// goes on.
    Resync,
}

impl Telemetry {
    /// Start following which tasks change (see [`TaskWatch`]). `None` when the runtime
    /// keeps no task statistics (`Builder::event_ring`), or while another watch of this
    /// runtime exists: a runtime has one, and the console's task list uses it while a
    /// client shows tasks (the console then walks every task at each publish instead).
    pub fn watch_tasks(&self) -> Option<TaskWatch> {
        // The statistics first: while the log is read, they are kept.
        let stats = self.watch_task_statistics()?;
        let rec = self.metrics.recorder.as_ref()?;
        rec.changes.start().then(|| TaskWatch { telemetry: self.clone(), _stats: stats })
    }

    /// Keep the tasks' statistics while the returned watch lives (see
    /// [`TaskStatisticsWatch`]); `None` when the runtime keeps no task statistics
    /// (`Builder::event_ring`). Only a runtime built with
    /// [`TaskStatistics::WhileWatched`](crate::runtime::TaskStatistics::WhileWatched)
    /// needs one.
    pub fn watch_task_statistics(&self) -> Option<TaskStatisticsWatch> {
        let rec = self.metrics.recorder.as_ref()?;
        rec.watch_stats();
        Some(TaskStatisticsWatch { telemetry: self.clone() })
    }
}

impl TaskWatch {
    /// Hand `f` every task that changed since the previous read (on the first: since the
    /// watch started), each as it is now, with its name. A task comes once per read
    /// however often it changed, and at the next read too while it was running at this
    /// one (a poll's end is then read as well); one that finished comes with state
    /// [`TaskState::Complete`] (at least once), and then no more.
    ///
    /// `f` runs while the change log is read, so it must not drop the runtime (that waits
    /// for the workers to leave, and a worker leaving waits for the read). If it panics,
    /// the read finishes without it, and the panic goes on once the read is done: the
    /// changes it did not see are lost, so walk every task again after catching it.
    pub fn read_changes(&mut self, mut f: impl FnMut(TaskRow, Option<&str>)) -> TaskChanges {
        let Some(rec) = &self.telemetry.metrics.recorder else { return TaskChanges::Complete };
        let now = rec.clock.raw();
        let mut panicked = None;
        let drained = rec.changes.drain(|t| {
            if let Some(st) = crate::task::stats::stats(t) {
                tasks::clear_then_read(&st.queued);
            }
            // The log holds one reference while it hands the task over.
            let Some((row, name)) = read_task(rec, now, t, Holder::Log) else { return false };
            // The log must see the whole read through (see `TaskChangeLog::drain`).
            if panicked.is_none() {
                panicked = catch_unwind(AssertUnwindSafe(|| f(row, name))).err();
            }
            // Its poll's end moves it out of RUNNING with no mark: read it again.
            row.state == TaskState::Running
        });
        if let Some(p) = panicked {
            resume_unwind(p);
        }
        match drained {
            tasks::Drained::Changes => TaskChanges::Complete,
            tasks::Drained::Resync => TaskChanges::Resync,
        }
    }
}

impl Drop for TaskWatch {
    fn drop(&mut self) {
        if let Some(rec) = &self.telemetry.metrics.recorder {
            rec.changes.stop();
        }
    }
}

impl std::fmt::Debug for TaskWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskWatch").finish_non_exhaustive()
    }
}
