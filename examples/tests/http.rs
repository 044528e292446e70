//! The `http` example: its routes through curl, and the real binary shutting down
//! gracefully on Ctrl-C (SIGINT) with 100 slow requests in flight.

mod common;

use common::{curl, Running, BOUND};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn addr_of(line: &str) -> String {
    // "http: serving on http://127.0.0.1:PORT (N workers)"
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("a URL in the line");
    url.trim_start_matches("http://").to_owned()
}

#[test]
fn every_route_over_http1_and_http2() {
    let server = Running::start("http", &["--addr", "127.0.0.1:0", "--workers", "2"]);
    let addr = addr_of(&server.line_with("serving on"));
    let (ok, out) = curl(&["-i", &format!("http://{addr}/")]);
    assert!(ok);
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    assert!(out.to_ascii_lowercase().contains("content-type: text/plain"), "{out}");
    assert!(out.ends_with("\r\n\r\nHello, world!"), "{out}");

    let (ok, out) = curl(&["--http2-prior-knowledge", "-w", " %{http_version}", &format!("http://{addr}/")]);
    assert!(ok);
    assert_eq!(out, "Hello, world! 2");

    let (ok, out) = curl(&[&format!("http://{addr}/json")]);
    assert!(ok);
    let g: volt_examples::http::Greeting = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        g,
        volt_examples::http::Greeting { message: "Hello, world!".into(), runtime: "volt".into(), workers: 2 }
    );

    let (ok, out) = curl(&[&format!("http://{addr}/sleep?ms=30")]);
    assert!(ok);
    assert_eq!(out, "slept 30 ms\n");

    let (ok, out) = curl(&[&format!("http://{addr}/blocking?ms=5")]);
    assert!(ok);
    assert!(out.starts_with("blocked 5 ms on ") && out.contains("blocking"), "ran on the blocking pool: {out}");

    let (ok, code) = curl(&["-o", "/dev/null", "-w", "%{http_code}", &format!("http://{addr}/sleep?ms=nope")]);
    assert!(ok);
    assert_eq!(code, "400", "a malformed query is the client's error");

    // Many curl transfers over kept-alive connections (HTTP/1.1, in parallel).
    let urls: Vec<String> = (0..200).map(|_| format!("http://{addr}/")).collect();
    let mut args = vec!["--parallel", "--parallel-max", "50"];
    args.extend(urls.iter().map(String::as_str));
    let (ok, out) = curl(&args);
    assert!(ok);
    assert_eq!(out, "Hello, world!".repeat(200));
}

/// A hyper client on a Tokio runtime: 200 HTTP/1.1 connections open at once, each
/// making three requests in turn on the same connection (a connection the server closed
/// after one request would fail the next), and one HTTP/2 connection (prior knowledge)
/// carrying 100 requests at once.
#[test]
fn two_hundred_keep_alive_connections_and_http2_from_hyper_on_tokio() {
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let server = Running::start("http", &["--addr", "127.0.0.1:0", "--workers", "2"]);
    let addr = addr_of(&server.line_with("serving on"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let get = |addr: &str| hyper::Request::get(format!("http://{addr}/")).body(Empty::<Bytes>::new()).unwrap();
    let body_of = |r: hyper::Response<hyper::body::Incoming>| async move {
        assert_eq!(r.status(), 200);
        String::from_utf8(r.into_body().collect().await.expect("the body").to_bytes().to_vec()).unwrap()
    };
    rt.block_on(async {
        tokio::time::timeout(BOUND, async {
            // Every connection is open before any request goes out.
            let mut senders = Vec::new();
            for _ in 0..200 {
                let tcp = tokio::net::TcpStream::connect(&addr).await.expect("connect");
                let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
                tokio::spawn(conn);
                senders.push(send);
            }
            let clients: Vec<_> = senders
                .into_iter()
                .map(|mut send| {
                    let addr = addr.clone();
                    tokio::spawn(async move {
                        let mut bodies = Vec::new();
                        for _ in 0..3 {
                            send.ready().await.expect("the connection stays open");
                            let r = send.send_request(get(&addr)).await.expect("a response");
                            bodies.push(body_of(r).await);
                        }
                        bodies
                    })
                })
                .collect();
            for c in clients {
                assert_eq!(c.await.unwrap(), vec!["Hello, world!"; 3]);
            }

            let tcp = tokio::net::TcpStream::connect(&addr).await.expect("connect");
            let (send, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await.unwrap();
            tokio::spawn(conn);
            let streams: Vec<_> = (0..100)
                .map(|_| {
                    let mut send = send.clone();
                    let addr = addr.clone();
                    tokio::spawn(async move {
                        let r = send.send_request(get(&addr)).await.expect("a response");
                        assert_eq!(r.version(), hyper::Version::HTTP_2);
                        body_of(r).await
                    })
                })
                .collect();
            for s in streams {
                assert_eq!(s.await.unwrap(), "Hello, world!");
            }
        })
        .await
        .expect("within the bound");
    });
}

#[test]
fn ctrl_c_finishes_100_slow_requests_and_refuses_new_connections() {
    let mut server = Running::start("http", &["--addr", "127.0.0.1:0", "--workers", "2"]);
    let addr = addr_of(&server.line_with("serving on"));
    // "http: prometheus metrics on http://ADDR/metrics"
    let metrics = server.line_with("prometheus metrics on").rsplit(' ').next().unwrap().to_owned();
    let alive = || -> u64 {
        let (_, text) = curl(&[&metrics]);
        text.lines()
            .find_map(|l| l.strip_prefix("volt_tasks_alive "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    let baseline = alive();
    let sent = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..100)
        .map(|_| {
            let addr = addr.clone();
            let sent = Arc::clone(&sent);
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(&addr).expect("connect");
                s.set_read_timeout(Some(BOUND)).unwrap();
                s.write_all(b"GET /sleep?ms=5000 HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
                sent.fetch_add(1, Ordering::SeqCst);
                let mut out = String::new();
                s.read_to_string(&mut out).expect("the response, then the close");
                out
            })
        })
        .collect();
    let start = Instant::now();
    while sent.load(Ordering::SeqCst) < 100 {
        assert!(start.elapsed() < BOUND);
        std::thread::sleep(Duration::from_millis(5));
    }
    // Every connection accepted (its task alive, as the exporter shows): a connection
    // still in the listener's backlog at the signal is refused with the listener.
    let start = Instant::now();
    while alive() < baseline + 100 {
        assert!(start.elapsed() < BOUND, "100 connections never showed as tasks");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.interrupt();
    server.line_with("shutting down");
    // From here on, connecting fails.
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_ok() {
        assert!(start.elapsed() < BOUND, "the listener never closed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(std::net::TcpStream::connect(&addr).unwrap_err().kind(), std::io::ErrorKind::ConnectionRefused);
    for c in clients {
        let out = c.join().unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out:?}");
        assert!(out.ends_with("slept 5000 ms\n"), "{out:?}");
    }
    let status = server.wait();
    assert!(status.success(), "a graceful exit: {status:?}");
}
