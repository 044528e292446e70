//! [`StallCursor`]: the stalls as they end, each read once.

use super::Stall;
use crate::telemetry::Telemetry;

/// A reader's place in the runtime's stall reports: each [`StallCursor::read`] returns
/// the stalls that ended since the previous one, so a reader that keeps up sees each
/// ended stall once. From [`Telemetry::stall_cursor`]; the polls still running past the
/// threshold are [`Telemetry::stalls_ongoing`].
#[derive(Clone, Debug)]
pub struct StallCursor {
    telemetry: Telemetry,
    /// Each worker's report count, read up to here (empty: nothing read yet).
    seen: Vec<u64>,
}

impl Telemetry {
    /// A cursor over the stalls as they end. Its first read returns the ended stalls the
    /// runtime still keeps (the newest 32 of each worker), later reads those that ended
    /// since.
    pub fn stall_cursor(&self) -> StallCursor {
        StallCursor { telemetry: self.clone(), seen: Vec::new() }
    }
}

impl StallCursor {
    /// The stalls that ended since the previous read, the newest `max` of them, oldest
    /// first (by their end); the cursor moves past all of them, those left out included.
    /// Their stacks are named on the calling thread, as [`Telemetry::stalls`] names them
    /// (the first stack named in a process loads the binary's debug info). Reports a
    /// worker overwrote before they were read are gone.
    pub fn read(&mut self, max: usize) -> Vec<Stall> {
        let t = &self.telemetry;
        t.metrics.stall.since(&mut self.seen, max, &|id| t.task_name(id))
    }

    /// Whether there is anything to show: a stall that ended since the last read, or a
    /// poll running past the threshold now. A few loads per worker, no stack named: the
    /// check a poller makes before it pays for [`StallCursor::read`] or
    /// [`Telemetry::stalls_ongoing`].
    pub fn pending(&self) -> bool {
        let m = &self.telemetry.metrics;
        m.stall.anything_since(m, &self.seen)
    }
}
