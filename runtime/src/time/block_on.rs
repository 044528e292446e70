//! How a `block_on` caller sleeps between polls of its future, and (feature `test-util`)
//! how it counts as busy for a paused clock (see `time::clock`'s "When the runtime has
//! nothing to do").

#[cfg(feature = "test-util")]
use super::clock::ClockInner;
#[cfg(feature = "test-util")]
use std::sync::atomic::Ordering::SeqCst;
#[cfg(feature = "test-util")]
use std::sync::{Arc, Mutex, MutexGuard};

/// How a `block_on` caller sleeps between polls of its future, and its waker. With
/// `test-util`, it also counts the caller as busy while it polls or has been woken, so a
/// paused clock never auto-advances under it (see `time::clock`).
pub(crate) struct BlockOnPark {
    #[cfg(feature = "test-util")]
    inner: Arc<BlockOnInner>,
    #[cfg(feature = "test-util")]
    driver: crate::driver::Handle,
}

#[cfg(feature = "test-util")]
const POLLING: u8 = 0;
#[cfg(feature = "test-util")]
const POLLING_NOTIFIED: u8 = 1;
#[cfg(feature = "test-util")]
const IDLE: u8 = 2;
#[cfg(feature = "test-util")]
const NOTIFIED: u8 = 3;
#[cfg(feature = "test-util")]
const DONE: u8 = 4;

#[cfg(feature = "test-util")]
struct BlockOnInner {
    state: Mutex<u8>,
    thread: std::thread::Thread,
    clock: Arc<ClockInner>,
}

#[cfg(feature = "test-util")]
impl BlockOnInner {
    fn lock(&self) -> MutexGuard<'_, u8> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(feature = "test-util")]
impl std::task::Wake for BlockOnInner {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        {
            let mut st = self.lock();
            match *st {
                IDLE => {
                    self.clock.outside.fetch_add(1, SeqCst);
                    *st = NOTIFIED;
                    if self.clock.paused.load(SeqCst) {
                        // Wait out an advance decided before the count went up: the poll
                        // this wake leads to starts after it (see the module doc).
                        drop(self.clock.state.lock().unwrap_or_else(|e| e.into_inner()));
                    }
                }
                POLLING => *st = POLLING_NOTIFIED,
                _ => {}
            }
        }
        self.thread.unpark();
    }
}

impl BlockOnPark {
    /// For a `block_on` on `shared`, from the calling thread, which polls at once.
    pub(crate) fn new(driver: &crate::driver::Handle) -> BlockOnPark {
        #[cfg(feature = "test-util")]
        {
            let clock = Arc::clone(&driver.time.clock.inner);
            clock.outside.fetch_add(1, SeqCst);
            BlockOnPark {
                inner: Arc::new(BlockOnInner { state: Mutex::new(POLLING), thread: std::thread::current(), clock }),
                driver: driver.clone(),
            }
        }
        #[cfg(not(feature = "test-util"))]
        {
            let _ = driver;
            BlockOnPark {}
        }
    }

    /// The waker to poll the future with.
    pub(crate) fn waker(&self) -> std::task::Waker {
        #[cfg(feature = "test-util")]
        {
            std::task::Waker::from(Arc::clone(&self.inner))
        }
        #[cfg(not(feature = "test-util"))]
        {
            crate::runtime::context::thread_waker()
        }
    }

    /// After a poll returned `Pending`: sleep until the waker is woken (at once if it
    /// was woken during the poll).
    pub(crate) fn park(&self) {
        #[cfg(feature = "test-util")]
        {
            {
                let mut st = self.inner.lock();
                if *st == POLLING_NOTIFIED {
                    *st = POLLING;
                    return;
                }
                *st = IDLE;
                self.inner.clock.outside.fetch_sub(1, SeqCst);
            }
            if self.inner.clock.paused.load(SeqCst) {
                // The runtime may have nothing to do now: the worker in the reactor looks
                // again (see `time::clock`).
                self.driver.wake_reactor();
            }
            loop {
                std::thread::park();
                let mut st = self.inner.lock();
                if *st == NOTIFIED {
                    *st = POLLING;
                    return;
                }
            }
        }
        #[cfg(not(feature = "test-util"))]
        std::thread::park();
    }
}

#[cfg(feature = "test-util")]
impl Drop for BlockOnPark {
    fn drop(&mut self) {
        let was = std::mem::replace(&mut *self.inner.lock(), DONE);
        if was != IDLE && was != DONE {
            self.inner.clock.outside.fetch_sub(1, SeqCst);
            if self.inner.clock.paused.load(SeqCst) {
                self.driver.wake_reactor();
            }
        }
    }
}
