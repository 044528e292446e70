//! `volt-exporter`: serve a Volt process's metrics for Prometheus, read from its console
//! stream, without recompiling the process.
//!
//! ```text
//! volt-exporter --console 127.0.0.1:6670 --listen 127.0.0.1:9671
//! curl http://127.0.0.1:9671/metrics
//! ```
//!
//! It reconnects (with a backoff that doubles from 100 ms to 5 s after every failure, and
//! resets once an update arrives) when the process restarts, and starts its counters over
//! for the new process. It never serves stale figures: when the stream ends, fails, or
//! stops delivering (the process hangs, the network drops packets) for as long as
//! `volt-console` waits before it gives a stream up (`volt_console_client::silence_limit`:
//! 20 publish intervals, and at least 5 s), `volt_exporter_console_up` goes to 0, every
//! `volt_*` series of the process leaves the scrape (counters and histograms too), and it
//! reconnects. Until the console is back, a scrape has the `volt_exporter_*` series alone;
//! then the process's series come back with its current values, none of the old
//! connection's kept. It asks the console for the lost-waker count (a walk
//! of every task in the process, once a second) only while something scrapes it, and
//! subscribes again when that changes. Logs go to stderr through `tracing-subscriber`;
//! `RUST_LOG` selects them (default `info`).
//!
//! `/metrics` is served as the in-process exporter serves it, on the exporter's own Volt
//! runtime; the console client speaks tonic, so the stream is followed on a Tokio runtime
//! of its own, on one of that runtime's blocking threads.

use clap::Parser;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use volt_console_client::{self as client, Backoff};
use volt_console_proto as proto;
use volt_exporter::Metrics;

#[derive(Parser, Debug)]
#[command(name = "volt-exporter", version, about = "Prometheus metrics from a Volt process's console stream")]
struct Args {
    /// The process's console: host:port or http://host:port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6670")]
    console: String,
    /// Where to serve /metrics: host:port or http://host:port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9671")]
    listen: String,
    /// The most HTTP connections open at once; one over it closes the oldest that has not
    /// sent its request header yet.
    #[arg(long, value_name = "N", default_value_t = volt_exporter::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_connections: u64,
    /// Seconds a connection has to send its request header before it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    handshake_timeout: f64,
    /// The console token (default: $VOLT_CONSOLE_TOKEN).
    #[arg(long, env = "VOLT_CONSOLE_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    // Checked for its shape only: the host name is looked up at each connection, trying
    // every address it has (a `localhost` that is `::1` first, a service that moved).
    let console = match client::endpoint_uri(&args.console) {
        Ok(uri) => uri,
        Err(e) => {
            eprintln!("volt-exporter: --console: {e}");
            return ExitCode::from(2);
        }
    };
    let listen = match volt_exporter::parse_addrs(&args.listen) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("volt-exporter: --listen: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match volt_exporter::bind_first(&listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if !(args.handshake_timeout.is_finite() && args.handshake_timeout > 0.0 && args.handshake_timeout <= 3600.0) {
        eprintln!("volt-exporter: --handshake-timeout must be a number of seconds in (0, 3600]");
        return ExitCode::from(2);
    }
    let limits = volt_exporter::ConnectionLimits {
        max_connections: args.max_connections as usize,
        handshake_timeout: Duration::from_secs_f64(args.handshake_timeout),
    };
    let metrics = Arc::new(Metrics::new());
    metrics.set_console_up(false);
    let m = Arc::clone(&metrics);
    let token = client::token_from(args.token);
    let console_rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("volt-exporter: {e}");
            return ExitCode::FAILURE;
        }
    };
    let exporter =
        match volt_exporter::start_limited(listener, limits, metrics, "volt-exporter", move |stop| async move {
            let followed = volt::task::spawn_blocking(move || {
                console_rt.block_on(async {
                    tokio::select! {
                        _ = follow(console, token, m) => {}
                        _ = stop.stopped() => {}
                    }
                })
            });
            // A panic there ends the exporter's thread with it, and the process fails.
            if let Err(e) = followed.await {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("volt-exporter: {e}");
                return ExitCode::FAILURE;
            }
        };
    tracing::info!("serving http://{}/metrics from the console at {}", exporter.local_addr(), args.console);
    match exporter.join() {
        Ok(()) => ExitCode::SUCCESS,
        // A supervisor that restarts on failure must see one.
        Err(_) => {
            eprintln!("volt-exporter: the exporter's thread panicked");
            ExitCode::FAILURE
        }
    }
}

/// Follow the console stream forever, reconnecting on the client library's capped
/// backoff schedule.
async fn follow(console: String, token: Option<String>, metrics: Arc<Metrics>) {
    let mut backoff = Backoff::new();
    let mut seen = None;
    loop {
        let reason = watch(&console, token.as_deref(), &metrics, &mut seen, &mut backoff).await;
        let Some(reason) = reason else {
            // Subscribe again at once, asking for the lost-waker count or not.
            continue;
        };
        metrics.set_console_up(false);
        let wait = backoff.fail();
        tracing::warn!("console {console}: {reason}; reconnecting in {wait:?}");
        tokio::time::sleep(wait).await;
    }
}

/// Whether the console should count lost wakers for us: only while someone scrapes
/// (`Metrics::scraper_present`), since the count walks every task of the process once a
/// second.
fn lost_wakers_wanted(metrics: &Metrics) -> bool {
    metrics.scraper_present()
}

/// One connection: returns why it ended (`None`: to subscribe again, the scrapers having
/// come or gone).
async fn watch(
    console: &str,
    token: Option<&str>,
    metrics: &Metrics,
    seen: &mut Option<(u32, u64)>, // (pid, started_unix_ns)
    backoff: &mut Backoff,
) -> Option<String> {
    let endpoint = match client::endpoint(console.to_string()) {
        Ok(e) => e,
        Err(e) => return Some(e),
    };
    let mut c = match client::open(endpoint).await {
        Ok(c) => c,
        Err(e) => return Some(format!("cannot connect: {e}")),
    };
    let wanted = lost_wakers_wanted(metrics);
    let request = proto::WatchRequest {
        max_events_per_update: 1,
        omit_tasks: true,
        skip_lost_wakers: !wanted,
        ..Default::default()
    };
    let mut stream = match client::subscribe(&mut c, request, token).await {
        Ok(s) => s,
        Err(e) => return Some(e),
    };
    // Until the first update says the publish interval, the shortest limit.
    let mut stall = client::silence_limit(None);
    loop {
        if lost_wakers_wanted(metrics) != wanted {
            return None;
        }
        let next = match tokio::time::timeout(stall, stream.message()).await {
            Ok(m) => m,
            Err(_) => {
                metrics.set_console_up(false);
                return Some(format!("no update for {stall:?}: the stream stalled (its figures are no longer served)"));
            }
        };
        match next {
            Ok(Some(u)) => {
                if let Some(info) = &u.runtime {
                    // A stream's first update. Another runtime (a restarted process) starts
                    // its counters from zero, and so must ours: the registry went with the
                    // old stream if it went down, and goes here if it did not (subscribing
                    // again reached the new process).
                    let id = (info.pid, info.started_unix_ns);
                    if seen.is_some_and(|s| s != id) {
                        tracing::info!("console {console}: a new runtime (pid {}); counters start over", info.pid);
                        metrics.reset();
                    }
                    *seen = Some(id);
                    tracing::info!("console {console}: following pid {} ({} workers)", info.pid, info.workers);
                    stall = client::silence_limit(Some(info.publish_interval_ns));
                    backoff.reset();
                }
                if let Some(s) = &u.snapshot {
                    metrics.publish(s);
                    metrics.publish_groups(&u.task_groups);
                }
                if u.runtime.is_some() {
                    // Up only once the first snapshot is in, so a scrape that says up has
                    // the figures too.
                    metrics.set_console_up(true);
                }
            }
            Ok(None) => return Some("the stream ended".into()),
            Err(s) => return Some(client::status_text(&s)),
        }
    }
}
