//! A runtime with N live sleeping tasks and the console on, for `benches/million.sh`.
//!
//! `sleepers N ADDR`: spawns N tasks that wait forever (a thousand of them named), prints
//! `ready` once all were polled, then runs until stdin closes or it is killed.

use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).expect("usage: sleepers N ADDR");
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:6670".into());
    let rt =
        volt::runtime::Builder::new().worker_threads(2).event_ring(4096).console_bind(&addr).build().expect("runtime");
    let polled =
        |rt: &volt::Runtime| rt.handle().telemetry().snapshot().workers.iter().map(|w| w.tasks_polled).sum::<u64>();
    for i in 0..n {
        let fut = std::future::pending::<()>();
        if i % 1000 == 0 {
            volt::task::Builder::new().name(format!("sleeper-{i}")).spawn_on(fut, rt.handle());
        } else {
            rt.spawn(fut);
        }
    }
    while polled(&rt) < n as u64 {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("ready {n} {}", rt.console_addr().unwrap());
    // Until stdin closes.
    let _ = std::io::Read::read(&mut std::io::stdin(), &mut [0u8; 1]);
}
