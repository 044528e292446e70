//! The `http` example's axum app, shared with its tests.
//!
//! Routes:
//! * `GET /`: the plain text `Hello, world!`, with no middleware on the route;
//! * `GET /json`: a small JSON document (`{"message":"Hello, world!","runtime":"volt",...}`);
//! * `GET /sleep?ms=N`: answers after sleeping N ms on Volt's timer (default 100, at
//!   most 60,000);
//! * `GET /blocking?ms=N`: answers after a `spawn_blocking` call that sleeps N ms on the
//!   blocking pool (default 10, at most 60,000), so the workers stay free.

use axum::extract::Query;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::time::Duration;

/// The longest wait `/sleep` and `/blocking` accept.
pub const MAX_WAIT_MS: u64 = 60_000;

/// The query of `/sleep` and `/blocking`.
#[derive(Debug, Deserialize)]
pub struct Wait {
    /// Milliseconds to wait.
    pub ms: Option<u64>,
}

/// The body of `/json`.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Greeting {
    /// Always `Hello, world!`.
    pub message: String,
    /// Always `volt`.
    pub runtime: String,
    /// The number of Volt worker threads serving.
    pub workers: usize,
}

/// The app: every route above.
pub fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "Hello, world!" }))
        .route("/json", get(json))
        .route("/sleep", get(sleep))
        .route("/blocking", get(blocking))
}

async fn json() -> Json<Greeting> {
    Json(Greeting {
        message: "Hello, world!".into(),
        runtime: "volt".into(),
        workers: volt::runtime::Handle::current().num_workers(),
    })
}

async fn sleep(Query(w): Query<Wait>) -> String {
    let ms = w.ms.unwrap_or(100).min(MAX_WAIT_MS);
    volt::time::sleep(Duration::from_millis(ms)).await;
    format!("slept {ms} ms\n")
}

async fn blocking(Query(w): Query<Wait>) -> Result<String, (http::StatusCode, String)> {
    let ms = w.ms.unwrap_or(10).min(MAX_WAIT_MS);
    let thread = volt::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(ms));
        std::thread::current().name().unwrap_or("unnamed").to_owned()
    })
    .await
    .map_err(|e| (http::StatusCode::INTERNAL_SERVER_ERROR, format!("blocking call failed: {e}\n")))?;
    Ok(format!("blocked {ms} ms on {thread}\n"))
}

/// Serve [`app`] on `listener` until `shutdown` completes, then let the requests in
/// flight finish (for at most `deadline`).
pub async fn serve(
    listener: volt::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    deadline: Duration,
) -> std::io::Result<()> {
    volt::hyper::serve(listener, app()).with_graceful_shutdown(shutdown).shutdown_deadline(deadline).await
}
