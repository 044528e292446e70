//! Futex parking: one `u32` per worker, so sleeping and waking cost one system call each
//! and need no lock.
//!
//! ```text
//! UNPARKED --park(): CAS 0->1, futex wait--> PARKED --timeout / wake--> UNPARKED
//! PARKED   --unpark(): swap->NOTIFIED, futex wake(1)--> NOTIFIED --park() returns--> UNPARKED
//! UNPARKED --unpark(): swap->NOTIFIED--> NOTIFIED --next park() returns at once--> UNPARKED
//! UNPARKED --park_in_driver(): CAS 0->3, block in the reactor--> PARKED_DRIVER
//! PARKED_DRIVER --unpark(): swap->NOTIFIED, wake the reactor--> NOTIFIED
//! ```
//!
//! A worker parked in the reactor (see `io`) is woken through the reactor's waker (an
//! eventfd that stays readable until the next poll), not the futex; `unpark` picks the way
//! from the state it swapped out, so it always uses the right one.
//!
//! `unpark` always stores NOTIFIED before it wakes, and `park` waits only while the word
//! is PARKED, so an unpark can never fall between the check and the sleep: a notified
//! worker wakes in microseconds, never after the timeout. `park` leaves the word with a
//! swap to UNPARKED rather than a plain store, so it can report whether it was notified.
//!
//! `park` takes an optional timeout: `None` sleeps until `unpark`, with no timer at all, which
//! is how an idle runtime's workers sleep (see "Parking" in `run.rs` for who keeps one).
//!
//! On Linux the wait is the `futex` system call. Elsewhere a mutex and condvar stand in.
//! Under loom the futex is emulated with loom's mutex and condvar and there is no timeout,
//! so a lost wake shows up as a deadlock in the model.

use crate::loom::AtomicU32;
#[cfg(all(not(loom), target_os = "linux"))]
use std::ptr;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

const UNPARKED: u32 = 0;
const PARKED: u32 = 1;
const NOTIFIED: u32 = 2;
const PARKED_DRIVER: u32 = 3;

/// Why `park` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unparked {
    /// `unpark` was called (before or during the wait).
    Notified,
    /// The timeout elapsed (or a spurious wake came first).
    TimedOut,
}

/// One worker's park word. On its own cache line: other threads write it on every unpark,
/// and it must not drag the owner's hot fields (LIFO slot, counters) with it.
#[repr(align(128))]
pub(crate) struct ParkState {
    futex: AtomicU32,
    #[cfg(any(loom, not(target_os = "linux")))]
    fallback: (crate::loom::Mutex<()>, crate::loom::Condvar),
}

impl ParkState {
    pub(crate) fn new() -> ParkState {
        ParkState {
            futex: AtomicU32::new(UNPARKED),
            #[cfg(any(loom, not(target_os = "linux")))]
            fallback: (crate::loom::Mutex::new(()), crate::loom::Condvar::new()),
        }
    }

    /// Sleep until `unpark` or until `timeout` elapses (`None`: no timeout). A notification
    /// that arrived before the call is consumed and returns at once.
    pub(crate) fn park(&self, timeout: Option<Duration>) -> Unparked {
        if self.futex.compare_exchange(UNPARKED, PARKED, Acquire, Acquire).is_err() {
            // Already NOTIFIED: consume it.
            self.futex.swap(UNPARKED, Acquire);
            return Unparked::Notified;
        }
        self.wait_while_parked(timeout);
        if self.futex.swap(UNPARKED, Acquire) == NOTIFIED {
            Unparked::Notified
        } else {
            Unparked::TimedOut
        }
    }

    /// Park by blocking in the reactor: `block` must return when `wake_driver` (as passed
    /// to `unpark`) is called, even if that happened before `block` started.
    pub(crate) fn park_in_driver(&self, block: impl FnOnce()) -> Unparked {
        if self.futex.compare_exchange(UNPARKED, PARKED_DRIVER, Acquire, Acquire).is_err() {
            self.futex.swap(UNPARKED, Acquire);
            return Unparked::Notified;
        }
        block();
        if self.futex.swap(UNPARKED, Acquire) == NOTIFIED {
            Unparked::Notified
        } else {
            Unparked::TimedOut
        }
    }

    /// Wake the parked thread (through the futex, or `wake_driver` if it is parked in the
    /// reactor), or make its next park return at once.
    pub(crate) fn unpark(&self, wake_driver: impl FnOnce()) {
        match self.futex.swap(NOTIFIED, Release) {
            PARKED => self.wake_one(),
            PARKED_DRIVER => wake_driver(),
            _ => {}
        }
    }

    #[cfg(all(not(loom), target_os = "linux"))]
    fn wait_while_parked(&self, timeout: Option<Duration>) {
        // A timeout too far away to add to `now` is no timeout.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        while self.futex.load(Acquire) == PARKED {
            let ts = match deadline {
                None => None,
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return;
                    }
                    let left = deadline - now;
                    Some(libc::timespec {
                        tv_sec: left.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
                        tv_nsec: left.subsec_nanos() as libc::c_long,
                    })
                }
            };
            let ts_ptr = ts.as_ref().map_or(ptr::null(), |ts| ts as *const libc::timespec);
            // SAFETY: FUTEX_WAIT reads the u32 behind a valid, aligned pointer that lives
            // as long as `self`; the timespec, when given, is a valid relative timeout that
            // outlives the call, and a null one means no timeout. A wake, a timeout or
            // EINTR all just return.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.futex.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    PARKED,
                    ts_ptr,
                );
            }
        }
    }

    #[cfg(all(not(loom), target_os = "linux"))]
    fn wake_one(&self) {
        // SAFETY: FUTEX_WAKE on a valid, aligned u32 owned by `self`.
        unsafe {
            libc::syscall(libc::SYS_futex, self.futex.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
        }
    }

    #[cfg(all(not(loom), not(target_os = "linux")))]
    fn wait_while_parked(&self, timeout: Option<Duration>) {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut g = crate::loom::lock(&self.fallback.0);
        while self.futex.load(Acquire) == PARKED {
            g = match deadline {
                None => self.fallback.1.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return;
                    }
                    self.fallback.1.wait_timeout(g, deadline - now).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }

    #[cfg(loom)]
    fn wait_while_parked(&self, _timeout: Option<Duration>) {
        let mut g = crate::loom::lock(&self.fallback.0);
        while self.futex.load(Acquire) == PARKED {
            g = self.fallback.1.wait(g).unwrap();
        }
    }

    #[cfg(any(loom, not(target_os = "linux")))]
    fn wake_one(&self) {
        // Taking the lock orders this wake after the waiter's check of the word.
        drop(crate::loom::lock(&self.fallback.0));
        self.fallback.1.notify_one();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn unpark_before_park_returns_at_once() {
        let p = ParkState::new();
        p.unpark(|| unreachable!());
        // `Notified`, not `TimedOut`: it returned for the unpark, not after the 5 s.
        assert_eq!(p.park(Some(Duration::from_secs(5))), Unparked::Notified);
    }

    #[test]
    fn park_times_out_without_unpark() {
        let p = ParkState::new();
        assert_eq!(p.park(Some(Duration::from_millis(5))), Unparked::TimedOut);
    }

    #[test]
    fn unpark_wakes_a_parked_thread_long_before_the_timeout() {
        let p = Arc::new(ParkState::new());
        let p2 = p.clone();
        let t = std::thread::spawn(move || p2.park(Some(Duration::from_secs(60))));
        std::thread::sleep(Duration::from_millis(20));
        p.unpark(|| unreachable!("not parked in the driver"));
        // `Notified`, not `TimedOut`: the unpark ended the park, not its 60 s timeout.
        assert_eq!(t.join().unwrap(), Unparked::Notified);
    }

    #[test]
    fn park_without_a_timeout_sleeps_until_unpark() {
        let p = Arc::new(ParkState::new());
        let p2 = p.clone();
        let t = std::thread::spawn(move || p2.park(None));
        // Whether the unpark lands before or during the wait, park returns Notified: a
        // park with no timeout can't report TimedOut, and a lost unpark would hang here.
        std::thread::sleep(Duration::from_millis(20));
        p.unpark(|| unreachable!("not parked in the driver"));
        assert_eq!(t.join().unwrap(), Unparked::Notified);
    }
}
