//! The exporter inside the program (feature `in-process`): [`install`] and [`Builder`]
//! read the runtime's own `Telemetry` every interval, straight into a [`Sample`], and
//! serve it. Nothing here speaks gRPC or needs Tokio.

use crate::listen::{bind_first, resolve_all};
use crate::sample::Sample;
use crate::served::Metrics;
use crate::server::{start_limited, ConnectionLimits, Exporter};
use crate::DEFAULT_LISTEN;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::telemetry::Telemetry;

/// The default sampling interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// Install an exporter for `handle`'s runtime serving `http://addr/metrics`, sampling
/// every second. See [`Builder`] for the options.
pub fn install(handle: &volt::runtime::Handle, addr: impl ToSocketAddrs) -> io::Result<Exporter> {
    Builder::new().listen(addr)?.install(handle)
}

/// Configures an in-process exporter.
#[derive(Clone, Debug)]
pub struct Builder {
    /// What the address resolved to, tried in order.
    listen: Option<Vec<SocketAddr>>,
    interval: Duration,
    limits: ConnectionLimits,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// Listen on `127.0.0.1:9670`, sample every second.
    pub fn new() -> Builder {
        Builder { listen: None, interval: DEFAULT_INTERVAL, limits: ConnectionLimits::default() }
    }

    /// The address to serve `/metrics` on (port 0 picks a free port; see
    /// [`Exporter::local_addr`]). A name that resolves to several addresses (`localhost`
    /// to `::1` and `127.0.0.1`) binds the first of them that can be bound (see
    /// [`bind_first`]).
    pub fn listen(mut self, addr: impl ToSocketAddrs) -> io::Result<Builder> {
        self.listen = Some(resolve_all(addr)?);
        Ok(self)
    }

    /// How often to sample the runtime (default 1 s).
    pub fn interval(mut self, every: Duration) -> Builder {
        self.interval = every.max(Duration::from_millis(1));
        self
    }

    /// The HTTP server's connection cap and header timeout (default: 256 connections,
    /// 10 s).
    pub fn connection_limits(mut self, limits: ConnectionLimits) -> Builder {
        self.limits = limits;
        self
    }

    /// Bind the listener (a port in use is an error here) and start the exporter's thread.
    /// It stops when the [`Exporter`] is dropped or the runtime shuts down.
    pub fn install(self, handle: &volt::runtime::Handle) -> io::Result<Exporter> {
        let addrs = match self.listen {
            Some(a) => a,
            None => resolve_all(DEFAULT_LISTEN)?,
        };
        let listener = bind_first(&addrs)?;
        let telemetry = handle.telemetry();
        let metrics = Arc::new(Metrics::new());
        let m = Arc::clone(&metrics);
        let interval = self.interval;
        start_limited(listener, self.limits, metrics, "volt-exporter", move |_stop| sample(telemetry, m, interval))
    }
}

/// Publish a sample of `telemetry` every `interval` until its runtime shuts down.
async fn sample(telemetry: Telemetry, metrics: Arc<Metrics>, interval: Duration) {
    let mut ticker = volt::time::interval(interval);
    ticker.set_missed_tick_behavior(volt::time::MissedTickBehavior::Skip);
    // The lost-waker count walks every task: only while someone scrapes
    // (`Metrics::scraper_present`), at most once a second, and its last value stands in
    // between. Until it is first counted, the gauge is left out (not 0).
    let mut lost = None;
    let mut walked: Option<Instant> = None;
    loop {
        ticker.tick().await;
        // The runtime was dropped: stop sampling, and stop serving.
        if telemetry.is_shut_down() {
            return;
        }
        // At most once a second, whatever the sampling interval.
        let due = walked.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if due && metrics.scraper_present() {
            walked = Some(Instant::now());
            lost = Some(telemetry.lost_wakers());
        }
        // Deadlocks are looked for only while someone scrapes, on a blocking thread: a
        // reading walks the task list, and a call after a quiet spell takes two readings
        // a moment apart. The count is in the snapshot.
        if metrics.scraper_present() {
            let t = telemetry.clone();
            let _ = volt::task::spawn_blocking(move || t.deadlocks()).await;
        }
        metrics.publish(Sample::from(&telemetry.snapshot()).with_lost_wakers(lost));
        metrics.publish_groups(&telemetry.task_groups());
    }
}
