//! The driver: a reactor plus the timer wheel, owned by whichever worker holds its lock.
//! The reactor waits on epoll through mio, as described here, or on an io_uring ring of
//! multishot polls (`uring.rs`, chosen with `Builder::io_driver`), which keeps the same
//! protocol with the ring in the epoll set's place.
//!
//! # Who polls the reactor
//! * A worker that runs out of work `try_lock`s the driver on its way to park. If it gets
//!   it, it parks *in the reactor*: it blocks in `mio::Poll::poll` with a timeout at the
//!   next timer deadline (or none), instead of on its futex. Events that are already
//!   waiting make that poll return at once, so this one system call both collects them
//!   and, when there are none, puts the worker to sleep. So while any worker is parked,
//!   one of them is always listening for I/O and timers; the others sleep on their
//!   futexes. (The worker that parks last finds the driver free and takes it, unless an
//!   earlier parker already sleeps in it, which serves the same purpose.)
//! * A running worker `try_lock`s the driver (never waiting for it) at the start of a
//!   budget tick when a timer is due, and whenever it has run `IO_POLL_INTERVAL` (64) polls
//!   since it last polled the reactor; then it polls mio with a zero timeout (if any I/O
//!   source is registered) and fires due timers. Polling the reactor at every tick instead
//!   made a worker that keeps finding a little work spin on `epoll_wait(0)`, each call
//!   returning a handful of events, where blocking when idle collects many per call and
//!   leaves the CPU to others meanwhile. When nothing is due this costs a subtraction, a
//!   compare and, for the timers, an atomic load.
//!
//! # Waking a worker parked in the reactor
//! The worker's park word goes UNPARKED -> PARKED_DRIVER (CAS) before it calls
//! `mio::Poll::poll`. `unpark` swaps in NOTIFIED and, if it saw PARKED_DRIVER, writes the
//! `mio::Waker` (an eventfd) instead of the futex. The eventfd stays readable until the
//! next poll reads it, so a wake that lands between the CAS and the `poll` call makes the
//! poll return at once: no wake is lost and none waits for the timeout. A new timer earlier
//! than the reactor's timeout also writes the waker (see `time`). `loom_park_in_reactor_*`
//! models this, and `tests/io.rs` stresses it.
//!
//! After the poll, the worker leaves the parked state first and only then dispatches:
//! readiness is stored in each source's `ScheduledIo`, the tasks waiting on it and the due
//! timers' tasks are woken onto this worker's own queues, and, once the batch is queued,
//! one parked worker is notified to steal from there if more than one task waits (the
//! dispatching worker runs the first itself).
//!
//! # Readiness
//! Each registered source has a `ScheduledIo`: readiness bits plus a generation, bumped
//! by every event, in one `AtomicU64`, and the wakers of every task waiting to read and
//! of every task waiting to write. An operation that hits `WouldBlock` clears the
//! readiness it acted on only if the generation is unchanged, so an event that arrived
//! meanwhile is never erased (mio is edge-triggered).
//! At shutdown every source is marked `SHUTDOWN` and woken: later operations on it fail
//! with an error instead of waiting forever.

mod sources;
mod uring;

use sources::Sources;

use crate::driver::Handle;
use crate::task::wait;
use crate::time::driver::TimeDriver;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

const WAKER_TOKEN: mio::Token = mio::Token(0);
const EVENTS_CAPACITY: usize = 1024;

pub(crate) const READABLE: u64 = 1;
pub(crate) const WRITABLE: u64 = 1 << 1;
pub(crate) const READ_CLOSED: u64 = 1 << 2;
pub(crate) const WRITE_CLOSED: u64 = 1 << 3;
pub(crate) const ERROR: u64 = 1 << 4;
const SHUTDOWN: u64 = 1 << 5;
/// Priority data (`EPOLLPRI`), reported only for a source registered for it
/// (`io::unix::AsyncFd` with `Interest::PRIORITY`).
pub(crate) const PRIORITY: u64 = 1 << 6;
const GEN_SHIFT: u32 = 16;
const GEN_ONE: u64 = 1 << GEN_SHIFT;

/// What an operation waits on: a half of the source, or (on the readers' list of
/// wakers, as the kernel reports them with reads) its priority data or its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
    Priority,
    Error,
}

impl Direction {
    fn mask(self) -> u64 {
        match self {
            Direction::Read => READABLE | READ_CLOSED | ERROR,
            Direction::Write => WRITABLE | WRITE_CLOSED | ERROR,
            Direction::Priority => PRIORITY | READ_CLOSED | ERROR,
            Direction::Error => ERROR,
        }
    }
}

/// What wakes the readers' list: everything but writability.
const READERS: u64 = READABLE | READ_CLOSED | ERROR | PRIORITY;

/// The readiness an operation observed, so it can clear exactly that.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadyEvent {
    generation: u64,
    ready: u64,
}

impl ReadyEvent {
    /// The readiness bits seen (`READABLE`, `WRITABLE`, `READ_CLOSED`, ...), for
    /// `net::Ready`.
    pub(crate) fn bits(&self) -> u64 {
        self.ready
    }

    /// Two events of one source as one: every bit either saw, with the newer generation
    /// (an operation that follows both loads may clear what either saw, but not what a
    /// later event brings).
    pub(crate) fn union(self, other: ReadyEvent) -> ReadyEvent {
        ReadyEvent { generation: self.generation.max(other.generation), ready: self.ready | other.ready }
    }

    /// The same event, naming only `ready` of its bits.
    pub(crate) fn with_bits(self, ready: u64) -> ReadyEvent {
        ReadyEvent { ready, ..self }
    }
}

/// Per-source readiness and wakers.
pub(crate) struct ScheduledIo {
    readiness: AtomicU64,
    reader: Mutex<Waiters>,
    writer: Mutex<Waiters>,
}

/// The tasks waiting for one direction of a source.
///
/// Every one of them is woken by an event, as Tokio's are: several tasks may `accept`
/// on one shared listener or `recv` on one shared UDP socket, and a single slot would
/// leave all but the last of them asleep for good. The first waiter has a slot of its
/// own, so a source with one waiter (nearly all) never allocates; a waker already there
/// (`will_wake`) is not added twice, so a task polling again does not grow the list.
/// A waiter that gave up (its future dropped) stays until the next event or the
/// source's end, and then gets one spurious wake.
#[derive(Default)]
struct Waiters {
    first: Option<Waker>,
    /// The others, only while `first` is set.
    more: Vec<Waker>,
}

impl Waiters {
    fn register(&mut self, waker: &Waker) {
        match &self.first {
            None => self.first = Some(waker.clone()),
            Some(first) if first.will_wake(waker) => {}
            Some(_) => {
                if !self.more.iter().any(|w| w.will_wake(waker)) {
                    self.more.push(waker.clone());
                }
            }
        }
    }

    /// Move every waiter to `wake`.
    fn take_into(&mut self, wake: &mut Vec<Waker>) {
        if let Some(first) = self.first.take() {
            wake.push(first);
            // `append` keeps the list's buffer for the next time several wait.
            wake.append(&mut self.more);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ScheduledIo {
    fn new(ready: u64) -> ScheduledIo {
        ScheduledIo { readiness: AtomicU64::new(ready), reader: Mutex::default(), writer: Mutex::default() }
    }

    /// Add readiness bits (bumping the generation) and collect the wakers to wake.
    fn set_readiness(&self, bits: u64, wake: &mut Vec<Waker>) {
        let _ = self.readiness.fetch_update(AcqRel, Acquire, |cur| Some((cur | bits).wrapping_add(GEN_ONE)));
        if bits & (READERS | SHUTDOWN) != 0 {
            lock(&self.reader).take_into(wake);
        }
        if bits & (Direction::Write.mask() | SHUTDOWN) != 0 {
            lock(&self.writer).take_into(wake);
        }
    }
}

/// Which system interface the reactor waits on (see `Builder::io_driver`).
enum Backend {
    Epoll { registry: mio::Registry, waker: mio::Waker },
    Uring(Box<uring::Uring>),
}

/// The I/O half shared with registrations (no driver lock needed).
pub(crate) struct IoShared {
    backend: Backend,
    sources: Mutex<Sources<ScheduledIo>>,
    registered: AtomicUsize,
    shutdown: AtomicBool,
}

/// What the holder polls: the epoll set and its events, or the io_uring completions
/// reaped for sources.
enum Poller {
    Epoll { poll: mio::Poll, events: mio::Events },
    Uring { completions: Vec<uring::PollCompletion> },
}

/// What only the driver holder touches.
pub(crate) struct DriverCore {
    poller: Poller,
    wake: Vec<Waker>,
}

impl DriverCore {
    /// Whether the last poll collected an I/O event (the reactor's own waker aside).
    #[cfg(feature = "test-util")]
    pub(crate) fn has_io_events(&self) -> bool {
        match &self.poller {
            Poller::Epoll { events, .. } => events.iter().any(|ev| ev.token() != WAKER_TOKEN),
            Poller::Uring { completions } => !completions.is_empty(),
        }
    }
}

/// The I/O driver a runtime uses, chosen with [`Builder::io_driver`].
///
/// [`Builder::io_driver`]: crate::runtime::Builder::io_driver
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IoDriver {
    /// The default: the `VOLT_IO_DRIVER` environment variable's choice (`epoll` or
    /// `io_uring`) if it is set, else epoll, the faster of the two on every workload
    /// measured so far (see the README's "I/O drivers").
    #[default]
    Auto,
    /// epoll, through mio.
    Epoll,
    /// io_uring's multishot polls. The runtime fails to build if the kernel does not
    /// offer what it needs (Linux 5.17 or later, with io_uring not disabled).
    IoUring,
}

impl IoDriver {
    /// The driver `Auto` stands for here, or an error naming a bad `VOLT_IO_DRIVER`.
    fn resolve(self) -> io::Result<IoDriver> {
        self.resolve_with(std::env::var("VOLT_IO_DRIVER").ok().as_deref())
    }

    /// [`resolve`](Self::resolve) with `env` as the variable's value.
    fn resolve_with(self, env: Option<&str>) -> io::Result<IoDriver> {
        if self != IoDriver::Auto {
            return Ok(self);
        }
        match env.map(str::trim) {
            None | Some("" | "auto" | "epoll") => Ok(IoDriver::Epoll),
            Some("io_uring" | "io-uring" | "uring") => Ok(IoDriver::IoUring),
            Some(other) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("VOLT_IO_DRIVER={other:?}: expected \"epoll\" or \"io_uring\""),
            )),
        }
    }
}

/// The runtime's reactor and timers.
pub(crate) struct Driver {
    core: Mutex<DriverCore>,
    pub(crate) io: IoShared,
    pub(crate) time: TimeDriver,
}

/// What one dispatch delivered, for the worker's counters.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct Dispatched {
    pub(crate) io_events: u64,
    pub(crate) timers_fired: u64,
}

impl Driver {
    pub(crate) fn new(choice: IoDriver) -> io::Result<Driver> {
        let (backend, poller) = match choice.resolve()? {
            IoDriver::IoUring => {
                let ring = uring::Uring::new().map_err(|e| {
                    io::Error::new(e.kind(), format!("the io_uring I/O driver is not available here: {e}"))
                })?;
                (Backend::Uring(Box::new(ring)), Poller::Uring { completions: Vec::new() })
            }
            _ => {
                let poll = mio::Poll::new()?;
                let registry = poll.registry().try_clone()?;
                let waker = mio::Waker::new(poll.registry(), WAKER_TOKEN)?;
                let events = mio::Events::with_capacity(EVENTS_CAPACITY);
                (Backend::Epoll { registry, waker }, Poller::Epoll { poll, events })
            }
        };
        Ok(Driver {
            core: Mutex::new(DriverCore { poller, wake: Vec::new() }),
            io: IoShared {
                backend,
                sources: Mutex::new(Sources::default()),
                registered: AtomicUsize::new(0),
                shutdown: AtomicBool::new(false),
            },
            time: TimeDriver::new(),
        })
    }

    /// Take the driver if nobody has it. Never waits.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, DriverCore>> {
        match self.core.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Whether any I/O source is registered (else a non-blocking poll has nothing to find).
    pub(crate) fn has_io_sources(&self) -> bool {
        self.io.registered.load(Relaxed) > 0
    }

    /// The I/O driver in use (never `Auto`).
    pub(crate) fn io_driver(&self) -> IoDriver {
        match self.io.backend {
            Backend::Epoll { .. } => IoDriver::Epoll,
            Backend::Uring(_) => IoDriver::IoUring,
        }
    }

    /// Interrupt the worker blocked in the reactor (or make its next poll return).
    pub(crate) fn wake_reactor(&self) {
        match &self.io.backend {
            Backend::Epoll { waker, .. } => {
                let _ = waker.wake();
            }
            Backend::Uring(ring) => ring.wake(),
        }
    }

    /// Poll for events (blocking up to `timeout`; `Some(ZERO)` never blocks). The events
    /// stay in `core` until `dispatch`.
    pub(crate) fn poll_io(&self, core: &mut DriverCore, timeout: Option<Duration>) {
        let idle = self.io.registered.load(Relaxed) == 0 && timeout == Some(Duration::ZERO);
        match (&mut core.poller, &self.io.backend) {
            (Poller::Epoll { poll, events }, _) => {
                if idle {
                    events.clear();
                    return;
                }
                if let Err(e) = poll.poll(events, timeout) {
                    // EINTR just ends this poll early; anything else leaves no events to
                    // handle.
                    if e.kind() != io::ErrorKind::Interrupted {
                        events.clear();
                    }
                }
            }
            (Poller::Uring { completions }, Backend::Uring(ring)) => {
                if !idle {
                    // SAFETY: `core` is the driver's core, borrowed from its lock's guard,
                    // so this thread is the completion queue's only reader.
                    unsafe { ring.poll(completions, timeout) };
                }
            }
            (Poller::Uring { .. }, Backend::Epoll { .. }) => unreachable!("the poller and backend are made together"),
        }
    }

    /// Deliver the polled events and fire due timers, then wake their tasks (from the
    /// caller's thread, a worker, so they land in its own queues). `count` records the
    /// figures *before* the wakes, so whoever a wake reaches also sees them counted.
    pub(crate) fn dispatch(&self, core: &mut DriverCore, now: Instant, count: impl FnOnce(Dispatched)) {
        let DriverCore { poller, wake } = core;
        let mut out = Dispatched::default();
        // A pass for timers only has no events: skip the sources lock. Readiness is stored
        // while the lock is held, which keeps each source alive without an `Arc` clone per
        // event (nothing takes the sources lock while holding a list of wakers' lock).
        match poller {
            Poller::Epoll { events, .. } => self.dispatch_epoll(events, wake, &mut out),
            Poller::Uring { completions } => self.dispatch_uring(completions, wake, &mut out),
        }
        let io_wakes = wake.len();
        if self.time.is_due(now) {
            out.timers_fired = self.time.process(now, wake) as u64;
        }
        count(out);
        if io_wakes > 0 {
            let _source = wait::SourceGuard::new(wait::SRC_IO);
            for w in wake.drain(..io_wakes) {
                w.wake();
            }
        }
        if !wake.is_empty() {
            let _source = wait::SourceGuard::new(wait::SRC_TIMER);
            for w in wake.drain(..) {
                w.wake();
            }
        }
    }

    /// Store the readiness of epoll's events (see `dispatch`).
    fn dispatch_epoll(&self, events: &mut mio::Events, wake: &mut Vec<Waker>, out: &mut Dispatched) {
        if events.is_empty() {
            return;
        }
        let sources = lock(&self.io.sources);
        for ev in events.iter() {
            if ev.token() == WAKER_TOKEN {
                continue;
            }
            // An event for a source dropped since the poll finds nothing (or, for a
            // slot used again, a newer generation): see `Sources`.
            let Some(io) = sources.get(ev.token().0) else { continue };
            let mut bits = 0;
            if ev.is_readable() {
                bits |= READABLE;
            }
            if ev.is_writable() {
                bits |= WRITABLE;
            }
            if ev.is_read_closed() {
                bits |= READ_CLOSED;
            }
            if ev.is_write_closed() {
                bits |= WRITE_CLOSED;
            }
            if ev.is_error() {
                bits |= ERROR;
            }
            if ev.is_priority() {
                bits |= PRIORITY;
            }
            io.set_readiness(bits, wake);
            out.io_events += 1;
        }
        drop(sources);
        events.clear();
    }

    /// Store the readiness of io_uring's poll completions, and arm again each poll that
    /// ended for a source still registered (see `uring`).
    fn dispatch_uring(
        &self,
        completions: &mut Vec<uring::PollCompletion>,
        wake: &mut Vec<Waker>,
        out: &mut Dispatched,
    ) {
        if completions.is_empty() {
            return;
        }
        let Backend::Uring(ring) = &self.io.backend else { unreachable!("the poller and backend are made together") };
        let sources = lock(&self.io.sources);
        let mut rearmed = false;
        for c in completions.drain(..) {
            // A completion for a source dropped since finds nothing (see `Sources`).
            let Some(io) = sources.get(c.token) else { continue };
            if c.res >= 0 {
                io.set_readiness(uring::readiness(c.res as u32), wake);
                out.io_events += 1;
            }
            if c.more {
                continue;
            }
            if c.res >= 0 || c.res == -libc::ECANCELED {
                // Ended by the kernel (a full completion queue) or with the thread that
                // armed it: arm it again, under the sources lock (see `sources`).
                rearmed |= sources.rearm(c.token, |fd, token, mask| ring.queue_rearm(fd, token, mask));
            } else {
                // The poll cannot be armed (a descriptor closed under its registration,
                // say): let the waiters run their operation and meet the error.
                io.set_readiness(ERROR | READ_CLOSED | WRITE_CLOSED, wake);
            }
        }
        drop(sources);
        if rearmed {
            let _ = ring.submit();
        }
    }

    /// Runtime shutdown: every source fails from now on, and its waiters wake to see it;
    /// every timer fires (see `TimeDriver::shutdown`). Returns how many timers fired.
    pub(crate) fn shutdown(&self) -> u64 {
        self.io.shutdown.store(true, Relaxed);
        let taken: Vec<Arc<ScheduledIo>> = lock(&self.io.sources).live().cloned().collect();
        let (mut wake, timers_fired) = self.time.shutdown();
        for io in taken {
            io.set_readiness(SHUTDOWN, &mut wake);
        }
        for w in wake {
            w.wake();
        }
        timers_fired
    }
}

fn shutdown_error() -> io::Error {
    crate::shutdown_error::shutdown_error("the Volt runtime this I/O resource belongs to has shut down")
}

// A panic that unwinds past a socket leaves its registration consistent: readiness is
// one atomic word, and the wakers' slots and the sources slab change under locks no user
// code runs in. So Volt's sockets are unwind safe, as Tokio's.
impl std::panic::UnwindSafe for Registration {}
impl std::panic::RefUnwindSafe for Registration {}

/// A source's registration with its runtime's reactor.
pub(crate) struct Registration {
    driver: Handle,
    io: Arc<ScheduledIo>,
    token: usize,
    /// What a task waiting on this source waits on (`task::wait`), set by the socket.
    wait: WaitAs,
}

/// How a wait on a source is named: the kinds of its read and write waits, and the
/// address shown with them (the peer of a stream, the local address of a listener or a
/// datagram socket).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitAs {
    pub(crate) read: u8,
    pub(crate) write: u8,
    pub(crate) addr: Option<std::net::SocketAddr>,
}

impl Registration {
    /// Register `source` with the current runtime's reactor. Its first operation waits
    /// for the reactor's first event.
    pub(crate) fn new(
        source: &mut (impl mio::event::Source + AsRawFd),
        interest: mio::Interest,
    ) -> io::Result<Registration> {
        let fd = source.as_raw_fd();
        Registration::with_readiness(source, fd, interest, 0)
    }

    /// [`new`](Self::new) for a bare descriptor (a child's pipe, an `AsyncFd`'s).
    pub(crate) fn new_fd(fd: RawFd, interest: mio::Interest) -> io::Result<Registration> {
        Registration::with_readiness(&mut mio::unix::SourceFd(&fd), fd, interest, 0)
    }

    /// Register an established stream (accepted, or adopted connected): its first read
    /// and write are tried at once instead of waiting for the reactor's first event.
    ///
    /// Such a socket is writable, and often already holds its peer's first bytes (a
    /// client writes its request right after connecting, and under load the accept comes
    /// later). Waiting for the reactor to report what the kernel already knows costs a
    /// trip through it, and a worker that is not scheduled in time delays that trip: a
    /// request that arrived with its connection would be kept waiting by the reactor.
    /// A guess that proves wrong costs one `WouldBlock`, which clears the guessed bits
    /// (only if no event has arrived meanwhile: the generation check of
    /// [`clear_readiness`](Self::clear_readiness)).
    pub(crate) fn established(source: &mut (impl mio::event::Source + AsRawFd)) -> io::Result<Registration> {
        let fd = source.as_raw_fd();
        Registration::with_readiness(source, fd, mio::Interest::READABLE | mio::Interest::WRITABLE, READABLE | WRITABLE)
    }

    /// Register a source known to be writable and not yet readable (one end of a fresh
    /// socket pair): its first write is tried at once, its first read waits for an event.
    pub(crate) fn writable(
        source: &mut (impl mio::event::Source + AsRawFd),
        interest: mio::Interest,
    ) -> io::Result<Registration> {
        let fd = source.as_raw_fd();
        Registration::with_readiness(source, fd, interest, WRITABLE)
    }

    fn with_readiness(
        source: &mut impl mio::event::Source,
        fd: RawFd,
        interest: mio::Interest,
        ready: u64,
    ) -> io::Result<Registration> {
        let driver = Handle::current().ok_or_else(|| {
            io::Error::other("volt I/O resources must be created inside a Volt runtime (a task or `Runtime::block_on`)")
        })?;
        let io = Arc::new(ScheduledIo::new(ready));
        let token = {
            let mut sources = lock(&driver.io.sources);
            // Checked under the lock `Driver::shutdown` takes after setting the flag: a
            // source is either in its walk (and marked) or sees the flag here.
            if driver.io.shutdown.load(Relaxed) {
                return Err(shutdown_error());
            }
            let arm = matches!(driver.io.backend, Backend::Uring(_)).then(|| (fd, uring::poll_mask(interest)));
            sources.insert(Arc::clone(&io), arm)?
        };
        let r = match &driver.io.backend {
            Backend::Epoll { registry, .. } => registry.register(source, mio::Token(token), interest),
            Backend::Uring(ring) => ring.arm(fd, token, uring::poll_mask(interest)),
        };
        if let Err(e) = r {
            lock(&driver.io.sources).remove(token, &io);
            return Err(e);
        }
        driver.io.registered.fetch_add(1, Relaxed);
        let wait = WaitAs { read: wait::W_READ, write: wait::W_WRITE, addr: None };
        Ok(Registration { driver, io, token, wait })
    }

    /// Name the waits on this source (see [`WaitAs`]).
    pub(crate) fn set_wait(&mut self, wait: WaitAs) {
        self.wait = wait;
    }

    /// Wait until the source may be ready in `dir` (or has failed, or the runtime shut down).
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<io::Result<ReadyEvent>> {
        // A task that spent its poll's budget yields here (see `task::coop`).
        std::task::ready!(crate::task::coop::poll_budget(cx));
        let r = self.poll_ready_now(cx, dir);
        if r.is_ready() {
            crate::task::coop::spend();
        }
        r
    }

    /// [`poll_ready`](Self::poll_ready) without the cooperative budget: for the readiness
    /// waits (`readable`, `writable`, `ready`), which Tokio does not count either (the
    /// operation that follows them does).
    pub(crate) fn poll_ready_now(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<io::Result<ReadyEvent>> {
        let mask = dir.mask();
        let check = |cur: u64| -> Option<io::Result<ReadyEvent>> {
            if cur & SHUTDOWN != 0 {
                return Some(Err(shutdown_error()));
            }
            (cur & mask != 0).then_some(Ok(ReadyEvent { generation: cur >> GEN_SHIFT, ready: cur & mask }))
        };
        if let Some(r) = check(self.io.readiness.load(Acquire)) {
            return Poll::Ready(r);
        }
        {
            let slot = match dir {
                Direction::Write => &self.io.writer,
                Direction::Read | Direction::Priority | Direction::Error => &self.io.reader,
            };
            lock(slot).register(cx.waker());
        }
        // An event may have landed before the waker was stored.
        match check(self.io.readiness.load(Acquire)) {
            Some(r) => Poll::Ready(r),
            None => {
                let kind = match dir {
                    Direction::Write => self.wait.write,
                    Direction::Read | Direction::Priority | Direction::Error => self.wait.read,
                };
                wait::record_addr(kind, self.wait.addr);
                Poll::Pending
            }
        }
    }

    /// After `WouldBlock`: clear the readiness `ev` saw, unless a newer event arrived.
    ///
    /// Every bit it saw goes, the closed and error bits too. An operation that answers
    /// `WouldBlock` has shown that none of them holds any more: a closed half answers
    /// end-of-stream or an error, never `WouldBlock`, and a socket error is reported by
    /// the one call that consumes it (a connected UDP socket's `ConnectionRefused`, say).
    /// A bit left set would make the next wait return at once, and the operation loop
    /// in [`poll_io`](Self::poll_io) would spin inside one poll for good.
    pub(crate) fn clear_readiness(&self, ev: ReadyEvent) {
        self.clear_readiness_bits(ev, ev.ready);
    }

    /// [`clear_readiness`](Self::clear_readiness) of only the bits in `clear`.
    pub(crate) fn clear_readiness_bits(&self, ev: ReadyEvent, clear: u64) {
        let _ = self
            .io
            .readiness
            .fetch_update(AcqRel, Acquire, |cur| (cur >> GEN_SHIFT == ev.generation).then_some(cur & !clear));
    }

    /// Run a non-blocking operation, waiting for readiness until it stops saying
    /// `WouldBlock`.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut op: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let ev = match self.poll_ready(cx, dir) {
                Poll::Ready(Ok(ev)) => ev,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.clear_readiness(ev),
                r => return Poll::Ready(r),
            }
        }
    }

    /// [`poll_io`](Self::poll_io) for a read of up to `len` bytes. A read that returns
    /// fewer bytes than asked (but not 0, which is end of stream) drained the socket's
    /// receive buffer, so the readiness it saw is cleared at once: the next read waits for
    /// the reactor's next event instead of paying a system call that answers `WouldBlock`.
    /// mio is edge-triggered, so data arriving after this read brings a new event (a new
    /// generation), which the clear leaves alone.
    pub(crate) fn poll_read_io(
        &self,
        cx: &mut Context<'_>,
        len: usize,
        mut op: impl FnMut() -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            let ev = match self.poll_ready(cx, Direction::Read) {
                Poll::Ready(Ok(ev)) => ev,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.clear_readiness(ev),
                Ok(n) if n > 0 && n < len && ev.ready & (READ_CLOSED | ERROR) == 0 => {
                    self.clear_readiness(ev);
                    return Poll::Ready(Ok(n));
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// [`try_io`](Self::try_io) only if the reactor has seen the source ready in `dir`
    /// (or it shut down); else `WouldBlock` at once, without the attempt.
    pub(crate) fn try_io_if_ready<R>(&self, dir: Direction, op: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        if self.io.readiness.load(Acquire) & (dir.mask() | SHUTDOWN) == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.try_io(dir, op)
    }

    /// Clear the readiness `ev` saw for a non-blocking attempt made outside `poll_io`
    /// (`try_read`, `try_write`) that hit `WouldBlock`.
    ///
    /// After the runtime shut down the attempt is still made, as Tokio's: what the
    /// kernel already holds (bytes that arrived, room to write) is there with or without
    /// a reactor. Only an attempt that would have to wait fails, with the shutdown error,
    /// since nothing will ever report the source ready again.
    pub(crate) fn try_io<R>(&self, dir: Direction, op: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        let cur = self.io.readiness.load(Acquire);
        let ev = ReadyEvent { generation: cur >> GEN_SHIFT, ready: cur & dir.mask() };
        match op() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if cur & SHUTDOWN != 0 {
                    return Err(shutdown_error());
                }
                self.clear_readiness(ev);
                Err(e)
            }
            r => r,
        }
    }

    /// Remove `source` from the reactor (call before dropping the registration).
    pub(crate) fn deregister(&self, source: &mut impl mio::event::Source) {
        match &self.driver.io.backend {
            Backend::Epoll { registry, .. } => {
                let _ = registry.deregister(source);
            }
            Backend::Uring(_) => self.remove(),
        }
    }

    /// Free this source's slot, and with io_uring remove its poll, which holds the file
    /// open (see `uring`). Idempotent.
    fn remove(&self) {
        let io = &self.driver.io;
        let ring = match &io.backend {
            Backend::Uring(ring) => Some(ring),
            Backend::Epoll { .. } => None,
        };
        // The poll's removal is queued under the sources lock, so no re-arm follows it
        // (see `sources`).
        let cancel = |token| {
            if let Some(ring) = ring {
                ring.queue_remove(token);
            }
        };
        if !lock(&io.sources).remove_then(self.token, &self.io, cancel) {
            return;
        }
        io.registered.fetch_sub(1, Relaxed);
        if let Some(ring) = ring {
            let _ = ring.submit();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// `Auto` follows `VOLT_IO_DRIVER`; an explicit choice ignores it; a bad value is an
    /// error that names it.
    #[test]
    fn the_io_driver_choice_resolves() {
        use IoDriver::*;
        assert_eq!(Auto.resolve_with(None).unwrap(), Epoll);
        assert_eq!(Auto.resolve_with(Some("io_uring")).unwrap(), IoUring);
        assert_eq!(Auto.resolve_with(Some(" epoll ")).unwrap(), Epoll);
        assert_eq!(Epoll.resolve_with(Some("io_uring")).unwrap(), Epoll);
        assert_eq!(IoUring.resolve_with(Some("epoll")).unwrap(), IoUring);
        let e = Auto.resolve_with(Some("kqueue")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("kqueue"), "{e}");
    }
}
