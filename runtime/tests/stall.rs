//! The stall monitor: a poll that blocks its worker is reported once, with the stuck
//! thread's stack; a runtime without the monitor has no monitor thread. The bounds below
//! are generous waits for a report that must come, never timings asserted.

use std::time::{Duration, Instant};

/// Blocks the calling thread (a worker, inside a poll) well past the threshold.
#[inline(never)]
fn a_poll_that_blocks_its_worker() {
    std::thread::sleep(Duration::from_millis(200));
    std::hint::black_box(());
}

/// Blocks like [`a_poll_that_blocks_its_worker`], 200 ms at a time, until the runtime has
/// reported a stall (at most 30 s): on a loaded machine the monitor thread may itself
/// wait for a CPU, and the report must come while the poll is still stuck.
#[inline(never)]
fn blocks_until_reported(t: &volt::telemetry::Telemetry) {
    let start = Instant::now();
    while t.snapshot().stalls_total == 0 && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::hint::black_box(());
}

fn threads_named(part: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .filter(|c| c.contains(part))
        .count()
}

#[test]
fn a_blocking_poll_is_one_stall_with_its_function_on_the_stack() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .event_ring(1024)
        .thread_name("stall-test")
        .stall_threshold(Some(Duration::from_millis(10)))
        .build()
        .unwrap();
    let t = rt.handle().telemetry();
    let t2 = t.clone();
    let h = volt::task::Builder::new().name("blocker").spawn_on(async move { blocks_until_reported(&t2) }, rt.handle());
    let id = h.id();
    h.join().unwrap();
    // The one poll is over, and was reported while it ran; give a second report (which
    // must not come) the time to show.
    std::thread::sleep(Duration::from_millis(100));
    let stalls = t.stalls();
    assert_eq!(stalls.len(), 1, "{stalls:#?}");
    let s = &stalls[0];
    if std::env::var_os("VOLT_PRINT_STALL").is_some() {
        eprintln!("{s:#?}");
    }
    assert_eq!(s.task_id, id);
    assert_eq!(s.task_name.as_deref(), Some("blocker"));
    assert!(s.worker < 2);
    assert!(s.duration >= Duration::from_millis(10), "{:?}", s.duration);
    let snap = t.snapshot();
    assert_eq!(snap.stalls_total, 1);
    assert_eq!(snap.workers[s.worker].stalls, 1);
    if cfg!(target_os = "linux") {
        assert!(
            s.frames.iter().any(|f| f.contains("blocks_until_reported")),
            "the blocking function is on the stack: {:#?}",
            s.frames
        );
        // Innermost first: the sleep is above the function that called it.
        let f = s.frames.iter().position(|f| f.contains("blocks_until_reported")).unwrap();
        assert!(s.frames[..f].iter().any(|f| f.contains("sleep")), "{:#?}", s.frames);
    }
    // The ring has the event too.
    let events = t.events().read();
    let stall_events: Vec<_> = events.iter().filter(|e| e.kind == volt::telemetry::EventKind::Stall).collect();
    assert_eq!(stall_events.len(), 1, "one Stall event in the ring: {stall_events:?}");
    assert_eq!(stall_events[0].task_id, id);
    assert!(threads_named("stall-test-stal") == 1 || !cfg!(target_os = "linux"), "one monitor thread");
}

#[test]
fn without_a_threshold_there_is_no_monitor_and_no_stall() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .thread_name("nostall-test")
        .stall_threshold(None)
        .build()
        .unwrap();
    rt.block_on(async { volt::spawn(async { a_poll_that_blocks_its_worker() }).await.unwrap() });
    std::thread::sleep(Duration::from_millis(50));
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
    // Dropping the runtime wakes the monitor and waits up to a second for it to leave.
    // A joined thread can still be listed in /proc for a moment while the kernel
    // finishes its exit: wait (bounded).
    let start = Instant::now();
    while threads_named("gone-test-stal") != before && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(threads_named("gone-test-stal"), before);
}

/// With `stall_stacks(false)` a stall is found and reported as ever, without a stack (and
/// so without signalling the stuck thread).
#[test]
fn without_stacks_a_stall_is_reported_with_no_frames() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(1)
        .stall_threshold(Some(Duration::from_millis(10)))
        .stall_stacks(false)
        .build()
        .unwrap();
    let t = rt.handle().telemetry();
    let t2 = t.clone();
    rt.spawn(async move { blocks_until_reported(&t2) }).join().unwrap();
    let stalls = t.stalls();
    assert_eq!(stalls.len(), 1, "{stalls:#?}");
    assert!(stalls[0].frames.is_empty(), "a stack was taken: {:#?}", stalls[0].frames);
    assert_eq!(t.snapshot().stalls_total, 1);
}

/// A slow `on_thread_start` hook runs before the worker's loop: it is not a poll, and
/// no stall is reported for it (there is no task to name).
#[test]
fn a_slow_thread_start_hook_is_not_a_stall() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .stall_threshold(Some(Duration::from_millis(10)))
        .on_thread_start(|| std::thread::sleep(Duration::from_millis(300)))
        .build()
        .unwrap();
    // Every worker is past its hook once a task has run on each (or the wait runs out).
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
