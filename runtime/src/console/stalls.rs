//! The stalls as the publisher sends them: read from the runtime's reports as they end,
//! converted for the wire once, and numbered, so each reaches each stream once.

use super::proto;
use crate::telemetry::{StallCursor, Telemetry, STALL_HISTORY};
use std::collections::VecDeque;
use std::sync::Mutex;

/// The most stalls one update carries (their stacks make them large). A stream's first
/// update and `GetSnapshot` carry the newest; each later update only those the client
/// was not yet sent, oldest first, so a stall crosses the wire once per client (unless
/// the client falls more than `STALL_HISTORY` stalls behind).
pub(super) const MAX_STALLS_PER_UPDATE: usize = 8;

/// Ended stalls the publisher keeps for its streams.
const STALLS_KEPT: usize = STALL_HISTORY;

/// The stalls as the publisher reads them, converted for the wire once, whatever the
/// number of clients. Their stacks are named on a blocking thread ([`refresh`]): the
/// first stack named in a process loads its debug info, which must not hold up the
/// console.
pub(super) struct StallFeed {
    /// The runtime's stall reports, read up to here.
    cursor: StallCursor,
    /// Ended stalls read so far (the next one's number).
    pub(super) next: u64,
    /// The newest [`STALLS_KEPT`] ended stalls read, numbered: a stream is sent at most
    /// [`MAX_STALLS_PER_UPDATE`] an update, the oldest it was not sent first, so a burst
    /// reaches it over several updates.
    recent: VecDeque<(u64, proto::Stall)>,
    /// The polls running past the threshold at the last publish.
    pub(super) ongoing: Vec<proto::Stall>,
}

impl StallFeed {
    /// A feed that has read nothing yet.
    pub(super) fn new(telemetry: &Telemetry) -> StallFeed {
        StallFeed { cursor: telemetry.stall_cursor(), next: 0, recent: VecDeque::new(), ongoing: Vec::new() }
    }

    /// The oldest [`MAX_STALLS_PER_UPDATE`] ended stalls numbered `seen` or later that the
    /// feed holds, and the number after the last of them (`seen` if none).
    pub(super) fn since(&self, seen: u64) -> (Vec<proto::Stall>, u64) {
        let mut next = seen;
        let stalls = self
            .recent
            .iter()
            .filter(|(n, _)| *n >= seen)
            .take(MAX_STALLS_PER_UPDATE)
            .map(|(n, s)| {
                next = n + 1;
                s.clone()
            })
            .collect();
        (stalls, next)
    }

    /// The newest [`MAX_STALLS_PER_UPDATE`] ended stalls, for a stream's first update.
    pub(super) fn newest(&self) -> Vec<proto::Stall> {
        let skip = self.recent.len().saturating_sub(MAX_STALLS_PER_UPDATE);
        self.recent.iter().skip(skip).map(|(_, s)| s.clone()).collect()
    }
}

/// Read into `feed` the stalls that ended since the last call and the polls running past
/// the threshold now, naming their stacks on a blocking thread. The publish loop runs it
/// as a task of its own and goes on publishing meanwhile.
pub(super) async fn refresh(feed: &Mutex<StallFeed>, telemetry: &Telemetry) {
    let (cursor, had_ongoing) = {
        let f = feed.lock().unwrap_or_else(|e| e.into_inner());
        (f.cursor.clone(), !f.ongoing.is_empty())
    };
    if !had_ongoing && !cursor.pending() {
        return;
    }
    let t = telemetry.clone();
    let read = tokio::task::spawn_blocking(move || {
        let mut cursor = cursor;
        let ended = cursor.read(STALLS_KEPT);
        let mut ongoing = t.stalls_ongoing();
        ongoing.truncate(MAX_STALLS_PER_UPDATE);
        let wire = |v: Vec<crate::telemetry::Stall>| v.iter().map(proto::Stall::from).collect::<Vec<_>>();
        (cursor, wire(ended), wire(ongoing))
    })
    .await;
    let Ok((cursor, ended, ongoing)) = read else { return };
    let mut feed = feed.lock().unwrap_or_else(|e| e.into_inner());
    feed.cursor = cursor;
    for s in ended {
        let n = feed.next;
        feed.next += 1;
        feed.recent.push_back((n, s));
        if feed.recent.len() > STALLS_KEPT {
            feed.recent.pop_front();
        }
    }
    feed.ongoing = ongoing;
}
