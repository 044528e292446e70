//! The multi-thread work-stealing scheduler. One file per concept; this file only
//! declares and re-exports.

pub(crate) mod cellcache;
// Under loom only its model uses it (the worker is not compiled there).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) mod exits;
pub(crate) mod idle;
pub(crate) mod inject;
pub(crate) mod lifo;
pub(crate) mod park;
pub(crate) mod queue;
pub(crate) mod rand;
#[cfg(not(loom))]
pub(crate) mod worker;

#[cfg(not(loom))]
pub(crate) use worker::block_until_complete;

#[cfg(loom)]
pub(crate) fn block_until_complete(
    _target: std::ptr::NonNull<crate::task::raw::Header>,
    _poll_join: &mut dyn FnMut(&std::task::Waker) -> bool,
) -> bool {
    unreachable!("blocking join is not modelled under loom")
}
