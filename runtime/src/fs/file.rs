//! `File`: an open file whose reads, writes and seeks run on the blocking pool.
//!
//! Tokio's model, which applications rely on: one operation is in flight at a time, and
//! it owns a buffer. A read fills the buffer on the pool and hands out its bytes, later
//! reads taking from it first. A write copies the caller's bytes into the buffer, starts
//! writing them on the pool and returns at once: the write is done only when a later
//! operation (`flush`, or the next write, read or seek) has waited for it, and its error,
//! if any, is reported by that operation. A file dropped with a write in flight lets the
//! write finish on the pool, but nothing reports whether it succeeded. A seek (or a
//! write) after a read gives back the read-ahead bytes the caller has not taken, so the
//! file's position is where the caller thinks it is.

use super::OpenOptions;
use crate::io::wait_label::{join_error, path_bytes, poll_labelled, pool, StackLabel};
use crate::task::join::JoinHandle;
use std::fs::{Metadata, Permissions};
use std::future::{poll_fn, Future};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll, Waker};

/// The largest buffer one read or write hands to the pool, as Tokio's default (2 MiB):
/// a bigger write is taken in parts.
const DEFAULT_MAX_BUF_SIZE: usize = 2 * 1024 * 1024;

/// An open file, as Tokio's `File`: `AsyncRead`, `AsyncWrite` and `AsyncSeek` with the
/// work done on the runtime's blocking pool.
///
/// Writes are buffered: `write` returns once the bytes are handed to the pool, and the
/// data is in the file only after `flush` (or `sync_all`, which also makes it durable)
/// returns. Call `flush` before dropping a `File` you wrote to: a drop loses the result
/// of a write still in flight, and a write that fails then is never reported.
pub struct File {
    std: Arc<std::fs::File>,
    inner: Mutex<Inner>,
    max_buf_size: usize,
    /// The path it was opened with (its start), for the wait labels.
    path: StackLabel,
}

struct Inner {
    state: State,
    /// A write's error not reported yet (found by an operation that could not return it).
    last_write_err: Option<io::Error>,
    /// The position the latest seek returned.
    pos: u64,
    /// Tasks in `&self` methods (`sync_all`, `set_len`, ...) waiting for the operation
    /// in flight besides the one whose waker the job holds: a job's handle keeps one
    /// waker, so each waiter leaves its own here and whoever collects the job wakes them.
    waiters: Vec<Waker>,
}

enum State {
    /// `None` only while an operation moves the buffer out.
    Idle(Option<Buf>),
    /// The operation on the pool, and its name for the wait label.
    Busy(JoinHandle<(Op, Buf)>, &'static str),
}

/// What an operation on the pool did.
enum Op {
    Read(io::Result<usize>),
    Write(io::Result<()>),
    Seek(io::Result<u64>),
}

/// The buffer an operation owns: read-ahead bytes not yet handed out (`buf[pos..]`), or
/// bytes to write.
#[derive(Default)]
struct Buf {
    buf: Vec<u8>,
    pos: usize,
}

impl Buf {
    fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn copy_to(&mut self, dst: &mut tokio::io::ReadBuf<'_>) {
        let n = (self.buf.len() - self.pos).min(dst.remaining());
        dst.put_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        if self.is_empty() {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.pos = 0;
    }

    /// Drop the read-ahead bytes, returning the seek that gives them back to the file.
    fn discard_read(&mut self) -> i64 {
        let n = -((self.buf.len() - self.pos) as i64);
        self.clear();
        n
    }

    fn read_from(&mut self, f: &std::fs::File, max: usize) -> io::Result<usize> {
        self.clear();
        self.buf.resize(max, 0);
        let r = loop {
            match (&*f).read(&mut self.buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        self.buf.truncate(*r.as_ref().unwrap_or(&0));
        r
    }

    fn write_to(&mut self, f: &std::fs::File) -> io::Result<()> {
        let r = (&*f).write_all(&self.buf[self.pos..]);
        self.clear();
        r
    }
}

/// The label `fs <op> <path>`.
fn file_label(op: &str, path: &StackLabel) -> StackLabel {
    StackLabel::new(&[b"fs ", op.as_bytes(), b" ", path.as_bytes()])
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl File {
    /// Open the file at `path` for reading.
    pub async fn open(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path).await
    }

    /// Open the file at `path` for writing, creating it, or truncating it if it exists.
    pub async fn create(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().write(true).create(true).truncate(true).open(path).await
    }

    /// Create a new file at `path`, opened for reading and writing; fails with
    /// `AlreadyExists` if it exists.
    pub async fn create_new(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).create_new(true).open(path).await
    }

    /// A new [`OpenOptions`], every option off.
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Take over an open `std::fs::File`.
    pub fn from_std(std: std::fs::File) -> File {
        File::with_label(std, StackLabel::empty())
    }

    pub(crate) fn from_std_labelled(std: std::fs::File, path: &Path) -> File {
        File::with_label(std, StackLabel::new(&[path_bytes(path)]))
    }

    fn with_label(std: std::fs::File, path: StackLabel) -> File {
        File {
            std: Arc::new(std),
            inner: Mutex::new(Inner {
                state: State::Idle(Some(Buf::default())),
                last_write_err: None,
                pos: 0,
                waiters: Vec::new(),
            }),
            max_buf_size: DEFAULT_MAX_BUF_SIZE,
            path,
        }
    }

    /// The largest buffer one read or write hands to the pool (2 MiB unless set).
    ///
    /// # Panics
    /// If `max_buf_size` is zero, as Tokio's.
    #[track_caller]
    pub fn set_max_buf_size(&mut self, max_buf_size: usize) {
        assert!(max_buf_size > 0, "`max_buf_size` must be greater than 0");
        self.max_buf_size = max_buf_size;
    }

    /// The largest buffer one read or write hands to the pool.
    pub fn max_buf_size(&self) -> usize {
        self.max_buf_size
    }

    /// The file's metadata.
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let std = Arc::clone(&self.std);
        self.on_pool("metadata", move || std.metadata()).await
    }

    /// Change the file's permissions.
    pub async fn set_permissions(&self, perm: Permissions) -> io::Result<()> {
        let std = Arc::clone(&self.std);
        self.on_pool("set_permissions", move || std.set_permissions(perm)).await
    }

    /// Wait for the operation in flight (so a write finishing later cannot move the
    /// times again), then set the file's access and modification times; a time left
    /// unset in `times` keeps its value.
    pub async fn set_times(&self, times: FileTimes) -> io::Result<()> {
        self.complete_inflight().await?;
        let std = Arc::clone(&self.std);
        let times = times.to_std();
        self.on_pool("set_times", move || std.set_times(times)).await
    }

    /// [`set_times`](Self::set_times) with only the modification time.
    pub async fn set_modified(&self, time: std::time::SystemTime) -> io::Result<()> {
        self.set_times(FileTimes::new().set_modified(time)).await
    }

    /// Wait for the operation in flight, then write the file's data and metadata to the
    /// device (`fsync`).
    pub async fn sync_all(&self) -> io::Result<()> {
        self.complete_inflight().await?;
        let std = Arc::clone(&self.std);
        self.on_pool("sync_all", move || std.sync_all()).await
    }

    /// Wait for the operation in flight, then write the file's data to the device
    /// (`fdatasync`): metadata only as far as reading the data back needs it.
    pub async fn sync_data(&self) -> io::Result<()> {
        self.complete_inflight().await?;
        let std = Arc::clone(&self.std);
        self.on_pool("sync_data", move || std.sync_data()).await
    }

    /// Truncate or extend the file to `size` bytes, after the operation in flight. The
    /// position is unchanged (a later write past the end fills the gap with zeros).
    pub async fn set_len(&self, size: u64) -> io::Result<()> {
        self.complete_inflight().await?;
        let seek = {
            let mut inner = lock(&self.inner);
            match &mut inner.state {
                State::Idle(Some(buf)) if !buf.is_empty() => Some(SeekFrom::Current(buf.discard_read())),
                _ => None,
            }
        };
        let std = Arc::clone(&self.std);
        self.on_pool("set_len", move || {
            if let Some(seek) = seek {
                (&*std).seek(seek)?;
            }
            std.set_len(size)
        })
        .await
    }

    /// A second `File` for the same open file (a duplicated descriptor, sharing the
    /// position), made after the operation in flight completes.
    pub async fn try_clone(&self) -> io::Result<File> {
        self.complete_inflight().await?;
        let std = Arc::clone(&self.std);
        let clone = self.on_pool("try_clone", move || std.try_clone()).await?;
        let mut clone = File::with_label(clone, self.path);
        clone.max_buf_size = self.max_buf_size;
        Ok(clone)
    }

    /// Wait for the operation in flight, then give back the `std::fs::File`.
    pub async fn into_std(self) -> std::fs::File {
        let _ = self.complete_inflight().await;
        match Arc::try_unwrap(self.std) {
            Ok(std) => std,
            // A `metadata` (or similar) call whose future was dropped may still hold the
            // file on the pool: a second descriptor for the same open file serves.
            Err(shared) => shared
                .try_clone()
                .unwrap_or_else(|e| panic!("volt::fs::File::into_std: cannot duplicate the file descriptor: {e}")),
        }
    }

    /// Give back the `std::fs::File` at once, or `self` if an operation is in flight.
    // Tokio's signature: the file itself comes back on failure.
    #[allow(clippy::result_large_err)]
    pub fn try_into_std(mut self) -> Result<std::fs::File, File> {
        if matches!(self.inner.get_mut().unwrap_or_else(|e| e.into_inner()).state, State::Busy(..)) {
            return Err(self);
        }
        let File { std, inner, max_buf_size, path } = self;
        Arc::try_unwrap(std).map_err(|std| File { std, inner, max_buf_size, path })
    }

    /// Run `f` on the pool, its wait named `fs <op> <path>`.
    async fn on_pool<T: Send + 'static>(
        &self,
        op: &str,
        f: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        crate::io::wait_label::Labelled::spawn(self.label(op), f).await
    }

    fn label(&self, op: &str) -> StackLabel {
        file_label(op, &self.path)
    }

    /// Wait until no operation is in flight; a write's error is returned.
    async fn complete_inflight(&self) -> io::Result<()> {
        poll_fn(|cx| {
            let mut inner = lock(&self.inner);
            let r = inner.poll_flush(cx, &self.path);
            if r.is_pending() && !inner.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                inner.waiters.push(cx.waker().clone());
            }
            r
        })
        .await
    }
}

impl Inner {
    /// Wait for the operation in flight, recording its outcome; `Err` only when the job
    /// itself failed (a panic, or the pool shut down).
    fn poll_busy(&mut self, cx: &mut Context<'_>, path: &StackLabel) -> Poll<io::Result<Option<Op>>> {
        let State::Busy(handle, op) = &mut self.state else { return Poll::Ready(Ok(None)) };
        let name: &'static str = op;
        let out = ready!(poll_labelled(&file_label(name, path), cx, |cx| Pin::new(handle).poll(cx)));
        for w in self.waiters.drain(..) {
            w.wake();
        }
        match out {
            Ok((op, buf)) => {
                self.state = State::Idle(Some(buf));
                Poll::Ready(Ok(Some(op)))
            }
            Err(e) => {
                self.state = State::Idle(Some(Buf::default()));
                Poll::Ready(Err(join_error(e)))
            }
        }
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>, path: &StackLabel) -> Poll<io::Result<()>> {
        if let Some(e) = self.last_write_err.take() {
            return Poll::Ready(Err(e));
        }
        match ready!(self.poll_busy(cx, path))? {
            Some(Op::Write(r)) => Poll::Ready(r),
            Some(Op::Seek(Ok(pos))) => {
                self.pos = pos;
                Poll::Ready(Ok(()))
            }
            _ => Poll::Ready(Ok(())),
        }
    }

    fn take_idle(&mut self) -> Buf {
        match &mut self.state {
            State::Idle(buf) => buf.take().unwrap_or_default(),
            State::Busy(..) => unreachable!("taken only when idle"),
        }
    }
}

impl tokio::io::AsyncRead for File {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, dst: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let (std, max, path) = (&me.std, me.max_buf_size, me.path);
        let inner = me.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        if dst.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if let State::Idle(_) = inner.state {
                let mut buf = inner.take_idle();
                if !buf.is_empty() {
                    buf.copy_to(dst);
                    inner.state = State::Idle(Some(buf));
                    return Poll::Ready(Ok(()));
                }
                let pool = match pool() {
                    Ok(p) => p,
                    Err(e) => {
                        inner.state = State::Idle(Some(buf));
                        return Poll::Ready(Err(e));
                    }
                };
                let (std, want) = (Arc::clone(std), dst.remaining().min(max));
                inner.state = State::Busy(
                    pool.spawn(move || {
                        let r = buf.read_from(&std, want);
                        (Op::Read(r), buf)
                    }),
                    "read",
                );
            }
            match ready!(inner.poll_busy(cx, &path))? {
                Some(Op::Read(Ok(_))) => {
                    if let State::Idle(Some(buf)) = &mut inner.state {
                        buf.copy_to(dst);
                    }
                    return Poll::Ready(Ok(()));
                }
                Some(Op::Read(Err(e))) => return Poll::Ready(Err(e)),
                // A write finished: its error waits for the next write or flush.
                Some(Op::Write(Err(e))) => inner.last_write_err = Some(e),
                Some(Op::Seek(Ok(pos))) => inner.pos = pos,
                _ => {}
            }
        }
    }
}

impl File {
    /// Hand a write to the pool once none is in flight: `fill` copies the caller's bytes
    /// (up to the given limit) into the (empty) buffer and says how many it took.
    fn poll_write_with(
        &mut self,
        cx: &mut Context<'_>,
        mut fill: impl FnMut(&mut Vec<u8>, usize) -> usize,
    ) -> Poll<io::Result<usize>> {
        let me = self;
        let (std, max, path) = (&me.std, me.max_buf_size, me.path);
        let inner = me.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = inner.last_write_err.take() {
            return Poll::Ready(Err(e));
        }
        loop {
            if let State::Idle(_) = inner.state {
                let pool = pool()?;
                let mut buf = inner.take_idle();
                // Read-ahead bytes the caller never took: the write goes where the caller
                // stopped reading.
                let seek = (!buf.is_empty()).then(|| SeekFrom::Current(buf.discard_read()));
                buf.clear();
                let n = fill(&mut buf.buf, max);
                let std = Arc::clone(std);
                inner.state = State::Busy(
                    pool.spawn(move || {
                        let r = match seek {
                            Some(seek) => (&*std).seek(seek).and_then(|_| buf.write_to(&std)),
                            None => buf.write_to(&std),
                        };
                        (Op::Write(r), buf)
                    }),
                    "write",
                );
                return Poll::Ready(Ok(n));
            }
            match ready!(inner.poll_busy(cx, &path))? {
                Some(Op::Write(Err(e))) => return Poll::Ready(Err(e)),
                Some(Op::Seek(Ok(pos))) => inner.pos = pos,
                // A read's bytes stay in the buffer, and the write seeks back over them.
                _ => {}
            }
        }
    }
}

impl tokio::io::AsyncWrite for File {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_with(cx, |buf, max| {
            let n = src.len().min(max);
            buf.extend_from_slice(&src[..n]);
            n
        })
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_with(cx, |buf, max| {
            for b in bufs {
                let n = b.len().min(max - buf.len());
                buf.extend_from_slice(&b[..n]);
                if buf.len() == max {
                    break;
                }
            }
            buf.len()
        })
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let path = me.path;
        me.inner.get_mut().unwrap_or_else(|e| e.into_inner()).poll_flush(cx, &path)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl tokio::io::AsyncSeek for File {
    fn start_seek(self: Pin<&mut Self>, mut pos: SeekFrom) -> io::Result<()> {
        let me = self.get_mut();
        let std = Arc::clone(&me.std);
        let inner = me.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        if let State::Busy(..) = inner.state {
            return Err(io::Error::other("other file operation is pending, call poll_complete before start_seek"));
        }
        let pool = pool()?;
        let mut buf = inner.take_idle();
        if !buf.is_empty() {
            // The caller's position is behind the file's by the read-ahead bytes.
            let back = buf.discard_read();
            if let SeekFrom::Current(off) = &mut pos {
                *off += back;
            }
        }
        inner.state = State::Busy(
            pool.spawn(move || {
                let r = (&*std).seek(pos);
                (Op::Seek(r), buf)
            }),
            "seek",
        );
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        let me = self.get_mut();
        let path = me.path;
        let inner = me.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        loop {
            match ready!(inner.poll_busy(cx, &path))? {
                None => return Poll::Ready(Ok(inner.pos)),
                Some(Op::Seek(r)) => {
                    if let Ok(pos) = r {
                        inner.pos = pos;
                    }
                    return Poll::Ready(r);
                }
                Some(Op::Write(Err(e))) => inner.last_write_err = Some(e),
                _ => {}
            }
        }
    }
}

impl From<std::fs::File> for File {
    fn from(std: std::fs::File) -> File {
        File::from_std(std)
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File").field("std", &self.std).finish_non_exhaustive()
    }
}

#[cfg(unix)]
impl std::os::unix::io::AsRawFd for File {
    fn as_raw_fd(&self) -> std::os::unix::io::RawFd {
        self.std.as_raw_fd()
    }
}

#[cfg(unix)]
impl std::os::unix::io::FromRawFd for File {
    unsafe fn from_raw_fd(fd: std::os::unix::io::RawFd) -> File {
        // SAFETY: the caller hands over an open descriptor it owns, as
        // `std::fs::File::from_raw_fd` requires.
        File::from_std(unsafe { std::fs::File::from_raw_fd(fd) })
    }
}

#[cfg(unix)]
impl std::os::unix::io::AsFd for File {
    fn as_fd(&self) -> std::os::unix::io::BorrowedFd<'_> {
        self.std.as_fd()
    }
}

/// The times [`File::set_times`] sets: each one left unset keeps the file's. (Tokio's
/// type of the same name; `std::fs::FileTimes` has no getters, so this one keeps the
/// values until the call.)
#[derive(Debug, Clone, Copy, Default)]
#[must_use = "the times are set only by `File::set_times`"]
pub struct FileTimes {
    accessed: Option<std::time::SystemTime>,
    modified: Option<std::time::SystemTime>,
}

impl FileTimes {
    /// No time set.
    pub fn new() -> FileTimes {
        FileTimes::default()
    }

    /// Set the last access time.
    pub fn set_accessed(mut self, t: std::time::SystemTime) -> FileTimes {
        self.accessed = Some(t);
        self
    }

    /// Set the last modification time.
    pub fn set_modified(mut self, t: std::time::SystemTime) -> FileTimes {
        self.modified = Some(t);
        self
    }

    fn to_std(self) -> std::fs::FileTimes {
        let mut times = std::fs::FileTimes::new();
        if let Some(t) = self.accessed {
            times = times.set_accessed(t);
        }
        if let Some(t) = self.modified {
            times = times.set_modified(t);
        }
        times
    }
}
