//! The reactor's io_uring backend: readiness through multishot `POLL_ADD`, behind the same
//! `ScheduledIo` bits, wakers and holder-polls model as epoll (see the parent module), so
//! every socket type, hyper, the Tokio I/O traits and every named wait run unchanged.
//!
//! # One ring, shared as the epoll set is
//! The ring plays the part of the epoll set. Any thread may add to its submission queue
//! (under `sq`): a registration arms its socket's multishot poll, a drop removes it, a
//! wake adds a `NOP`. Only the driver's holder reads the completion queue, under the
//! driver's core lock, as only it calls `epoll_wait`. A busy holder reads completions
//! straight from the shared memory, with no system call at all; an idle one waits for
//! one completion in `io_uring_enter`, with the next timer's deadline as its timeout.
//!
//! # Whose thread posts a completion
//! The kernel delivers a poll's completion on the thread that armed it, as "task work":
//! a running thread is interrupted to post it, a sleeping one is woken. (The ring is not
//! set up with `COOP_TASKRUN`, which leaves a running thread alone until it next enters
//! the kernel: with it, requests in the hyper tests went unanswered in 2 of 30 runs with
//! both cores saturated, and in none of 30 such runs without it.) So an
//! event may cost the arming thread an interruption and the holder a wake, where epoll
//! costs the holder alone. A thread that exits takes its requests with it: the kernel
//! ends each of its polls with `-ECANCELED`. The holder arms any poll that ended
//! (cancelled, or a multishot the kernel stopped) again for a source still registered, so
//! a listener built on a thread that then exits keeps working.
//!
//! # Removal and re-arming never cross
//! An armed poll holds the socket's file: a socket closed with its poll armed stays open
//! (no FIN) until the poll goes. Removal queues the poll's cancellation, and the holder
//! queues a re-arm, each under the sources lock, so a re-arm never follows the removal
//! (see `sources`, which has the loom model of it).
//!
//! # Wakes
//! A wake is a `NOP`, which the kernel completes inside the waker's own `io_uring_enter`,
//! so its completion wakes the holder without involving any other thread. Each wake
//! posts its own, as each wake of the epoll reactor writes its eventfd: the park word
//! already keeps a parked worker to one wake. (A latch that let a wake skip its `NOP`
//! while an earlier one was unread made a console test hang at shutdown in 6 of 6 runs,
//! a worker waiting in the ring with no wake left for it, and none of 7 without it. How
//! it lost that wake was not established; it went.)

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::unix::io::RawFd;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::Duration;

/// Submission queue entries: enough for a burst of registrations between submits.
const SQ_ENTRIES: u32 = 1024;
/// Completion queue entries. A multishot poll posts one per wakeup; past this many
/// unread, the kernel keeps the rest (`FEAT_NODROP`) and may end a multishot poll, which
/// the holder then arms again.
const CQ_ENTRIES: u32 = 16 * 1024;

/// The low bits of a request's user data say what it is; the rest is the source's token.
const KIND_BITS: u32 = 2;
const KIND_MASK: u64 = (1 << KIND_BITS) - 1;
const KIND_POLL: u64 = 0;
const KIND_WAKE: u64 = 1;
const KIND_REMOVE: u64 = 2;

// Tokens fit beside the kind bits (`Sources` keeps them to `TOKEN_BITS`).
const _: () = assert!(super::sources::TOKEN_BITS + KIND_BITS == u64::BITS);

/// One reaped completion of a source's poll.
#[derive(Clone, Copy, Debug)]
pub(super) struct PollCompletion {
    pub(super) token: usize,
    /// The poll mask (`>= 0`) or a negated errno.
    pub(super) res: i32,
    /// Whether the multishot poll stays armed.
    pub(super) more: bool,
}

pub(super) struct Uring {
    ring: IoUring,
    /// Held by whoever writes the submission queue.
    sq: Mutex<()>,
    /// Set by the holder when a reap found the completion queue full: only then may the
    /// kernel have kept completions aside (see [`Uring::poll`]). Only the holder, under
    /// the driver's core lock, reads or writes it.
    maybe_overflowed: AtomicBool,
}

fn lock(m: &Mutex<()>) -> std::sync::MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The poll mask for mio's interests: readable is `POLLIN | POLLRDHUP`, as mio asks epoll
/// for `EPOLLIN | EPOLLRDHUP`; errors and hang-ups are always reported.
pub(super) fn poll_mask(interest: mio::Interest) -> u32 {
    let mut mask = 0;
    if interest.is_readable() {
        mask |= (libc::POLLIN | libc::POLLRDHUP) as u32;
    }
    if interest.is_writable() {
        mask |= libc::POLLOUT as u32;
    }
    if interest.is_priority() {
        mask |= libc::POLLPRI as u32;
    }
    mask
}

/// A poll result as the reactor's readiness bits, read the way mio reads an epoll event.
pub(super) fn readiness(mask: u32) -> u64 {
    use super::{ERROR, PRIORITY, READABLE, READ_CLOSED, WRITABLE, WRITE_CLOSED};
    let has = |bit: libc::c_short| mask & bit as u32 != 0;
    let mut bits = 0;
    if has(libc::POLLIN) || has(libc::POLLPRI) {
        bits |= READABLE;
    }
    if has(libc::POLLOUT) {
        bits |= WRITABLE;
    }
    if has(libc::POLLPRI) {
        bits |= PRIORITY;
    }
    if has(libc::POLLERR) {
        bits |= ERROR;
    }
    if has(libc::POLLHUP) || (has(libc::POLLIN) && has(libc::POLLRDHUP)) {
        bits |= READ_CLOSED;
    }
    if has(libc::POLLHUP) || (has(libc::POLLOUT) && has(libc::POLLERR)) || mask == libc::POLLERR as u32 {
        bits |= WRITE_CLOSED;
    }
    bits
}

/// The longest single wait: a timeout past `i64::MAX` seconds would reach the kernel as
/// a negative one, which it refuses at once, and the holder would spin. Waking once a
/// day instead costs nothing (it looks at the timers and waits again).
fn wait_cap(t: Duration) -> Duration {
    t.min(Duration::from_secs(24 * 60 * 60))
}

impl Uring {
    /// A ring, if the kernel offers what this backend needs: multishot polls (5.13) and
    /// waits with a timeout (`EXT_ARG`, 5.11). `LINKED_FILE` (5.17) stands for the first,
    /// which has no feature flag of its own.
    pub(super) fn new() -> io::Result<Uring> {
        Uring::with_entries(SQ_ENTRIES, CQ_ENTRIES)
    }

    fn with_entries(sq: u32, cq: u32) -> io::Result<Uring> {
        let ring = IoUring::builder().setup_cqsize(cq).build(sq)?;
        let params = ring.params();
        if !params.is_feature_ext_arg() || !params.is_feature_nodrop() || !params.is_feature_linked_file() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "this kernel's io_uring is older than 5.17"));
        }
        Ok(Uring { ring, sq: Mutex::new(()), maybe_overflowed: AtomicBool::new(false) })
    }

    /// Queue `entries` (the caller holds `sq`), submitting first whenever the queue is full.
    fn push_locked(&self, _sq: &std::sync::MutexGuard<'_, ()>, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: `sq` is held, so this is the only view of the submission queue; the
            // kernel only reads entries up to the tail the view publishes when dropped.
            let mut q = unsafe { self.ring.submission_shared() };
            // SAFETY: the entries built here (poll, poll remove, nop) point at no memory.
            if unsafe { q.push(entry) }.is_ok() {
                return Ok(());
            }
            drop(q);
            self.submit()?;
        }
    }

    /// Hand what is queued to the kernel.
    pub(super) fn submit(&self) -> io::Result<()> {
        match self.ring.submit() {
            Ok(_) => Ok(()),
            // The kernel takes them at the next enter: the holder's wait submits too.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) || e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn poll_entry(fd: RawFd, token: usize, mask: u32) -> squeue::Entry {
        opcode::PollAdd::new(types::Fd(fd), mask)
            .multi(true)
            .build()
            .user_data(((token as u64) << KIND_BITS) | KIND_POLL)
    }

    /// Arm `fd`'s multishot poll for `token`, now.
    pub(super) fn arm(&self, fd: RawFd, token: usize, mask: u32) -> io::Result<()> {
        {
            let sq = lock(&self.sq);
            self.push_locked(&sq, &Self::poll_entry(fd, token, mask))?;
        }
        self.submit()
    }

    /// Queue a poll again for a source whose poll ended (the caller holds the sources
    /// lock; see the module doc) and will `submit`.
    pub(super) fn queue_rearm(&self, fd: RawFd, token: usize, mask: u32) {
        let sq = lock(&self.sq);
        let _ = self.push_locked(&sq, &Self::poll_entry(fd, token, mask));
    }

    /// Queue the removal of `token`'s poll (the caller holds the sources lock and has
    /// freed the slot; see the module doc) and will `submit`.
    ///
    /// An `ASYNC_CANCEL`, not a `POLL_REMOVE`: a `POLL_REMOVE` that meets the poll while
    /// an event of it is being delivered fails with `-EALREADY` and leaves the poll armed
    /// for good, and the socket open with it. Under a stream of connections that is
    /// common for a listener: dropped, it went on taking connections into its backlog
    /// (the hyper tests' graceful shutdown caught it). A cancel marks the poll, and the
    /// delivery under way ends it.
    pub(super) fn queue_remove(&self, token: usize) {
        let target = ((token as u64) << KIND_BITS) | KIND_POLL;
        let entry = opcode::AsyncCancel::new(target).build().user_data(((token as u64) << KIND_BITS) | KIND_REMOVE);
        let sq = lock(&self.sq);
        let _ = self.push_locked(&sq, &entry);
    }

    /// Make the holder's wait return (or its next one, if it is not waiting).
    pub(super) fn wake(&self) {
        {
            let sq = lock(&self.sq);
            let _ = self.push_locked(&sq, &opcode::Nop::new().build().user_data(KIND_WAKE));
        }
        let _ = self.submit();
    }

    /// Collect completions into `out`, waiting up to `timeout` for one if there are none
    /// (`Some(ZERO)` never waits and, with completions or none, makes no system call
    /// unless the kernel holds completions the queue had no room for).
    ///
    /// The kernel keeps completions aside only when the queue is full, and only the
    /// holder empties it, so a queue found short of full at a reap had nothing kept aside
    /// since the reap before. The overflow flag (which takes the submission lock to read)
    /// is looked at only after a reap that found the queue full.
    ///
    /// # Safety
    /// The caller holds the driver's core lock: only one thread reads the completion queue.
    pub(super) unsafe fn poll(&self, out: &mut Vec<PollCompletion>, timeout: Option<Duration>) {
        // SAFETY: forwarded from the caller.
        let got = unsafe { self.reap(out) };
        if self.maybe_overflowed.load(Relaxed) && self.overflowed() {
            // An enter flushes what the kernel kept aside (`submit` asks for completions
            // when it sees the overflow flag).
            let _ = self.ring.submit();
        } else if got || timeout == Some(Duration::ZERO) {
            return;
        } else {
            // A timeout (ETIME), a signal (EINTR) or a full queue (EBUSY) just end the wait.
            let _ = match timeout {
                Some(t) => {
                    let ts = types::Timespec::from(wait_cap(t));
                    self.ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts))
                }
                None => self.ring.submit_and_wait(1),
            };
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.reap(out) };
    }

    /// Whether the kernel holds completions the queue had no room for (the next enter
    /// flushes them). Clears `maybe_overflowed` when it does not.
    fn overflowed(&self) -> bool {
        let _sq = lock(&self.sq);
        // SAFETY: `sq` is held, so no other view of the submission queue exists (making
        // one reads its tail, which another view may be writing); this one only reads
        // the flags word.
        let overflowed = unsafe { self.ring.submission_shared() }.cq_overflow();
        if !overflowed {
            self.maybe_overflowed.store(false, Relaxed);
        }
        overflowed
    }

    /// Move what the completion queue holds into `out`; whether it held anything.
    ///
    /// # Safety
    /// As for [`poll`](Self::poll).
    unsafe fn reap(&self, out: &mut Vec<PollCompletion>) -> bool {
        // SAFETY: the caller holds the core lock, so this is the only view of the
        // completion queue; dropping it returns the slots read to the kernel.
        let cq = unsafe { self.ring.completion_shared() };
        if cq.is_full() {
            self.maybe_overflowed.store(true, Relaxed);
        }
        let mut any = false;
        for cqe in cq {
            any = true;
            // A wake's completion (and a cancellation's) has done its work by arriving.
            let data = cqe.user_data();
            if data & KIND_MASK == KIND_POLL {
                out.push(PollCompletion {
                    token: (data >> KIND_BITS) as usize,
                    res: cqe.result(),
                    more: cqueue::more(cqe.flags()),
                });
            }
        }
        any
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::reactor::{ERROR, READABLE, READ_CLOSED, WRITABLE, WRITE_CLOSED};

    /// The poll mask reads as mio reads the same epoll bits.
    #[test]
    fn poll_masks_read_as_mio_reads_epoll_events() {
        let m = |bits: libc::c_short| bits as u32;
        assert_eq!(readiness(m(libc::POLLIN)), READABLE);
        assert_eq!(readiness(m(libc::POLLOUT)), WRITABLE);
        assert_eq!(readiness(m(libc::POLLIN | libc::POLLRDHUP)), READABLE | READ_CLOSED);
        assert_eq!(readiness(m(libc::POLLRDHUP)), 0, "a half-close is reported with POLLIN");
        assert_eq!(readiness(m(libc::POLLHUP)), READ_CLOSED | WRITE_CLOSED);
        assert_eq!(readiness(m(libc::POLLERR)), ERROR | WRITE_CLOSED);
        assert_eq!(readiness(m(libc::POLLOUT | libc::POLLERR)), WRITABLE | ERROR | WRITE_CLOSED);
        assert_eq!(readiness(m(libc::POLLIN | libc::POLLERR)), READABLE | ERROR);
        assert_eq!(poll_mask(mio::Interest::READABLE), m(libc::POLLIN | libc::POLLRDHUP));
        assert_eq!(
            poll_mask(mio::Interest::READABLE | mio::Interest::WRITABLE),
            m(libc::POLLIN | libc::POLLRDHUP | libc::POLLOUT)
        );
    }

    /// A far deadline (a `sleep(Duration::MAX)`'s) is waited for a day at a time, never
    /// handed to the kernel as a negative timeout.
    #[test]
    fn far_timeouts_are_capped() {
        assert_eq!(wait_cap(Duration::MAX), Duration::from_secs(86_400));
        assert_eq!(wait_cap(Duration::from_millis(5)), Duration::from_millis(5));
    }

    /// A wake made while nobody waits is not lost: the next wait returns at once, with
    /// the wake's completion reaped and the flag clear for the next one.
    #[test]
    fn a_wake_before_the_wait_ends_it() {
        let u = match Uring::new() {
            Ok(u) => u,
            Err(e) => return eprintln!("skipped: no io_uring here ({e})"),
        };
        let mut out = Vec::new();
        u.wake();
        u.wake();
        // SAFETY: this test is the only reader.
        unsafe { u.poll(&mut out, None) };
        assert!(out.is_empty(), "a wake is not a source's completion");
        // A wake from another thread while this one waits ends the wait.
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                u.wake();
            });
            // SAFETY: as above.
            unsafe { u.poll(&mut out, None) };
        });
        assert!(out.is_empty());
    }

    /// Completions past a full queue, which the kernel keeps aside, all come through
    /// polls that never wait: the overflow is looked for after each reap that found the
    /// queue full, and again at the next poll while the last look found one.
    #[test]
    fn completions_kept_aside_by_a_full_queue_are_reaped() {
        // (The kernel wants a completion queue at least as long as the submission queue.)
        let u = match Uring::with_entries(4, 8) {
            Ok(u) => u,
            Err(e) => return eprintln!("skipped: no io_uring here ({e})"),
        };
        // Posted as if they were sources' polls ending (tokens 1 to 40), five times what
        // the completion queue holds.
        for token in 1..=40u64 {
            let sq = lock(&u.sq);
            u.push_locked(&sq, &opcode::Nop::new().build().user_data(token << KIND_BITS | KIND_POLL)).unwrap();
        }
        u.submit().unwrap();
        let mut out = Vec::new();
        for _ in 0..1000 {
            // SAFETY: this test is the only reader.
            unsafe { u.poll(&mut out, Some(Duration::ZERO)) };
            if out.len() >= 40 {
                break;
            }
        }
        let mut tokens: Vec<usize> = out.iter().map(|c| c.token).collect();
        tokens.sort_unstable();
        assert_eq!(tokens, (1..=40).collect::<Vec<_>>(), "every completion reaped once");
        assert!(!u.overflowed(), "nothing left aside");
        // SAFETY: as above.
        unsafe { u.poll(&mut out, Some(Duration::ZERO)) };
        assert_eq!(out.len(), 40, "nothing reaped twice");
    }
}
