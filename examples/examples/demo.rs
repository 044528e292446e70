//! A long-lived mixed workload with the console on, to watch with `volt-console`.
//!
//! ```sh
//! cargo run --release -p volt-examples --example demo              # until Ctrl-C
//! cargo run --release -p volt-examples --example demo -- --seconds 30
//! cargo run --release -p volt-console                              # in a second terminal
//! ```
//!
//! Bursts of spawns, fan-out/fan-in, timers, TCP echo traffic on loopback, blocking calls
//! and, every 5 s, a slow task that holds a worker for 40 ms. The console listens on
//! `VOLT_CONSOLE_BIND` (default `127.0.0.1:6670`); the runtime has the default worker
//! count and records events (the task list needs them). Prometheus metrics are served on
//! `VOLT_METRICS_BIND` (default `127.0.0.1:9670`).

use std::time::{Duration, Instant};

fn main() {
    let mut seconds = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => match args.next().and_then(|s| s.parse::<u64>().ok()) {
                Some(s) => seconds = Some(s),
                None => {
                    eprintln!("demo: --seconds takes a whole number");
                    std::process::exit(2);
                }
            },
            other => {
                eprintln!("demo: unknown argument {other:?} (usage: demo [--seconds N])");
                std::process::exit(2);
            }
        }
    }
    let rt = match volt_demo::runtime(None) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("demo: {e}");
            std::process::exit(1);
        }
    };
    let addr = rt.console_addr().expect("console on");
    println!("volt demo: {} workers; console on {addr}", rt.handle().num_workers());
    println!("watch it with: cargo run --release -p volt-console -- {addr}");
    let metrics_bind = std::env::var("VOLT_METRICS_BIND").ok().filter(|s| !s.is_empty());
    let metrics_bind = metrics_bind.as_deref().unwrap_or(volt_exporter::DEFAULT_LISTEN);
    let exporter = match volt_exporter::install(rt.handle(), metrics_bind) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("demo: metrics: {e}");
            std::process::exit(1);
        }
    };
    println!("prometheus metrics: http://{}/metrics", exporter.local_addr());
    let workload = volt_demo::Demo::start(rt.handle());
    let start = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if seconds.is_some_and(|s| start.elapsed() >= Duration::from_secs(s)) {
            break;
        }
    }
    drop(workload);
    drop(exporter);
    let s = rt.handle().telemetry().snapshot();
    println!("demo done: {} tasks spawned, {} completed", s.tasks_spawned, s.tasks_completed);
    rt.shutdown_timeout(Duration::from_secs(2));
}
