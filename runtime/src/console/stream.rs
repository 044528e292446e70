//! One watching stream: its channel, what it asked for, and its window of the task list
//! with what it was last sent of it, from which each update's task changes are made.

use super::cost::Conn;
use super::proto;
use super::queue::Item;
use super::tasks::{Query, TaskIndex};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A watching stream, as the publisher offers it updates.
pub(super) struct Client {
    pub(super) tx: mpsc::Sender<Item>,
    /// The connection it came on, which pays for its windows (see `cost`).
    pub(super) conn: Conn,
    /// Updates this client missed since the last one it was sent.
    pub(super) missed: u64,
    /// The stream's `watch_id`.
    pub(super) id: u64,
    /// False for a stream with `omit_tasks`.
    pub(super) wants_tasks: bool,
    /// False for a stream with `skip_lost_wakers`.
    pub(super) wants_lost_wakers: bool,
    /// True for a stream with `want_resources`.
    pub(super) wants_resources: bool,
    /// Its window of the task list (see [`ClientView`]).
    pub(super) view: ClientView,
    /// The number (in the publisher's [`StallFeed`](super::stalls::StallFeed)) of the
    /// first stall this client was not sent: each stall reaches each client once, even
    /// one that missed updates.
    pub(super) stalls_seen: u64,
    /// The rows in its channel (see [`QUEUED_ROWS_CAP`](super::queue::QUEUED_ROWS_CAP)).
    pub(super) queued: Arc<AtomicUsize>,
}

/// What one stream asked for from the task list and what it was sent.
pub(super) struct ClientView {
    pub(super) query: Query,
    /// `SetTaskQuery` calls so far on this stream.
    pub(super) generation: u64,
    /// The rows the client holds (id -> what it was sent), in window order in `ids`.
    pub(super) sent: HashMap<u64, (u8, u64, u64, u64)>,
    pub(super) ids: Vec<u64>,
    pub(super) matching: u64,
    /// The next update resends the whole window (first update, new query, missed update).
    pub(super) full_next: bool,
    /// The index generation `ids` was computed at.
    pub(super) index_generation: u64,
    /// The publish (`State::seq`) `ids` was computed at (0: never), for taking turns.
    pub(super) window_at: u64,
}

impl ClientView {
    pub(super) fn new(query: Query) -> ClientView {
        ClientView {
            query,
            generation: 0,
            sent: HashMap::new(),
            ids: Vec::new(),
            matching: 0,
            full_next: true,
            index_generation: 0,
            window_at: 0,
        }
    }

    /// Whether the index changed since the window was computed.
    pub(super) fn stale(&self, idx: &TaskIndex) -> bool {
        self.index_generation != idx.generation
    }

    /// Take `page`, computed for this stream's new query from `idx`, as its window: the
    /// next update resends it whole, without computing it again.
    pub(super) fn take_page(&mut self, page: &proto::TaskPage, idx: &TaskIndex, at: u64) {
        self.ids = page.tasks.iter().map(|t| t.id).collect();
        self.computed(idx, at, page.matching);
        self.full_next = true;
    }

    /// Note a window just computed from `idx` at publish `at`, with `matching` tasks.
    fn computed(&mut self, idx: &TaskIndex, at: u64, matching: u64) {
        self.index_generation = idx.generation;
        self.window_at = at;
        self.matching = matching;
    }

    /// This stream's task changes since its last update: the window's rows that are new
    /// or changed, the ids that left it, and the counts. With `recompute` false (not its
    /// turn: see `cost`) a stale window stays as it was and only the counts come (or, for
    /// an update that must resend the window whole, its rows as they are now).
    pub(super) fn changes(&mut self, idx: &TaskIndex, now_ns: u64, recompute: bool, at: u64) -> proto::TaskChanges {
        let full = std::mem::take(&mut self.full_next);
        let mut out = proto::TaskChanges {
            full,
            counts: Some(idx.counts()),
            query_generation: self.generation,
            ..Default::default()
        };
        let stale = self.stale(idx);
        if stale && !recompute && !full {
            // Not its turn (see `cost`): the window as it was, with today's counts.
            out.view = self.ids.clone();
            out.matching = self.matching;
            return out;
        }
        if full || stale {
            let window = if stale && recompute {
                let w = idx.window(&self.query);
                self.computed(idx, at, w.matching);
                w.ids
            } else {
                std::mem::take(&mut self.ids)
            };
            // Keep the window under the size bound: its rows as they would be sent whole.
            let (rows, _) = idx.rows_within_bound(&window, now_ns);
            let ids: Vec<u64> = rows.iter().map(|t| t.id).collect();
            let keep: HashSet<u64> = ids.iter().copied().collect();
            if !full {
                out.removed = self.sent.keys().filter(|id| !keep.contains(id)).copied().collect();
                out.removed.sort_unstable();
            }
            let mut sent = HashMap::with_capacity(rows.len());
            for t in rows {
                let (id, Some(v)) = (t.id, idx.version(t.id)) else { continue };
                if full || self.sent.get(&id) != Some(&v) {
                    out.changed.push(t);
                }
                sent.insert(id, v);
            }
            self.sent = sent;
            self.ids = ids;
        }
        out.view = self.ids.clone();
        out.matching = self.matching;
        out
    }
}
