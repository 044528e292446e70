//! The HTTP server `runtime/benches/http.sh` drives with `wrk`: one axum route,
//! `GET /` answering "Hello, world!" in plain text, no middleware, served on Volt or on
//! Tokio with the same number of worker threads.
//!
//! ```text
//! cargo run --release -p volt-examples --example http_bench -- --runtime volt
//! cargo run --release -p volt-examples --example http_bench -- --runtime tokio --workers 2
//! cargo run --release -p volt-examples --example http_bench -- --runtime volt --event-ring 4096 --console
//! ```
//!
//! It prints `listening on ADDR` once bound (port 0 picks a free one), then serves until
//! killed. `--raw` swaps axum and hyper for a minimal keep-alive HTTP/1.1 responder written
//! on each runtime's own `TcpStream`, to look at the runtime's wake and reactor paths with
//! no HTTP library in the profile.

use axum::routing::get;
use axum::Router;
use clap::{Parser, ValueEnum};
use std::net::SocketAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Rt {
    Volt,
    Tokio,
}

#[derive(Parser, Debug)]
#[command(about = "An axum hello-world server on Volt or Tokio, for wrk")]
struct Args {
    /// Which runtime serves.
    #[arg(long, value_enum, default_value = "volt")]
    runtime: Rt,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Volt only: record scheduler events into a ring of this many slots per worker.
    #[arg(long, value_name = "N")]
    event_ring: Option<usize>,
    /// Volt only: start the console server (see --console-bind).
    #[arg(long)]
    console: bool,
    /// Volt only: where the console server listens.
    #[arg(long, default_value = "127.0.0.1:6670")]
    console_bind: String,
    /// Volt only: turn off `volt::hyper::serve`'s header-read timeout (on by default, 30 s;
    /// `axum::serve` on Tokio has none), to see what the timer costs per request.
    #[arg(long)]
    no_header_timeout: bool,
    /// Volt only: no stall monitor (`Builder::stall_threshold(None)`), to see what its
    /// sampling thread costs.
    #[arg(long)]
    no_stall_monitor: bool,
    /// Volt only: the stall threshold in milliseconds (the monitor samples every half).
    #[arg(long, value_name = "MS")]
    stall_threshold_ms: Option<u64>,
    /// Serve a minimal hand-written HTTP/1.1 responder instead of axum.
    #[arg(long)]
    raw: bool,
}

const BODY: &str = "Hello, world!";

fn router() -> Router {
    Router::new().route("/", get(|| async { BODY }))
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    if args.runtime == Rt::Tokio
        && (args.event_ring.is_some()
            || args.console
            || args.no_header_timeout
            || args.no_stall_monitor
            || args.stall_threshold_ms.is_some())
    {
        eprintln!("--event-ring, --console, --no-header-timeout and --no-stall-monitor are Volt options");
        std::process::exit(2);
    }
    match args.runtime {
        Rt::Volt => run_volt(&args),
        Rt::Tokio => run_tokio(&args),
    }
}

fn run_volt(args: &Args) -> std::io::Result<()> {
    let mut b = volt::runtime::Builder::new();
    b.worker_threads(args.workers);
    if args.no_stall_monitor {
        b.stall_threshold(None);
    } else if let Some(ms) = args.stall_threshold_ms {
        b.stall_threshold(Some(std::time::Duration::from_millis(ms)));
    }
    if let Some(n) = args.event_ring {
        b.event_ring(n);
    }
    if args.console {
        b.enable_console().console_bind(&args.console_bind);
    }
    let rt = b.build()?;
    if let Some(a) = rt.console_addr() {
        println!("console on {a}");
    }
    rt.block_on(async {
        let listener = volt::net::TcpListener::bind(args.addr).await?;
        println!("listening on {}", listener.local_addr()?);
        println!("I/O driver: {:?}", volt::runtime::Handle::current().io_driver());
        if args.raw {
            loop {
                let (stream, _) = listener.accept().await?;
                volt::spawn(raw::serve_volt(stream));
            }
        } else {
            let serve = volt::hyper::serve(listener, router());
            if args.no_header_timeout {
                serve.header_read_timeout(None).await
            } else {
                serve.await
            }
        }
    })
}

fn run_tokio(args: &Args) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.workers).enable_all().build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr).await?;
        println!("listening on {}", listener.local_addr()?);
        if args.raw {
            loop {
                let (stream, _) = listener.accept().await?;
                tokio::spawn(raw::serve_tokio(stream));
            }
        } else {
            axum::serve(listener, router()).await
        }
    })
}

/// A keep-alive HTTP/1.1 responder: reads until a blank line ends each request (no bodies),
/// answers each with a fixed response. Pipelined requests get one answer each.
mod raw {
    const RESPONSE: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 13\r\n\r\nHello, world!";

    /// How many complete requests `buf[..len]` holds, and where the last one ends.
    fn complete_requests(buf: &[u8]) -> (usize, usize) {
        let (mut n, mut end) = (0, 0);
        let mut i = 0;
        while i + 4 <= buf.len() {
            if &buf[i..i + 4] == b"\r\n\r\n" {
                n += 1;
                end = i + 4;
                i += 4;
            } else {
                i += 1;
            }
        }
        (n, end)
    }

    /// The loop, written once for both runtimes' streams (the caller imports the read
    /// and write extension traits).
    macro_rules! serve_loop {
        ($stream:ident) => {{
            let mut buf = vec![0u8; 4096];
            let mut len = 0;
            let mut out = Vec::with_capacity(RESPONSE.len() * 4);
            loop {
                if len == buf.len() {
                    return;
                }
                let n = match $stream.read(&mut buf[len..]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                len += n;
                let (k, end) = complete_requests(&buf[..len]);
                if k == 0 {
                    continue;
                }
                buf.copy_within(end..len, 0);
                len -= end;
                out.clear();
                for _ in 0..k {
                    out.extend_from_slice(RESPONSE);
                }
                if $stream.write_all(&out).await.is_err() {
                    return;
                }
            }
        }};
    }

    pub async fn serve_volt(mut stream: volt::net::TcpStream) {
        use futures::{AsyncReadExt, AsyncWriteExt};
        serve_loop!(stream)
    }

    pub async fn serve_tokio(mut stream: tokio::net::TcpStream) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        serve_loop!(stream)
    }
}
