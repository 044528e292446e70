//! Talking to a console server: addresses, one-off calls, and a watcher thread that
//! reconnects with a capped backoff and answers the UI's requests (a task's history).

use crate::app::Status;
use std::sync::mpsc;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};
use volt_console_proto as proto;
use volt_console_proto::console_client::ConsoleClient;

/// The address `volt-console` connects to by default.
pub const DEFAULT_ADDR: &str = "127.0.0.1:6670";
/// First and largest wait between reconnection attempts.
pub const BACKOFF_START: Duration = Duration::from_millis(100);
pub const BACKOFF_CAP: Duration = Duration::from_secs(5);

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
}

/// How long a one-off call may take before the UI is told it failed.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The UI's side of a watcher thread: it stops when the `Msg` receiver is gone.
pub struct Watcher {
    requests: tokio::sync::mpsc::UnboundedSender<u64>,
    /// The watcher thread.
    pub thread: std::thread::JoinHandle<()>,
}

impl Watcher {
    /// Ask the server for task `id` (`GetTask`); the answer comes back as [`Msg::Task`].
    /// While disconnected the answer is an error, at once.
    pub fn fetch_task(&self, id: u64) {
        // The thread outlives every request unless it already ended, and then the UI
        // has been told (the `Msg` channel closed), so a failed send needs no answer.
        let _ = self.requests.send(id);
    }
}

/// `host:port` or `http://host:port` to an endpoint URI, with a clear error otherwise.
pub fn endpoint_uri(addr: &str) -> Result<String, String> {
    let bare = addr.strip_prefix("http://").unwrap_or(addr).trim_end_matches('/');
    if addr.starts_with("https://") {
        return Err(format!("{addr:?}: TLS is not supported; use host:port or http://host:port"));
    }
    let (host, port) = bare
        .rsplit_once(':')
        .ok_or_else(|| format!("{addr:?} is not an address: expected host:port or http://host:port"))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("{addr:?} is not an address: expected host:port (port 1-65535) or http://host:port"));
    }
    Ok(format!("http://{bare}"))
}

/// A client for `addr` (lazy: no connection is made until the first call fails or works).
pub async fn connect(addr: &str) -> Result<ConsoleClient<Channel>, String> {
    let uri = endpoint_uri(addr)?;
    let endpoint =
        Endpoint::from_shared(uri).map_err(|e| format!("{addr:?}: {e}"))?.connect_timeout(Duration::from_secs(3));
    let channel = endpoint.connect().await.map_err(|e| format!("cannot connect to {addr}: {}", error_chain(&e)))?;
    Ok(ConsoleClient::new(channel).max_decoding_message_size(64 << 20))
}

/// `e` with its sources, each said once, for a message a person can act on.
pub use volt::console::error_chain;

/// A gRPC status as one line: its message, its code, and the cause underneath (a
/// transport failure's status says only "transport error"; the reason is its source).
pub fn status_text(s: &tonic::Status) -> String {
    let msg = volt::console::with_causes(s.message().to_string(), std::error::Error::source(s));
    format!("{msg} ({:?})", s.code())
}

/// A request carrying the token, if any.
pub fn request<T>(msg: T, token: Option<&str>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Some(t) = token {
        if let Ok(v) = format!("Bearer {t}").parse() {
            req.metadata_mut().insert("authorization", v);
        }
    }
    req
}

/// One snapshot (with the runtime info and the full task list), for `--once`.
pub fn fetch_once(addr: &str, token: Option<&str>) -> Result<proto::Update, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut c = connect(addr).await?;
        let r = tokio::time::timeout(Duration::from_secs(5), c.get_snapshot(request(proto::SnapshotRequest {}, token)))
            .await
            .map_err(|_| format!("{addr} did not answer within 5 s"))?;
        r.map(|r| r.into_inner()).map_err(|s| format!("{addr}: {}", status_text(&s)))
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

/// Watch `addr` on a thread of its own until `tx`'s receiver is gone, reconnecting with
/// a backoff that doubles from 100 ms up to 5 s after every failure (a refused
/// connection, a call that fails, a stream that ends) and resets once an update arrives.
pub fn spawn_watcher(addr: String, token: Option<String>, tx: mpsc::Sender<Msg>) -> Watcher {
    spawn_watcher_with(addr, token, WatchOptions::default(), tx)
}

/// [`spawn_watcher`] with options.
pub fn spawn_watcher_with(
    addr: String,
    token: Option<String>,
    options: WatchOptions,
    tx: mpsc::Sender<Msg>,
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
            rt.block_on(watch_loop(addr, token, options, tx, rx));
        })
        .expect("spawn the watcher thread");
    Watcher { requests, thread }
}

/// Answer a request for task `id`: with `client`, on a task of its own so the update
/// stream keeps flowing meanwhile; without one (disconnected), with an error at once.
fn serve_task_request(
    id: u64,
    client: Option<&ConsoleClient<Channel>>,
    token: Option<&str>,
    addr: &str,
    tx: &mpsc::Sender<Msg>,
) {
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

async fn watch_loop(
    addr: String,
    token: Option<String>,
    options: WatchOptions,
    tx: mpsc::Sender<Msg>,
    mut requests: tokio::sync::mpsc::UnboundedReceiver<u64>,
) {
    let mut backoff = BACKOFF_START;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        if tx.send(Msg::Status(Status::Connecting { attempt })).is_err() {
            return;
        }
        let reason = match connect(&addr).await {
            Err(e) => e,
            Ok(mut client) => {
                match client
                    .watch_updates(request(
                        proto::WatchRequest { max_events_per_update: options.max_events_per_update, omit_tasks: false },
                        token.as_deref(),
                    ))
                    .await
                {
                    Err(s) => status_text(&s),
                    Ok(stream) => {
                        let mut stream = stream.into_inner();
                        if tx.send(Msg::Status(Status::Live)).is_err() {
                            return;
                        }
                        loop {
                            // Both arms are cancel-safe: `message` is a `poll_next` on the
                            // stream, which keeps any half-read message, and `recv` loses
                            // nothing either. So a request never costs an update.
                            tokio::select! {
                                m = stream.message() => match m {
                                    Ok(Some(u)) => {
                                        // Only an update proves the server works: a port
                                        // that accepts a call and then fails (not gRPC,
                                        // a proxy) keeps backing off.
                                        backoff = BACKOFF_START;
                                        attempt = 0;
                                        if tx.send(Msg::Update(Box::new(u))).is_err() {
                                            return;
                                        }
                                    }
                                    Ok(None) => break "the server ended the stream".to_string(),
                                    Err(s) => break status_text(&s),
                                },
                                Some(id) = requests.recv() => {
                                    serve_task_request(id, Some(&client), token.as_deref(), &addr, &tx);
                                }
                            }
                        }
                    }
                }
            }
        };
        let wait = backoff;
        if tx.send(Msg::Status(Status::Disconnected { reason, retry_in_ms: wait.as_millis() as u64 })).is_err() {
            return;
        }
        let retry = tokio::time::sleep(wait);
        tokio::pin!(retry);
        loop {
            tokio::select! {
                _ = &mut retry => break,
                Some(id) = requests.recv() => serve_task_request(id, None, None, &addr, &tx),
            }
        }
        backoff = (backoff * 2).min(BACKOFF_CAP);
    }
}
