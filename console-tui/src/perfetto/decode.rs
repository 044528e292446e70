//! What the recorded events' packed arguments say: a `Stall`'s worker and duration, a
//! `Schedule`'s wake source. Both passes read them (the index collects the stall
//! reports, the timeline draws the wakes).

use volt_console_proto as proto;

/// A `Schedule`'s argument: the queue in the low byte, the wake source above it: its
/// kind in the low [`SOURCE_KIND_BITS`] (0 outside, 1 the timer wheel, 2 the I/O
/// driver, 3 a task, 4 the blocking pool, 5 the task's spawn) and a task's id above them.
pub(super) const SCHEDULE_SOURCE_SHIFT: u32 = 8;
pub(super) const SOURCE_KIND_BITS: u32 = 3;
/// A `Stall`'s argument: the worker above its duration in microseconds.
pub(super) const STALL_WORKER_SHIFT: u32 = 48;

/// A stall report: when it was stamped, and how long the poll had been stuck then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallReport {
    pub ts: u64,
    pub duration_ns: u64,
}

impl StallReport {
    /// A `Stall` event as its worker and report.
    pub fn of(e: &proto::Event) -> (usize, StallReport) {
        let duration_us = e.arg & ((1 << STALL_WORKER_SHIFT) - 1);
        let report = StallReport { ts: e.timestamp_ns, duration_ns: duration_us.saturating_mul(1_000) };
        ((e.arg >> STALL_WORKER_SHIFT) as usize, report)
    }

    /// The span it stands for.
    pub(super) fn span(&self) -> (u64, u64) {
        (self.ts.saturating_sub(self.duration_ns), self.ts)
    }
}

/// What a `Schedule` says woke its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WakeSource {
    Outside,
    Timer,
    Io,
    Task(u64),
    Blocking,
    /// The task's spawn queued it (not a wake).
    Spawn,
}

impl WakeSource {
    pub(super) fn from_schedule_arg(arg: u64) -> WakeSource {
        let packed = arg >> SCHEDULE_SOURCE_SHIFT;
        match packed & ((1 << SOURCE_KIND_BITS) - 1) {
            1 => WakeSource::Timer,
            2 => WakeSource::Io,
            3 => WakeSource::Task(packed >> SOURCE_KIND_BITS),
            4 => WakeSource::Blocking,
            5 => WakeSource::Spawn,
            _ => WakeSource::Outside,
        }
    }

    pub(super) fn describe(self) -> String {
        match self {
            WakeSource::Outside => "a thread outside the runtime".into(),
            WakeSource::Timer => "the timer wheel".into(),
            WakeSource::Io => "the I/O driver".into(),
            WakeSource::Task(id) => format!("task {id}"),
            WakeSource::Blocking => "the blocking pool".into(),
            WakeSource::Spawn => "its spawn".into(),
        }
    }
}
