//! An axum web service on Volt, watched by the console and scraped by Prometheus.
//!
//! ```sh
//! cargo run --release -p volt-examples --example http                 # 127.0.0.1:3000
//! cargo run --release -p volt-examples --example http -- --addr 127.0.0.1:8080 --workers 2
//! curl http://127.0.0.1:3000/                                         # Hello, world!
//! curl http://127.0.0.1:3000/json
//! curl 'http://127.0.0.1:3000/sleep?ms=250'
//! curl 'http://127.0.0.1:3000/blocking?ms=50'
//! curl --http2-prior-knowledge http://127.0.0.1:3000/
//! cargo run --release -p volt-console                                 # watch it
//! ```
//!
//! The app (`volt_examples::http::app`) is served by `volt::hyper::serve`, HTTP/1.1 and
//! HTTP/2 on one port. The runtime records events, so every connection shows in the
//! console's task list as `hyper connection`. The console listens on `VOLT_CONSOLE_BIND`
//! (default `127.0.0.1:6670`), Prometheus metrics on `VOLT_METRICS_BIND` (default
//! `127.0.0.1:9670`). Ctrl-C (or SIGTERM) stops accepting and lets the requests in flight
//! finish, for at most 10 s.

use clap::Parser;
use std::time::Duration;

/// An axum app on Volt, with the console and Prometheus metrics on.
#[derive(Parser, Debug)]
#[command(name = "http")]
struct Args {
    /// The address to serve HTTP on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    addr: String,
    /// Worker threads (default: the available parallelism).
    #[arg(long)]
    workers: Option<usize>,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("http: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> std::io::Result<()> {
    let mut builder = volt::runtime::Builder::new();
    if let Some(n) = args.workers {
        builder.worker_threads(n);
    }
    let rt = builder.enable_console().event_ring(4096).build()?;
    let metrics_bind = std::env::var("VOLT_METRICS_BIND").ok().filter(|s| !s.is_empty());
    let metrics_bind = metrics_bind.as_deref().unwrap_or(volt_exporter::DEFAULT_LISTEN);
    let exporter = volt_exporter::install(rt.handle(), metrics_bind)?;
    if let Some(addr) = rt.console_addr() {
        println!("http: console on {addr} (watch it with: volt-console {addr})");
    }

    // Ctrl-C and SIGTERM complete this future; a second one exits at once.
    let signal = volt_examples::shutdown_signal()?;

    let result = rt.block_on(async {
        let listener = volt::net::TcpListener::bind(args.addr.as_str())
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", args.addr)))?;
        println!(
            "http: serving on http://{} ({} workers)",
            listener.local_addr()?,
            volt::runtime::Handle::current().num_workers()
        );
        println!("http: prometheus metrics on http://{}/metrics", exporter.local_addr());
        let shutdown = async move {
            signal.await;
            println!("http: shutting down; finishing the requests in flight");
        };
        volt_examples::http::serve(listener, shutdown, Duration::from_secs(10)).await
    });
    drop(exporter);
    if result.is_ok() {
        let snap = rt.handle().telemetry().snapshot();
        println!("http: stopped; {} tasks spawned, {} completed", snap.tasks_spawned, snap.tasks_completed);
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}
