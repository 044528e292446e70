//! Wait labels built on the stack, and a blocking-pool job whose wait names itself: the
//! pieces `fs`, the standard streams and `process` share.
//!
//! A label is written into a fixed array a little larger than what a task's wait record
//! keeps ([`LABEL_BYTES`](crate::task::wait::LABEL_BYTES)), so naming a wait never
//! allocates; the record cuts what is past its size (and marks the cut).

// Each of `fs`, `io-std` and `process` uses a part of this, and any of them may be built
// alone (or none: the lean build).
#![allow(dead_code)]

use crate::task::join::JoinHandle;
use crate::task::wait::{self, LABEL_BYTES};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Bytes a label keeps: a little more than the record does, so that the record sees a
/// longer label as longer, cuts it itself and marks the cut (`…`) for the reader.
const CAP: usize = LABEL_BYTES + 4;

/// A label of at most [`CAP`] bytes of UTF-8, kept inline.
#[derive(Clone, Copy)]
pub(crate) struct StackLabel {
    bytes: [u8; CAP],
    len: u8,
}

impl StackLabel {
    /// An empty label.
    pub(crate) const fn empty() -> StackLabel {
        StackLabel { bytes: [0; CAP], len: 0 }
    }

    /// `parts` one after the other, cut where the space runs out.
    pub(crate) fn new(parts: &[&[u8]]) -> StackLabel {
        let mut l = StackLabel::empty();
        for p in parts {
            l.push(p);
        }
        l
    }

    /// Append `bytes` (cut where the space runs out).
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let at = self.len as usize;
        let n = bytes.len().min(CAP - at);
        self.bytes[at..at + n].copy_from_slice(&bytes[..n]);
        self.len = (at + n) as u8;
    }

    /// Append a number in decimal.
    pub(crate) fn push_u64(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    /// The raw bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The text: the longest valid UTF-8 prefix (a path that is not UTF-8, or a cut
    /// inside a character, ends the label there).
    pub(crate) fn as_str(&self) -> &str {
        let b = &self.bytes[..self.len as usize];
        match std::str::from_utf8(b) {
            Ok(s) => s,
            // `valid_up_to` is a character boundary of valid UTF-8, so this cannot fail.
            Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl std::fmt::Debug for StackLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bytes of a path, for a label.
#[cfg(unix)]
pub(crate) fn path_bytes(p: &std::path::Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

/// The bytes of a path, for a label (where paths are not bytes, the UTF-8 ones only).
#[cfg(not(unix))]
pub(crate) fn path_bytes(p: &std::path::Path) -> &[u8] {
    p.to_str().map(str::as_bytes).unwrap_or(b"?")
}

/// Poll `inner`, and if it is pending, put `label` in front of whatever it recorded.
pub(crate) fn poll_labelled<T>(
    label: &StackLabel,
    cx: &mut Context<'_>,
    inner: impl FnOnce(&mut Context<'_>) -> Poll<T>,
) -> Poll<T> {
    let mark = wait::Mark::now();
    let out = inner(cx);
    if out.is_pending() {
        wait::record_label_at(mark, label.as_str());
    }
    out
}

/// A blocking-pool job that names its wait with a label, and turns a failed job (a
/// panic, or a pool that shut down) into an I/O error.
pub(crate) struct Labelled<T> {
    /// `None` when there was no runtime to run the job: the first poll says so.
    handle: Option<JoinHandle<io::Result<T>>>,
    label: StackLabel,
}

impl<T: Send + 'static> Labelled<T> {
    /// Run `f` on the current runtime's blocking pool. Outside a Volt runtime the
    /// future fails with an error that says so (Tokio's `fs` panics there instead).
    pub(crate) fn spawn(label: StackLabel, f: impl FnOnce() -> io::Result<T> + Send + 'static) -> Labelled<T> {
        let handle = pool().ok().map(|pool| pool.spawn(f));
        Labelled { handle, label }
    }
}

impl<T> Future for Labelled<T> {
    type Output = io::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let this = self.get_mut();
        let Some(handle) = this.handle.as_mut() else {
            return Poll::Ready(Err(pool().err().unwrap_or_else(|| io::Error::other("no Volt runtime"))));
        };
        poll_labelled(&this.label, cx, |cx| Pin::new(handle).poll(cx)).map(|r| r.unwrap_or_else(|e| Err(join_error(e))))
    }
}

/// The current runtime's blocking pool, which runs the job, or the error a caller
/// outside any runtime gets (Tokio panics there instead).
pub(crate) fn pool() -> io::Result<crate::blocking::Spawner> {
    crate::blocking::Spawner::current().ok_or_else(|| {
        io::Error::other(
            "volt::fs and the standard streams must be used inside a Volt runtime (a task or `Runtime::block_on`)",
        )
    })
}

/// A blocking job that did not return: the error an I/O caller sees.
pub(crate) fn join_error(e: crate::task::join::JoinError) -> io::Error {
    if e.is_panic() {
        io::Error::other("a blocking I/O operation panicked")
    } else {
        crate::shutdown_error::shutdown_error(
            "a blocking I/O operation was cancelled: the Volt runtime is shutting down",
        )
    }
}
