//! The exporter's thread: a current-thread Volt runtime of its own that serves
//! `/metrics` over HTTP/1.1 (hyper, through Volt's hyper I/O and timer) and runs the
//! exporter's work (the in-process sampler, or the sidecar's console follower) beside it.
//! Its own runtime rather than the watched one: a scrape still gets an answer while the
//! watched runtime's workers are all stuck, and the exporter's connections and timers
//! never show in the figures it serves.

mod gate;

pub use gate::{ConnectionLimits, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_CONNECTIONS};

use crate::served::Metrics;
use gate::{EveryTenSeconds, Gate, Guarded};
use http_body_util::Full;
use hyper::body::Bytes;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

/// Tells an exporter's work to end: set when the [`Exporter`] is stopped or dropped.
/// Cheap to clone, and awaitable on any async runtime (the sidecar awaits it on Tokio).
#[derive(Clone, Default)]
pub struct Stop(Arc<StopState>);

#[derive(Default)]
struct StopState {
    set: AtomicBool,
    /// The tasks waiting in [`Stop::stopped`], each once.
    waiting: Mutex<Vec<Waker>>,
}

impl Stop {
    /// Whether the exporter is stopping.
    pub fn is_stopped(&self) -> bool {
        self.0.set.load(Ordering::Acquire)
    }

    /// Completes once the exporter is stopping.
    pub async fn stopped(&self) {
        std::future::poll_fn(|cx| {
            if self.is_stopped() {
                return Poll::Ready(());
            }
            let mut waiting = self.0.waiting.lock().unwrap_or_else(|e| e.into_inner());
            if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                waiting.push(cx.waker().clone());
            }
            drop(waiting);
            // Set meanwhile: its wake may have missed the waker just added.
            if self.is_stopped() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    fn set(&self) {
        self.0.set.store(true, Ordering::Release);
        let waiting = std::mem::take(&mut *self.0.waiting.lock().unwrap_or_else(|e| e.into_inner()));
        for w in waiting {
            w.wake();
        }
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Stop").field(&self.is_stopped()).finish()
    }
}

/// A running exporter: an HTTP listener and the exporter's work on a thread of their own.
pub struct Exporter {
    addr: SocketAddr,
    stop: Stop,
    thread: Option<std::thread::JoinHandle<()>>,
    metrics: Arc<Metrics>,
}

impl Exporter {
    /// Where `/metrics` is served.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The current exposition text, as a scrape would return it.
    pub fn render(&self) -> String {
        self.metrics.render()
    }

    /// Whether the exporter's thread has exited (it does when the runtime shuts down).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Block until the exporter's thread exits (the runtime shut down, or its work ended).
    pub fn wait(self) {
        let _ = self.join();
    }

    /// [`Exporter::wait`], with the panic that ended the thread, if one did.
    pub fn join(mut self) -> std::thread::Result<()> {
        match self.thread.take() {
            Some(t) => t.join(),
            None => Ok(()),
        }
    }

    /// Stop serving and working, and join the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.set();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").field("addr", &self.addr).finish()
    }
}

/// Serve `metrics` on `listener` and run `work` beside it, on a thread named `name` with a
/// current-thread Volt runtime of its own. The thread ends when `work` returns or the
/// exporter is stopped (then `work` is dropped where it waits; it may also watch its
/// [`Stop`]).
pub fn start<F, Fut>(
    listener: std::net::TcpListener,
    metrics: Arc<Metrics>,
    name: &str,
    work: F,
) -> io::Result<Exporter>
where
    F: FnOnce(Stop) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    start_limited(listener, ConnectionLimits::default(), metrics, name, work)
}

/// [`start`] with a connection cap and header timeout.
pub fn start_limited<F, Fut>(
    listener: std::net::TcpListener,
    limits: ConnectionLimits,
    metrics: Arc<Metrics>,
    name: &str,
    work: F,
) -> io::Result<Exporter>
where
    F: FnOnce(Stop) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let addr = listener.local_addr()?;
    // Its blocking threads (the sampler's deadlock search, the sidecar's console client)
    // are named after it; no stall monitor: its polls are the exporter's, not the user's.
    let rt = volt::runtime::Builder::new_current_thread().thread_name(name).stall_threshold(None).build()?;
    let stop = Stop::default();
    let for_work = stop.clone();
    let served = Arc::clone(&metrics);
    let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
        rt.block_on(async move {
            let listener = match volt::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!("volt-exporter: cannot serve on {addr}: {e}");
                    return;
                }
            };
            let server = volt::spawn(accept(listener, Gate::new(limits), served));
            first_of(work(for_work.clone()), for_work.stopped()).await;
            server.abort();
        });
    })?;
    Ok(Exporter { addr, stop, thread: Some(thread), metrics })
}

/// Run `a` and `b` together until either completes; the other is dropped.
async fn first_of(a: impl Future<Output = ()>, b: impl Future<Output = ()>) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    std::future::poll_fn(|cx| {
        if a.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        b.as_mut().poll(cx)
    })
    .await
}

/// Accept connections under the gate's limits and serve each on a task of its own.
///
/// An accept error (out of file descriptors) is followed by a 50 ms pause: the same
/// error comes back at once while a connection waits in the backlog, and retrying
/// without a pause would spin the thread. Accept errors and refused connections are each
/// logged at most every 10 s, with how many there were.
async fn accept(listener: volt::net::TcpListener, gate: Arc<Gate>, metrics: Arc<Metrics>) {
    let name = match listener.local_addr() {
        Ok(addr) => format!("volt-exporter on {addr}"),
        Err(_) => "volt-exporter".to_string(),
    };
    let (mut failed, mut refused) = (EveryTenSeconds::default(), EveryTenSeconds::default());
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => match gate.admit(volt::hyper::Io::new(tcp)) {
                Some(conn) => drop(volt::spawn(serve(conn, gate.limits(), Arc::clone(&metrics)))),
                // Dropped, which closes it.
                None => refused.note(|n| {
                    let max = gate.limits().max_connections;
                    tracing::warn!(
                        "{name}: refused {n} connection(s): {max} are open, each a client that made a request"
                    )
                }),
            },
            Err(e) => {
                failed.note(|n| tracing::warn!("{name}: accepting a connection failed {n} time(s): {e}"));
                volt::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serve one connection until it closes. Each request must arrive within the handshake
/// timeout, and that timeout runs again for every request on a kept-alive connection,
/// idle time between requests included (hyper's header-read timeout): a connection that
/// sits idle, or sends blank lines and nothing else, is closed then. A connection counts
/// as a client (which the gate never closes to make room) once it has made a request.
async fn serve(conn: Guarded<volt::hyper::Io<volt::net::TcpStream>>, limits: ConnectionLimits, metrics: Arc<Metrics>) {
    let _ = conn.get_ref().inner().set_nodelay(true);
    let admission = conn.admission();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        admission.prove();
        std::future::ready(Ok::<_, Infallible>(respond(&req, &metrics)))
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(volt::hyper::Timer::new())
        .header_read_timeout(limits.handshake_timeout)
        .serve_connection(conn, service);
    // A client that goes away or times out is no error of the server's.
    let _ = conn.await;
}

/// The content type of the Prometheus text format.
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The answer to one request: the exposition at `/metrics`, a pointer to it at `/`.
/// Both take GET (and HEAD, which hyper answers without the body); another method is
/// 405 and another path 404.
fn respond<B>(req: &hyper::Request<B>, metrics: &Metrics) -> hyper::Response<Full<Bytes>> {
    use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
    use hyper::{Method, StatusCode};
    let mut response = hyper::Response::new(Full::new(Bytes::new()));
    let metrics_page = match req.uri().path() {
        "/metrics" => true,
        "/" => false,
        _ => {
            *response.status_mut() = StatusCode::NOT_FOUND;
            return response;
        }
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET,HEAD"));
        return response;
    }
    let (content_type, body) = if metrics_page {
        (METRICS_TYPE, metrics.render())
    } else {
        ("text/plain; charset=utf-8", "volt-exporter: metrics are at /metrics\n".to_string())
    };
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    *response.body_mut() = Full::new(Bytes::from(body));
    response
}
