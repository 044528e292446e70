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
    let h = volt::task::Builder::new().name("blocker").spawn_on(async { a_poll_that_blocks_its_worker() }, rt.handle());
    let id = h.id();
    h.join().unwrap();
    let t = rt.handle().telemetry();
    let deadline = Instant::now() + Duration::from_secs(5);
    while t.stalls().is_empty() {
        assert!(Instant::now() < deadline, "no stall reported within 5 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The poll is over; no second report of it comes.
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
            s.frames.iter().any(|f| f.contains("a_poll_that_blocks_its_worker")),
            "the blocking function is on the stack: {:#?}",
            s.frames
        );
        // Innermost first: the sleep is above the function that called it.
        let f = s.frames.iter().position(|f| f.contains("a_poll_that_blocks_its_worker")).unwrap();
        assert!(s.frames[..f].iter().any(|f| f.contains("sleep")), "{:#?}", s.frames);
    }
    // The ring has the event too.
    let events = t.events().read();
    let stall_events: Vec<_> = events.iter().filter(|e| e.kind == volt::telemetry::EventKind::Stall).collect();
    assert!(stall_events.len() <= 1);
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
    // Dropping the runtime joins the monitor with the workers.
    assert_eq!(threads_named("gone-test-stal"), before);
}
