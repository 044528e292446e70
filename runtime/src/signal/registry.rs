//! The process-wide half of signal delivery (handlers, counters, listeners) and the
//! per-runtime half (a pipe end registered with the runtime's reactor).
//!
//! # Delivery
//! The first listener for a signal installs its handler, once for the process (through
//! `signal-hook-registry`, which chains with handlers installed by others). The handler
//! does only what is safe in a signal handler: it bumps the signal's counter and writes
//! one byte to a non-blocking socket pair. The socket pair is process-wide too; each
//! runtime that has a listener registers its own duplicate of the reading end with its
//! reactor. When the reactor reports it readable, the runtime's [`RtDriver`] drains it and
//! wakes every listener of every signal whose counter moved since the last wake-up.
//!
//! A listener remembers the counter it last saw (at first, the counter when the
//! listeners were last woken): `recv` answers as soon as the counter differs, and takes
//! the new value. So a signal that lands between the listener's creation and its `recv`
//! is not lost, nor one that landed before it while no runtime had handed it out (the
//! previous listener just dropped, as in Tokio's `drop_then_get_a_signal`), and many
//! deliveries before a `recv` make one notification, as Tokio documents. Listeners in
//! several runtimes are all woken by whichever runtime's reactor drains the byte first;
//! the others find the pipe empty and nothing new.

use crate::reactor::{Direction, Registration};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Context, Poll, Wake, Waker};

/// Signal numbers `1..SLOTS` can be listened for (Linux has 64 signals, real-time ones
/// included; other Unix systems fewer).
pub(crate) const SLOTS: usize = 65;

/// Signals a handler may not be installed for: the kernel refuses `SIGKILL` and
/// `SIGSTOP`, and a handler that returns from a fault (`SIGILL`, `SIGFPE`, `SIGSEGV`)
/// would run the faulting instruction again forever. `signal-hook-registry` panics for
/// these, so they are refused here first.
const FORBIDDEN: [libc::c_int; 5] = [libc::SIGKILL, libc::SIGSTOP, libc::SIGILL, libc::SIGFPE, libc::SIGSEGV];

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Everything about one signal number.
pub(crate) struct Slot {
    /// Deliveries so far (bumped by the handler).
    count: AtomicU64,
    /// The handler's installation, once: `Err` keeps the reason it failed.
    installed: OnceLock<Result<(), String>>,
    /// The listeners' wakers.
    waiters: Mutex<Waiters>,
}

#[derive(Default)]
struct Waiters {
    /// The counter when the listeners were last woken.
    last_woken: u64,
    /// One entry per listener (its index is the listener's); `None` while it is not
    /// waiting, or free.
    list: Vec<Option<Waker>>,
    free: Vec<usize>,
}

struct Globals {
    /// Written by the handlers.
    tx: UnixStream,
    /// Read by the runtimes, each through a duplicate of its own.
    rx: UnixStream,
    slots: Box<[Slot]>,
}

static GLOBALS: OnceLock<Globals> = OnceLock::new();

fn globals() -> io::Result<&'static Globals> {
    if let Some(g) = GLOBALS.get() {
        return Ok(g);
    }
    let (tx, rx) = UnixStream::pair()?;
    tx.set_nonblocking(true)?;
    rx.set_nonblocking(true)?;
    let slots = (0..SLOTS)
        .map(|_| Slot { count: AtomicU64::new(0), installed: OnceLock::new(), waiters: Mutex::new(Waiters::default()) })
        .collect();
    // A thread that lost the race drops its pair; the winner's is used by everyone.
    Ok(GLOBALS.get_or_init(|| Globals { tx, rx, slots }))
}

/// What the handler of `signum` runs, inside the signal handler: only an atomic add and a
/// `write(2)`, both async-signal-safe. A full pipe already holds a byte the reactor will
/// read, so a failed write loses nothing.
fn on_signal(signum: usize) {
    if let Some(g) = GLOBALS.get() {
        g.slots[signum].count.fetch_add(1, SeqCst);
        let byte = 1u8;
        // SAFETY: the fd is the process-wide socket pair's writing end, open for the
        // process's life (the `static` is never dropped), and `byte` is valid for the
        // one-byte read `write(2)` makes of it.
        unsafe { libc::write(g.tx.as_raw_fd(), (&raw const byte).cast(), 1) };
    }
}

/// Install the handler for `signum` (once for the process) and return its slot.
pub(crate) fn slot_for(signum: libc::c_int) -> io::Result<&'static Slot> {
    if signum <= 0 || signum as usize >= SLOTS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("volt: {signum} is not a signal number")));
    }
    if FORBIDDEN.contains(&signum) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "volt: signal {signum} cannot be listened for (it cannot be caught, or its handler must not return)"
            ),
        ));
    }
    let g = globals()?;
    let slot = &g.slots[signum as usize];
    let installed = slot.installed.get_or_init(|| {
        let index = signum as usize;
        // SAFETY: the action only calls `on_signal`, which is async-signal-safe (an atomic
        // add and a `write(2)`, no allocation, no lock), and `signum` is not one of the
        // signals `signal-hook-registry` refuses (checked above).
        let r = unsafe { signal_hook_registry::register(signum, move || on_signal(index)) };
        r.map(|_| ()).map_err(|e| e.to_string())
    });
    match installed {
        Ok(()) => Ok(slot),
        Err(why) => Err(io::Error::other(format!("volt: could not install a handler for signal {signum}: {why}"))),
    }
}

impl Slot {
    /// A new listener's entry, and the counter it starts from: the counter when the
    /// listeners were last woken, so a delivery no runtime has handed out yet (one that
    /// landed while the signal had no listener, say) reaches the new listener, as a
    /// Tokio receiver made before its driver's next turn gets it.
    pub(crate) fn add_listener(&self) -> (usize, u64) {
        let mut w = lock(&self.waiters);
        let seen = w.last_woken;
        let idx = match w.free.pop() {
            Some(i) => i,
            None => {
                w.list.push(None);
                w.list.len() - 1
            }
        };
        (idx, seen)
    }

    /// A listener is dropped.
    pub(crate) fn remove_listener(&self, idx: usize) {
        let mut w = lock(&self.waiters);
        w.list[idx] = None;
        w.free.push(idx);
    }

    /// `Ready` (taking the new counter into `seen`) if a delivery happened since `seen`;
    /// else keep `waker` to be woken by the next one.
    pub(crate) fn poll(&self, idx: usize, seen: &mut u64, waker: &Waker) -> Poll<()> {
        let mut w = lock(&self.waiters);
        let now = self.count.load(SeqCst);
        if now != *seen {
            *seen = now;
            return Poll::Ready(());
        }
        match &mut w.list[idx] {
            Some(old) if old.will_wake(waker) => {}
            entry => *entry = Some(waker.clone()),
        }
        Poll::Pending
    }

    /// Take the wakers of every waiting listener if the counter moved (or `all`).
    fn take_wakers(&self, all: bool, out: &mut Vec<Waker>) {
        let mut w = lock(&self.waiters);
        let now = self.count.load(SeqCst);
        if now == w.last_woken && !all {
            return;
        }
        w.last_woken = now;
        out.extend(w.list.iter_mut().filter_map(Option::take));
    }
}

/// Wake the listeners of every signal that was delivered since the last call (or all of
/// them, when a runtime's driver is gone and its listeners must see it).
fn broadcast(all: bool) {
    let Some(g) = GLOBALS.get() else { return };
    let mut wake = Vec::new();
    for slot in g.slots.iter().filter(|s| s.installed.get().is_some()) {
        slot.take_wakers(all, &mut wake);
    }
    for w in wake {
        w.wake();
    }
}

/// A runtime's end of the signal pipe: a duplicate of the reading end, registered with
/// that runtime's reactor. Handle by the runtime's listeners; the last one to go drops it.
pub(crate) struct RtDriver {
    pipe: mio::net::UnixStream,
    reg: Registration,
    /// The reactor has shut down: listeners answer `None`.
    dead: AtomicBool,
    /// A turn is running (a second wake-up meanwhile sets `again` instead).
    busy: AtomicBool,
    again: AtomicBool,
    /// Wakes the driver itself (holds it weakly, so no cycle keeps it alive).
    waker: Waker,
}

struct DriverWaker(Weak<RtDriver>);

impl Wake for DriverWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(d) = self.0.upgrade() {
            d.turn();
        }
    }
}

/// Each runtime's signal driver, by the address of the runtime's I/O driver (a live signal
/// driver keeps that alive through its registration, so an address is never reused while
/// its entry lives).
static DRIVERS: Mutex<Vec<(usize, Weak<RtDriver>)>> = Mutex::new(Vec::new());

impl RtDriver {
    /// The current runtime's driver, made (and armed) if it has none.
    pub(crate) fn current() -> io::Result<Arc<RtDriver>> {
        let key = crate::driver::Handle::with_current(|d| d.context_ptr() as usize).ok_or_else(|| {
            io::Error::other("volt: signals are listened for on a runtime's reactor, so only inside a Volt runtime")
        })?;
        let mut drivers = lock(&DRIVERS);
        drivers.retain(|(_, d)| d.strong_count() > 0);
        if let Some(d) = drivers.iter().find(|(k, _)| *k == key).and_then(|(_, d)| d.upgrade()) {
            if !d.is_dead() {
                return Ok(d);
            }
        }
        let g = globals()?;
        let mut pipe = mio::net::UnixStream::from_std(g.rx.try_clone()?);
        let reg = Registration::new(&mut pipe, mio::Interest::READABLE)?;
        let d = Arc::new_cyclic(|me| RtDriver {
            pipe,
            reg,
            dead: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            again: AtomicBool::new(false),
            waker: Waker::from(Arc::new(DriverWaker(me.clone()))),
        });
        drivers.retain(|(k, _)| *k != key);
        drivers.push((key, Arc::downgrade(&d)));
        drop(drivers);
        // Arm it: leave the driver's waker with the reactor (and take any byte waiting).
        d.turn();
        Ok(d)
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(SeqCst)
    }

    /// Drain the pipe until it would block (which leaves the driver's waker with the
    /// reactor), then wake the listeners of the signals delivered meanwhile.
    fn turn(&self) {
        // `again` before `busy`: a turn that is ending sees it after it lets `busy` go.
        self.again.store(true, SeqCst);
        if self.busy.swap(true, SeqCst) {
            return;
        }
        loop {
            self.again.store(false, SeqCst);
            let mut cx = Context::from_waker(&self.waker);
            // The reactor's wait would make a task that spent its budget yield by waking
            // it; here that "task" is this driver, so the budget must not apply.
            let _budget = crate::task::coop::Budget::unlimited();
            // Nor is the reactor wait recorded as the wait of a task this thread polls.
            let _no_task = crate::task::id::CurrentTaskGuard::none();
            let r = self.reg.poll_io(&mut cx, Direction::Read, || {
                let mut buf = [0u8; 64];
                loop {
                    match (&self.pipe).read(&mut buf) {
                        // The writing end is never closed: end of stream means a broken pipe.
                        Ok(0) => return Err(io::Error::other("the signal pipe was closed")),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            });
            match r {
                // `Ok` is never answered: the read loop ends only in an error.
                Poll::Pending | Poll::Ready(Ok(())) => broadcast(false),
                Poll::Ready(Err(_)) => {
                    // The runtime shut down (or the pipe failed): no more deliveries
                    // through this runtime; its listeners wake to answer `None`.
                    self.dead.store(true, SeqCst);
                    broadcast(true);
                    self.busy.store(false, SeqCst);
                    return;
                }
            }
            self.busy.store(false, SeqCst);
            if !self.again.load(SeqCst) || self.busy.swap(true, SeqCst) {
                return;
            }
        }
    }
}

impl Drop for RtDriver {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.pipe);
    }
}
