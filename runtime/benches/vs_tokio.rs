//! Volt against Tokio on the same workloads, 2 workers each, alternating in one process.
//!
//! `cargo bench -p volt --bench vs_tokio` prints a table of medians and the ratio
//! volt/tokio per workload (the median of the back-to-back pairs' ratios), and the geometric mean of the ratios (below 1.0 means Volt is
//! faster). `VOLT_BENCH_SAMPLES` sets the samples per runtime and workload (default 40).
//! `VOLT_BENCH_ROWS` (comma-separated names, e.g. `spawn_many_remote_busy`) runs only those
//! rows and skips the latency table.
//!
//! The first six workloads are Tokio's own `benches/rt_multi_threaded.rs` set; then a
//! serial `spawn(..).await` chain inside a task, and a fork-join binary tree of spawns.
//! Both runtimes run the identical code (one macro, instantiated twice) with runtime-neutral
//! channels (`std::sync::mpsc`, `futures::channel::oneshot`). Then the driver workloads:
//! TCP echo (50 connections x 1,000 round trips of 64 bytes over loopback; each runtime
//! with its own socket types), timer churn (100,000 sleeps armed by one poll and dropped),
//! and 10,000 sleeps of 1-10 ms that fire.

mod workloads;
use workloads::*;

suite!(on_volt, volt::Runtime, volt::spawn, volt::task::yield_now, volt::time::sleep);
suite!(on_tokio, tokio::runtime::Runtime, tokio::spawn, tokio::task::yield_now, tokio::time::sleep);

// The same on Tokio (its own traits).
echo!(echo_tokio, tokio::runtime::Runtime, tokio::net, tokio::spawn, tokio::io);

static VOLT_ECHO: std::sync::OnceLock<std::net::SocketAddr> = std::sync::OnceLock::new();
static TOKIO_ECHO: std::sync::OnceLock<std::net::SocketAddr> = std::sync::OnceLock::new();

fn volt_echo(rt: &volt::Runtime) {
    echo_volt::run(rt, *VOLT_ECHO.get_or_init(|| echo_volt::start(rt)));
}

fn tokio_echo(rt: &tokio::runtime::Runtime) {
    echo_tokio::run(rt, *TOKIO_ECHO.get_or_init(|| echo_tokio::start(rt)));
}

struct Workload {
    name: &'static str,
    volt: fn(&volt::Runtime),
    tokio: fn(&tokio::runtime::Runtime),
    /// Whether to keep the workers busy while it runs.
    busy: bool,
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: keep that quick.
    let quick = std::env::args().any(|a| a == "--test") || std::env::var_os("VOLT_BENCH_QUICK").is_some();
    let samples: usize =
        std::env::var("VOLT_BENCH_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(if quick { 2 } else { 40 });
    let volt_rt = volt::runtime::Builder::new().worker_threads(WORKERS).build().expect("volt runtime");
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime");

    let workloads = [
        Workload {
            name: "spawn_many_local",
            volt: on_volt::spawn_many_local,
            tokio: on_tokio::spawn_many_local,
            busy: false,
        },
        Workload {
            name: "spawn_many_remote_idle",
            volt: on_volt::spawn_many_remote,
            tokio: on_tokio::spawn_many_remote,
            busy: false,
        },
        Workload {
            name: "spawn_many_remote_busy",
            volt: on_volt::spawn_many_remote,
            tokio: on_tokio::spawn_many_remote,
            busy: true,
        },
        Workload { name: "yield_many", volt: on_volt::yield_many, tokio: on_tokio::yield_many, busy: false },
        Workload { name: "ping_pong", volt: on_volt::ping_pong, tokio: on_tokio::ping_pong, busy: false },
        Workload { name: "chained_spawn", volt: on_volt::chained_spawn, tokio: on_tokio::chained_spawn, busy: false },
        Workload {
            name: "serial_spawn_await",
            volt: on_volt::serial_spawn_await,
            tokio: on_tokio::serial_spawn_await,
            busy: false,
        },
        Workload { name: "fork_join_tree", volt: on_volt::fork_join, tokio: on_tokio::fork_join, busy: false },
        Workload { name: "tcp_echo_50x1000", volt: volt_echo, tokio: tokio_echo, busy: false },
        Workload { name: "timer_churn_100k", volt: on_volt::timer_churn, tokio: on_tokio::timer_churn, busy: false },
        Workload { name: "timers_fire_10k", volt: on_volt::timers_fire, tokio: on_tokio::timers_fire, busy: false },
    ];

    println!(
        "Volt vs Tokio, {WORKERS} workers each, {samples} samples per runtime per workload \
         (a quarter for the two slowest), alternating\n"
    );
    println!("| workload | volt median | tokio median | volt/tokio |");
    println!("|---|---:|---:|---:|");
    let mut log_sum = 0.0;
    let rows = std::env::var("VOLT_BENCH_ROWS").ok();
    let wanted = |name: &str| rows.as_deref().is_none_or(|r| r.split(',').any(|r| r.trim() == name));
    let mut n_rows = 0;
    for w in workloads.iter().filter(|w| wanted(w.name)) {
        n_rows += 1;
        let (vflag, tflag) = if w.busy {
            (Some(on_volt::make_busy(&volt_rt)), Some(on_tokio::make_busy(&tokio_rt)))
        } else {
            (None, None)
        };
        // Warm up both.
        for _ in 0..2 {
            (w.volt)(&volt_rt);
            (w.tokio)(&tokio_rt);
        }
        let samples = samples_for(w.name, samples);
        let mut tv = Vec::with_capacity(samples);
        let mut tt = Vec::with_capacity(samples);
        for i in 0..samples {
            // Alternate which runtime goes first, so drift hits both alike.
            let mut run_volt = || {
                let t = Instant::now();
                (w.volt)(&volt_rt);
                tv.push(t.elapsed());
            };
            let mut run_tokio = || {
                let t = Instant::now();
                (w.tokio)(&tokio_rt);
                tt.push(t.elapsed());
            };
            if i % 2 == 0 {
                run_volt();
                run_tokio();
            } else {
                run_tokio();
                run_volt();
            }
        }
        for f in [vflag, tflag].into_iter().flatten() {
            f.store(false, Relaxed);
        }
        let ratio = paired_ratio(&tv, &tt);
        let (mv, mt) = (median(&mut tv), median(&mut tt));
        log_sum += ratio.ln();
        println!("| {} | {} | {} | {:.2} |", w.name, fmt(mv), fmt(mt), ratio);
    }
    println!("| **geomean** | | | **{:.2}** |", (log_sum / n_rows.max(1) as f64).exp());
    if rows.is_none() {
        latency_table(&volt_rt, &tokio_rt, quick);
    }
}

/// Latencies of a timer firing, a remote wake and a TCP round trip, both runtimes,
/// medians of a few runs.
fn latency_table(volt_rt: &volt::Runtime, tokio_rt: &tokio::runtime::Runtime, quick: bool) {
    let runs = if quick { 3 } else { 21 };
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    println!("\n| latency (median of {runs}) | volt | tokio |");
    println!("|---|---:|---:|");

    // sleep(20 ms) on an idle runtime: how long it really takes.
    let mut v = vec![];
    let mut t = vec![];
    for _ in 0..runs {
        std::thread::sleep(Duration::from_millis(30));
        v.push(volt_rt.block_on(async {
            let s = Instant::now();
            volt::time::sleep(Duration::from_millis(20)).await;
            s.elapsed()
        }));
        std::thread::sleep(Duration::from_millis(30));
        t.push(tokio_rt.block_on(async {
            let s = Instant::now();
            tokio::time::sleep(Duration::from_millis(20)).await;
            s.elapsed()
        }));
    }
    println!("| sleep(20 ms) on an idle runtime | {} | {} |", ms(median(&mut v)), ms(median(&mut t)));

    // 10,000 concurrent sleeps of 1-20 ms: time until the last completes.
    let mut v = vec![];
    let mut t = vec![];
    for _ in 0..runs.min(5) {
        v.push(volt_rt.block_on(async {
            let s = Instant::now();
            let hs: Vec<_> = (0..10_000u64)
                .map(|i| volt::spawn(async move { volt::time::sleep(Duration::from_millis(1 + i % 20)).await }))
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            s.elapsed()
        }));
        t.push(tokio_rt.block_on(async {
            let s = Instant::now();
            let hs: Vec<_> = (0..10_000u64)
                .map(|i| tokio::spawn(async move { tokio::time::sleep(Duration::from_millis(1 + i % 20)).await }))
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            s.elapsed()
        }));
    }
    println!("| 10,000 sleeps of 1-20 ms, all done | {} | {} |", ms(median(&mut v)), ms(median(&mut t)));

    // How late a 5 ms async sleep wakes while 64 blocking calls sleep in the pool.
    let v = volt_rt.block_on(async {
        let bs: Vec<_> =
            (0..64).map(|_| volt::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(300)))).collect();
        let mut late = vec![];
        for _ in 0..runs {
            let s = Instant::now();
            volt::time::sleep(Duration::from_millis(5)).await;
            late.push(s.elapsed() - Duration::from_millis(5));
        }
        for b in bs {
            b.await.unwrap();
        }
        median(&mut late)
    });
    let t = tokio_rt.block_on(async {
        let bs: Vec<_> =
            (0..64).map(|_| tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(300)))).collect();
        let mut late = vec![];
        for _ in 0..runs {
            let s = Instant::now();
            tokio::time::sleep(Duration::from_millis(5)).await;
            late.push(s.elapsed() - Duration::from_millis(5));
        }
        for b in bs {
            b.await.unwrap();
        }
        median(&mut late)
    });
    println!("| lateness of sleep(5 ms) during 64 blocking calls | {} | {} |", ms(v), ms(t));
}
