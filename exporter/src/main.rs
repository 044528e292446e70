//! `volt-exporter`: serve a Volt process's metrics for Prometheus, read from its console
//! stream, without recompiling the process.
//!
//! ```text
//! volt-exporter --console 127.0.0.1:6670 --listen 127.0.0.1:9671
//! curl http://127.0.0.1:9671/metrics
//! ```
//!
//! It reconnects (with a backoff capped at 5 s) when the process restarts, and starts its
//! counters over for the new process. While the console is unreachable it serves only
//! `volt_exporter_console_up 0`. Logs go to stderr through `tracing-subscriber`; `RUST_LOG`
//! selects them (default `info`).

use clap::Parser;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use volt_console_proto as proto;
use volt_console_proto::console_client::ConsoleClient;
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
    let console = match volt_exporter::parse_addr(&args.console) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("volt-exporter: --console: {e}");
            return ExitCode::from(2);
        }
    };
    let listen = match volt_exporter::parse_addr(&args.listen) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("volt-exporter: --listen: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match volt_exporter::bind(listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = Arc::new(Metrics::new());
    metrics.set_console_up(false);
    let m = Arc::clone(&metrics);
    let token = args.token.filter(|t| !t.is_empty());
    let exporter =
        match volt_exporter::start(listener, metrics, "volt-exporter", move |stop| follow(console, token, m, stop)) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("volt-exporter: {e}");
                return ExitCode::FAILURE;
            }
        };
    tracing::info!("serving http://{}/metrics from the console at {console}", exporter.local_addr());
    exporter.wait();
    ExitCode::SUCCESS
}

/// Follow the console stream forever, reconnecting with a capped backoff.
async fn follow(
    console: std::net::SocketAddr,
    token: Option<String>,
    metrics: Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    let mut seen = None;
    loop {
        let run = watch(console, token.as_deref(), &metrics, &mut seen, &mut backoff);
        let reason = tokio::select! {
            r = run => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        metrics.set_console_up(false);
        tracing::warn!("console {console}: {reason}; reconnecting in {backoff:?}");
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// One connection: returns why it ended.
async fn watch(
    console: std::net::SocketAddr,
    token: Option<&str>,
    metrics: &Metrics,
    seen: &mut Option<(u32, u64)>, // (pid, started_unix_ns)
    backoff: &mut Duration,
) -> String {
    let endpoint = match tonic::transport::Endpoint::from_shared(format!("http://{console}")) {
        Ok(e) => e.connect_timeout(Duration::from_secs(3)),
        Err(e) => return e.to_string(),
    };
    let channel = match endpoint.connect().await {
        Ok(c) => c,
        Err(e) => return format!("cannot connect: {e}"),
    };
    let mut client = ConsoleClient::new(channel).max_decoding_message_size(64 << 20);
    let mut req =
        tonic::Request::new(proto::WatchRequest { max_events_per_update: 1, omit_tasks: true, ..Default::default() });
    if let Some(t) = token {
        if let Ok(v) = format!("Bearer {t}").parse() {
            req.metadata_mut().insert("authorization", v);
        }
    }
    let mut stream = match client.watch_updates(req).await {
        Ok(s) => s.into_inner(),
        Err(s) => return format!("{} ({:?})", s.message(), s.code()),
    };
    loop {
        match stream.message().await {
            Ok(Some(u)) => {
                if let Some(info) = &u.runtime {
                    // A stream's first update. Another runtime (a restarted process) starts
                    // its counters from zero, and so must ours.
                    let id = (info.pid, info.started_unix_ns);
                    if seen.is_some_and(|s| s != id) {
                        tracing::info!("console {console}: a new runtime (pid {}); counters start over", info.pid);
                        metrics.reset();
                    }
                    *seen = Some(id);
                    tracing::info!("console {console}: following pid {} ({} workers)", info.pid, info.workers);
                    *backoff = Duration::from_millis(100);
                    metrics.set_console_up(true);
                }
                if let Some(s) = &u.snapshot {
                    metrics.publish(s);
                }
            }
            Ok(None) => return "the stream ended".into(),
            Err(s) => return format!("{} ({:?})", s.message(), s.code()),
        }
    }
}
