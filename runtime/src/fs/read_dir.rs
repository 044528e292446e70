//! `read_dir`: a directory's entries, read in batches on the blocking pool.

use super::label;
use crate::io::wait_label::{join_error, poll_labelled, pool, StackLabel};
use crate::task::join::JoinHandle;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::{FileType, Metadata};
use std::future::{poll_fn, Future};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Entries read per trip to the blocking pool: a directory of thousands of files costs
/// one trip per batch, not per entry.
const BATCH: usize = 32;

/// The entries of the directory at `path` (`std::fs::read_dir`), read as
/// [`ReadDir::next_entry`] asks for them. `.` and `..` are not listed.
pub async fn read_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    let path = path.as_ref();
    let label = label("read_dir", path);
    let owned = path.to_owned();
    let std = crate::io::wait_label::Labelled::spawn(label, move || std::fs::read_dir(owned)).await?;
    Ok(ReadDir { state: State::Idle(Some(Batch { buf: VecDeque::new(), std, done: false })), label })
}

/// A directory's entries, from [`read_dir`].
#[derive(Debug)]
pub struct ReadDir {
    state: State,
    label: StackLabel,
}

#[derive(Debug)]
struct Batch {
    buf: VecDeque<io::Result<DirEntry>>,
    std: std::fs::ReadDir,
    /// The directory has no more entries.
    done: bool,
}

#[derive(Debug)]
enum State {
    /// `None` only while a `poll` moves the batch out.
    Idle(Option<Batch>),
    Pending(JoinHandle<Batch>),
    /// The job reading a batch failed (the runtime shut down): the listing is over.
    Lost,
}

impl ReadDir {
    /// The next entry, or `None` after the last one. Cancel safe: an entry a cancelled
    /// call had read is returned by the next call.
    pub async fn next_entry(&mut self) -> io::Result<Option<DirEntry>> {
        poll_fn(|cx| self.poll_next_entry(cx)).await
    }

    /// Poll for the next entry: `Ready(Ok(None))` after the last one.
    pub fn poll_next_entry(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<DirEntry>>> {
        loop {
            match &mut self.state {
                State::Idle(batch) => {
                    let b = batch.as_mut().expect("a ReadDir's batch is always put back");
                    if let Some(next) = b.buf.pop_front() {
                        return Poll::Ready(next.map(Some));
                    }
                    if b.done {
                        return Poll::Ready(Ok(None));
                    }
                    let pool = pool()?;
                    let mut b = batch.take().expect("checked above");
                    self.state = State::Pending(pool.spawn(move || {
                        for _ in 0..BATCH {
                            match b.std.next() {
                                Some(r) => b.buf.push_back(r.map(|e| DirEntry(Arc::new(e)))),
                                None => {
                                    b.done = true;
                                    break;
                                }
                            }
                        }
                        b
                    }));
                }
                State::Lost => return Poll::Ready(Ok(None)),
                State::Pending(handle) => {
                    let label = self.label;
                    match poll_labelled(&label, cx, |cx| Pin::new(handle).poll(cx)) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(b)) => self.state = State::Idle(Some(b)),
                        // The batch (and the directory handle in it) went with the job:
                        // the error now, and the end of the listing after it.
                        Poll::Ready(Err(e)) => {
                            self.state = State::Lost;
                            return Poll::Ready(Err(join_error(e)));
                        }
                    }
                }
            }
        }
    }
}

/// One entry of a directory, from [`ReadDir::next_entry`].
#[derive(Debug, Clone)]
pub struct DirEntry(Arc<std::fs::DirEntry>);

impl DirEntry {
    /// The entry's full path: the directory given to `read_dir` joined with its name.
    pub fn path(&self) -> PathBuf {
        self.0.path()
    }

    /// The entry's name, without its directory.
    pub fn file_name(&self) -> OsString {
        self.0.file_name()
    }

    /// The entry's inode number, from the directory listing.
    #[cfg(unix)]
    pub fn ino(&self) -> u64 {
        std::os::unix::fs::DirEntryExt::ino(&*self.0)
    }

    /// The entry's metadata, not following a symbolic link (`std::fs::DirEntry::metadata`).
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let e = Arc::clone(&self.0);
        crate::io::wait_label::Labelled::spawn(label("metadata", &e.path()), move || e.metadata()).await
    }

    /// The entry's file type, not following a symbolic link (usually known from the
    /// listing itself; otherwise a `stat` on the pool).
    pub async fn file_type(&self) -> io::Result<FileType> {
        let e = Arc::clone(&self.0);
        crate::io::wait_label::Labelled::spawn(label("file_type", &e.path()), move || e.file_type()).await
    }
}
