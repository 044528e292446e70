//! What the event ring costs: the same Volt runtime with the ring off and with it on
//! (4,096 events per worker), over the Tokio-comparison workloads, alternating in one
//! process; as a third runtime, what the default poll timing and stall checks cost (the
//! same runtime with `poll_time_histogram(false)` and `stall_threshold(None)`); and as a
//! fourth, what the stall checks alone cost (the default with `stall_threshold(None)`);
//! and as a fifth, the ring with task statistics kept only while watched
//! (`TaskStatistics::WhileWatched`) and nothing watching: what the ring's records cost
//! alone.
//! `cargo bench -p volt --bench overhead` prints medians, the ratios per workload (the median of the back-to-back samples' ratios), and
//! their geometric means. `VOLT_BENCH_SAMPLES` sets the samples (default 64);
//! `VOLT_BENCH_ONLY=name` runs the workloads whose name contains `name`. A sample repeats
//! its workload to last about 5 ms and reports the time per run. In a `_busy` row, spinning
//! tasks keep the workers of the runtime being timed busy, and only that runtime's; its
//! runtimes have one worker fewer than the machine has cores (at most `WORKERS`), so the
//! thread that spawns has a core of its own (see `busy_workers`).

mod workloads;
use workloads::*;

suite!(on_volt, volt::Runtime, volt::spawn, volt::task::yield_now, volt::time::sleep);

/// How long one sample runs (a workload repeated as often as it takes).
const SAMPLE_TIME: Duration = Duration::from_millis(5);

/// Fresh runtime pairs per workload. A runtime settles into a rhythm for a workload
/// (whether its other worker is asleep or searching when work arrives), and one pair's
/// rhythms alone swung the short workloads from 0.8 to 1.9; several pairs sample that.
/// With four, the geomean still moved by ±0.03 from run to run, most of it from
/// `spawn_many_remote_idle` (1.15 to 1.54 in six runs of one build); eight halve the
/// weight of any one triple's rhythm, for a run of about a minute.
const PAIRS: usize = 8;

/// Tasks that keep a runtime's workers busy (yielding, each poll spinning for `STALL`),
/// for the `_busy` rows.
struct Spinners {
    flag: Arc<AtomicBool>,
    tasks: Vec<volt::task::JoinHandle<()>>,
}

/// Workers of a `_busy` row's runtimes: all busy, and the spawning thread beside them,
/// must not outnumber the cores. On two cores, two busy workers and the spawner took
/// turns on the cores at the OS's pace: the same program's 10,000 spawns into a runtime
/// took 3 ms at the 10th percentile of 100 rounds and 14 to 45 ms at the 90th, and
/// the row's untimed and default runtimes, which differ by one clock read per poll,
/// came out 0.41 to 0.98 of each other over six bench runs, so the row measured the OS.
/// With one busy worker, that program's rounds took 2.8 to 3.5 ms (10th to 90th
/// percentile), and the row's default/untimed was 0.99 to 1.01 in three runs.
fn busy_workers() -> usize {
    let cores = std::thread::available_parallelism().map_or(WORKERS, |n| n.get());
    (cores - 1).clamp(1, WORKERS)
}

impl Spinners {
    fn start(rt: &volt::Runtime) -> Spinners {
        let flag = Arc::new(AtomicBool::new(true));
        let tasks = (0..2 * rt.handle().telemetry().snapshot().workers.len())
            .map(|_| {
                let flag = flag.clone();
                rt.spawn(async move {
                    while flag.load(Relaxed) {
                        volt::task::yield_now().await;
                        stall();
                    }
                })
            })
            .collect();
        Spinners { flag, tasks }
    }

    /// Stop them and wait until every one has finished, so none runs into the next
    /// runtime's sample.
    fn stop(self, rt: &volt::Runtime) {
        self.flag.store(false, Relaxed);
        rt.block_on(async move {
            for t in self.tasks {
                t.await.expect("spinner");
            }
        });
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Config {
    /// `poll_time_histogram(false)`, `stall_threshold(None)`, no ring: polls are not timed.
    Untimed,
    /// The default without the stall threshold (`stall_threshold(None)`): what the stall
    /// checks cost is default/this.
    NoStalls,
    /// The default: polls timed for the poll-time histogram, no ring.
    Default,
    /// The default plus the event ring.
    Ring,
    /// The ring, with task statistics kept only while watched
    /// (`TaskStatistics::WhileWatched`), and nothing watching: the ring's records alone.
    RingUnwatched,
}

fn build(config: Config, workers: usize) -> volt::Runtime {
    let mut b = volt::runtime::Builder::new();
    b.worker_threads(workers);
    match config {
        Config::Untimed => {
            b.poll_time_histogram(false).stall_threshold(None);
        }
        Config::NoStalls => {
            b.stall_threshold(None);
        }
        Config::Default => {}
        Config::Ring => {
            b.event_ring(4096);
        }
        Config::RingUnwatched => {
            b.event_ring(4096).task_statistics(volt::runtime::TaskStatistics::WhileWatched);
        }
    }
    b.build().expect("runtime")
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test") || std::env::var_os("VOLT_BENCH_QUICK").is_some();
    let samples: usize =
        std::env::var("VOLT_BENCH_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(if quick { 2 } else { 64 });
    let pairs = if quick { 1 } else { PAIRS };

    type Run = Box<dyn Fn(&volt::Runtime, std::net::SocketAddr)>;
    let workloads: Vec<(&str, Run, bool)> = vec![
        ("spawn_many_local", Box::new(|rt, _| on_volt::spawn_many_local(rt)), false),
        ("spawn_many_remote_idle", Box::new(|rt, _| on_volt::spawn_many_remote(rt)), false),
        ("spawn_many_remote_busy", Box::new(|rt, _| on_volt::spawn_many_remote(rt)), true),
        ("yield_many", Box::new(|rt, _| on_volt::yield_many(rt)), false),
        ("ping_pong", Box::new(|rt, _| on_volt::ping_pong(rt)), false),
        ("chained_spawn", Box::new(|rt, _| on_volt::chained_spawn(rt)), false),
        ("serial_spawn_await", Box::new(|rt, _| on_volt::serial_spawn_await(rt)), false),
        ("fork_join_tree", Box::new(|rt, _| on_volt::fork_join(rt)), false),
        ("tcp_echo_50x1000", Box::new(echo_volt::run), false),
        ("timer_churn_100k", Box::new(|rt, _| on_volt::timer_churn(rt)), false),
        ("timers_fire_10k", Box::new(|rt, _| on_volt::timers_fire(rt)), false),
    ];

    println!(
        "Volt with the event ring off vs on, {WORKERS} workers ({} in the `_busy` rows), {samples} samples each (a quarter for the two slowest) \
         over {pairs} fresh runtime sets of four, alternating, each sample ~5 ms of repeats. \"untimed\" is the same \
         runtime built with `poll_time_histogram(false)`, `stall_threshold(None)` and no ring: what the default's one clock read and stall check per poll cost; \
         \"no stalls\" is the default with `stall_threshold(None)` only: what the stall checks cost.\n",
        busy_workers()
    );
    // The first three time columns stay untimed, default, ring on: `against_build.sh`
    // reads them by position.
    println!(
        "| workload | untimed | default (ring off) | ring on | no stalls | ring on, unwatched | default/untimed | default/no stalls | **ring on/off** | **unwatched ring/off** |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let only = std::env::var("VOLT_BENCH_ONLY").ok();
    let workloads: Vec<_> = workloads.into_iter().filter(|w| only.as_deref().is_none_or(|o| w.0.contains(o))).collect();
    let (mut log_ring, mut log_timed, mut log_stalls, mut log_unwatched) = (0.0, 0.0, 0.0, 0.0);
    let (mut recorded, mut dropped) = (0, 0);
    for (name, run, busy) in &workloads {
        let n = samples_for(name, samples);
        let per_pair = n.div_ceil(pairs);
        // Samples of: untimed, default (ring off), ring on, no stalls, ring on unwatched.
        let mut times: [Vec<Duration>; 5] = Default::default();
        for _ in 0..pairs {
            let workers = if *busy { busy_workers() } else { WORKERS };
            let rts = [
                build(Config::Untimed, workers),
                build(Config::Default, workers),
                build(Config::Ring, workers),
                build(Config::NoStalls, workers),
                build(Config::RingUnwatched, workers),
            ];
            let addrs: Vec<std::net::SocketAddr> = rts
                .iter()
                .map(|rt| {
                    if name.starts_with("tcp") {
                        echo_volt::start(rt)
                    } else {
                        std::net::SocketAddr::from(([127, 0, 0, 1], 0))
                    }
                })
                .collect();
            for _ in 0..2 {
                for (rt, &addr) in rts.iter().zip(&addrs) {
                    let spinners = busy.then(|| Spinners::start(rt));
                    run(rt, addr);
                    if let Some(s) = spinners {
                        s.stop(rt);
                    }
                }
            }
            // Each sample runs the workload enough times to last about 5 ms: the short
            // ones (chained_spawn is ~100 µs) otherwise measure mostly whether a worker
            // happened to be asleep when the work arrived.
            let t = Instant::now();
            run(&rts[1], addrs[1]);
            let reps =
                if quick { 1 } else { (SAMPLE_TIME.as_nanos() / t.elapsed().as_nanos().max(1)).clamp(1, 200) as u32 };
            for i in 0..per_pair {
                // Rotate which runtime goes first, so none always follows the same one.
                for k in 0..rts.len() {
                    let c = (i + k) % rts.len();
                    // Only the runtime being timed is kept busy: with all of them busy at
                    // once, six busy workers or more share the two cores, and the row measures
                    // how the OS shares them out rather than the runtime.
                    let spinners = busy.then(|| Spinners::start(&rts[c]));
                    let t = Instant::now();
                    for _ in 0..reps {
                        run(&rts[c], addrs[c]);
                    }
                    times[c].push(t.elapsed() / reps);
                    if let Some(s) = spinners {
                        s.stop(&rts[c]);
                    }
                }
            }
            let s = rts[2].handle().telemetry().snapshot();
            recorded += s.events_recorded;
            dropped += s.events_overwritten;
        }
        let ring = paired_ratio(&times[2], &times[1]);
        let timed = paired_ratio(&times[1], &times[0]);
        let stalls = paired_ratio(&times[1], &times[3]);
        let unwatched = paired_ratio(&times[4], &times[1]);
        let [mut u, mut d, mut r, mut ns, mut uw] = times;
        log_ring += ring.ln();
        log_timed += timed.ln();
        log_stalls += stalls.ln();
        log_unwatched += unwatched.ln();
        println!(
            "| {name} | {} | {} | {} | {} | {} | {timed:.2} | {stalls:.2} | **{ring:.2}** | **{unwatched:.2}** |",
            fmt(median(&mut u)),
            fmt(median(&mut d)),
            fmt(median(&mut r)),
            fmt(median(&mut ns)),
            fmt(median(&mut uw))
        );
    }
    let n = workloads.len() as f64;
    println!(
        "| **geomean** | | | | | | **{:.2}** | **{:.2}** | **{:.2}** | **{:.2}** |",
        (log_timed / n).exp(),
        (log_stalls / n).exp(),
        (log_ring / n).exp(),
        (log_unwatched / n).exp()
    );
    println!("\nring on: {recorded} events recorded, {dropped} overwritten (memory fixed at 4,096 per ring)");
}
