//! Where the time of `spawn_many_remote_busy` (in `vs_tokio`) goes, on Volt alone, by the
//! runtime's own counters: four tasks that yield and spin 10 µs keep both workers busy,
//! and a thread outside spawns 10,000 empty tasks, then awaits them all in order, 30
//! times. Prints medians: how long the spawn loop took, how long after it until every task
//! had run, the global batch fetches, the polls (10,000 are the spawned tasks; the rest are
//! the spinners' 10 µs turns), and the global-queue interval the workers used.
//!
//! `cargo bench -p volt --bench busy_remote`

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn stall() {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(10) {
        std::hint::spin_loop();
    }
}

fn main() {
    let rt = volt::runtime::Builder::new().worker_threads(2).build().unwrap();
    let flag = Arc::new(AtomicBool::new(true));
    for _ in 0..4 {
        let flag = flag.clone();
        rt.spawn(async move {
            while flag.load(Relaxed) {
                volt::task::yield_now().await;
                stall();
            }
        });
    }
    std::thread::sleep(Duration::from_millis(50));
    let (mut spawn_t, mut drain_t, mut total_t, mut fetches, mut polled) = (vec![], vec![], vec![], vec![], vec![]);
    let mut intervals = vec![];
    for _ in 0..30 {
        let s0 = rt.handle().telemetry().snapshot();
        let t0 = Instant::now();
        let handles: Vec<_> = (0..10_000).map(|_| rt.spawn(async {})).collect();
        let t1 = Instant::now();
        let s1 = rt.handle().telemetry().snapshot();
        intervals.extend(s1.workers.iter().map(|w| w.global_queue_interval));
        rt.block_on(async move {
            for h in handles {
                h.await.unwrap();
            }
        });
        let t2 = Instant::now();
        let s2 = rt.handle().telemetry().snapshot();
        spawn_t.push(t1 - t0);
        drain_t.push(t2 - t1);
        total_t.push(t2 - t0);
        fetches.push(
            s2.workers.iter().map(|w| w.global_batch_fetches).sum::<u64>()
                - s0.workers.iter().map(|w| w.global_batch_fetches).sum::<u64>(),
        );
        polled.push(
            s2.workers.iter().map(|w| w.tasks_polled).sum::<u64>()
                - s0.workers.iter().map(|w| w.tasks_polled).sum::<u64>(),
        );
    }
    flag.store(false, Relaxed);
    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let medu = |v: &mut Vec<u64>| {
        v.sort();
        v[v.len() / 2]
    };
    intervals.sort();
    println!(
        "spawn loop {:?} | after the loop until all done {:?} | total {:?} | global batch fetches {} | polls {} (10,000 spawned + yielders) | interval at the loop's end: median {}",
        med(&mut spawn_t), med(&mut drain_t), med(&mut total_t), medu(&mut fetches), medu(&mut polled), intervals[intervals.len() / 2]
    );
}
