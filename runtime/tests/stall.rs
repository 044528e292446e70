//! Stalls as a program meets them: a poll that holds its worker too long is made, it
//! ends, and only then is the report read. Each report must be there once, with the
//! poll's true length and, for a long poll, the function it was stuck in, also while
//! every core of the machine is kept busy by threads outside the runtime. The bounds
//! below are generous waits for something that must happen, never timings asserted.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::telemetry::{MissingStack, Stall, Telemetry};

const THRESHOLD: Duration = Duration::from_millis(10);

/// Blocks its thread (a worker, inside a poll) in a system call for `d`; returns how long
/// it took.
#[inline(never)]
fn block_in_a_system_call(d: Duration) -> Duration {
    let t = Instant::now();
    std::thread::sleep(d);
    std::hint::black_box(t.elapsed())
}

/// Keeps its thread (a worker, inside a poll) computing for `d`; returns how long it took.
#[inline(never)]
fn compute_for(d: Duration) -> Duration {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    std::hint::black_box(t.elapsed())
}

/// Threads outside the runtime that keep every core of the machine busy until dropped.
struct Saturated {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Saturated {
    fn every_core() -> Saturated {
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
        Saturated { stop, threads }
    }
}

impl Drop for Saturated {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn runtime(name: &str) -> volt::Runtime {
    volt::runtime::Builder::new()
        .worker_threads(2)
        .event_ring(4096)
        .thread_name(name)
        .stall_threshold(Some(THRESHOLD))
        .build()
        .unwrap()
}

/// Run `f` in one poll of a task named `name`; returns its id and what `f` measured.
fn one_poll(rt: &volt::Runtime, name: &str, f: fn(Duration) -> Duration, d: Duration) -> (u64, Duration) {
    let h = volt::task::Builder::new().name(name).spawn_on(async move { f(d) }, rt.handle());
    let id = h.id().as_u64();
    (id, h.join().unwrap())
}

/// The report of task `id`'s stall, checked for what every report of an ended poll must
/// say: once, ended, at least as long as the poll measured itself and at most 10% more.
fn the_report(stalls: &[Stall], id: u64, measured: Duration) -> Stall {
    let mine: Vec<_> = stalls.iter().filter(|s| s.task_id == id).collect();
    assert_eq!(mine.len(), 1, "one report for the poll: {stalls:#?}");
    let s = mine[0].clone();
    assert!(!s.ongoing, "{s:#?}");
    // The report converts clock ticks at a rate measured once per process, which may be a
    // fraction of a percent off `Instant`'s: 1% is allowed below.
    assert!(s.duration >= measured.mul_f64(0.99), "reported {:?}, the poll measured {measured:?} itself", s.duration);
    assert!(s.duration <= measured.mul_f64(1.10), "reported {:?}, the poll measured {measured:?} itself", s.duration);
    s
}

/// The first frame that is not plumbing is `function`.
fn first_user_frame_is(s: &Stall, function: &str) {
    if std::env::var_os("VOLT_PRINT_STALL").is_some() {
        eprintln!("{s:#?}");
    }
    let first = s.user_frames().next();
    assert!(
        first.is_some_and(|f| f.function.contains(function)),
        "the first unfolded frame should be {function}: {:#?}",
        s.frames.iter().map(|f| f.to_string()).collect::<Vec<_>>()
    );
    assert_eq!(s.missing_stack, None);
    assert!(s.stack_taken_after.is_some_and(|a| a >= THRESHOLD && a <= s.duration), "{s:#?}");
}

fn stacks_here() -> bool {
    // Stacks are taken on Linux with glibc 2.35 or later; the project's machines have it.
    cfg!(all(target_os = "linux", target_env = "gnu"))
}

/// A 60 ms poll and a 600 ms poll, each blocked in a system call, then each computing:
/// four reports, each once, with the poll's true length; the 600 ms ones with the
/// function they were stuck in as the first frame past the plumbing; in the ring, one
/// `Stall` event each with the same length.
fn long_polls_are_reported_once_with_their_length_and_stack(rt: &volt::Runtime) {
    let t = rt.handle().telemetry();
    let cases = [
        (
            "block 60",
            block_in_a_system_call as fn(Duration) -> Duration,
            Duration::from_millis(60),
            "block_in_a_system_call",
        ),
        ("block 600", block_in_a_system_call, Duration::from_millis(600), "block_in_a_system_call"),
        ("compute 60", compute_for, Duration::from_millis(60), "compute_for"),
        ("compute 600", compute_for, Duration::from_millis(600), "compute_for"),
    ];
    let mut ran = Vec::new();
    for (name, f, d, function) in cases {
        let (id, measured) = one_poll(rt, name, f, d);
        ran.push((id, measured, d, function, name));
    }
    // Every poll has ended: only now are the reports read.
    let stalls = t.stalls();
    let events = t.events().read();
    for (id, measured, d, function, name) in ran {
        let s = the_report(&stalls, id, measured);
        assert_eq!(s.task_name.as_deref(), Some(name));
        if d >= Duration::from_millis(600) && stacks_here() {
            first_user_frame_is(&s, function);
        }
        let ev: Vec<_> =
            events.iter().filter(|e| e.kind == volt::telemetry::EventKind::Stall && e.task_id == id).collect();
        assert_eq!(ev.len(), 1, "one Stall event: {ev:?}");
        match ev[0].detail() {
            volt::telemetry::EventDetail::Stall { worker, duration } => {
                assert_eq!(worker, s.worker);
                assert!(duration.abs_diff(s.duration) < Duration::from_micros(2), "{duration:?} vs {:?}", s.duration);
            }
            other => panic!("{other:?}"),
        }
    }
    let snap = t.snapshot();
    assert_eq!(snap.stalls_total, 4, "{stalls:#?}");
    assert_eq!(snap.workers.iter().map(|w| w.stalls).sum::<u64>(), 4);
}

#[test]
fn long_polls_are_reported_once_with_their_length_and_stack_on_a_quiet_machine() {
    long_polls_are_reported_once_with_their_length_and_stack(&runtime("stall-quiet"));
}

#[test]
fn long_polls_are_reported_once_with_their_length_and_stack_with_every_core_busy() {
    let rt = runtime("stall-busy");
    let _busy = Saturated::every_core();
    long_polls_are_reported_once_with_their_length_and_stack(&rt);
}

/// 600 polls of 15 ms each on two workers, stacks on: 600 stalls, no more, no fewer,
/// counted as the polls end (no report waits for a stack to be named), and the newest
/// kept with their lengths.
#[test]
fn six_hundred_polls_of_15_ms_are_six_hundred_stalls() {
    let rt = runtime("stall-many");
    let t = rt.handle().telemetry();
    let handles: Vec<_> =
        (0..600).map(|_| rt.spawn(async { block_in_a_system_call(Duration::from_millis(15)) })).collect();
    let ids: std::collections::HashSet<u64> = handles.iter().map(|h| h.id().as_u64()).collect();
    let measured: Vec<Duration> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(measured.iter().all(|&d| d >= Duration::from_millis(15)));
    assert_eq!(t.snapshot().stalls_total, 600);
    let stalls = t.stalls();
    assert_eq!(stalls.len(), volt::telemetry::STALL_HISTORY);
    for s in &stalls {
        assert!(ids.contains(&s.task_id) && !s.ongoing && s.duration >= Duration::from_millis(15), "{s:#?}");
    }
    let distinct: std::collections::HashSet<_> = stalls.iter().map(|s| (s.worker, s.poll)).collect();
    assert_eq!(distinct.len(), stalls.len(), "each poll once");
    assert_eq!(t.snapshot().stalls_total, 600, "reading the reports counts nothing more");
}

/// A poll still running past the threshold is a stall already: counted, and listed as
/// ongoing with its length so far; once it ends it is listed once, ended, as the same
/// stall (same worker and poll number), and still counted once.
#[test]
fn a_poll_still_running_is_an_ongoing_stall_and_the_same_one_once_it_ends() {
    let rt = runtime("stall-ongoing");
    let t = rt.handle().telemetry();
    let release = Arc::new(AtomicBool::new(false));
    let h = rt.spawn({
        let release = Arc::clone(&release);
        async move {
            let start = Instant::now();
            // Bounded: a failing test ends.
            while !release.load(SeqCst) && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(1));
            }
            start.elapsed()
        }
    });
    let id = h.id().as_u64();
    let start = Instant::now();
    let ongoing = loop {
        if let Some(s) = t.stalls().into_iter().find(|s| s.task_id == id) {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no ongoing stall within 30 s");
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(ongoing.ongoing && ongoing.duration >= THRESHOLD, "{ongoing:#?}");
    assert!(ongoing.missing_stack.is_none() || ongoing.missing_stack == Some(MissingStack::NotYet), "{ongoing:#?}");
    assert_eq!(t.snapshot().stalls_total, 1);
    release.store(true, SeqCst);
    let measured = h.join().unwrap();
    let ended = the_report(&t.stalls(), id, measured);
    assert_eq!((ended.worker, ended.poll), (ongoing.worker, ongoing.poll));
    assert!(ended.duration >= ongoing.duration);
    assert_eq!(t.snapshot().stalls_total, 1);
}

#[test]
fn without_a_threshold_there_is_no_monitor_and_no_stall() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .thread_name("nostall-test")
        .stall_threshold(None)
        .build()
        .unwrap();
    rt.block_on(async { volt::spawn(async { block_in_a_system_call(Duration::from_millis(50)) }).await.unwrap() });
    assert!(rt.handle().telemetry().stalls().is_empty());
    assert_eq!(rt.handle().telemetry().snapshot().stalls_total, 0);
    if cfg!(target_os = "linux") {
        assert_eq!(threads_named("nostall-test-st"), 0, "no monitor thread");
    }
}

#[test]
fn a_runtime_with_the_monitor_shuts_down_and_its_thread_exits() {
    let before = threads_named("gone-test-stal");
    let rt = volt::runtime::Builder::new().worker_threads(2).thread_name("gone-test").build().unwrap();
    rt.block_on(async { volt::spawn(async { 1 }).await.unwrap() });
    drop(rt);
    // A joined thread can still be listed in /proc for a moment while the kernel
    // finishes its exit: wait (bounded).
    let start = Instant::now();
    while threads_named("gone-test-stal") != before && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(threads_named("gone-test-stal"), before);
}

/// With `stall_stacks(false)` a stall is found and reported as ever, without a stack,
/// saying why; and no monitor thread is started.
#[test]
fn without_stacks_a_stall_is_reported_with_no_frames_and_says_why() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(1)
        .thread_name("nostack-test")
        .stall_threshold(Some(THRESHOLD))
        .stall_stacks(false)
        .build()
        .unwrap();
    let t = rt.handle().telemetry();
    let (id, measured) = one_poll(&rt, "x", block_in_a_system_call, Duration::from_millis(100));
    let s = the_report(&t.stalls(), id, measured);
    assert!(s.frames.is_empty(), "a stack was taken: {:#?}", s.frames);
    assert_eq!(s.missing_stack, Some(MissingStack::Off));
    assert_eq!(t.snapshot().stalls_total, 1);
    if cfg!(target_os = "linux") {
        assert_eq!(threads_named("nostack-test-st"), 0, "no monitor thread");
    }
}

/// A slow `on_thread_start` hook runs before the worker's loop: it is not a poll, and
/// no stall is reported for it (there is no task to name).
#[test]
fn a_slow_thread_start_hook_is_not_a_stall() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .stall_threshold(Some(THRESHOLD))
        .on_thread_start(|| std::thread::sleep(Duration::from_millis(300)))
        .build()
        .unwrap();
    let t = rt.handle().telemetry();
    let hs: Vec<_> = (0..8).map(|_| rt.spawn(async { volt::task::yield_now().await })).collect();
    for h in hs {
        h.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    // Only stalls of task 0 are the hook's: a poll of a task that the OS took off its
    // CPU for a while on a loaded machine may be a stall of its own.
    let hook_stalls: Vec<_> = t.stalls().into_iter().filter(|s| s.task_id == 0).collect();
    assert_eq!(hook_stalls, Vec::new(), "a thread start hook reported as a stall");
}

fn one_worker(name: &str) -> volt::Runtime {
    volt::runtime::Builder::new()
        .worker_threads(1)
        .event_ring(4096)
        .thread_name(name)
        .stall_threshold(Some(THRESHOLD))
        .build()
        .unwrap()
}

/// A poll that stalls and then runs another task inline in a blocking join held its
/// worker for the stretch before: that is reported once, as it stood when the join
/// began, and the task run inline (a trivial one, on the same worker) is no stall.
#[test]
fn a_stall_before_a_blocking_join_is_reported_once_and_the_inline_task_is_none() {
    let rt = one_worker("stall-join");
    let t = rt.handle().telemetry();
    let inner_id = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let h = rt.spawn({
        let inner_id = Arc::clone(&inner_id);
        async move {
            // Into this worker's LIFO slot: the join runs it inline.
            let inner = volt::spawn(async { 7 });
            inner_id.store(inner.id().as_u64(), SeqCst);
            let measured = compute_for(Duration::from_millis(40));
            assert_eq!(inner.join().unwrap(), 7);
            measured
        }
    });
    let id = h.id().as_u64();
    let measured = h.join().unwrap();
    let stalls = t.stalls();
    let mine: Vec<_> = stalls.iter().filter(|s| s.task_id == id).collect();
    assert_eq!(mine.len(), 1, "{stalls:#?}");
    assert!(mine[0].duration >= measured.mul_f64(0.99), "{:#?}", mine[0]);
    let inner = inner_id.load(SeqCst);
    assert!(stalls.iter().all(|s| s.task_id != inner), "the task run inline is no stall: {stalls:#?}");
    assert_eq!(t.snapshot().stalls_total, stalls.len() as u64);
}

/// What a poll does after a blocking join ran a task inline still holds the worker: a
/// long stretch after the join is a stall of its own, reported with its length.
#[test]
fn a_stall_after_a_blocking_join_is_reported() {
    let rt = one_worker("stall-after-join");
    let t = rt.handle().telemetry();
    let h = rt.spawn(async {
        let inner = volt::spawn(async { 7 });
        assert_eq!(inner.join().unwrap(), 7);
        compute_for(Duration::from_millis(200))
    });
    let id = h.id().as_u64();
    let measured = h.join().unwrap();
    let stalls = t.stalls();
    let mine: Vec<_> = stalls.iter().filter(|s| s.task_id == id).collect();
    assert_eq!(mine.len(), 1, "{stalls:#?}");
    assert!(mine[0].duration >= measured.mul_f64(0.99), "{:#?}", mine[0]);
    assert_eq!(t.snapshot().stalls_total, 1);
}

/// A task aborted while it waits in a queue is never polled: its worker does not show
/// as stuck in it afterwards (its slot is opened after the task's transition to
/// running, which a cancelled task never makes).
#[test]
fn a_task_cancelled_in_its_queue_is_no_stall() {
    let rt = one_worker("stall-cancelled");
    let t = rt.handle().telemetry();
    let victim = rt
        .spawn(async {
            // Queued on this worker behind this poll, and aborted before it runs.
            let v = volt::spawn(async { std::future::pending::<()>().await });
            v.abort();
            v.id().as_u64()
        })
        .join()
        .unwrap();
    // Idle now, well past the threshold: nothing may show as a stall.
    std::thread::sleep(Duration::from_millis(100));
    let stalls = t.stalls();
    assert!(stalls.iter().all(|s| s.task_id != victim), "{stalls:#?}");
    assert_eq!(t.snapshot().stalls_total, 0, "{stalls:#?}");
}

fn threads_named(part: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .filter(|c| c.contains(part))
        .count()
}

/// `Telemetry` is what a program holds; it must be `Send + Sync` to be read from anywhere.
#[allow(dead_code)]
fn telemetry_is_shareable(t: Telemetry) -> impl Send + Sync {
    t
}
