//! The exporter's own cost: CPU time of its thread (sampling, rendering, serving) over a
//! run, for a 16-worker runtime with a 1 s interval, scraped once a second.
//!
//! ```sh
//! cargo run --release -p volt-exporter --example sampler_cost             # 20 s
//! cargo run --release -p volt-exporter --example sampler_cost -- 60       # 60 s
//! ```
//!
//! Reads the thread's CPU nanoseconds from `/proc/self/task/TID/schedstat` (Linux).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// CPU nanoseconds of the threads named `name`.
fn thread_cpu_ns(name: &str) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc/self/task").expect("Linux /proc") {
        let dir = entry.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let s = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
            total += s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total
}

fn scrape(addr: std::net::SocketAddr) -> usize {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body.len()
}

fn main() {
    let secs: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    for ring in [false, true] {
        let mut b = volt::runtime::Builder::new();
        b.worker_threads(16);
        if ring {
            b.event_ring(4096);
        }
        let rt = b.build().unwrap();
        let exporter = volt_exporter::Builder::new().listen("127.0.0.1:0").unwrap().install(rt.handle()).unwrap();
        let addr = exporter.local_addr();
        // Some steady work so the counters move.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        rt.spawn(async move {
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..200 {
                    volt::spawn(async { volt::task::yield_now().await });
                }
                volt::time::sleep(Duration::from_millis(10)).await;
            }
        });
        std::thread::sleep(Duration::from_millis(1500));
        let cpu0 = thread_cpu_ns("volt-exporter");
        let t0 = Instant::now();
        let mut bytes = 0;
        while t0.elapsed() < Duration::from_secs(secs) {
            std::thread::sleep(Duration::from_secs(1));
            bytes = scrape(addr);
        }
        let cpu = thread_cpu_ns("volt-exporter") - cpu0;
        let wall = t0.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        println!(
            "16 workers, event ring {}: exporter thread used {:.2} ms of CPU in {:.1} s = {:.3}% of one core \
             (1 s interval, one scrape per second, {} bytes per scrape)",
            if ring { "on " } else { "off" },
            cpu as f64 / 1e6,
            wall.as_secs_f64(),
            100.0 * cpu as f64 / wall.as_nanos() as f64,
            bytes
        );
        drop(exporter);
        drop(rt);
    }
}
