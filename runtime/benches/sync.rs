//! Volt's `sync` against Tokio's on the same workloads, each on its own runtime (2
//! workers each), alternating in one process.
//!
//! `cargo bench -p volt --bench sync` prints a table of medians and the ratio volt/tokio
//! per workload (the median of the back-to-back pairs' ratios), and their geometric mean
//! (below 1.0: Volt is faster). `VOLT_BENCH_SAMPLES` sets the samples (default 30);
//! `VOLT_BENCH_ONLY=NAME` runs only the workloads whose names contain `NAME`;
//! `VOLT_BENCH_SPREAD=1` adds each runtime's 10th and 90th percentile sample (a workload
//! whose runs fall into two modes shows it there, not in the median).
//!
//! A third column runs Volt's workloads on a runtime with the event ring on
//! (`event_ring(1024)`): its tasks keep statistics, so the primitives they wait on are
//! tracked for the console (named waits, holders, the deadlock detector's graph), which
//! is what watching costs.
//!
//! The workloads are written once (a macro, instantiated with `volt::sync` and
//! `tokio::sync`): an uncontended `Mutex`, a `Mutex` and a `Semaphore` contended by 8
//! tasks on 2 workers, `mpsc` throughput with 1 and 8 producers, a `oneshot` round trip
//! between two tasks, and a `broadcast` fan-out to 16 receivers.
//!
//! A second table, outside the geomean, has `broadcast` with receivers that fall behind:
//! a ring of 16 that the sender overruns all the time (most receives are `Lagged`), and
//! a ring of 1,024 overrun by bursts of 2,048 sends, each followed by 2,000 sends at a
//! pace the receivers keep up with. Volt's channel reads differently while receivers lag
//! (see `sync/broadcast/slot.rs`), so these show what switching costs.

#[allow(unused_macros)] // the runtime suites are for vs_tokio and overhead
mod workloads;
use std::time::Instant;
use workloads::{fmt, median, paired_ratio, WORKERS};

macro_rules! sync_suite {
    ($name:ident, $Rt:ty, $spawn:path, $sync:path) => {
        mod $name {
            use std::sync::Arc;
            use $sync as sync;

            const TASKS: usize = 8;

            pub fn mutex_uncontended(rt: &$Rt) {
                rt.block_on(async {
                    let m = sync::Mutex::new(0u64);
                    for _ in 0..100_000 {
                        *m.lock().await += 1;
                    }
                    assert_eq!(*m.lock().await, 100_000);
                });
            }

            pub fn mutex_contended(rt: &$Rt) {
                rt.block_on(async {
                    let m = Arc::new(sync::Mutex::new(0u64));
                    let tasks: Vec<_> = (0..TASKS)
                        .map(|_| {
                            let m = Arc::clone(&m);
                            $spawn(async move {
                                for _ in 0..5_000 {
                                    *m.lock().await += 1;
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.unwrap();
                    }
                    assert_eq!(*m.lock().await, (TASKS * 5_000) as u64);
                });
            }

            pub fn semaphore_contended(rt: &$Rt) {
                rt.block_on(async {
                    let s = Arc::new(sync::Semaphore::new(2));
                    let tasks: Vec<_> = (0..TASKS)
                        .map(|_| {
                            let s = Arc::clone(&s);
                            $spawn(async move {
                                for _ in 0..5_000 {
                                    let _permit = s.acquire().await.unwrap();
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.unwrap();
                    }
                    assert_eq!(s.available_permits(), 2);
                });
            }

            fn mpsc(rt: &$Rt, producers: usize) {
                const MESSAGES: usize = 100_000;
                rt.block_on(async {
                    let (tx, mut rx) = sync::mpsc::channel::<u64>(1024);
                    for _ in 0..producers {
                        let tx = tx.clone();
                        $spawn(async move {
                            for i in 0..MESSAGES / producers {
                                tx.send(i as u64).await.unwrap();
                            }
                        });
                    }
                    drop(tx);
                    let consumer = $spawn(async move {
                        let mut n = 0;
                        while rx.recv().await.is_some() {
                            n += 1;
                        }
                        n
                    });
                    assert_eq!(consumer.await.unwrap(), MESSAGES / producers * producers);
                });
            }

            pub fn mpsc_1_producer(rt: &$Rt) {
                mpsc(rt, 1)
            }

            pub fn mpsc_8_producers(rt: &$Rt) {
                mpsc(rt, 8)
            }

            pub fn oneshot_round_trip(rt: &$Rt) {
                const ROUNDS: usize = 10_000;
                rt.block_on(async {
                    let (req_tx, mut req_rx) = sync::mpsc::unbounded_channel::<sync::oneshot::Sender<u64>>();
                    let server = $spawn(async move {
                        let mut n = 0u64;
                        while let Some(reply) = req_rx.recv().await {
                            n += 1;
                            let _ = reply.send(n);
                        }
                    });
                    let client = $spawn(async move {
                        let mut last = 0;
                        for _ in 0..ROUNDS {
                            let (tx, rx) = sync::oneshot::channel();
                            req_tx.send(tx).unwrap();
                            last = rx.await.unwrap();
                        }
                        last
                    });
                    assert_eq!(client.await.unwrap(), ROUNDS as u64);
                    server.await.unwrap();
                });
            }

            pub fn broadcast_fanout_16(rt: &$Rt) {
                const MESSAGES: usize = 5_000;
                rt.block_on(async {
                    let (tx, _) = sync::broadcast::channel::<u64>(MESSAGES);
                    let receivers: Vec<_> = (0..16)
                        .map(|_| {
                            let mut rx = tx.subscribe();
                            $spawn(async move {
                                let mut n = 0;
                                while rx.recv().await.is_ok() {
                                    n += 1;
                                }
                                n
                            })
                        })
                        .collect();
                    let sender = $spawn(async move {
                        for i in 0..MESSAGES {
                            tx.send(i as u64).unwrap();
                            if i % 64 == 0 {
                                // Let the receivers run alongside, as a real publisher would.
                                tokio_yield().await;
                            }
                        }
                    });
                    sender.await.unwrap();
                    for r in receivers {
                        assert_eq!(r.await.unwrap(), MESSAGES);
                    }
                });
            }

            /// `bursts`: see the module's docs.
            pub fn broadcast_lagging(rt: &$Rt, bursts: bool) {
                rt.block_on(async {
                    let (tx, _) = sync::broadcast::channel::<u64>(if bursts { 1024 } else { 16 });
                    let receivers: Vec<_> = (0..4)
                        .map(|_| {
                            let mut rx = tx.subscribe();
                            $spawn(async move {
                                let mut accounted = 0u64;
                                loop {
                                    match rx.recv().await {
                                        Ok(_) => accounted += 1,
                                        Err(sync::broadcast::error::RecvError::Lagged(k)) => accounted += k,
                                        Err(sync::broadcast::error::RecvError::Closed) => return accounted,
                                    }
                                }
                            })
                        })
                        .collect();
                    let mut sent = 0u64;
                    if bursts {
                        for _ in 0..10 {
                            for _ in 0..2048 {
                                tx.send(sent).unwrap();
                                sent += 1;
                            }
                            for i in 0..2000 {
                                tx.send(sent).unwrap();
                                sent += 1;
                                if i % 16 == 0 {
                                    tokio_yield().await;
                                }
                            }
                        }
                    } else {
                        for i in 0..50_000u64 {
                            tx.send(i).unwrap();
                            sent += 1;
                            if i % 256 == 0 {
                                tokio_yield().await;
                            }
                        }
                    }
                    drop(tx);
                    for r in receivers {
                        assert_eq!(r.await.unwrap(), sent, "each value received or counted in a lag");
                    }
                });
            }

            pub fn broadcast_lag_sustained(rt: &$Rt) {
                broadcast_lagging(rt, false)
            }

            pub fn broadcast_lag_bursts(rt: &$Rt) {
                broadcast_lagging(rt, true)
            }

            async fn tokio_yield() {
                // Both runtimes' yield_now would do; a runtime-neutral one keeps the
                // workloads identical.
                let mut yielded = false;
                std::future::poll_fn(|cx| {
                    if yielded {
                        return std::task::Poll::Ready(());
                    }
                    yielded = true;
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                })
                .await
            }
        }
    };
}

sync_suite!(on_volt, volt::Runtime, volt::spawn, volt::sync);
sync_suite!(on_tokio, tokio::runtime::Runtime, tokio::spawn, tokio::sync);

struct Workload {
    name: &'static str,
    volt: fn(&volt::Runtime),
    tokio: fn(&tokio::runtime::Runtime),
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test") || std::env::var_os("VOLT_BENCH_QUICK").is_some();
    let samples: usize =
        std::env::var("VOLT_BENCH_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(if quick { 2 } else { 30 });
    let volt_rt = volt::runtime::Builder::new().worker_threads(WORKERS).build().expect("volt runtime");
    let watched_rt =
        volt::runtime::Builder::new().worker_threads(WORKERS).event_ring(1024).build().expect("volt runtime");
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let workloads = [
        Workload { name: "mutex_uncontended", volt: on_volt::mutex_uncontended, tokio: on_tokio::mutex_uncontended },
        Workload { name: "mutex_contended_8", volt: on_volt::mutex_contended, tokio: on_tokio::mutex_contended },
        Workload {
            name: "semaphore_contended_8",
            volt: on_volt::semaphore_contended,
            tokio: on_tokio::semaphore_contended,
        },
        Workload { name: "mpsc_1_producer", volt: on_volt::mpsc_1_producer, tokio: on_tokio::mpsc_1_producer },
        Workload { name: "mpsc_8_producers", volt: on_volt::mpsc_8_producers, tokio: on_tokio::mpsc_8_producers },
        Workload { name: "oneshot_round_trip", volt: on_volt::oneshot_round_trip, tokio: on_tokio::oneshot_round_trip },
        Workload {
            name: "broadcast_fanout_16",
            volt: on_volt::broadcast_fanout_16,
            tokio: on_tokio::broadcast_fanout_16,
        },
    ];
    // `VOLT_BENCH_ONLY=broadcast` runs the workloads whose names contain it.
    let only = std::env::var("VOLT_BENCH_ONLY").unwrap_or_default();
    let spread = std::env::var_os("VOLT_BENCH_SPREAD").is_some();
    let workloads: Vec<_> = workloads.into_iter().filter(|w| w.name.contains(only.as_str())).collect();
    println!(
        "Volt's sync vs Tokio's, {WORKERS} workers each, {samples} samples per runtime per workload, alternating\n"
    );
    if !workloads.is_empty() {
        let geomean = table(&workloads, samples, spread, &volt_rt, &tokio_rt, &watched_rt);
        println!("| **geomean** | | | | **{:.2}** | **{:.2}** |", geomean.0, geomean.1);
    }
    let lagging = [
        Workload {
            name: "broadcast_lag_sustained",
            volt: on_volt::broadcast_lag_sustained,
            tokio: on_tokio::broadcast_lag_sustained,
        },
        Workload {
            name: "broadcast_lag_bursts",
            volt: on_volt::broadcast_lag_bursts,
            tokio: on_tokio::broadcast_lag_bursts,
        },
    ];
    let lagging: Vec<_> = lagging.into_iter().filter(|w| w.name.contains(only.as_str())).collect();
    if !lagging.is_empty() {
        println!("\nReceivers that fall behind (not in the geomean)\n");
        table(&lagging, samples, spread, &volt_rt, &tokio_rt, &watched_rt);
    }
}

/// Run each workload `samples` times per runtime, alternating, and print its row;
/// returns the geometric means of volt/tokio and watched/tokio.
fn table(
    workloads: &[Workload],
    samples: usize,
    spread: bool,
    volt_rt: &volt::Runtime,
    tokio_rt: &tokio::runtime::Runtime,
    watched_rt: &volt::Runtime,
) -> (f64, f64) {
    println!("| workload | volt median | tokio median | watched median | volt/tokio | watched/tokio |");
    println!("|---|---:|---:|---:|---:|---:|");
    let (mut log_sum, mut log_sum_watched) = (0.0, 0.0);
    for w in workloads {
        for _ in 0..2 {
            (w.volt)(volt_rt);
            (w.tokio)(tokio_rt);
            (w.volt)(watched_rt);
        }
        let (mut tv, mut tt, mut tw) =
            (Vec::with_capacity(samples), Vec::with_capacity(samples), Vec::with_capacity(samples));
        for i in 0..samples {
            let mut run_volt = || {
                let t = Instant::now();
                (w.volt)(volt_rt);
                tv.push(t.elapsed());
            };
            let mut run_tokio = || {
                let t = Instant::now();
                (w.tokio)(tokio_rt);
                tt.push(t.elapsed());
            };
            let mut run_watched = || {
                let t = Instant::now();
                (w.volt)(watched_rt);
                tw.push(t.elapsed());
            };
            // Rotate which runtime goes first, so drift hits all alike.
            match i % 3 {
                0 => {
                    run_volt();
                    run_tokio();
                    run_watched();
                }
                1 => {
                    run_tokio();
                    run_watched();
                    run_volt();
                }
                _ => {
                    run_watched();
                    run_volt();
                    run_tokio();
                }
            }
        }
        let ratio = paired_ratio(&tv, &tt);
        let watched = paired_ratio(&tw, &tt);
        log_sum += ratio.ln();
        log_sum_watched += watched.ln();
        if spread {
            let p = |v: &mut Vec<std::time::Duration>, q: usize| {
                v.sort();
                fmt(v[(v.len() * q / 10).min(v.len() - 1)])
            };
            println!(
                "| {} spread (p10-p90) | {}-{} | {}-{} | {}-{} | | |",
                w.name,
                p(&mut tv, 1),
                p(&mut tv, 9),
                p(&mut tt, 1),
                p(&mut tt, 9),
                p(&mut tw, 1),
                p(&mut tw, 9)
            );
        }
        println!(
            "| {} | {} | {} | {} | {:.2} | {:.2} |",
            w.name,
            fmt(median(&mut tv)),
            fmt(median(&mut tt)),
            fmt(median(&mut tw)),
            ratio,
            watched
        );
    }
    let n = workloads.len() as f64;
    ((log_sum / n).exp(), (log_sum_watched / n).exp())
}
