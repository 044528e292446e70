//! Memory after bursts: Volt against Tokio, each in its own process.
//!
//! `cargo bench -p volt --bench burst_memory` runs, for each runtime, alternating, a child
//! process that starts a 2-worker runtime and, from a task on a worker, spawns bursts of
//! detached tasks (1,000,000 each by default) that each yield once and finish, waiting for
//! every burst to finish before the next. After the last burst, with the runtime still alive and idle, the child
//! reads its resident set (`VmRSS`) and its peak (`VmHWM`) from `/proc/self/status`, and
//! the bytes glibc's `malloc` has handed out and not had back (`mallinfo2`: what the
//! program and the runtime still hold, as opposed to free memory the allocator keeps).
//! These are counts, not timings: the noise between runs is the allocator's, not the
//! machine's. With `VOLT_BURST_TRIM=1` each child also prints its RSS after `malloc_trim`.
//!
//! `VOLT_BURST_TASKS` sets the tasks per burst, `VOLT_BURST_ROUNDS` the bursts (default 3),
//! `VOLT_BENCH_SAMPLES` the child processes per runtime (default 3).

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

const WORKERS: usize = 2;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// `VmRSS` and `VmHWM` in KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A yield that both runtimes' tasks can await: pending once, after waking itself.
async fn yield_once() {
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

/// Bursts of detached tasks spawned from one task; each burst is awaited (a count of the
/// finished tasks) before the next.
macro_rules! bursts {
    ($spawn:path, $yield_now:path, $tasks:expr, $rounds:expr) => {
        async move {
            for _ in 0..$rounds {
                let done = Arc::new(AtomicUsize::new(0));
                for _ in 0..$tasks {
                    let done = done.clone();
                    drop($spawn(async move {
                        yield_once().await;
                        done.fetch_add(1, Relaxed);
                    }));
                }
                while done.load(Relaxed) < $tasks {
                    $yield_now().await;
                }
            }
        }
    };
}

fn child(which: &str, tasks: usize, rounds: usize) {
    match which {
        "volt" => {
            let rt = volt::runtime::Builder::new().worker_threads(WORKERS).build().expect("volt runtime");
            rt.spawn(bursts!(volt::spawn, volt::task::yield_now, tasks, rounds)).join().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            report(which, rss_kib());
            drop(rt);
        }
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all()
                .build()
                .expect("tokio runtime");
            let burst = rt.spawn(bursts!(tokio::spawn, tokio::task::yield_now, tasks, rounds));
            rt.block_on(burst).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            report(which, rss_kib());
            drop(rt);
        }
        other => panic!("unknown runtime {other:?}"),
    }
}

fn report(which: &str, (rss, hwm): (u64, u64)) {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let mi = unsafe { libc::mallinfo2() };
    let in_use = (mi.uordblks + mi.hblkhd) / 1024;
    if std::env::var_os("VOLT_BURST_TRIM").is_some() {
        // SAFETY: asks glibc to return free memory to the system; no memory is touched.
        unsafe { libc::malloc_trim(0) };
        let (rss2, _) = rss_kib();
        eprintln!("{which}: rss {rss} KiB, malloc in use {in_use} KiB, after malloc_trim rss {rss2} KiB");
    }
    println!("{which} {rss} {hwm} {in_use}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tasks = env_or("VOLT_BURST_TASKS", 1_000_000);
    let rounds = env_or("VOLT_BURST_ROUNDS", 3);
    if let Some(pos) = args.iter().position(|a| a == "--child") {
        child(&args[pos + 1], tasks, rounds);
        return;
    }
    // `cargo test --benches` runs this too: keep that quick.
    let quick = args.iter().any(|a| a == "--test") || std::env::var_os("VOLT_BENCH_QUICK").is_some();
    let (tasks, samples) = if quick { (10_000, 1) } else { (tasks, env_or("VOLT_BENCH_SAMPLES", 3)) };
    let exe = std::env::current_exe().expect("own path");
    let mut rows: Vec<(String, u64, u64, u64)> = vec![];
    for _ in 0..samples {
        for which in ["volt", "tokio"] {
            let out = Command::new(&exe)
                .args(["--child", which])
                .env("VOLT_BURST_TASKS", tasks.to_string())
                .env("VOLT_BURST_ROUNDS", rounds.to_string())
                .output()
                .expect("run the child");
            assert!(out.status.success(), "{which} child failed: {}", String::from_utf8_lossy(&out.stderr));
            let line = String::from_utf8_lossy(&out.stdout);
            let mut f = line.split_whitespace().skip(1);
            let mut num = || f.next().and_then(|v| v.parse().ok()).expect("the child's figures");
            rows.push((which.to_string(), num(), num(), num()));
        }
    }
    let mib = |k: u64| k as f64 / 1024.0;
    println!("{rounds} bursts of {tasks} tasks spawned from a worker, {WORKERS} workers; MiB after the bursts (runtime alive)");
    println!("{:<6} {:>12} {:>12} {:>16}", "", "rss after", "peak rss", "malloc in use");
    for (name, rss, hwm, used) in &rows {
        println!("{name:<6} {:>12.1} {:>12.1} {:>16.1}", mib(*rss), mib(*hwm), mib(*used));
    }
    let median = |name: &str, pick: fn(&(String, u64, u64, u64)) -> u64| {
        let mut v: Vec<u64> = rows.iter().filter(|r| r.0 == name).map(pick).collect();
        v.sort();
        v[v.len() / 2]
    };
    let (v_rss, t_rss) = (median("volt", |r| r.1), median("tokio", |r| r.1));
    let (v_hwm, t_hwm) = (median("volt", |r| r.2), median("tokio", |r| r.2));
    let (v_used, t_used) = (median("volt", |r| r.3), median("tokio", |r| r.3));
    println!(
        "median: volt {:.1} MiB after, {:.1} peak, {:.1} in use; tokio {:.1} after, {:.1} peak, {:.1} in use; \
         ratio volt/tokio {:.2} after, {:.2} peak",
        mib(v_rss),
        mib(v_hwm),
        mib(v_used),
        mib(t_rss),
        mib(t_hwm),
        mib(t_used),
        v_rss as f64 / t_rss as f64,
        v_hwm as f64 / t_hwm as f64
    );
}
