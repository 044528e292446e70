//! What a task waits on, and who woke it: recorded by the leaf futures and the wake path
//! into the task's statistics, read by the telemetry.
//!
//! # Recording a wait
//! A leaf future (a sleep, a socket, a join handle, a user's channel through
//! [`waiting_on`](crate::task::waiting_on)) that returns `Pending` calls one of the
//! `record_*` functions. They find the task being polled on this thread through the
//! thread-local the poll sets anyway (for shields), and write only if the task keeps
//! statistics (the runtime records events); otherwise recording is a thread-local load,
//! a load of the task's state word (in cache: the poll just wrote it) and a branch, and
//! only on `Pending`. Each record is stamped with the number of the poll that wrote it
//! (the task's poll count, which the poll's end advances), and a reader takes it only if
//! it comes from the task's latest poll: a wait left by an earlier poll never outlives
//! the poll that stopped waiting on it, and no poll has to clear anything. The last leaf
//! to return `Pending` in a poll names the wait.
//!
//! # The record: a sequence lock with one writer
//! Only the thread polling the task writes its record (RUNNING is exclusive), so the
//! record is a sequence lock with a single writer: the writer makes the sequence odd,
//! writes the words, and makes it even again; a reader takes the words only if it saw the
//! same even sequence before and after. Every word is an atomic, so a torn read is never
//! undefined, only discarded. A label is a `&'static str` kept as pointer and length:
//! it is rebuilt only from a pair that passed the sequence check, so it is always a
//! string some writer stored. The pointer stays a pointer (`AtomicPtr`), never an
//! integer, so it keeps its provenance.
//!
//! # Wake sources
//! The wake path asks [`wake_source`]: the reactor and the timer wheel mark their wake
//! loops ([`SourceGuard`]), the blocking pool marks its threads, a wake from inside a
//! task's poll names that task, and anything else is a thread outside the runtime.

use super::TaskStats;
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicPtr, AtomicU64};
use std::time::{Duration, Instant};

thread_local! {
    static SOURCE: Cell<u8> = const { Cell::new(SRC_OUTSIDE) };
}

// Wait kinds, as stored in the low byte of the record's first word.
// 0: no wait recorded.
pub(crate) const W_SLEEP: u8 = 1;
pub(crate) const W_TIMEOUT: u8 = 2;
pub(crate) const W_INTERVAL: u8 = 3;
pub(crate) const W_ACCEPT: u8 = 4;
pub(crate) const W_READ: u8 = 5;
pub(crate) const W_WRITE: u8 = 6;
pub(crate) const W_RECV: u8 = 7;
pub(crate) const W_SEND: u8 = 8;
pub(crate) const W_JOIN: u8 = 9;
pub(crate) const W_BLOCKING: u8 = 10;
pub(crate) const W_YIELD: u8 = 11;
pub(crate) const W_LABEL: u8 = 12;

// Flags in the first word, above the kind.
const F_ADDR_V4: u64 = 1 << 8;
const F_ADDR_V6: u64 = 1 << 9;
const F_DEADLINE: u64 = 1 << 10;
const PORT_SHIFT: u32 = 16;
/// The writing poll's number (its low 16 bits), at bits 32..48.
const STAMP_SHIFT: u32 = 32;
const STAMP_MASK: u64 = 0xffff;

/// A task's wait record (see the module doc).
pub(crate) struct WaitRecord {
    seq: AtomicU64,
    /// Kind (low byte), flags, a port (bits 16..32) and the stamp (bits 32..48).
    head: AtomicU64,
    a: AtomicU64,
    b: AtomicU64,
    /// A label's pointer (its length is in `b`), kept as a pointer so it keeps its
    /// provenance.
    label: AtomicPtr<u8>,
}

impl Default for WaitRecord {
    fn default() -> WaitRecord {
        WaitRecord {
            seq: AtomicU64::new(0),
            head: AtomicU64::new(0),
            a: AtomicU64::new(0),
            b: AtomicU64::new(0),
            label: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

/// A record as read: the raw words, decoded by `telemetry::wait`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitWords {
    pub(crate) head: u64,
    pub(crate) a: u64,
    pub(crate) b: u64,
    /// The label, rebuilt from a consistent read.
    pub(crate) label: Option<&'static str>,
}

impl WaitRecord {
    /// Store a record (the polling thread only). Only the words `head`'s kind uses are
    /// written: a reader never looks at the others (`decode`), so a wait with no payload
    /// (a yield) costs three stores.
    #[inline(always)]
    fn write_parts(&self, head: u64, a: Option<u64>, b: Option<u64>, label: Option<*mut u8>) {
        let s = self.seq.load(Relaxed);
        self.seq.store(s.wrapping_add(1), Relaxed);
        fence(Release);
        self.head.store(head, Relaxed);
        if let Some(a) = a {
            self.a.store(a, Relaxed);
        }
        if let Some(b) = b {
            self.b.store(b, Relaxed);
        }
        if let Some(l) = label {
            self.label.store(l, Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Release);
    }

    #[cfg(test)]
    fn write(&self, head: u64, a: u64, b: u64) {
        self.write_parts(head, Some(a), Some(b), None);
    }

    /// Store a label (the polling thread only).
    #[inline]
    fn write_label(&self, head: u64, label: &'static str) {
        self.write_parts(head, None, Some(label.len() as u64), Some(label.as_ptr().cast_mut()));
    }

    /// A consistent copy, or `None` if every try raced with the writer.
    pub(crate) fn read(&self) -> Option<WaitWords> {
        for _ in 0..4 {
            let s1 = self.seq.load(Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut w = WaitWords {
                head: self.head.load(Relaxed),
                a: self.a.load(Relaxed),
                b: self.b.load(Relaxed),
                label: None,
            };
            let label = self.label.load(Relaxed);
            fence(Acquire);
            if self.seq.load(Relaxed) == s1 {
                if w.head as u8 == W_LABEL && !label.is_null() {
                    let len = w.b as usize;
                    // SAFETY: the sequence did not move, so the pointer and the length
                    // are the ones one `write_label` stored together, from a
                    // `&'static str`.
                    w.label = Some(unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(label, len)) });
                }
                return Some(w);
            }
        }
        None
    }
}

/// The stats of the task this thread polls, if it keeps them.
#[inline(always)]
fn current_stats<'a>() -> Option<&'a TaskStats> {
    // The poll's guard (`CurrentTaskGuard`) holds the task for the poll, and a leaf
    // future records only inside it.
    super::current_task().and_then(super::raw::stats)
}

/// The wait record of the task this thread polls, if it keeps statistics.
#[inline(always)]
fn current_wait<'a>() -> Option<(&'a TaskStats, &'a WaitRecord)> {
    // SAFETY: this thread polls the task (see `current_stats`).
    current_stats().map(|st| (st, unsafe { &st.poller().wait }))
}

/// `head` stamped with the number of the poll running now: the poll count after it.
#[inline(always)]
fn stamped(st: &TaskStats, head: u64) -> u64 {
    let n = st.polls.load(Relaxed).wrapping_add(1);
    head | (n & STAMP_MASK) << STAMP_SHIFT
}

/// Record a wait on another task (a join).
#[inline]
pub(crate) fn record_task(kind: u8, id: u64) {
    if let Some((st, wait)) = current_wait() {
        wait.write_parts(stamped(st, kind as u64), Some(id), None, None);
    }
}

/// Record a wait until `deadline` (a sleep, a timeout, an interval's next tick).
#[inline]
pub(crate) fn record_deadline(kind: u8, deadline: Instant) {
    if let Some((st, wait)) = current_wait() {
        // A deadline years away is how "never" is written (`Duration::MAX`): no deadline.
        match deadline.checked_duration_since(base()).filter(|d| *d < NEVER) {
            Some(d) => wait.write_parts(stamped(st, kind as u64 | F_DEADLINE), Some(d.as_nanos() as u64), None, None),
            None => wait.write_parts(stamped(st, kind as u64), None, None, None),
        }
    }
}

/// Record a wait on a socket, with its address if known.
#[inline]
pub(crate) fn record_addr(kind: u8, addr: Option<SocketAddr>) {
    let Some((st, wait)) = current_wait() else { return };
    let (head, a, b) = match addr {
        None => (kind as u64, 0, 0),
        Some(SocketAddr::V4(v4)) => {
            (kind as u64 | F_ADDR_V4 | (v4.port() as u64) << PORT_SHIFT, u32::from(*v4.ip()) as u64, 0)
        }
        Some(SocketAddr::V6(v6)) => {
            let ip = u128::from(*v6.ip());
            (kind as u64 | F_ADDR_V6 | (v6.port() as u64) << PORT_SHIFT, (ip >> 64) as u64, ip as u64)
        }
    };
    wait.write_parts(stamped(st, head), Some(a), Some(b), None);
}

/// Record a user's label.
#[inline]
pub(crate) fn record_label(label: &'static str) {
    if let Some((st, wait)) = current_wait() {
        wait.write_label(stamped(st, W_LABEL as u64), label);
    }
}

/// Where the current task's record stands, taken before a wrapper (a timeout, the Tokio
/// bridge) polls the future it wraps: with [`Mark::unchanged`] after that poll, the
/// wrapper names the wait only when the inner future named none of its own. Recording
/// only after a `Pending`, like every leaf, never leaves a wrapper's wait behind after
/// a poll where the wrapper completed.
#[derive(Clone, Copy)]
pub(crate) struct Mark(Option<u64>);

impl Mark {
    #[inline]
    pub(crate) fn now() -> Mark {
        Mark(current_wait().map(|(_, w)| w.seq.load(Relaxed)))
    }

    /// Whether the task records waits and nothing recorded one since `self`.
    #[inline]
    pub(crate) fn unchanged(self) -> bool {
        // The polling thread is the record's only writer, so its own load is exact.
        self.0.is_some_and(|seq| current_wait().is_some_and(|(_, w)| w.seq.load(Relaxed) == seq))
    }
}

/// Deadlines further than this from the first use in the process are shown as none
/// (the far deadline `Duration::MAX` saturates to is decades away).
const NEVER: Duration = Duration::from_secs(10 * 365 * 86_400);

/// The instant deadlines are stored against (the first use in the process).
fn base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// A decoded wait: what `telemetry::WaitReason` is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    Sleep(Option<Duration>),
    Timeout(Option<Duration>),
    Interval(Option<Duration>),
    Accept(Option<SocketAddr>),
    Read(Option<SocketAddr>),
    Write(Option<SocketAddr>),
    Recv(Option<SocketAddr>),
    Send(Option<SocketAddr>),
    Join(u64),
    Blocking(u64),
    Yield,
    Label(&'static str),
}

impl WaitWords {
    /// A yield, as a reader infers it (nothing records it: see `yield_now`).
    pub(crate) fn yielded() -> WaitWords {
        WaitWords { head: W_YIELD as u64, ..WaitWords::default() }
    }

    /// Whether the record comes from the poll that left the task with `polls` polls.
    pub(crate) fn is_current(&self, polls: u64) -> bool {
        (self.head >> STAMP_SHIFT) & STAMP_MASK == polls & STAMP_MASK
    }

    /// Decode, with time left until a deadline measured at `now`.
    pub(crate) fn decode(self, now: Instant) -> Option<Wait> {
        let kind = self.head as u8;
        let addr = || {
            let port = (self.head >> PORT_SHIFT) as u16;
            if self.head & F_ADDR_V4 != 0 {
                Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(self.a as u32)), port))
            } else if self.head & F_ADDR_V6 != 0 {
                let ip = (self.a as u128) << 64 | self.b as u128;
                Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port))
            } else {
                None
            }
        };
        let left = || {
            (self.head & F_DEADLINE != 0).then(|| {
                let deadline = base() + Duration::from_nanos(self.a);
                deadline.saturating_duration_since(now)
            })
        };
        Some(match kind {
            W_SLEEP => Wait::Sleep(left()),
            W_TIMEOUT => Wait::Timeout(left()),
            W_INTERVAL => Wait::Interval(left()),
            W_ACCEPT => Wait::Accept(addr()),
            W_READ => Wait::Read(addr()),
            W_WRITE => Wait::Write(addr()),
            W_RECV => Wait::Recv(addr()),
            W_SEND => Wait::Send(addr()),
            W_JOIN => Wait::Join(self.a),
            W_BLOCKING => Wait::Blocking(self.a),
            W_YIELD => Wait::Yield,
            W_LABEL => Wait::Label(self.label?),
            _ => return None,
        })
    }
}

// ---- Wake sources --------------------------------------------------------------------

pub(crate) const SRC_OUTSIDE: u8 = 0;
pub(crate) const SRC_TIMER: u8 = 1;
pub(crate) const SRC_IO: u8 = 2;
pub(crate) const SRC_TASK: u8 = 3;
pub(crate) const SRC_BLOCKING: u8 = 4;
/// Not a wake: a spawn's first queueing (the event ring's `Schedule` after a `Spawn`).
pub(crate) const SRC_SPAWN: u8 = 5;
/// Bits of a packed source below the waking task's id.
pub(crate) const SRC_BITS: u32 = 3;

/// Marks this thread's wakes as coming from `source` until dropped.
pub(crate) struct SourceGuard(u8);

impl SourceGuard {
    #[inline]
    pub(crate) fn new(source: u8) -> SourceGuard {
        SourceGuard(SOURCE.with(|s| s.replace(source)))
    }
}

impl Drop for SourceGuard {
    #[inline]
    fn drop(&mut self) {
        SOURCE.with(|s| s.set(self.0));
    }
}

/// Mark this thread (a blocking-pool thread) for its whole life.
pub(crate) fn mark_thread(source: u8) {
    SOURCE.with(|s| s.set(source));
}

/// Who is waking a task on this thread now, packed: the source kind in the low
/// [`SRC_BITS`] bits and, for a task, its id above them. The reactor's and the timer
/// wheel's wake loops name themselves; otherwise the task being polled here (a blocking
/// task counts as the pool); otherwise the thread's own mark (a pool thread), or outside.
#[inline]
pub(crate) fn wake_source() -> u64 {
    let s = SOURCE.with(|s| s.get());
    if s == SRC_TIMER || s == SRC_IO {
        return s as u64;
    }
    if let Some(t) = super::current_task() {
        // SAFETY: the task being polled here is alive for its poll.
        let h = unsafe { t.as_ref() };
        if h.vtable.blocking {
            return SRC_BLOCKING as u64;
        }
        return SRC_TASK as u64 | h.id << SRC_BITS;
    }
    s as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr_words(kind: u8, addr: SocketAddr) -> (u64, u64, u64) {
        match addr {
            SocketAddr::V4(v4) => {
                (kind as u64 | F_ADDR_V4 | (v4.port() as u64) << PORT_SHIFT, u32::from(*v4.ip()) as u64, 0)
            }
            SocketAddr::V6(v6) => {
                let ip = u128::from(*v6.ip());
                (kind as u64 | F_ADDR_V6 | (v6.port() as u64) << PORT_SHIFT, (ip >> 64) as u64, ip as u64)
            }
        }
    }

    #[test]
    fn records_round_trip_through_the_words() {
        let r = WaitRecord::default();
        let now = Instant::now();
        assert_eq!(r.read().unwrap().decode(now), None, "a new record waits on nothing");
        r.write(W_JOIN as u64, 42, 0);
        assert_eq!(r.read().unwrap().decode(now), Some(Wait::Join(42)));
        let v6: SocketAddr = "[2001:db8::7]:5000".parse().unwrap();
        let v4: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let (h, a, b) = addr_words(W_READ, v6);
        r.write(h, a, b);
        assert_eq!(r.read().unwrap().decode(now), Some(Wait::Read(Some(v6))));
        let (h, a, b) = addr_words(W_ACCEPT, v4);
        r.write(h, a, b);
        assert_eq!(r.read().unwrap().decode(now), Some(Wait::Accept(Some(v4))));
        r.write_label(W_LABEL as u64, "a channel");
        assert_eq!(r.read().unwrap().decode(now), Some(Wait::Label("a channel")));
        let at = (now + Duration::from_secs(3)).duration_since(base()).as_nanos() as u64;
        r.write(W_SLEEP as u64 | F_DEADLINE, at, 0);
        assert_eq!(r.read().unwrap().decode(now), Some(Wait::Sleep(Some(Duration::from_secs(3)))));
        r.write(W_TIMEOUT as u64, 0, 0);
        assert_eq!(r.read().unwrap().decode(now), Some(Wait::Timeout(None)), "no deadline: never");
        // Stamps: a record is current only for the poll count it was stamped with.
        r.write(W_YIELD as u64 | 7 << STAMP_SHIFT, 0, 0);
        let w = r.read().unwrap();
        assert!(w.is_current(7) && w.is_current(7 + 65_536) && !w.is_current(8));
    }

    #[test]
    fn outside_a_poll_nothing_is_recorded_and_the_source_is_outside() {
        record_label("x");
        record_task(W_JOIN, 3);
        assert_eq!(wake_source(), SRC_OUTSIDE as u64);
        {
            let _g = SourceGuard::new(SRC_TIMER);
            assert_eq!(wake_source(), SRC_TIMER as u64);
            let _h = SourceGuard::new(SRC_IO);
            assert_eq!(wake_source(), SRC_IO as u64);
        }
        assert_eq!(wake_source(), SRC_OUTSIDE as u64);
    }
}
