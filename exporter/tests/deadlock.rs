//! `volt_deadlocks_total`, scraped for real: in-process and from the sidecar, a
//! lock-order deadlock of two tasks counts once.

use prometheus_parse::{Scrape, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn scrape(addr: SocketAddr) -> Option<Scrape> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).ok()?;
    let resp = String::from_utf8_lossy(&resp).to_string();
    let (head, body) = resp.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).ok()
}

/// `volt_deadlocks_total`, if served, and its type.
fn deadlocks_total(addr: SocketAddr) -> Option<f64> {
    let s = scrape(addr)?;
    s.samples.iter().find(|x| x.metric == "volt_deadlocks_total").map(|x| match x.value {
        Value::Counter(v) => v,
        ref other => panic!("volt_deadlocks_total is not a counter: {other:?}"),
    })
}

/// Two tasks that lock `a` then `b` and `b` then `a`, each holding its first lock when it
/// asks for the second.
fn lock_order_deadlock(rt: &volt::Runtime) -> Vec<volt::task::JoinHandle<()>> {
    let (a, b) = (Arc::new(volt::sync::Mutex::new(())), Arc::new(volt::sync::Mutex::new(())));
    let both = Arc::new(volt::sync::Barrier::new(2));
    [(a.clone(), b.clone()), (b, a)]
        .into_iter()
        .map(|(first, second)| {
            let both = both.clone();
            rt.spawn(async move {
                let _g = first.lock().await;
                both.wait().await;
                let _h = second.lock().await;
            })
        })
        .collect()
}

/// Scrape until `volt_deadlocks_total` is `want` (10 s at most), then check it stays so.
fn expect_count(addr: SocketAddr, want: f64) {
    let start = Instant::now();
    loop {
        let got = deadlocks_total(addr);
        if got == Some(want) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "volt_deadlocks_total: {got:?}, want {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..10 {
        assert_eq!(deadlocks_total(addr), Some(want), "a deadlock counts once");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn in_process_a_deadlock_counts_once() {
    let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
    let exporter = volt_exporter::Builder::new()
        .listen("127.0.0.1:0")
        .unwrap()
        .interval(Duration::from_millis(50))
        .install(rt.handle())
        .unwrap();
    let addr = exporter.local_addr();
    expect_count(addr, 0.0);
    let tasks = lock_order_deadlock(&rt);
    expect_count(addr, 1.0);
    for t in tasks {
        t.abort();
    }
}

#[test]
fn the_sidecar_serves_the_consoles_count() {
    let console = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .event_ring(1024)
        .console_bind(console)
        .console_publish_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_volt-exporter"))
        .args(["--console", &format!("http://{console}"), "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let _child = Kill(child);
    let mut line = String::new();
    let addr: SocketAddr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "volt-exporter exited before serving");
        if let Some(rest) = line.split("serving http://").nth(1) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in err.lines().map_while(Result::ok) {});
    expect_count(addr, 0.0);
    let tasks = lock_order_deadlock(&rt);
    expect_count(addr, 1.0);
    for t in tasks {
        t.abort();
    }
}
