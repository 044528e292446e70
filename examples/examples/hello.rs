//! The first thing to run: start a runtime, spawn work, and read the scheduler's telemetry.
//!
//! `cargo run --release -p volt-examples --example hello`

use std::time::Instant;

fn main() -> std::io::Result<()> {
    let rt = volt::runtime::Builder::new().worker_threads(2).build()?;
    let start = Instant::now();

    let total = rt.block_on(async {
        // A fan-out: 1,000 tasks, each yielding a few times, then summing a range.
        let handles: Vec<_> = (0..1_000u64)
            .map(|i| {
                volt::spawn(async move {
                    for _ in 0..3 {
                        volt::task::yield_now().await;
                    }
                    (0..=i).sum::<u64>()
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h.await.expect("task failed");
        }
        // A serial spawn + await chain runs mostly through the LIFO slot.
        let mut x = 0u64;
        for _ in 0..1_000 {
            x = volt::spawn(async move { x + 1 }).await.unwrap();
        }
        total + x
    });

    let elapsed = start.elapsed();
    let snap = rt.handle().telemetry().snapshot();
    println!("result {total} in {elapsed:?}\n");
    println!(
        "tasks: spawned {} completed {} alive {} | global queue {} | searching {} parked {} bitmap {:#b}",
        snap.tasks_spawned,
        snap.tasks_completed,
        snap.tasks_alive,
        snap.global_queue_depth,
        snap.num_searching,
        snap.num_parked,
        snap.parked_bitmap
    );
    println!(
        "{:>6} {:>9} {:>8} {:>7} {:>6} {:>9} {:>8} {:>9} {:>9}",
        "worker", "state", "polled", "stolen", "steals", "lifo_hits", "parks", "ewma_ns", "interval"
    );
    for w in &snap.workers {
        println!(
            "{:>6} {:>9} {:>8} {:>7} {:>6} {:>9} {:>8} {:>9} {:>9}",
            w.index,
            format!("{:?}", w.state),
            w.tasks_polled,
            w.tasks_stolen,
            w.steal_operations,
            w.lifo_hits,
            w.times_parked,
            w.ewma_task_ns,
            w.global_queue_interval
        );
    }
    Ok(())
}
