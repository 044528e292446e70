//! What the streams' channels hold, and its cap: the items a stream's channel carries,
//! the updates they share, and the count of rows all of them hold together (see
//! "Publishing" in the module doc).

use super::proto;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// What a stream's channel carries: the shared update, the updates this client missed
/// before it, and the client's own window of the task list.
/// The stalls new to this client ride along (see `broadcast`), and its own rows' share
/// of the queued total (see [`QUEUED_ROWS_CAP`]).
pub(super) type Item = (Arc<Published>, u64, Option<proto::TaskChanges>, Vec<proto::Stall>, Queued);

/// A published update, shared by every stream it is queued for: its events are counted
/// in the queued total once, until the last stream has taken it (or dropped it).
pub(super) struct Published {
    pub(super) update: proto::Update,
    _rows: Option<Queued>,
}

impl Published {
    /// An update no queued total counts (a stream's first, which has no events).
    pub(super) fn uncounted(update: proto::Update) -> Published {
        Published { update, _rows: None }
    }

    /// An update whose `rows` (from [`QueuedRows::count_update`]) stay counted while it
    /// is shared.
    pub(super) fn counted(update: proto::Update, rows: Queued) -> Published {
        Published { update, _rows: Some(rows) }
    }
}

/// What every stream's channel together may hold, in rows: a task row, an event or a
/// stall's frame count one each, and an update's events count once however many
/// streams it is queued for. A client that stops reading keeps what it was last sent, up
/// to [`CLIENT_BACKLOG`](super::CLIENT_BACKLOG) updates; without a bound on the sum, many
/// streams that stopped reading at different times (256 connections of 32 streams each)
/// could hold gigabytes of old updates. A stream's count includes the item its transport
/// took last, until it takes the next (see `service`). So a stream with an empty channel
/// (one that reads takes each update before the next) gets an update unless what older
/// updates and other streams hold already fills the cap; a stream that still has one
/// queued gets it only while the total stays under half the cap. The total passes the
/// cap by at most the largest update still held (one that was bigger than the cap on
/// its own, taken by a stream that then stopped reading) and the one being published.
/// Streams that stopped reading thus miss their updates while those that read keep
/// getting theirs, unless the stuck ones hold the whole cap between them. Not counted:
/// what HTTP/2 holds in a stream's send buffer once encoded (hyper keeps up to 400 KiB a
/// stream there, while the client's flow-control window lets it).
pub(super) const QUEUED_ROWS_CAP: usize = 1 << 20;

/// Rows counted in the queued total (and in one stream's, for a stream's own rows)
/// until the item or update holding them is taken from the channel, or dropped.
pub(super) struct Queued {
    rows: usize,
    stream: Option<Arc<AtomicUsize>>,
    all: Arc<AtomicUsize>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some(stream) = &self.stream {
            stream.fetch_sub(self.rows, Relaxed);
        }
        self.all.fetch_sub(self.rows, Relaxed);
    }
}

/// A stream's own rows in an item, as [`QUEUED_ROWS_CAP`] counts them: its task rows
/// (and its window's ids, one per eight), its stalls' frames, and one for the item.
pub(super) fn own_rows(tasks: Option<&proto::TaskChanges>, stalls: &[proto::Stall]) -> usize {
    let tasks = tasks.map_or(0, |t| t.changed.len() + (t.view.len() + t.removed.len()).div_ceil(8));
    let stalls: usize = stalls.iter().map(|s| 1 + s.stack.len()).sum();
    1 + tasks + stalls
}

/// The rows in every stream's channel, and what they may come to (see
/// [`QUEUED_ROWS_CAP`]).
pub(super) struct QueuedRows {
    all: Arc<AtomicUsize>,
    pub(super) cap: usize,
}

impl QueuedRows {
    pub(super) fn new() -> QueuedRows {
        QueuedRows { all: Arc::new(AtomicUsize::new(0)), cap: QUEUED_ROWS_CAP }
    }

    /// Count an update's `rows` (its events and task groups), shared by every stream it
    /// is queued for, until the returned count is dropped with the update.
    pub(super) fn count_update(&self, rows: usize) -> Queued {
        self.all.fetch_add(rows, Relaxed);
        Queued { rows, stream: None, all: Arc::clone(&self.all) }
    }

    /// Count `rows` more of a stream's own, counted in `own`, for an item with the update
    /// being published, whose events (`current` rows) the total counts already; `empty`:
    /// the stream's channel is empty. `None` when [`QUEUED_ROWS_CAP`] does not allow it.
    pub(super) fn reserve(&self, own: &Arc<AtomicUsize>, rows: usize, current: usize, empty: bool) -> Option<Queued> {
        let all = self.all.load(Relaxed);
        let allowed = if empty {
            // It takes what it is sent: allowed unless what is held (older updates, the
            // items streams have queued or taken last) leaves no room.
            all.saturating_sub(current) + rows <= self.cap
        } else {
            all + rows <= self.cap / 2
        };
        if !allowed {
            return None;
        }
        own.fetch_add(rows, Relaxed);
        self.all.fetch_add(rows, Relaxed);
        Some(Queued { rows, stream: Some(Arc::clone(own)), all: Arc::clone(&self.all) })
    }

    /// Whether the queued total leaves room for a new stream's first update of about
    /// `rows` (checked again, exactly, once it is made).
    pub(super) fn room_for(&self, rows: usize) -> bool {
        self.all.load(Relaxed) + rows <= self.cap
    }

    /// The rows in every stream's channel now.
    #[cfg(test)]
    pub(super) fn rows(&self) -> usize {
        self.all.load(Relaxed)
    }
}
