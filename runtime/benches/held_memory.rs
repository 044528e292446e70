//! Memory a runtime holds per pending task and per armed timer: Volt (event ring off and
//! on) against Tokio, each measurement in its own child process.
//!
//! `cargo bench -p volt --bench held_memory` runs, alternating the runtimes, children
//! that each start a 2-worker runtime and, from a task on a worker:
//!
//! - **pending**: spawn 100,000 tasks that each wait on a future which answers `Pending`
//!   and drops its waker, so nothing will ever wake them; the heap grows by what the
//!   runtime keeps per such task.
//! - **timers**: arm 500,000 sleeps of an hour (each boxed and pinned, polled once by the
//!   task), then drop every other one. Reported: the heap per armed timer at the peak, and
//!   what share of that peak the runtime still holds once half of them are gone.
//!
//! Heap means the bytes glibc's `malloc` has handed out and not had back (`mallinfo2`),
//! read before and after with the runtime alive: what the program and the runtime hold,
//! not free memory the allocator keeps. The figures are counts, not timings.
//!
//! `VOLT_MEM_TASKS` and `VOLT_MEM_TIMERS` set the sizes, `VOLT_BENCH_SAMPLES` the
//! children per runtime and workload (default 3).

use std::future::Future;
use std::pin::Pin;
use std::process::Command;
use std::task::{Context, Poll};
use std::time::Duration;

const WORKERS: usize = 2;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Bytes `malloc` has handed out and not had back.
fn heap() -> i64 {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let mi = unsafe { libc::mallinfo2() };
    (mi.uordblks + mi.hblkhd) as i64
}

/// Pending for good, keeping no waker.
struct Forever;

impl Future for Forever {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

/// What a child measures, written once for both runtimes.
macro_rules! workload {
    ($spawn:path, $yield_now:path, $sleep:path, $what:expr, $n:expr) => {
        async move {
            match $what {
                "pending" => {
                    let before = heap();
                    for _ in 0..$n {
                        drop($spawn(Forever));
                    }
                    // Let every task be polled once (and so reach its wait).
                    for _ in 0..100 {
                        $yield_now().await;
                    }
                    $sleep(Duration::from_millis(1)).await;
                    for _ in 0..100 {
                        $yield_now().await;
                    }
                    let after = heap();
                    format!("{}", (after - before) as f64 / $n as f64)
                }
                "timers" => {
                    let before = heap();
                    let mut sleeps: Vec<Option<Pin<Box<_>>>> = Vec::with_capacity($n);
                    let vec_bytes = heap() - before;
                    for _ in 0..$n {
                        sleeps.push(Some(Box::pin($sleep(Duration::from_secs(3600)))));
                    }
                    // Arm them: one poll each, with this task's waker.
                    std::future::poll_fn(|cx| {
                        for s in sleeps.iter_mut().flatten() {
                            assert!(s.as_mut().poll(cx).is_pending());
                        }
                        Poll::Ready(())
                    })
                    .await;
                    let peak = heap() - before - vec_bytes;
                    for s in sleeps.iter_mut().step_by(2) {
                        *s = None;
                    }
                    $yield_now().await;
                    let half = heap() - before - vec_bytes;
                    let left = sleeps.iter().flatten().count();
                    assert_eq!(left, $n / 2);
                    format!("{} {}", peak as f64 / $n as f64, half as f64 / peak as f64)
                }
                other => panic!("unknown workload {other:?}"),
            }
        }
    };
}

fn child(which: &str, what: &str, n: usize) {
    let line = match which {
        "volt" | "volt-ring" => {
            let mut b = volt::runtime::Builder::new();
            b.worker_threads(WORKERS);
            if which == "volt-ring" {
                b.event_ring(1024);
            }
            let rt = b.build().expect("volt runtime");
            let what = what.to_string();
            rt.spawn(
                async move { workload!(volt::spawn, volt::task::yield_now, volt::time::sleep, what.as_str(), n).await },
            )
            .join()
            .unwrap()
        }
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all()
                .build()
                .expect("tokio runtime");
            let what = what.to_string();
            let h = rt.spawn(async move {
                workload!(tokio::spawn, tokio::task::yield_now, tokio::time::sleep, what.as_str(), n).await
            });
            rt.block_on(h).unwrap()
        }
        other => panic!("unknown runtime {other:?}"),
    };
    println!("{line}");
    // The runtimes are left for the process's exit: tasks pending for good would make a
    // shutdown cancel 100,000 of them, which is not what is measured.
    std::process::exit(0);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--child") {
        child(&args[pos + 1], &args[pos + 2], args[pos + 3].parse().expect("a count"));
        return;
    }
    // `cargo test --benches` runs this too: keep that quick.
    let quick = args.iter().any(|a| a == "--test") || std::env::var_os("VOLT_BENCH_QUICK").is_some();
    let (tasks, timers, samples) = if quick {
        (2_000, 2_000, 1)
    } else {
        (env_or("VOLT_MEM_TASKS", 100_000), env_or("VOLT_MEM_TIMERS", 500_000), env_or("VOLT_BENCH_SAMPLES", 3))
    };
    let exe = std::env::current_exe().expect("own path");
    let runtimes = ["volt", "volt-ring", "tokio"];
    let run = |which: &str, what: &str, n: usize| -> Vec<f64> {
        let out = Command::new(&exe).args(["--child", which, what, &n.to_string()]).output().expect("run the child");
        assert!(out.status.success(), "{which} {what} child failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|v| v.parse().expect("the child's figures"))
            .collect()
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut pending: Vec<Vec<f64>> = vec![vec![]; runtimes.len()];
    let mut per_timer: Vec<Vec<f64>> = vec![vec![]; runtimes.len()];
    let mut held: Vec<Vec<f64>> = vec![vec![]; runtimes.len()];
    for _ in 0..samples {
        for (i, which) in runtimes.iter().enumerate() {
            pending[i].push(run(which, "pending", tasks)[0]);
            let t = run(which, "timers", timers);
            per_timer[i].push(t[0]);
            held[i].push(t[1]);
        }
    }
    println!("heap held, {WORKERS} workers, median of {samples} child processes each");
    println!("| runtime | per pending task ({tasks}) | per armed timer ({timers}) | held after dropping half |");
    println!("|---|---:|---:|---:|");
    for (i, which) in runtimes.iter().enumerate() {
        println!(
            "| {which} | {:.0} B | {:.0} B | {:.0}% |",
            median(pending[i].clone()),
            median(per_timer[i].clone()),
            100.0 * median(held[i].clone())
        );
    }
}
