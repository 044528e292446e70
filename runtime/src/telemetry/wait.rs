//! What an idle task waits on ([`WaitReason`]) and who woke a task ([`WakeSource`]), as
//! [`Telemetry::tasks`](super::Telemetry::tasks) and the event ring report them. The leaf
//! futures and the wake path record them (`task::wait`).

use crate::task::wait::{self as w, Wait};
use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// What an idle task waits on: one of the waits Volt's leaf futures (or a user's label,
/// see [`WaitingOnExt`](crate::task::waiting_on::WaitingOnExt) and
/// [`volt::task::waiting_on`](crate::task::waiting_on::waiting_on)) recorded as they returned
/// `Pending` in its latest poll, or [`WaitReason::Unknown`] when none did.
///
/// Its `Display` begins with the kind's word (`sleep`, `timeout`, `interval`, `accept`,
/// `read`, `write`, `recv`, `send`, `join`, `blocking`, `yield`, `unknown`, and for the
/// sync primitives `lock`, `acquire`, `read`, `write`, `notified`, `wait`, `init`) or is
/// the user's label: `sleep until +1.2 s`, `read 127.0.0.1:5000`, `join task 42`,
/// `lock Mutex (held by task 17 "writer")`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitReason {
    /// `volt::time::sleep`; the time left at the reading (`None`: no deadline).
    Sleep {
        /// Time left until the deadline.
        remaining: Option<Duration>,
    },
    /// `volt::time::timeout` around a future that named no wait of its own.
    Timeout {
        /// Time left until the timeout.
        remaining: Option<Duration>,
    },
    /// `volt::time::Interval::tick`.
    Interval {
        /// Time left until the next tick.
        remaining: Option<Duration>,
    },
    /// `TcpListener::accept`, with the listener's address.
    Accept {
        /// The local address.
        addr: Option<SocketAddr>,
    },
    /// A read on a TCP stream (directly, through a split half, or through an adapter
    /// such as `volt::hyper::Io`), with the peer's address.
    Read {
        /// The peer address.
        addr: Option<SocketAddr>,
    },
    /// A write on a TCP stream (or its connect), with the peer's address.
    Write {
        /// The peer address.
        addr: Option<SocketAddr>,
    },
    /// A UDP receive, with the socket's local address.
    Recv {
        /// The local address.
        addr: Option<SocketAddr>,
    },
    /// A UDP send, with the socket's local address.
    Send {
        /// The local address.
        addr: Option<SocketAddr>,
    },
    /// Awaiting another task's `JoinHandle`.
    Join {
        /// The joined task's id.
        task_id: u64,
    },
    /// Awaiting a `spawn_blocking` closure's result.
    Blocking {
        /// The blocking task's id.
        task_id: u64,
    },
    /// `volt::task::yield_now` (the task is queued again at once).
    Yield,
    /// A label set by the user: a leaf future calling `volt::task::waiting_on`, or a
    /// future wrapped with [`WaitingOnExt::waiting_on`](crate::task::waiting_on::WaitingOnExt::waiting_on).
    /// Labels longer than the task's record keeps (40 bytes, shared by the labels of one
    /// poll) are cut at a character boundary and end in `…`.
    Label(Cow<'static, str>),
    /// A wait on one of `volt::sync`'s primitives: a `Mutex`, `Semaphore`, `RwLock`,
    /// `Notify`, `Barrier` or `OnceCell`, with who holds it at the time of reading.
    Sync(SyncWait),
    /// The task is idle, and its latest poll returned `Pending` without any of Volt's
    /// leaf futures naming a wait: it waits on a future of another library (a
    /// `futures::channel::oneshot::Receiver`, say) that says nothing. Wrap that future
    /// with [`WaitingOnExt::waiting_on`](crate::task::waiting_on::WaitingOnExt::waiting_on) to name it.
    Unknown,
}

impl WaitReason {
    pub(crate) fn from_wait(wait: Wait) -> WaitReason {
        match wait {
            Wait::Sleep(remaining) => WaitReason::Sleep { remaining },
            Wait::Timeout(remaining) => WaitReason::Timeout { remaining },
            Wait::Interval(remaining) => WaitReason::Interval { remaining },
            Wait::Accept(addr) => WaitReason::Accept { addr },
            Wait::Read(addr) => WaitReason::Read { addr },
            Wait::Write(addr) => WaitReason::Write { addr },
            Wait::Recv(addr) => WaitReason::Recv { addr },
            Wait::Send(addr) => WaitReason::Send { addr },
            Wait::Join(task_id) => WaitReason::Join { task_id },
            Wait::Blocking(task_id) => WaitReason::Blocking { task_id },
            Wait::Yield => WaitReason::Yield,
            Wait::Sync { tag, resource } => WaitReason::Sync(SyncWait::read(tag, resource)),
            Wait::Label(l) => WaitReason::Label(Cow::Owned(l)),
            Wait::Unknown => WaitReason::Unknown,
        }
    }

    /// The kind's word (`sleep`, `read`, ..., `unknown`), or the label.
    pub fn kind(&self) -> &str {
        match self {
            WaitReason::Sleep { .. } => "sleep",
            WaitReason::Timeout { .. } => "timeout",
            WaitReason::Interval { .. } => "interval",
            WaitReason::Accept { .. } => "accept",
            WaitReason::Read { .. } => "read",
            WaitReason::Write { .. } => "write",
            WaitReason::Recv { .. } => "recv",
            WaitReason::Send { .. } => "send",
            WaitReason::Join { .. } => "join",
            WaitReason::Blocking { .. } => "blocking",
            WaitReason::Yield => "yield",
            WaitReason::Sync(s) => s.op,
            WaitReason::Label(l) => l,
            WaitReason::Unknown => "unknown",
        }
    }
}

/// `+1.2 s`, `+350 ms`, `+12 µs`: a short time to come.
fn fmt_left(f: &mut fmt::Formatter<'_>, d: Duration) -> fmt::Result {
    let ns = d.as_nanos();
    if ns >= 1_000_000_000 {
        write!(f, "+{:.1} s", d.as_secs_f64())
    } else if ns >= 1_000_000 {
        write!(f, "+{} ms", ns / 1_000_000)
    } else {
        write!(f, "+{} µs", ns / 1_000)
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let until = |f: &mut fmt::Formatter<'_>, word: &str, left: &Option<Duration>| match left {
            Some(d) => {
                write!(f, "{word} until ")?;
                fmt_left(f, *d)
            }
            None => write!(f, "{word} (no deadline)"),
        };
        let at = |f: &mut fmt::Formatter<'_>, word: &str, addr: &Option<SocketAddr>| match addr {
            Some(a) => write!(f, "{word} {a}"),
            None => f.write_str(word),
        };
        match self {
            WaitReason::Sleep { remaining } => until(f, "sleep", remaining),
            WaitReason::Timeout { remaining } => until(f, "timeout", remaining),
            WaitReason::Interval { remaining } => until(f, "interval", remaining),
            WaitReason::Accept { addr } => at(f, "accept", addr),
            WaitReason::Read { addr } => at(f, "read", addr),
            WaitReason::Write { addr } => at(f, "write", addr),
            WaitReason::Recv { addr } => at(f, "recv", addr),
            WaitReason::Send { addr } => at(f, "send", addr),
            WaitReason::Join { task_id } => write!(f, "join task {task_id}"),
            WaitReason::Blocking { task_id } => write!(f, "blocking task {task_id}"),
            WaitReason::Yield => f.write_str("yield"),
            WaitReason::Sync(s) => s.fmt(f),
            WaitReason::Label(l) => f.write_str(l),
            WaitReason::Unknown => f.write_str("unknown"),
        }
    }
}

/// A wait on a `volt::sync` primitive, as read: what the task waits for, on which
/// resource, and what the resource looked like at the reading (who holds it, how many
/// permits are free). Together, the waits of [`Telemetry::tasks`](super::Telemetry::tasks)
/// form a wait-for graph: task → [`SyncWait::resource`] → [`SyncWait::holder`].
///
/// Its `Display` begins with the operation's word: `lock Mutex (held by task 17
/// "writer")`, `acquire Semaphore (0 of 10 free)`, `read RwLock (held by task 3)`,
/// `write RwLock (held by 2 readers)`, `notified`, `wait Barrier (2 of 5)`,
/// `init OnceCell (held by task 5)`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncWait {
    /// The operation: `lock`, `acquire`, `read`, `write`, `notified`, `wait`, `init`
    /// (and for the channels `recv`, `send`, `changed`).
    pub op: &'static str,
    /// The primitive: `Mutex`, `Semaphore`, `RwLock`, `Notify`, `Barrier`, `OnceCell`
    /// (and `mpsc`, `oneshot`, `broadcast`, `watch`).
    pub primitive: &'static str,
    /// The primitive's resource id: the same for every wait on it while it lives, and
    /// never reused in the process.
    pub resource: u64,
    /// Who holds it alone at the reading (a `Mutex`, an `RwLock`'s writer, a
    /// `OnceCell`'s initializer); `None` when nobody does (or the primitive is gone).
    pub holder: Option<SyncHolder>,
    /// How many permits an `RwLock`'s readers hold at the reading (one each), when no
    /// writer holds it.
    pub readers: Option<u64>,
    /// A `Semaphore`'s free permits and all its permits, at the reading.
    pub permits: Option<(u64, u64)>,
    /// A `Barrier`'s tasks arrived and the parties it waits for, at the reading.
    pub arrived: Option<(u64, u64)>,
    /// Tasks queued on the primitive at the reading.
    pub waiters: Option<u64>,
}

/// Who holds a sync primitive.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncHolder {
    /// A task: its id, and its name (`volt::task::Builder::name`) when the reading
    /// found it among the live tasks.
    Task {
        /// The task's id.
        id: u64,
        /// Its name.
        name: Option<String>,
    },
    /// Code outside any task (`blocking_lock`, a plain thread, `block_on`'s future).
    Outside,
}

impl SyncWait {
    /// Decode a recorded wait, reading the resource's probe now.
    pub(crate) fn read(tag: u8, resource: u64) -> SyncWait {
        use crate::sync::track as t;
        let (op, primitive) = t::tag_words(tag);
        let mut s = SyncWait {
            op,
            primitive,
            resource,
            holder: None,
            readers: None,
            permits: None,
            arrived: None,
            waiters: None,
        };
        let Some(p) = t::read(resource) else { return s };
        s.waiters = Some(p.waiters);
        s.holder = match p.holder {
            0 => None,
            t::OUTSIDE => Some(SyncHolder::Outside),
            id => Some(SyncHolder::Task { id, name: None }),
        };
        match tag {
            t::T_SEM_ACQUIRE | t::T_MPSC_SEND => s.permits = Some((p.free, p.total)),
            t::T_RW_READ | t::T_RW_WRITE if s.holder.is_none() && p.aux > 0 => s.readers = Some(p.aux),
            t::T_BARRIER => s.arrived = Some((p.aux, p.total)),
            _ => {}
        }
        if !t::is_exclusive(tag) && !matches!(tag, t::T_RW_READ) {
            s.holder = None;
        }
        s
    }

    /// The holder's task id, if a task holds it.
    pub fn holder_task(&self) -> Option<u64> {
        match self.holder {
            Some(SyncHolder::Task { id, .. }) => Some(id),
            _ => None,
        }
    }
}

impl fmt::Display for SyncWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.primitive == "Notify" {
            return f.write_str(self.op);
        }
        write!(f, "{} {}", self.op, self.primitive)?;
        match &self.holder {
            Some(SyncHolder::Task { id, name: Some(n) }) => return write!(f, " (held by task {id} {n:?})"),
            Some(SyncHolder::Task { id, name: None }) => return write!(f, " (held by task {id})"),
            Some(SyncHolder::Outside) => return f.write_str(" (held outside a task)"),
            None => {}
        }
        if let Some((free, total)) = self.permits {
            write!(f, " ({free} of {total} free)")
        } else if let Some(r) = self.readers {
            write!(f, " (held by {r} reader{})", if r == 1 { "" } else { "s" })
        } else if let Some((n, of)) = self.arrived {
            write!(f, " ({n} of {of})")
        } else {
            Ok(())
        }
    }
}

/// Name the holders of the sync waits in `tasks` after the tasks of the same reading.
pub(crate) fn name_holders(tasks: &mut [super::TaskInfo]) {
    let names: std::collections::HashMap<u64, String> =
        tasks.iter().filter_map(|t| Some((t.id, t.name.clone()?))).collect();
    if names.is_empty() {
        return;
    }
    let fill = |w: &mut WaitReason| {
        if let WaitReason::Sync(SyncWait { holder: Some(SyncHolder::Task { id, name }), .. }) = w {
            if name.is_none() {
                *name = names.get(id).cloned();
            }
        }
    };
    for t in tasks.iter_mut() {
        t.waits.iter_mut().for_each(fill);
        if let Some(w) = t.waiting_on.as_mut() {
            fill(w);
        }
    }
}

/// Who woke a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WakeSource {
    /// The timer wheel (a sleep, timeout or interval fired).
    Timer,
    /// The I/O driver (a socket became ready).
    Io,
    /// Another task (or the task itself, as `yield_now` does), by its id.
    Task(u64),
    /// The blocking pool (a `spawn_blocking` closure finished).
    Blocking,
    /// A thread outside the runtime's workers and pool (`block_on`'s thread, a plain
    /// thread, a foreign runtime's thread).
    Outside,
    /// Not a wake: the task's spawn queued it (the first `Schedule` event of a task).
    Spawn,
}

impl WakeSource {
    /// Unpack the recorded form (`task::wait::wake_source`).
    pub(crate) fn from_packed(v: u64) -> WakeSource {
        match (v & ((1 << w::SRC_BITS) - 1)) as u8 {
            w::SRC_TIMER => WakeSource::Timer,
            w::SRC_IO => WakeSource::Io,
            w::SRC_TASK => WakeSource::Task(v >> w::SRC_BITS),
            w::SRC_BLOCKING => WakeSource::Blocking,
            w::SRC_SPAWN => WakeSource::Spawn,
            _ => WakeSource::Outside,
        }
    }

    /// The packed form (the event ring's and the console wire's).
    #[cfg(test)]
    pub(crate) fn to_packed(self) -> u64 {
        match self {
            WakeSource::Timer => w::SRC_TIMER as u64,
            WakeSource::Io => w::SRC_IO as u64,
            WakeSource::Task(id) => w::SRC_TASK as u64 | id << w::SRC_BITS,
            WakeSource::Blocking => w::SRC_BLOCKING as u64,
            WakeSource::Outside => w::SRC_OUTSIDE as u64,
            WakeSource::Spawn => w::SRC_SPAWN as u64,
        }
    }
}

impl fmt::Display for WakeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WakeSource::Timer => f.write_str("the timer wheel"),
            WakeSource::Io => f.write_str("the I/O driver"),
            WakeSource::Task(id) => write!(f, "task {id}"),
            WakeSource::Blocking => f.write_str("the blocking pool"),
            WakeSource::Outside => f.write_str("a thread outside the runtime"),
            WakeSource::Spawn => f.write_str("its spawn"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_begins_with_the_kind() {
        let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let cases = [
            (WaitReason::Sleep { remaining: Some(Duration::from_millis(1200)) }, "sleep until +1.2 s"),
            (WaitReason::Read { addr: Some(a) }, "read 127.0.0.1:5000"),
            (WaitReason::Join { task_id: 42 }, "join task 42"),
            (WaitReason::Timeout { remaining: None }, "timeout (no deadline)"),
            (WaitReason::Label("db pool".into()), "db pool"),
            (WaitReason::Unknown, "unknown"),
        ];
        for (r, want) in cases {
            assert_eq!(r.to_string(), want);
            assert!(want.starts_with(r.kind()));
        }
    }

    #[test]
    fn sync_waits_display_the_operation_first() {
        let base = SyncWait {
            op: "lock",
            primitive: "Mutex",
            resource: 1,
            holder: Some(SyncHolder::Task { id: 17, name: Some("writer".into()) }),
            readers: None,
            permits: None,
            arrived: None,
            waiters: Some(1),
        };
        let sem =
            SyncWait { op: "acquire", primitive: "Semaphore", holder: None, permits: Some((0, 10)), ..base.clone() };
        let rw = SyncWait { op: "write", primitive: "RwLock", holder: None, readers: Some(2), ..base.clone() };
        let barrier =
            SyncWait { op: "wait", primitive: "Barrier", holder: None, arrived: Some((2, 5)), ..base.clone() };
        let notify = SyncWait { op: "notified", primitive: "Notify", holder: None, ..base.clone() };
        let outside = SyncWait { holder: Some(SyncHolder::Outside), ..base.clone() };
        let unnamed = SyncWait { holder: Some(SyncHolder::Task { id: 3, name: None }), ..base.clone() };
        let cases = [
            (base, "lock Mutex (held by task 17 \"writer\")"),
            (sem, "acquire Semaphore (0 of 10 free)"),
            (rw, "write RwLock (held by 2 readers)"),
            (barrier, "wait Barrier (2 of 5)"),
            (notify, "notified"),
            (outside, "lock Mutex (held outside a task)"),
            (unnamed, "lock Mutex (held by task 3)"),
        ];
        for (s, want) in cases {
            let r = WaitReason::Sync(s);
            assert_eq!(r.to_string(), want);
            assert!(want.starts_with(r.kind()));
        }
    }

    #[test]
    fn a_sync_wait_on_a_dropped_primitive_names_no_holder() {
        let w = SyncWait::read(crate::sync::track::T_MUTEX_LOCK, u64::MAX - 1);
        assert_eq!((w.op, w.primitive, &w.holder, w.waiters), ("lock", "Mutex", &None, None));
        assert_eq!(w.to_string(), "lock Mutex");
    }

    #[test]
    fn wake_sources_pack_and_unpack() {
        for s in [
            WakeSource::Timer,
            WakeSource::Io,
            WakeSource::Task(77),
            WakeSource::Blocking,
            WakeSource::Outside,
            WakeSource::Spawn,
        ] {
            assert_eq!(WakeSource::from_packed(s.to_packed()), s);
        }
    }
}
