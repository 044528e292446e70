//! The task list at scale: the console server's task index, its pages and windows, and
//! `volt-console --once --tasks` against a runtime with many live tasks.

use std::collections::HashSet;
use std::time::{Duration, Instant};
use tonic::Code;
use volt_console::client;
use volt_console_proto as proto;
use volt_console_proto::console_client::ConsoleClient;
use volt_console_proto::prost::Message;

/// gRPC's default limit on a received message, which a stock client keeps.
const GRPC_DEFAULT_LIMIT: usize = 4 << 20;

fn runtime(workers: usize) -> volt::Runtime {
    volt::runtime::Builder::new()
        .worker_threads(workers)
        .event_ring(1024)
        .console_bind("127.0.0.1:0")
        .console_publish_interval(Duration::from_millis(20))
        .build()
        .expect("runtime with console")
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A client with tonic's default message limits, as any gRPC user would have.
async fn stock_client(rt: &volt::Runtime) -> ConsoleClient<tonic::transport::Channel> {
    ConsoleClient::connect(format!("http://{}", rt.console_addr().unwrap())).await.expect("connect")
}

/// Spawn `n` tasks that wait forever (dropped at shutdown) and wait until all of them
/// have been polled once. Returns their ids.
fn spawn_sleepers(rt: &volt::Runtime, n: usize, name: impl Fn(usize) -> Option<String>) -> Vec<u64> {
    let before = rt.handle().telemetry().snapshot();
    let polled0: u64 = before.workers.iter().map(|w| w.tasks_polled).sum();
    let ids = (0..n)
        .map(|i| {
            let fut = std::future::pending::<()>();
            match name(i) {
                Some(n) => volt::task::Builder::new().name(n).spawn_on(fut, rt.handle()).id().as_u64(),
                None => rt.spawn(fut).id().as_u64(),
            }
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = rt.handle().telemetry().snapshot();
        let polled: u64 = s.workers.iter().map(|w| w.tasks_polled).sum();
        if polled >= polled0 + n as u64 {
            break;
        }
        assert!(Instant::now() < deadline, "the sleepers were not all polled within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    ids
}

/// The runtime's own count of live tasks.
fn alive(rt: &volt::Runtime) -> u64 {
    rt.handle().telemetry().snapshot().tasks_alive
}

/// With 200k live tasks a stock client gets `GetSnapshot` and a stream's first update,
/// both under gRPC's 4 MiB limit, and the counts are the runtime's.
#[test]
fn get_snapshot_at_200k_tasks_is_bounded_and_counts_every_task() {
    let rt = runtime(2);
    let n = 200_000;
    spawn_sleepers(&rt, n, |_| None);
    // Long names: one page of them must still stay under the bound.
    spawn_sleepers(&rt, 10_000, |i| Some(format!("{i:05}-{}", "x".repeat(1_000))));
    let total = (n + 10_000) as u64;
    assert_eq!(alive(&rt), total);
    tokio_rt().block_on(async {
        let mut c = stock_client(&rt).await;
        let u = c.get_snapshot(proto::SnapshotRequest::default()).await.expect("a stock client reads it").into_inner();
        assert!(u.encoded_len() < GRPC_DEFAULT_LIMIT, "{} bytes", u.encoded_len());
        let t = u.tasks.as_ref().expect("tasks");
        let counts = t.counts.clone().unwrap();
        assert_eq!(counts.total, total, "every live task counted");
        assert_eq!(counts.idle + counts.scheduled + counts.running, total, "{counts:?}");
        assert_eq!(t.changed.len(), volt::console::DEFAULT_TASK_LIMIT as usize, "the default page");
        assert!(u.tasks_more);
        let ids: Vec<u64> = t.changed.iter().map(|t| t.id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "by id");

        // The largest page there is, of the longest names: cut under the size bound.
        let q = proto::TaskQuery {
            sort: proto::TaskSort::Name as i32,
            limit: volt::console::MAX_TASK_LIMIT,
            ..Default::default()
        };
        let u = c.get_snapshot(proto::SnapshotRequest { task_query: Some(q.clone()) }).await.unwrap().into_inner();
        assert!(u.encoded_len() < GRPC_DEFAULT_LIMIT, "{} bytes", u.encoded_len());
        let t = u.tasks.unwrap();
        assert!(u.tasks_more && !t.changed.is_empty() && t.changed.len() < 10_000, "{}", t.changed.len());
        assert!(t.changed.iter().all(|t| t.name.as_ref().is_some_and(|n| n.len() <= 256)));
        let page = c.list_tasks(q).await.unwrap().into_inner();
        assert!(page.encoded_len() <= volt::console::MAX_PAGE_BYTES + 1024);
        assert!(page.more);

        // A stream's first update, from the same stock client.
        let mut stream = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let first = stream.message().await.expect("under the limit").expect("an update");
        assert!(first.encoded_len() < GRPC_DEFAULT_LIMIT);
        let t = first.tasks.unwrap();
        assert_eq!(t.counts.unwrap().total, total);
        assert_eq!(t.matching, total);
        assert_eq!(t.view.len(), t.changed.len());
    });
}

/// `--once --json --tasks all` lists every live task exactly once, even while other tasks
/// come and go; `--tasks N` lists N and says there are more.
#[test]
fn once_tasks_all_lists_every_task_exactly_once() {
    let rt = runtime(2);
    let n = 30_000;
    let sleepers: HashSet<u64> =
        spawn_sleepers(&rt, n, |i| (i % 3 == 0).then(|| format!("sleeper-{i}"))).into_iter().collect();
    // Churn: short tasks spawned and finished throughout.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (stop, handle) = (stop.clone(), rt.handle().clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..100 {
                    handle.spawn(async { volt::task::yield_now().await });
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let addr = rt.console_addr().unwrap().to_string();
    let once = |args: &[&str]| {
        let out = std::process::Command::new(bin).arg("--once").args(args).arg(&addr).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let v: serde_json::Value = serde_json::from_str(&once(&["--json", "--tasks", "all"])).expect("JSON on stdout");
    let listed = v["tasks"]["changed"].as_array().expect("a task array");
    let mut seen = HashSet::new();
    for t in listed {
        assert!(seen.insert(t["id"].as_u64().unwrap()), "task {} listed twice", t["id"]);
        assert!(t["state"].is_string(), "{t}");
    }
    let missing = sleepers.iter().filter(|id| !seen.contains(id)).count();
    assert_eq!(missing, 0, "every sleeper listed ({} listed)", listed.len());
    assert_eq!(v["tasks_more"], serde_json::Value::Bool(false));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();

    // Quiet now: the listing is the live set, no more, no less.
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(&rt) != n as u64 {
        assert!(Instant::now() < deadline, "the churn did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
    let v: serde_json::Value = serde_json::from_str(&once(&["--json", "--tasks", "all"])).unwrap();
    let ids: HashSet<u64> =
        v["tasks"]["changed"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, sleepers);
    assert_eq!(v["tasks"]["counts"]["total"], n as u64);

    let v: serde_json::Value = serde_json::from_str(&once(&["--json", "--tasks", "5", "--sort", "busy"])).unwrap();
    assert_eq!(v["tasks"]["changed"].as_array().unwrap().len(), 5);
    assert_eq!(v["tasks_more"], serde_json::Value::Bool(true));
    let text = once(&["--tasks", "3"]);
    assert!(text.contains(&format!("tasks   {n} live")), "{text}");
    assert!(text.contains("3 listed (more: --tasks all)"), "{text}");
    let bad = std::process::Command::new(bin).args(["--once", "--tasks", "lots", &addr]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("neither a number of tasks nor `all`"));
}

/// Read updates until `done` says so (or fail after 30 s).
async fn read_until(
    stream: &mut tonic::Streaming<proto::Update>,
    mut done: impl FnMut(&proto::Update) -> bool,
) -> Vec<proto::Update> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let u = tokio::time::timeout_at(deadline, stream.message()).await.expect("within 30 s").unwrap().unwrap();
        let stop = done(&u);
        seen.push(u);
        if stop {
            return seen;
        }
    }
}

/// A task that changes is in the stream's next updates; one that does not is never sent
/// again; one that finishes is removed.
#[test]
fn a_changed_task_is_sent_and_an_unchanged_one_is_not_resent() {
    let rt = runtime(2);
    let still: HashSet<u64> = spawn_sleepers(&rt, 50, |_| None).into_iter().collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let changer = volt::task::Builder::new()
        .name("changer")
        .spawn_on(async move { while rx.recv().await.is_some() {} }, rt.handle())
        .id()
        .as_u64();
    tokio_rt().block_on(async {
        let mut c = client::connect(&rt.console_addr().unwrap().to_string()).await.unwrap();
        let q = proto::TaskQuery { sort: proto::TaskSort::Id as i32, ..Default::default() };
        let req = proto::WatchRequest { task_query: Some(q), ..Default::default() };
        let mut stream = c.watch_updates(req).await.unwrap().into_inner();
        let first = stream.message().await.unwrap().unwrap();
        let t = first.tasks.unwrap();
        assert!(t.full);
        let ids: HashSet<u64> = t.changed.iter().map(|t| t.id).collect();
        assert!(still.is_subset(&ids) && ids.contains(&changer), "the first update holds the window");
        let polls_of = |u: &proto::Update| {
            u.tasks.as_ref().and_then(|t| t.changed.iter().find(|t| t.id == changer)).map(|t| t.polls)
        };
        let polls0 = t.changed.iter().find(|t| t.id == changer).unwrap().polls;

        for round in 1..=3u64 {
            tx.send(()).unwrap();
            let updates = read_until(&mut stream, |u| polls_of(u).is_some_and(|p| p >= polls0 + round)).await;
            for u in &updates {
                let t = u.tasks.as_ref().unwrap();
                assert!(!t.full);
                assert!(t.changed.iter().all(|t| !still.contains(&t.id)), "an unchanged task was resent");
                assert_eq!(t.counts.as_ref().unwrap().total, 51);
            }
        }
        // Quiet: nothing is sent at all, though the counts still come.
        let quiet = read_until(&mut stream, |_| true).await;
        let quiet = [quiet, read_until(&mut stream, |_| true).await].concat();
        let resent: usize = quiet.iter().map(|u| u.tasks.as_ref().unwrap().changed.len()).sum();
        assert!(resent <= 1, "at most the changer's last poll once more: {resent}");

        drop(tx);
        let updates = read_until(&mut stream, |u| u.tasks.as_ref().unwrap().removed.contains(&changer)).await;
        let last = updates.last().unwrap().tasks.as_ref().unwrap();
        assert_eq!(last.counts.as_ref().unwrap().total, 50);
        assert!(!last.view.contains(&changer));
    });
}

/// The server sorts and filters: the top N by busy time, by name, by state, and a
/// stream's window follows `SetTaskQuery`.
#[test]
fn the_server_sorts_and_filters_the_top_n() {
    let rt = runtime(2);
    spawn_sleepers(&rt, 200, |i| Some(format!("idle-{i:03}")));
    // Five tasks, each polled a different number of times (3k + 1), and busy for a while.
    let mut busy = Vec::new();
    for k in 1..=5u64 {
        let h = volt::task::Builder::new().name(format!("busy-{k}")).spawn_on(
            async move {
                for _ in 0..3 * k {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(1) {
                        std::hint::spin_loop();
                    }
                    volt::task::yield_now().await;
                }
                std::future::pending::<()>().await
            },
            rt.handle(),
        );
        busy.push(h.id().as_u64());
    }
    // One task inside a long poll: running (until this guard goes, even on a failed
    // assertion, so the runtime's drop does not wait on it forever).
    struct Release(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let release = Release(std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let running = {
        let release = release.0.clone();
        rt.spawn(async move {
            while !release.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let settled = |t: &volt::telemetry::TaskInfo| match busy.iter().position(|&id| id == t.id) {
        Some(k) => t.polls == 3 * (k as u64 + 1) + 1,
        None => t.polls > 0,
    };
    while rt.handle().telemetry().tasks().iter().filter(|t| settled(t)).count() < 205 {
        assert!(Instant::now() < deadline, "not all tasks were polled");
        std::thread::sleep(Duration::from_millis(5));
    }
    tokio_rt().block_on(async {
        let mut c = client::connect(&rt.console_addr().unwrap().to_string()).await.unwrap();
        let list = |q: proto::TaskQuery| {
            let mut c = c.clone();
            async move { c.list_tasks(q).await.unwrap().into_inner() }
        };
        let ids = |p: &proto::TaskPage| p.tasks.iter().map(|t| t.id).collect::<Vec<_>>();

        // Every task, to check the server's top N against.
        let everything = list(proto::TaskQuery { limit: 1000, ..Default::default() }).await;
        assert_eq!(everything.tasks.len(), 206);
        let top_by = |key: fn(&proto::Task) -> u64, n: usize| {
            let mut v: Vec<&proto::Task> = everything.tasks.iter().collect();
            v.sort_by_key(|t| (std::cmp::Reverse(key(t)), t.id));
            v.iter().take(n).map(|t| t.id).collect::<Vec<_>>()
        };
        let top = list(proto::TaskQuery { sort: proto::TaskSort::Busy as i32, limit: 4, ..Default::default() }).await;
        assert_eq!(ids(&top), top_by(|t| t.busy_ns, 4), "{:?}", top.tasks);
        assert!(top.more);
        assert_eq!(top.matching, 206);
        assert_eq!(top.counts.as_ref().unwrap().total, 206);
        let top = list(proto::TaskQuery { sort: proto::TaskSort::Polls as i32, limit: 3, ..Default::default() }).await;
        assert_eq!(ids(&top), [busy[4], busy[3], busy[2]], "{:?}", top.tasks);
        assert_eq!(ids(&top), top_by(|t| t.polls, 3));
        let top =
            list(proto::TaskQuery { sort: proto::TaskSort::Scheduled as i32, limit: 7, ..Default::default() }).await;
        assert_eq!(ids(&top), top_by(|t| t.scheduled_ns, 7));

        let named = list(proto::TaskQuery {
            sort: proto::TaskSort::Name as i32,
            name_contains: "busy-".into(),
            ..Default::default()
        })
        .await;
        assert_eq!(ids(&named), busy);
        assert_eq!(named.matching, 5);
        assert!(!named.more);

        let run = list(proto::TaskQuery { states: vec![proto::TaskState::Running as i32], ..Default::default() }).await;
        assert_eq!(ids(&run), [running.id().as_u64()], "{:?}", run.tasks);
        assert_eq!(run.counts.as_ref().unwrap().running, 1);
        let idle = list(proto::TaskQuery {
            states: vec![proto::TaskState::Idle as i32],
            name_contains: "idle-1".into(),
            offset: 10,
            limit: 5,
            ..Default::default()
        })
        .await;
        assert_eq!(idle.matching, 100, "idle-100 to idle-199");
        let names: Vec<_> = idle.tasks.iter().map(|t| t.name.clone().unwrap()).collect();
        assert_eq!(names.len(), 5);
        assert!(names.iter().all(|n| n.starts_with("idle-1")));

        // Keyset paging by id: three pages of 70 cover every task once.
        let mut after = 0;
        let mut all = Vec::new();
        loop {
            let p = list(proto::TaskQuery { after_id: after, limit: 70, ..Default::default() }).await;
            all.extend(ids(&p));
            after = p.next_after_id;
            if !p.more {
                break;
            }
        }
        assert_eq!(all.len(), 206);
        assert!(all.windows(2).all(|w| w[0] < w[1]));

        // Bad queries are clear errors.
        let mut c2 = c.clone();
        let e = c2.list_tasks(proto::TaskQuery { limit: 1_000_000, ..Default::default() }).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        let e = c2
            .list_tasks(proto::TaskQuery { sort: proto::TaskSort::Busy as i32, after_id: 5, ..Default::default() })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        let e = c2.list_tasks(proto::TaskQuery { sort: 99, ..Default::default() }).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        let e = c2.set_task_query(proto::SetTaskQueryRequest { watch_id: 12345, query: None }).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{e:?}");

        // A stream's window follows SetTaskQuery.
        let mut stream = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert!(first.watch_id != 0);
        assert_eq!(first.tasks.as_ref().unwrap().view.len(), 206);
        let q = proto::TaskQuery {
            sort: proto::TaskSort::Name as i32,
            name_contains: "busy-".into(),
            ..Default::default()
        };
        // Another client, which knows its own stream's id, cannot find this one's by
        // guessing: ids are not handed out in order.
        let mut other = c2.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let other_id = other.message().await.unwrap().unwrap().watch_id;
        assert!(other_id != 0 && other_id != first.watch_id);
        let guesses = (1..=1000).chain((1..=100).flat_map(|d| [other_id.wrapping_add(d), other_id.wrapping_sub(d)]));
        for guess in guesses {
            if guess == first.watch_id {
                panic!("stream ids are guessable: {guess} is one of the first thousand or next to {other_id}");
            }
        }
        let hostile = proto::TaskQuery { name_contains: "no such task".into(), ..Default::default() };
        let e = c2
            .set_task_query(proto::SetTaskQueryRequest { watch_id: other_id.wrapping_add(1), query: Some(hostile) })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
        drop(other);
        let page = c.set_task_query(proto::SetTaskQueryRequest { watch_id: first.watch_id, query: Some(q) }).await;
        assert_eq!(ids(&page.unwrap().into_inner()), busy);
        let updates = read_until(&mut stream, |u| u.tasks.as_ref().unwrap().query_generation == 1).await;
        let t = updates.last().unwrap().tasks.as_ref().unwrap();
        assert!(t.full);
        assert_eq!(t.view, busy);
        assert_eq!(t.matching, 5);
    });
    drop(release);
}

/// The TUI keeps the window it asked for and nothing more: with a million matching tasks
/// it holds at most `TASK_WINDOW` rows, asks for a window around the selection as it
/// moves, and asks again when the sort or a filter changes.
#[test]
fn the_tui_asks_for_its_window_and_holds_only_it() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use volt_console::app::{Action, App, TASK_WINDOW};
    let key = |c| KeyEvent::new(c, KeyModifiers::NONE);
    let total = 1_000_000u64;
    let page = |offset: u64| proto::TaskPage {
        tasks: (offset..(offset + TASK_WINDOW as u64).min(total))
            .map(|i| proto::Task { id: i + 1, busy_ns: total - i, ..Default::default() })
            .collect(),
        counts: Some(proto::TaskCounts { total, idle: total, ..Default::default() }),
        matching: total,
        more: true,
        next_after_id: 0,
    };
    let mut app = App::new("test");
    let mut u = proto::Update::default();
    let first = page(0);
    u.tasks = Some(proto::TaskChanges {
        view: first.tasks.iter().map(|t| t.id).collect(),
        changed: first.tasks,
        full: true,
        counts: first.counts,
        matching: total,
        ..Default::default()
    });
    app.apply(u);
    let Action::QueryTasks(q) = app.on_key(key(KeyCode::Char('t'))) else { panic!("the first window is asked for") };
    assert_eq!((q.offset, q.limit, q.sort), (0, TASK_WINDOW, proto::TaskSort::Busy as i32));
    app.apply_page(page(0));
    assert_eq!(app.requery(), Action::None, "nothing changed");

    // To the end of a million rows: one query for the window there, and only it is held.
    let Action::QueryTasks(q) = app.on_key(key(KeyCode::End)) else { panic!("End asks for the last window") };
    assert_eq!(app.screen.selected as u64, total - 1);
    assert!(q.offset < total && total - 1 < q.offset + TASK_WINDOW as u64, "{q:?}");
    app.apply_page(page(q.offset));
    assert!(app.model.tasks.len() <= TASK_WINDOW as usize);
    assert_eq!(app.selected_task().map(|r| r.task.id), Some(total), "the selected row is the last task");
    // A step inside the window asks nothing.
    assert_eq!(app.on_key(key(KeyCode::Up)), Action::None);

    // A new sort, a state filter and a name filter each ask again, from the top.
    let Action::QueryTasks(q) = app.on_key(key(KeyCode::Char('p'))) else { panic!("sort") };
    assert_eq!(q.sort, proto::TaskSort::Polls as i32);
    let Action::QueryTasks(q) = app.on_key(key(KeyCode::Char('f'))) else { panic!("state filter") };
    assert_eq!(q.states, [proto::TaskState::Running as i32]);
    assert_eq!(q.offset, 0);
    assert_eq!(app.on_key(key(KeyCode::Char('/'))), Action::None);
    for c in "web".chars() {
        assert_eq!(app.on_key(key(KeyCode::Char(c))), Action::None, "typing asks nothing yet");
    }
    let Action::QueryTasks(q) = app.on_key(key(KeyCode::Enter)) else { panic!("name filter") };
    assert_eq!(q.name_contains, "web");
    assert!(app.model.tasks.len() <= TASK_WINDOW as usize);
}

/// What each task waits on, who woke it and whether it can ever be woken, over gRPC:
/// `GetTask` and the task list carry the wait, the lost waker shows in the counts, and
/// the sort by longest wait puts the oldest wait first.
#[test]
fn get_task_and_the_task_list_say_what_a_task_waits_on() {
    let rt = runtime(2);
    // A sleeper (a wait with a deadline), and a task that can never be woken.
    let sleeper = volt::task::Builder::new()
        .name("sleeper")
        .spawn_on(async { volt::time::sleep(Duration::from_secs(3600)).await }, rt.handle());
    let lost = spawn_sleepers(&rt, 1, |_| Some("lost".into()))[0];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !rt.handle().telemetry().tasks().iter().any(|t| t.id == sleeper.id().as_u64() && t.waiting_on.is_some()) {
        assert!(Instant::now() < deadline, "the sleeper never waited");
        std::thread::sleep(Duration::from_millis(5));
    }
    tokio_rt().block_on(async {
        let mut c = stock_client(&rt).await;
        let d = c.get_task(proto::TaskRequest { id: sleeper.id().as_u64() }).await.unwrap().into_inner();
        let t = d.task.unwrap();
        assert!(t.waiting_on.as_deref().is_some_and(|w| w.starts_with("sleep until +")), "{t:?}");
        assert_eq!(t.waiting_kind.as_deref(), Some("sleep"));
        assert!(t.waiting_since_ns.is_some() && !t.lost_waker, "{t:?}");
        let polls = d.poll_histogram.expect("a poll-time histogram");
        assert_eq!(polls.buckets.iter().sum::<u64>(), t.polls, "one count per poll");
        let d = c.get_task(proto::TaskRequest { id: lost }).await.unwrap().into_inner();
        assert!(d.task.unwrap().lost_waker, "its waker was dropped");
        // The index counts it, and the longest wait sorts first among idle tasks.
        let q = proto::TaskQuery { sort: proto::TaskSort::Wait as i32, limit: 10, ..Default::default() };
        let page = c.list_tasks(q).await.unwrap().into_inner();
        let counts = page.counts.unwrap();
        assert_eq!(counts.lost_waker, 1, "{counts:?}");
        assert_eq!(counts.lost_waker_ids, vec![lost]);
        let waits: Vec<u64> = page.tasks.iter().filter_map(|t| t.waiting_since_ns).collect();
        assert!(waits.windows(2).all(|w| w[0] >= w[1]), "longest wait first: {waits:?}");
        let row = page.tasks.iter().find(|t| t.id == sleeper.id().as_u64()).expect("listed");
        assert!(row.waiting_on.as_deref().is_some_and(|w| w.starts_with("sleep")), "{row:?}");
    });
}

/// Pending forever under a label, keeping its latest waker in `slot`.
struct Labelled {
    slot: std::sync::Arc<std::sync::Mutex<Option<std::task::Waker>>>,
}

impl std::future::Future for Labelled {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        volt::task::waiting_on("db pool permit");
        std::task::Poll::Pending
    }
}

/// A Volt stream connected to a plain listener whose end, kept in `peers`, never reads
/// or writes.
async fn connected(peers: &std::sync::Mutex<Vec<std::net::TcpStream>>) -> volt::net::TcpStream {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = volt::net::TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    peers.lock().unwrap().push(l.accept().unwrap().0);
    s
}

/// `GetTask` says what every kind of wait is, word for word as `Telemetry::tasks` does,
/// and names the task that woke a task last.
#[test]
fn get_task_carries_every_kind_of_wait_and_the_waking_task() {
    use futures::{AsyncReadExt, AsyncWriteExt};
    let rt = runtime(2);
    fn spawn<F: std::future::Future<Output = ()> + Send + 'static>(rt: &volt::Runtime, name: &str, f: F) -> u64 {
        volt::task::Builder::new().name(name).spawn_on(f, rt.handle()).id().as_u64()
    }
    let mut ids: Vec<(&str, u64)> = Vec::new();
    ids.push((
        "accept",
        spawn(&rt, "acceptor", async {
            let l = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let _ = l.accept().await;
        }),
    ));
    let peers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let p = peers.clone();
    ids.push((
        "read",
        spawn(&rt, "reader", async move {
            let mut s = connected(&p).await;
            let _ = s.read(&mut [0u8; 16]).await;
        }),
    ));
    let p = peers.clone();
    ids.push((
        "write",
        spawn(&rt, "writer", async move {
            let mut s = connected(&p).await;
            // The peer never reads: the buffers fill and the write waits.
            let chunk = vec![7u8; 1 << 20];
            while s.write(&chunk).await.is_ok() {}
        }),
    ));
    ids.push((
        "recv",
        spawn(&rt, "receiver", async {
            let u = volt::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let _ = u.recv_from(&mut [0u8; 16]).await;
        }),
    ));
    ids.push(("sleep", spawn(&rt, "sleeper", async { volt::time::sleep(Duration::from_secs(3600)).await })));
    ids.push((
        "timeout",
        spawn(&rt, "timeout", async {
            let _ = volt::time::timeout(Duration::from_secs(3600), std::future::pending::<()>()).await;
        }),
    ));
    ids.push((
        "interval",
        spawn(&rt, "interval", async {
            let mut i = volt::time::interval(Duration::from_secs(3600));
            i.tick().await;
            i.tick().await;
        }),
    ));
    let target = volt::task::Builder::new()
        .name("target")
        .spawn_on(async { volt::time::sleep(Duration::from_secs(3600)).await }, rt.handle());
    ids.push((
        "join",
        spawn(&rt, "joiner", async move {
            let _ = target.await;
        }),
    ));
    let (release, released) = std::sync::mpsc::channel::<()>();
    ids.push((
        "blocking",
        spawn(&rt, "blocker", async move {
            let _ = volt::task::spawn_blocking(move || released.recv()).await;
        }),
    ));
    let slot = std::sync::Arc::new(std::sync::Mutex::new(None));
    let parked = spawn(&rt, "labelled", Labelled { slot: slot.clone() });
    ids.push(("db pool permit", parked));

    let idle = |rt: &volt::Runtime| {
        let tasks = rt.handle().telemetry().tasks();
        ids.iter().all(|(_, id)| {
            tasks.iter().any(|t| t.id == *id && t.state == volt::telemetry::TaskState::Idle && t.waiting_on.is_some())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !idle(&rt) {
        assert!(
            Instant::now() < deadline,
            "not every task settled on its wait: {:#?}",
            rt.handle().telemetry().tasks()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Wake the labelled task from another task: it polls, waits on its label again, and
    // was last woken by that task.
    let waker_task = volt::task::Builder::new()
        .name("waker")
        .spawn_on(
            {
                let slot = slot.clone();
                async move {
                    if let Some(w) = slot.lock().unwrap().take() {
                        w.wake();
                    }
                }
            },
            rt.handle(),
        )
        .id()
        .as_u64();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !rt.handle().telemetry().tasks().iter().any(|t| {
        t.id == parked && t.polls >= 2 && t.last_woken_by == Some(volt::telemetry::WakeSource::Task(waker_task))
    }) {
        assert!(Instant::now() < deadline, "the labelled task was not woken by the waker task");
        std::thread::sleep(Duration::from_millis(5));
    }
    let local: Vec<volt::telemetry::TaskInfo> = rt.handle().telemetry().tasks();
    tokio_rt().block_on(async {
        let mut c = stock_client(&rt).await;
        for (kind, id) in &ids {
            let t = c.get_task(proto::TaskRequest { id: *id }).await.unwrap().into_inner().task.unwrap();
            assert_eq!(t.waiting_kind.as_deref(), Some(*kind), "{t:?}");
            let here = local.iter().find(|l| l.id == *id).unwrap().waiting_on.clone().unwrap();
            let there = t.waiting_on.clone().unwrap();
            assert!(there.starts_with(kind), "{kind}: {there}");
            if !matches!(*kind, "sleep" | "timeout" | "interval") {
                // No time left to count down: the same words on both sides.
                assert_eq!(there, here.to_string(), "{kind}");
            }
        }
        let t = c.get_task(proto::TaskRequest { id: parked }).await.unwrap().into_inner().task.unwrap();
        assert_eq!(t.last_woken_by_task, Some(waker_task), "{t:?}");
        assert_eq!(t.last_woken_by.as_deref(), Some(format!("task {waker_task}").as_str()));
    });
    release.send(()).unwrap();
    drop(peers);
}

/// Blocks its worker (200 ms at a time) until the runtime has reported a stall.
#[inline(never)]
fn holds_the_worker_until_reported(t: &volt::telemetry::Telemetry) {
    let start = Instant::now();
    while t.snapshot().stalls_total == 0 && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A stall reaches `GetSnapshot`, a stream opened after it (in its first update), and a
/// stream open while it happened (in exactly one update).
#[test]
fn a_stall_reaches_get_snapshot_and_each_stream_once() {
    let rt = runtime(2);
    tokio_rt().block_on(async {
        let mut c = stock_client(&rt).await;
        let mut before = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let first = before.message().await.unwrap().unwrap();
        assert!(first.snapshot.unwrap().recent_stalls.is_empty(), "no stall yet");
        let t = rt.handle().telemetry();
        let blocker = volt::task::Builder::new()
            .name("blocker")
            .spawn_on(async move { holds_the_worker_until_reported(&t) }, rt.handle());
        // The stream open during the stall gets it once.
        let mut got = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while got == 0 {
            assert!(Instant::now() < deadline, "the open stream never got the stall");
            let u = before.message().await.unwrap().unwrap();
            got += u.snapshot.unwrap().recent_stalls.len();
        }
        assert_eq!(got, 1);
        let snap = c.get_snapshot(proto::SnapshotRequest::default()).await.unwrap().into_inner().snapshot.unwrap();
        assert_eq!(snap.recent_stalls.len(), 1, "GetSnapshot carries the stall");
        assert_eq!(snap.recent_stalls[0].task_name.as_deref(), Some("blocker"));
        let mut after = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let first = after.message().await.unwrap().unwrap();
        assert_eq!(first.snapshot.unwrap().recent_stalls.len(), 1, "a new stream's first update carries it");
        // Neither stream gets it again.
        for _ in 0..5 {
            for s in [&mut before, &mut after] {
                let u = s.message().await.unwrap().unwrap();
                assert!(u.snapshot.unwrap().recent_stalls.is_empty(), "a stall is sent once per stream");
            }
        }
        blocker.await.unwrap();
    });
}

/// The console's thread is shared fairly among connections: twelve streams on one
/// connection, each with a name filter that makes its window walk all 500,000 tasks
/// twice (a publish may spend one such window), do not hold up a filtered stream on
/// another connection. Each task spawned to match the filter is in that stream's window
/// within a few publishes (the connections take turns, so at most every other publish);
/// the twelve take turns among themselves and each of them gets it too.
#[test]
fn a_connection_with_many_costly_streams_waits_its_own_turn() {
    let rt = runtime(2);
    spawn_sleepers(&rt, 500_000, |i| Some(format!("filler-{i}")));
    tokio_rt().block_on(async {
        let addr = rt.console_addr().unwrap().to_string();
        let query =
            proto::TaskQuery { sort: proto::TaskSort::Id as i32, name_contains: "needle".into(), ..Default::default() };
        let req =
            || proto::WatchRequest { task_query: Some(query.clone()), max_events_per_update: 1, ..Default::default() };
        // One connection, twelve streams, each read as fast as it comes.
        let greedy = client::connect(&addr).await.unwrap();
        let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Vec<u64>)>();
        for s in 0..12 {
            let mut c = greedy.clone();
            let mut stream = c.watch_updates(req()).await.unwrap().into_inner();
            let seen_tx = seen_tx.clone();
            tokio::spawn(async move {
                while let Ok(Some(u)) = stream.message().await {
                    if let Some(t) = u.tasks {
                        if seen_tx.send((s, t.view)).is_err() {
                            return;
                        }
                    }
                }
            });
        }
        let mut other = client::connect(&addr).await.unwrap();
        let mut mine = other.watch_updates(req()).await.unwrap().into_inner();
        let mut needles = Vec::new();
        for round in 0..3 {
            let id = volt::task::Builder::new()
                .name(format!("needle-{round}"))
                .spawn_on(std::future::pending::<()>(), rt.handle())
                .id()
                .as_u64();
            needles.push(id);
            // A snapshot after the spawn: its page takes the spawn into the index, and
            // its `seq` is the publish under way. Counted in publishes from there, not in
            // updates received, so updates waiting in buffers on the way do not count.
            let before = other.get_snapshot(proto::SnapshotRequest::default()).await.unwrap().into_inner().seq;
            let updates = read_until(&mut mine, |u| u.tasks.as_ref().is_some_and(|t| t.view.contains(&id))).await;
            let at = updates.last().unwrap().seq;
            // Publishes this stream missed (its channel was full while the test waited
            // for the snapshot) did not work for it, and are not its turns.
            let missed: u64 = updates.iter().filter(|u| u.seq > before).map(|u| u.updates_missed).sum();
            let turns = at - before - missed.min(at - before);
            // The next publish, or the one after if the other connection's turn came first.
            assert!(
                turns <= 2,
                "round {round}: the needle came {turns} publishes after the snapshot ({missed} missed)"
            );
        }
        // Every one of the twelve gets all three in the end.
        let mut done = std::collections::HashSet::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while done.len() < 12 {
            let (s, view) =
                tokio::time::timeout_at(deadline, seen_rx.recv()).await.expect("every stream within 60 s").unwrap();
            if needles.iter().all(|n| view.contains(n)) {
                done.insert(s);
            }
        }
    });
}

/// The dashboard drawn on a `TestBackend`, as lines of text.
fn screen(app: &volt_console::app::App) -> Vec<String> {
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 40)).unwrap();
    t.draw(|f| volt_console::ui::draw(f, app)).unwrap();
    let b = t.backend().buffer();
    (0..b.area.height).map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect()).collect()
}

/// A task that read a socket and then waits on a `futures` oneshot (which names nothing)
/// says `unknown` over gRPC, in the dashboard's task list and details, and in
/// `volt-console --once --json`; a poll that waited on a sleep and a read at once sends
/// both, the list showing the first and "+1", the details each of them.
#[test]
fn unknown_and_every_wait_of_a_poll_reach_the_wire_the_dashboard_and_once_json() {
    use futures::AsyncReadExt;
    use std::io::Write;
    let rt = runtime(2);
    let (peer_tx, peer_rx) = std::sync::mpsc::channel();
    let (_done_tx, done_rx) = futures::channel::oneshot::channel::<()>();
    let unknown = volt::task::Builder::new()
        .name("read-then-oneshot")
        .spawn_on(
            async move {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = l.local_addr().unwrap();
                let mut s = volt::net::TcpStream::connect(addr).await.unwrap();
                peer_tx.send((l.accept().unwrap().0, addr)).unwrap();
                s.read_exact(&mut [0u8; 1]).await.unwrap();
                let _ = done_rx.await;
            },
            rt.handle(),
        )
        .id()
        .as_u64();
    let peers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let p = peers.clone();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let select = volt::task::Builder::new()
        .name("select")
        .spawn_on(
            async move {
                let mut s = connected(&p).await;
                addr_tx.send(s.peer_addr().unwrap()).unwrap();
                let mut buf = [0u8; 8];
                let sleep = std::pin::pin!(volt::time::sleep(Duration::from_secs(3600)));
                let read = std::pin::pin!(s.read(&mut buf));
                let _ = futures::future::select(sleep, read).await;
            },
            rt.handle(),
        )
        .id()
        .as_u64();
    let (mut peer, read_addr) = peer_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let select_addr = addr_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let local = |id: u64| rt.handle().telemetry().tasks().into_iter().find(|t| t.id == id);
    let settle = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "{what}: {:#?}", rt.handle().telemetry().tasks());
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    settle("the read is named", &|| {
        local(unknown)
            .is_some_and(|t| t.waiting_on == Some(volt::telemetry::WaitReason::Read { addr: Some(read_addr) }))
    });
    let polls = local(unknown).unwrap().polls;
    peer.write_all(b"x").unwrap();
    settle("idle on the oneshot, the select on both", &|| {
        local(unknown).is_some_and(|t| t.polls > polls && t.state == volt::telemetry::TaskState::Idle)
            && local(select).is_some_and(|t| t.waits.len() == 2)
    });
    assert_eq!(local(unknown).unwrap().waits, [volt::telemetry::WaitReason::Unknown]);
    let unknown_wait = proto::TaskWait { description: "unknown".into(), kind: "unknown".into() };
    let read_line = format!("read {select_addr}");
    let check = |t: &proto::Task| {
        if t.id == unknown {
            assert_eq!(t.waiting_on.as_deref(), Some("unknown"), "{t:?}");
            assert_eq!(t.waiting_kind.as_deref(), Some("unknown"), "{t:?}");
            assert_eq!((t.waits.as_slice(), t.more_waits), ([unknown_wait.clone()].as_slice(), 0), "{t:?}");
        } else {
            let kinds: Vec<&str> = t.waits.iter().map(|w| w.kind.as_str()).collect();
            assert_eq!(kinds, ["sleep", "read"], "{t:?}");
            assert_eq!(t.waits[1].description, read_line);
            assert_eq!(t.waiting_on.as_ref(), Some(&t.waits[0].description), "waiting_on is the first");
        }
    };
    let (app, details) = tokio_rt().block_on(async {
        let mut c = stock_client(&rt).await;
        let mut details = std::collections::HashMap::new();
        for id in [unknown, select] {
            let d = c.get_task(proto::TaskRequest { id }).await.unwrap().into_inner();
            check(d.task.as_ref().unwrap());
            details.insert(id, d);
        }
        // The task index's rows (a page, a snapshot) carry the same.
        let q = proto::TaskQuery { limit: 100, ..Default::default() };
        let page = c.list_tasks(q).await.unwrap().into_inner();
        for id in [unknown, select] {
            check(page.tasks.iter().find(|t| t.id == id).expect("listed"));
        }
        let snapshot = c.get_snapshot(proto::SnapshotRequest::default()).await.unwrap().into_inner();
        let mut app = volt_console::app::App::new(rt.console_addr().unwrap().to_string());
        app.status = volt_console::app::Status::Live;
        app.apply(snapshot);
        (app, details)
    });
    // The dashboard: the list shows the first wait and how many more; the details show
    // each wait, and a hint for `unknown`.
    let mut app = app;
    app.screen.view = volt_console::app::View::Tasks;
    let lines = screen(&app);
    let row = |name: &str| lines.iter().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{name}: {lines:#?}"));
    assert!(row("read-then-oneshot").contains("unknown"), "{}", row("read-then-oneshot"));
    let r = row(" select ");
    assert!(r.contains("sleep until +") && r.contains(" +1 "), "{r}");
    for (id, d) in details {
        app.model.open_detail(id);
        app.apply_task(id, Ok(d));
        let lines = screen(&app);
        let has = |text: &str| lines.iter().any(|l| l.contains(text));
        if id == select {
            assert!(has("waiting on  sleep until +"), "{lines:#?}");
            assert!(has(&format!("            {read_line}")), "{lines:#?}");
        } else {
            assert!(has("waiting on  unknown, for "), "{lines:#?}");
            assert!(has("wrap it with .waiting_on(label)"), "{lines:#?}");
        }
    }
    // `--once --json` prints the lists as the wire has them.
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let out = std::process::Command::new(bin)
        .args(["--once", "--json", &rt.console_addr().unwrap().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let task =
        |id: u64| v["tasks"]["changed"].as_array().unwrap().iter().find(|t| t["id"] == id).cloned().expect("listed");
    let t = task(unknown);
    assert_eq!(t["waits"], serde_json::json!([{ "description": "unknown", "kind": "unknown" }]), "{t}");
    assert_eq!(t["more_waits"], 0, "{t}");
    let t = task(select);
    assert_eq!(t["waits"][1], serde_json::json!({ "description": read_line, "kind": "read" }), "{t}");
    drop(peers);
}
