//! hyper on Volt (feature `hyper`): the runtime traits hyper 1.x asks of a runtime, an
//! HTTP server for any tower service, and a connector for hyper-util's client.
//!
//! ```
//! use futures::{AsyncReadExt, AsyncWriteExt};
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let app = axum::Router::new().route("/", axum::routing::get(|| async { "Hello from Volt" }));
//!     let listener = volt::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     volt::spawn(async move { volt::hyper::serve(listener, app).await });
//!
//!     // A bare HTTP/1.1 request, to see the whole response.
//!     let mut conn = volt::net::TcpStream::connect(addr).await?;
//!     conn.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
//!     let mut response = String::new();
//!     conn.read_to_string(&mut response).await?;
//!     assert!(response.starts_with("HTTP/1.1 200 OK"));
//!     assert!(response.ends_with("Hello from Volt"));
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! * [`Io`] wraps a Volt [`TcpStream`](crate::net::TcpStream) (or any futures-io stream) as hyper's
//!   [`Read`](hyper::rt::Read) and [`Write`](hyper::rt::Write). For a `TcpStream` a read
//!   goes straight into hyper's uninitialized buffer, with no zeroing, and writes are
//!   vectored (one `writev` for a response's head and body).
//! * [`Executor`] spawns hyper's background futures (HTTP/2 streams, client connections)
//!   as named Volt tasks, so they show in the console's task list; [`Timer`] gives hyper
//!   sleeps on Volt's timing wheel, with `reset` moving a sleep in place.
//! * [`serve`] runs an accept loop: every connection becomes a task named
//!   `hyper connection` that speaks HTTP/1.1 or HTTP/2, whichever the client's first
//!   bytes say (HTTP/2 needs prior knowledge: no TLS, so no ALPN). An axum `Router` or
//!   tonic's `Routes` is such a service.
//! * [`Connector`] lets `hyper_util::client::legacy::Client` open plain-HTTP connections
//!   on Volt (host names resolve on the blocking pool).
//!
//! # Timeouts a server keeps
//! A connection must show which protocol it speaks, and an HTTP/1 request must deliver
//! its whole head, within the header-read timeout (30 s by default,
//! [`Serve::header_read_timeout`]), counted from the connection's start or its last
//! response's end, so it also limits how long a kept-alive connection may sit idle. An
//! HTTP/2 connection must start its first request within it too (after that, idle HTTP/2
//! connections are left to the client). A client that connects and says nothing, sends
//! only the HTTP/2 preface, or trickles its headers, is cut when it runs out. The connection task keeps this deadline with at most one timer per timeout period (plus one per request still running when it rang),
//! rather than hyper's own timer, which arms and disarms one for every request. The protocol sniff is done here rather
//! than with hyper-util's `auto` builder because that one waits for the first bytes with
//! no timeout at all.
//!
//! # Memory per connection
//! Until a connection's first request head is whole, `serve` holds its bytes itself, in
//! a vector as long as what arrived, and makes hyper's connection (with hyper's 8 KiB
//! read and 8 KiB write buffers) only then: a connection that connects and waits, or
//! trickles its head, holds about 1 KiB. After a request, hyper keeps its two buffers
//! for the connection's life (`connection`'s module doc has the figures).
//!
//! # Graceful shutdown
//! [`Serve::with_graceful_shutdown`] takes a future; when it completes the listener is
//! closed (new connections are refused), every connection is asked to finish: an idle
//! HTTP/1 connection closes at once, a busy one after its response, HTTP/2 sends `GOAWAY`
//! and finishes its open streams. Whatever is still open at the deadline
//! ([`WithGracefulShutdown::shutdown_deadline`], 30 s by default) is dropped. The
//! connection registry this needs costs each connection one lock when it opens and one
//! when it closes, and nothing per request.

mod client;
mod connection;
mod io;
mod rt;
mod serve;
mod shutdown;
mod watch;

pub use client::Connector;
pub use io::Io;
pub use rt::{Executor, Timer};
pub use serve::{serve, Serve, ServeBody, ServeService, WithGracefulShutdown};

use crate::scheduler::handle::Handle;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::net::TcpListener;

/// The name of every task [`serve`] spawns for a connection.
pub const CONNECTION_TASK_NAME: &str = "hyper connection";
/// The default name of the tasks [`Executor`] spawns (hyper's HTTP/2 streams and client
/// connection drivers).
pub const EXECUTOR_TASK_NAME: &str = "hyper task";

const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_SHUTDOWN_DEADLINE: Duration = Duration::from_secs(30);
/// `d` from now, saturating: `Duration::MAX` and its kin mean "never".
fn deadline_after(d: Duration) -> Instant {
    crate::time::deadline_after(Instant::now(), d)
}

#[track_caller]
fn spawn_named<F>(shared: &Arc<Handle>, name: &'static str, future: F) -> crate::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // A name is only kept while the runtime records events: don't allocate one otherwise.
    let name = shared.metrics.recorder.is_some().then(|| name.to_owned());
    Handle::spawn_named(shared, future, name, std::panic::Location::caller())
}

fn current_shared(what: &str) -> Arc<Handle> {
    crate::scheduler::handle::current_handle().unwrap_or_else(|| {
        panic!("volt::hyper::{what} used outside a Volt runtime: create it inside one, or pass a `Handle`")
    })
}
