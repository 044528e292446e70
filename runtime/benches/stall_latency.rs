//! How soon a stall is seen, and how soon its stack is taken: `cargo bench -p volt --bench
//! stall_latency`.
//!
//! A runtime of two workers with the default stall threshold (10 ms) runs polls that hold
//! their worker for 50 ms, one at a time: half of them computing, half blocked in a
//! system call (`thread::sleep`). For each poll it measures
//! * **seen**: from the poll's start (an `Instant` the poll takes first thing) to the
//!   first `Telemetry::snapshot()` whose `stalls_total` counts it, read by a thread of the
//!   bench's own every 200 µs (a scraper that reads often);
//! * **stack**: how far into the poll its stack was taken (`Stall::stack_taken_after`,
//!   on the runtime's own clock), and how many of the polls got one.
//!
//! It does so on a quiet machine and with every core kept busy by threads outside the
//! runtime (as many spinning threads as cores), and prints p50 and p99 of each. The
//! target is a p99 of at most twice the threshold for both. `VOLT_BENCH_STALLS` sets the
//! polls per row (default 100; 4 under `VOLT_BENCH_QUICK`).
//!
//! Last, what naming the stacks cost: the heap in use (glibc's `mallinfo2`) before the
//! process's first `Telemetry::stalls()` with stacks in it, after it, and after reading
//! every row's stalls again (the debug info is loaded once; each address's frames are
//! kept in a bounded table).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const THRESHOLD: Duration = volt::runtime::DEFAULT_STALL_THRESHOLD;
const HOLD: Duration = Duration::from_millis(50);

#[inline(never)]
fn compute(d: Duration) {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

#[inline(never)]
fn block(d: Duration) {
    std::thread::sleep(d);
}

/// Spinning threads on every core until dropped.
struct Hogs(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Hogs {
    fn start() -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(3).wrapping_add(7));
                    }
                })
            })
            .collect();
        Hogs(stop, threads)
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// `n` polls of `f`, one at a time: (seen latencies, stack latencies).
fn run(rt: &volt::Runtime, f: fn(Duration), n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let t = rt.handle().telemetry();
    let base = Instant::now();
    let mut seen = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..n {
        let started = Arc::new(AtomicU64::new(0));
        let counted_before = t.snapshot().stalls_total;
        let h = rt.spawn({
            let started = Arc::clone(&started);
            async move {
                started.store(base.elapsed().as_nanos() as u64 + 1, SeqCst);
                f(HOLD);
            }
        });
        ids.push(h.id().as_u64());
        // The scraper: watch for the count to move.
        loop {
            if t.snapshot().stalls_total > counted_before {
                let s = started.load(SeqCst);
                if s != 0 {
                    seen.push((base.elapsed()).saturating_sub(Duration::from_nanos(s - 1)));
                }
                break;
            }
            if h.is_finished() && t.snapshot().stalls_total == counted_before {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        h.join().expect("poll");
        // Let the next poll start on a settled runtime.
        std::thread::sleep(Duration::from_millis(5));
    }
    let stalls = t.stalls();
    let stack: Vec<Duration> =
        stalls.iter().filter(|s| ids.contains(&s.task_id)).filter_map(|s| s.stack_taken_after).collect();
    (seen, stack)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test") || std::env::var_os("VOLT_BENCH_QUICK").is_some();
    let n: usize =
        std::env::var("VOLT_BENCH_STALLS").ok().and_then(|s| s.parse().ok()).unwrap_or(if quick { 4 } else { 100 });
    println!(
        "Stalls of {} ms on 2 workers, threshold {} ms, {n} polls per row; seen: from the poll's start to a snapshot \
         counting it (read every 200 µs); stack: how far into the poll it was taken.\n",
        HOLD.as_millis(),
        THRESHOLD.as_millis()
    );
    let heap_at_start = heap_in_use();
    println!("| machine | poll | seen p50 | seen p99 | stack p50 | stack p99 | stacks taken |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for busy in [false, true] {
        let rt = volt::runtime::Builder::new().worker_threads(2).build().expect("runtime");
        let hogs = busy.then(Hogs::start);
        for (name, f) in [("computing", compute as fn(Duration)), ("blocked in a system call", block)] {
            // The history keeps the newest `STALL_HISTORY`: read it in rounds that fit.
            let (mut seen, mut stack) = (Vec::new(), Vec::new());
            let mut left = n;
            while left > 0 {
                let k = left.min(volt::telemetry::STALL_HISTORY / 2);
                let (s, st) = run(&rt, f, k);
                seen.extend(s);
                stack.extend(st);
                left -= k;
            }
            let taken = stack.len();
            println!(
                "| {} | {name} | {} | {} | {} | {} | {taken} of {n} |",
                if busy { "every core busy" } else { "quiet" },
                ms(percentile(&mut seen, 0.5)),
                ms(percentile(&mut seen, 0.99)),
                ms(percentile(&mut stack, 0.5)),
                ms(percentile(&mut stack, 0.99)),
            );
        }
        drop(hogs);
    }
    let heap_at_end = heap_in_use();
    println!(
        "\nheap in use: {:.1} MB before the first stacks were named, {:.1} MB after every row's \
         (the binary's debug info, loaded once, and the frames of each address seen)",
        heap_at_start as f64 / 1e6,
        heap_at_end as f64 / 1e6
    );
}

/// Bytes of heap in use (glibc), 0 elsewhere.
fn heap_in_use() -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: a plain call that returns a struct by value.
        let m = unsafe { libc::mallinfo2() };
        m.uordblks + m.hblkhd
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        0
    }
}
