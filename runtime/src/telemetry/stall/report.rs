//! What a stall report says: [`Stall`], its frames ([`StackFrame`]) and why a report
//! may have no stack ([`MissingStack`]).

use std::fmt;
use std::time::Duration;

/// A poll that ran past the stall threshold.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stall {
    /// The worker it held.
    pub worker: usize,
    /// The worker's number for this poll (its poll count then): with `worker`, it tells
    /// one stall from another, and an ongoing stall from its report once it ended.
    pub poll: u64,
    /// The task it polled.
    pub task_id: u64,
    /// That task's name, when the runtime records tasks (`Builder::event_ring`) and it
    /// has one (at most 48 bytes of it once the poll has ended).
    pub task_name: Option<String>,
    /// How long the poll held the worker: its whole length, measured by the worker as the
    /// poll ended; for an `ongoing` poll, its length so far.
    pub duration: Duration,
    /// The poll is still running (`duration` grows; the stall is reported once more, as
    /// the same stall, with its true length when it ends).
    pub ongoing: bool,
    /// The stack the poll was stuck in, innermost first; empty when none was taken (see
    /// `missing_stack`). [`Stall::user_frames`] leaves out the plumbing.
    pub frames: Vec<StackFrame>,
    /// Why `frames` is empty, when it is.
    pub missing_stack: Option<MissingStack>,
    /// How far into the poll its stack was taken.
    pub stack_taken_after: Option<Duration>,
}

impl Stall {
    /// The frames that are not plumbing (the C library, `std`, `core`, `alloc`, this
    /// runtime): the program's own code first, innermost first.
    pub fn user_frames(&self) -> impl Iterator<Item = &StackFrame> {
        self.frames.iter().filter(|f| !f.plumbing)
    }
}

/// One frame of a stall's stack.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StackFrame {
    /// The function, demangled (`my_service::db::query`), or its address when the binary
    /// has no symbol for it.
    pub function: String,
    /// `file:line`, where the binary's debug info says (`debug = "line-tables-only"` in
    /// the release profile is enough).
    pub location: Option<String>,
    /// Machinery rather than the program's own code: frames of the C library, `std`,
    /// `core`, `alloc`, this runtime or `backtrace`, and frames without a Rust path.
    /// Views fold these away by default.
    pub plumbing: bool,
}

impl fmt::Display for StackFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.function)?;
        if let Some(l) = &self.location {
            write!(f, " at {l}")?;
        }
        Ok(())
    }
}

/// Why a stall has no stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissingStack {
    /// `Builder::stall_stacks(false)`.
    Off,
    /// Stacks are taken only on Linux with glibc 2.35 or later, where walking a stack in
    /// a signal handler takes no lock.
    Unsupported,
    /// The poll ended before its thread took the stack: it was not long past the
    /// threshold, or the thread got the signal only after it returned.
    PollEnded,
    /// The poll is still running and its stack is not taken yet.
    NotYet,
}

impl MissingStack {
    pub(super) fn code(self) -> u8 {
        match self {
            MissingStack::Off => 1,
            MissingStack::Unsupported => 2,
            MissingStack::PollEnded => 3,
            MissingStack::NotYet => 4,
        }
    }

    pub(super) fn from_code(c: u8) -> Option<MissingStack> {
        Some(match c {
            1 => MissingStack::Off,
            2 => MissingStack::Unsupported,
            3 => MissingStack::PollEnded,
            4 => MissingStack::NotYet,
            _ => return None,
        })
    }
}

impl fmt::Display for MissingStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MissingStack::Off => "stacks are off (Builder::stall_stacks(false))",
            MissingStack::Unsupported => "stacks are taken only on Linux with glibc 2.35 or later",
            MissingStack::PollEnded => "the poll ended before the stack was taken",
            MissingStack::NotYet => "the poll is still running; its stack is not taken yet",
        })
    }
}
