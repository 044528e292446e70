//! The flight recorder: run a small workload with the event ring on, then print what the
//! scheduler did as a timeline, then the same through `tracing`.
//!
//! ```text
//! cargo run --release -p volt-examples --example trace
//! RUST_LOG=volt::scheduler=trace cargo run --release -p volt-examples --example trace -- --tracing
//! ```

use std::time::Duration;
use volt::telemetry::EventKind;

fn workload(rt: &volt::Runtime) {
    rt.block_on(async {
        let parent = volt::task::Builder::new().name("parent").spawn(async {
            // A small fan-out: children that yield and sleep, so the timeline shows LIFO
            // hits, requeues, a steal or two, timers and parking.
            let children: Vec<_> = (0..24u64)
                .map(|i| {
                    volt::task::Builder::new().name(format!("child-{i}")).spawn(async move {
                        volt::task::yield_now().await;
                        std::thread::sleep(Duration::from_micros(50 * (i + 1)));
                        volt::time::sleep(Duration::from_millis(1)).await;
                        i
                    })
                })
                .collect();
            let mut sum = 0;
            for c in children {
                sum += c.await.unwrap();
            }
            sum
        });
        assert_eq!(parent.await.unwrap(), (0..24).sum::<u64>());
    });
}

fn main() -> std::io::Result<()> {
    if std::env::args().any(|a| a == "--tracing") {
        // The `tracing` feature: scheduler events and task spans, selected by RUST_LOG.
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("volt::scheduler=trace,volt::task=trace")),
            )
            .with_thread_names(true)
            .init();
        let rt = volt::runtime::Builder::new().worker_threads(2).build()?;
        workload(&rt);
        return Ok(());
    }

    let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(4096).build()?;
    let mut events = rt.handle().telemetry().events();
    workload(&rt);
    let timeline = events.read();
    println!("{} events ({} missed), first 300:\n", timeline.len(), events.dropped());
    for e in timeline.iter().take(300) {
        println!("{e}");
    }
    let count = |k: EventKind| timeline.iter().filter(|e| e.kind == k).count();
    println!(
        "\nspawns {} | polls {} | steals {} | parks {} | completions {}",
        count(EventKind::Spawn),
        count(EventKind::PollStart),
        count(EventKind::Steal),
        count(EventKind::Park),
        count(EventKind::Complete)
    );
    let s = rt.handle().telemetry().snapshot();
    if let Some(p99) = s.workers[0].poll_time_histogram.quantile_upper_bound(0.99) {
        println!("worker 0 poll time p99 below {} µs", p99 / 1000);
    }
    println!("\nTry `-- --tracing` for the same run through tracing-subscriber (RUST_LOG selects targets).");
    Ok(())
}
