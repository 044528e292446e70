//! The gRPC service: `volt.console.v1.Console`'s calls, answered from the publisher's
//! state (streams get the published updates; one-off calls read the telemetry).

use super::cost::Conn;
use super::limits::GuardedInfo;
use super::publisher::for_client;
use super::queue::{own_rows, Item, Published, Queued};
use super::stalls::MAX_STALLS_PER_UPDATE;
use super::state::State;
use super::stream::{Client, ClientView};
use super::tasks::Query;
use super::{proto, CLIENT_BACKLOG, MAX_EVENTS_PER_UPDATE, MAX_EVENTS_PER_UPDATE_LIMIT};
use crate::telemetry::STALL_STACK_DEPTH;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use volt_console_proto::console_server::Console;

pub(super) struct Service {
    pub(super) state: Arc<State>,
}

/// A new stream refused: what every stream's channel holds has reached its cap (see
/// `queue::QUEUED_ROWS_CAP`).
fn queues_full() -> Status {
    Status::resource_exhausted(
        "the console's send queues are full (streams that stopped reading hold them): try again later",
    )
}

/// The connection a call came on (see `cost::Conn`).
fn conn_of<T>(request: &Request<T>) -> Conn {
    request.extensions().get::<GuardedInfo>().and_then(|g| g.tcp.remote_addr())
}

pub(super) type UpdateStream = Pin<Box<dyn Stream<Item = Result<proto::Update, Status>> + Send>>;

#[tonic::async_trait]
impl Console for Service {
    type WatchUpdatesStream = UpdateStream;

    async fn watch_updates(&self, request: Request<proto::WatchRequest>) -> Result<Response<UpdateStream>, Status> {
        let conn = conn_of(&request);
        let req = request.into_inner();
        if req.max_events_per_update as usize > MAX_EVENTS_PER_UPDATE_LIMIT {
            return Err(Status::invalid_argument(format!(
                "max_events_per_update is {}; the most is {MAX_EVENTS_PER_UPDATE_LIMIT} (0 means the server's \
                 default, {MAX_EVENTS_PER_UPDATE})",
                req.max_events_per_update
            )));
        }
        let max_events = match req.max_events_per_update {
            0 => MAX_EVENTS_PER_UPDATE,
            n => n as usize,
        };
        let query = Query::new(req.task_query.as_ref(), proto::TaskSort::Busy).map_err(Status::invalid_argument)?;
        let wants_tasks = !req.omit_tasks && self.state.recording();
        let wants_resources = req.want_resources;
        // Refused before the window is paid for, if its first update (a window, the
        // snapshot's stalls) would not fit; checked again, exactly, once it is made.
        // (Ended stalls and stalls still running, at most `MAX_STALLS_PER_UPDATE` each.)
        let estimate = 1
            + 2 * MAX_STALLS_PER_UPDATE * (1 + STALL_STACK_DEPTH)
            + if wants_tasks { query.limit() + query.limit() / 8 } else { 0 };
        if !self.state.queued.room_for(estimate) {
            return Err(queues_full());
        }
        if wants_tasks {
            // Its first window is computed now, outside the publisher's turns.
            self.state.pay_one_off(conn, &query).await?;
        }
        let id = self.state.new_watch_id();
        let mut view = ClientView::new(query);
        let (tx, rx) = mpsc::channel(CLIENT_BACKLOG);
        // The first update: runtime info and the stream's whole window.
        let tasks = wants_tasks.then(|| {
            let mut slot = self.state.index.lock().unwrap_or_else(|e| e.into_inner());
            let now = self.state.telemetry.now_ns();
            let at = self.state.seq.load(std::sync::atomic::Ordering::Relaxed);
            view.changes(self.state.fresh_index(&mut slot), now, true, at)
        });
        let (mut first, stalls_seen) = self.state.full_update(None);
        first.watch_id = id;
        let own = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut clients = self.state.clients.lock().unwrap_or_else(|e| e.into_inner());
        // Its stalls ride in its snapshot; it has no events.
        let stalls: Vec<_> =
            first.snapshot.iter().flat_map(|s| s.recent_stalls.iter().chain(&s.ongoing_stalls)).cloned().collect();
        let rows = own_rows(tasks.as_ref(), &stalls);
        let Some(queued) = self.state.queued.reserve(&own, rows, 0, true) else {
            return Err(queues_full());
        };
        let _ = tx.try_send((Arc::new(Published::uncounted(first)), 0, tasks, Vec::new(), queued));
        clients.push(Client {
            tx,
            conn,
            missed: 0,
            id,
            wants_tasks,
            // A stream that shows tasks needs the count to flag them (the index).
            wants_lost_wakers: !req.skip_lost_wakers || wants_tasks,
            wants_resources,
            view,
            stalls_seen,
            queued: own,
        });
        drop(clients);
        // The item the transport took last stays counted (its update and its rows) until
        // it takes the next: a client that stops reading leaves one taken item behind,
        // which the queued total should see.
        let mut last: Option<(Arc<Published>, Queued)> = None;
        let stream = tokio_stream::StreamExt::map(
            tokio_stream::wrappers::ReceiverStream::new(rx),
            move |(p, missed, tasks, stalls, queued): Item| {
                let mut u = for_client(&p.update, missed, max_events, wants_resources);
                // The one taken before is given back now.
                drop(last.replace((p, queued)));
                u.tasks = tasks;
                if let Some(s) = u.snapshot.as_mut().filter(|_| !stalls.is_empty()) {
                    s.recent_stalls = stalls;
                }
                Ok(u)
            },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_snapshot(&self, request: Request<proto::SnapshotRequest>) -> Result<Response<proto::Update>, Status> {
        let conn = conn_of(&request);
        let req = request.into_inner();
        let query = Query::new(req.task_query.as_ref(), proto::TaskSort::Id).map_err(Status::invalid_argument)?;
        if !self.state.recording() {
            return Ok(Response::new(self.state.full_update(None).0));
        }
        self.state.pay_one_off(conn, &query).await?;
        let page = self.state.one_off_page(&query);
        let tasks = proto::TaskChanges {
            view: page.tasks.iter().map(|t| t.id).collect(),
            changed: page.tasks,
            removed: Vec::new(),
            full: true,
            counts: page.counts,
            matching: page.matching,
            query_generation: 0,
        };
        let (mut u, _) = self.state.full_update(Some(tasks));
        u.tasks_more = page.more;
        Ok(Response::new(u))
    }

    async fn list_tasks(&self, request: Request<proto::TaskQuery>) -> Result<Response<proto::TaskPage>, Status> {
        let conn = conn_of(&request);
        let q = request.into_inner();
        let query = Query::new(Some(&q), proto::TaskSort::Id).map_err(Status::invalid_argument)?;
        if !self.state.recording() {
            return Err(Status::failed_precondition(
                "this runtime does not record tasks: build it with `Builder::event_ring(capacity)`",
            ));
        }
        self.state.pay_one_off(conn, &query).await?;
        Ok(Response::new(self.state.one_off_page(&query)))
    }

    async fn set_task_query(
        &self,
        request: Request<proto::SetTaskQueryRequest>,
    ) -> Result<Response<proto::TaskPage>, Status> {
        let conn = conn_of(&request);
        let req = request.into_inner();
        let query = Query::new(req.query.as_ref(), proto::TaskSort::Busy).map_err(Status::invalid_argument)?;
        if !self.state.recording() {
            return Err(Status::failed_precondition(
                "this runtime does not record tasks: build it with `Builder::event_ring(capacity)`",
            ));
        }
        let wants_tasks = self
            .state
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|c| c.id == req.watch_id)
            .map(|c| c.wants_tasks);
        match wants_tasks {
            None => return Err(no_stream(req.watch_id)),
            Some(false) => return Err(omitted()),
            Some(true) => {}
        }
        self.state.pay_one_off(conn, &query).await?;
        let mut slot = self.state.index.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.state.telemetry.now_ns();
        let idx = self.state.fresh_index(&mut slot);
        let page = idx.page(&query, now);
        let mut clients = self.state.clients.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = clients.iter_mut().find(|c| c.id == req.watch_id) else {
            return Err(no_stream(req.watch_id));
        };
        if !c.wants_tasks {
            return Err(omitted());
        }
        c.view.query = query;
        c.view.generation += 1;
        // The page is the new query's window: the stream's next update resends it whole.
        c.view.take_page(&page, idx, self.state.seq.load(std::sync::atomic::Ordering::Relaxed));
        Ok(Response::new(page))
    }

    async fn get_task(&self, request: Request<proto::TaskRequest>) -> Result<Response<proto::TaskDetails>, Status> {
        let conn = conn_of(&request);
        let id = request.into_inner().id;
        if id == 0 {
            return Err(Status::invalid_argument("task id 0 is never assigned; ids start at 1"));
        }
        if !self.state.recording() {
            return Err(Status::failed_precondition(
                "this runtime does not record tasks: build it with `Builder::event_ring(capacity)`",
            ));
        }
        self.state.pay_get_task(conn).await?;
        let found = self.state.telemetry.task(id);
        let Some(task) = found else {
            return Err(Status::not_found(format!("no live task with id {id}")));
        };
        let recent_events = self
            .state
            .history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| e.task_id == id)
            .copied()
            .collect();
        Ok(Response::new(proto::TaskDetails {
            task: Some((&task).into()),
            recent_events,
            poll_histogram: super::convert::histogram(&task.poll_histogram),
            schedule_histogram: super::convert::histogram(&task.schedule_histogram),
            holds: self.state.holds(id),
        }))
    }
}

fn no_stream(watch_id: u64) -> Status {
    Status::not_found(format!(
        "no open stream with watch_id {watch_id}; the id is in the first update of a WatchUpdates stream"
    ))
}

fn omitted() -> Status {
    Status::failed_precondition("this stream was opened with omit_tasks")
}
