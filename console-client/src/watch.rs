//! The dashboard's connection: a watcher thread that subscribes to the update stream,
//! reconnects on the [`Backoff`] schedule after every failure (a refused connection, a
//! call that fails, a stream that ends) and answers the dashboard's requests (a task's
//! history, another window of the task list) without holding up the stream; and
//! `fetch_once`, one snapshot with its task list paged in.

use crate::backoff::Backoff;
use crate::connect::{connect, status_text, subscribe, Client, CALL_TIMEOUT};
use crate::token::request;
use std::sync::mpsc;
use std::time::Duration;
use volt_console_proto as proto;

/// Where a dashboard's updates come from, and how that is going. The watcher reports
/// the first three; a replay the last two.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Connecting {
        attempt: u32,
    },
    Live,
    Disconnected {
        reason: String,
        retry_in_ms: u64,
    },
    /// `skipped`: damaged updates in the recording passed over so far.
    Replay {
        position: usize,
        total: usize,
        paused: bool,
        skipped: u64,
    },
    Ended,
}

/// What the watcher thread sends the UI.
#[derive(Debug)]
pub enum Msg {
    Status(Status),
    Update(Box<proto::Update>),
    /// The answer to [`Watcher::fetch_task`]: the task and its events still in the
    /// server's history, or why there are none.
    Task {
        id: u64,
        details: Result<Box<proto::TaskDetails>, String>,
    },
    /// The answer to [`Watcher::query_tasks`]: the new window of the task list.
    Page(Box<proto::TaskPage>),
}

/// What the UI asks the watcher thread for.
#[derive(Debug)]
enum Request {
    Task(u64),
    Query(proto::TaskQuery),
}

/// The UI's side of a watcher thread: it stops when the `Msg` receiver is gone.
pub struct Watcher {
    requests: tokio::sync::mpsc::UnboundedSender<Request>,
    /// The watcher thread.
    pub thread: std::thread::JoinHandle<()>,
}

impl Watcher {
    /// Ask the server for task `id` (`GetTask`); the answer comes back as [`Msg::Task`].
    /// While disconnected the answer is an error, at once.
    pub fn fetch_task(&self, id: u64) {
        // The thread outlives every request unless it already ended, and then the UI
        // has been told (the `Msg` channel closed), so a failed send needs no answer.
        let _ = self.requests.send(Request::Task(id));
    }

    /// Ask the server for another window of the task list (`SetTaskQuery`); the page
    /// comes back as [`Msg::Page`], and the stream's updates follow the new query. The
    /// query is kept for the next stream after a reconnection.
    pub fn query_tasks(&self, query: proto::TaskQuery) {
        let _ = self.requests.send(Request::Query(query));
    }
}

/// How long one call of `--once` may take: building the server's task index at a
/// million tasks takes a moment.
pub const ONCE_TIMEOUT: Duration = Duration::from_secs(30);

/// One snapshot with up to `max_tasks` tasks in `sort` order, for `--once`. The first
/// page comes with the snapshot; the rest are paged in with `ListTasks` (by id: keyset
/// paging, so every task live throughout is listed exactly once) and handed to
/// `on_page` as they arrive (with the update, its `tasks.changed` emptied), so the
/// caller need not hold a million tasks at once.
pub fn fetch_once(
    addr: &str,
    token: Option<&str>,
    max_tasks: u64,
    sort: proto::TaskSort,
    mut on_page: impl FnMut(&proto::Update, Vec<proto::Task>) -> Result<(), String>,
) -> Result<proto::Update, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut c = connect(addr).await?;
        let limit = |got: u64| (max_tasks - got).min(10_000) as u32;
        let query = proto::TaskQuery { sort: sort as i32, limit: limit(0).max(1), ..Default::default() };
        let call = c.get_snapshot(request(proto::SnapshotRequest { task_query: Some(query.clone()) }, token));
        let mut u = tokio::time::timeout(ONCE_TIMEOUT, call)
            .await
            .map_err(|_| format!("{addr} did not answer within {} s", ONCE_TIMEOUT.as_secs()))?
            .map(|r| r.into_inner())
            .map_err(|s| format!("{addr}: {}", status_text(&s)))?;
        let Some(tasks) = u.tasks.as_mut() else { return Ok(u) };
        tasks.view.clear();
        let mut first = std::mem::take(&mut tasks.changed);
        first.truncate(max_tasks.min(usize::MAX as u64) as usize);
        let mut got = first.len() as u64;
        let mut after = first.last().map_or(0, |t| t.id);
        let mut more = u.tasks_more;
        on_page(&u, first)?;
        while more && got < max_tasks {
            let mut q = proto::TaskQuery { sort: sort as i32, limit: limit(got), ..Default::default() };
            if sort == proto::TaskSort::Id {
                q.after_id = after;
            } else {
                q.offset = got;
            }
            let page = tokio::time::timeout(ONCE_TIMEOUT, c.list_tasks(request(q, token)))
                .await
                .map_err(|_| format!("{addr} did not answer within {} s", ONCE_TIMEOUT.as_secs()))?
                .map(|r| r.into_inner())
                .map_err(|s| format!("{addr}: {}", status_text(&s)))?;
            if page.tasks.is_empty() {
                // The tasks past the last page finished meanwhile: the list ends here.
                more = page.more;
                break;
            }
            got += page.tasks.len() as u64;
            after = page.next_after_id;
            more = page.more;
            if let Some(t) = u.tasks.as_mut() {
                t.counts = page.counts;
                t.matching = page.matching;
            }
            on_page(&u, page.tasks)?;
        }
        u.tasks_more = more;
        Ok(u)
    })
}

/// What a watcher asks the server for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchOptions {
    /// Events per update (0: the server's default, 16,384; at most 1,048,576). A console
    /// that wants every event asks for more than the server's rings hold.
    pub max_events_per_update: u32,
}

/// The events per update `volt-console` asks for unless told otherwise: the most a
/// server gives, so it sees every event the server read (its slow-poll and self-wake
/// warnings need them all). An update then carries at most what the runtime's rings
/// hold, well under the 64 MiB the client decodes.
pub const DEFAULT_MAX_EVENTS: u32 = 1 << 20;

impl Default for WatchOptions {
    fn default() -> WatchOptions {
        WatchOptions { max_events_per_update: DEFAULT_MAX_EVENTS }
    }
}

/// How many messages the watcher's channel should hold (`std::sync::mpsc::sync_channel`):
/// as many updates as the server keeps for a slow client. When the receiver falls behind
/// (a display blocked on its terminal, say), the watcher waits for it and stops reading
/// the stream; the server then skips updates for this client and counts them in
/// `updates_missed`, so memory stays bounded on both sides.
pub const WATCH_BACKLOG: usize = 4;

/// Watch `addr` on a thread of its own until `tx`'s receiver is gone, reconnecting on
/// the [`Backoff`] schedule: after every failure (a refused connection, a call that
/// fails, a stream that ends), reset once an update arrives. `tx` is the sending end of
/// a bounded channel (see [`WATCH_BACKLOG`]).
pub fn spawn_watcher(addr: String, token: Option<String>, tx: mpsc::SyncSender<Msg>) -> Watcher {
    spawn_watcher_with(addr, token, WatchOptions::default(), None, tx)
}

/// [`spawn_watcher`] with options, asking for the task window `query` from the start.
pub fn spawn_watcher_with(
    addr: String,
    token: Option<String>,
    options: WatchOptions,
    query: Option<proto::TaskQuery>,
    tx: mpsc::SyncSender<Msg>,
) -> Watcher {
    let (requests, rx) = tokio::sync::mpsc::unbounded_channel();
    let thread = std::thread::Builder::new()
        .name("volt-console-watch".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Msg::Status(Status::Disconnected { reason: e.to_string(), retry_in_ms: 0 }));
                    return;
                }
            };
            rt.block_on(watch_loop(addr, token, options, query, tx, rx));
        })
        .expect("spawn the watcher thread");
    Watcher { requests, thread }
}

/// Answer a request for task `id`: with `client`, on a task of its own so the update
/// stream keeps flowing meanwhile; without one (disconnected), with an error at once.
fn serve_task_request(id: u64, client: Option<&Client>, token: Option<&str>, addr: &str, tx: &mpsc::SyncSender<Msg>) {
    let Some(client) = client else {
        let _ = tx.send(Msg::Task { id, details: Err(format!("not connected to {addr}")) });
        return;
    };
    let (mut client, req, tx, addr) =
        (client.clone(), request(proto::TaskRequest { id }, token), tx.clone(), addr.to_string());
    tokio::spawn(async move {
        let details = match tokio::time::timeout(CALL_TIMEOUT, client.get_task(req)).await {
            Err(_) => Err(format!("{addr} did not answer within {} s", CALL_TIMEOUT.as_secs())),
            Ok(Err(s)) => Err(status_text(&s)),
            Ok(Ok(r)) => Ok(Box::new(r.into_inner())),
        };
        let _ = tx.send(Msg::Task { id, details });
    });
}

/// Publish intervals without an update after which a stream is given up.
const SILENT_INTERVALS: u32 = 20;
/// The shortest silence that ends a stream: a server may be busy for a moment (a walk of
/// a million tasks), and a reconnection costs it more than waiting.
const MIN_SILENCE: Duration = Duration::from_secs(5);

/// How long a stream may go without an update before it is given up, for a server that
/// publishes every `interval_ns` (`None`: not known yet).
pub fn silence_limit(interval_ns: Option<u64>) -> Duration {
    let interval = Duration::from_nanos(interval_ns.unwrap_or(0).min(60_000_000_000));
    (interval * SILENT_INTERVALS).max(MIN_SILENCE)
}

async fn watch_loop(
    addr: String,
    token: Option<String>,
    options: WatchOptions,
    mut query: Option<proto::TaskQuery>,
    tx: mpsc::SyncSender<Msg>,
    mut requests: tokio::sync::mpsc::UnboundedReceiver<Request>,
) {
    let mut backoff = Backoff::new();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        if tx.send(Msg::Status(Status::Connecting { attempt })).is_err() {
            return;
        }
        let reason = match connect(&addr).await {
            Err(e) => e,
            Ok(mut client) => {
                let watch = proto::WatchRequest {
                    max_events_per_update: options.max_events_per_update,
                    task_query: query.clone(),
                    // The dashboard's resources view.
                    want_resources: true,
                    ..Default::default()
                };
                match subscribe(&mut client, watch, token.as_deref()).await {
                    Err(e) => e,
                    Ok(mut stream) => {
                        // This stream's id, and the `SetTaskQuery` calls made on it: an
                        // update whose task window is for an older query is stale.
                        let mut watch_id = 0;
                        let mut generation = 0;
                        if tx.send(Msg::Status(Status::Live)).is_err() {
                            return;
                        }
                        // A server publishes at a steady interval: one silent for much
                        // longer is stopped, hung, or cut off by the network without the
                        // connection closing. Give up on the stream then, and reconnect.
                        let mut quiet_limit = silence_limit(None);
                        let silence = tokio::time::sleep(quiet_limit);
                        tokio::pin!(silence);
                        loop {
                            // Every arm is cancel-safe: `message` is a `poll_next` on the
                            // stream, which keeps any half-read message, and `recv` loses
                            // nothing either. So a request never costs an update.
                            tokio::select! {
                                m = stream.message() => match m {
                                    Ok(Some(mut u)) => {
                                        // Only an update proves the server works: a port
                                        // that accepts a call and then fails (not gRPC,
                                        // a proxy) keeps backing off.
                                        backoff.reset();
                                        attempt = 0;
                                        if let Some(info) = &u.runtime {
                                            quiet_limit = silence_limit(Some(info.publish_interval_ns));
                                        }
                                        silence.as_mut().reset(tokio::time::Instant::now() + quiet_limit);
                                        if u.watch_id != 0 {
                                            watch_id = u.watch_id;
                                        }
                                        if u.tasks.as_ref().is_some_and(|t| t.query_generation < generation) {
                                            u.tasks = None;
                                        }
                                        if tx.send(Msg::Update(Box::new(u))).is_err() {
                                            return;
                                        }
                                    }
                                    Ok(None) => break "the server ended the stream".to_string(),
                                    Err(s) => break status_text(&s),
                                },
                                _ = &mut silence => {
                                    break format!("no update from {addr} for {} s", quiet_limit.as_secs_f64());
                                }
                                Some(r) = requests.recv() => match r {
                                    Request::Task(id) => {
                                        serve_task_request(id, Some(&client), token.as_deref(), &addr, &tx)
                                    }
                                    Request::Query(q) => {
                                        query = Some(q.clone());
                                        if watch_id == 0 {
                                            // A server without windows: nothing to ask.
                                            continue;
                                        }
                                        generation += 1;
                                        // Awaited here, not on a task of its own: the stream's
                                        // updates wait meanwhile, so none for the new query
                                        // can arrive before this page.
                                        let set = proto::SetTaskQueryRequest { watch_id, query: Some(q) };
                                        let call = client.set_task_query(request(set, token.as_deref()));
                                        match tokio::time::timeout(CALL_TIMEOUT, call).await {
                                            Ok(Ok(page)) => {
                                                if tx.send(Msg::Page(Box::new(page.into_inner()))).is_err() {
                                                    return;
                                                }
                                                // The server answered: the time the call
                                                // took is not its silence.
                                                silence.as_mut().reset(tokio::time::Instant::now() + quiet_limit);
                                            }
                                            Ok(Err(s)) => break status_text(&s),
                                            Err(_) => break format!("{addr} did not answer within {} s", CALL_TIMEOUT.as_secs()),
                                        }
                                    }
                                },
                            }
                        }
                    }
                }
            }
        };
        let wait = backoff.fail();
        if tx.send(Msg::Status(Status::Disconnected { reason, retry_in_ms: wait.as_millis() as u64 })).is_err() {
            return;
        }
        let retry = tokio::time::sleep(wait);
        tokio::pin!(retry);
        loop {
            tokio::select! {
                _ = &mut retry => break,
                Some(r) = requests.recv() => match r {
                    Request::Task(id) => serve_task_request(id, None, None, &addr, &tx),
                    Request::Query(q) => query = Some(q),
                },
            }
        }
    }
}
