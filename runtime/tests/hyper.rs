//! `volt::hyper` against real clients: hyper's client on a Tokio runtime, curl, raw TCP
//! peers that misbehave, and hyper-util's client on Volt. No timing is asserted: every
//! wait has a generous bound only so a bug fails instead of hanging.

use bytes_util::body_string;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod bytes_util {
    use http_body_util::BodyExt;

    pub async fn body_string(body: hyper::body::Incoming) -> String {
        let bytes = body.collect().await.expect("the body arrives").to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf-8 body")
    }
}

/// A generous bound on any wait: far past what a loaded 2-core machine needs.
const BOUND: Duration = Duration::from_secs(30);

fn volt_rt(workers: usize) -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(workers).build().unwrap()
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// The test app: `/` says hello, `/sleep?ms=N` answers after N ms, `/echo` returns the
/// request body.
async fn app(req: http::Request<Incoming>) -> Result<http::Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let body = match path.as_str() {
        "/" => "Hello, world!".to_owned(),
        "/sleep" => {
            let ms: u64 = query.strip_prefix("ms=").and_then(|v| v.parse().ok()).unwrap_or(100);
            volt::time::sleep(Duration::from_millis(ms)).await;
            format!("slept {ms}")
        }
        "/echo" => {
            let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        "/slow-echo" => {
            // Reads the body only after a while, so it waits unread in the socket.
            volt::time::sleep(Duration::from_millis(500)).await;
            let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        _ => {
            return Ok(http::Response::builder().status(404).body(Full::new(Bytes::from_static(b"not found"))).unwrap())
        }
    };
    Ok(http::Response::new(Full::new(Bytes::from(body))))
}

fn service() -> impl tower::Service<
    http::Request<Incoming>,
    Response = http::Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send + 'static,
> + Clone
       + Send
       + 'static {
    tower::service_fn(app)
}

/// Start a server on `rt` (127.0.0.1, a free port); it runs until `stop` is sent.
fn start_server(
    rt: &volt::Runtime,
    header_timeout: Option<Duration>,
) -> (SocketAddr, futures::channel::oneshot::Sender<()>, volt::JoinHandle<std::io::Result<()>>) {
    start_server_with_deadline(rt, header_timeout, Duration::from_secs(20))
}

/// `start_server` with the shutdown deadline given.
fn start_server_with_deadline(
    rt: &volt::Runtime,
    header_timeout: Option<Duration>,
    deadline: Duration,
) -> (SocketAddr, futures::channel::oneshot::Sender<()>, volt::JoinHandle<std::io::Result<()>>) {
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let server = rt.spawn(async move {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await?;
        addr_tx.send(listener.local_addr()?).unwrap();
        volt::hyper::serve(listener, service())
            .header_read_timeout(header_timeout)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .shutdown_deadline(deadline)
            .await
    });
    let addr = addr_rx.recv_timeout(BOUND).expect("the server binds");
    (addr, tx, server)
}

/// Wait (bounded) until `f` holds.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < BOUND, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn tasks_alive(rt: &volt::Runtime) -> u64 {
    rt.handle().telemetry().snapshot().tasks_alive
}

/// One HTTP/1.1 request over a hyper client connection on Tokio.
async fn get1(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    addr: SocketAddr,
    path: &str,
) -> (u16, String) {
    sender.ready().await.expect("connection ready");
    let req = http::Request::get(path).header("host", addr.to_string()).body(Empty::new()).unwrap();
    let res = sender.send_request(req).await.expect("response");
    let status = res.status().as_u16();
    (status, body_string(res.into_body()).await)
}

#[test]
fn http1_200_keepalive_connections_from_hyper_on_tokio() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, Some(Duration::from_secs(30)));
    let tokio = tokio_rt();
    const CONNS: usize = 200;
    const PER_CONN: usize = 5;
    let ok = Arc::new(AtomicUsize::new(0));
    tokio.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..CONNS {
            let ok = Arc::clone(&ok);
            tasks.push(tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
                let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .expect("handshake");
                tokio::spawn(conn);
                // Every request on the one connection: keep-alive must hold.
                for _ in 0..PER_CONN {
                    let (status, body) = get1(&mut sender, addr, "/").await;
                    assert_eq!((status, body.as_str()), (200, "Hello, world!"));
                    ok.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let all = async {
            for t in tasks {
                t.await.expect("client task");
            }
        };
        tokio::time::timeout(BOUND, all).await.expect("all requests answered");
    });
    assert_eq!(ok.load(Ordering::Relaxed), CONNS * PER_CONN);
    stop_and_wait(&rt, stop, server, "server stops");
}

#[test]
fn http2_prior_knowledge_from_hyper_on_tokio() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, None);
    let tokio = tokio_rt();
    tokio.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .expect("h2 handshake");
        tokio::spawn(conn);
        // 100 concurrent streams on the one connection, echoing distinct bodies.
        let mut tasks = Vec::new();
        for i in 0..100 {
            let mut sender = sender.clone();
            tasks.push(tokio::spawn(async move {
                let body = format!("stream {i}");
                let req = http::Request::post(format!("http://{addr}/echo"))
                    .body(Full::new(Bytes::from(body.clone())))
                    .unwrap();
                let res = sender.send_request(req).await.expect("h2 response");
                assert_eq!(res.version(), http::Version::HTTP_2);
                assert_eq!(res.status(), 200);
                assert_eq!(body_string(res.into_body()).await, body);
            }));
        }
        tokio::time::timeout(BOUND, async {
            for t in tasks {
                t.await.unwrap();
            }
        })
        .await
        .expect("every stream answered");
    });
    stop_and_wait(&rt, stop, server, "server stops");
}

fn curl(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("curl")
        .args(["-s", "-m", "30"])
        .args(args)
        .output()
        .expect("curl runs (install it: apt-get install curl; .ci/run does when it is missing)");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn curl_http1_and_http2_prior_knowledge() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, Some(Duration::from_secs(30)));
    let url = format!("http://{addr}/");
    let (ok, body) = curl(&["-w", " %{http_version}", &url]);
    assert!(ok);
    assert_eq!(body, "Hello, world! 1.1");
    let (ok, body) = curl(&["--http2-prior-knowledge", "-w", " %{http_version}", &url]);
    assert!(ok);
    assert_eq!(body, "Hello, world! 2");
    let (ok, body) = curl(&["--data-binary", "posted", &format!("http://{addr}/echo")]);
    assert!(ok);
    assert_eq!(body, "posted");
    let (ok, code) = curl(&["-o", "/dev/null", "-w", "%{http_code}", &format!("http://{addr}/nope")]);
    assert!(ok);
    assert_eq!(code, "404");
    stop_and_wait(&rt, stop, server, "server stops");
}

#[test]
fn graceful_shutdown_finishes_100_slow_requests_and_refuses_new_connections() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, Some(Duration::from_secs(30)));
    // 100 raw HTTP/1.1 clients, each on its own thread and connection, asking for a
    // response that takes 1.5 s.
    let started = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..100)
        .map(|_| {
            let started = Arc::clone(&started);
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).expect("connect");
                s.set_read_timeout(Some(BOUND)).unwrap();
                s.write_all(b"GET /sleep?ms=1500 HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
                started.fetch_add(1, Ordering::SeqCst);
                let mut out = String::new();
                // The server closes the connection after the response: shutdown asks it to.
                s.read_to_string(&mut out).expect("the response arrives before the close");
                out
            })
        })
        .collect();
    wait_until("all 100 requests sent", || started.load(Ordering::SeqCst) == 100);
    // Let the server read them (they are in flight once their connection task sleeps).
    wait_until("100 connections open", || tasks_alive(&rt) >= 101);
    stop.send(()).unwrap();
    // New connections are refused once the listener is closed.
    wait_until("the listener closed", || std::net::TcpStream::connect(addr).is_err());
    let err = std::net::TcpStream::connect(addr).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    for c in clients {
        let out = c.join().expect("client thread");
        assert!(out.starts_with("HTTP/1.1 200 OK"), "in-flight request finished: {out:?}");
        assert!(out.ends_with("slept 1500"), "full body: {out:?}");
    }
    rt.block_on(async { volt::time::timeout(BOUND, server).await }).expect("server stops").unwrap().unwrap();
}

#[test]
fn graceful_shutdown_drops_connections_still_open_at_the_deadline() {
    let rt = volt_rt(2);
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let server = rt.spawn(async move {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await?;
        addr_tx.send(listener.local_addr()?).unwrap();
        volt::hyper::serve(listener, service())
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .shutdown_deadline(Duration::from_millis(200))
            .await
    });
    let addr: SocketAddr = addr_rx.recv_timeout(BOUND).unwrap();
    let baseline = tasks_alive(&rt);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    // This response would take 10 minutes.
    s.write_all(b"GET /sleep?ms=600000 HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    wait_until("the request in flight", || tasks_alive(&rt) > baseline);
    stop_and_wait(&rt, tx, server, "serve returns after the deadline");
    // The connection was dropped: the client reads the close, no response.
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(out.is_empty(), "no response after the deadline: {:?}", String::from_utf8_lossy(&out));
    wait_until("the connection task gone", || tasks_alive(&rt) < baseline);
}

/// A graceful shutdown that begins while the body of the request being answered still
/// waits unread in the socket (its handler reads it only later): the request is answered
/// in full, and the connection closes long before the deadline (none here: an hour, and
/// no header-read timeout to cut it either).
#[test]
fn graceful_shutdown_closes_a_connection_once_its_unread_bytes_are_read() {
    let rt = volt_rt(2);
    let (addr, tx, server) = start_server_with_deadline(&rt, None, Duration::from_secs(3600));
    let baseline = tasks_alive(&rt);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    s.write_all(b"POST /slow-echo HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\n").unwrap();
    wait_until("the connection's task", || tasks_alive(&rt) > baseline);
    // Most likely after hyper read the head: the body then waits in the socket, unread.
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(b"hello").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    stop_and_wait(&rt, tx, server, "serve returns long before its hour-long deadline");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 200") && out.ends_with("hello"), "the request was answered: {out:?}");
}

/// A request's first bytes arrive, then the graceful shutdown begins, and only then does
/// the connection's task first run (its one worker was busy): `first` is sent before the
/// signal and `rest` (if any) 100 ms after the worker is free. The request is answered.
fn first_bytes_before_the_signal_are_answered(first: &[u8], rest: &[u8]) {
    // No stall monitor: the held worker is a stall on purpose, and symbolizing it on a
    // loaded machine takes long.
    let rt = volt::runtime::Builder::new().worker_threads(1).stall_threshold(None).build().unwrap();
    let (addr, tx, server) = start_server_with_deadline(&rt, Some(BOUND), BOUND);
    let baseline = tasks_alive(&rt);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    wait_until("the connection's task", || tasks_alive(&rt) > baseline);
    // The task is spawned; hold the only worker so that it runs after the signal.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (free_tx, free_rx) = std::sync::mpsc::channel::<()>();
    rt.spawn(async move {
        held_tx.send(()).unwrap();
        let _ = free_rx.recv_timeout(BOUND);
    });
    held_rx.recv().unwrap();
    s.write_all(first).unwrap();
    tx.send(()).unwrap();
    // Let the accept loop see the signal before the connection's task can run.
    std::thread::sleep(Duration::from_millis(50));
    drop(free_tx);
    if !rest.is_empty() {
        std::thread::sleep(Duration::from_millis(100));
        s.write_all(rest).unwrap();
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.0 200") && out.ends_with("Hello, world!"), "not answered: {out:?}");
    let served = rt.block_on(async { volt::time::timeout(BOUND, server).await });
    assert!(matches!(served, Ok(Ok(Ok(())))), "serve did not return cleanly: {served:?}");
}

/// A request short enough for the protocol sniff to take whole (at most 24 bytes, such
/// as a load balancer's health check), arrived before the graceful shutdown began: it
/// is answered. (hyper had not read those bytes yet, so the first form of the shutdown
/// took the connection for an idle one and closed it.)
#[test]
fn graceful_shutdown_answers_a_short_request_that_had_arrived() {
    first_bytes_before_the_signal_are_answered(b"GET / HTTP/1.0\r\n\r\n", b"");
}

/// The same with only part of the request arrived before the signal, the rest after.
#[test]
fn graceful_shutdown_answers_a_request_whose_first_bytes_had_arrived() {
    first_bytes_before_the_signal_are_answered(b"GET / HT", b"TP/1.0\r\n\r\n");
}

/// A graceful shutdown that begins halfway through a request's upload (part of its body
/// waits in the socket, the rest is still to come): the request is answered in full,
/// and the connection closes then, not at the deadline.
#[test]
fn graceful_shutdown_during_an_upload_answers_it_and_closes() {
    let rt = volt_rt(2);
    let (addr, tx, server) = start_server_with_deadline(&rt, None, Duration::from_secs(3600));
    let baseline = tasks_alive(&rt);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    s.write_all(b"POST /slow-echo HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nhello").unwrap();
    wait_until("the connection's task", || tasks_alive(&rt) > baseline);
    // Most likely after hyper read the head and the first part: the next waits unread
    // (the handler reads the body only later) when the shutdown begins.
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(b"wor").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    tx.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(b"ld").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 200") && out.ends_with("helloworld"), "the upload was answered: {out:?}");
    rt.block_on(async { volt::time::timeout(BOUND, server).await })
        .expect("serve returns long before its hour-long deadline")
        .unwrap()
        .unwrap();
}

#[test]
fn disconnects_and_garbage_leave_no_task_behind() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, Some(Duration::from_secs(30)));
    // The server's own task is the only one alive before any connection.
    wait_until("the server's task alive", || tasks_alive(&rt) == 1);
    let baseline = 1;
    assert_eq!(curl(&[&format!("http://{addr}/")]).1, "Hello, world!");
    wait_until("the first connection closed", || tasks_alive(&rt) == baseline);
    let mut garbage_answers = Vec::new();
    for i in 0..50 {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(BOUND)).unwrap();
        match i % 5 {
            // Half a request line, then gone.
            0 => s.write_all(b"GET /sle").unwrap(),
            // A whole head promising a body that never comes.
            1 => s.write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\nabc").unwrap(),
            // Gone in the middle of a slow response.
            2 => s.write_all(b"GET /sleep?ms=200 HTTP/1.1\r\nhost: x\r\n\r\n").unwrap(),
            // Garbage: the server answers 400 and closes.
            3 => {
                s.write_all(b"\x00\x01\x02 this is not HTTP \r\n\r\n").unwrap();
                let mut out = Vec::new();
                let _ = s.read_to_end(&mut out);
                garbage_answers.push(String::from_utf8_lossy(&out).into_owned());
            }
            // An HTTP/2 preface followed by junk frames.
            _ => {
                s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff\xff\xff\xff\xff\xff").unwrap();
                let mut out = Vec::new();
                let _ = s.read_to_end(&mut out);
            }
        }
        drop(s);
    }
    for a in &garbage_answers {
        assert!(a.is_empty() || a.starts_with("HTTP/1.1 400"), "garbage gets a 400 or a close: {a:?}");
    }
    wait_until("every connection task gone", || tasks_alive(&rt) == baseline);
    // And the server still serves.
    assert_eq!(curl(&[&format!("http://{addr}/")]).1, "Hello, world!");
    let s = rt.handle().telemetry().snapshot();
    assert_eq!(s.tasks_panicked, 0);
    stop_and_wait(&rt, stop, server, "server stops");
}

#[test]
fn header_read_timeout_cuts_tricklers_and_silent_clients() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, Some(Duration::from_millis(300)));
    wait_until("the server's task alive", || tasks_alive(&rt) == 1);
    // A client that trickles its head one byte at a time, slower than the timeout.
    let trickler = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let head = b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: yes\r\n\r\n";
        let start = Instant::now();
        for b in head {
            if s.write_all(&[*b]).is_err() {
                return (true, start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(100));
            // Cut: the server has closed its end (a read sees EOF or a reset).
            s.set_nonblocking(true).unwrap();
            let mut buf = [0u8; 256];
            let cut = match s.read(&mut buf) {
                Ok(_) => true,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            };
            s.set_nonblocking(false).unwrap();
            if cut {
                return (true, start.elapsed());
            }
        }
        (false, start.elapsed())
    });
    // Clients that connect and say nothing, and one that starts an HTTP/2 preface and stalls.
    let mut silent: Vec<_> = (0..3).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
    let mut stalled = std::net::TcpStream::connect(addr).unwrap();
    stalled.write_all(b"PRI * HTTP").unwrap();
    silent.push(stalled);
    for s in &mut silent {
        s.set_read_timeout(Some(BOUND)).unwrap();
        let mut buf = [0u8; 64];
        // EOF (or a reset): the server gave up on it.
        let n = s.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "a silent client is closed, not answered");
    }
    // A client that sends the whole HTTP/2 preface and then no request: the server
    // answers with its settings, and must still give up on it.
    let mut preface_only = std::net::TcpStream::connect(addr).unwrap();
    preface_only.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    assert!(closed_by_server(&mut preface_only), "an HTTP/2 client that never sends a request is closed");
    let (cut, _after) = trickler.join().unwrap();
    assert!(cut, "the trickling client was cut before it finished its head");
    wait_until("no connection task left", || tasks_alive(&rt) == 1);
    stop_and_wait(&rt, stop, server, "server stops");
}

/// Read and discard until the server closes the connection (true), or `BOUND` passes
/// with the connection still open (false).
fn closed_by_server(s: &mut std::net::TcpStream) -> bool {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    while start.elapsed() < BOUND {
        s.set_read_timeout(Some(BOUND.saturating_sub(start.elapsed()).max(Duration::from_millis(1)))).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
    false
}

/// Read one HTTP/1.1 response with a `content-length` body from a raw socket; bytes past
/// it stay in `carry` for the next call.
fn read_response(s: &mut std::net::TcpStream, carry: &mut Vec<u8>) -> String {
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = carry.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&carry[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap()))
                .expect("a content-length");
            if carry.len() >= end + 4 + len {
                let rest = carry.split_off(end + 4 + len);
                let response = String::from_utf8_lossy(carry).into_owned();
                *carry = rest;
                return response;
            }
        }
        let n = s.read(&mut buf).expect("the response arrives");
        assert!(n > 0, "the server closed mid-response: {:?}", String::from_utf8_lossy(carry));
        carry.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn header_read_timeout_spares_requests_being_answered_and_closes_idle_keepalives() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, Some(Duration::from_millis(200)));
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    // A handler that takes several timeouts to answer is not cut: the timeout only runs
    // while the server waits for a head.
    // A second request is pipelined behind it (sent now, so no client delay can make it
    // late), and the same kept-alive connection answers it...
    s.write_all(b"GET /sleep?ms=1000 HTTP/1.1\r\nhost: x\r\n\r\nGET / HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut carry = Vec::new();
    let first = read_response(&mut s, &mut carry);
    assert!(first.starts_with("HTTP/1.1 200") && first.ends_with("slept 1000"), "{first:?}");
    let second = read_response(&mut s, &mut carry);
    assert!(second.ends_with("Hello, world!"), "{second:?}");
    // ...and, left idle, is closed by the server (EOF or a reset).
    let mut buf = [0u8; 64];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "an idle kept-alive connection is closed, not answered");
    wait_until("no connection task left", || tasks_alive(&rt) == 1);
    stop_and_wait(&rt, stop, server, "server stops");
}

#[test]
fn connection_tasks_are_named_for_the_console() {
    let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
    let (addr, stop, server) = start_server(&rt, None);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /sleep?ms=60000 HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    wait_until("a task named `hyper connection`", || {
        rt.handle().telemetry().tasks().iter().any(|t| t.name.as_deref() == Some(volt::hyper::CONNECTION_TASK_NAME))
    });
    // What each connection waits on, through `volt::hyper::Io` and the handler: the one
    // in `/sleep` on its socket and its sleep (hyper polls both in one poll, in that
    // order), a silent one on a read from its peer, the server on accept.
    let silent = std::net::TcpStream::connect(addr).unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let sleeping_addr = s.local_addr().unwrap();
    use volt::telemetry::WaitReason;
    wait_until("the connections' waits", || {
        let tasks = rt.handle().telemetry().tasks();
        let waits: Vec<&[WaitReason]> = tasks
            .iter()
            .filter(|t| t.name.as_deref() == Some(volt::hyper::CONNECTION_TASK_NAME))
            .map(|t| t.waits.as_slice())
            .collect();
        let accepting =
            tasks.iter().any(|t| matches!(t.waiting_on, Some(WaitReason::Accept { addr: Some(a) }) if a == addr));
        accepting
            && waits.iter().any(
                |w| matches!(w, [WaitReason::Read { addr: Some(a) }, WaitReason::Sleep { .. }] if *a == sleeping_addr),
            )
            && waits.contains(&[WaitReason::Read { addr: Some(silent_addr) }].as_slice())
    });
    drop(silent);
    drop(s);
    stop_and_wait(&rt, stop, server, "server stops");
}

#[test]
fn hyper_util_client_on_volt_through_the_connector() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, None);
    let bodies = rt.block_on(async move {
        let client = hyper_util::client::legacy::Client::builder(volt::hyper::Executor::new())
            .timer(volt::hyper::Timer::new())
            .pool_timer(volt::hyper::Timer::new())
            .build::<_, Full<Bytes>>(volt::hyper::Connector::new());
        let mut out = Vec::new();
        for i in 0..20 {
            let req = http::Request::post(format!("http://localhost:{}/echo", addr.port()))
                .body(Full::new(Bytes::from(format!("request {i}"))))
                .unwrap();
            let res = volt::time::timeout(BOUND, client.request(req)).await.expect("bounded").expect("response");
            assert_eq!(res.status(), 200);
            out.push(body_string(res.into_body()).await);
        }
        // https is refused with a clear error, not a hang.
        let err = client.get("https://127.0.0.1:1/".parse().unwrap()).await.unwrap_err();
        let mut msg = format!("{err:?}");
        if let Some(src) = std::error::Error::source(&err) {
            msg = format!("{msg} {src}");
        }
        assert!(msg.contains("plain HTTP"), "{msg}");
        out
    });
    for (i, b) in bodies.iter().enumerate() {
        assert_eq!(b, &format!("request {i}"));
    }
    stop_and_wait(&rt, stop, server, "server stops");
}

/// A futures-io stream that is not a Volt `TcpStream`: `Io` takes its generic path.
struct Wrapped(volt::net::TcpStream);

impl futures::AsyncRead for Wrapped {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl futures::AsyncWrite for Wrapped {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_close(cx)
    }
}

#[test]
fn io_over_any_futures_io_stream_with_hyper_conn_on_volt() {
    let rt = volt_rt(2);
    let (addr, stop, server) = start_server(&rt, None);
    let body = rt.block_on(async move {
        let stream = volt::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            .handshake::<_, Full<Bytes>>(volt::hyper::Io::new(Wrapped(stream)))
            .await
            .unwrap();
        volt::spawn(conn);
        // A body larger than one read: many reads through the zeroing path.
        let big = "x".repeat(256 * 1024);
        let req = http::Request::post("/echo").header("host", "x").body(Full::new(Bytes::from(big.clone()))).unwrap();
        let res = volt::time::timeout(BOUND, sender.send_request(req)).await.unwrap().unwrap();
        let got = body_string(res.into_body()).await;
        assert_eq!(got.len(), big.len());
        assert_eq!(got, big);
        // The connection takes the next request once it has finished the last one.
        sender.ready().await.unwrap();
        let req = http::Request::get("/").header("host", "x").body(Full::new(Bytes::new())).unwrap();
        body_string(sender.send_request(req).await.unwrap().into_body()).await
    });
    assert_eq!(body, "Hello, world!");
    stop_and_wait(&rt, stop, server, "server stops");
}

/// The tasks `Executor` spawns carry its name (the default, or one given to `named`),
/// so hyper's HTTP/2 streams and client connections show in the console's task list.
#[test]
fn executor_tasks_are_named_for_the_console() {
    let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
    // Each task waits for a permit: released whether or not it has been polled yet.
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let spawn_held = |exec: &volt::hyper::Executor| {
        let release = Arc::clone(&release);
        hyper::rt::Executor::execute(exec, async move { drop(release.acquire().await) });
    };
    spawn_held(&volt::hyper::Executor::with_handle(rt.handle().clone()));
    spawn_held(&volt::hyper::Executor::with_handle(rt.handle().clone()).named("h2 stream of the test"));
    let named = |name: &str| rt.handle().telemetry().tasks().iter().filter(|t| t.name.as_deref() == Some(name)).count();
    wait_until("both executor tasks in the task list", || {
        named(volt::hyper::EXECUTOR_TASK_NAME) == 1 && named("h2 stream of the test") == 1
    });
    release.add_permits(2);
    wait_until("the executor tasks to finish", || {
        named(volt::hyper::EXECUTOR_TASK_NAME) + named("h2 stream of the test") == 0
    });
}

/// `Io` over a Volt `TcpStream` tells hyper it writes vectored (one `writev` for a head
/// and its body); over any other futures-io stream it does not, and hyper flattens.
#[test]
fn io_writes_vectored_over_a_volt_tcp_stream_only() {
    let rt = volt_rt(1);
    rt.block_on(async {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = futures::join!(volt::net::TcpStream::connect(addr), listener.accept());
        let (a, b) = (a.unwrap(), b.unwrap().0);
        assert!(hyper::rt::Write::is_write_vectored(&volt::hyper::Io::new(a)));
        assert!(!hyper::rt::Write::is_write_vectored(&volt::hyper::Io::new(Wrapped(b))));
    });
}

#[test]
fn timer_sleeps_resets_and_treats_duration_max_as_never() {
    use hyper::rt::Timer as _;
    let rt = volt_rt(1);
    rt.block_on(async {
        let timer = volt::hyper::Timer::new();
        let start = Instant::now();
        timer.sleep(Duration::from_millis(20)).await;
        assert!(start.elapsed() >= Duration::from_millis(20), "a sleep never ends early");
        // Reset moves a pending sleep earlier, in place.
        let mut long = timer.sleep(Duration::from_secs(3600));
        timer.reset(&mut long, Instant::now() + Duration::from_millis(10));
        volt::time::timeout(BOUND, long).await.expect("the reset sleep fires");
        // A deadline past any real one: pending, no panic.
        let never = timer.sleep(Duration::MAX);
        assert!(volt::time::timeout(Duration::from_millis(30), never).await.is_err());
    });
    // Outside any runtime, a timer made with a handle still works.
    let timer = volt::hyper::Timer::with_handle(rt.handle().clone());
    let s = timer.sleep(Duration::from_millis(5));
    rt.block_on(s);
}

/// A burst of connections already waiting in the listener's backlog does not hold the
/// worker for the whole burst: on a runtime of one worker, a task that yields in a loop
/// gets polled while the accept loop is part way through the burst (without the accept
/// loop's yields it sees none accepted, then all of them).
#[test]
fn an_accept_burst_lets_the_workers_other_tasks_run() {
    // Under the listen backlog (128 for a std listener), so every handshake completes.
    const BURST: u64 = 100;
    let rt = volt_rt(1);
    let listener = rt.block_on(async { volt::net::TcpListener::bind("127.0.0.1:0").await }).unwrap();
    let addr = listener.local_addr().unwrap();
    // Every connection's handshake completes in the kernel before `serve` accepts any.
    let clients: Vec<_> = (0..BURST).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
    let baseline = tasks_alive(&rt);
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let handle = rt.handle().clone();
    // The probe: note how many connection tasks are alive each time it runs.
    let probe = rt.spawn(async move {
        let mut seen = Vec::new();
        loop {
            let alive = handle.telemetry().snapshot().tasks_alive.saturating_sub(baseline + 2);
            seen.push(alive);
            if alive >= BURST {
                return seen;
            }
            volt::task::yield_now().await;
        }
    });
    let server = rt.spawn(async move {
        volt::hyper::serve(listener, service())
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .shutdown_deadline(Duration::from_millis(100))
            .await
    });
    let seen =
        rt.block_on(async { volt::time::timeout(BOUND, probe).await }).expect("every connection accepted").unwrap();
    assert!(seen.iter().any(|&n| n > 0 && n < BURST), "the probe ran only before or after the whole burst: {seen:?}");
    stop_and_wait(&rt, tx, server, "server stops");
    drop(clients);
}

fn stop_and_wait(
    rt: &volt::Runtime,
    stop: futures::channel::oneshot::Sender<()>,
    server: volt::JoinHandle<std::io::Result<()>>,
    what: &str,
) {
    stop.send(()).unwrap();
    rt.block_on(async { volt::time::timeout(BOUND, server).await }).expect(what).unwrap().unwrap();
}

/// A listening socket that can no longer accept (shut down under the server: `accept`
/// then fails with `EINVAL`) ends `serve` with that error instead of a retry loop.
#[cfg(target_os = "linux")]
#[test]
fn serve_returns_the_error_of_a_listener_that_cannot_accept() {
    use std::os::fd::AsRawFd;
    let rt = volt_rt(2);
    let (fd_tx, fd_rx) = std::sync::mpsc::channel();
    let server = rt.spawn(async move {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await?;
        fd_tx.send(listener.as_raw_fd()).unwrap();
        volt::hyper::serve(listener, service()).await
    });
    let fd = fd_rx.recv_timeout(BOUND).unwrap();
    // SAFETY: `fd` is the listener's, open until `serve` returns and drops it; shutting
    // it down only stops it accepting.
    assert_eq!(unsafe { libc::shutdown(fd, libc::SHUT_RDWR) }, 0);
    let result = rt
        .block_on(async { volt::time::timeout(BOUND, server).await })
        .expect("serve returns instead of retrying forever")
        .unwrap();
    let err = result.expect_err("the listener's error");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
}

#[test]
fn the_serve_future_is_send_and_a_bound_port_is_a_clear_error() {
    fn assert_send<T: Send>(_: &T) {}
    let rt = volt_rt(1);
    rt.block_on(async {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fut = std::future::IntoFuture::into_future(volt::hyper::serve(listener, service()));
        assert_send(&fut);
        let err = volt::net::TcpListener::bind(addr).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
        drop(fut);
    });
}

/// Polls made by all the runtime's workers so far.
fn polls(rt: &volt::Runtime) -> u64 {
    rt.handle().telemetry().snapshot().workers.iter().map(|w| w.tasks_polled).sum()
}

/// A zero header-read timeout while a handler waits: there is no head to wait for, so the
/// connection's task must not be woken for the timeout at all (it was woken at once, over
/// and over, by a timer set for "now", and spun for as long as the handler ran). After
/// the response, the idle connection is closed at once.
#[test]
fn a_zero_header_read_timeout_does_not_spin_while_a_handler_waits() {
    zero_header_read_timeout_with_a_waiting_handler(2);
}

/// The same on one worker, where nothing turns the reactor between the accept and the
/// connection's first poll: a request already in the socket must still be read at once
/// (an accepted socket's readiness used to wait for the reactor's first event, and the
/// zero timeout cut every such connection before its request was read).
#[test]
fn a_zero_header_read_timeout_reads_a_request_already_there_on_one_worker() {
    zero_header_read_timeout_with_a_waiting_handler(1);
}

fn zero_header_read_timeout_with_a_waiting_handler(workers: usize) {
    let rt = volt_rt(workers);
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = futures::channel::oneshot::channel::<()>();
    let release_rx = Arc::new(std::sync::Mutex::new(Some(release_rx)));
    let handler = tower::service_fn(move |_req: http::Request<Incoming>| {
        let entered = entered_tx.clone();
        let release = release_rx.lock().unwrap().take();
        async move {
            let _ = entered.send(());
            if let Some(release) = release {
                let _ = release.await;
            }
            Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"released"))))
        }
    });
    // With no time allowed, the request must be in the socket before the server first
    // reads it: it is sent before the server starts. Should the kernel still be
    // delivering it when the server looks (the connection is then cut before its
    // handler runs), try again on a new server.
    let mut client = None;
    for _ in 0..20 {
        let listener = rt.block_on(volt::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let mut s = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        s.write_all(b"GET /wait HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        s.set_nonblocking(true).unwrap();
        let app = handler.clone();
        let server = volt::hyper::serve(listener, app).header_read_timeout(Some(Duration::ZERO));
        rt.spawn(std::future::IntoFuture::into_future(server));
        let start = Instant::now();
        let entered = loop {
            if entered_rx.try_recv().is_ok() {
                break true;
            }
            let mut byte = [0u8; 1];
            match s.read(&mut byte) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // Closed (EOF or a reset) before the handler ran.
                _ => break false,
            }
            assert!(start.elapsed() < BOUND, "the request neither reached its handler nor was cut");
            std::thread::sleep(Duration::from_millis(1));
        };
        if entered {
            client = Some(s);
            break;
        }
    }
    let mut client = client.expect("a request reached its handler");
    // The handler now waits for `release`, which only this thread sends. Nothing else on
    // the runtime has anything to do, so its workers should make (next to) no polls.
    let before = polls(&rt);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(200) {
        let made = polls(&rt) - before;
        assert!(made < 1000, "{made} polls while the only request waited in its handler");
        std::thread::sleep(Duration::from_millis(5));
    }
    release_tx.send(()).unwrap();
    client.set_nonblocking(false).unwrap();
    client.set_read_timeout(Some(BOUND)).unwrap();
    let mut carry = Vec::new();
    let response = read_response(&mut client, &mut carry);
    assert!(response.starts_with("HTTP/1.1 200") && response.ends_with("released"), "{response:?}");
    assert!(closed_by_server(&mut client), "the idle connection is closed after its response");
}

/// A futures-io stream that hands out `honest` truthfully, then claims one byte more
/// than the buffer holds on every read.
struct Overclaims {
    honest: &'static [u8],
}

impl futures::AsyncRead for Overclaims {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if !self.honest.is_empty() {
            let n = self.honest.len().min(buf.len());
            buf[..n].copy_from_slice(&self.honest[..n]);
            self.honest = &self.honest[n..];
            return std::task::Poll::Ready(Ok(n));
        }
        buf.fill(b'A');
        std::task::Poll::Ready(Ok(buf.len() + 1))
    }
}

impl futures::AsyncWrite for Overclaims {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A stream that reports more bytes read than it was given room for is an error to
/// hyper (`InvalidData`), not bytes marked filled past the end of its buffer.
#[test]
fn io_turns_a_read_that_overclaims_into_an_error() {
    use hyper::rt::Read as _;
    let mut io = volt::hyper::Io::new(Overclaims { honest: b"" });
    let mut raw = [0u8; 16];
    let mut buf = hyper::rt::ReadBuf::new(&mut raw);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(&mut io).poll_read(&mut cx, buf.unfilled()) {
        std::task::Poll::Ready(Err(e)) => assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}"),
        other => panic!("expected an InvalidData error, got {other:?}"),
    }
    assert!(buf.filled().is_empty(), "nothing was marked filled");
    // And a server connection that meets such a read halfway through a request head
    // fails with an error (hyper closes quietly on an error before any byte of a request,
    // hence the honest start).
    let rt = volt_rt(1);
    let served = rt.block_on(async {
        let io = volt::hyper::Io::new(Overclaims { honest: b"GET / HTTP/1.1\r\n" });
        let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, hyper::service::service_fn(app));
        volt::time::timeout(BOUND, conn).await
    });
    assert!(served.expect("the connection ends").is_err(), "the connection reports the reader's error");
}
