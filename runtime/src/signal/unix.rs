//! Unix signals: [`signal`] makes a [`Signal`] listener for a [`SignalKind`].

use super::registry::{self, RtDriver, Slot};
use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A kind of Unix signal, by number. The constructors name the common ones;
/// [`from_raw`](SignalKind::from_raw) takes any other number.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub struct SignalKind(libc::c_int);

impl SignalKind {
    /// The signal numbered `signum` (whether it can be listened for is checked by
    /// [`signal`]).
    pub const fn from_raw(signum: libc::c_int) -> SignalKind {
        SignalKind(signum)
    }

    /// The signal's number.
    pub const fn as_raw_value(&self) -> libc::c_int {
        self.0
    }

    /// `SIGALRM`: a real-time timer expired.
    pub const fn alarm() -> SignalKind {
        SignalKind(libc::SIGALRM)
    }

    /// `SIGCHLD`: a child process stopped or exited.
    pub const fn child() -> SignalKind {
        SignalKind(libc::SIGCHLD)
    }

    /// `SIGHUP`: the terminal hung up (daemons often take it as "reload").
    pub const fn hangup() -> SignalKind {
        SignalKind(libc::SIGHUP)
    }

    /// `SIGINFO`: a status request from the terminal (the BSDs and macOS only).
    #[cfg(any(
        target_os = "dragonfly",
        target_os = "freebsd",
        target_os = "macos",
        target_os = "netbsd",
        target_os = "openbsd"
    ))]
    pub const fn info() -> SignalKind {
        SignalKind(libc::SIGINFO)
    }

    /// `SIGINT`: the terminal's interrupt key (ctrl-c).
    pub const fn interrupt() -> SignalKind {
        SignalKind(libc::SIGINT)
    }

    /// `SIGIO`: I/O is possible on a descriptor set up for it.
    pub const fn io() -> SignalKind {
        SignalKind(libc::SIGIO)
    }

    /// `SIGPIPE`: a write to a pipe or socket with no reader.
    pub const fn pipe() -> SignalKind {
        SignalKind(libc::SIGPIPE)
    }

    /// `SIGQUIT`: the terminal's quit key.
    pub const fn quit() -> SignalKind {
        SignalKind(libc::SIGQUIT)
    }

    /// `SIGTERM`: a request to end the process.
    pub const fn terminate() -> SignalKind {
        SignalKind(libc::SIGTERM)
    }

    /// `SIGUSR1`: for the application's own use.
    pub const fn user_defined1() -> SignalKind {
        SignalKind(libc::SIGUSR1)
    }

    /// `SIGUSR2`: for the application's own use.
    pub const fn user_defined2() -> SignalKind {
        SignalKind(libc::SIGUSR2)
    }

    /// `SIGWINCH`: the terminal's window changed size.
    pub const fn window_change() -> SignalKind {
        SignalKind(libc::SIGWINCH)
    }

    /// The signal's name (`"SIGINT"`), if it is one of the common ones.
    fn name(self) -> Option<&'static str> {
        let names: &[(libc::c_int, &str)] = &[
            (libc::SIGALRM, "SIGALRM"),
            (libc::SIGCHLD, "SIGCHLD"),
            (libc::SIGHUP, "SIGHUP"),
            (libc::SIGINT, "SIGINT"),
            (libc::SIGIO, "SIGIO"),
            (libc::SIGPIPE, "SIGPIPE"),
            (libc::SIGQUIT, "SIGQUIT"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGUSR1, "SIGUSR1"),
            (libc::SIGUSR2, "SIGUSR2"),
            (libc::SIGWINCH, "SIGWINCH"),
            (libc::SIGCONT, "SIGCONT"),
            (libc::SIGTSTP, "SIGTSTP"),
            (libc::SIGTTIN, "SIGTTIN"),
            (libc::SIGTTOU, "SIGTTOU"),
            (libc::SIGURG, "SIGURG"),
            (libc::SIGXCPU, "SIGXCPU"),
            (libc::SIGXFSZ, "SIGXFSZ"),
            (libc::SIGVTALRM, "SIGVTALRM"),
            (libc::SIGPROF, "SIGPROF"),
            (libc::SIGSYS, "SIGSYS"),
            (libc::SIGTRAP, "SIGTRAP"),
            (libc::SIGABRT, "SIGABRT"),
            (libc::SIGBUS, "SIGBUS"),
        ];
        names.iter().find(|(n, _)| *n == self.0).map(|(_, name)| *name)
    }
}

impl From<libc::c_int> for SignalKind {
    fn from(signum: libc::c_int) -> SignalKind {
        SignalKind(signum)
    }
}

impl From<SignalKind> for libc::c_int {
    fn from(kind: SignalKind) -> libc::c_int {
        kind.0
    }
}

/// A listener for one kind of signal, from [`signal`].
///
/// Deliveries that happen while nobody calls [`recv`](Signal::recv) are not lost, but
/// they coalesce: however many arrived since the last `recv`, the next `recv` answers
/// once. Every listener of a signal is notified of each delivery, in every runtime.
#[must_use = "a signal listener does nothing unless `recv` is awaited"]
pub struct Signal {
    kind: SignalKind,
    slot: &'static Slot,
    idx: usize,
    /// The delivery count this listener last answered for.
    seen: u64,
    driver: Arc<RtDriver>,
}

/// Listen for signals of `kind` on the current runtime's reactor.
///
/// The first listener of a kind in the process installs a handler for it, which stays
/// for the life of the process: from then on the signal's default action (such as ending
/// the process for `SIGINT` and `SIGTERM`) no longer happens, even after every listener
/// is dropped. Deliveries from the moment this returns are seen by
/// [`recv`](Signal::recv), and so is one that came before while no listener was there to
/// take it (one `recv` answers for it).
///
/// # Errors
/// Outside a Volt runtime; for a number that is not a signal; for `SIGKILL` and
/// `SIGSTOP` (which cannot be caught) and `SIGILL`, `SIGFPE` and `SIGSEGV` (whose
/// handler must not return).
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let slot = registry::slot_for(kind.0)?;
    // The listener first: a new driver's first turn (here, or on a worker that sees the
    // pipe readable) hands out a delivery waiting in the pipe, and the listener must
    // exist by then to get it.
    let (idx, seen) = slot.add_listener();
    match RtDriver::current() {
        Ok(driver) => Ok(Signal { kind, slot, idx, seen, driver }),
        Err(e) => {
            slot.remove_listener(idx);
            Err(e)
        }
    }
}

impl Signal {
    /// Wait for the next delivery of the signal. `None` when no more can come: the
    /// runtime this listener was made in has shut down.
    pub async fn recv(&mut self) -> Option<()> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`recv`](Signal::recv) as a poll function: `Ready(Some(()))` if the signal was
    /// delivered since the last answer, else keep `cx`'s waker for the next delivery.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        if self.driver.is_dead() {
            return Poll::Ready(None);
        }
        if self.slot.poll(self.idx, &mut self.seen, cx.waker()).is_ready() {
            return Poll::Ready(Some(()));
        }
        // A driver that died after the check above has woken every listener, but it may
        // have done so before this one's waker was kept.
        if self.driver.is_dead() {
            return Poll::Ready(None);
        }
        self.record_wait();
        Poll::Pending
    }

    /// Name the wait for the console: `signal SIGINT` (or `signal 34`), formatted on the
    /// stack.
    fn record_wait(&self) {
        match self.kind.name() {
            Some(name) => {
                let mut buf = [0u8; 24];
                let prefix = b"signal ";
                buf[..prefix.len()].copy_from_slice(prefix);
                let n = prefix.len() + name.len();
                buf[prefix.len()..n].copy_from_slice(name.as_bytes());
                crate::task::wait::record_label(std::str::from_utf8(&buf[..n]).unwrap_or("signal"));
            }
            None => {
                let mut buf = [0u8; 24];
                let prefix = b"signal ";
                buf[..prefix.len()].copy_from_slice(prefix);
                let mut n = prefix.len();
                let mut digits = [0u8; 12];
                let mut d = 0;
                let mut v = self.kind.0.unsigned_abs();
                loop {
                    digits[d] = b'0' + (v % 10) as u8;
                    d += 1;
                    v /= 10;
                    if v == 0 {
                        break;
                    }
                }
                for i in (0..d).rev() {
                    buf[n] = digits[i];
                    n += 1;
                }
                crate::task::wait::record_label(std::str::from_utf8(&buf[..n]).unwrap_or("signal"));
            }
        }
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        self.slot.remove_listener(self.idx);
    }
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signal").field("kind", &self.kind).finish()
    }
}
