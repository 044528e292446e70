//! The console server, for real: a Volt runtime with the console on loopback, and tonic
//! clients talking to it.

use std::time::{Duration, Instant};
use tonic::Code;
use volt_console::client::{self, request};
use volt_console::record::{self, RecordWriter};
use volt_console_proto as proto;
use volt_console_proto::console_client::ConsoleClient;

fn runtime(workers: usize, ring: bool) -> volt::Runtime {
    let mut b = volt::runtime::Builder::new();
    b.worker_threads(workers).console_bind("127.0.0.1:0").console_publish_interval(Duration::from_millis(20));
    if ring {
        b.event_ring(4096);
    }
    b.build().expect("runtime with console")
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

async fn client(rt: &volt::Runtime) -> ConsoleClient<tonic::transport::Channel> {
    client::connect(&rt.console_addr().unwrap().to_string()).await.expect("connect")
}

/// Keep the runtime busy with `n` small tasks.
fn spawn_work(rt: &volt::Runtime, n: usize) {
    for i in 0..n {
        rt.spawn(async move {
            if i % 2 == 0 {
                volt::task::yield_now().await;
            }
        });
    }
}

/// A task named `name` that polls a few times, then waits (polling every 5 ms) until the
/// returned sender sends.
fn spawn_waiter(rt: &volt::Runtime, name: &str) -> (volt::task::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Mutex::new(rx);
    let h = volt::task::Builder::new().name(name).spawn_on(
        async move {
            for _ in 0..3 {
                volt::task::yield_now().await;
            }
            while rx.lock().unwrap().try_recv().is_err() {
                volt::time::sleep(Duration::from_millis(5)).await;
            }
        },
        rt.handle(),
    );
    (h, tx)
}

#[test]
fn updates_arrive_counts_grow_and_workers_match() {
    let rt = runtime(3, true);
    let t = tokio_rt();
    t.block_on(async {
        let mut c = client(&rt).await;
        let mut stream = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let first = stream.message().await.unwrap().expect("first update");
        let info = first.runtime.expect("the first update carries the runtime info");
        assert_eq!(info.workers, 3);
        assert_eq!(info.max_searching, 2);
        assert_eq!(info.event_ring_capacity, 4096);
        assert_eq!(first.snapshot.as_ref().unwrap().workers.len(), 3);
        let spawned0 = first.snapshot.unwrap().tasks_spawned;
        spawn_work(&rt, 1000);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last_seq = first.seq;
        let mut saw_events = false;
        loop {
            let u = stream.message().await.unwrap().expect("stream open");
            assert!(u.seq > last_seq, "seq goes up: {} then {}", last_seq, u.seq);
            last_seq = u.seq;
            let s = u.snapshot.unwrap();
            assert_eq!(s.workers.len(), 3);
            assert!(s.workers.iter().enumerate().all(|(i, w)| w.index as usize == i));
            saw_events |= u.events.iter().any(|e| e.kind == proto::EventKind::Spawn as i32);
            let polled: u64 = s.workers.iter().map(|w| w.tasks_polled).sum();
            if s.tasks_spawned >= spawned0 + 1000 && polled >= 1000 && saw_events {
                break;
            }
            assert!(Instant::now() < deadline, "counts did not grow: spawned {} polled {polled}", s.tasks_spawned);
        }
    });
}

#[test]
fn twenty_clients_at_once() {
    let rt = runtime(2, false);
    let t = tokio_rt();
    t.block_on(async {
        let addr = rt.console_addr().unwrap().to_string();
        let mut joins = Vec::new();
        for _ in 0..20 {
            let addr = addr.clone();
            joins.push(tokio::spawn(async move {
                let mut c = client::connect(&addr).await.expect("connect");
                let mut s = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
                let mut seqs = Vec::new();
                while seqs.len() < 5 {
                    seqs.push(s.message().await.unwrap().expect("update").seq);
                }
                seqs
            }));
        }
        spawn_work(&rt, 100);
        for j in joins {
            let seqs =
                tokio::time::timeout(Duration::from_secs(20), j).await.expect("every client gets updates").unwrap();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        }
    });
}

#[test]
fn a_slow_client_misses_updates_is_told_so_and_stalls_nothing() {
    let rt = runtime(2, true);
    let t = tokio_rt();
    t.block_on(async {
        // A client that reads nothing, with small HTTP/2 windows so that they fill fast
        // (the windows and the server's per-client backlog are all it can ever hold).
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", rt.console_addr().unwrap()))
            .unwrap()
            .initial_stream_window_size(Some(4096))
            .initial_connection_window_size(Some(4096))
            .connect()
            .await
            .unwrap();
        let mut slow = ConsoleClient::new(channel);
        let mut stalled = slow.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let mut fast = client(&rt).await;
        let mut stream = fast.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        // While the slow client reads nothing, the runtime keeps running at full speed and
        // the fast client keeps getting every update.
        let started = Instant::now();
        let mut fast_updates = 0;
        while started.elapsed() < Duration::from_millis(1500) {
            let done = rt.spawn(async { 7 });
            assert_eq!(done.join().unwrap(), 7);
            spawn_work(&rt, 1000);
            let u = tokio::time::timeout(Duration::from_secs(2), stream.message())
                .await
                .expect("the fast client is not held up")
                .unwrap()
                .unwrap();
            assert_eq!(u.updates_missed, 0, "the fast client misses nothing");
            fast_updates += 1;
        }
        assert!(fast_updates >= 20, "{fast_updates} updates in 1.5 s at a 20 ms interval");
        // The slow client now reads: after its small backlog, it learns what it missed.
        let (mut missed, mut buffered) = (0, 0);
        for _ in 0..1000 {
            let u = tokio::time::timeout(Duration::from_secs(2), stalled.message()).await.unwrap().unwrap().unwrap();
            missed += u.updates_missed;
            buffered += 1;
            if missed > 0 {
                break;
            }
        }
        assert!(missed >= 10, "the slow client was told it missed {missed} updates (after {buffered} buffered ones)");
    });
}

#[test]
fn malformed_requests_get_error_statuses() {
    let rt = runtime(1, true);
    let t = tokio_rt();
    t.block_on(async {
        let mut c = client(&rt).await;
        // A field out of range.
        let err = c
            .watch_updates(proto::WatchRequest {
                max_events_per_update: 1_000_000,
                omit_tasks: false,
                ..Default::default()
            })
            .await
            .expect_err("rejected");
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        // Ids that cannot exist.
        assert_eq!(c.get_task(proto::TaskRequest { id: 0 }).await.unwrap_err().code(), Code::InvalidArgument);
        assert_eq!(c.get_task(proto::TaskRequest { id: u64::MAX }).await.unwrap_err().code(), Code::NotFound);
        // Bytes that do not decode as a WatchRequest: field 1 sent as a string.
        #[derive(Clone, PartialEq, prost::Message)]
        struct Bogus {
            #[prost(string, tag = "1")]
            max_events_per_update: String,
        }
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", rt.console_addr().unwrap()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        let path = http::uri::PathAndQuery::from_static("/volt.console.v1.Console/GetTask");
        let codec = tonic_prost::ProstCodec::<Bogus, proto::TaskDetails>::default();
        let r = grpc.unary(tonic::Request::new(Bogus { max_events_per_update: "lots".into() }), path, codec).await;
        let err = r.expect_err("undecodable request refused");
        assert_eq!(err.code(), Code::Internal, "{err:?}");
        assert!(err.message().contains("decode"), "{}", err.message());
        // The server still serves.
        assert!(c.get_snapshot(proto::SnapshotRequest::default()).await.is_ok());
    });
}

#[test]
fn get_task_returns_a_live_task_with_its_events() {
    let rt = runtime(2, true);
    let (h, tx) = spawn_waiter(&rt, "waiter");
    let t = tokio_rt();
    t.block_on(async {
        let mut c = client(&rt).await;
        // Let the publisher see it (GetTask's history comes from published events).
        tokio::time::sleep(Duration::from_millis(100)).await;
        let d = c.get_task(proto::TaskRequest { id: h.id() }).await.unwrap().into_inner();
        let task = d.task.unwrap();
        assert_eq!(task.id, h.id());
        assert_eq!(task.name.as_deref(), Some("waiter"));
        assert!(task.polls >= 4, "{task:?}");
        assert!(d.recent_events.iter().all(|e| e.task_id == h.id()));
        assert!(d.recent_events.iter().any(|e| e.kind == proto::EventKind::PollStart as i32), "{:?}", d.recent_events);
    });
    tx.send(()).unwrap();
    h.join().unwrap();
}

#[test]
fn pause_stops_updates_and_resume_restarts_them() {
    let rt = runtime(1, false);
    let t = tokio_rt();
    t.block_on(async {
        let mut c = client(&rt).await;
        let mut s = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        s.message().await.unwrap().unwrap();
        assert!(c.pause(proto::PauseRequest {}).await.unwrap().into_inner().paused);
        // Drain what was already queued, then nothing comes.
        while tokio::time::timeout(Duration::from_millis(150), s.message()).await.is_ok() {}
        assert!(tokio::time::timeout(Duration::from_millis(200), s.message()).await.is_err(), "an update while paused");
        assert!(c.get_snapshot(proto::SnapshotRequest::default()).await.unwrap().into_inner().paused);
        assert!(!c.resume(proto::ResumeRequest {}).await.unwrap().into_inner().paused);
        let u = tokio::time::timeout(Duration::from_secs(2), s.message()).await.expect("updates again").unwrap();
        assert!(u.is_some());
    });
}

#[test]
fn non_loopback_needs_a_token_and_a_wrong_token_is_unauthenticated() {
    // Without a token, a non-loopback bind is refused at build().
    let err = volt::runtime::Builder::new()
        .worker_threads(1)
        .console_bind("0.0.0.0:0")
        .console_token("")
        .build()
        .expect_err("refused");
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("VOLT_CONSOLE_TOKEN"), "{err}");

    let rt = volt::runtime::Builder::new()
        .worker_threads(1)
        .console_bind("0.0.0.0:0")
        .console_token("s3cret")
        .build()
        .unwrap();
    let port = rt.console_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let t = tokio_rt();
    t.block_on(async {
        let mut c = client::connect(&addr).await.unwrap();
        for token in [None, Some("wrong"), Some("s3cre"), Some("s3crett")] {
            let err = c.get_snapshot(request(proto::SnapshotRequest::default(), token)).await.unwrap_err();
            assert_eq!(err.code(), Code::Unauthenticated, "token {token:?}");
            let err = c.watch_updates(request(proto::WatchRequest::default(), token)).await.err().unwrap();
            assert_eq!(err.code(), Code::Unauthenticated, "token {token:?}");
        }
        let u = c.get_snapshot(request(proto::SnapshotRequest::default(), Some("s3cret"))).await.unwrap().into_inner();
        assert_eq!(u.snapshot.unwrap().workers.len(), 1);
    });
}

#[test]
fn reflection_lists_the_console_service() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let rt = runtime(1, false);
    let t = tokio_rt();
    t.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", rt.console_addr().unwrap()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut c = ServerReflectionClient::new(channel);
        let req = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut s = c.server_reflection_info(tokio_stream::iter([req])).await.unwrap().into_inner();
        let r = s.message().await.unwrap().unwrap();
        let Some(MessageResponse::ListServicesResponse(list)) = r.message_response else { panic!("{r:?}") };
        let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
        assert!(names.contains(&"volt.console.v1.Console".to_string()), "{names:?}");
    });
}

#[test]
fn a_port_in_use_is_a_clear_error_at_build() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = volt::runtime::Builder::new().worker_threads(1).console_bind(addr).build().expect_err("port in use");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains(&format!("cannot listen on {addr}")), "{err}");
    // A bad address is an error too, not a panic.
    let err = volt::runtime::Builder::new().worker_threads(1).console_bind("no-port-here").build().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}

#[test]
fn dropping_the_runtime_stops_the_server() {
    let rt = runtime(1, false);
    let addr = rt.console_addr().unwrap();
    let t = tokio_rt();
    let mut stream = t.block_on(async {
        let mut c = client(&rt).await;
        c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner()
    });
    let started = Instant::now();
    drop(rt);
    assert!(started.elapsed() < Duration::from_secs(3), "shutdown took {:?}", started.elapsed());
    t.block_on(async {
        // The open stream ends (after what was queued) instead of hanging.
        let end =
            tokio::time::timeout(Duration::from_secs(3), async { while let Ok(Some(_)) = stream.message().await {} })
                .await;
        assert!(end.is_ok(), "the stream did not end");
    });
    assert!(std::net::TcpStream::connect(addr).is_err(), "still listening on {addr}");
}

#[test]
fn a_recording_round_trips_through_replay() {
    let rt = runtime(2, true);
    let dir = std::env::temp_dir().join(format!("volt-console-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stream.voltrec");
    let t = tokio_rt();
    let got = t.block_on(async {
        let mut c = client(&rt).await;
        let mut s = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let mut w = RecordWriter::create(&path).unwrap();
        let mut got = Vec::new();
        while got.len() < 8 {
            spawn_work(&rt, 100);
            let u = s.message().await.unwrap().unwrap();
            w.write(&u).unwrap();
            got.push(u);
        }
        assert_eq!(w.written(), 8);
        got
    });
    let back = record::read(&path).unwrap();
    assert_eq!(back.truncated_bytes, 0);
    assert_eq!(back.updates, got, "replayed updates equal the recorded ones");
    assert!(got.iter().any(|u| !u.events.is_empty()), "the recording holds events");
    // Cut the file mid-update: replay keeps the whole ones.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let cut = record::read(&path).unwrap();
    assert_eq!(cut.updates.len(), 7);
    assert!(cut.truncated_bytes > 0);
    assert_eq!(cut.updates[..], got[..7]);
    // Not a recording at all.
    std::fs::write(&path, b"hello").unwrap();
    assert_eq!(record::read(&path).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_watcher_backs_off_then_follows_a_console_that_appears() {
    // A free port with nothing on it yet.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (tx, rx) = std::sync::mpsc::channel();
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
    let (tx, rx) = std::sync::mpsc::channel();
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
                let logged = app.events.iter().filter(|e| e.task_id == h.id()).count();
                if !asked && app.tasks.contains_key(&h.id()) && logged >= 4 {
                    app.detail = Some(h.id());
                    watcher.fetch_task(h.id());
                    watcher.fetch_task(u64::MAX);
                    asked = true;
                }
            }
            client::Msg::Task { id, details } if id == h.id() => answer = Some(details.expect("the task is live")),
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
    let spawn = |e: &&proto::Event| e.kind == proto::EventKind::Spawn as i32 && e.task_id == h.id();
    assert!(d.recent_events.iter().any(|e| spawn(&e)), "the history holds the spawn: {:?}", d.recent_events);
    assert!(!app.events.iter().any(|e| spawn(&e)), "the stream began after the spawn");
    app.apply_task(h.id(), Ok(*d));
    let (_, events) = app.detail_task().unwrap();
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
