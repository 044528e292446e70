//! What is worth a look, worst first: a deadlock (each of its tasks with what it holds
//! and what it wants), a slow poll, a poll still running, a recent stall, workers parked
//! while the global queue holds work, events or updates this console missed, tasks that
//! can never be woken (every waker dropped), tasks that keep waking themselves.
//!
//! Each kind of trouble is a type that implements [`Warn`] for the kind of model item it
//! is about (a deadlock, a slow poll, a task's self-wakes, the counts of what was
//! missed, ...): it says whether an item shows the trouble now, and puts it in words.
//! [`all`] runs each over its items in the model, in the order above. Computed on every
//! frame; the header shows them.

use crate::state::{Missed, Model, OpenPoll, SelfWakes, SlowPoll, SLOW_POLL_NS};
use std::borrow::Borrow;
use volt_console_proto as proto;

/// How long after the newest stall (or slow poll) arrives the header still shows it
/// (the stalls view keeps the stalls).
pub const STALL_WARNING_NS: u64 = 30_000_000_000;

/// Self-wakes in a row, without completing or waiting on anything, to call a task spinning.
pub const SELF_WAKE_LIMIT: u64 = 1_000;

/// Spinning tasks named in the header at most.
const SPINNING_SHOWN: usize = 3;

/// One kind of trouble in items of type `T` of the model.
pub trait Warn<T> {
    /// Whether `item` shows the trouble now; `model` is the rest of what is known (the
    /// runtime's uptime, the tasks' names).
    fn check(&self, item: &T, model: &Model) -> bool;

    /// The trouble in `item`, in words for the header.
    fn format(&self, item: &T, model: &Model) -> String;
}

/// The items of `items` that show `warn`'s trouble.
pub fn flagged<T, I: Borrow<T>>(warn: &impl Warn<T>, model: &Model, items: impl IntoIterator<Item = I>) -> Vec<I> {
    items.into_iter().filter(|i| warn.check(i.borrow(), model)).collect()
}

/// What is worth a look in `model`, worst first.
pub fn all(model: &Model) -> Vec<String> {
    let mut w = Vec::new();
    lint(&mut w, model, &Deadlocked, model.deadlocks());
    lint(&mut w, model, &SlowPollSeen, model.watch.slow_polls.back());
    lint(&mut w, model, &PollRunning, model.watch.open_polls.values());
    lint(&mut w, model, &StalledNow, model.ongoing_stalls());
    lint(&mut w, model, &RecentStall, model.stalls.back());
    lint(&mut w, model, &ParkedWithWork, &model.snapshot);
    lint(&mut w, model, &RingOverwrote, [&model.missed]);
    lint(&mut w, model, &OverTheCap, [&model.missed]);
    lint(&mut w, model, &UpdatesMissed, [&model.missed]);
    lint(&mut w, model, &LostWaker, model.task_counts.iter().flat_map(|c| &c.lost_waker_ids));
    lint(&mut w, model, &MoreLostWakers, &model.task_counts);
    // The spinning tasks by id, the first few only.
    let mut spinning = flagged(&Spinning, model, model.watch.self_wakes());
    spinning.sort_by_key(|s| s.task);
    spinning.truncate(SPINNING_SHOWN);
    lint(&mut w, model, &Spinning, spinning);
    w
}

/// Add to `out` the trouble `warn` finds in `items`, each in words.
fn lint<T, I: Borrow<T>>(
    out: &mut Vec<String>,
    model: &Model,
    warn: &impl Warn<T>,
    items: impl IntoIterator<Item = I>,
) {
    out.extend(flagged(warn, model, items).iter().map(|i| warn.format(i.borrow(), model)));
}

/// A deadlock the server found.
pub struct Deadlocked;

impl Warn<proto::Deadlock> for Deadlocked {
    fn check(&self, _: &proto::Deadlock, _: &Model) -> bool {
        true
    }

    fn format(&self, d: &proto::Deadlock, _: &Model) -> String {
        deadlock_line(d)
    }
}

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

/// A slow poll seen less than [`STALL_WARNING_NS`] ago.
pub struct SlowPollSeen;

impl Warn<SlowPoll> for SlowPollSeen {
    fn check(&self, p: &SlowPoll, model: &Model) -> bool {
        model.uptime_ns.saturating_sub(p.seen_at_ns) < STALL_WARNING_NS
    }

    fn format(&self, p: &SlowPoll, model: &Model) -> String {
        let name = model.task_name(p.task);
        format!("task {}{name} polled for {:.1} ms: it blocks a worker", p.task, p.took_ns as f64 / 1e6)
    }
}

/// A poll running for longer than [`SLOW_POLL_NS`], by the newest event's clock.
pub struct PollRunning;

impl PollRunning {
    fn running_ns(p: &OpenPoll, model: &Model) -> Option<u64> {
        model.events.back().map(|last| last.timestamp_ns.saturating_sub(p.start_ns))
    }
}

impl Warn<OpenPoll> for PollRunning {
    fn check(&self, p: &OpenPoll, model: &Model) -> bool {
        p.worker != u32::MAX && PollRunning::running_ns(p, model).is_some_and(|ns| ns > SLOW_POLL_NS)
    }

    fn format(&self, p: &OpenPoll, model: &Model) -> String {
        let running = PollRunning::running_ns(p, model).unwrap_or(0);
        format!("worker {} has been polling task {} for {:.1} ms", p.worker, p.task, running as f64 / 1e6)
    }
}

/// A poll stalled now.
pub struct StalledNow;

impl Warn<proto::Stall> for StalledNow {
    fn check(&self, _: &proto::Stall, _: &Model) -> bool {
        true
    }

    fn format(&self, st: &proto::Stall, _: &Model) -> String {
        format!(
            "stalled now: task {}{} has held worker {} for {:.1} ms (s shows its stack)",
            st.task_id,
            stall_task_name(st),
            st.worker,
            st.duration_ns as f64 / 1e6
        )
    }
}

/// A stall that ended, reported less than [`STALL_WARNING_NS`] ago.
pub struct RecentStall;

impl Warn<proto::Stall> for RecentStall {
    fn check(&self, _: &proto::Stall, model: &Model) -> bool {
        model.stall_arrived_ns.is_some_and(|at| model.uptime_ns.saturating_sub(at) < STALL_WARNING_NS)
    }

    fn format(&self, st: &proto::Stall, _: &Model) -> String {
        format!(
            "stall: task {}{} held worker {} for {:.1} ms (s shows its stack)",
            st.task_id,
            stall_task_name(st),
            st.worker,
            st.duration_ns as f64 / 1e6
        )
    }
}

fn stall_task_name(st: &proto::Stall) -> String {
    st.task_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
}

/// Workers parked while the global queue holds work, two updates in a row or more.
pub struct ParkedWithWork;

impl Warn<proto::Snapshot> for ParkedWithWork {
    fn check(&self, _: &proto::Snapshot, model: &Model) -> bool {
        model.watch.parked_with_work >= 2
    }

    fn format(&self, s: &proto::Snapshot, _: &Model) -> String {
        format!("{} worker(s) parked while the global queue holds {} task(s)", s.num_parked, s.global_queue_depth)
    }
}

/// Events the ring overwrote before the server read them. (The ring overwriting records
/// that were read already, `events_overwritten`, is no loss, and is not warned about.)
pub struct RingOverwrote;

impl Warn<Missed> for RingOverwrote {
    fn check(&self, m: &Missed, _: &Model) -> bool {
        m.events_ring > 0
    }

    fn format(&self, m: &Missed, _: &Model) -> String {
        format!(
            "{} events missed: the ring overwrote them before the server read them (a bigger \
             Builder::event_ring or a shorter publish interval keeps them)",
            m.events_ring
        )
    }
}

/// Events the server left out for this console's per-update cap.
pub struct OverTheCap;

impl Warn<Missed> for OverTheCap {
    fn check(&self, m: &Missed, _: &Model) -> bool {
        m.events_cap > 0
    }

    fn format(&self, m: &Missed, _: &Model) -> String {
        format!("{} events missed: over the per-update cap (volt-console --max-events raises it)", m.events_cap)
    }
}

/// Updates the server skipped for this console.
pub struct UpdatesMissed;

impl Warn<Missed> for UpdatesMissed {
    fn check(&self, m: &Missed, _: &Model) -> bool {
        m.updates > 0
    }

    fn format(&self, m: &Missed, _: &Model) -> String {
        format!("{} updates missed (this console read too slowly)", m.updates)
    }
}

/// A task the server found can never be woken, by id.
pub struct LostWaker;

impl Warn<u64> for LostWaker {
    fn check(&self, _: &u64, _: &Model) -> bool {
        true
    }

    fn format(&self, &id: &u64, model: &Model) -> String {
        format!("task {id}{} can never be woken: every waker was dropped", model.task_name(id))
    }
}

/// Tasks that can never be woken beyond those the server named.
pub struct MoreLostWakers;

impl MoreLostWakers {
    fn more(c: &proto::TaskCounts) -> u64 {
        c.lost_waker.saturating_sub(c.lost_waker_ids.len() as u64)
    }
}

impl Warn<proto::TaskCounts> for MoreLostWakers {
    fn check(&self, c: &proto::TaskCounts, _: &Model) -> bool {
        MoreLostWakers::more(c) > 0
    }

    fn format(&self, c: &proto::TaskCounts, _: &Model) -> String {
        format!("{} more task(s) can never be woken (sort by longest wait: l)", MoreLostWakers::more(c))
    }
}

/// A task that woke itself [`SELF_WAKE_LIMIT`] times in a row or more.
pub struct Spinning;

impl Warn<SelfWakes> for Spinning {
    fn check(&self, s: &SelfWakes, _: &Model) -> bool {
        s.in_a_row >= SELF_WAKE_LIMIT
    }

    fn format(&self, s: &SelfWakes, model: &Model) -> String {
        format!(
            "task {}{} woke itself {} times in a row without completing",
            s.task,
            model.task_name(s.task),
            s.in_a_row
        )
    }
}
