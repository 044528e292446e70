//! The workloads both benchmarks run: Tokio's `rt_multi_threaded` set plus serial
//! spawn-await, a fork-join tree, timer churn and timers that fire, written once as a macro
//! over the runtime's `spawn`, `yield_now` and `sleep`; and a TCP echo on Volt.
#![allow(dead_code, unused_imports)]

pub use std::future::Future;
pub use std::pin::Pin;
pub use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
pub use std::sync::{mpsc, Arc};
pub use std::time::{Duration, Instant};

pub const WORKERS: usize = 2;
pub const NUM_SPAWN: usize = 10_000;
pub const NUM_YIELD: usize = 1_000;
pub const YIELD_TASKS: usize = 200;
pub const PING_PONGS: usize = 1_000;
pub const CHAIN: usize = 1_000;
pub const SERIAL: usize = 1_000;
pub const TREE_DEPTH: u32 = 12;
pub const STALL: Duration = Duration::from_micros(10);
pub const ECHO_CONNS: usize = 50;
pub const ECHO_TRIPS: usize = 1_000;
pub const ECHO_MSG: usize = 64;
pub const CHURN: usize = 100_000;
pub const FIRE: u64 = 10_000;

pub fn stall() {
    let t = Instant::now();
    while t.elapsed() < STALL {
        std::hint::spin_loop();
    }
}

macro_rules! suite {
    ($m:ident, $Rt:ty, $spawn:path, $yield_now:path, $sleep:path) => {
        mod $m {
            use super::*;

            pub fn spawn_many_local(rt: &$Rt) {
                let (tx, rx) = mpsc::sync_channel(1);
                let rem = Arc::new(AtomicUsize::new(NUM_SPAWN));
                rt.block_on(async move {
                    $spawn(async move {
                        for _ in 0..NUM_SPAWN {
                            let (tx, rem) = (tx.clone(), rem.clone());
                            $spawn(async move {
                                if rem.fetch_sub(1, Relaxed) == 1 {
                                    tx.send(()).unwrap();
                                }
                            });
                        }
                    });
                    rx.recv().unwrap();
                });
            }

            pub fn spawn_many_remote(rt: &$Rt) {
                let handles: Vec<_> = (0..NUM_SPAWN).map(|_| rt.spawn(async {})).collect();
                rt.block_on(async move {
                    for h in handles {
                        h.await.unwrap();
                    }
                });
            }

            /// Keeps every worker busy with yielding, stalling tasks; returns the stop flag.
            /// (The overhead bench keeps its own, which it waits for.)
            #[allow(dead_code)]
            pub fn make_busy(rt: &$Rt) -> Arc<AtomicBool> {
                let flag = Arc::new(AtomicBool::new(true));
                for _ in 0..2 * WORKERS {
                    let flag = flag.clone();
                    rt.spawn(async move {
                        while flag.load(Relaxed) {
                            $yield_now().await;
                            stall();
                        }
                    });
                }
                flag
            }

            pub fn yield_many(rt: &$Rt) {
                let (tx, rx) = mpsc::sync_channel(YIELD_TASKS);
                for _ in 0..YIELD_TASKS {
                    let tx = tx.clone();
                    rt.spawn(async move {
                        for _ in 0..NUM_YIELD {
                            $yield_now().await;
                        }
                        tx.send(()).unwrap();
                    });
                }
                for _ in 0..YIELD_TASKS {
                    rx.recv().unwrap();
                }
            }

            pub fn ping_pong(rt: &$Rt) {
                let (done_tx, done_rx) = mpsc::sync_channel(1);
                let rem = Arc::new(AtomicUsize::new(PING_PONGS));
                rt.block_on(async {
                    for _ in 0..PING_PONGS {
                        let (done_tx, rem) = (done_tx.clone(), rem.clone());
                        rt.spawn(async move {
                            let (tx1, rx1) = futures::channel::oneshot::channel::<()>();
                            let (tx2, rx2) = futures::channel::oneshot::channel::<()>();
                            $spawn(async move {
                                rx1.await.unwrap();
                                tx2.send(()).unwrap();
                            });
                            tx1.send(()).unwrap();
                            rx2.await.unwrap();
                            if rem.fetch_sub(1, Relaxed) == 1 {
                                done_tx.send(()).unwrap();
                            }
                        });
                    }
                    done_rx.recv().unwrap();
                });
            }

            fn chain(done: mpsc::SyncSender<()>, n: usize) {
                if n == 0 {
                    done.send(()).unwrap();
                } else {
                    $spawn(async move { chain(done, n - 1) });
                }
            }

            pub fn chained_spawn(rt: &$Rt) {
                rt.block_on(async {
                    let (tx, rx) = mpsc::sync_channel(1);
                    $spawn(async move { chain(tx, CHAIN) });
                    rx.recv().unwrap();
                });
            }

            pub fn serial_spawn_await(rt: &$Rt) {
                let n = rt.block_on(async {
                    $spawn(async {
                        let mut n = 0usize;
                        for _ in 0..SERIAL {
                            n += $spawn(async { 1usize }).await.unwrap();
                        }
                        n
                    })
                    .await
                    .unwrap()
                });
                assert_eq!(n, SERIAL);
            }

            fn tree(depth: u32) -> Pin<Box<dyn Future<Output = u64> + Send>> {
                Box::pin(async move {
                    if depth == 0 {
                        return 1;
                    }
                    let l = $spawn(tree(depth - 1));
                    let r = $spawn(tree(depth - 1));
                    l.await.unwrap() + r.await.unwrap() + 1
                })
            }

            pub fn timer_churn(rt: &$Rt) {
                rt.block_on(async {
                    $spawn(async {
                        for _ in 0..CHURN {
                            // One poll arms the timer; dropping it disarms it.
                            let s = $sleep(Duration::from_secs(10));
                            assert!(futures::future::poll_immediate(s).await.is_none());
                        }
                    })
                    .await
                    .unwrap();
                });
            }

            pub fn timers_fire(rt: &$Rt) {
                rt.block_on(async {
                    let hs: Vec<_> = (0..FIRE)
                        .map(|i| $spawn(async move { $sleep(Duration::from_millis(1 + i % 10)).await }))
                        .collect();
                    for h in hs {
                        h.await.unwrap();
                    }
                });
            }

            pub fn fork_join(rt: &$Rt) {
                let n = rt.block_on(async { $spawn(tree(TREE_DEPTH)).await.unwrap() });
                assert_eq!(n, (1 << (TREE_DEPTH + 1)) - 1);
            }
        }
    };
}

pub(crate) use suite;

/// TCP echo over loopback, written once for both runtimes: each brings its own runtime,
/// socket types, `spawn` and read/write extension traits (which share method names).
macro_rules! echo {
    ($m:ident, $Rt:ty, $net:path, $spawn:path, $ext:path) => {
        /// TCP echo on one runtime.
        pub mod $m {
            use super::*;
            use ext::{AsyncReadExt, AsyncWriteExt};
            use $ext as ext;
            use $net as net;

            /// Start the echo server; returns its address.
            pub fn start(rt: &$Rt) -> std::net::SocketAddr {
                rt.block_on(async {
                    let l = net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                    let addr = l.local_addr().unwrap();
                    $spawn(async move {
                        while let Ok((mut s, _)) = l.accept().await {
                            $spawn(async move {
                                let mut buf = [0u8; ECHO_MSG];
                                while s.read_exact(&mut buf).await.is_ok() {
                                    if s.write_all(&buf).await.is_err() {
                                        return;
                                    }
                                }
                            });
                        }
                    });
                    addr
                })
            }

            /// `ECHO_CONNS` connections of `ECHO_TRIPS` round trips each.
            pub fn run(rt: &$Rt, addr: std::net::SocketAddr) {
                rt.block_on(async move {
                    let hs: Vec<_> = (0..ECHO_CONNS)
                        .map(|_| {
                            $spawn(async move {
                                let mut s = net::TcpStream::connect(addr).await.unwrap();
                                s.set_nodelay(true).unwrap();
                                let (out, mut back) = ([1u8; ECHO_MSG], [0u8; ECHO_MSG]);
                                for _ in 0..ECHO_TRIPS {
                                    s.write_all(&out).await.unwrap();
                                    s.read_exact(&mut back).await.unwrap();
                                }
                            })
                        })
                        .collect();
                    for h in hs {
                        h.await.unwrap();
                    }
                });
            }
        }
    };
}
pub(crate) use echo;

// TCP echo on Volt (futures-io traits).
echo!(echo_volt, volt::Runtime, volt::net, volt::spawn, futures);

pub fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The ratio a/b as the median of the per-pair ratios (`a[i]` and `b[i]` were taken back
/// to back). This machine has slow spells that slow everything for a while; a spell
/// covering half the samples makes each side's median jump between modes (one run gave
/// 2.93 for a workload that is 1.15 the rest of the time), while a pair sits in one mode.
pub fn paired_ratio(a: &[Duration], b: &[Duration]) -> f64 {
    let mut r: Vec<f64> = a.iter().zip(b).map(|(a, b)| a.as_secs_f64() / b.as_secs_f64().max(1e-12)).collect();
    r.sort_by(f64::total_cmp);
    r[r.len() / 2]
}

pub fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

/// Heavier workloads (hundreds of ms each) take a quarter of the samples (at least 5).
pub fn samples_for(name: &str, samples: usize) -> usize {
    if matches!(name, "tcp_echo_50x1000" | "timers_fire_10k") {
        (samples / 4).max(5).min(samples)
    } else {
        samples
    }
}
