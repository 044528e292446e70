//! The console's client side against a real server: the watcher's backoff and follow,
//! `--once` snapshots, and task histories from before it connected.

mod common;

use common::*;
use std::time::{Duration, Instant};
use volt_console::client;
use volt_console_proto as proto;

#[test]
fn the_watcher_backs_off_then_follows_a_console_that_appears() {
    // A free port with nothing on it yet.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(client::WATCH_BACKLOG);
    let watcher = client::spawn_watcher(addr.to_string(), None, tx);
    let mut waits = Vec::new();
    let mut answered = false;
    while waits.len() < 3 || !answered {
        match rx.recv_timeout(Duration::from_secs(10)).expect("status messages") {
            client::Msg::Status(volt_console::app::Status::Disconnected { retry_in_ms, reason }) => {
                assert!(reason.contains("cannot connect"), "{reason}");
                waits.push(retry_in_ms);
                if waits.len() == 1 {
                    // Asked while waiting to retry: told at once that there is no server.
                    watcher.fetch_task(42);
                }
            }
            client::Msg::Status(_) => {}
            client::Msg::Update(_) | client::Msg::Page(_) => panic!("an update with no server"),
            client::Msg::Task { id, details } => {
                assert_eq!(id, 42);
                let err = details.expect_err("no server, no task");
                assert!(err.contains("not connected"), "{err}");
                answered = true;
            }
        }
    }
    assert_eq!(waits, [100, 200, 400], "the backoff doubles from 100 ms");
    // The process comes up: the watcher connects on its next attempt and streams.
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .console_bind(addr)
        .console_publish_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut live = false;
    loop {
        match rx.recv_timeout(Duration::from_secs(10)).expect("messages") {
            client::Msg::Status(volt_console::app::Status::Live) => live = true,
            client::Msg::Update(u) if live => {
                assert_eq!(u.snapshot.unwrap().workers.len(), 2);
                break;
            }
            _ => {}
        }
        assert!(Instant::now() < deadline, "never went live");
    }
    drop(rt);
}

#[test]
fn once_json_prints_a_snapshot_and_fails_clearly_without_a_server() {
    let rt = runtime(2, true);
    spawn_work(&rt, 100);
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let out = std::process::Command::new(bin)
        .args(["--once", "--json", &rt.console_addr().unwrap().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let workers = v["snapshot"]["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 2);
    for w in workers {
        let state = w["state"].as_str().expect("state as a name");
        assert!(["running", "searching", "parked"].contains(&state), "{state}");
    }
    assert!(v["snapshot"]["tasks_spawned"].as_u64().unwrap() >= 100);
    assert_eq!(v["runtime"]["workers"], 2);
    // Nothing listening: exit 1 with the address in the message.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let out = std::process::Command::new(bin).args(["--once", "--json", &closed]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("cannot connect to {closed}")));
    // Not an address: exit 1 and say what is expected.
    let out = std::process::Command::new(bin).args(["--once", "not-an-address"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected host:port"));
}

#[test]
fn the_watcher_fetches_a_task_history_from_before_it_connected() {
    let rt = runtime(2, true);
    let (h, stop) = spawn_waiter(&rt, "early");
    // The publisher takes the spawn into the server's history before anyone watches.
    std::thread::sleep(Duration::from_millis(200));
    let (tx, rx) = std::sync::mpsc::sync_channel(client::WATCH_BACKLOG);
    let watcher = client::spawn_watcher(rt.console_addr().unwrap().to_string(), None, tx);
    let mut app = volt_console::app::App::new("test");
    let (mut asked, mut answer) = (false, None);
    let mut unknown = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while answer.is_none() || unknown.is_none() {
        assert!(Instant::now() < deadline, "no answer");
        match rx.recv_timeout(Duration::from_secs(10)).expect("messages") {
            client::Msg::Update(u) => {
                app.apply(*u);
                // Once this console's log holds some of the task's polls (which the
                // server's history holds too), open its details as Enter does.
                let logged = app.model.events.iter().filter(|e| e.task_id == h.id().as_u64()).count();
                if !asked && app.model.tasks.contains_key(&h.id().as_u64()) && logged >= 4 {
                    app.model.open_detail(h.id().as_u64());
                    watcher.fetch_task(h.id().as_u64());
                    watcher.fetch_task(u64::MAX);
                    asked = true;
                }
            }
            client::Msg::Task { id, details } if id == h.id().as_u64() => {
                answer = Some(details.expect("the task is live"))
            }
            client::Msg::Task { id, details } => {
                assert_eq!(id, u64::MAX);
                unknown = Some(details.expect_err("no such task"));
            }
            client::Msg::Status(_) | client::Msg::Page(_) => {}
        }
    }
    let unknown = unknown.unwrap();
    assert!(unknown.contains("no live task") && unknown.contains("NotFound"), "{unknown}");
    let d = answer.unwrap();
    assert_eq!(d.task.as_ref().unwrap().name.as_deref(), Some("early"));
    let spawn = |e: &&proto::Event| e.kind == proto::EventKind::Spawn as i32 && e.task_id == h.id().as_u64();
    assert!(d.recent_events.iter().any(|e| spawn(&e)), "the history holds the spawn: {:?}", d.recent_events);
    assert!(!app.model.events.iter().any(|e| spawn(&e)), "the stream began after the spawn");
    app.apply_task(h.id().as_u64(), Ok(*d));
    let (_, events) = app.model.detail_task().unwrap();
    assert!(events.iter().any(spawn), "the detail view shows the spawn");
    let mut seen = std::collections::HashSet::new();
    let polls = events.iter().filter(|e| e.kind == proto::EventKind::PollStart as i32);
    assert!(polls.clone().count() >= 4, "{events:?}");
    assert!(polls.map(|e| (e.timestamp_ns, e.worker)).all(|k| seen.insert(k)), "no poll start twice: {events:?}");
    stop.send(()).unwrap();
    h.join().unwrap();
}

#[test]
fn once_shows_the_tokio_bridge_once_it_runs() {
    let rt = runtime(2, false);
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let addr = rt.console_addr().unwrap().to_string();
    let once = |json: bool| {
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("--once");
        if json {
            cmd.arg("--json");
        }
        let out = cmd.arg(&addr).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // Never used: absent from the snapshot.
    let v: serde_json::Value = serde_json::from_str(&once(true)).expect("JSON on stdout");
    assert!(v["snapshot"].is_object() && v["snapshot"]["bridge"].is_null(), "{}", v["snapshot"]["bridge"]);
    assert!(once(false).contains("bridge  off"));

    // One task parked on the bridge.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let parked = rt.handle().tokio_bridge().spawn(async move {
        let _ = rx.await;
    });
    let v: serde_json::Value = serde_json::from_str(&once(true)).expect("JSON on stdout");
    let bridge = &v["snapshot"]["bridge"];
    assert_eq!(bridge["workers"], 1, "{bridge}");
    assert_eq!(bridge["alive_tasks"], 1, "{bridge}");
    assert!(bridge["busy_ns"].is_u64(), "{bridge}");
    assert!(once(false).contains("bridge  workers 1  alive tasks 1  global queue 0"));
    let _ = tx.send(());
    tokio_rt().block_on(async { tokio::time::timeout(Duration::from_secs(10), parked).await }).unwrap().unwrap();
    drop(rt);
}

/// Against a port that answers HTTP but is not gRPC, the watcher backs off (doubling to
/// 5 s) after every failure instead of retrying every 100 ms, and says the cause once.
#[test]
fn the_watcher_backs_off_against_a_port_that_is_not_grpc() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let attempts = std::sync::Arc::new(AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&attempts);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            count.fetch_add(1, SeqCst);
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = s.read(&mut [0u8; 1024]);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    let (tx, rx) = std::sync::mpsc::sync_channel(client::WATCH_BACKLOG);
    let watcher = client::spawn_watcher(addr.to_string(), None, tx);
    let start = Instant::now();
    let mut reasons = Vec::new();
    while start.elapsed() < Duration::from_secs(4) {
        if let Ok(client::Msg::Status(volt_console::app::Status::Disconnected { reason, .. })) =
            rx.recv_timeout(Duration::from_millis(100))
        {
            reasons.push(reason);
        }
    }
    let n = attempts.load(SeqCst);
    drop(rx);
    let _ = watcher.thread.join();
    // 100 ms doubling: about 6 attempts in 4 s; retrying every 100 ms would be about 40.
    assert!((1..=12).contains(&n), "{n} connection attempts in 4 s: {reasons:?}");
    assert!(!reasons.is_empty());
    for r in &reasons {
        let parts: Vec<&str> = r.split(": ").collect();
        assert!(parts.windows(2).all(|w| w[0] != w[1]), "a cause said twice: {r}");
        assert!(r != "transport error (Unknown)", "no cause: {r}");
    }
}

/// A server that accepts the connection and never answers (here a bare TCP listener) is
/// a subscription error within the call timeout, not a wait for good: the watcher then
/// backs off and tries again.
#[test]
fn a_server_that_never_answers_fails_the_subscription() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    // Accept and hold every connection, reading nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in silent.incoming().flatten() {
            held.push(s);
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let r = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), async {
            let mut c = client::connect(&addr.to_string()).await?;
            client::subscribe(&mut c, proto::WatchRequest::default(), None).await.map(|_| ())
        })
        .await
    });
    let err = r.expect("the subscription ended within 60 s").expect_err("a silent server is an error");
    assert!(err.contains("did not answer"), "{err}");
}

/// A proxy that forwards until `frozen`, then holds every byte (a stopped server, a
/// network partition): the connection stays open and nothing more arrives.
fn freezing_proxy(
    target: std::net::SocketAddr,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let Ok(s) = std::net::TcpStream::connect(target) else { continue };
            for (mut from, mut to) in [(c.try_clone().unwrap(), s.try_clone().unwrap()), (s, c)] {
                let frozen = std::sync::Arc::clone(&frozen);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    loop {
                        let n = match from.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        while frozen.load(std::sync::atomic::Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
    addr
}

/// A server that goes silent mid-stream without closing the connection (stopped, hung,
/// cut off) is given up once it has missed many of its publishes, and the watcher
/// says so and reconnects, instead of showing the last figures as live for good.
#[test]
fn a_server_that_goes_silent_mid_stream_is_given_up() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(1)
        .console_bind("127.0.0.1:0")
        .console_publish_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let proxy = freezing_proxy(rt.console_addr().unwrap(), std::sync::Arc::clone(&frozen));
    let (tx, rx) = std::sync::mpsc::sync_channel(client::WATCH_BACKLOG);
    let _watcher = client::spawn_watcher(proxy.to_string(), None, tx);
    let mut updates = 0;
    let start = Instant::now();
    while updates < 5 {
        assert!(start.elapsed() < Duration::from_secs(30), "no updates through the proxy");
        if let Ok(client::Msg::Update(_)) = rx.recv_timeout(Duration::from_secs(1)) {
            updates += 1;
        }
    }
    frozen.store(true, std::sync::atomic::Ordering::Relaxed);
    let froze_at = Instant::now();
    let limit = client::silence_limit(Some(20_000_000));
    // The bound is four times the limit: only a watcher that never gives up fails it.
    loop {
        assert!(froze_at.elapsed() < limit * 4, "{:?} without an update, and still live", froze_at.elapsed());
        if let Ok(client::Msg::Status(volt_console::app::Status::Disconnected { reason, .. })) =
            rx.recv_timeout(Duration::from_millis(200))
        {
            assert!(reason.contains("no update from"), "{reason}");
            break;
        }
    }
}

/// The dashboard's main loop against a real runtime: a task that enters the list while
/// the display is paused (its row is sent once) is in the list after resuming.
#[test]
fn a_task_that_appears_during_a_pause_is_listed_after_it() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use volt_console::app::{Action, App};
    let key = |c| KeyEvent::new(c, KeyModifiers::NONE);
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .event_ring(1024)
        .console_bind("127.0.0.1:0")
        .console_publish_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let sleeper = |name: &str| {
        volt::task::Builder::new().name(name).spawn_on(std::future::pending::<()>(), rt.handle());
    };
    sleeper("before");
    let (tx, rx) = std::sync::mpsc::sync_channel(client::WATCH_BACKLOG);
    let mut app = App::new("test");
    let watcher = client::spawn_watcher_with(
        rt.console_addr().unwrap().to_string(),
        None,
        client::WatchOptions::default(),
        Some(app.task_query()),
        tx,
    );
    let mut conn = volt_console::conn::Conn::new(rx, None, watcher);
    // The main loop, without the terminal.
    let run = |conn: &mut volt_console::conn::Conn, app: &mut App, d: Duration| {
        let end = Instant::now() + d;
        while Instant::now() < end {
            conn.drain(app);
            if let Action::QueryTasks(q) = app.requery() {
                conn.query_tasks(q);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let names = |app: &App| -> Vec<String> { app.sorted_tasks().iter().filter_map(|r| r.task.name.clone()).collect() };
    app.on_key(key(KeyCode::Char('t')));
    let start = Instant::now();
    while !names(&app).contains(&"before".to_string()) {
        assert!(start.elapsed() < Duration::from_secs(30), "the first task never showed");
        run(&mut conn, &mut app, Duration::from_millis(100));
    }
    app.on_key(key(KeyCode::Char(' ')));
    sleeper("during");
    // Fifty publishes: the server sends the new row into the pause.
    run(&mut conn, &mut app, Duration::from_secs(1));
    assert!(!names(&app).contains(&"during".to_string()), "the list is frozen in the pause");
    // Resuming asks for the window again (the main loop sends what a key asks for).
    let Action::QueryTasks(q) = app.on_key(key(KeyCode::Char(' '))) else { panic!("resuming asks for the window") };
    conn.query_tasks(q);
    let start = Instant::now();
    while !names(&app).contains(&"during".to_string()) {
        assert!(start.elapsed() < Duration::from_secs(30), "after the pause the list lacks it: {:?}", names(&app));
        run(&mut conn, &mut app, Duration::from_millis(100));
    }
}
