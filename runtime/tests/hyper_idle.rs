//! `volt::hyper::serve` holds no hyper buffers for a connection whose first request head
//! has not wholly arrived, and answers such heads however they arrive: in pieces, with
//! either line end, after blank lines, longer than the server's look at them.
//!
//! A counting allocator measures what the server holds (bytes allocated and not freed),
//! so this file is its own test binary; its tests take turns (`SERIAL`), so one's
//! connections are not in another's count.

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use volt::telemetry::WaitReason;

#[path = "support/counting.rs"]
mod counting;
use counting::held;

const BOUND: Duration = Duration::from_secs(30);
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < BOUND, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads the request's body, then answers: the answer never comes before the whole
/// request has (hyper would otherwise answer a request whose body is still on its way,
/// and close the connection under the client's remaining writes).
async fn hello(req: http::Request<Incoming>) -> Result<http::Response<Full<Bytes>>, Infallible> {
    let _ = req.into_body().collect().await;
    Ok(http::Response::new(Full::new(Bytes::from_static(b"Hello, world!"))))
}

/// A runtime recording events (so each connection's wait is known) serving `hello`.
fn server() -> (volt::Runtime, SocketAddr) {
    let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    drop(rt.spawn(async move {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await?;
        addr_tx.send(listener.local_addr()?).unwrap();
        volt::hyper::serve(listener, tower::service_fn(hello)).await
    }));
    let addr = addr_rx.recv_timeout(BOUND).expect("the server binds");
    (rt, addr)
}

/// Read one response (headers and the 13-byte body) off `s`.
fn response(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).ends_with("Hello, world!") {
        let n = s.read(&mut buf).expect("the response arrives");
        assert!(n > 0, "closed before the whole response: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// How many of the server's connection tasks wait on a read from one of `peers`.
fn reading(rt: &volt::Runtime, peers: &[SocketAddr]) -> usize {
    let tasks = rt.handle().telemetry().tasks();
    tasks
        .iter()
        .filter(|t| t.name.as_deref() == Some(volt::hyper::CONNECTION_TASK_NAME))
        .filter(|t| matches!(t.waiting_on, Some(WaitReason::Read { addr: Some(a) }) if peers.contains(&a)))
        .count()
}

#[test]
fn a_connection_without_a_whole_head_holds_no_hyper_buffers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const CONNS: usize = 100;
    let (rt, addr) = server();
    // A whole request first, so what the first connection makes once (hyper's and the
    // service's lazily made parts) is in the baseline.
    let mut warm = TcpStream::connect(addr).unwrap();
    warm.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
    assert!(response(&mut warm).starts_with("HTTP/1.1 200"));
    drop(warm);
    wait_until("the warm-up connection to end", || {
        reading(&rt, &[]) == 0 && rt.handle().telemetry().snapshot().tasks_alive == 1
    });
    let base = held();

    let mut clients: Vec<TcpStream> = (0..CONNS).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for c in &mut clients {
        c.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").unwrap();
    }
    let peers: Vec<SocketAddr> = clients.iter().map(|c| c.local_addr().unwrap()).collect();
    // Each connection has taken its part of a head in (the sniff reads the first bytes)
    // and waits for the rest: whatever it holds for it, it holds now.
    wait_until("every connection to wait for the rest of its head", || reading(&rt, &peers) == CONNS);
    let per_conn = (held() - base) / CONNS as isize;
    // hyper's buffers alone are 24 KiB a connection (16 KiB read, 8 KiB for response
    // heads); without them a connection holds its task and its registration.
    assert!(per_conn < 4 * 1024, "{per_conn} bytes held per connection waiting for its head");

    // The rest of each head: every connection is answered.
    for c in &mut clients {
        c.write_all(b"\r\n").unwrap();
    }
    for c in &mut clients {
        let r = response(c);
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
}

#[test]
fn heads_that_arrive_in_pieces_are_answered_whatever_their_shape() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_rt, addr) = server();
    let long = format!("GET / HTTP/1.1\r\nhost: x\r\nx-long: {}\r\n\r\n", "a".repeat(12 * 1024));
    let heads: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\nhost: x\r\n\r\n".to_vec(),
        // Bare LF line ends.
        b"GET / HTTP/1.1\nhost: x\n\n".to_vec(),
        // Blank lines before the request line end no request.
        b"\r\n\r\nGET / HTTP/1.1\r\nhost: x\r\n\r\n".to_vec(),
        // Longer than the server's look at an unfinished head: left to hyper.
        long.into_bytes(),
        // A head with a body behind it.
        b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello".to_vec(),
    ];
    for head in &heads {
        for piece in [1, 7, 4096, usize::MAX] {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            for chunk in head.chunks(piece.min(head.len())) {
                s.write_all(chunk).unwrap();
            }
            let r = response(&mut s);
            assert!(r.starts_with("HTTP/1.1 200"), "pieces of {piece}: {r}");
        }
    }
}

#[test]
fn a_peer_that_leaves_mid_head_leaves_no_task() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rt, addr) = server();
    let alive = || rt.handle().telemetry().snapshot().tasks_alive;
    wait_until("the server alone", || alive() == 1);
    for _ in 0..20 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nhost: x").unwrap();
        drop(s);
    }
    wait_until("every connection task to end", || alive() == 1);
}
