#![cfg(all(feature = "sync", feature = "time"))]
//! `volt::sync::broadcast` under concurrency, as Tokio documents it: receivers on
//! several workers read while senders overwrite a small ring. Each receiver sees the
//! values in order, each value either received or counted in exactly one `Lagged(n)`,
//! then `Closed`; every value is dropped once every receiver saw it or the ring let it
//! go. Waits are bounded by 10 s; nothing here asserts how fast anything is.

use std::sync::Arc;
use std::time::Duration;
use volt::sync::broadcast::{self, error::RecvError};

const BOUND: Duration = Duration::from_secs(10);

fn rt() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).build().unwrap()
}

/// A value that counts its drops.
#[derive(Clone)]
struct Counted {
    n: u64,
    _live: Arc<()>,
}

/// Receive until `Closed`; check the order and return (values received, values lagged).
async fn drain(rx: broadcast::Receiver<Counted>) -> (u64, u64) {
    drain_noting(rx, None).await
}

/// [`drain`], noting in `done` (when given) how many values it has received or skipped.
async fn drain_noting(
    mut rx: broadcast::Receiver<Counted>,
    done: Option<Arc<std::sync::atomic::AtomicU64>>,
) -> (u64, u64) {
    let (mut got, mut lagged) = (0u64, 0u64);
    let mut expect = 0u64;
    loop {
        match rx.recv().await {
            Ok(v) => {
                assert_eq!(v.n, expect, "values out of order, or one skipped without Lagged");
                expect += 1;
                got += 1;
            }
            Err(RecvError::Lagged(n)) => {
                assert!(n > 0, "Lagged(0)");
                expect += n;
                lagged += n;
            }
            Err(RecvError::Closed) => return (got, lagged),
        }
        if let Some(d) = &done {
            d.store(expect, std::sync::atomic::Ordering::Release);
        }
    }
}

#[test]
fn broadcast_receivers_on_two_workers_account_for_every_value() {
    const VALUES: u64 = 3_000;
    const RECEIVERS: usize = 6;
    let live = Arc::new(());
    rt().block_on(async {
        // A ring of 4: fast senders overwrite values some receivers have yet to read.
        let (tx, rx) = broadcast::channel::<Counted>(4);
        let mut rxs = vec![rx];
        for _ in 1..RECEIVERS {
            rxs.push(tx.subscribe());
        }
        let handles: Vec<_> = rxs.into_iter().map(|rx| volt::spawn(drain(rx))).collect();
        // The sender is a task of its own, so it runs on a worker beside receivers.
        let live2 = live.clone();
        let sender = volt::spawn(async move {
            for n in 0..VALUES {
                tx.send(Counted { n, _live: live2.clone() }).expect("receivers live");
                if n % 32 == 0 {
                    volt::task::yield_now().await;
                }
            }
        });
        volt::time::timeout(BOUND, sender).await.expect("sender finished").unwrap();
        for h in handles {
            let (got, lagged) = volt::time::timeout(BOUND, h).await.expect("receiver finished").unwrap();
            assert_eq!(got + lagged, VALUES, "received {got} and lagged {lagged}");
        }
    });
    assert_eq!(Arc::strong_count(&live), 1, "every value was dropped");
}

#[test]
fn broadcast_receivers_that_drop_midway_let_their_values_go() {
    const VALUES: u64 = 2_000;
    let live = Arc::new(());
    rt().block_on(async {
        let (tx, rx) = broadcast::channel::<Counted>(64);
        let keep = volt::spawn(drain(rx));
        // Receivers that read a few values and leave while the sender goes on.
        let quitters: Vec<_> = (0..4)
            .map(|k| {
                let mut rx = tx.subscribe();
                volt::spawn(async move {
                    for _ in 0..(k * 50 + 10) {
                        if let Err(RecvError::Closed) = rx.recv().await {
                            break;
                        }
                    }
                })
            })
            .collect();
        for n in 0..VALUES {
            tx.send(Counted { n, _live: live.clone() }).expect("a receiver lives");
            if n % 8 == 0 {
                volt::task::yield_now().await;
            }
        }
        // A quitter that lagged may reach the end before its count: the close ends it.
        drop(tx);
        for q in quitters {
            volt::time::timeout(BOUND, q).await.expect("quitter finished").unwrap();
        }
        let (got, lagged) = volt::time::timeout(BOUND, keep).await.expect("receiver finished").unwrap();
        assert_eq!(got + lagged, VALUES);
    });
    assert_eq!(Arc::strong_count(&live), 1, "every value was dropped");
}

#[test]
fn broadcast_bursts_that_overrun_the_ring_then_calm_account_for_every_value() {
    // Each round, a burst overruns the ring (receivers lag: the channel turns careful
    // and receivers enter the slots they read), then sends in small steps, each after
    // every receiver caught up, more than a thousand in a row that overwrite nothing
    // unread (the channel reads without entering again). The values, the lag counts and
    // the drops add up across both ways of reading and the switches between them.
    const CAP: usize = 256;
    const ROUNDS: u64 = 4;
    const BURST: u64 = 4 * CAP as u64;
    const CALM: u64 = 1_200;
    const RECEIVERS: usize = 4;
    let live = Arc::new(());
    rt().block_on(async {
        let (tx, rx) = broadcast::channel::<Counted>(CAP);
        let mut rxs = vec![rx];
        for _ in 1..RECEIVERS {
            rxs.push(tx.subscribe());
        }
        let progress: Vec<Arc<std::sync::atomic::AtomicU64>> =
            (0..RECEIVERS).map(|_| Arc::new(std::sync::atomic::AtomicU64::new(0))).collect();
        let handles: Vec<_> = rxs
            .into_iter()
            .zip(progress.iter().cloned())
            .map(|(rx, done)| volt::spawn(drain_noting(rx, Some(done))))
            .collect();
        let deadline = std::time::Instant::now() + BOUND;
        let mut n = 0u64;
        for _ in 0..ROUNDS {
            for _ in 0..BURST {
                tx.send(Counted { n, _live: live.clone() }).expect("receivers live");
                n += 1;
            }
            let mut calm = 0;
            while calm < CALM {
                // Wait for every receiver to have taken or skipped all that was sent.
                while progress.iter().any(|p| p.load(std::sync::atomic::Ordering::Acquire) < n) {
                    assert!(std::time::Instant::now() < deadline, "receivers caught up within {BOUND:?}");
                    volt::task::yield_now().await;
                }
                for _ in 0..100 {
                    tx.send(Counted { n, _live: live.clone() }).expect("receivers live");
                    n += 1;
                }
                calm += 100;
            }
        }
        drop(tx);
        let total = n;
        for h in handles {
            let (got, lagged) = volt::time::timeout(BOUND, h).await.expect("receiver finished").unwrap();
            assert_eq!(got + lagged, total, "received {got} and lagged {lagged}");
            assert!(got >= ROUNDS * CALM, "every calm value was received ({got})");
        }
    });
    assert_eq!(Arc::strong_count(&live), 1, "every value was dropped");
}
