//! `Interest` and `Ready`: what a wait on a socket asks for and what it found (Tokio's
//! `tokio::io::Interest` and `tokio::io::Ready`, under `volt::net` and `volt::io`).

use crate::reactor::{self, Direction, Registration};
use std::io;
use std::ops;
use std::task::{Context, Poll};

/// The readiness a wait asks for ([`TcpStream::ready`](super::TcpStream::ready), the
/// other sockets' `ready`, [`AsyncFd`](crate::io::unix::AsyncFd)): readable, writable,
/// priority data, an error, or any set of them (`Interest::READABLE |
/// Interest::WRITABLE`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interest(u8);

const I_READ: u8 = 1;
const I_WRITE: u8 = 2;
const I_PRIORITY: u8 = 4;
const I_ERROR: u8 = 8;

impl Interest {
    /// Wait until the socket may be read (or has reached end of stream, or failed).
    pub const READABLE: Interest = Interest(I_READ);
    /// Wait until the socket may be written (or its writing side closed, or failed).
    pub const WRITABLE: Interest = Interest(I_WRITE);
    /// Wait for priority data (`EPOLLPRI`: a socket's out-of-band data, a change in a
    /// `/proc` or `sysfs` file that reports one). The kernel reports it only to a
    /// descriptor registered for it: an [`AsyncFd`](crate::io::unix::AsyncFd) made with
    /// this interest; the sockets are registered for reading and writing only, as
    /// Tokio's are.
    pub const PRIORITY: Interest = Interest(I_PRIORITY);
    /// Wait for an error on the descriptor (the kernel reports errors whatever a
    /// registration asked for).
    pub const ERROR: Interest = Interest(I_ERROR);

    /// Whether it includes readable.
    pub const fn is_readable(self) -> bool {
        self.0 & I_READ != 0
    }

    /// Whether it includes writable.
    pub const fn is_writable(self) -> bool {
        self.0 & I_WRITE != 0
    }

    /// Whether it includes priority data.
    pub const fn is_priority(self) -> bool {
        self.0 & I_PRIORITY != 0
    }

    /// Whether it includes errors.
    pub const fn is_error(self) -> bool {
        self.0 & I_ERROR != 0
    }

    /// The registration this interest needs. mio has no interest in errors (epoll
    /// reports them always), so an interest in errors alone registers for reading.
    pub(crate) fn to_mio(self) -> mio::Interest {
        let mut mio = None::<mio::Interest>;
        let mut add = |i: mio::Interest| mio = Some(mio.map_or(i, |m| m | i));
        if self.is_readable() {
            add(mio::Interest::READABLE);
        }
        if self.is_writable() {
            add(mio::Interest::WRITABLE);
        }
        if self.is_priority() {
            add(mio::Interest::PRIORITY);
        }
        mio.unwrap_or(mio::Interest::READABLE)
    }

    /// Both interests (the same as `|`, usable in a `const`).
    #[must_use]
    pub const fn add(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }

    /// This interest without `other`; `None` when nothing would be left.
    #[must_use]
    pub fn remove(self, other: Interest) -> Option<Interest> {
        let left = self.0 & !other.0;
        (left != 0).then_some(Interest(left))
    }
}

impl ops::BitOr for Interest {
    type Output = Interest;
    fn bitor(self, other: Interest) -> Interest {
        self.add(other)
    }
}

impl ops::BitOrAssign for Interest {
    fn bitor_assign(&mut self, other: Interest) {
        *self = self.add(other);
    }
}

impl std::fmt::Debug for Interest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = [(I_READ, "READABLE"), (I_WRITE, "WRITABLE"), (I_PRIORITY, "PRIORITY"), (I_ERROR, "ERROR")];
        let mut sep = "";
        for (bit, name) in names {
            if self.0 & bit != 0 {
                write!(f, "{sep}{name}")?;
                sep = " | ";
            }
        }
        Ok(())
    }
}

/// The readiness a wait found: a set of readable, writable, read-closed, write-closed,
/// priority data and error.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Ready(u8);

const R_READABLE: u8 = 1;
const R_WRITABLE: u8 = 1 << 1;
const R_READ_CLOSED: u8 = 1 << 2;
const R_WRITE_CLOSED: u8 = 1 << 3;
const R_ERROR: u8 = 1 << 4;
const R_PRIORITY: u8 = 1 << 5;

impl Ready {
    /// Nothing.
    pub const EMPTY: Ready = Ready(0);
    /// Readable.
    pub const READABLE: Ready = Ready(R_READABLE);
    /// Writable.
    pub const WRITABLE: Ready = Ready(R_WRITABLE);
    /// The reading side is closed (end of stream).
    pub const READ_CLOSED: Ready = Ready(R_READ_CLOSED);
    /// The writing side is closed.
    pub const WRITE_CLOSED: Ready = Ready(R_WRITE_CLOSED);
    /// Priority data (see [`Interest::PRIORITY`]).
    pub const PRIORITY: Ready = Ready(R_PRIORITY);
    /// An error on the descriptor.
    pub const ERROR: Ready = Ready(R_ERROR);
    /// Every kind of readiness.
    pub const ALL: Ready = Ready(R_READABLE | R_WRITABLE | R_READ_CLOSED | R_WRITE_CLOSED | R_ERROR | R_PRIORITY);

    /// Whether it holds nothing.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether it is readable.
    pub fn is_readable(self) -> bool {
        self.0 & (R_READABLE | R_READ_CLOSED) != 0
    }

    /// Whether it is writable.
    pub fn is_writable(self) -> bool {
        self.0 & (R_WRITABLE | R_WRITE_CLOSED) != 0
    }

    /// Whether the reading side is closed.
    pub fn is_read_closed(self) -> bool {
        self.0 & R_READ_CLOSED != 0
    }

    /// Whether the writing side is closed.
    pub fn is_write_closed(self) -> bool {
        self.0 & R_WRITE_CLOSED != 0
    }

    /// Whether the socket reported an error (the next operation returns it).
    pub fn is_error(self) -> bool {
        self.0 & R_ERROR != 0
    }

    /// Whether priority data is there.
    pub fn is_priority(self) -> bool {
        self.0 & R_PRIORITY != 0
    }

    /// The reactor's readiness bits as a `Ready`.
    pub(crate) fn from_bits(bits: u64) -> Ready {
        let mut r = 0;
        for (from, to) in [
            (reactor::READABLE, R_READABLE),
            (reactor::WRITABLE, R_WRITABLE),
            (reactor::READ_CLOSED, R_READ_CLOSED),
            (reactor::WRITE_CLOSED, R_WRITE_CLOSED),
            (reactor::ERROR, R_ERROR),
            (reactor::PRIORITY, R_PRIORITY),
        ] {
            if bits & from != 0 {
                r |= to;
            }
        }
        Ready(r)
    }
}

impl ops::BitOr for Ready {
    type Output = Ready;
    fn bitor(self, other: Ready) -> Ready {
        Ready(self.0 | other.0)
    }
}

impl ops::BitOrAssign for Ready {
    fn bitor_assign(&mut self, other: Ready) {
        self.0 |= other.0;
    }
}

impl ops::BitAnd for Ready {
    type Output = Ready;
    fn bitand(self, other: Ready) -> Ready {
        Ready(self.0 & other.0)
    }
}

impl ops::Sub for Ready {
    type Output = Ready;
    fn sub(self, other: Ready) -> Ready {
        Ready(self.0 & !other.0)
    }
}

/// Wait until `reg` is ready for any part of `interest`; what it found. A read wait and a
/// write wait each keep their waker in their own slot, so both are armed until one fires.
/// A readiness wait spends no cooperative budget (as Tokio's `ready`, `readable` and
/// `writable`); the operation after it does.
pub(crate) fn poll_interest(reg: &Registration, cx: &mut Context<'_>, interest: Interest) -> Poll<io::Result<Ready>> {
    let mut ready = Ready::EMPTY;
    for dir in interest.directions() {
        match reg.poll_ready_now(cx, dir) {
            Poll::Ready(Ok(ev)) => ready |= Ready::from_bits(ev.bits()),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
    }
    if ready.is_empty() {
        Poll::Pending
    } else {
        Poll::Ready(Ok(ready))
    }
}

/// `async_io`: wait for `interest`, run `f`, and wait again while it answers
/// `WouldBlock` (which clears the readiness it saw, so the next wait is for a new event).
pub(crate) async fn async_io<R>(
    reg: &Registration,
    interest: Interest,
    mut f: impl FnMut() -> io::Result<R>,
) -> io::Result<R> {
    let dir = interest.first_direction();
    loop {
        std::future::poll_fn(|cx| poll_interest(reg, cx, interest)).await?;
        // The operation spends a unit of the budget (a task out of it yields here).
        std::future::poll_fn(crate::task::coop::poll_budget).await;
        match reg.try_io(dir, &mut f) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => {
                crate::task::coop::spend();
                return r;
            }
        }
    }
}

impl Ready {
    /// The reactor's readiness bits this `Ready` names.
    pub(crate) fn to_bits(self) -> u64 {
        let mut bits = 0;
        for (from, to) in [
            (R_READABLE, reactor::READABLE),
            (R_WRITABLE, reactor::WRITABLE),
            (R_READ_CLOSED, reactor::READ_CLOSED),
            (R_WRITE_CLOSED, reactor::WRITE_CLOSED),
            (R_ERROR, reactor::ERROR),
            (R_PRIORITY, reactor::PRIORITY),
        ] {
            if self.0 & from != 0 {
                bits |= to;
            }
        }
        bits
    }
}

impl Interest {
    /// The waits this interest is made of.
    pub(crate) fn directions(self) -> impl Iterator<Item = Direction> {
        [
            (self.is_readable(), Direction::Read),
            (self.is_writable(), Direction::Write),
            (self.is_priority(), Direction::Priority),
            (self.is_error(), Direction::Error),
        ]
        .into_iter()
        .filter_map(|(wanted, dir)| wanted.then_some(dir))
    }

    /// The one wait whose readiness an operation that answered `WouldBlock` clears: the
    /// first of read, write, priority, error it asks for.
    pub(crate) fn first_direction(self) -> Direction {
        self.directions().next().unwrap_or(Direction::Read)
    }
}
