//! The Tokio bridge with real peers: reqwest and a tonic client run inside `with_tokio` on
//! Volt workers against servers on separate, plain Tokio runtimes; the bridge's figures in
//! the snapshot; and shutdown from a plain thread, from a worker, from a bridge thread and
//! with requests in flight, with the bridge's threads counted in `/proc/self/task`.
//!
//! Each test names its runtime's threads with a prefix of its own, so the thread counts
//! and the panic log of one test are not disturbed by the others running beside it.
//! Every wait is bounded.

use std::future::Future;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};
use volt::bridge::{with_tokio, WithTokio};

/// How long any single wait in these tests may take before the test fails.
const LIMIT: Duration = Duration::from_secs(20);

fn runtime(prefix: &str, workers: usize, bridge_threads: usize) -> volt::Runtime {
    volt::runtime::Builder::new()
        .worker_threads(workers)
        .thread_name(prefix)
        .tokio_bridge_threads(bridge_threads)
        .build()
        .expect("build runtime")
}

/// Run `fut` in `with_tokio` as a Volt task (so a Volt worker polls it), bounded by
/// [`LIMIT`].
fn run_bridged<F>(rt: &volt::Runtime, fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.block_on(async {
        let task = volt::spawn(with_tokio(fut));
        volt::time::timeout(LIMIT, task).await.expect("the bridged task timed out").expect("the bridged task failed")
    })
}

/// Wait until `f` holds, failing the test after [`LIMIT`].
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < LIMIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The names of this process's threads (`comm`: the first 15 bytes of each name).
fn thread_names() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim_end().to_string())
        .collect()
}

/// Threads of the bridge of the runtime whose threads are named `prefix`.
fn bridge_threads(prefix: &str) -> usize {
    let p = format!("{prefix}-bridge-");
    thread_names().iter().filter(|n| n.starts_with(&p)).count()
}

/// Every panic in the process: (thread name, message). The hook is installed once and
/// passes each panic on to the one before it.
static PANICS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

fn watch_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            PANICS.lock().unwrap_or_else(|e| e.into_inner()).push((name, info.to_string()));
            prev(info);
        }));
    });
}

/// The panics on threads named `prefix...` (a runtime's workers, blocking threads and
/// bridge threads).
fn panics_on(prefix: &str) -> Vec<(String, String)> {
    PANICS.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|(n, _)| n.starts_with(prefix)).cloned().collect()
}

/// An HTTP/1.1 server (hyper) on a Tokio runtime of its own: `/hello` answers a fixed
/// body, anything else echoes the path.
struct HttpPeer {
    addr: SocketAddr,
    _rt: tokio::runtime::Runtime,
}

fn http_peer() -> HttpPeer {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("peer-http")
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let body = match req.uri().path() {
                        "/hello" => "hello through the bridge".to_string(),
                        p => format!("echo {p}"),
                    };
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(body))))
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
    HttpPeer { addr, _rt: rt }
}

/// A gRPC server with the standard health service (every service SERVING), on a Tokio
/// runtime of its own.
struct GrpcPeer {
    addr: SocketAddr,
    _rt: tokio::runtime::Runtime,
}

fn grpc_peer() -> GrpcPeer {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("peer-grpc")
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let (_reporter, service) = tonic_health::server::health_reporter();
    rt.spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    GrpcPeer { addr, _rt: rt }
}

/// A TCP server on a std thread that accepts connections and never answers; it counts
/// them and closes them all when dropped (or after [`LIMIT`] at the latest).
struct SilentPeer {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn silent_peer() -> SilentPeer {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (a, s) = (Arc::clone(&accepted), Arc::clone(&stop));
    let thread = std::thread::spawn(move || {
        let start = Instant::now();
        let mut held = Vec::new();
        while !s.load(SeqCst) && start.elapsed() < LIMIT {
            match listener.accept() {
                Ok((conn, _)) => {
                    held.push(conn);
                    a.fetch_add(1, SeqCst);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    SilentPeer { addr, accepted, stop, thread: Some(thread) }
}

impl Drop for SilentPeer {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn client() -> reqwest::Client {
    // No proxy from the environment: the peers are on loopback.
    reqwest::Client::builder().no_proxy().build().unwrap()
}

#[test]
fn reqwest_inside_with_tokio_fetches_from_a_local_server() {
    watch_panics();
    let peer = http_peer();
    let rt = runtime("vbq", 2, 1);
    let url = format!("http://{}/hello", peer.addr);
    let (body, polled_on, spawned_on) = run_bridged(&rt, async move {
        let body = client().get(url).send().await.unwrap().error_for_status().unwrap().text().await.unwrap();
        // Where the bridged future is polled, and where `tokio::spawn` inside it runs.
        let polled_on = std::thread::current().name().unwrap_or("").to_string();
        let spawned_on = tokio::spawn(async { std::thread::current().name().unwrap_or("").to_string() }).await.unwrap();
        (body, polled_on, spawned_on)
    });
    assert_eq!(body, "hello through the bridge");
    assert!(polled_on.starts_with("vbq-") && !polled_on.contains("bridge"), "polled on {polled_on:?}");
    assert!(spawned_on.starts_with("vbq-bridge-"), "tokio::spawn ran on {spawned_on:?}");

    // Several requests at once, each its own Volt task, one client shared between them.
    let c = client();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (c, url) = (c.clone(), format!("http://{}/n{i}", peer.addr));
            rt.spawn(WithTokio::new_in(
                async move { c.get(url).send().await.unwrap().text().await.unwrap() },
                rt.handle(),
            ))
        })
        .collect();
    let bodies = rt.block_on(async {
        let mut out = Vec::new();
        for t in tasks {
            out.push(volt::time::timeout(LIMIT, t).await.expect("timed out").unwrap());
        }
        out
    });
    assert_eq!(bodies, (0..16).map(|i| format!("echo /n{i}")).collect::<Vec<_>>());
    drop(rt);
    assert!(panics_on("vbq").is_empty(), "{:?}", panics_on("vbq"));
}

#[test]
fn a_tonic_channel_on_the_bridge_gets_serving_from_a_health_server() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    watch_panics();
    let peer = grpc_peer();
    let rt = runtime("vbg", 2, 1);
    let uri = format!("http://{}", peer.addr);
    let statuses = run_bridged(&rt, async move {
        let channel = tonic::transport::Endpoint::from_shared(uri)
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .expect("connect");
        let mut health = HealthClient::new(channel);
        let mut statuses = Vec::new();
        for _ in 0..3 {
            let reply = health.check(HealthCheckRequest { service: String::new() }).await.expect("Check");
            statuses.push(reply.into_inner().status);
        }
        statuses
    });
    assert_eq!(statuses, vec![ServingStatus::Serving as i32; 3]);
    let snap = rt.handle().telemetry().snapshot();
    assert_eq!(snap.bridge.expect("the bridge ran").workers, 1);
    drop(rt);
    assert!(panics_on("vbg").is_empty(), "{:?}", panics_on("vbg"));
}

#[test]
fn the_snapshot_shows_the_bridge_once_used_and_its_tasks_return_to_the_baseline() {
    watch_panics();
    let peer = http_peer();
    let rt = runtime("vbt", 2, 2);
    let telemetry = rt.handle().telemetry();
    // Plain Volt work does not start the bridge.
    rt.block_on(async {
        let hs: Vec<_> = (0..100).map(|_| volt::spawn(async { volt::task::yield_now().await })).collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    assert_eq!(telemetry.snapshot().bridge, None);
    assert_eq!(bridge_threads("vbt"), 0, "an unused bridge has no threads");

    rt.handle().tokio_bridge();
    let base = telemetry.snapshot().bridge.expect("started");
    assert_eq!(base.workers, 2);
    wait_until("both bridge workers to run", || bridge_threads("vbt") >= 2);

    // A task parked on the bridge is counted while it lives.
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    // (A Volt task awaits it: Tokio's `JoinHandle` is awaitable from Volt.)
    let parked = rt.spawn(async move { volt::bridge::spawn(async move { rx.await.unwrap() + 1 }).await.unwrap() });
    wait_until("the parked task on the bridge", || {
        telemetry.snapshot().bridge.unwrap().alive_tasks == base.alive_tasks + 1
    });

    // Requests whose connection tasks live on the bridge until the client goes.
    let addr = peer.addr;
    let n = run_bridged(&rt, async move {
        let c = client();
        let mut n = 0;
        for i in 0..20 {
            let body = c.get(format!("http://{addr}/r{i}")).send().await.unwrap().text().await.unwrap();
            n += usize::from(body == format!("echo /r{i}"));
        }
        n
    });
    assert_eq!(n, 20);
    tx.send(41).unwrap();
    let got = rt.block_on(async { volt::time::timeout(LIMIT, parked).await }).expect("timed out").unwrap();
    assert_eq!(got, 42);

    wait_until("the bridge's tasks to return to the baseline", || {
        telemetry.snapshot().bridge.unwrap().alive_tasks == base.alive_tasks
    });
    wait_until("the bridge's busy time to be reported", || telemetry.snapshot().bridge.unwrap().busy > Duration::ZERO);
    let snap = telemetry.snapshot().bridge.unwrap();
    assert_eq!(snap.workers, 2);
    assert_eq!(snap.global_queue_depth, 0);
    drop(rt);
    assert_eq!(telemetry.snapshot().bridge, None, "a shut-down bridge is not reported");
    assert!(panics_on("vbt").is_empty(), "{:?}", panics_on("vbt"));
}

#[test]
fn dropping_the_runtime_stops_the_bridge_threads() {
    watch_panics();
    let peer = http_peer();
    let rt = runtime("vbd", 1, 3);
    let url = format!("http://{}/hello", peer.addr);
    let body = run_bridged(&rt, async move { client().get(url).send().await.unwrap().text().await.unwrap() });
    assert_eq!(body, "hello through the bridge");
    wait_until("the three bridge workers to run", || bridge_threads("vbd") >= 3);
    let handle = rt.handle().clone();
    drop(rt);
    // A plain thread waited for them.
    wait_until("the bridge threads to exit", || bridge_threads("vbd") == 0);
    assert!(handle.try_tokio_bridge().is_err(), "the bridge does not start again");
    assert!(panics_on("vbd").is_empty(), "{:?}", panics_on("vbd"));
}

#[test]
fn dropping_the_runtime_from_a_plain_thread_mid_request_completes() {
    watch_panics();
    let peer = silent_peer();
    let rt = runtime("vbm", 2, 1);
    let url = format!("http://{}/never", peer.addr);
    // One request polled on Volt, one run whole on the bridge; neither gets an answer.
    let request = {
        let url = url.clone();
        async move { client().get(url).send().await.map(|r| r.status().as_u16()) }
    };
    let on_volt = rt.spawn(WithTokio::new_in(request, rt.handle()));
    // Its handle is awaited below, once the runtime is gone.
    #[allow(clippy::async_yields_async)]
    let on_bridge = rt.block_on(async { volt::bridge::spawn(async move { client().get(url).send().await.is_ok() }) });
    wait_until("both requests to be in flight", || peer.accepted.load(SeqCst) >= 2);
    assert!(!on_volt.is_finished());

    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = done_tx.send(());
    });
    done_rx.recv_timeout(LIMIT).expect("dropping the runtime mid-request did not complete");
    assert!(on_volt.join().unwrap_err().is_cancelled());
    // Tokio's handle needs no runtime to be awaited: the task was cancelled by shutdown.
    let err = futures::executor::block_on(on_bridge).expect_err("the bridged task was dropped");
    assert!(err.is_cancelled(), "{err}");
    wait_until("the bridge threads to exit", || bridge_threads("vbm") == 0);
    assert!(panics_on("vbm").is_empty(), "{:?}", panics_on("vbm"));
}

#[test]
fn dropping_the_runtime_from_its_own_worker_or_a_bridge_thread_does_not_panic() {
    watch_panics();
    // From one of its own tasks: the workers are told to stop, the bridge too, and no one
    // waits on itself.
    let rt = runtime("vbw", 2, 1);
    let handle = rt.handle().clone();
    handle.tokio_bridge();
    wait_until("the bridge worker", || bridge_threads("vbw") >= 1);
    let (tx, rx) = std::sync::mpsc::channel();
    handle.spawn(async move {
        drop(rt);
        let _ = tx.send(());
    });
    rx.recv_timeout(LIMIT).expect("the drop inside a task returned");
    wait_until("the bridge threads to exit", || bridge_threads("vbw") == 0);
    assert!(panics_on("vbw").is_empty(), "{:?}", panics_on("vbw"));

    // From a task on the bridge itself, a Tokio worker, where dropping a Tokio runtime
    // would panic.
    let rt = runtime("vbx", 1, 1);
    let (tx, rx) = std::sync::mpsc::channel();
    rt.handle().tokio_bridge().spawn(async move {
        drop(rt);
        let _ = tx.send(());
    });
    rx.recv_timeout(LIMIT).expect("the drop on a bridge thread returned");
    wait_until("the bridge threads to exit", || bridge_threads("vbx") == 0);
    assert!(panics_on("vbx").is_empty(), "{:?}", panics_on("vbx"));
}

#[test]
fn a_bridged_future_polled_after_shutdown_fails_clearly() {
    watch_panics();
    let rt = runtime("vbs", 1, 1);
    let handle = rt.handle().clone();
    // Polled once on this (plain) thread: it arms a Tokio timer on the bridge.
    let mut sleeping =
        Box::pin(WithTokio::new_in(async { tokio::time::sleep(Duration::from_secs(3600)).await }, &handle));
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(sleeping.as_mut().poll(&mut cx).is_pending());
    drop(rt);
    wait_until("the bridge threads to exit", || bridge_threads("vbs") == 0);

    let message = |r: std::thread::Result<()>| {
        let p = r.expect_err("it panics");
        p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
    };
    let polled_again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = sleeping.as_mut().poll(&mut cx);
    }));
    let m = message(polled_again);
    assert!(m.contains("has shut down") && m.contains("Tokio bridge"), "{m}");
    // Dropping it (inside the dead bridge's context) is fine.
    drop(sleeping);

    // A new one, first polled after shutdown, says the same.
    let mut fresh = Box::pin(WithTokio::new_in(async { 1 }, &handle));
    let m = message(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = fresh.as_mut().poll(&mut cx);
    })));
    assert!(m.contains("has shut down"), "{m}");
    let err = handle.try_tokio_bridge().expect_err("no bridge after shutdown");
    assert!(err.to_string().contains("has shut down"), "{err}");
    assert!(panics_on("vbs").is_empty(), "{:?}", panics_on("vbs"));
}

#[test]
fn outside_a_runtime_with_tokio_panics_with_a_clear_message() {
    // Made anywhere; the runtime is looked up when it is first polled.
    let mut fut = Box::pin(with_tokio(async {}));
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = fut.as_mut().poll(&mut cx);
    }));
    let p = r.expect_err("no Volt runtime here");
    let m = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(m.contains("outside a Volt runtime") && m.contains("new_in"), "{m}");
}

/// `rt.block_on(with_tokio(fut))`, as the module doc and Tokio users write it: the
/// future is made before `block_on` enters the runtime, so it must find the runtime when
/// first polled, not when made.
#[test]
fn block_on_a_with_tokio_made_outside_the_runtime() {
    watch_panics();
    let rt = runtime("vbo", 1, 1);
    let got = rt.block_on(with_tokio(async {
        // A Tokio timer and a `tokio::spawn` need the bridge's context.
        tokio::time::sleep(Duration::from_millis(1)).await;
        tokio::spawn(async { 200u16 }).await.expect("the bridged task")
    }));
    assert_eq!(got, 200);
    drop(rt);
    assert!(panics_on("vbo").is_empty(), "{:?}", panics_on("vbo"));
}

#[test]
fn with_tokio_drops_its_future_inside_the_bridge_context() {
    // A future whose drop needs a Tokio context (it spawns a cleanup task) is cancelled
    // by the runtime's shutdown without a panic.
    struct SpawnsOnDrop(Arc<AtomicBool>);
    impl Drop for SpawnsOnDrop {
        fn drop(&mut self) {
            let flag = Arc::clone(&self.0);
            tokio::spawn(async move { flag.store(true, SeqCst) });
        }
    }
    watch_panics();
    let rt = runtime("vbc", 1, 1);
    let cleaned = Arc::new(AtomicBool::new(false));
    let guard = SpawnsOnDrop(Arc::clone(&cleaned));
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let pending = async move {
        let _guard = guard;
        let _ = started_tx.send(());
        std::future::pending::<()>().await
    };
    let task = rt.spawn(WithTokio::new_in(pending, rt.handle()));
    started_rx.recv_timeout(LIMIT).expect("the task started");
    task.abort();
    wait_until("the cleanup task to run on the bridge", || cleaned.load(SeqCst));
    drop(rt);
    assert!(panics_on("vbc").is_empty(), "{:?}", panics_on("vbc"));
}

/// Reading from a socket a Tokio-only crate made (`tokio::net::TcpStream`) works inside
/// `with_tokio`, and its readiness arrives from the bridge's reactor.
#[test]
fn tokio_sockets_inside_with_tokio_read_and_write() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    watch_panics();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        std::io::Write::write_all(&mut s, &buf.iter().map(|b| b.to_ascii_uppercase()).collect::<Vec<_>>()).unwrap();
    });
    let rt = runtime("vbk", 2, 1);
    let reply = run_bridged(&rt, async move {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"volt!").await.unwrap();
        let mut buf = [0u8; 5];
        // A Tokio timer on the bridge, too.
        tokio::time::sleep(Duration::from_millis(1)).await;
        s.read_exact(&mut buf).await.unwrap();
        buf
    });
    assert_eq!(&reply, b"VOLT!");
    server.join().unwrap();
    drop(rt);
    assert!(panics_on("vbk").is_empty(), "{:?}", panics_on("vbk"));
}

#[test]
fn thread_hooks_run_on_the_bridge_threads_too() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let starts = Arc::new(AtomicUsize::new(0));
    let stops = Arc::new(AtomicUsize::new(0));
    fn is_bridge() -> bool {
        std::thread::current().name().is_some_and(|n| n.contains("-bridge-"))
    }
    let rt = {
        let (starts, stops) = (Arc::clone(&starts), Arc::clone(&stops));
        volt::runtime::Builder::new()
            .worker_threads(1)
            .tokio_bridge_threads(2)
            .on_thread_start(move || {
                if is_bridge() {
                    starts.fetch_add(1, Ordering::SeqCst);
                }
            })
            .on_thread_stop(move || {
                if is_bridge() {
                    stops.fetch_add(1, Ordering::SeqCst);
                }
            })
            .build()
            .unwrap()
    };
    let on_bridge = rt.block_on(async { volt::bridge::spawn(async { is_bridge() }).await.unwrap() });
    assert!(on_bridge);
    drop(rt);
    assert_eq!(starts.load(Ordering::SeqCst), 2, "each bridge worker ran the start hook");
    assert_eq!(stops.load(Ordering::SeqCst), 2, "and the stop hook at shutdown");
}

#[test]
fn a_task_waiting_on_tokio_shows_the_bridge_and_a_volt_wait_inside_wins() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .thread_name("bwait")
        .event_ring(1024)
        .build()
        .expect("build runtime");
    let on_tokio = volt::task::Builder::new().name("on-tokio").spawn_on(
        WithTokio::new_in(async { tokio::time::sleep(Duration::from_secs(3600)).await }, rt.handle()),
        rt.handle(),
    );
    let on_volt = volt::task::Builder::new().name("on-volt").spawn_on(
        WithTokio::new_in(async { volt::time::sleep(Duration::from_secs(3600)).await }, rt.handle()),
        rt.handle(),
    );
    let waits = |name: &str| {
        rt.handle().telemetry().tasks().into_iter().find(|t| t.name.as_deref() == Some(name)).and_then(|t| t.waiting_on)
    };
    wait_until("the bridged tasks' waits", || {
        waits("on-tokio") == Some(volt::telemetry::WaitReason::Label(volt::bridge::BRIDGE_WAIT.into()))
            && matches!(waits("on-volt"), Some(volt::telemetry::WaitReason::Sleep { remaining: Some(_) }))
    });
    assert_eq!(volt::bridge::BRIDGE_WAIT.to_string(), "tokio (bridge)");
    on_tokio.abort();
    on_volt.abort();
}
