//! `AsyncFd`: any file descriptor on the runtime's reactor (Tokio's
//! `tokio::io::unix::AsyncFd`), for what Volt has no type of its own for: a device, an
//! `inotify` or `timerfd` descriptor, a socket of another library.
//!
//! The descriptor is registered edge-triggered, as Volt's sockets are. A wait
//! (`readable`, `writable`, `ready`) answers once the reactor has seen the descriptor
//! ready and returns a guard; the caller tries its operation, and tells the guard when
//! the operation answered `WouldBlock` (`clear_ready`, or `try_io`, which does it),
//! so that the next wait waits for a new event. A clear after an event that arrived
//! meanwhile leaves that event alone (the generation check of the reactor's readiness).

use crate::net::{Interest, Ready};
use crate::reactor::{Direction, ReadyEvent, Registration};
use std::error::Error;
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::task::{Context, Poll};

/// A file descriptor (inside the `T` that owns it) registered with the runtime's reactor.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// use std::io::{Read, Write};
/// use std::os::unix::net::UnixStream;
/// use volt::io::unix::AsyncFd;
///
/// let rt = volt::Runtime::new()?;
/// rt.block_on(async {
///     let (a, mut b) = UnixStream::pair()?;
///     a.set_nonblocking(true)?;
///     // SAFETY: `a` owns its descriptor, which stays open while the `AsyncFd` holds it.
///     let a = unsafe { AsyncFd::register(a) }?;
///     b.write_all(b"ping")?;
///     let mut buf = [0u8; 4];
///     let n = loop {
///         let mut guard = a.readable().await?;
///         // `try_io` clears the readiness if the read answers `WouldBlock`.
///         match guard.try_io(|fd| fd.get_ref().read(&mut buf)) {
///             Ok(result) => break result?,
///             Err(_would_block) => continue,
///         }
///     };
///     assert_eq!(&buf[..n], b"ping");
///     Ok(())
/// })
/// # }
/// ```
///
/// The descriptor must be in non-blocking mode: an operation on a blocking one would
/// stop the worker thread that runs it.
pub struct AsyncFd<T: AsRawFd> {
    reg: Registration,
    /// `None` only after `into_inner` took it.
    inner: Option<T>,
    fd: RawFd,
}

/// The readiness an [`AsyncFd`] wait found, borrowed from a `&AsyncFd`.
///
/// Dropping it keeps the readiness: the next wait answers at once. After an operation
/// that answered `WouldBlock`, call [`clear_ready`](Self::clear_ready) (or use
/// [`try_io`](Self::try_io), which does) so the next wait is for a new event.
#[must_use = "the readiness is kept unless cleared"]
pub struct AsyncFdReadyGuard<'a, T: AsRawFd> {
    fd: &'a AsyncFd<T>,
    /// What the wait saw; `None` once cleared or kept.
    event: Option<ReadyEvent>,
}

/// [`AsyncFdReadyGuard`] for a `&mut AsyncFd`, giving mutable access to the inner value.
#[must_use = "the readiness is kept unless cleared"]
pub struct AsyncFdReadyMutGuard<'a, T: AsRawFd> {
    fd: &'a mut AsyncFd<T>,
    event: Option<ReadyEvent>,
}

/// What a guard's `try_io` returns when the operation answered `WouldBlock` (the
/// readiness is cleared then: wait again).
#[derive(Debug)]
pub struct TryIoError(());

/// A registration that failed, with the value that was to be registered.
pub struct AsyncFdRegisterError<T> {
    inner: T,
    cause: io::Error,
}

/// The former name of [`AsyncFdRegisterError`], as Tokio keeps it.
#[doc(hidden)]
#[deprecated(note = "use `AsyncFdRegisterError` instead")]
pub type AsyncFdTryNewError<T> = AsyncFdRegisterError<T>;

impl<T> AsyncFdRegisterError<T> {
    /// The value that was not registered, and why.
    pub fn into_parts(self) -> (T, io::Error) {
        (self.inner, self.cause)
    }
}

impl<T> fmt::Display for AsyncFdRegisterError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)
    }
}

impl<T> fmt::Debug for AsyncFdRegisterError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.cause, f)
    }
}

impl<T> Error for AsyncFdRegisterError<T> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.cause)
    }
}

impl<T> From<AsyncFdRegisterError<T>> for io::Error {
    fn from(e: AsyncFdRegisterError<T>) -> io::Error {
        e.cause
    }
}

impl<T: AsRawFd> AsyncFd<T> {
    /// Register `inner`'s descriptor for reading and writing.
    ///
    /// # Errors
    /// Outside a Volt runtime (Tokio panics there), after it shut down, or if the kernel
    /// refuses the descriptor (a regular file, which is always ready, is refused by
    /// epoll); the error gives `inner` back.
    ///
    /// # Safety
    /// `inner.as_raw_fd()` must be an open descriptor that stays open, and names the
    /// same open file, until the `AsyncFd` is dropped or `into_inner` is called (or it is
    /// forgotten), and must return that same descriptor every time. Otherwise the
    /// deregistration at the end could remove another owner's registration of a reused
    /// descriptor number.
    pub unsafe fn register(inner: T) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        // SAFETY: the caller's contract, passed on.
        unsafe { AsyncFd::register_with_interest(inner, Interest::READABLE | Interest::WRITABLE) }
    }

    /// [`register`](Self::register) with the readiness to register for
    /// (`Interest::PRIORITY` for a descriptor that reports priority data).
    ///
    /// # Errors
    /// As for [`register`](Self::register).
    ///
    /// # Safety
    /// As for [`register`](Self::register).
    pub unsafe fn register_with_interest(inner: T, interest: Interest) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        let fd = inner.as_raw_fd();
        match Registration::new_fd(fd, interest.to_mio()) {
            Ok(reg) => Ok(AsyncFd { reg, inner: Some(inner), fd }),
            Err(cause) => Err(AsyncFdRegisterError { inner, cause }),
        }
    }

    /// [`register`](Self::register) without its promise, as Tokio's (deprecated there,
    /// since nothing checks that the descriptor stays open).
    ///
    /// # Errors
    /// As for [`register`](Self::register).
    #[deprecated(note = "nothing checks that the descriptor stays open; use `AsyncFd::register`")]
    pub fn new(inner: T) -> io::Result<AsyncFd<T>> {
        // SAFETY: not upheld by a promise here, as in Tokio's `new`: a descriptor closed
        // early costs registrations (its own, or another owner's of a reused number),
        // never memory safety, since the reactor keeps no pointer into `T`.
        Ok(unsafe { AsyncFd::register(inner) }?)
    }

    /// [`register_with_interest`](Self::register_with_interest) without its promise.
    ///
    /// # Errors
    /// As for [`register`](Self::register).
    #[deprecated(note = "nothing checks that the descriptor stays open; use `AsyncFd::register_with_interest`")]
    pub fn with_interest(inner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
        // SAFETY: as in `new`.
        Ok(unsafe { AsyncFd::register_with_interest(inner, interest) }?)
    }

    /// [`new`](Self::new), giving `inner` back on failure.
    ///
    /// # Errors
    /// As for [`register`](Self::register).
    #[deprecated(note = "nothing checks that the descriptor stays open; use `AsyncFd::register`")]
    pub fn try_new(inner: T) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        // SAFETY: as in `new`.
        unsafe { AsyncFd::register(inner) }
    }

    /// [`with_interest`](Self::with_interest), giving `inner` back on failure.
    ///
    /// # Errors
    /// As for [`register`](Self::register).
    #[deprecated(note = "nothing checks that the descriptor stays open; use `AsyncFd::register_with_interest`")]
    pub fn try_with_interest(inner: T, interest: Interest) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        // SAFETY: as in `new`.
        unsafe { AsyncFd::register_with_interest(inner, interest) }
    }

    /// The value holding the descriptor.
    pub fn get_ref(&self) -> &T {
        self.inner.as_ref().expect("an AsyncFd holds its value until into_inner")
    }

    /// The value holding the descriptor, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.as_mut().expect("an AsyncFd holds its value until into_inner")
    }

    /// Take the descriptor off the reactor and give its value back.
    pub fn into_inner(mut self) -> T {
        self.deregister();
        self.inner.take().expect("an AsyncFd holds its value until into_inner")
    }

    fn deregister(&mut self) {
        self.reg.deregister(&mut mio::unix::SourceFd(&self.fd));
    }

    fn poll_dir(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<io::Result<ReadyEvent>> {
        self.reg.poll_ready(cx, dir)
    }

    /// Wait until any part of `interest` is ready, from a poll function: everything of
    /// `interest` found ready, as one event. Each wait keeps its waker on its own list,
    /// so all stay armed until one fires. No budget is spent (as Tokio's `ready`); the
    /// `poll_*_ready` functions spend it.
    fn poll_interest(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<io::Result<ReadyEvent>> {
        let mut found: Option<ReadyEvent> = None;
        for dir in interest.directions() {
            match self.reg.poll_ready_now(cx, dir) {
                Poll::Ready(Ok(ev)) => found = Some(found.map_or(ev, |f| f.union(ev))),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
        }
        found.map_or(Poll::Pending, |ev| Poll::Ready(Ok(ev)))
    }

    /// Wait until the descriptor may be read; `Pending` keeps `cx`'s waker for it.
    pub fn poll_read_ready<'a>(&'a self, cx: &mut Context<'_>) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        self.poll_dir(cx, Direction::Read).map_ok(|e| AsyncFdReadyGuard { fd: self, event: Some(e) })
    }

    /// [`poll_read_ready`](Self::poll_read_ready) with mutable access.
    pub fn poll_read_ready_mut<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyMutGuard<'a, T>>> {
        match self.poll_dir(cx, Direction::Read) {
            Poll::Ready(Ok(e)) => Poll::Ready(Ok(AsyncFdReadyMutGuard { fd: self, event: Some(e) })),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Wait until the descriptor may be written; `Pending` keeps `cx`'s waker for it.
    pub fn poll_write_ready<'a>(&'a self, cx: &mut Context<'_>) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        self.poll_dir(cx, Direction::Write).map_ok(|e| AsyncFdReadyGuard { fd: self, event: Some(e) })
    }

    /// [`poll_write_ready`](Self::poll_write_ready) with mutable access.
    pub fn poll_write_ready_mut<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyMutGuard<'a, T>>> {
        match self.poll_dir(cx, Direction::Write) {
            Poll::Ready(Ok(e)) => Poll::Ready(Ok(AsyncFdReadyMutGuard { fd: self, event: Some(e) })),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Wait until any part of `interest` is ready.
    ///
    /// # Errors
    /// When the runtime has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        let e = poll_fn(|cx| self.poll_interest(cx, interest)).await?;
        Ok(AsyncFdReadyGuard { fd: self, event: Some(e) })
    }

    /// [`ready`](Self::ready) with mutable access.
    ///
    /// # Errors
    /// When the runtime has shut down.
    pub async fn ready_mut(&mut self, interest: Interest) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        // The wait holds `&mut self`, not `&self`: the future is `Send` for an inner type
        // that is `Send` but not `Sync`, as Tokio's is.
        let this = &mut *self;
        let e = poll_fn(move |cx| this.poll_interest(cx, interest)).await?;
        Ok(AsyncFdReadyMutGuard { fd: self, event: Some(e) })
    }

    /// Wait until the descriptor may be read.
    ///
    /// # Errors
    /// When the runtime has shut down.
    pub async fn readable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.ready(Interest::READABLE).await
    }

    /// [`readable`](Self::readable) with mutable access.
    ///
    /// # Errors
    /// When the runtime has shut down.
    pub async fn readable_mut(&mut self) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        self.ready_mut(Interest::READABLE).await
    }

    /// Wait until the descriptor may be written.
    ///
    /// # Errors
    /// When the runtime has shut down.
    pub async fn writable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.ready(Interest::WRITABLE).await
    }

    /// [`writable`](Self::writable) with mutable access.
    ///
    /// # Errors
    /// When the runtime has shut down.
    pub async fn writable_mut(&mut self) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        self.ready_mut(Interest::WRITABLE).await
    }

    /// Wait for `interest` and run `f` until it answers something other than
    /// `WouldBlock` (each `WouldBlock` clears the readiness and waits again).
    ///
    /// # Errors
    /// `f`'s error, or the shutdown error.
    pub async fn async_io<R>(&self, interest: Interest, mut f: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        loop {
            let mut guard = self.ready(interest).await?;
            // The operation spends a unit of the budget, as Tokio's.
            poll_fn(crate::task::coop::poll_budget).await;
            match guard.try_io(|fd| f(fd.get_ref())) {
                Ok(r) => {
                    crate::task::coop::spend();
                    return r;
                }
                Err(TryIoError(())) => continue,
            }
        }
    }

    /// [`async_io`](Self::async_io) with mutable access.
    ///
    /// # Errors
    /// `f`'s error, or the shutdown error.
    pub async fn async_io_mut<R>(
        &mut self,
        interest: Interest,
        mut f: impl FnMut(&mut T) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            let mut guard = self.ready_mut(interest).await?;
            poll_fn(crate::task::coop::poll_budget).await;
            match guard.try_io(|fd| f(fd.get_mut())) {
                Ok(r) => {
                    crate::task::coop::spend();
                    return r;
                }
                Err(TryIoError(())) => continue,
            }
        }
    }

    /// Run `f` once without waiting, if the reactor has seen the descriptor ready for
    /// `interest`'s first wait (read, write, priority, error); else `WouldBlock` without
    /// calling it, as Tokio's. A `WouldBlock` from `f` clears that readiness, so the next
    /// wait is for a new event.
    ///
    /// # Errors
    /// `f`'s error, or `WouldBlock`.
    pub fn try_io<R>(&self, interest: Interest, f: impl FnOnce(&T) -> io::Result<R>) -> io::Result<R> {
        self.reg.try_io_if_ready(interest.first_direction(), || f(self.get_ref()))
    }

    /// [`try_io`](Self::try_io) with mutable access.
    ///
    /// # Errors
    /// `f`'s error, or `WouldBlock`.
    pub fn try_io_mut<R>(&mut self, interest: Interest, f: impl FnOnce(&mut T) -> io::Result<R>) -> io::Result<R> {
        let dir = interest.first_direction();
        let inner = self.inner.as_mut().expect("an AsyncFd holds its value until into_inner");
        self.reg.try_io_if_ready(dir, || f(inner))
    }
}

impl<T: AsRawFd> AsRawFd for AsyncFd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl<T: AsRawFd> AsFd for AsyncFd<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor is open while the `AsyncFd` holds its value (the promise
        // of `register`), and the borrow cannot outlive `self`.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFd").field("inner", &self.inner).finish()
    }
}

impl<T: AsRawFd> Drop for AsyncFd<T> {
    fn drop(&mut self) {
        // Off the reactor before the value (and with it, usually, the descriptor) goes.
        if self.inner.is_some() {
            self.deregister();
        }
    }
}

/// Clear what a guard's wait saw (only `bits` of it, if given), unless a newer event
/// came; bits left uncleared stay in the guard.
fn clear(reg: &Registration, event: &mut Option<ReadyEvent>, bits: Option<u64>) {
    let Some(ev) = event.take() else { return };
    let bits = bits.unwrap_or(u64::MAX) & ev.bits();
    reg.clear_readiness_bits(ev, bits);
    let left = ev.bits() & !bits;
    if left != 0 {
        *event = Some(ev.with_bits(left));
    }
}

fn ready_of(event: &Option<ReadyEvent>) -> Ready {
    event.as_ref().map_or(Ready::EMPTY, |ev| Ready::from_bits(ev.bits()))
}

/// What both guards do with the readiness they hold.
macro_rules! guard_readiness {
    () => {
        /// The operation answered `WouldBlock`: forget the readiness the wait saw, so
        /// the next wait is for a new event (an event that arrived since is kept).
        pub fn clear_ready(&mut self) {
            clear(&self.fd.reg, &mut self.event, None);
        }

        /// [`clear_ready`](Self::clear_ready) for only the kinds of readiness in `ready`
        /// (of those the wait saw).
        pub fn clear_ready_matching(&mut self, ready: Ready) {
            clear(&self.fd.reg, &mut self.event, Some(ready.to_bits()));
        }

        /// Keep the readiness: the next wait answers at once (what dropping the guard
        /// does).
        pub fn retain_ready(&mut self) {
            self.event = None;
        }

        /// What the wait found (`Ready::EMPTY` once cleared).
        pub fn ready(&self) -> Ready {
            ready_of(&self.event)
        }
    };
}

/// `try_io` of a guard: `WouldBlock` clears the readiness and is `Err(TryIoError)`.
fn guarded<R>(result: io::Result<R>, clear_ready: impl FnOnce()) -> Result<io::Result<R>, TryIoError> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            clear_ready();
            Err(TryIoError(()))
        }
        r => Ok(r),
    }
}

impl<'a, T: AsRawFd> AsyncFdReadyGuard<'a, T> {
    guard_readiness!();

    /// Run `f`; if it answers `WouldBlock`, clear the readiness and return
    /// `Err(TryIoError)` (wait again), else its result.
    pub fn try_io<R>(&mut self, f: impl FnOnce(&'a AsyncFd<T>) -> io::Result<R>) -> Result<io::Result<R>, TryIoError> {
        let r = f(self.fd);
        guarded(r, || self.clear_ready())
    }

    /// The `AsyncFd`.
    pub fn get_ref(&self) -> &'a AsyncFd<T> {
        self.fd
    }

    /// The value holding the descriptor.
    pub fn get_inner(&self) -> &'a T {
        self.fd.get_ref()
    }
}

impl<T: AsRawFd> AsyncFdReadyMutGuard<'_, T> {
    guard_readiness!();

    /// See [`AsyncFdReadyGuard::try_io`].
    pub fn try_io<R>(&mut self, f: impl FnOnce(&mut AsyncFd<T>) -> io::Result<R>) -> Result<io::Result<R>, TryIoError> {
        let r = f(self.fd);
        guarded(r, || self.clear_ready())
    }

    /// The `AsyncFd`.
    pub fn get_ref(&self) -> &AsyncFd<T> {
        self.fd
    }

    /// The `AsyncFd`, mutably.
    pub fn get_mut(&mut self) -> &mut AsyncFd<T> {
        self.fd
    }

    /// The value holding the descriptor.
    pub fn get_inner(&self) -> &T {
        self.fd.get_ref()
    }

    /// The value holding the descriptor, mutably.
    pub fn get_inner_mut(&mut self) -> &mut T {
        self.fd.get_mut()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyGuard").field("async_fd", self.fd).field("ready", &self.ready()).finish()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyMutGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyMutGuard").field("async_fd", &self.fd).field("ready", &self.ready()).finish()
    }
}
