//! What a task waits on, and who woke it: recorded by the leaf futures and the wake path
//! into the task's statistics, read by the telemetry.
//!
//! # Recording a wait
//! A leaf future (a sleep, a socket, a join handle, a user's label through
//! [`waiting_on`](crate::task::waiting_on::waiting_on) or [`WaitingOnExt`](crate::task::waiting_on::WaitingOnExt))
//! that returns `Pending` calls one of the `record_*` functions. They find the task being
//! polled on this thread through the thread-local the poll sets anyway (for shields), and
//! write only if the task keeps statistics (the runtime records events); otherwise
//! recording is a thread-local load, a load of the task's state word (in cache: the poll
//! just wrote it) and a branch, and only on `Pending`.
//!
//! # One list per poll
//! The record lists the waits of one poll, in the order they were recorded: up to
//! [`SLOTS`] of them, and a count of those that did not fit (`more`). A `select!` over a
//! sleep and a read lists both; hyper polling a connection's socket while its handler
//! waits on a lock lists both. The list belongs to the poll whose number it is stamped
//! with (the task's poll count, which the poll's end advances): the first record of a
//! poll finds an older stamp and starts the list afresh, and a reader takes the list only
//! if it comes from the task's latest poll. So a wait left by an earlier poll never
//! outlives the poll that stopped waiting on it, no poll has to clear anything, and an
//! idle task whose latest poll recorded nothing waits on something no Volt leaf names
//! (the reader says `unknown`). A wait equal to one already in the list (a loop that polls
//! the same socket twice in a poll) is not listed again.
//!
//! Labels are copied, text and all, into [`LABEL_BYTES`] bytes the record keeps: a
//! reader never follows a pointer into memory the task may have freed (a label owned by a
//! future that has since been dropped), and the labels of one poll share those bytes. A
//! label that does not fit is cut at a character boundary and marked as cut, which the
//! reader shows as a trailing `…`.
//!
//! A wrapper (a timeout, the Tokio bridge, [`WaitingOn`](crate::task::waiting_on::WaitingOn)) takes a
//! [`Mark`] before it polls the future it wraps. A timeout and the bridge name the wait
//! only when the inner future recorded none ([`Mark::unchanged`]); `WaitingOn` puts its
//! label in front of whatever the inner future recorded ([`record_label_at`]), since the
//! user's name for the whole operation is what a reader wants first. Recording only after
//! a `Pending`, like every leaf, never leaves a wrapper's wait behind after a poll where
//! the wrapper completed.
//!
//! # The record: a sequence lock with one writer
//! Only the thread polling the task writes its record (RUNNING is exclusive), so the
//! record is a sequence lock with a single writer: the writer makes the sequence odd,
//! writes the words, and makes it even again; a reader takes the words only if it saw the
//! same even sequence before and after. Every word is an atomic, so a torn read is never
//! undefined, only discarded; the writer reads its own words back with plain loads (it
//! is the only one that stores them). The record holds no pointer, so a copy can be kept
//! and decoded at any time.
//!
//! It is 104 bytes: the sequence, the poll word (the stamp, the slots used, the label
//! bytes used, `more`, and a count of record calls for [`Mark`]), four 4-byte slot heads
//! (a kind, flags, a port, a label's place in the text), four 8-byte payloads (a
//! deadline, an IPv4 address or half an IPv6 one, a task id) and the 40 label bytes. An
//! IPv6 address takes two slots.
//!
//! # Wake sources
//! The wake path asks [`wake_source`]: the reactor and the timer wheel mark their wake
//! loops ([`SourceGuard`]), the blocking pool marks its threads, a wake from inside a
//! task's poll names that task, and anything else is a thread outside the runtime.

mod decode;
mod source;
#[cfg(test)]
mod tests;

pub(crate) use decode::Wait;
use decode::{base, NEVER};
pub(crate) use source::*;

use super::stats::TaskStats;
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicU32, AtomicU64};
use std::time::{Duration, Instant};

thread_local! {
    static SOURCE: Cell<u8> = const { Cell::new(SRC_OUTSIDE) };
}

/// Waits one poll's list holds (an IPv6 address takes two slots).
pub(crate) const SLOTS: usize = 4;
/// Bytes of label text one poll's list holds, shared by its labels.
pub(crate) const LABEL_BYTES: usize = 40;
const LABEL_WORDS: usize = LABEL_BYTES / 8;

// Wait kinds, as stored in the low byte of a slot's head.
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
/// The second slot of an IPv6 address: its low 64 bits.
const W_SPILL: u8 = 13;
/// Never recorded: what a reader puts in its copy for an idle task whose latest poll
/// named no wait.
const W_UNKNOWN: u8 = 14;
/// A wait on a `volt::sync` primitive: the tag (which primitive, which operation) in the
/// head above the kind, the primitive's resource id as the payload (see `sync::track`).
pub(crate) const W_SYNC: u8 = 15;
const SYNC_TAG_SHIFT: u32 = 8;

// Flags in a slot's head, above the kind.
const F_ADDR_V4: u32 = 1 << 8;
const F_ADDR_V6: u32 = 1 << 9;
const F_DEADLINE: u32 = 1 << 10;
const PORT_SHIFT: u32 = 16;
// A label's head: where its text starts in the label bytes, its length, and whether it
// was cut.
const LABEL_AT_SHIFT: u32 = 8;
const LABEL_LEN_SHIFT: u32 = 16;
const F_LABEL_CUT: u32 = 1 << 24;

/// The poll word: what the list of the poll it is stamped with holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PollWord {
    /// Slots used.
    used: usize,
    /// Label bytes used.
    text: usize,
    /// Waits recorded that did not fit (saturating).
    more: u32,
    /// Record calls in this poll, repeats included (wrapping): what [`Mark`] compares.
    calls: u32,
}

const USED_BITS: u32 = 3;
const TEXT_SHIFT: u32 = USED_BITS;
const TEXT_BITS: u32 = 6;
const MORE_SHIFT: u32 = TEXT_SHIFT + TEXT_BITS;
const MORE_BITS: u32 = 11;
const CALLS_SHIFT: u32 = MORE_SHIFT + MORE_BITS;
const CALLS_BITS: u32 = 12;
/// The writing poll's number (its low 32 bits), at bits 32..64.
const STAMP_SHIFT: u32 = 32;

const fn mask(bits: u32) -> u64 {
    (1 << bits) - 1
}

// The fields fit their bits, and leave the stamp its half of the word.
const _: () = assert!(SLOTS as u64 <= mask(USED_BITS) && LABEL_BYTES as u64 <= mask(TEXT_BITS));
const _: () = assert!(CALLS_SHIFT + CALLS_BITS <= STAMP_SHIFT && LABEL_BYTES % 8 == 0);

impl PollWord {
    fn unpack(w: u64) -> PollWord {
        PollWord {
            used: (w & mask(USED_BITS)) as usize,
            text: ((w >> TEXT_SHIFT) & mask(TEXT_BITS)) as usize,
            more: ((w >> MORE_SHIFT) & mask(MORE_BITS)) as u32,
            calls: ((w >> CALLS_SHIFT) & mask(CALLS_BITS)) as u32,
        }
    }

    fn pack(self, stamp: u32) -> u64 {
        self.used as u64
            | (self.text as u64) << TEXT_SHIFT
            | (self.more as u64) << MORE_SHIFT
            | (self.calls as u64 & mask(CALLS_BITS)) << CALLS_SHIFT
            | (stamp as u64) << STAMP_SHIFT
    }

    /// One more wait that did not fit.
    fn add_more(&mut self) {
        self.more = (self.more + 1).min(mask(MORE_BITS) as u32);
    }
}

/// A task's wait record (see the module doc).
#[derive(Default)]
pub(crate) struct WaitRecord {
    seq: AtomicU64,
    /// The poll word ([`PollWord`] and the stamp).
    poll: AtomicU64,
    /// Each slot's kind, flags and port, or a label's place in `text`.
    heads: [AtomicU32; SLOTS],
    /// Each slot's payload: a deadline, an address, a task id (unused by a label).
    payloads: [AtomicU64; SLOTS],
    /// The labels' bytes, eight to a word, little-endian.
    text: [AtomicU64; LABEL_WORDS],
}

/// A record as read: the raw words, decoded by `telemetry::wait`. A plain copy: it holds
/// the labels' bytes, not pointers to them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitWords {
    /// The poll word, without the count of calls (a writer's own business).
    poll: u64,
    heads: [u32; SLOTS],
    payloads: [u64; SLOTS],
    text: [u64; LABEL_WORDS],
}

impl WaitRecord {
    /// The poll word as the writer of poll `stamp` sees it: an older poll's list reads
    /// as empty.
    #[inline(always)]
    fn current(&self, stamp: u32) -> PollWord {
        let w = self.poll.load(Relaxed);
        if (w >> STAMP_SHIFT) as u32 == stamp {
            PollWord::unpack(w)
        } else {
            PollWord::default()
        }
    }

    /// Open a write: the sequence goes odd. Returns it as it was.
    #[inline(always)]
    fn begin(&self) -> u64 {
        let s = self.seq.load(Relaxed);
        self.seq.store(s.wrapping_add(1), Relaxed);
        fence(Release);
        s
    }

    /// Close the write `begin` opened: the sequence goes even again.
    #[inline(always)]
    fn end(&self, s: u64) {
        self.seq.store(s.wrapping_add(2), Release);
    }

    /// A repeat of a listed wait: only the count of calls moves. Readers ignore that
    /// count, so it needs no sequence: a reader sees the same list either way.
    #[inline(always)]
    fn count_call(&self, p: PollWord, stamp: u32) {
        self.poll.store(p.pack(stamp), Relaxed);
    }

    /// Whether the first `used` slots list the wait `head`, `payload` (with `spill` in
    /// the slot after it, for an IPv6 address).
    #[inline(always)]
    fn lists(&self, used: usize, head: u32, payload: u64, spill: Option<u64>) -> bool {
        (0..used).any(|i| {
            self.heads[i].load(Relaxed) == head
                && self.payloads[i].load(Relaxed) == payload
                && spill.is_none_or(|lo| i + 1 < used && self.payloads[i + 1].load(Relaxed) == lo)
        })
    }

    /// Add a wait to the list of poll `stamp` (the polling thread only): `head` and
    /// `payload` in the next slot, and `spill` (an IPv6 address's low half) in the one
    /// after it. A wait already listed is not added again; one that does not fit is
    /// counted in `more`.
    #[inline]
    fn push(&self, stamp: u32, head: u32, payload: u64, spill: Option<u64>) {
        let mut p = self.current(stamp);
        p.calls = p.calls.wrapping_add(1);
        if self.lists(p.used, head, payload, spill) {
            return self.count_call(p, stamp);
        }
        let need = 1 + spill.is_some() as usize;
        let s = self.begin();
        if p.used + need <= SLOTS {
            self.heads[p.used].store(head, Relaxed);
            self.payloads[p.used].store(payload, Relaxed);
            if let Some(lo) = spill {
                self.heads[p.used + 1].store(W_SPILL as u32, Relaxed);
                self.payloads[p.used + 1].store(lo, Relaxed);
            }
            p.used += need;
        } else {
            p.add_more();
        }
        self.poll.store(p.pack(stamp), Relaxed);
        self.end(s);
    }

    /// The label bytes `[at, at + len)`, as the writer stored them.
    fn text_bytes(&self, at: usize, len: usize) -> [u8; LABEL_BYTES] {
        let mut all = [0u8; LABEL_BYTES];
        for (i, w) in self.text.iter().enumerate().skip(at / 8).take((at + len).div_ceil(8) - at / 8) {
            all[i * 8..i * 8 + 8].copy_from_slice(&w.load(Relaxed).to_le_bytes());
        }
        all
    }

    /// Whether the first `used` slots list `label` (as stored: cut, or whole).
    fn lists_label(&self, used: usize, label: &str) -> bool {
        (0..used).any(|i| {
            let head = self.heads[i].load(Relaxed);
            if head as u8 != W_LABEL {
                return false;
            }
            let (at, len, cut) = label_place(head);
            let stored = &self.text_bytes(at, len)[at..at + len];
            label.as_bytes().starts_with(stored) && if cut { label.len() > len } else { label.len() == len }
        })
    }

    /// Copy `label` into the label bytes from `p.text` on, cut at a character boundary
    /// to the room left (inside an open write). Returns the label's slot head.
    fn store_text(&self, p: &mut PollWord, label: &str) -> u32 {
        let room = LABEL_BYTES - p.text;
        let mut len = label.len().min(room);
        while !label.is_char_boundary(len) {
            len -= 1;
        }
        let at = p.text;
        if len > 0 {
            // Assemble the words the label touches in a local copy and store each once:
            // the first may hold the end of the label before, the last the bytes after
            // (whatever they are, no label reads them, but they are left as they were).
            let (first, end) = (at / 8, (at + len).div_ceil(8));
            let mut buf = [0u8; LABEL_BYTES];
            buf[first * 8..first * 8 + 8].copy_from_slice(&self.text[first].load(Relaxed).to_le_bytes());
            if end - 1 > first {
                buf[(end - 1) * 8..end * 8].copy_from_slice(&self.text[end - 1].load(Relaxed).to_le_bytes());
            }
            buf[at..at + len].copy_from_slice(&label.as_bytes()[..len]);
            for w in first..end {
                let bytes: [u8; 8] = buf[w * 8..w * 8 + 8].try_into().expect("eight bytes");
                self.text[w].store(u64::from_le_bytes(bytes), Relaxed);
            }
        }
        p.text += len;
        let cut = if len < label.len() { F_LABEL_CUT } else { 0 };
        W_LABEL as u32 | (at as u32) << LABEL_AT_SHIFT | (len as u32) << LABEL_LEN_SHIFT | cut
    }

    /// Add `label` to the list of poll `stamp` at slot `at` (the polling thread only),
    /// moving the waits from there on one slot down; a wait pushed off the end counts in
    /// `more`. `at` is where the list ended when a wrapper took its [`Mark`], or
    /// `usize::MAX` for the end. A label already listed is not added again.
    fn put_label(&self, stamp: u32, label: &str, at: usize) {
        let mut p = self.current(stamp);
        p.calls = p.calls.wrapping_add(1);
        if self.lists_label(p.used, label) {
            return self.count_call(p, stamp);
        }
        let at = at.min(p.used);
        let s = self.begin();
        if at >= SLOTS {
            p.add_more();
        } else {
            if p.used == SLOTS {
                // Full: the last wait makes room (both slots, for an IPv6 address). `at`
                // is at a wait's first slot, so it is at or before the last wait's.
                let last_spills = self.heads[SLOTS - 1].load(Relaxed) as u8 == W_SPILL;
                p.used -= 1 + last_spills as usize;
                p.add_more();
            }
            let at = at.min(p.used);
            for i in (at..p.used).rev() {
                self.heads[i + 1].store(self.heads[i].load(Relaxed), Relaxed);
                self.payloads[i + 1].store(self.payloads[i].load(Relaxed), Relaxed);
            }
            let head = self.store_text(&mut p, label);
            self.heads[at].store(head, Relaxed);
            self.payloads[at].store(0, Relaxed);
            p.used += 1;
        }
        self.poll.store(p.pack(stamp), Relaxed);
        self.end(s);
    }

    /// A consistent copy, or `None` if every try raced with the writer.
    pub(crate) fn read(&self) -> Option<WaitWords> {
        for _ in 0..4 {
            let s1 = self.seq.load(Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let w = WaitWords {
                poll: self.poll.load(Relaxed) & !(mask(CALLS_BITS) << CALLS_SHIFT),
                heads: std::array::from_fn(|i| self.heads[i].load(Relaxed)),
                payloads: std::array::from_fn(|i| self.payloads[i].load(Relaxed)),
                text: std::array::from_fn(|i| self.text[i].load(Relaxed)),
            };
            fence(Acquire);
            if self.seq.load(Relaxed) == s1 {
                return Some(w);
            }
        }
        None
    }
}

/// A label head's place in the label bytes: start, length, and whether it was cut.
fn label_place(head: u32) -> (usize, usize, bool) {
    let at = ((head >> LABEL_AT_SHIFT) & 0xff) as usize;
    let len = ((head >> LABEL_LEN_SHIFT) & 0xff) as usize;
    // A copy's fields are bounded by the writer; clamping keeps a reader in bounds even
    // so.
    let at = at.min(LABEL_BYTES);
    (at, len.min(LABEL_BYTES - at), head & F_LABEL_CUT != 0)
}

/// The stats of the task this thread polls, if it keeps them.
#[inline(always)]
fn current_stats<'a>() -> Option<&'a TaskStats> {
    // The poll's guard (`CurrentTaskGuard`) holds the task for the poll, and a leaf
    // future records only inside it.
    super::id::current_task().and_then(super::stats::stats)
}

/// The wait record of the task this thread polls, if it keeps statistics, and the
/// number of the poll running now (the stamp of its list).
#[inline(always)]
fn current_wait<'a>() -> Option<(u32, &'a WaitRecord)> {
    let task = super::id::current_task()?;
    super::stats::stats(task).map(|st| {
        // The poll number after the poll that runs now (`Header::polls`, counted whether
        // or not the task's statistics are kept).
        // SAFETY: the poll's guard holds the task (see `current_stats`).
        let stamp = super::header::next_poll_number(unsafe { task.as_ref() }.polls.load(Relaxed));
        // SAFETY: this thread polls the task (see `current_stats`).
        (stamp, unsafe { st.wait_writer() })
    })
}

/// Record a wait on another task (a join).
#[inline]
pub(crate) fn record_task(kind: u8, id: u64) {
    if let Some((stamp, wait)) = current_wait() {
        wait.push(stamp, kind as u32, id, None);
    }
}

/// Record a wait until `deadline` (a sleep, a timeout, an interval's next tick).
#[inline]
pub(crate) fn record_deadline(kind: u8, deadline: Instant) {
    if let Some((stamp, wait)) = current_wait() {
        // A deadline years away is how "never" is written (`Duration::MAX`): no deadline.
        match deadline.checked_duration_since(base()).filter(|d| *d < NEVER) {
            Some(d) => wait.push(stamp, kind as u32 | F_DEADLINE, d.as_nanos() as u64, None),
            None => wait.push(stamp, kind as u32, 0, None),
        }
    }
}

/// Record a wait on a socket, with its address if known.
#[inline]
pub(crate) fn record_addr(kind: u8, addr: Option<SocketAddr>) {
    let Some((stamp, wait)) = current_wait() else { return };
    match addr {
        None => wait.push(stamp, kind as u32, 0, None),
        Some(SocketAddr::V4(v4)) => {
            let head = kind as u32 | F_ADDR_V4 | (v4.port() as u32) << PORT_SHIFT;
            wait.push(stamp, head, u32::from(*v4.ip()) as u64, None)
        }
        Some(SocketAddr::V6(v6)) => {
            let ip = u128::from(*v6.ip());
            let head = kind as u32 | F_ADDR_V6 | (v6.port() as u32) << PORT_SHIFT;
            wait.push(stamp, head, (ip >> 64) as u64, Some(ip as u64))
        }
    }
}

/// Record a wait on a `volt::sync` primitive: `tag` says which primitive and which
/// operation, `resource` is the primitive's id in `sync::track`'s registry, through which
/// a reader finds who holds it at the time of reading.
#[inline]
pub(crate) fn record_sync(tag: u8, resource: u64) {
    if let Some((stamp, wait)) = current_wait() {
        wait.push(stamp, W_SYNC as u32 | (tag as u32) << SYNC_TAG_SHIFT, resource, None);
    }
}

/// Whether the task polled on this thread keeps statistics, so that its waits are
/// recorded (a primitive registers itself for readers only then).
#[inline]
pub(crate) fn watching() -> bool {
    current_stats().is_some()
}

/// The id of the task polled on this thread.
#[inline]
pub(crate) fn current_task_id() -> Option<u64> {
    // SAFETY: the poll's guard (`CurrentTaskGuard`) keeps the task alive while it is
    // this thread's current task, and the id never changes after the spawn.
    super::id::current_task().map(|t| unsafe { t.as_ref() }.id)
}

/// Record a user's label, after the waits recorded so far in this poll.
#[inline]
pub(crate) fn record_label(label: &str) {
    if let Some((stamp, wait)) = current_wait() {
        wait.put_label(stamp, label, usize::MAX);
    }
}

/// Record a wrapper's label in front of the waits its future recorded since `mark`.
#[inline]
pub(crate) fn record_label_at(mark: Mark, label: &str) {
    let Some(m) = mark.0 else { return };
    if let Some((stamp, wait)) = current_wait() {
        wait.put_label(stamp, label, m.used);
    }
}

/// Where the current task's list stands, taken before a wrapper (a timeout, the Tokio
/// bridge, `WaitingOn`) polls the future it wraps: after that poll, [`Mark::unchanged`]
/// says whether the inner future recorded anything, and [`record_label_at`] puts a label
/// where the inner future's waits begin.
#[derive(Clone, Copy)]
pub(crate) struct Mark(Option<PollWord>);

impl Mark {
    #[inline]
    pub(crate) fn now() -> Mark {
        Mark(current_wait().map(|(stamp, w)| w.current(stamp)))
    }

    /// Whether the task records waits and nothing recorded one since `self` (a repeat of
    /// a listed wait counts as recorded: the inner future named its wait).
    #[inline]
    pub(crate) fn unchanged(self) -> bool {
        // The polling thread is the record's only writer, so its own load is exact.
        self.0.is_some_and(|m| current_wait().is_some_and(|(stamp, w)| w.current(stamp).calls == m.calls))
    }
}
