//! A TCP echo server, and a client that drives it.
//!
//! ```text
//! cargo run --release -p volt-examples --example echo                 # both, in one process
//! cargo run --release -p volt-examples --example echo -- server 127.0.0.1:7000
//! cargo run --release -p volt-examples --example echo -- client 127.0.0.1:7000
//! ```
//!
//! The client opens 50 connections and makes 1,000 round trips of 64 bytes on each, then
//! prints the rate and what the scheduler and the reactor did.

use futures::{AsyncReadExt, AsyncWriteExt};
use std::net::SocketAddr;
use std::time::Instant;
use volt::net::{TcpListener, TcpStream};

const CONNECTIONS: usize = 50;
const ROUND_TRIPS: usize = 1_000;
const MESSAGE: usize = 64;

/// Accept forever; echo each connection on its own task.
async fn serve(listener: TcpListener) {
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors and the like: the same error comes back until
                // a connection closes, so wait a little rather than spin.
                eprintln!("accept failed: {e}");
                volt::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        volt::spawn(async move {
            let mut buf = [0u8; 4096];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) => return,
                    Ok(n) => {
                        if let Err(e) = stream.write_all(&buf[..n]).await {
                            eprintln!("{peer}: write failed: {e}");
                            return;
                        }
                    }
                    Err(e) => {
                        eprintln!("{peer}: read failed: {e}");
                        return;
                    }
                }
            }
        });
    }
}

/// Drive the server at `addr`; returns the number of round trips made.
async fn drive(addr: SocketAddr) -> std::io::Result<usize> {
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            volt::spawn(async move {
                let mut s = TcpStream::connect(addr).await?;
                s.set_nodelay(true)?;
                let out = [7u8; MESSAGE];
                let mut back = [0u8; MESSAGE];
                for _ in 0..ROUND_TRIPS {
                    s.write_all(&out).await?;
                    s.read_exact(&mut back).await?;
                    assert_eq!(back, out);
                }
                Ok::<_, std::io::Error>(ROUND_TRIPS)
            })
        })
        .collect();
    let mut total = 0;
    for c in clients {
        total += c.await.map_err(std::io::Error::from)??;
    }
    Ok(total)
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = volt::Runtime::new()?;
    match args.first().map(String::as_str) {
        Some("server") => {
            let addr = args.get(1).map(String::as_str).unwrap_or("127.0.0.1:7000");
            rt.block_on(async {
                let listener = TcpListener::bind(addr).await?;
                println!("echo server on {}", listener.local_addr()?);
                serve(listener).await;
                Ok(())
            })
        }
        Some("client") => {
            let addr: SocketAddr = args
                .get(1)
                .map(String::as_str)
                .unwrap_or("127.0.0.1:7000")
                .parse()
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("bad address: {e}")))?;
            run_client(&rt, addr)
        }
        None => {
            let addr = rt.block_on(async {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                volt::spawn(serve(listener));
                Ok::<_, std::io::Error>(addr)
            })?;
            println!("echo server on {addr}");
            run_client(&rt, addr)
        }
        Some(other) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("unknown mode {other:?}: use `server [ADDR]`, `client [ADDR]`, or nothing"),
        )),
    }
}

fn run_client(rt: &volt::Runtime, addr: SocketAddr) -> std::io::Result<()> {
    let start = Instant::now();
    let n = rt.block_on(drive(addr))?;
    let took = start.elapsed();
    let s = rt.handle().telemetry().snapshot();
    println!(
        "{n} round trips of {MESSAGE} bytes over {CONNECTIONS} connections in {took:?} ({:.0} per second)",
        n as f64 / took.as_secs_f64()
    );
    println!(
        "reactor events {} | tasks spawned {} | polls {} | steals {} | parks {}",
        s.io_events,
        s.tasks_spawned,
        s.workers.iter().map(|w| w.tasks_polled).sum::<u64>(),
        s.workers.iter().map(|w| w.steal_operations).sum::<u64>(),
        s.workers.iter().map(|w| w.times_parked).sum::<u64>()
    );
    Ok(())
}
