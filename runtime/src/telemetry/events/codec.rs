//! The record codec: how an event is packed into a ring slot's `arg` and `meta` words,
//! and how a record is decoded back into the [`Event`]s it stands for. The packed form is
//! also what the console's wire and `VOLTREC2` recordings carry (`arg`), so it does not
//! change; the public model reads it through [`Event::detail`](super::Event::detail).

use super::ring::Raw;
use super::{Event, EventKind, SCHEDULE_LOCAL};

/// `PollEnd`'s raw `arg`: the outcome in the low byte; with [`POLL_IMPLICIT_START`] set,
/// the poll's start was never written, and the poll's length in clock ticks sits above
/// [`POLL_BUSY_SHIFT`].
pub(crate) const POLL_OUTCOME_MASK: u64 = 0xff;
pub(crate) const POLL_IMPLICIT_START: u64 = 1 << 8;
pub(crate) const POLL_BUSY_SHIFT: u32 = 9;

/// `meta` bits 0..8 hold the kind and 8..24 the worker. With [`META_STARTS_POLL`] set, a
/// `PollStart` of the task in the bits from [`META_START_TASK_SHIFT`] up, at this record's
/// time, comes just before this record (an event inside a poll carries its poll's start).
pub(crate) const META_STARTS_POLL: u64 = 1 << 24;
pub(crate) const META_START_TASK_SHIFT: u32 = 25;
/// The largest task id that fits; a later task's start is written as its own record.
pub(crate) const META_START_TASK_MAX: u64 = u64::MAX >> META_START_TASK_SHIFT;
const META_WORKER_MASK: u64 = 0xffff << 8;

/// For a record that carries a poll's start folded into it (a `PollEnd` with
/// [`POLL_IMPLICIT_START`], or any record with [`META_STARTS_POLL`]): that start, as its
/// own record, which goes just before this one.
pub(crate) fn implicit_poll_start(raw: &Raw) -> Option<Raw> {
    let start_meta = (raw.meta & META_WORKER_MASK) | EventKind::PollStart as u64;
    if raw.meta & META_STARTS_POLL != 0 {
        return Some(Raw { ts: raw.ts, task: raw.meta >> META_START_TASK_SHIFT, arg: 0, meta: start_meta });
    }
    if raw.meta as u8 != EventKind::PollEnd as u8 || raw.arg & POLL_IMPLICIT_START == 0 {
        return None;
    }
    let ts = raw.ts.saturating_sub(raw.arg >> POLL_BUSY_SHIFT);
    Some(Raw { ts, task: raw.task, arg: 0, meta: start_meta })
}

/// Pack kind and worker into `meta`.
#[inline]
pub(crate) fn meta(kind: EventKind, worker: Option<usize>) -> u64 {
    kind as u64 | (worker.map_or(u16::MAX as u64, |w| w as u64) << 8)
}

/// Decode a record into the events it stands for, appending them to `out`. Two records
/// are compound, to keep recording to one write where one would do:
/// * `Spawn` (raw `arg` = `remote | target << 1`) is the spawn and its first `Schedule`;
/// * `PollEnd` (raw `arg`'s low byte = the poll's outcome: 0 idle, 1 ready, 2 requeued,
///   3 cancelled, 4 ready by panicking) is the end of the poll, the task's transition out
///   of RUNNING, for a requeue its `Schedule` onto the local queue, and for a task that
///   returned its output, its `Complete`.
pub(crate) fn decode(raw: Raw, ns: u64, out: &mut Vec<Event>) {
    let Some(kind) = EventKind::from_u8(raw.meta as u8) else { return };
    let w = (raw.meta >> 8) & 0xffff;
    let worker = (w != u16::MAX as u64).then_some(w as usize);
    let ev = |kind, arg| Event { timestamp_ns: ns, worker, kind, task_id: raw.task, arg };
    const RUNNING_TO: u64 = 2 << 8;
    match kind {
        EventKind::Spawn => {
            out.push(ev(EventKind::Spawn, raw.arg & 1));
            let spawn = (crate::task::wait::SRC_SPAWN as u64) << super::SCHEDULE_SOURCE_SHIFT;
            out.push(ev(EventKind::Schedule, raw.arg >> 1 | spawn));
        }
        EventKind::PollEnd => match raw.arg & POLL_OUTCOME_MASK {
            1 => {
                out.push(ev(EventKind::PollEnd, 1));
                out.push(ev(EventKind::Complete, 0));
            }
            // Ready by panicking: the `Panic` record follows.
            4 => out.push(ev(EventKind::PollEnd, 1)),
            0 => {
                out.push(ev(EventKind::PollEnd, 0));
                out.push(ev(EventKind::Transition, RUNNING_TO));
            }
            2 => {
                out.push(ev(EventKind::PollEnd, 0));
                out.push(ev(EventKind::Transition, RUNNING_TO | 1));
                // Woken during its own poll: the task itself is the source.
                let own = crate::task::wait::SRC_TASK as u64 | raw.task << crate::task::wait::SRC_BITS;
                out.push(ev(EventKind::Schedule, SCHEDULE_LOCAL | own << super::SCHEDULE_SOURCE_SHIFT));
            }
            _ => out.push(ev(EventKind::PollEnd, 0)),
        },
        _ => out.push(ev(kind, raw.arg)),
    }
}
