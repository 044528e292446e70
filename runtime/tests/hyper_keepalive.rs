//! `volt::hyper::serve` gives hyper's buffers back while a kept-alive HTTP/1 connection
//! waits for its next request, and serves whatever comes next on it as before: single
//! and pipelined requests, bodies, a head that arrives in two parts around the wait, and
//! a protocol upgrade.
//!
//! A counting allocator measures what the server holds (bytes allocated and not freed),
//! so this file is its own test binary; its tests take turns (`SERIAL`), so one's
//! connections are not in another's count.

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
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

/// `GET /`: "Hello, world!"; `POST /echo`: the body back; `GET /upgrade` with an
/// `upgrade: echo` head: 101, then an echo of the upgraded stream.
async fn app(mut req: http::Request<Incoming>) -> Result<http::Response<Full<Bytes>>, Infallible> {
    match req.uri().path() {
        "/echo" => {
            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            Ok(http::Response::new(Full::new(body)))
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
                .body(Full::new(Bytes::new()))
                .unwrap())
        }
        _ => Ok(http::Response::new(Full::new(Bytes::from_static(b"Hello, world!")))),
    }
}

fn server() -> (volt::Runtime, SocketAddr) {
    let rt = volt::runtime::Builder::new().worker_threads(2).build().unwrap();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    drop(rt.spawn(async move {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await?;
        addr_tx.send(listener.local_addr()?).unwrap();
        volt::hyper::serve(listener, tower::service_fn(app)).await
    }));
    let addr = addr_rx.recv_timeout(BOUND).expect("the server binds");
    (rt, addr)
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

/// Wait until the server holds under `limit` bytes a connection above `base`: each idle
/// connection has given hyper's buffers back (with them, one holds about 20 KiB).
fn wait_for_release(base: isize, conns: usize, limit: isize) {
    let start = Instant::now();
    loop {
        let per_conn = (held() - base) / (conns as isize);
        if per_conn < limit {
            return;
        }
        assert!(
            start.elapsed() < BOUND,
            "the idle connections still hold {per_conn} bytes each, not under {limit}: hyper's buffers were not given back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_idle_kept_alive_connection_gives_hyper_buffers_back_and_serves_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const CONNS: usize = 40;
    let (rt, addr) = server();
    // One connection first, so what the first one makes once (hyper's and the service's
    // lazily made parts) is in the baseline.
    let mut warm = TcpStream::connect(addr).unwrap();
    warm.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
    assert!(read_until(&mut warm, HELLO, 1).starts_with("HTTP/1.1 200"));
    drop(warm);
    wait_until("the warm-up connection to end", || rt.handle().telemetry().snapshot().tasks_alive == 1);
    let base = held();

    let mut clients = kept_alive(addr, CONNS);
    wait_for_release(base, CONNS, 4 * 1024);

    // Served on: a request each, then two pipelined in one write.
    for c in &mut clients {
        c.write_all(GET).unwrap();
        assert!(read_until(c, HELLO, 1).starts_with("HTTP/1.1 200"));
        let two = [GET, GET].concat();
        c.write_all(&two).unwrap();
        let r = read_until(c, HELLO, 2);
        assert_eq!(r.matches("HTTP/1.1 200").count(), 2, "{r}");
    }
    wait_for_release(base, CONNS, 4 * 1024);

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
        c.write_all(GET).unwrap();
        assert!(read_until(c, HELLO, 1).starts_with("HTTP/1.1 200"));
    }
    wait_for_release(base, CONNS, 4 * 1024);

    // A head that arrives in two parts, with the wait between them: the part hyper read
    // comes back with its connection and the rest completes it.
    for c in &mut clients {
        c.write_all(&GET[..20]).unwrap();
    }
    wait_for_release(base, CONNS, 4 * 1024);
    for c in &mut clients {
        c.write_all(&GET[20..]).unwrap();
        assert!(read_until(c, HELLO, 1).starts_with("HTTP/1.1 200"));
    }
}

#[test]
fn a_connection_that_gave_its_buffers_back_can_be_upgraded() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const CONNS: usize = 10;
    let (_rt, addr) = server();
    let base = held();
    let mut clients = kept_alive(addr, CONNS);
    // Generous: this baseline has no warm-up connection in it.
    wait_for_release(base, CONNS, 8 * 1024);
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
}
