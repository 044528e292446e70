//! What is worth a look, worst first: a deadlock (each of its tasks with what it holds
//! and what it wants), a slow poll, a poll still running, a recent stall,
//! workers parked while the global queue holds work, events or updates this console
//! missed, tasks that can never be woken (every waker dropped), tasks that keep waking
//! themselves. Computed from the data model on every frame; the header shows them.

use crate::app::App;
use crate::state::TaskTrack;
use volt_console_proto as proto;

/// A deadlock as one warning: `deadlock: task 3 "a" holds Mutex #1, wants lock Mutex #2;
/// task 4 "b" holds Mutex #2, wants lock Mutex #1`.
pub fn deadlock_line(d: &proto::Deadlock) -> String {
    let mut s = String::from("deadlock: ");
    for (i, t) in d.tasks.iter().enumerate() {
        if i > 0 {
            s.push_str("; ");
        }
        s.push_str(&format!("task {}", t.id));
        if let Some(n) = &t.name {
            s.push_str(&format!(" {n:?}"));
        }
        let holds: Vec<String> = t.holds.iter().map(|h| format!("{} #{}", h.primitive, h.resource)).collect();
        if !holds.is_empty() {
            s.push_str(&format!(" holds {},", holds.join(", ")));
        }
        // Who holds what it wants is the cycle's next task, named in its own part.
        let wants = t.wants.split(" (held by").next().unwrap_or(&t.wants);
        s.push_str(&format!(" wants {wants}"));
    }
    s
}

/// A poll longer than this blocks a worker: flagged in the header.
pub const SLOW_POLL_NS: u64 = 10_000_000;

/// How long after the newest stall (or slow poll) arrives the header still shows it
/// (the stalls view keeps the stalls).
pub const STALL_WARNING_NS: u64 = 30_000_000_000;

/// Self-wakes in a row, without completing or waiting on anything, to call a task spinning.
pub const SELF_WAKE_LIMIT: u64 = 1_000;

impl App {
    /// What is worth a look, worst first.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.replay_problems.clone();
        for d in self.deadlocks() {
            w.push(deadlock_line(d));
        }
        let slow_poll_is_recent =
            self.slow_poll_arrived_ns.is_some_and(|at| self.uptime_ns.saturating_sub(at) < STALL_WARNING_NS);
        if let Some(&(task, ns)) = self.slow_polls.back().filter(|_| slow_poll_is_recent) {
            let name = self.task_name(task);
            w.push(format!("task {task}{name} polled for {:.1} ms: it blocks a worker", ns as f64 / 1e6));
        }
        // A poll still running for too long.
        if let Some(last) = self.events.back() {
            for (worker, (task, start)) in &self.open_polls {
                let running = last.timestamp_ns.saturating_sub(*start);
                if running > SLOW_POLL_NS && *worker != u32::MAX {
                    w.push(format!("worker {worker} has been polling task {task} for {:.1} ms", running as f64 / 1e6));
                }
            }
        }
        for st in self.ongoing_stalls() {
            let name = st.task_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            w.push(format!(
                "stalled now: task {}{name} has held worker {} for {:.1} ms (s shows its stack)",
                st.task_id,
                st.worker,
                st.duration_ns as f64 / 1e6
            ));
        }
        let stall_is_recent =
            self.stall_arrived_ns.is_some_and(|at| self.uptime_ns.saturating_sub(at) < STALL_WARNING_NS);
        if let Some(st) = self.stalls.back().filter(|_| stall_is_recent) {
            let name = st.task_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            w.push(format!(
                "stall: task {}{name} held worker {} for {:.1} ms (s shows its stack)",
                st.task_id,
                st.worker,
                st.duration_ns as f64 / 1e6
            ));
        }
        if self.parked_with_work >= 2 {
            if let Some(s) = &self.snapshot {
                w.push(format!(
                    "{} worker(s) parked while the global queue holds {} task(s)",
                    s.num_parked, s.global_queue_depth
                ));
            }
        }
        // Only what this console missed: the ring overwriting records that were read
        // already (`events_overwritten`) is no loss, and is not warned about.
        if self.events_missed_ring > 0 {
            w.push(format!(
                "{} events missed: the ring overwrote them before the server read them (a bigger \
                 Builder::event_ring or a shorter publish interval keeps them)",
                self.events_missed_ring
            ));
        }
        if self.events_missed_cap > 0 {
            w.push(format!(
                "{} events missed: over the per-update cap (volt-console --max-events raises it)",
                self.events_missed_cap
            ));
        }
        if self.updates_missed > 0 {
            w.push(format!("{} updates missed (this console read too slowly)", self.updates_missed));
        }
        if let Some(c) = &self.task_counts {
            for &id in &c.lost_waker_ids {
                w.push(format!("task {id}{} can never be woken: every waker was dropped", self.task_name(id)));
            }
            let more = c.lost_waker.saturating_sub(c.lost_waker_ids.len() as u64);
            if more > 0 {
                w.push(format!("{more} more task(s) can never be woken (sort by longest wait: l)"));
            }
        }
        let mut spinning: Vec<(&u64, &TaskTrack)> =
            self.tracks.iter().filter(|(_, t)| t.self_wakes_in_a_row >= SELF_WAKE_LIMIT).collect();
        spinning.sort_by_key(|(id, _)| **id);
        for (id, t) in spinning.into_iter().take(3) {
            w.push(format!(
                "task {id}{} woke itself {} times in a row without completing",
                self.task_name(*id),
                t.self_wakes_in_a_row
            ));
        }
        w
    }
}
