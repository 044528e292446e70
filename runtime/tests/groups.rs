//! Where a task was spawned, task groups and the workers' busy time, read back through
//! `Telemetry` from real runtimes.

mod common;

use common::{wait_until, Flag};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use volt::telemetry::{TaskGroup, TaskGroupKind, Telemetry, MAX_TASK_GROUPS, OTHER_TASK_GROUP};

const LONG: Duration = Duration::from_secs(30);

fn recording(workers: usize) -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(workers).event_ring(1024).build().expect("build runtime")
}

fn group(t: &Telemetry, name: &str) -> Option<TaskGroup> {
    t.task_groups().into_iter().find(|g| g.name == name)
}

/// The group `name` once `ready` holds for it (within 30 s): a poll's figures are
/// written just after the task moves on, so a reading right after a join may still
/// miss the last one.
fn group_when(t: &Telemetry, name: &str, ready: impl Fn(&TaskGroup) -> bool) -> TaskGroup {
    let mut last = None;
    let ok = wait_until(LONG, || {
        last = group(t, name);
        last.as_ref().is_some_and(&ready)
    });
    assert!(ok, "group {name:?} never got there: {last:#?}");
    last.unwrap()
}

/// Spin on the CPU for `d` (the poll is busy at least that long).
fn spin(d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Each spawn entry point keeps its caller's line as the task's spawn location, through
/// every generic layer under it.
#[test]
fn every_spawn_entry_point_keeps_its_callers_location() {
    let rt = recording(2);
    let handle = rt.handle().clone();
    // Live until the runtime is dropped, so each is listed.
    let wait = std::future::pending::<()>;
    let here = |line: u32| (file!(), line);
    let mut expected: Vec<(&str, u64, (&str, u32))> = Vec::new();
    let (h, line) = (rt.spawn(wait()), line!());
    expected.push(("Runtime::spawn", h.id().as_u64(), here(line)));
    let (h, line) = (handle.spawn(wait()), line!());
    expected.push(("Handle::spawn", h.id().as_u64(), here(line)));
    let (h, line) = (volt::task::Builder::new().spawn_on(wait(), &handle), line!());
    expected.push(("Builder::spawn_on", h.id().as_u64(), here(line)));
    let inside = rt.block_on({
        async move {
            let mut v = Vec::new();
            let (h, line) = (volt::spawn(wait()), line!());
            v.push(("volt::spawn", h.id().as_u64(), line));
            let (h, line) = (volt::task::spawn(wait()), line!());
            v.push(("volt::task::spawn", h.id().as_u64(), line));
            let (h, line) = (volt::task::Builder::new().name("named").spawn(wait()), line!());
            v.push(("Builder::spawn", h.id().as_u64(), line));
            v
        }
    });
    expected.extend(inside.into_iter().map(|(what, id, line)| (what, id, here(line))));
    let tasks = rt.handle().telemetry().tasks();
    for (what, id, (file, line)) in expected {
        let t = tasks.iter().find(|t| t.id == id).unwrap_or_else(|| panic!("{what}: task {id} is not listed"));
        assert_eq!((t.spawned_at.file(), t.spawned_at.line()), (file, line), "{what}");
    }
}

/// The panics of the spawn functions called outside a runtime point at the caller's
/// line (`spawn_blocking` keeps no location beyond that: its tasks are not listed).
#[test]
fn spawning_outside_a_runtime_panics_at_the_callers_line() {
    static SEEN: Mutex<Vec<(std::thread::ThreadId, String, u32)>> = Mutex::new(Vec::new());
    let previous: Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> = Arc::from(std::panic::take_hook());
    let chained = Arc::clone(&previous);
    std::panic::set_hook(Box::new(move |info| {
        if let Some(l) = info.location() {
            SEEN.lock().unwrap().push((std::thread::current().id(), l.file().to_string(), l.line()));
        }
        chained(info);
    }));
    let me = std::thread::current().id();
    let last_panic = || {
        let seen = SEEN.lock().unwrap();
        seen.iter().rev().find(|(t, ..)| *t == me).map(|(_, f, l)| (f.clone(), *l)).expect("a panic was seen")
    };
    let mut line = 0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        line = line!() + 1;
        drop(volt::task::spawn_blocking(|| ()));
    }));
    assert!(r.is_err());
    assert_eq!(last_panic(), (file!().to_string(), line), "volt::task::spawn_blocking");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        line = line!() + 1;
        drop(volt::spawn(async {}));
    }));
    assert!(r.is_err());
    assert_eq!(last_panic(), (file!().to_string(), line), "volt::spawn");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        line = line!() + 1;
        drop(volt::task::Builder::new().spawn(async {}));
    }));
    assert!(r.is_err());
    assert_eq!(last_panic(), (file!().to_string(), line), "Builder::spawn");
    std::panic::set_hook(Box::new(move |info| previous(info)));
}

/// N tasks named "a" spawned from inside and outside the runtime, and M unnamed tasks
/// from one line: each group's counts add up exactly, its polls are exactly the polls
/// its tasks made (each yields a known number of times), its busy time is at least what
/// its tasks spun, and every task spawned is in one group.
#[test]
fn groups_count_their_tasks_polls_and_time() {
    const N: usize = 20;
    const M: usize = 30;
    const YIELDS: usize = 5;
    let rt = recording(2);
    let t = rt.handle().telemetry();
    // One gate each: a `Flag` wakes the one task that waits on it.
    let gates: Vec<Flag> = (0..N).map(|_| Flag::default()).collect();
    let named = |gate: Flag| async move {
        for _ in 0..YIELDS {
            volt::task::yield_now().await;
        }
        gate.wait().await;
    };
    let mut handles = Vec::new();
    // Half from this thread (counted off the workers), half from a task (on a worker).
    for gate in &gates[..N / 2] {
        handles.push(volt::task::Builder::new().name("a").spawn_on(named(gate.clone()), rt.handle()));
    }
    let inner = rt.block_on({
        let gates = gates[N / 2..].to_vec();
        async move {
            volt::spawn(async move {
                gates.into_iter().map(|g| volt::task::Builder::new().name("a").spawn(named(g))).collect::<Vec<_>>()
            })
            .await
            .unwrap()
        }
    });
    handles.extend(inner);
    let mut unnamed = Vec::new();
    let mut line = 0;
    for _ in 0..M {
        line = line!() + 1;
        unnamed.push(rt.spawn(async {
            for _ in 0..3 {
                volt::task::yield_now().await;
            }
        }));
    }
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            volt::task::Builder::new().name("spin").spawn_on(async { spin(Duration::from_millis(2)) }, rt.handle())
        })
        .collect();

    // Every "a" task is waiting on the gate: polled once and once after each yield.
    let a = group_when(&t, "a", |g| g.polls == (N * (YIELDS + 1)) as u64);
    assert_eq!((a.kind, a.spawned, a.alive, a.completed), (TaskGroupKind::Named, N as u64, N as u64, 0));
    assert_eq!(a.first_polls, N as u64, "every task was polled");
    gates.iter().for_each(Flag::set);
    for h in handles {
        rt.block_on(h).unwrap();
    }
    let a = group_when(&t, "a", |g| g.polls == (N * (YIELDS + 2)) as u64);
    assert_eq!((a.spawned, a.alive, a.completed, a.cancelled, a.panicked), (N as u64, 0, N as u64, 0, 0));
    assert_eq!(a.scheduled, a.polls - a.first_polls);
    assert_eq!(a.poll_time_histogram.count(), a.polls);

    for h in unnamed {
        rt.block_on(h).unwrap();
    }
    let site = format!("{}:{line}:", file!());
    let groups = t.task_groups();
    let u = groups.iter().find(|g| g.name.starts_with(&site)).expect("a group for the unnamed tasks' line");
    assert_eq!(u.kind, TaskGroupKind::SpawnLocation);
    let u = group_when(&t, &u.name.clone(), |g| g.polls == (M * 4) as u64);
    assert_eq!((u.spawned, u.alive, u.completed), (M as u64, 0, M as u64));

    for h in spinners {
        rt.block_on(h).unwrap();
    }
    let s = group_when(&t, "spin", |g| g.polls == 4);
    // Timed by the runtime's clock, converted at a rate measured once: allow 1% short.
    let spun = Duration::from_millis(8).mul_f64(0.99);
    assert!(s.busy >= spun, "4 polls that spun 2 ms each: busy {:?}", s.busy);
    assert_eq!(s.slow_polls, 4, "each of those polls was slow");
    assert!(s.slow_poll_busy >= spun);
    assert!(s.poll_time_quantile(0.5).unwrap() >= Duration::from_millis(2).mul_f64(0.99));
    assert!(s.poll_time_quantile(0.99).unwrap() >= Duration::from_millis(2).mul_f64(0.99));

    // Every task spawned is in exactly one group.
    let snap = t.snapshot();
    let groups = t.task_groups();
    assert_eq!(groups.iter().map(|g| g.spawned).sum::<u64>(), snap.tasks_spawned, "{groups:#?}");
    let finished: u64 = groups.iter().map(|g| g.completed + g.cancelled + g.panicked).sum();
    assert_eq!(finished, snap.tasks_completed + snap.tasks_cancelled + snap.tasks_panicked);
}

/// 150 distinct names make the first 100 groups in the order they came; the other 50
/// names' tasks all count in `other`, and no task is lost or counted twice.
#[test]
fn past_100_groups_the_rest_count_in_other() {
    let rt = recording(2);
    let t = rt.handle().telemetry();
    let handles: Vec<_> = (0..150)
        .flat_map(|i| (0..2).map(move |_| i))
        .map(|i| volt::task::Builder::new().name(format!("n{i}")).spawn_on(async {}, rt.handle()))
        .collect();
    for h in handles {
        rt.block_on(h).unwrap();
    }
    let groups = t.task_groups();
    assert_eq!(groups.len(), MAX_TASK_GROUPS + 1, "{:?}", groups.iter().map(|g| &g.name).collect::<Vec<_>>());
    for (i, g) in groups[..MAX_TASK_GROUPS].iter().enumerate() {
        assert_eq!(
            (g.name.as_str(), g.kind, g.spawned, g.completed),
            (format!("n{i}").as_str(), TaskGroupKind::Named, 2, 2)
        );
    }
    let other = &groups[MAX_TASK_GROUPS];
    assert_eq!(
        (other.name.as_str(), other.kind, other.spawned, other.completed),
        (OTHER_TASK_GROUP, TaskGroupKind::Other, 100, 100)
    );
    assert_eq!(groups.iter().map(|g| g.spawned).sum::<u64>(), 300);
    assert_eq!(t.snapshot().tasks_spawned, 300);
}

/// Tasks the runtime's shutdown cancels count as cancelled in their group, and a
/// panicking task as panicked.
#[test]
fn cancelled_and_panicked_tasks_end_in_their_group() {
    let rt = recording(1);
    let t = rt.handle().telemetry();
    let aborted = volt::task::Builder::new().name("ends").spawn_on(std::future::pending::<()>(), rt.handle());
    let panics = volt::task::Builder::new().name("ends").spawn_on(async { panic!("on purpose") }, rt.handle());
    assert!(rt.block_on(panics).unwrap_err().is_panic());
    aborted.abort();
    assert!(rt.block_on(aborted).unwrap_err().is_cancelled());
    let _left = volt::task::Builder::new().name("ends").spawn_on(std::future::pending::<()>(), rt.handle());
    let g = group_when(&t, "ends", |g| g.alive == 1);
    assert_eq!((g.spawned, g.completed, g.cancelled, g.panicked), (3, 0, 1, 1));
    drop(rt);
    let g = t.task_groups().into_iter().find(|g| g.name == "ends").unwrap();
    assert_eq!((g.spawned, g.alive, g.cancelled, g.panicked), (3, 0, 2, 1), "shutdown cancelled the last one");
}

/// Without task statistics there are no groups, and the workers still count their
/// busy time (polls are timed by default): at least what a task spun.
#[test]
fn without_the_ring_no_groups_but_busy_time_still_counts() {
    let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    let t = rt.handle().telemetry();
    rt.block_on(rt.spawn(async { spin(Duration::from_millis(5)) })).unwrap();
    assert!(t.task_groups().is_empty());
    let spun = Duration::from_millis(5).mul_f64(0.99).as_nanos() as u64;
    assert!(
        wait_until(LONG, || t.snapshot().workers[0].busy_ns >= spun),
        "busy {} ns after a 5 ms spin",
        t.snapshot().workers[0].busy_ns
    );
}

/// A spawn location reads as `file:line:column`, and a task named like one is read
/// with that group, once (no two groups share a name).
#[test]
fn group_names_are_unique() {
    let rt = recording(1);
    let t = rt.handle().telemetry();
    let (h, line) = (rt.spawn(async {}), line!());
    rt.block_on(h).unwrap();
    let location = t.task_groups().into_iter().find(|g| g.kind == TaskGroupKind::SpawnLocation).unwrap();
    assert!(location.name.starts_with(&format!("{}:{line}:", file!())), "{}", location.name);
    let named = volt::task::Builder::new().name(location.name.clone()).spawn_on(async {}, rt.handle());
    rt.block_on(named).unwrap();
    let groups = t.task_groups();
    let names: std::collections::HashSet<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names.len(), groups.len(), "{groups:#?}");
    assert_eq!(groups.iter().map(|g| g.spawned).sum::<u64>(), 2);
}

/// A thread that is none of the workers remembers the last spawn location it looked up.
/// Spawns from two lines in turn each land in their own line's group. So do they in a
/// second runtime made after the first is gone, whose table numbers the groups another
/// way (a task spawned from another thread takes the first number there): an answer
/// remembered from the first runtime would count them in the wrong group.
#[test]
fn spawns_off_the_workers_count_in_their_own_locations_group() {
    // Each spawns from one line, and says which.
    fn spawn_a(rt: &volt::Runtime) -> (volt::task::JoinHandle<()>, u32) {
        (rt.spawn(async {}), line!())
    }
    fn spawn_b(rt: &volt::Runtime) -> (volt::task::JoinHandle<()>, u32) {
        (rt.spawn(async {}), line!())
    }
    for second in [false, true] {
        let rt = recording(1);
        let t = rt.handle().telemetry();
        let mut elsewhere = 0;
        if second {
            // From another thread, which remembers its own last lookup.
            let (other, line) = std::thread::scope(|s| s.spawn(|| (rt.spawn(async {}), line!())).join().unwrap());
            rt.block_on(other).unwrap();
            elsewhere = line;
        }
        let mut joins = Vec::new();
        let mut lines = [0; 2];
        let mut spawn = |which: usize| {
            let (j, line) = if which == 0 { spawn_a(&rt) } else { spawn_b(&rt) };
            lines[which] = line;
            joins.push(j);
        };
        // The first runtime ends with a spawn from `b`; the second starts with one.
        if second {
            spawn(1);
        }
        for _ in 0..5 {
            spawn(0);
            spawn(0);
            spawn(1);
        }
        for j in joins {
            rt.block_on(j).unwrap();
        }
        let groups = t.task_groups();
        let spawned_at = |line: u32| {
            let at = format!("{}:{line}:", file!());
            groups.iter().filter(|g| g.name.starts_with(&at)).map(|g| g.spawned).sum::<u64>()
        };
        let got = (spawned_at(lines[0]), spawned_at(lines[1]));
        assert_eq!(got, (10, 5 + second as u64), "second runtime: {second}: {groups:#?}");
        if second {
            assert_eq!(spawned_at(elsewhere), 1, "{groups:#?}");
        }
        drop(rt);
    }
}
