//! `volt::hyper::serve` gives hyper's buffers back while a kept-alive HTTP/1 connection
//! waits for its next request, and serves whatever comes next on it as before: single
//! and pipelined requests, bodies, a head that arrives in two parts around the wait, and
//! a protocol upgrade. Where giving them back would lose something (a response still
//! streaming or not yet flushed, a request body still arriving) it keeps them; a
//! shutdown and the header-read timeout reach a connection that gave them back.
//!
//! A counting allocator measures what the server holds (bytes allocated and not freed),
//! so this file is its own test binary; its tests take turns (`SERIAL`), so one's
//! connections are not in another's count.

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::task::Poll;
use std::time::{Duration, Instant};

#[path = "support/counting.rs"]
mod counting;
use counting::held;

const BOUND: Duration = Duration::from_secs(30);
static SERIAL: Mutex<()> = Mutex::new(());

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < BOUND, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Echo what the upgraded connection sends until it closes.
async fn echo_upgraded(mut up: hyper::upgrade::Upgraded) {
    loop {
        let got = std::future::poll_fn(|cx| {
            let mut buf = [0u8; 256];
            let mut rb = hyper::rt::ReadBuf::new(&mut buf);
            match hyper::rt::Read::poll_read(Pin::new(&mut up), cx, rb.unfilled()) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().to_vec())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await;
        let Ok(data) = got else { return };
        if data.is_empty() {
            return;
        }
        let mut at = 0;
        while at < data.len() {
            match std::future::poll_fn(|cx| hyper::rt::Write::poll_write(Pin::new(&mut up), cx, &data[at..])).await {
                Ok(n) if n > 0 => at += n,
                _ => return,
            }
        }
    }
}

/// Upgrades asked for and answered with 200: how many of their `on` futures failed.
static REFUSED_UPGRADES_FAILED: AtomicUsize = AtomicUsize::new(0);

/// The request bodies `/later` has read.
static LATER_BODIES: Mutex<Vec<Bytes>> = Mutex::new(Vec::new());

/// How long `/slow` waits between its chunks: longer than a connection waits before it
/// gives hyper's buffers back.
const SLOW_GAP: Duration = Duration::from_secs(2);

/// `/big`'s body: more than loopback's socket buffers take, so most of it waits in
/// hyper's buffers while the client does not read.
const BIG: usize = 16 << 20;

type Body = BoxBody<Bytes, Infallible>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// `GET /`: "Hello, world!"; `POST /echo`: the body back; `GET /upgrade` with an
/// `upgrade: echo` head: 101, then an echo of the upgraded stream; `/upgrade-refused`:
/// takes the upgrade and answers 200; `/slow`: a body in three chunks with
/// [`SLOW_GAP`] between them; `/big`: [`BIG`] bytes; `/later`: 200 at once, the
/// request's body read afterwards by a task of its own (into [`LATER_BODIES`]).
async fn app(mut req: http::Request<Incoming>) -> Result<http::Response<Body>, Infallible> {
    match req.uri().path() {
        "/echo" => {
            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            Ok(http::Response::new(full(body)))
        }
        "/upgrade" => {
            let on = hyper::upgrade::on(&mut req);
            drop(volt::spawn(async move {
                if let Ok(up) = on.await {
                    echo_upgraded(up).await;
                }
            }));
            Ok(http::Response::builder()
                .status(101)
                .header("connection", "upgrade")
                .header("upgrade", "echo")
                .body(full(Bytes::new()))
                .unwrap())
        }
        "/upgrade-refused" => {
            let on = hyper::upgrade::on(&mut req);
            drop(volt::spawn(async move {
                if on.await.is_err() {
                    REFUSED_UPGRADES_FAILED.fetch_add(1, Relaxed);
                }
            }));
            Ok(http::Response::new(full("no upgrade")))
        }
        "/slow" => {
            let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
            drop(volt::spawn(async move {
                use futures::SinkExt;
                for (i, part) in ["first;", "second;", "last."].into_iter().enumerate() {
                    if i > 0 {
                        volt::time::sleep(SLOW_GAP).await;
                    }
                    if tx.send(Ok(Frame::data(Bytes::from_static(part.as_bytes())))).await.is_err() {
                        return;
                    }
                }
            }));
            Ok(http::Response::new(StreamBody::new(rx).boxed()))
        }
        "/big" => Ok(http::Response::new(full(vec![b'x'; BIG]))),
        "/later" => {
            let body = req.into_body();
            drop(volt::spawn(async move {
                if let Ok(b) = body.collect().await {
                    LATER_BODIES.lock().unwrap().push(b.to_bytes());
                }
            }));
            Ok(http::Response::new(full("reading later")))
        }
        _ => Ok(http::Response::new(full(Bytes::from_static(b"Hello, world!")))),
    }
}

/// A server on its own runtime, which shuts down gracefully when `stop` is sent or
/// dropped.
struct Server {
    rt: volt::Runtime,
    addr: SocketAddr,
    stop: Option<futures::channel::oneshot::Sender<()>>,
    done: Option<volt::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// No header-read timeout (the tests' own bound is what limits their waits) and a
    /// 30 s shutdown deadline.
    fn start() -> Server {
        Server::with(None, Duration::from_secs(30))
    }

    fn with(header_timeout: Option<Duration>, deadline: Duration) -> Server {
        let rt = volt::runtime::Builder::new().worker_threads(2).build().unwrap();
        let (stop, stopped) = futures::channel::oneshot::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let done = rt.spawn(async move {
            let listener = volt::net::TcpListener::bind("127.0.0.1:0").await?;
            addr_tx.send(listener.local_addr()?).unwrap();
            volt::hyper::serve(listener, tower::service_fn(app))
                .header_read_timeout(header_timeout)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .shutdown_deadline(deadline)
                .await
        });
        let addr = addr_rx.recv_timeout(BOUND).expect("the server binds");
        Server { rt, addr, stop: Some(stop), done: Some(done) }
    }

    fn tasks_alive(&self) -> u64 {
        self.rt.handle().telemetry().snapshot().tasks_alive
    }

    /// One connection served and closed, so that what the first one makes once (hyper's
    /// and the service's lazily made parts) is not counted as the connections'. Then
    /// what the process holds.
    fn warm_up(&self) -> isize {
        let mut warm = TcpStream::connect(self.addr).unwrap();
        warm.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
        assert!(read_until(&mut warm, HELLO, 1).starts_with("HTTP/1.1 200"));
        drop(warm);
        // The server's accept loop alone.
        wait_until("the warm-up connection to end", || self.tasks_alive() == 1);
        held()
    }

    /// Begin the graceful shutdown.
    fn stop(&mut self) {
        let _ = self.stop.take().expect("stopped once").send(());
    }

    /// Wait (bounded) for `serve` to return, and check it returned `Ok`.
    fn join(&mut self) {
        let done = self.done.take().expect("joined once");
        let (tx, rx) = std::sync::mpsc::channel();
        drop(self.rt.spawn(async move {
            let _ = tx.send(done.await);
        }));
        let result = rx.recv_timeout(BOUND).expect("serve returns after the shutdown");
        result.expect("the server task completes").expect("serve returns Ok");
    }
}

/// Read off `s` until what arrived ends with `end` (`count` times in all).
fn read_until(s: &mut TcpStream, end: &str, count: usize) -> String {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while String::from_utf8_lossy(&got).matches(end).count() < count || !String::from_utf8_lossy(&got).ends_with(end) {
        let n = s.read(&mut buf).expect("the response arrives");
        assert!(n > 0, "closed before the whole response: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
const HELLO: &str = "Hello, world!";

/// `GET /` on `c`, answered.
fn get_hello(c: &mut TcpStream) {
    c.write_all(GET).unwrap();
    assert!(read_until(c, HELLO, 1).starts_with("HTTP/1.1 200"));
}

/// Connections to `addr`, each with one request answered and now idle.
fn kept_alive(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut clients: Vec<TcpStream> = (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for c in &mut clients {
        c.set_nodelay(true).unwrap();
        c.write_all(GET).unwrap();
    }
    for c in &mut clients {
        assert!(read_until(c, HELLO, 1).starts_with("HTTP/1.1 200"));
    }
    clients
}

/// How many bytes a connection that gave hyper's buffers back may hold, on average over
/// [`CONNS`]: with them, one holds about 18 KiB more than without (about 1.5 KiB), so
/// a single connection still holding them puts the average over the bound.
const LIMIT: isize = 3 * 1024;

/// How many connections the memory checks count: few enough that one connection's
/// hyper buffers show in their average.
const CONNS: usize = 8;

/// Wait until the server holds under [`LIMIT`] bytes a connection above `base`, on
/// average over `conns`: each idle connection has given hyper's buffers back.
fn wait_for_release(base: isize, conns: usize) {
    let start = Instant::now();
    loop {
        let per_conn = (held() - base) / (conns as isize);
        if per_conn < LIMIT {
            return;
        }
        assert!(
            start.elapsed() < BOUND,
            "the idle connections still hold {per_conn} bytes each, not under {LIMIT}: hyper's buffers were not given back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Read one response off `s`: its head, then a body of `content-length` bytes.
fn read_response(s: &mut TcpStream) -> (String, Vec<u8>) {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf).expect("the response arrives");
        assert!(n > 0, "closed before the response's head: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&got[..head_end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap()))
        .expect("a content-length");
    while got.len() < head_end + len {
        let n = s.read(&mut buf).expect("the body arrives");
        assert!(n > 0, "closed after {} bytes of a {len}-byte body", got.len() - head_end);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got.len(), head_end + len, "nothing follows the response");
    (head, got.split_off(head_end))
}

/// Whether the server closes `s` (end of stream or reset) within the bound, after
/// whatever it still sends.
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn an_idle_kept_alive_connection_gives_hyper_buffers_back_and_serves_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start();
    let base = server.warm_up();

    let mut clients = kept_alive(server.addr, CONNS);
    wait_for_release(base, CONNS);

    // Served on: a request each, then two pipelined in one write.
    for c in &mut clients {
        get_hello(c);
        let two = [GET, GET].concat();
        c.write_all(&two).unwrap();
        let r = read_until(c, HELLO, 2);
        assert_eq!(r.matches("HTTP/1.1 200").count(), 2, "{r}");
    }
    wait_for_release(base, CONNS);

    // Bodies, sized and chunked, then a request without one: after it, the connection
    // gives the buffers back again.
    for (i, c) in clients.iter_mut().enumerate() {
        let body = format!("body-{i:04}");
        let req = if i % 2 == 0 {
            format!("POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}", body.len())
        } else {
            format!(
                "POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            )
        };
        c.write_all(req.as_bytes()).unwrap();
        let r = read_until(c, &body, 1);
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        get_hello(c);
    }
    wait_for_release(base, CONNS);

    // A request and the first part of the next in one write: hyper reads both, answers
    // the first, and holds the part in its buffer while the connection waits. Given back
    // with hyper's connection, that part is completed by the rest.
    for c in &mut clients {
        c.write_all(&[GET, &GET[..20]].concat()).unwrap();
        assert!(read_until(c, HELLO, 1).starts_with("HTTP/1.1 200"));
    }
    wait_for_release(base, CONNS);
    for c in &mut clients {
        c.write_all(&GET[20..]).unwrap();
        assert!(read_until(c, HELLO, 1).starts_with("HTTP/1.1 200"));
    }

    // And a head in two parts with the wait between them, the first part sent after the
    // buffers went (read by `serve` itself).
    wait_for_release(base, CONNS);
    for c in &mut clients {
        c.write_all(&GET[..20]).unwrap();
    }
    wait_for_release(base, CONNS);
    for c in &mut clients {
        c.write_all(&GET[20..]).unwrap();
        assert!(read_until(c, HELLO, 1).starts_with("HTTP/1.1 200"));
    }
}

#[test]
fn a_connection_that_gave_its_buffers_back_can_be_upgraded() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start();
    let base = server.warm_up();
    let mut clients = kept_alive(server.addr, CONNS);
    wait_for_release(base, CONNS);
    let upgrade = b"GET /upgrade HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n";
    for (i, c) in clients.iter_mut().enumerate() {
        // Half alone, half behind a request in the same write.
        let req = if i % 2 == 0 { upgrade.to_vec() } else { [GET, upgrade.as_slice()].concat() };
        c.write_all(&req).unwrap();
        let r = read_until(c, "\r\n\r\n", 1 + i % 2);
        assert!(r.contains("HTTP/1.1 101"), "{r}");
        let ping = format!("ping {i}");
        c.write_all(ping.as_bytes()).unwrap();
        let echoed = read_until(c, &ping, 1);
        assert!(echoed.ends_with(&ping), "{echoed}");
    }

    // An upgrade the handler took and answered with 200: once the connection gives
    // hyper's connection up, the upgrade's future fails (it never hangs for good).
    let before = REFUSED_UPGRADES_FAILED.load(Relaxed);
    let mut refused = kept_alive(server.addr, 2);
    for c in &mut refused {
        c.write_all(b"GET /upgrade-refused HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n")
            .unwrap();
        let r = read_until(c, "no upgrade", 1);
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    wait_until("the refused upgrades' futures to fail", || REFUSED_UPGRADES_FAILED.load(Relaxed) == before + 2);
    // The connections serve on.
    for c in &mut refused {
        get_hello(c);
    }
}

/// Where taking hyper's connection apart would lose bytes, the connection keeps it past
/// the wait, and what was on its way arrives whole: a response body that pauses longer
/// than the wait, a response the client does not read for that long (given back once
/// flushed), a request body still arriving for a task that reads it after its response.
#[test]
fn a_connection_keeps_hyper_while_bytes_are_on_their_way() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start();
    let base = server.warm_up();
    let mut clients = kept_alive(server.addr, 3);

    // A body streamed in three chunks, with longer than the wait between them.
    let c = &mut clients[0];
    c.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let r = read_until(c, "last.\r\n0\r\n\r\n", 1);
    assert!(r.starts_with("HTTP/1.1 200") && r.contains("first;") && r.contains("second;"), "{r}");

    // A big response that waits, unread, in hyper's buffers and the sockets' for longer
    // than the wait: its response has finished (the body went to hyper whole), but its
    // bytes are not yet sent.
    let c = &mut clients[1];
    c.write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    std::thread::sleep(SLOW_GAP);
    let (head, body) = read_response(c);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body.len(), BIG);
    assert!(body.iter().all(|&b| b == b'x'));
    // Not to be counted as the server's below.
    drop(body);

    // A request body the handler hands to a task of its own and answers at once: half
    // of it sent before the answer, the rest after the wait. hyper reads the rest for
    // that task, and the next request on the connection is answered. (Were the
    // connection taken apart in between, the task would lose the rest, and the rest
    // would be read as the start of a malformed head.)
    let c = &mut clients[2];
    c.write_all(b"POST /later HTTP/1.1\r\nhost: x\r\ncontent-length: 20\r\n\r\n0123456789").unwrap();
    let (head, body) = read_response(c);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"reading later");
    std::thread::sleep(SLOW_GAP);
    c.write_all(&[b"abcdefghij".as_slice(), GET].concat()).unwrap();
    let (head, body) = read_response(c);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, HELLO.as_bytes());
    wait_until("the handler's task to read the whole body", || LATER_BODIES.lock().unwrap().len() == 1);
    assert_eq!(LATER_BODIES.lock().unwrap()[0], Bytes::from_static(b"0123456789abcdefghij"));

    // All three then give the buffers back.
    wait_for_release(base, 3);
    for c in &mut clients {
        get_hello(c);
    }
}

/// Send the first 20 bytes of a GET on `c`, a connection that gave its buffers back, and
/// wait until the server holds them.
fn send_part_of_head(c: &mut TcpStream) {
    let before = held();
    c.write_all(&GET[..20]).unwrap();
    wait_until("the part of a head to arrive", || held() >= before + 20);
}

/// A graceful shutdown reaches connections that gave hyper's buffers back: one that has
/// sent nothing since is closed, one with part of a head is answered once the rest comes
/// and then closed; `serve` returns once both are gone.
#[test]
fn a_graceful_shutdown_closes_or_answers_a_connection_that_gave_its_buffers_back() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut server = Server::start();
    let base = server.warm_up();
    let mut clients = kept_alive(server.addr, 2);
    wait_for_release(base, 2);
    send_part_of_head(&mut clients[1]);
    server.stop();
    assert!(closed_by_server(&mut clients[0]), "an idle connection is closed at the shutdown");
    let c = &mut clients[1];
    c.write_all(&GET[20..]).unwrap();
    let (head, body) = read_response(c);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, HELLO.as_bytes());
    assert!(closed_by_server(c), "the connection closes after its answer");
    server.join();
}

/// A forced shutdown (the deadline) cuts a connection that gave hyper's buffers back and
/// then sent part of a head, and the header-read timeout cuts one that sends no more of
/// its next head.
#[test]
fn a_forced_shutdown_and_the_header_timeout_cut_a_connection_that_gave_its_buffers_back() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    {
        let mut server = Server::with(None, Duration::from_millis(500));
        let base = server.warm_up();
        let mut clients = kept_alive(server.addr, 1);
        wait_for_release(base, 1);
        send_part_of_head(&mut clients[0]);
        server.stop();
        assert!(closed_by_server(&mut clients[0]), "the deadline cuts the connection");
        server.join();
    }
    {
        // Longer than the wait before the buffers go, so the timeout comes after it.
        let server = Server::with(Some(Duration::from_secs(3)), Duration::from_secs(30));
        let base = server.warm_up();
        let mut clients = kept_alive(server.addr, 2);
        wait_for_release(base, 2);
        clients[1].write_all(&GET[..20]).unwrap();
        for c in &mut clients {
            assert!(closed_by_server(c), "the header-read timeout closes the connection");
        }
        wait_until("the connections' tasks to end", || server.tasks_alive() == 1);
    }
}
