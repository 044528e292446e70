//! The flow arrows: who woke (or spawned) whom, from the waking poll to the woken
//! task's next poll.

use super::span::Span;
use std::collections::HashMap;

/// The flows: ids handed out, and those waiting for a task's next poll.
#[derive(Default)]
pub(super) struct Flows {
    /// Flows waiting for a task's next poll, with the time each starts at.
    pub(super) pending: HashMap<u64, Vec<(u64, u64)>>,
    /// The last id handed out (ids start at 1).
    pub(super) last: u64,
    pub(super) started: u64,
    pub(super) ended: u64,
}

impl Flows {
    /// Start a flow at `from`, to `task`'s next poll.
    pub(super) fn start(&mut self, from: &mut Span, task: u64) {
        self.last += 1;
        self.started += 1;
        from.flows_out.push(self.last);
        self.pending.entry(task).or_default().push((self.last, from.begin));
    }

    /// End at `poll` (a poll of `task` that just began) the flows waiting for it. A flow
    /// goes forward in time: one that would end before it starts (two workers' clocks a
    /// tick apart) is left out, as a trace processor would leave it.
    pub(super) fn end_at(&mut self, poll: &mut Span, task: u64) {
        let Some(waiting) = self.pending.remove(&task) else { return };
        poll.flows_in = waiting.into_iter().filter(|&(_, from)| from <= poll.begin).map(|(flow, _)| flow).collect();
        self.ended += poll.flows_in.len() as u64;
    }

    /// A finished task has no next poll: its waiting flows go.
    pub(super) fn forget(&mut self, task: u64) {
        self.pending.remove(&task);
    }
}
