//! The reactor's slab of registered sources, and the order io_uring's backend needs
//! between re-arming a source's poll and removing it.
//!
//! # Removal and re-arming never cross
//! An armed io_uring poll holds its socket's file: a socket closed with its poll armed
//! stays open (no FIN to the peer, a listener still taking connections) until the poll
//! goes. Two threads queue requests about one source's poll: the driver's holder arms it
//! again when it ended ([`Sources::rearm`]), and whoever drops the source cancels it
//! ([`Sources::remove_then`]). The kernel takes the submission queue in order, so what
//! matters is the order of the two in the queue: a re-arm queued after the cancel would
//! leave the poll armed for good. Both are queued while the sources lock is held (the
//! closures run under the borrow of the slab, which lives only inside that lock), and a
//! re-arm only for a slot that still holds its source under the token the poll carried.
//! So a re-arm is queued before the removal, which then cancels it, or never.
//! `loom_removal_cancels_every_rearm` models it, and its twin with the re-arm queued
//! after the lock is let go finds the interleaving that leaves the poll armed.
//!
//! Built under loom too (without the reactor) for those models.

use std::os::unix::io::RawFd;
use std::sync::Arc;

/// The bits of a token: io_uring's user data keeps two bits of its own beside it.
pub(crate) const TOKEN_BITS: u32 = u64::BITS - 2;

/// A slab of registered sources. A source's token holds its slot `i` as `i + 1` in the
/// low [`INDEX_BITS`] (token 0 is the waker) and the slot's generation above them.
///
/// The generation is what keeps an event from reaching the wrong source. Events wait in
/// the driver between the reactor's poll and their dispatch, and meanwhile another worker
/// may drop their source and register a new one in the freed slot (an accept loop under
/// connection churn does exactly that). A stale "peer closed" delivered to the newcomer
/// would say its first read may proceed when it may not, and fail a fresh `connect`.
/// Each free bumps the slot's generation, so the old token no longer matches.
pub(crate) struct Sources<X> {
    slots: Vec<Option<Arc<X>>>,
    /// Each slot's descriptor and poll mask, for the io_uring backend to arm its poll
    /// again; empty under epoll, whose registrations never pass one.
    arms: Vec<(RawFd, u32)>,
    /// Each slot's generation (wrapping within the token's high bits).
    gens: Vec<usize>,
    free: Vec<usize>,
}

impl<X> Default for Sources<X> {
    fn default() -> Sources<X> {
        Sources { slots: Vec::new(), arms: Vec::new(), gens: Vec::new(), free: Vec::new() }
    }
}

/// Token bits that hold the slot (the rest hold its generation).
const INDEX_BITS: u32 = if usize::BITS >= 64 { 32 } else { 24 };
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
/// A slot's generation wraps within what is left of a token that io_uring's user data
/// holds beside its own tag bits ([`TOKEN_BITS`]).
const GEN_MASK: usize = if usize::BITS > TOKEN_BITS {
    usize::MAX >> (INDEX_BITS + usize::BITS - TOKEN_BITS)
} else {
    usize::MAX >> INDEX_BITS
};

impl<X> Sources<X> {
    /// Put `io` in a free slot, with its descriptor and poll mask if the backend arms
    /// polls (`arm`: always `Some` for one reactor's io_uring backend, always `None` for
    /// epoll); its token.
    pub(crate) fn insert(&mut self, io: Arc<X>, arm: Option<(RawFd, u32)>) -> std::io::Result<usize> {
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(io);
                if let Some(arm) = arm {
                    self.arms[i] = arm;
                }
                i
            }
            None => {
                if self.slots.len() >= INDEX_MASK {
                    return Err(std::io::Error::other("too many I/O sources registered with this runtime"));
                }
                self.slots.push(Some(io));
                if let Some(arm) = arm {
                    self.arms.push(arm);
                }
                debug_assert!(self.arms.is_empty() || self.arms.len() == self.slots.len(), "one backend a reactor");
                self.gens.push(0);
                self.slots.len() - 1
            }
        };
        Ok((idx + 1) | (self.gens[idx] << INDEX_BITS))
    }

    /// The source `token` was given to, if it is still registered.
    pub(crate) fn get(&self, token: usize) -> Option<&Arc<X>> {
        let idx = (token & INDEX_MASK).checked_sub(1)?;
        if self.gens.get(idx) != Some(&(token >> INDEX_BITS)) {
            return None;
        }
        self.slots.get(idx)?.as_ref()
    }

    /// Every registered source.
    pub(crate) fn live(&self) -> impl Iterator<Item = &Arc<X>> {
        self.slots.iter().flatten()
    }

    /// Free `token`'s slot if it still holds `io`; whether it did.
    pub(crate) fn remove(&mut self, token: usize, io: &Arc<X>) -> bool {
        if !self.get(token).is_some_and(|x| Arc::ptr_eq(x, io)) {
            return false;
        }
        let idx = (token & INDEX_MASK) - 1;
        self.slots[idx] = None;
        self.gens[idx] = self.gens[idx].wrapping_add(1) & GEN_MASK;
        self.free.push(idx);
        true
    }

    /// [`remove`](Self::remove), then, if it freed the slot, `cancel(token)` while the
    /// lock is still held: the io_uring backend queues the poll's cancellation there (see
    /// the module doc).
    pub(crate) fn remove_then(&mut self, token: usize, io: &Arc<X>, cancel: impl FnOnce(usize)) -> bool {
        let removed = self.remove(token, io);
        if removed {
            cancel(token);
        }
        removed
    }

    /// If `token` still names its source, `arm(fd, token, mask)` with the source's
    /// descriptor and poll mask, under the lock (see the module doc); whether it did.
    pub(crate) fn rearm(&self, token: usize, arm: impl FnOnce(RawFd, usize, u32)) -> bool {
        if self.get(token).is_none() {
            return false;
        }
        let Some(&(fd, mask)) = self.arms.get((token & INDEX_MASK) - 1) else { return false };
        arm(fd, token, mask);
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A slot used again answers only to its new token: an event still carrying the old
    /// one (polled before the old source was dropped) finds nothing, and re-arms nothing.
    #[test]
    fn a_freed_slots_old_token_finds_nothing() {
        let mut s = Sources::default();
        let (a, b) = (Arc::new(1), Arc::new(2));
        let old = s.insert(Arc::clone(&a), Some((7, 1))).unwrap();
        assert!(s.get(old).is_some_and(|x| Arc::ptr_eq(x, &a)));
        let mut cancelled = Vec::new();
        assert!(s.remove_then(old, &a, |t| cancelled.push(t)));
        assert!(!s.remove_then(old, &a, |t| cancelled.push(t)), "freed twice");
        assert_eq!(cancelled, [old], "one cancel, for the freed token");
        assert!(!s.rearm(old, |_, _, _| panic!("re-armed a removed source")));
        let new = s.insert(Arc::clone(&b), Some((8, 2))).unwrap();
        assert_eq!(new & INDEX_MASK, old & INDEX_MASK, "the freed slot is used again");
        assert_ne!(new, old);
        assert!(s.get(old).is_none(), "the old token reached the slot's new source");
        assert!(!s.rearm(old, |_, _, _| panic!("the old token re-armed the new source")));
        let mut armed = None;
        assert!(s.rearm(new, |fd, t, mask| armed = Some((fd, t, mask))));
        assert_eq!(armed, Some((8, new, 2)), "the new source's own descriptor and mask");
        assert!(s.get(new).is_some_and(|x| Arc::ptr_eq(x, &b)));
        assert!(!s.remove(old, &a), "the old registration freed the new one's slot");
        assert!(s.get(new).is_some(), "the new source is still there");
        assert!(s.get(0).is_none() && s.get(12345).is_none(), "tokens never given find nothing");
        assert_eq!(s.live().count(), 1);
    }

    /// Under epoll no descriptor is kept, and a re-arm finds nothing to arm.
    #[test]
    fn epoll_registrations_keep_no_descriptor() {
        let mut s = Sources::default();
        let a = Arc::new(());
        let t = s.insert(Arc::clone(&a), None).unwrap();
        assert!(s.arms.is_empty());
        assert!(!s.rearm(t, |_, _, _| panic!("armed under epoll")));
    }
}

#[cfg(all(loom, test))]
mod loom_tests {
    use super::Sources;
    use crate::loom::{lock, thread, Arc, Mutex};

    /// What the kernel is asked about one source's poll, in submission order.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Request {
        Arm,
        Cancel,
    }

    /// A source registered with its poll armed; its poll ends (the thread that armed it
    /// exited) just as another thread drops the source. The holder re-arms the ended poll
    /// while the dropping thread removes the source; `rearm_under_lock` says whether the
    /// holder queues its re-arm under the sources lock (as the reactor does) or after
    /// letting it go. Returns whether the poll is armed once the kernel has taken every
    /// request in order.
    fn drop_while_rearming(rearm_under_lock: bool) -> bool {
        let sources = Arc::new(Mutex::new(Sources::default()));
        let io = std::sync::Arc::new(());
        let token = lock(&sources).insert(std::sync::Arc::clone(&io), Some((3, 1))).unwrap();
        let sq = Arc::new(Mutex::new(Vec::new()));
        let holder = {
            let (sources, sq) = (Arc::clone(&sources), Arc::clone(&sq));
            thread::spawn(move || {
                let s = lock(&sources);
                if rearm_under_lock {
                    s.rearm(token, |_, _, _| lock(&sq).push(Request::Arm));
                } else {
                    let registered = s.rearm(token, |_, _, _| {});
                    drop(s);
                    if registered {
                        lock(&sq).push(Request::Arm);
                    }
                }
            })
        };
        let removed = lock(&sources).remove_then(token, &io, |_| lock(&sq).push(Request::Cancel));
        holder.join().unwrap();
        assert!(removed, "the source was registered");
        // The kernel takes the queue in order: an arm arms, a cancel ends what is armed.
        let armed = lock(&sq).iter().fold(false, |_, r| *r == Request::Arm);
        armed
    }

    /// As the reactor does it: in every interleaving the poll ends up cancelled.
    #[test]
    fn loom_removal_cancels_every_rearm() {
        loom::model(|| assert!(!drop_while_rearming(true), "a re-arm was queued after the cancel"));
    }

    /// The model can fail: with the re-arm queued after the lock is let go, some
    /// interleaving queues it after the cancel, and the poll stays armed.
    #[test]
    #[should_panic(expected = "a re-arm was queued after the cancel")]
    fn loom_rearm_outside_the_lock_can_outlive_removal() {
        loom::model(|| assert!(!drop_while_rearming(false), "a re-arm was queued after the cancel"));
    }
}
