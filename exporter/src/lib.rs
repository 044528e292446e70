//! Prometheus metrics for Volt runtimes.
//!
//! In-process (feature `in-process`): [`install`] (or [`Builder`]) samples
//! `Telemetry::snapshot()` every second by default and serves the figures at
//! `http://ADDR/metrics`, from a thread of its own that runs a small Volt runtime; it
//! reads the runtime's telemetry directly and needs neither tonic nor Tokio's runtime.
//! As a sidecar (feature `sidecar`): the `volt-exporter` binary reads a process's
//! console stream (`volt.console.v1.Console/WatchUpdates`) and serves the same metrics,
//! so a process that only enabled the console can be scraped without recompiling. The
//! sidecar serves the runtime's series only while the stream delivers: with the console
//! down, a scrape has the `volt_exporter_*` series alone, not the last figures of a
//! process that may be gone (see [`Metrics`]).
//!
//! ```no_run
//! let rt = volt::Runtime::new()?;
//! let exporter = volt_exporter::install(rt.handle(), "127.0.0.1:9670")?;   // port in use: an error here
//! // curl http://127.0.0.1:9670/metrics
//! # drop(exporter);
//! # Ok::<_, std::io::Error>(())
//! ```
//!
//! # How the metrics are made
//! Both ways read a runtime into a [`Sample`]: in-process from `Telemetry::snapshot()`
//! and `Telemetry::task_groups()`, the sidecar from the console's wire types. Counters
//! and gauges go through the `metrics` facade into `metrics-exporter-prometheus`'s
//! recorder (a private one per exporter, not the global recorder, so several exporters
//! can live in one process), which renders them. Two kinds of figures the `metrics` API
//! cannot carry are rendered next to them, in the same text format: the histograms,
//! which the runtime has already bucketed (log2 buckets of nanoseconds; `metrics`
//! histograms take one observation at a time, which would cost the sampler a call per
//! poll), and `volt_worker_parked_seconds_total` and `volt_worker_busy_seconds_total`,
//! counters in fractional seconds (`metrics` counters are integers). The Tokio bridge's
//! families (`volt_bridge_*`, from `Snapshot::bridge`) are rendered by hand too, from
//! their own table: they are there exactly while the runtime reports a running bridge,
//! which a registered series, kept once set, could not follow. So are the task groups'
//! families (`volt_task_group_*`, label `group`, from `Telemetry::task_groups` or the
//! console's `Update.task_groups`): one series per group the runtime reports, at most
//! 101 (100 groups and `other`). The names and help text are in one table for both ways.
//!
//! # Connections that never finish
//! The HTTP server (hyper's HTTP/1.1 on Volt) takes at most 256 connections at once, and
//! each must send each request header within 10 s, idle time on a kept-alive connection
//! included ([`ConnectionLimits`], [`Builder::connection_limits`], the sidecar's
//! `--max-connections` and `--handshake-timeout`). A connection over the cap closes the
//! oldest one that has not made a request yet, so connections that never send one (or
//! send blank lines) cannot lock Prometheus out; refusals are logged. A connection that
//! made requests but does not read the answers (a client that pipelines requests and
//! never reads) is closed once a write has waited that long for it, so it cannot hold its
//! place either.

mod families;
mod listen;
mod registry;
mod sample;
mod served;
mod server;

#[cfg(feature = "in-process")]
mod in_process;
#[cfg(feature = "sidecar")]
mod sidecar;

#[cfg(feature = "in-process")]
pub use in_process::{install, Builder, DEFAULT_INTERVAL};
pub use listen::{bind, bind_first, resolve};
pub use sample::{GroupSample, Sample};
pub use served::{Metrics, SCRAPER_GONE, SCRAPER_GONE_MAX};
pub use server::{
    start, start_limited, ConnectionLimits, Exporter, Stop, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
#[cfg(feature = "sidecar")]
pub use sidecar::{parse_addr, parse_addrs};

/// The address the demo and the sidecar serve on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9670";
