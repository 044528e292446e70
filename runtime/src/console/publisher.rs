//! The publisher: every publish interval, one snapshot and one drain of the event ring
//! become one `Update`, offered to every watching client through its bounded channel
//! (see "Publishing", "The task list" and "Lost events" in the module doc).

use super::cost::{self, Want};
use super::queue::{own_rows, Published};
use super::state::State;
use super::stream::Client;
use super::tasks::TaskIndex;
use super::{proto, stalls, HISTORY};
use crate::telemetry::EventCursor;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

impl State {
    /// One publish cycle's update (without tasks: each client gets its own window).
    pub(super) fn next_update(&self, cursor: &mut EventCursor, dropped_before: &mut u64) -> proto::Update {
        let snapshot = self.telemetry.snapshot();
        // Every event read goes into the update (at most what the rings hold); each
        // client's own cap is applied when it is sent (see `for_client`).
        let events = cursor.read();
        let missed_ring = cursor.dropped() - *dropped_before;
        *dropped_before = cursor.dropped();
        let events: Vec<proto::Event> = events.iter().map(proto::Event::from).collect();
        {
            let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
            for e in events.iter().rev().take(HISTORY).rev() {
                if h.len() == HISTORY {
                    h.pop_front();
                }
                h.push_back(*e);
            }
        }
        let mut snap: proto::Snapshot = (&snapshot).into();
        snap.deadlocks = self.deadlocks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // The resources list costs a page of the registry: only for streams that want it.
        let wanted = self.clients.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|c| c.wants_resources);
        let (resources, resources_total) = if wanted { self.resources() } else { (Vec::new(), 0) };
        proto::Update {
            seq: self.seq.fetch_add(1, Relaxed) + 1,
            uptime_ns: self.telemetry.uptime().as_nanos() as u64,
            snapshot: Some(snap),
            resources,
            resources_total,
            events,
            events_missed: missed_ring,
            events_missed_ring: missed_ring,
            events_missed_cap: 0,
            tasks: None,
            updates_missed: 0,
            runtime: None,
            task_groups: self.task_groups(),
            ..Default::default()
        }
    }

    /// Offer `update` to every client without waiting for any of them, each with its
    /// window of the task list from `idx`, and the stalls it has not been sent (at most
    /// [`MAX_STALLS_PER_UPDATE`](stalls::MAX_STALLS_PER_UPDATE), the oldest of them; the
    /// rest come with later updates).
    pub(super) fn broadcast(&self, mut update: proto::Update, idx: Option<&TaskIndex>) {
        let feed = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = update.snapshot.as_mut() {
            s.ongoing_stalls = feed.ongoing.clone();
        }
        let at = update.seq;
        // Its events (and task groups) are counted once, for as long as some stream
        // holds it.
        let events = update.events.len() + update.task_groups.len();
        let update = Arc::new(Published::counted(update, self.queued.count_update(events)));
        let now = self.telemetry.now_ns();
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let mut recompute = vec![false; clients.len()];
        if let Some(idx) = idx {
            for i in self.plan_windows(&clients, idx, at) {
                recompute[i] = true;
            }
        }
        let mut i = 0;
        clients.retain_mut(|c| {
            let recompute = recompute[i];
            i += 1;
            if c.tx.capacity() == 0 && !c.tx.is_closed() {
                // It misses this update: nothing to work out for it.
                c.missed += 1;
                c.view.full_next = true;
                return true;
            }
            let tasks = match idx {
                Some(idx) if c.wants_tasks => Some(c.view.changes(idx, now, recompute, at)),
                _ => None,
            };
            let (stalls, seen) =
                if feed.next > c.stalls_seen { feed.since(c.stalls_seen) } else { (Vec::new(), c.stalls_seen) };
            let empty = c.tx.capacity() == c.tx.max_capacity();
            let Some(queued) = self.queued.reserve(&c.queued, own_rows(tasks.as_ref(), &stalls), events, empty) else {
                // Past its share of the queued rows: it misses this update, as if its
                // channel were full.
                c.missed += 1;
                c.view.full_next = true;
                return !c.tx.is_closed();
            };
            match c.tx.try_send((Arc::clone(&update), c.missed, tasks, stalls, queued)) {
                Ok(()) => {
                    c.missed = 0;
                    c.stalls_seen = seen;
                    true
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    c.missed += 1;
                    // Its task diff is lost with the update: resend the window whole.
                    c.view.full_next = true;
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    /// The streams whose stale windows are recomputed at publish `at`, within the
    /// publish's budget, connections taking turns (see `cost`).
    fn plan_windows(&self, clients: &[Client], idx: &TaskIndex, at: u64) -> Vec<usize> {
        let wants: Vec<Want> = clients
            .iter()
            .enumerate()
            // A stream whose channel is full misses this update: no window for it.
            .filter(|(_, c)| c.wants_tasks && c.view.stale(idx) && c.tx.capacity() > 0 && !c.tx.is_closed())
            .map(|(stream, c)| Want {
                stream,
                conn: c.conn,
                window_at: c.view.window_at,
                cost: idx.window_cost(&c.view.query),
            })
            .collect();
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        let (chosen, served_now) = cost::plan(&wants, &served, cost::publish_budget(idx.len()));
        for conn in served_now {
            served.insert(conn, at);
        }
        // Forget connections with no stream left.
        if served.len() > clients.len() {
            served.retain(|conn, _| clients.iter().any(|c| c.conn == *conn));
        }
        chosen
    }
}

/// How often the console reads the wait-for graph while a client is connected: often
/// enough that a deadlock shows within a second of forming (it is confirmed on the
/// second reading that finds it).
const DEADLOCK_INTERVAL: Duration = Duration::from_millis(250);

/// Read the wait-for graph every [`DEADLOCK_INTERVAL`] while a client is connected, on a
/// blocking thread (a reading walks the task list), never on a worker.
async fn watch_deadlocks(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(DEADLOCK_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        if !state.deadlocks_wanted() {
            // Nobody to show it to: no reading, and none kept for a later client.
            state.deadlocks.lock().unwrap_or_else(|e| e.into_inner()).clear();
            continue;
        }
        let st = Arc::clone(&state);
        if tokio::task::spawn_blocking(move || st.read_deadlocks()).await.is_err() {
            break;
        }
    }
}

pub(super) async fn publish(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut cursor = state.telemetry.events();
    let mut dropped = 0;
    let mut ticker = tokio::time::interval(Duration::from_nanos(state.info.publish_interval_ns));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The lost-waker count walks every task: at most once a second, while someone listens.
    let mut lost: Option<Instant> = None;
    let recording = state.info.event_ring_capacity > 0;
    let mut refreshing: Option<tokio::task::JoinHandle<()>> = None;
    let deadlocks = tokio::spawn(watch_deadlocks(Arc::clone(&state), stop.clone()));
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        // Stalls are read (and their stacks named, which the first time loads the debug
        // info) beside the publishing, never in its way: this update carries what the
        // last finished read found.
        if refreshing.as_ref().is_none_or(|h| h.is_finished()) {
            let st = Arc::clone(&state);
            refreshing = Some(tokio::spawn(async move { stalls::refresh(&st.stalls, &st.telemetry).await }));
        }
        let mut update = state.next_update(&mut cursor, &mut dropped);
        let listened = state.clients.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|c| c.wants_lost_wakers);
        if !listened {
            // A count from before would be stale by the time someone wants it again.
            lost = None;
            state.lost_wakers.store(u64::MAX, Relaxed);
        }
        let mut found_lost = None;
        if recording && listened && lost.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            let ids = state.telemetry.lost_waker_ids();
            lost = Some(Instant::now());
            state.lost_wakers.store(ids.len() as u64, Relaxed);
            found_lost = Some(ids);
        }
        if let Some(s) = update.snapshot.as_mut() {
            s.tasks_lost_waker = state.lost_wakers();
        }
        let mut slot = state.index.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = state.maintain_index(&mut slot);
        if let (Some(idx), Some(ids)) = (slot.as_mut().filter(|_| wanted), found_lost) {
            idx.mark_lost(&ids);
        }
        state.broadcast(update, if wanted { slot.as_ref() } else { None });
    }
    deadlocks.abort();
    // Dropping the senders ends every stream; dropping the index stops the change log.
    state.clients.lock().unwrap_or_else(|e| e.into_inner()).clear();
    state.index.lock().unwrap_or_else(|e| e.into_inner()).take();
}

/// One client's copy of a published update: its newest `max_events` events (the rest
/// counted in `events_missed_cap`), the updates it missed, and the task list unless it
/// asked to go without. Copies only what the client gets.
/// Without `resources`, the resources list is left out.
pub(super) fn for_client(u: &proto::Update, updates_missed: u64, max_events: usize, resources: bool) -> proto::Update {
    let cut = u.events.len().saturating_sub(max_events);
    proto::Update {
        seq: u.seq,
        uptime_ns: u.uptime_ns,
        snapshot: u.snapshot.clone(),
        events: u.events[cut..].to_vec(),
        events_missed: u.events_missed + cut as u64,
        events_missed_ring: u.events_missed_ring,
        events_missed_cap: u.events_missed_cap + cut as u64,
        // Each stream's task window is added by its sender.
        tasks: None,
        updates_missed,
        runtime: u.runtime.clone(),
        watch_id: u.watch_id,
        tasks_more: u.tasks_more,
        task_groups: u.task_groups.clone(),
        resources: if resources { u.resources.clone() } else { Vec::new() },
        resources_total: if resources { u.resources_total } else { 0 },
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::queue::Item;
    use super::super::stream::ClientView;
    use super::super::tasks::Query;
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn client(state: &State, tx: mpsc::Sender<Item>) -> Client {
        Client {
            tx,
            conn: None,
            missed: 0,
            id: state.new_watch_id(),
            wants_tasks: false,
            wants_lost_wakers: false,
            wants_resources: false,
            view: ClientView::new(Query::new(None, proto::TaskSort::Id).unwrap()),
            stalls_seen: 0,
            queued: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn stream(state: &State) -> mpsc::Receiver<Item> {
        let (tx, rx) = mpsc::channel(super::super::CLIENT_BACKLOG);
        state.clients.lock().unwrap().push(client(state, tx));
        rx
    }

    fn update(seq: u64, events: usize) -> proto::Update {
        proto::Update { seq, events: vec![proto::Event::default(); events], ..Default::default() }
    }

    /// Takes every update `rx` has, checking they come in order with none missed.
    fn read_all(rx: &mut mpsc::Receiver<Item>, next: &mut u64) {
        while let Ok((u, missed, ..)) = rx.try_recv() {
            assert_eq!((u.update.seq, missed), (*next, 0), "a reading stream missed an update");
            *next += 1;
        }
    }

    fn state(cap: usize) -> (crate::Runtime, State) {
        let rt = crate::runtime::Builder::new().worker_threads(1).build().unwrap();
        let mut state = State::new(rt.handle().telemetry(), Duration::from_millis(10));
        state.queued.cap = cap;
        (rt, state)
    }

    /// Streams that stop reading one after another, each at a different update, would
    /// hold every update since the first between them: the total stays within the cap
    /// (plus the update being published), every update offered to them is queued or
    /// counted missed, and every row comes back once their channels are dropped.
    #[test]
    fn streams_that_stop_reading_at_different_times_hold_at_most_the_cap() {
        let (_rt, state) = state(2000);
        const EVENTS: usize = 50;
        let mut stuck = Vec::new();
        let mut most = 0;
        for seq in 1..=100u64 {
            stuck.push((seq, stream(&state)));
            state.broadcast(update(seq, EVENTS), None);
            most = most.max(state.queued.rows());
            assert!(state.queued.rows() <= 2000 + EVENTS, "{} rows queued at update {seq}", state.queued.rows());
        }
        // Unbounded, 100 distinct updates of 50 events would be held.
        assert!(most > 2000 / 2, "the stuck streams held only {most} rows: the cap did not bind");
        let clients = state.clients.lock().unwrap();
        for (c, (first, rx)) in clients.iter().zip(stuck.iter_mut()) {
            let offered = 100 - *first + 1;
            let mut accounted = c.missed;
            while let Ok((_, missed, ..)) = rx.try_recv() {
                accounted += 1 + missed;
            }
            assert_eq!(accounted, offered, "a stream that joined at update {first}");
        }
        drop(clients);
        stuck.clear();
        assert_eq!(state.queued.rows(), 0, "rows still counted after every channel was dropped");
    }

    /// Streams that read get every update, however many there are and however many
    /// events an update holds (counted once, not once per stream), while streams that
    /// stopped reading hold what the cap lets them.
    #[test]
    fn reading_streams_miss_nothing_beside_stuck_ones() {
        let (_rt, state) = state(2000);
        let mut stuck: Vec<_> = (0..20).map(|_| stream(&state)).collect();
        let mut readers: Vec<_> = (0..5).map(|_| (stream(&state), 1)).collect();
        for seq in 1..=100u64 {
            // 499 events: five streams' worth passes the cap, one update's does not.
            state.broadcast(update(seq, 499), None);
            assert!(state.queued.rows() <= 2000 + 499);
            for (rx, next) in &mut readers {
                read_all(rx, next);
            }
        }
        assert!(readers.iter().all(|(_, next)| *next == 101), "a reader fell behind");
        assert!(stuck.iter().all(|rx| !rx.is_empty()), "a stuck stream was never sent an update");
        stuck.clear();
        readers.clear();
        state.clients.lock().unwrap().clear();
        assert_eq!(state.queued.rows(), 0);
    }

    /// An update with more events than the cap still reaches a stream that reads.
    #[test]
    fn an_update_bigger_than_the_cap_still_reaches_a_reader() {
        let (_rt, state) = state(2000);
        let mut rx = stream(&state);
        let mut next = 1;
        for seq in 1..=3 {
            state.broadcast(update(seq, 5000), None);
            read_all(&mut rx, &mut next);
        }
        assert_eq!(next, 4);
        drop(rx);
        state.clients.lock().unwrap().clear();
        assert_eq!(state.queued.rows(), 0);
    }
}
