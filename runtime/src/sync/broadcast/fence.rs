//! An asymmetric fence: a light side that costs a receiver nothing at run time, and a
//! heavy side, rare, that a sender pays for both.
//!
//! A receiver that reads a slot without entering it (see `slot`) first marks itself
//! busy, then looks whether the channel asks for care. A sender that needs care sets
//! that flag, then looks at every receiver's mark. Each side writes one word and reads
//! the other's: without a full fence between the write and the read on *both* sides,
//! both could read the old value (the write still in the core's store buffer), and the
//! sender would overwrite a value a receiver is cloning.
//!
//! A full fence costs every receive about as much as the atomic operation it saves. So
//! the receiver's side is only a compiler fence, and the sender's side is Linux's
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: it runs a full fence on every CPU
//! that is running a thread of this process before it returns. A receiver's thread is
//! then either past the fence, and its mark is visible, or not yet at its look at the
//! flag, and will see it set. Where the call is missing (another OS, a kernel before
//! 4.14, a seccomp filter), [`available`] says so and the channel never reads without
//! entering.
//!
//! Loom and Miri cannot run the system call; there both sides make an atomic
//! read-modify-write of one shared word instead. Those are ordered one after the other,
//! so the later one sees what the earlier one's side wrote: the same guarantee, at the
//! cost the light side avoids in a real build.

#[cfg(any(loom, miri))]
use crate::loom::AtomicU64;

/// The fence's state for one channel (nothing in a real build).
#[derive(Default)]
pub(super) struct Fence {
    #[cfg(any(loom, miri))]
    word: AtomicU64,
}

impl Fence {
    /// The receiver's side: between its mark and its look at the flag.
    #[inline(always)]
    pub(super) fn light(&self) {
        #[cfg(any(loom, miri))]
        self.word.fetch_add(0, std::sync::atomic::Ordering::AcqRel);
        #[cfg(not(any(loom, miri)))]
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }

    /// The sender's side: between setting the flag and reading the marks. Only after
    /// [`available`] said yes.
    pub(super) fn heavy(&self) {
        #[cfg(any(loom, miri))]
        self.word.fetch_add(0, std::sync::atomic::Ordering::AcqRel);
        #[cfg(all(not(any(loom, miri)), target_os = "linux"))]
        {
            // SAFETY: a system call with integer arguments only.
            let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
            // Its errors are a command the kernel lacks or a process not registered;
            // `available` ruled both out before any channel could read without entering.
            debug_assert_eq!(r, 0, "membarrier failed after registration");
        }
    }
}

#[cfg(all(not(any(loom, miri)), target_os = "linux"))]
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
#[cfg(all(not(any(loom, miri)), target_os = "linux"))]
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Whether [`Fence::heavy`] works in this process: the first call registers the process
/// for it (once, for every channel).
pub(super) fn available() -> bool {
    #[cfg(any(loom, miri))]
    {
        true
    }
    #[cfg(all(not(any(loom, miri)), target_os = "linux"))]
    {
        static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *REGISTERED.get_or_init(|| {
            // SAFETY: a system call with integer arguments only.
            unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
        })
    }
    #[cfg(all(not(any(loom, miri)), not(target_os = "linux")))]
    {
        false
    }
}

#[cfg(all(loom, test))]
mod loom_tests {
    use super::Fence;
    use crate::loom::{Arc, AtomicBool, AtomicU64};
    use std::sync::atomic::Ordering::{Acquire, Relaxed};

    /// The guarantee the broadcast channel relies on: a receiver that marked itself and
    /// a sender that set the flag cannot both miss the other's write.
    #[test]
    fn loom_one_side_sees_the_other() {
        crate::loom_tests::model_bounded(3, || {
            let f = Arc::new((Fence::default(), AtomicU64::new(0), AtomicBool::new(false)));
            let g = f.clone();
            let t = loom::thread::spawn(move || {
                g.1.store(1, Relaxed);
                g.0.light();
                g.2.load(Relaxed)
            });
            f.2.store(true, Relaxed);
            f.0.heavy();
            let mark = f.1.load(Acquire);
            let flag = t.join().unwrap();
            assert!(flag || mark == 1, "both missed");
        });
    }
}
