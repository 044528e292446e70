//! The console server, for real: a Volt runtime with the console on loopback, and tonic
//! clients talking to it.

mod common;

use common::*;
use std::time::{Duration, Instant};
use tonic::Code;
use volt_console::client::{self, request};
use volt_console::record::{self, RecordWriter};
use volt_console_proto as proto;
use volt_console_proto::console_client::ConsoleClient;

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
        // 1.5 s and at least 20 updates, however slow a loaded machine makes each one.
        while started.elapsed() < Duration::from_millis(1500) || fast_updates < 20 {
            let done = rt.spawn(async { 7 });
            assert_eq!(done.join().unwrap(), 7);
            spawn_work(&rt, 1000);
            // Held up would mean never: the bound only turns that into a failure.
            let u = tokio::time::timeout(Duration::from_secs(30), stream.message())
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
            let u = tokio::time::timeout(Duration::from_secs(30), stalled.message()).await.unwrap().unwrap().unwrap();
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
                max_events_per_update: 2_000_000,
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
        let mut grpc = raw_grpc(&rt).await;
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
        let d = c.get_task(proto::TaskRequest { id: h.id().as_u64() }).await.unwrap().into_inner();
        let task = d.task.unwrap();
        assert_eq!(task.id, h.id().as_u64());
        assert_eq!(task.name.as_deref(), Some("waiter"));
        assert!(task.polls >= 4, "{task:?}");
        assert!(d.recent_events.iter().all(|e| e.task_id == h.id().as_u64()));
        assert!(d.recent_events.iter().any(|e| e.kind == proto::EventKind::PollStart as i32), "{:?}", d.recent_events);
    });
    tx.send(()).unwrap();
    h.join().unwrap();
}

/// Each client's cap is its own: a client that asks for every event gets every event the
/// server read, a client with a small cap gets its newest events, and each update says
/// which losses came from the ring (the same for both) and which from the cap.
#[test]
fn a_client_that_wants_every_event_gets_them_and_losses_say_which_is_which() {
    let rt = runtime(2, true);
    let t = tokio_rt();
    t.block_on(async {
        let (mut a, mut b) = (client(&rt).await, client(&rt).await);
        let small = proto::WatchRequest { max_events_per_update: 10, omit_tasks: true, ..Default::default() };
        let all = proto::WatchRequest { max_events_per_update: 1 << 20, omit_tasks: true, ..Default::default() };
        let mut sa = a.watch_updates(small).await.unwrap().into_inner();
        let mut sb = b.watch_updates(all).await.unwrap().into_inner();
        let (mut got_a, mut got_b) = (std::collections::HashMap::new(), std::collections::HashMap::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        // Until both saw ten busy updates with the same sequence number.
        let mut both = 0;
        while both < 10 {
            assert!(Instant::now() < deadline, "no ten busy updates in 60 s");
            spawn_work(&rt, 300);
            let ua = sa.message().await.unwrap().unwrap();
            let ub = sb.message().await.unwrap().unwrap();
            // A stream's first update (runtime info, no events) repeats the last seq.
            if ua.runtime.is_none() {
                got_a.insert(ua.seq, ua);
            }
            if ub.runtime.is_none() {
                got_b.insert(ub.seq, ub);
            }
            both =
                got_a.iter().filter(|(seq, u)| u.events_missed_cap > 0 && got_b.contains_key(seq) && **seq > 0).count();
        }
        let mut checked = 0;
        for (seq, ua) in &got_a {
            let Some(ub) = got_b.get(seq) else { continue };
            assert_eq!(ub.events_missed_cap, 0, "the uncapped client lost events to a cap");
            assert_eq!(ua.events_missed_ring, ub.events_missed_ring, "ring losses are the server's, the same for all");
            assert_eq!(ua.events_missed, ua.events_missed_ring + ua.events_missed_cap);
            assert!(ua.events.len() <= 10, "{} events over a cap of 10", ua.events.len());
            assert_eq!(ua.events.len() as u64 + ua.events_missed_cap, ub.events.len() as u64, "seq {seq}");
            // The capped client got the newest ones.
            assert_eq!(ua.events[..], ub.events[ub.events.len() - ua.events.len()..]);
            checked += 1;
        }
        assert!(checked >= 10);
        // There is no Pause RPC: no client can freeze the others.
        let mut grpc = raw_grpc(&rt).await;
        let path = http::uri::PathAndQuery::from_static("/volt.console.v1.Console/Pause");
        let codec = tonic_prost::ProstCodec::<proto::SnapshotRequest, proto::SnapshotRequest>::default();
        let err = grpc.unary(tonic::Request::new(proto::SnapshotRequest::default()), path, codec).await.unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
        assert!(tokio::time::timeout(Duration::from_secs(10), sa.message()).await.is_ok(), "updates still flow");
    });
}

/// The demo, watched from its start the way `volt-console --demo` watches it: the console
/// misses no event (neither to the ring nor to the cap) although the ring overwrites
/// millions, so the TUI starts with no warning about lost events.
#[test]
fn the_demo_watched_from_its_start_misses_no_events() {
    let rt = volt_console::demo::runtime(Some("127.0.0.1:0")).unwrap();
    let demo = volt_console::demo::Demo::start(rt.handle());
    let (tx, rx) = std::sync::mpsc::sync_channel(client::WATCH_BACKLOG);
    let watcher = client::spawn_watcher(rt.console_addr().unwrap().to_string(), None, tx);
    let mut app = volt_console::app::App::new("demo");
    let start = Instant::now();
    let mut updates = 0;
    while start.elapsed() < Duration::from_secs(6) {
        match rx.recv_timeout(Duration::from_secs(30)).expect("the watcher sends") {
            client::Msg::Update(u) => {
                updates += 1;
                app.apply(*u);
            }
            _ => continue,
        }
    }
    drop(rx);
    drop(demo);
    let _ = watcher.thread.join();
    let s = rt.handle().telemetry().snapshot();
    eprintln!(
        "{updates} updates, recorded {} overwritten {}; missed ring {} cap {}",
        s.events_recorded, s.events_overwritten, app.model.missed.events_ring, app.model.missed.events_cap
    );
    assert!(updates >= 5, "{updates} updates in 6 s");
    assert_eq!((app.model.missed.events_ring, app.model.missed.events_cap), (0, 0), "{:?}", app.warnings());
    assert!(!app.warnings().iter().any(|w| w.contains("missed")), "{:?}", app.warnings());
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
    // Only a hang fails this: a server that waits out its stream would take forever.
    assert!(started.elapsed() < Duration::from_secs(30), "shutdown took {:?}", started.elapsed());
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

/// Open `n` connections to `addr` that never finish their handshake: the odd ones send
/// nothing, the even ones `partial` and then nothing.
pub fn half_open(addr: std::net::SocketAddr, n: usize, partial: &[u8]) -> Vec<std::net::TcpStream> {
    use std::io::Write;
    (0..n)
        .map(|i| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            if i % 2 == 0 {
                s.write_all(partial).unwrap();
            }
            s
        })
        .collect()
}

/// Each of `conns` is closed by the server (end of stream or reset) within `bound`.
pub fn all_closed_within(conns: Vec<std::net::TcpStream>, bound: Duration) {
    use std::io::Read;
    let start = Instant::now();
    for (i, mut s) in conns.into_iter().enumerate() {
        let left = bound.saturating_sub(start.elapsed()).max(Duration::from_millis(10));
        s.set_read_timeout(Some(left)).unwrap();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                // The server's own preface (HTTP/2 SETTINGS) may come first.
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                    panic!("half-open connection {i} still open after {:?}", start.elapsed())
                }
                Err(_) => break,
            }
        }
    }
}

/// Connections that never finish their HTTP/2 preface are closed after the handshake
/// timeout, and while they fill the connection cap a real client still gets in (the
/// oldest unfinished one makes room), and after they are gone too.
#[test]
fn half_open_connections_are_closed_and_a_real_client_still_gets_in() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(1)
        .console_bind("127.0.0.1:0")
        .console_connection_limits(volt::console::ConnectionLimits {
            max_connections: 8,
            handshake_timeout: Duration::from_secs(2),
        })
        .build()
        .unwrap();
    let addr = rt.console_addr().unwrap();
    let held = half_open(addr, 20, b"PRI * HTTP/2.0\r\n");
    let t = tokio_rt();
    t.block_on(async {
        // While the cap is full of unfinished connections.
        let mut c = client(&rt).await;
        let u = tokio::time::timeout(Duration::from_secs(30), c.get_snapshot(proto::SnapshotRequest::default())).await;
        assert!(u.expect("answered within 30 s").is_ok());
    });
    all_closed_within(held, Duration::from_secs(30));
    t.block_on(async {
        let mut c = client(&rt).await;
        assert!(c.get_snapshot(proto::SnapshotRequest::default()).await.is_ok(), "a client after the half-open ones");
    });
}

/// Connections that finish the HTTP/2 preface but never make a call past the token check
/// (a peer without the token, sitting idle) cannot fill the cap and lock clients out:
/// each new client closes the oldest of them. A client that made a call keeps its place.
#[test]
fn idle_connections_without_the_token_cannot_lock_clients_out() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(1)
        .console_bind("127.0.0.1:0")
        .console_token("s3cret")
        .console_connection_limits(volt::console::ConnectionLimits {
            max_connections: 4,
            handshake_timeout: Duration::from_secs(60),
        })
        .build()
        .unwrap();
    let addr = rt.console_addr().unwrap();
    let t = tokio_rt();
    t.block_on(async {
        // A client that proves itself first.
        let mut first = client::connect(&addr.to_string()).await.unwrap();
        assert!(first.get_snapshot(request(proto::SnapshotRequest::default(), Some("s3cret"))).await.is_ok());
        // Then idle connections with a whole preface and no call, more than the cap, and
        // one whose call fails the token check.
        let idle: Vec<_> = (0..6).map(|_| half_open(addr, 1, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")).collect();
        let mut wrong = client::connect(&addr.to_string()).await.unwrap();
        let e = wrong.get_snapshot(request(proto::SnapshotRequest::default(), Some("guess"))).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
        let idle2: Vec<_> = (0..6).map(|_| half_open(addr, 1, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")).collect();
        // A new client with the token still gets in.
        let mut c = client::connect(&addr.to_string()).await.unwrap();
        let u = tokio::time::timeout(
            Duration::from_secs(30),
            c.get_snapshot(request(proto::SnapshotRequest::default(), Some("s3cret"))),
        )
        .await;
        assert!(u.expect("answered within 30 s").is_ok(), "locked out by idle connections");
        // And the first client's connection was never closed to make room.
        assert!(first.get_snapshot(request(proto::SnapshotRequest::default(), Some("s3cret"))).await.is_ok());
        drop((idle, idle2));
    });
}

/// A plain gRPC client on the console, for calls the generated client can't make
/// (undecodable requests, removed methods).
async fn raw_grpc(rt: &volt::Runtime) -> tonic::client::Grpc<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", rt.console_addr().unwrap()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    grpc
}

/// A stream that skips the lost-waker count spares the process the walk of every task
/// that counts it: while only such streams listen, no update carries a count (a walk
/// would have made one). A stream that wants it gets it, for a task that did lose its
/// waker, and once it leaves no count is carried again (none from before is kept).
#[test]
fn streams_that_skip_the_lost_waker_count_cause_no_walk() {
    let rt = runtime(1, true);
    // A task that can never be woken: its poll drops the waker.
    let _lost = rt.spawn(std::future::poll_fn(|_| std::task::Poll::<()>::Pending));
    let t = tokio_rt();
    t.block_on(async {
        let skip = proto::WatchRequest { omit_tasks: true, skip_lost_wakers: true, ..Default::default() };
        let mut c = client(&rt).await;
        let mut skipping = c.watch_updates(skip.clone()).await.unwrap().into_inner();
        // Well over a second of publishes (every 20 ms): a walk would have run.
        for _ in 0..80 {
            let u = skipping.message().await.unwrap().expect("stream open");
            assert_eq!(u.snapshot.and_then(|s| s.tasks_lost_waker), None, "counted with no one asking");
        }
        let mut wanting = client(&rt).await;
        let want = proto::WatchRequest { omit_tasks: true, ..Default::default() };
        let mut stream = wanting.watch_updates(want).await.unwrap().into_inner();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let u = stream.message().await.unwrap().expect("stream open");
            if u.snapshot.and_then(|s| s.tasks_lost_waker) == Some(1) {
                break;
            }
            assert!(Instant::now() < deadline, "the wanting stream never got the count");
        }
        drop(stream);
        drop(wanting);
        // Once the wanting stream is gone (its channel closes), the count goes again.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut without = 0;
        while without < 10 {
            let u = skipping.message().await.unwrap().expect("stream open");
            without = if u.snapshot.and_then(|s| s.tasks_lost_waker).is_none() { without + 1 } else { 0 };
            assert!(Instant::now() < deadline, "the count stayed after the stream that wanted it left");
        }
    });
}

/// A token no client can send in a header (a trailing newline, read from a file with it)
/// is refused when the runtime is built, instead of refusing every call later; a token
/// beyond ASCII, which a client can send, is accepted by the server.
#[test]
fn a_token_is_one_a_client_can_send() {
    let build = |token: &str| {
        volt::runtime::Builder::new().worker_threads(1).console_bind("127.0.0.1:0").console_token(token).build()
    };
    for bad in ["s3cret\n", " s3cret", "s3\u{7}cret"] {
        let err = build(bad).err().unwrap_or_else(|| panic!("{bad:?} accepted"));
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{bad:?}: {err}");
    }
    let rt = build("pässwort").expect("a token beyond ASCII");
    let t = tokio_rt();
    t.block_on(async {
        let mut c = client(&rt).await;
        let ok = c.get_snapshot(request(proto::SnapshotRequest::default(), Some("pässwort"))).await;
        assert!(ok.is_ok(), "the exact token was refused: {:?}", ok.err());
        let wrong = c.get_snapshot(request(proto::SnapshotRequest::default(), Some("passwort"))).await;
        assert_eq!(wrong.err().map(|s| s.code()), Some(Code::Unauthenticated));
    });
}
