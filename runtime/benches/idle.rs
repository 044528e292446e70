//! What an idle runtime costs, and how fast a parked runtime answers a wake from outside,
//! Volt next to Tokio in the same process.
//!
//! `cargo bench -p volt --bench idle` prints two tables:
//!
//! 1. For 2, 16 and 64 workers: over `VOLT_IDLE_SECS` (default 2) seconds of idleness, the
//!    CPU time the process used (`getrusage`, every thread but the measuring one), the
//!    context switches of the runtime's threads (voluntary and involuntary, summed from
//!    `/proc/self/task/*/status`, the measuring thread left out), and the runtime's own park
//!    counters (Volt: parks ended, `WorkerSnapshot::times_parked`; Tokio:
//!    `RuntimeMetrics::worker_park_count`). Each runtime first runs a little work and then
//!    gets 500 ms to settle before the window opens. Counts, not timings: they don't depend on
//!    how loaded the machine is.
//! 2. The remote-wake latency at 2 and 16 workers: a thread outside the runtime sends the
//!    current `Instant` to a task parked on a channel, once per ~1 ms, and the task takes
//!    the time when it runs; p50 and p99 of `VOLT_WAKE_SAMPLES` (default 3,000) wakes per
//!    runtime, in rounds of 500 that alternate between the runtimes. A timing on a shared
//!    machine: compare the two columns of one run, not runs with each other.

use futures::StreamExt;
use std::time::{Duration, Instant};

/// CPU time of the whole process (user + system), every thread that ever ran.
fn process_cpu() -> Duration {
    rusage_cpu(libc::RUSAGE_SELF)
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    rusage_cpu(libc::RUSAGE_THREAD)
}

fn rusage_cpu(who: libc::c_int) -> Duration {
    // SAFETY: `getrusage` fills the zeroed struct it is given; both `who` values are valid.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Voluntary + involuntary context switches of every thread of this process except the
/// calling one.
fn other_threads_switches() -> u64 {
    // SAFETY: `gettid` has no preconditions.
    let me = unsafe { libc::syscall(libc::SYS_gettid) }.to_string();
    let mut total = 0;
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        if entry.file_name().to_string_lossy() == me {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        for line in status.lines() {
            if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    total
}

struct IdleFigures {
    cpu: Duration,
    switches: u64,
    parks: u64,
}

/// Open a window of `secs` seconds on an idle runtime and count what happens in it.
fn measure_idle(secs: f64, parks: impl Fn() -> u64) -> IdleFigures {
    std::thread::sleep(Duration::from_millis(500));
    let (cpu0, me0, sw0, p0) = (process_cpu(), thread_cpu(), other_threads_switches(), parks());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (cpu1, me1, sw1, p1) = (process_cpu(), thread_cpu(), other_threads_switches(), parks());
    IdleFigures { cpu: (cpu1 - cpu0).saturating_sub(me1 - me0), switches: sw1 - sw0, parks: p1 - p0 }
}

fn idle_volt(workers: usize, secs: f64) -> IdleFigures {
    let rt = volt::runtime::Builder::new().worker_threads(workers).build().expect("volt runtime");
    rt.block_on(async {
        let hs: Vec<_> = (0..1_000).map(|_| volt::spawn(async { volt::task::yield_now().await })).collect();
        for h in hs {
            h.await.unwrap();
        }
        volt::time::sleep(Duration::from_millis(5)).await;
    });
    let t = rt.handle().telemetry();
    measure_idle(secs, || t.snapshot().workers.iter().map(|w| w.times_parked).sum())
}

fn idle_tokio(workers: usize, secs: f64) -> IdleFigures {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap();
    rt.block_on(async {
        let hs: Vec<_> = (0..1_000).map(|_| tokio::spawn(async { tokio::task::yield_now().await })).collect();
        for h in hs {
            h.await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    });
    let m = rt.metrics();
    measure_idle(secs, || (0..m.num_workers()).map(|i| m.worker_park_count(i)).sum())
}

/// One round of remote wakes: a task waits on a channel; this thread sends it the time,
/// `n` times, about 1 ms apart; the task answers with how long each wake took to run it.
fn wake_round(
    spawn: &dyn Fn(futures::channel::mpsc::UnboundedReceiver<Instant>, std::sync::mpsc::Sender<Duration>),
    n: usize,
) -> Vec<Duration> {
    let (tx, rx) = futures::channel::mpsc::unbounded::<Instant>();
    let (out_tx, out_rx) = std::sync::mpsc::channel();
    spawn(rx, out_tx);
    let mut got = Vec::with_capacity(n);
    for _ in 0..n {
        // Long enough for every worker to park again.
        std::thread::sleep(Duration::from_millis(1));
        tx.unbounded_send(Instant::now()).unwrap();
        got.push(out_rx.recv().unwrap());
    }
    got
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let secs: f64 = std::env::var("VOLT_IDLE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let samples: usize = std::env::var("VOLT_WAKE_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(3_000);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("Idle runtimes, {secs} s window after 500 ms of settling, {cores} cores\n");
    println!("| workers | runtime | CPU ms | context switches | park counter | CPU % of a core |");
    println!("|---:|---|---:|---:|---:|---:|");
    for workers in [2, 16, 64] {
        // Volt first, then Tokio; each runtime is dropped before the next is built.
        for (name, f) in [("volt", idle_volt as fn(usize, f64) -> IdleFigures), ("tokio", idle_tokio)] {
            let r = f(workers, secs);
            println!(
                "| {workers} | {name} | {:.1} | {} | {} | {:.2} |",
                r.cpu.as_secs_f64() * 1e3,
                r.switches,
                r.parks,
                r.cpu.as_secs_f64() / secs * 100.0
            );
        }
    }

    println!("\nRemote wake to run, {samples} wakes per runtime, rounds of 500 alternating\n");
    println!("| workers | volt p50 | volt p99 | tokio p50 | tokio p99 | p99 volt/tokio |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for workers in [2, 16] {
        let volt_rt = volt::runtime::Builder::new().worker_threads(workers).build().expect("volt runtime");
        let tokio_rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap();
        let volt_spawn = |mut rx: futures::channel::mpsc::UnboundedReceiver<Instant>,
                          out: std::sync::mpsc::Sender<Duration>| {
            volt_rt.spawn(async move {
                while let Some(sent) = rx.next().await {
                    let _ = out.send(sent.elapsed());
                }
            });
        };
        let tokio_spawn = |mut rx: futures::channel::mpsc::UnboundedReceiver<Instant>,
                           out: std::sync::mpsc::Sender<Duration>| {
            tokio_rt.spawn(async move {
                while let Some(sent) = rx.next().await {
                    let _ = out.send(sent.elapsed());
                }
            });
        };
        let (mut v, mut t) = (vec![], vec![]);
        let rounds = samples.div_ceil(500);
        for i in 0..rounds {
            let n = 500.min(samples - i * 500);
            if i % 2 == 0 {
                v.extend(wake_round(&volt_spawn, n));
                t.extend(wake_round(&tokio_spawn, n));
            } else {
                t.extend(wake_round(&tokio_spawn, n));
                v.extend(wake_round(&volt_spawn, n));
            }
        }
        v.sort();
        t.sort();
        let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
        let (v50, v99, t50, t99) =
            (percentile(&v, 0.5), percentile(&v, 0.99), percentile(&t, 0.5), percentile(&t, 0.99));
        println!(
            "| {workers} | {} | {} | {} | {} | {:.2} |",
            us(v50),
            us(v99),
            us(t50),
            us(t99),
            v99.as_secs_f64() / t99.as_secs_f64()
        );
    }
}
