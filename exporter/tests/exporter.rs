//! The exporter for real: scraped over HTTP on loopback and parsed with a Prometheus text
//! parser, in-process and as the `volt-exporter` sidecar against a console server.

use prometheus_parse::{Sample, Scrape, Value};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// GET /metrics with a plain HTTP/1.1 request: the body, or an error for a failed
/// connection, a server that closes without an answer, or anything but a 200.
fn scrape_text(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp)?;
    let resp = String::from_utf8_lossy(&resp).to_string();
    match resp.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => {
            assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
            Ok(body.to_string())
        }
        _ => Err(std::io::Error::other(format!("no HTTP answer: {resp:?}"))),
    }
}

fn scrape(addr: SocketAddr) -> Scrape {
    let body = scrape_text(addr).expect("scrape");
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("valid Prometheus text")
}

fn value(s: &Sample) -> f64 {
    match &s.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        other => panic!("{} is not a scalar: {other:?}", s.metric),
    }
}

fn samples<'a>(scrape: &'a Scrape, name: &str) -> Vec<&'a Sample> {
    scrape.samples.iter().filter(|s| s.metric == name).collect()
}

fn per_worker(scrape: &Scrape, name: &str) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> =
        samples(scrape, name).iter().map(|s| (s.labels.get("worker").unwrap_or("?").to_string(), value(s))).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

const WORKER_COUNTERS: &[&str] = &[
    "volt_worker_polls_total",
    "volt_worker_steals_total",
    "volt_worker_steal_operations_total",
    "volt_worker_parks_total",
    "volt_worker_parked_seconds_total",
    "volt_worker_busy_seconds_total",
    "volt_worker_lifo_hits_total",
    "volt_worker_overflows_total",
    "volt_worker_budget_yields_total",
    "volt_worker_stalls_total",
];
const WORKER_GAUGES: &[&str] =
    &["volt_worker_local_queue_depth", "volt_worker_global_queue_interval", "volt_worker_mean_poll_seconds"];
const COUNTERS: &[&str] = &[
    "volt_tasks_spawned_total",
    "volt_tasks_completed_total",
    "volt_tasks_cancelled_total",
    "volt_tasks_panicked_total",
    "volt_events_recorded_total",
    "volt_events_overwritten_total",
    "volt_timers_armed_total",
    "volt_timers_fired_total",
    "volt_io_events_total",
    "volt_deadlocks_total",
];
const GAUGES: &[&str] = &[
    "volt_global_queue_depth",
    "volt_workers_searching",
    "volt_workers_parked",
    "volt_tasks_alive",
    "volt_tasks_lost_waker",
    "volt_timers_pending",
    "volt_blocking_threads",
    "volt_blocking_queue_depth",
];
const HISTOGRAMS: &[&str] =
    &["volt_task_poll_duration_seconds", "volt_task_schedule_latency_seconds", "volt_worker_park_duration_seconds"];

/// Every family is there with its type, help text and labels.
fn check_families(s: &Scrape, workers: usize) {
    let type_of = |name: &str| {
        samples(s, name).first().map(|x| match x.value {
            Value::Counter(_) => "counter",
            Value::Gauge(_) => "gauge",
            Value::Histogram(_) => "histogram",
            _ => "other",
        })
    };
    let labels: BTreeSet<String> = (0..workers).map(|i| i.to_string()).collect();
    for name in WORKER_COUNTERS.iter().chain(WORKER_GAUGES) {
        let got: BTreeSet<String> = per_worker(s, name).into_iter().map(|(w, _)| w).collect();
        assert_eq!(got, labels, "{name}: worker labels");
    }
    for name in WORKER_COUNTERS.iter().chain(COUNTERS) {
        assert_eq!(type_of(name), Some("counter"), "{name}");
    }
    for name in WORKER_GAUGES.iter().chain(GAUGES) {
        assert_eq!(type_of(name), Some("gauge"), "{name}");
    }
    for name in HISTOGRAMS {
        assert_eq!(type_of(name), Some("histogram"), "{name}");
        let h = &samples(s, name)[0];
        let Value::Histogram(buckets) = &h.value else { unreachable!() };
        assert!(buckets.len() >= 30, "{name}: {} buckets", buckets.len());
        assert!(
            buckets.windows(2).all(|w| w[0].less_than < w[1].less_than && w[0].count <= w[1].count),
            "{name}: cumulative"
        );
    }
    for name in WORKER_COUNTERS.iter().chain(WORKER_GAUGES).chain(COUNTERS).chain(GAUGES).chain(HISTOGRAMS) {
        assert!(s.docs.get(*name).is_some_and(|d| !d.is_empty()), "{name} has no help text");
    }
}

/// An exporter on a free loopback port, sampling every 20 ms.
fn fast_exporter(rt: &volt::Runtime) -> volt_exporter::Exporter {
    volt_exporter::Builder::new()
        .listen("127.0.0.1:0")
        .unwrap()
        .interval(Duration::from_millis(20))
        .install(rt.handle())
        .unwrap()
}

fn busy_runtime(workers: usize) -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(workers).event_ring(4096).build().unwrap()
}

fn work(rt: &volt::Runtime, n: usize) {
    let hs: Vec<_> = (0..n).map(|_| rt.spawn(async { volt::task::yield_now().await })).collect();
    for h in hs {
        h.join().unwrap();
    }
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn in_process_scrape_has_every_family_and_counters_grow() {
    let rt = busy_runtime(2);
    work(&rt, 500);
    let exporter = fast_exporter(&rt);
    let addr = exporter.local_addr();
    let mut first = scrape(addr);
    // The lost-waker gauge is counted only once a scraper has shown up (it walks every
    // task), so the first samples may come without it: wait for a sample taken after
    // the scrapes began.
    wait_until("a first sample with the lost-waker count", Duration::from_secs(30), || {
        first = scrape(addr);
        !samples(&first, "volt_worker_polls_total").is_empty() && !samples(&first, "volt_tasks_lost_waker").is_empty()
    });
    check_families(&first, 2);
    let polls0: f64 = per_worker(&first, "volt_worker_polls_total").iter().map(|p| p.1).sum();
    let spawned0 = value(samples(&first, "volt_tasks_spawned_total")[0]);
    assert!(polls0 >= 500.0 && spawned0 >= 500.0, "polls {polls0} spawned {spawned0}");
    work(&rt, 2000);
    wait_until("the counters to grow", Duration::from_secs(30), || {
        let s = scrape(addr);
        let polls: f64 = per_worker(&s, "volt_worker_polls_total").iter().map(|p| p.1).sum();
        let spawned = value(samples(&s, "volt_tasks_spawned_total")[0]);
        let Value::Histogram(h) = &samples(&s, "volt_task_poll_duration_seconds")[0].value else { unreachable!() };
        let in_histogram = h.last().unwrap().count;
        polls >= polls0 + 4000.0 && spawned >= spawned0 + 2000.0 && in_histogram >= polls0 + 4000.0
    });
    // The exposition matches what the library renders.
    assert!(exporter.render().contains("volt_worker_polls_total{worker=\"1\"}"));
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let rt = busy_runtime(1);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = volt_exporter::install(rt.handle(), addr).expect_err("port in use");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains(&format!("cannot listen on {addr}")), "{err}");
}

/// A name that resolves to several addresses binds the first one free, as
/// `std::net::TcpListener::bind` does (`localhost` is `::1` and `127.0.0.1` on many
/// hosts, and the first may not be the one that can be bound); when none can be, a
/// port in use is the error shown.
#[test]
fn the_first_address_that_can_be_bound_is_served() {
    let rt = busy_runtime(1);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap();
    let free: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let exporter = volt_exporter::install(rt.handle(), &[busy, free][..]).expect("the second address binds");
    let addr = exporter.local_addr();
    assert_ne!(addr, busy);
    // Served there (its first sample comes within the one-second interval).
    wait_until("a scrape on the second address", Duration::from_secs(30), || {
        scrape_text(addr).is_ok_and(|t| t.contains("volt_workers"))
    });
    let taken2 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy2 = taken2.local_addr().unwrap();
    let err = volt_exporter::install(rt.handle(), &[busy, busy2][..]).expect_err("both in use");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains(&format!("cannot listen on {busy}")), "{err}");
    // A port in use is the error shown, before or after an address this host does not
    // have (TEST-NET-1: the bind fails, nothing is contacted).
    let absent: std::net::SocketAddr = "192.0.2.1:0".parse().unwrap();
    for addrs in [[busy, absent], [absent, busy]] {
        let err = volt_exporter::bind_first(&addrs).expect_err("nothing binds");
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{addrs:?}: {err}");
    }
}

/// A snapshot whose worker index is past its list of workers (from a console that is not
/// Volt's, or a broken one) adds no series for workers that do not exist.
#[test]
fn a_worker_index_past_the_list_adds_no_series() {
    use volt_console_proto as proto;
    let m = volt_exporter::Metrics::new();
    let w = |index| proto::WorkerSnapshot { index, tasks_polled: 7, ..Default::default() };
    m.publish(&proto::Snapshot { workers: vec![w(0), w(u32::MAX)], ..Default::default() });
    let text = m.render();
    let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("valid Prometheus text");
    let polls = per_worker(&s, "volt_worker_polls_total");
    assert_eq!(polls, vec![("0".to_string(), 7.0)], "{text}");
}

#[test]
fn the_sampler_stops_when_the_runtime_is_dropped() {
    let rt = busy_runtime(2);
    let exporter = fast_exporter(&rt);
    let addr = exporter.local_addr();
    scrape(addr);
    assert!(!exporter.is_finished());
    drop(rt);
    wait_until("the exporter thread to exit", Duration::from_secs(30), || exporter.is_finished());
    // It no longer serves either.
    wait_until("the listener to close", Duration::from_secs(30), || scrape_text(addr).is_err());
}

struct Sidecar {
    child: Child,
    addr: SocketAddr,
    /// Its log lines so far.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sidecar(console: &str) -> Sidecar {
    let mut child = Command::new(env!("CARGO_BIN_EXE_volt-exporter"))
        .args(["--console", console, "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The log line says where it serves.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "volt-exporter exited before serving");
        if let Some(rest) = line.split("serving http://").nth(1) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    };
    // Keep draining its log (into the test's output, shown on failure) so it never blocks
    // on a full pipe.
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = std::sync::Arc::clone(&log);
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            eprintln!("[volt-exporter] {line}");
            keep.lock().unwrap().push(line);
        }
    });
    Sidecar { child, addr, log }
}

#[test]
fn the_sidecar_serves_the_same_metrics_from_the_console_and_follows_a_restart() {
    let console = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let start_rt = || {
        volt::runtime::Builder::new()
            .worker_threads(3)
            .event_ring(4096)
            .console_bind(console)
            .console_publish_interval(Duration::from_millis(20))
            .build()
            .unwrap()
    };
    let rt = start_rt();
    work(&rt, 3000);
    let side = sidecar(&format!("http://{console}"));
    let mut s = scrape(side.addr);
    wait_until("the sidecar to follow the console", Duration::from_secs(30), || {
        s = scrape(side.addr);
        samples(&s, "volt_exporter_console_up").first().is_some_and(|x| value(x) == 1.0)
            && per_worker(&s, "volt_worker_polls_total").iter().map(|p| p.1).sum::<f64>() >= 6000.0
            // Present once the console has counted it (its first walk).
            && !samples(&s, "volt_tasks_lost_waker").is_empty()
    });
    check_families(&s, 3);
    let before: f64 = per_worker(&s, "volt_worker_polls_total").iter().map(|p| p.1).sum();

    // The process "restarts": the console goes away, then a new runtime serves it again.
    drop(rt);
    wait_until("console_up 0", Duration::from_secs(30), || {
        let s = scrape(side.addr);
        samples(&s, "volt_exporter_console_up").first().is_some_and(|x| value(x) == 0.0)
    });
    let rt = start_rt();
    work(&rt, 10);
    wait_until("the sidecar to follow the new runtime, counters started over", Duration::from_secs(30), || {
        let s = scrape(side.addr);
        let polls: f64 = per_worker(&s, "volt_worker_polls_total").iter().map(|p| p.1).sum();
        samples(&s, "volt_exporter_console_up").first().is_some_and(|x| value(x) == 1.0)
            && polls > 0.0
            && polls < before
    });
    drop(rt);
}

/// The families of an exposition (from its samples and its HELP/TYPE lines) that are not
/// the sidecar's own `volt_exporter_*`: the watched runtime's.
fn runtime_families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| match l.strip_prefix("# ") {
            Some(meta) => meta.split_whitespace().nth(1),
            None => l.split(['{', ' ']).next(),
        })
        .filter(|name| !name.is_empty() && !name.starts_with("volt_exporter_"))
        .map(str::to_string)
        .collect()
}

/// `volt_exporter_console_up`'s value, if the exposition has it.
fn console_up(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix("volt_exporter_console_up ")).map(|v| v.trim().parse().unwrap())
}

/// Every `worker` label value in an exposition.
fn worker_labels(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split("worker=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

/// A process that is gone is not reported: once the console goes down, the sidecar's
/// scrape has its own `volt_exporter_*` series only (the old form kept serving the last
/// values, `volt_tasks_alive` beside `volt_exporter_console_up 0`). A new process on the
/// same console port brings the series back with its own values, and nothing of the old
/// one: no series of a worker index the new process does not have.
#[test]
fn the_sidecar_serves_nothing_of_a_process_that_is_gone() {
    let console = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let start_rt = |workers: usize| {
        volt::runtime::Builder::new()
            .worker_threads(workers)
            .event_ring(4096)
            .console_bind(console)
            .console_publish_interval(Duration::from_millis(20))
            .build()
            .unwrap()
    };
    // Every scrape in this test: whenever it says the console is down, it has nothing else.
    let checked_scrape = |addr: SocketAddr| {
        let text = scrape_text(addr).expect("scrape");
        if console_up(&text) == Some(0.0) {
            assert_eq!(runtime_families(&text), BTreeSet::new(), "served beside console_up 0:\n{text}");
        }
        text
    };
    let rt = start_rt(3);
    // A task alive until the process goes.
    let _alive = rt.spawn(async { volt::time::sleep(Duration::from_secs(3600)).await });
    work(&rt, 3000);
    let side = sidecar(&format!("http://{console}"));
    let mut text = String::new();
    wait_until("the sidecar to follow the first process", Duration::from_secs(30), || {
        text = checked_scrape(side.addr);
        let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        console_up(&text) == Some(1.0)
            && samples(&s, "volt_tasks_alive").first().is_some_and(|x| value(x) >= 1.0)
            && per_worker(&s, "volt_worker_polls_total").iter().map(|p| p.1).sum::<f64>() >= 6000.0
    });
    assert_eq!(worker_labels(&text), ["0", "1", "2"].map(String::from).into(), "{text}");
    let before: f64 = {
        let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        per_worker(&s, "volt_worker_polls_total").iter().map(|p| p.1).sum()
    };

    // The process goes away with a task still alive.
    drop(rt);
    wait_until("console_up 0", Duration::from_secs(30), || {
        text = checked_scrape(side.addr);
        console_up(&text) == Some(0.0)
    });
    assert_eq!(runtime_families(&text), BTreeSet::new(), "{text}");
    promtool_check(&text);

    // A new process with fewer workers on the same port.
    let rt = start_rt(2);
    work(&rt, 10);
    wait_until("the sidecar to follow the new process", Duration::from_secs(30), || {
        text = checked_scrape(side.addr);
        if console_up(&text) != Some(1.0) {
            return false;
        }
        // From the first scrape that says up: the new process's workers only.
        assert_eq!(worker_labels(&text), ["0", "1"].map(String::from).into(), "a worker of the old process:\n{text}");
        let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        !samples(&s, "volt_tasks_alive").is_empty()
            // Present once the console has counted it (its first walk).
            && !samples(&s, "volt_tasks_lost_waker").is_empty()
    });
    let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    check_families(&s, 2);
    assert_eq!(samples(&s, "volt_workers").first().map(|x| value(x)), Some(2.0), "{text}");
    let polls: f64 = per_worker(&s, "volt_worker_polls_total").iter().map(|p| p.1).sum();
    assert!(polls < before, "the old process's counts: {polls} polls, {before} before");
    promtool_check(&text);
    drop(rt);
}

#[test]
fn the_sidecar_rejects_bad_addresses_and_a_port_in_use() {
    let bin = env!("CARGO_BIN_EXE_volt-exporter");
    let out = Command::new(bin).args(["--console", "not an address", "--listen", "127.0.0.1:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--console") && err.contains("is not an address"), "{err}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(bin).args(["--console", "127.0.0.1:1", "--listen", &addr]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
}

const BRIDGE_GAUGES: &[&str] = &["volt_bridge_workers", "volt_bridge_alive_tasks", "volt_bridge_global_queue_depth"];
const BRIDGE_COUNTERS: &[&str] = &["volt_bridge_busy_seconds_total"];

fn has_bridge_families(s: &Scrape) -> bool {
    BRIDGE_GAUGES.iter().chain(BRIDGE_COUNTERS).all(|n| !samples(s, n).is_empty())
}

/// The bridge's families: typed, described, and reading `workers` workers and `alive`
/// live tasks.
fn check_bridge_families(s: &Scrape, workers: f64, alive: f64) {
    for name in BRIDGE_GAUGES {
        assert!(matches!(samples(s, name)[0].value, Value::Gauge(_)), "{name} is a gauge");
    }
    for name in BRIDGE_COUNTERS {
        assert!(matches!(samples(s, name)[0].value, Value::Counter(_)), "{name} is a counter");
    }
    for name in BRIDGE_GAUGES.iter().chain(BRIDGE_COUNTERS) {
        assert!(s.docs.get(*name).is_some_and(|d| !d.is_empty()), "{name} has no help text");
    }
    assert_eq!(value(samples(s, "volt_bridge_workers")[0]), workers);
    assert_eq!(value(samples(s, "volt_bridge_alive_tasks")[0]), alive);
    assert!(value(samples(s, "volt_bridge_busy_seconds_total")[0]) >= 0.0);
}

/// `promtool check metrics` on the exposition, where promtool is installed (it lints
/// names, units, HELP/TYPE and `_total` on counters).
fn promtool_check(text: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool is not installed: skipping its lint");
        return;
    };
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check metrics:\n{said}");
    assert!(!said.contains("volt_bridge"), "promtool on the bridge's families:\n{said}");
}

/// A bridged runtime: 2 workers, a bridge of 2 threads, an exporter sampling every 20 ms.
#[test]
fn the_bridge_families_appear_once_the_bridge_runs() {
    let rt = volt::runtime::Builder::new().worker_threads(2).tokio_bridge_threads(2).build().unwrap();
    work(&rt, 100);
    let exporter = fast_exporter(&rt);
    let addr = exporter.local_addr();
    wait_until("a first sample", Duration::from_secs(30), || !samples(&scrape(addr), "volt_workers").is_empty());
    let s = scrape(addr);
    for name in BRIDGE_GAUGES.iter().chain(BRIDGE_COUNTERS) {
        assert!(samples(&s, name).is_empty(), "{name} while the bridge never ran");
    }

    // A task parked on the bridge, and one that ran to completion there.
    let bridge = rt.handle().tokio_bridge();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let parked = bridge.spawn(async move {
        let _ = rx.await;
    });
    let done = bridge.spawn(async { (0..1000u64).sum::<u64>() });
    assert_eq!(
        rt.block_on(async { volt::time::timeout(Duration::from_secs(10), done).await }).unwrap().unwrap(),
        499_500
    );
    let mut s = scrape(addr);
    wait_until("the bridge's families", Duration::from_secs(30), || {
        s = scrape(addr);
        has_bridge_families(&s) && value(samples(&s, "volt_bridge_alive_tasks")[0]) == 1.0
    });
    check_bridge_families(&s, 2.0, 1.0);
    check_families(&s, 2);
    promtool_check(&scrape_text(addr).unwrap());

    let _ = tx.send(());
    futures_lite_block_on(parked);
    wait_until("the parked task to be gone", Duration::from_secs(30), || {
        let s = scrape(addr);
        samples(&s, "volt_bridge_alive_tasks").first().is_some_and(|x| value(x) == 0.0)
    });
    drop(exporter);
    drop(rt);
}

/// Await a Tokio `JoinHandle` (it needs no runtime) on this thread, for at most 10 s.
fn futures_lite_block_on<T: Send + 'static>(h: tokio::task::JoinHandle<T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), h).await })
        .expect("timed out")
        .expect("the task failed")
}

#[test]
fn the_sidecar_serves_the_bridge_families_from_the_console() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(1)
        .tokio_bridge_threads(1)
        .console_bind("127.0.0.1:0")
        .console_publish_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let console = rt.console_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let parked = rt.handle().tokio_bridge().spawn(async move {
        let _ = rx.await;
    });
    let side = sidecar(&format!("http://{console}"));
    let mut s = scrape(side.addr);
    wait_until("the sidecar to show the bridge", Duration::from_secs(30), || {
        s = scrape(side.addr);
        has_bridge_families(&s)
    });
    check_bridge_families(&s, 1.0, 1.0);
    promtool_check(&scrape_text(side.addr).unwrap());
    let _ = tx.send(());
    futures_lite_block_on(parked);
    drop(rt);
}

/// A port that answers HTTP/1.1 but is not gRPC: it counts the connections made to it.
pub fn plain_http_listener() -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = std::sync::Arc::clone(&count);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = s.read(&mut [0u8; 1024]);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (addr, count)
}

/// Against a port that answers HTTP but is not gRPC, the sidecar backs off (doubling to
/// 5 s) instead of retrying at once, and its log says the cause, once.
#[test]
fn the_sidecar_backs_off_against_a_port_that_is_not_grpc_and_logs_the_cause() {
    let (addr, attempts) = plain_http_listener();
    let side = sidecar(&addr.to_string());
    let watched = Instant::now();
    std::thread::sleep(Duration::from_secs(4));
    let n = attempts.load(std::sync::atomic::Ordering::SeqCst);
    let elapsed = watched.elapsed();
    // 100 ms doubling: about 6 attempts in 4 s; retrying every 100 ms would be about 40.
    assert!((1..=12).contains(&n), "{n} connection attempts in {elapsed:?}");
    let log = side.log.lock().unwrap().clone();
    let failure = log.iter().find(|l| l.contains("reconnecting in")).expect("a failure is logged");
    // The cause, not only "transport error", and no part said twice in a row.
    assert!(failure.contains("transport error: "), "{failure}");
    let parts: Vec<&str> = failure.split(": ").collect();
    assert!(parts.windows(2).all(|w| w[0] != w[1]), "{failure}");
}

/// A console that sends one update and then nothing while keeping the connection open
/// (a hung process): the sidecar must not keep serving its figures as live.
#[test]
fn the_sidecar_reports_a_stalled_stream_as_down() {
    use proto_server::*;
    let (addr, _server) = stalling_console();
    let side = sidecar(&addr.to_string());
    wait_until("the sidecar to follow the console", Duration::from_secs(20), || {
        let s = scrape(side.addr);
        samples(&s, "volt_exporter_console_up").first().is_some_and(|x| value(x) == 1.0)
            && samples(&s, "volt_tasks_spawned_total").first().is_some_and(|x| value(x) == 7.0)
    });
    wait_until("console_up to go to 0 on the stall", Duration::from_secs(30), || {
        let text = scrape_text(side.addr).expect("scrape");
        let down = console_up(&text) == Some(0.0);
        if down {
            assert_eq!(runtime_families(&text), BTreeSet::new(), "served beside console_up 0:\n{text}");
        }
        down
    });
    // The log line comes through the sidecar's stderr, which the test reads on another
    // thread: it may arrive just after the gauge went to 0.
    wait_until("the stall to be logged", Duration::from_secs(10), || {
        side.log.lock().unwrap().iter().any(|l| l.contains("the stream stalled"))
    });
}

mod proto_server {
    use std::net::SocketAddr;
    use std::pin::Pin;
    use tonic::codegen::tokio_stream::{self, Stream, StreamExt};
    use tonic::{Request, Response, Status};
    use volt::console::proto;

    struct Stalling;

    type Updates = Pin<Box<dyn Stream<Item = Result<proto::Update, Status>> + Send>>;

    #[tonic::async_trait]
    impl proto::console_server::Console for Stalling {
        type WatchUpdatesStream = Updates;
        async fn watch_updates(&self, _: Request<proto::WatchRequest>) -> Result<Response<Updates>, Status> {
            let first = proto::Update {
                seq: 1,
                runtime: Some(proto::RuntimeInfo {
                    workers: 1,
                    publish_interval_ns: 20_000_000,
                    pid: 1,
                    ..Default::default()
                }),
                snapshot: Some(proto::Snapshot {
                    workers: vec![Default::default()],
                    tasks_spawned: 7,
                    ..Default::default()
                }),
                ..Default::default()
            };
            Ok(Response::new(Box::pin(tokio_stream::iter([Ok(first)]).chain(tokio_stream::pending()))))
        }
        async fn get_snapshot(&self, _: Request<proto::SnapshotRequest>) -> Result<Response<proto::Update>, Status> {
            Err(Status::unimplemented("stalled"))
        }
        async fn get_task(&self, _: Request<proto::TaskRequest>) -> Result<Response<proto::TaskDetails>, Status> {
            Err(Status::unimplemented("stalled"))
        }
        async fn list_tasks(&self, _: Request<proto::TaskQuery>) -> Result<Response<proto::TaskPage>, Status> {
            Err(Status::unimplemented("stalled"))
        }
        async fn set_task_query(
            &self,
            _: Request<proto::SetTaskQueryRequest>,
        ) -> Result<Response<proto::TaskPage>, Status> {
            Err(Status::unimplemented("stalled"))
        }
    }

    /// A console server on a thread of its own whose streams stall after one update.
    pub fn stalling_console() -> (SocketAddr, std::thread::JoinHandle<()>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let incoming = tonic::transport::server::TcpIncoming::from(l);
                let _ = tonic::transport::Server::builder()
                    .add_service(proto::console_server::ConsoleServer::new(Stalling))
                    .serve_with_incoming(incoming)
                    .await;
            });
        });
        (addr, t)
    }
}

/// Connections that never finish their request header are closed after the header
/// timeout, and while they fill the cap a scrape still gets through, and after too.
#[test]
fn half_open_connections_are_closed_and_a_scrape_still_gets_through() {
    use std::io::Read;
    let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    let exporter = volt_exporter::Builder::new()
        .listen("127.0.0.1:0")
        .unwrap()
        .interval(Duration::from_millis(20))
        .connection_limits(volt_exporter::ConnectionLimits {
            max_connections: 8,
            handshake_timeout: Duration::from_secs(2),
        })
        .install(rt.handle())
        .unwrap();
    let addr = exporter.local_addr();
    let held: Vec<std::net::TcpStream> = (0..20)
        .map(|i| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            if i % 2 == 0 {
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
            }
            s
        })
        .collect();
    // While the cap is full of unfinished connections.
    wait_until("a scrape", Duration::from_secs(30), || scrape_text(addr).is_ok_and(|t| t.contains("volt_workers")));
    let start = Instant::now();
    for (i, mut s) in held.into_iter().enumerate() {
        s.set_read_timeout(Some(
            Duration::from_secs(30).saturating_sub(start.elapsed()).max(Duration::from_millis(10)),
        ))
        .unwrap();
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    panic!("half-open connection {i} still open after {:?}", start.elapsed())
                }
                Err(_) => break,
            }
        }
    }
    assert!(scrape_text(addr).is_ok(), "a scrape after the half-open ones");
}

fn capped_exporter(rt: &volt::Runtime, cap: usize) -> volt_exporter::Exporter {
    volt_exporter::Builder::new()
        .listen("127.0.0.1:0")
        .unwrap()
        .interval(Duration::from_millis(20))
        .connection_limits(volt_exporter::ConnectionLimits {
            max_connections: cap,
            handshake_timeout: Duration::from_secs(1),
        })
        .install(rt.handle())
        .unwrap()
}

/// The cap full of connections that made one keep-alive request and went quiet, or that
/// sent only blank lines (which end no request): the header timeout, which runs again
/// between requests, closes them, and the blank-line ones never count as clients, so a
/// scrape gets through. (Before, both kinds stayed open for good and every new
/// connection was refused.)
#[test]
fn idle_and_blank_line_connections_do_not_lock_scrapes_out() {
    let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    let exporter = capped_exporter(&rt, 4);
    let addr = exporter.local_addr();
    wait_until("a first scrape", Duration::from_secs(30), || scrape_text(addr).is_ok());
    let mut held: Vec<std::net::TcpStream> = (0..2)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
            s
        })
        .collect();
    held.extend((0..2).map(|_| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"\r\n\r\n").unwrap();
        s
    }));
    // Past the 1 s timeout; the bound only turns a lockout into a failure.
    std::thread::sleep(Duration::from_secs(2));
    wait_until("a scrape past the idle connections", Duration::from_secs(30), || scrape_text(addr).is_ok());
    // Each held connection was closed by the server.
    for (i, mut s) in held.into_iter().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut rest = Vec::new();
        let r = s.read_to_end(&mut rest);
        assert!(r.is_ok() || r.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset), "{i}: {r:?}");
    }
}

/// The cap full of connections that pipelined thousands of requests and never read an
/// answer: each made a request, so the gate never closes them to make room, and their
/// answers fill the socket. A write that has waited the handshake timeout for the client
/// closes the connection, and a scrape gets through. (Before, those connections stayed
/// open for good, and every scrape after them was refused.)
#[test]
fn clients_that_pipeline_requests_and_never_read_do_not_lock_scrapes_out() {
    let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    let exporter = capped_exporter(&rt, 2);
    let addr = exporter.local_addr();
    wait_until("a first scrape", Duration::from_secs(30), || scrape_text(addr).is_ok());
    let requests = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(5000);
    let held: Vec<std::net::TcpStream> = (0..2)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_nonblocking(true).unwrap();
            // Write until the server stops reading (its answers fill the socket) or all
            // of them went; read nothing.
            let (mut sent, mut stuck_since) = (0, None::<Instant>);
            while sent < requests.len() && stuck_since.is_none_or(|t| t.elapsed() < Duration::from_millis(500)) {
                match s.write(&requests.as_bytes()[sent..]) {
                    Ok(n) => (sent, stuck_since) = (sent + n, None),
                    Err(_) => {
                        stuck_since.get_or_insert_with(Instant::now);
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
            s
        })
        .collect();
    // Past the 1 s timeout; the bound only turns a lockout into a failure.
    std::thread::sleep(Duration::from_secs(2));
    wait_until("a scrape past the clients that never read", Duration::from_secs(30), || scrape_text(addr).is_ok());
    drop(held);
}

/// `volt_worker_parked_seconds_total` counts the sleep a worker is in, so an idle worker's
/// counter grows while it sleeps (before, it stood still until the worker woke, then
/// jumped by the whole sleep).
#[test]
fn parked_seconds_grow_while_a_worker_sleeps() {
    let rt = volt::runtime::Builder::new().worker_threads(1).stall_threshold(None).build().unwrap();
    rt.block_on(async { volt::spawn(async {}).await.unwrap() });
    let exporter = capped_exporter(&rt, 16);
    let read = |text: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix("volt_worker_parked_seconds_total{worker=\"0\"} ").map(|v| v.trim().parse::<f64>().unwrap())
        })
    };
    wait_until("a sample", Duration::from_secs(30), || read(&exporter.render()).is_some());
    let before = read(&exporter.render()).unwrap();
    // The worker has nothing to do: it sleeps until the end of the test.
    wait_until("the parked time to grow by a second", Duration::from_secs(30), || {
        read(&exporter.render()).unwrap() - before >= 1.0
    });
    // Read straight from the runtime, the sleep is counted once: no faster than time.
    let parked = || rt.handle().telemetry().snapshot().workers[0].parked_ns;
    let (t, a) = (Instant::now(), parked());
    std::thread::sleep(Duration::from_millis(200));
    let b = parked();
    assert!(b >= a && b - a <= t.elapsed().as_nanos() as u64, "{a} -> {b} in {:?}", t.elapsed());
}

/// The registry follows the console: down drops every series of the runtime at once
/// (counters, gauges, histograms, the lost-waker gauge), a snapshot published while down
/// is served only once up, and the next process's series are its own (no worker index
/// of the one before).
#[test]
fn the_runtimes_series_go_with_the_console() {
    let snapshot = |workers: u32, spawned: u64| volt_console_proto::Snapshot {
        workers: (0..workers)
            .map(|index| volt_console_proto::WorkerSnapshot {
                index,
                tasks_polled: 10,
                poll_time_histogram: Some(volt_console_proto::Histogram { buckets: vec![1; 32], sum: 9 }),
                ..Default::default()
            })
            .collect(),
        tasks_spawned: spawned,
        tasks_alive: 13,
        tasks_lost_waker: Some(1),
        park_duration_histogram: Some(volt_console_proto::Histogram { buckets: vec![1; 32], sum: 9 }),
        ..Default::default()
    };
    let m = volt_exporter::Metrics::new();
    m.set_console_up(false);
    m.publish(&snapshot(3, 100));
    m.set_console_up(true);
    let text = m.render();
    assert!(text.contains("volt_tasks_alive 13") && text.contains("volt_tasks_lost_waker 1"), "{text}");
    assert!(text.contains("volt_worker_parked_seconds_total{worker=\"2\"}"), "{text}");
    assert!(text.contains("volt_task_poll_duration_seconds_count"), "{text}");

    m.set_console_up(false);
    let text = m.render();
    assert_eq!(runtime_families(&text), BTreeSet::new(), "{text}");
    assert_eq!(console_up(&text), Some(0.0), "{text}");
    promtool_check(&text);

    m.publish(&snapshot(2, 4));
    assert_eq!(runtime_families(&m.render()), BTreeSet::new(), "served before the console is up");
    m.set_console_up(true);
    let text = m.render();
    assert_eq!(worker_labels(&text), ["0", "1"].map(String::from).into(), "{text}");
    assert!(text.contains("volt_tasks_spawned_total 4\n"), "{text}");
    promtool_check(&text);
}

/// Before its first snapshot (the sidecar before it reached the console) the exporter
/// serves no runtime figures at all, rather than zeros that would read as a counter
/// reset when the real totals arrive; the lost-waker gauge is left out until counted.
#[test]
fn nothing_is_served_before_the_first_snapshot() {
    let m = volt_exporter::Metrics::new();
    m.set_console_up(false);
    let text = m.render();
    let values: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("volt_exporter_console_up"))
        .collect();
    assert!(values.is_empty(), "served before any snapshot:\n{}", values.join("\n"));
    m.publish(&volt_console_proto::Snapshot { tasks_spawned: 5, ..Default::default() });
    m.set_console_up(true);
    let text = m.render();
    assert!(text.contains("volt_tasks_spawned_total 5"), "{text}");
    assert!(!text.contains("volt_tasks_lost_waker "), "not counted yet: {text}");
    m.publish(&volt_console_proto::Snapshot { tasks_lost_waker: Some(2), ..Default::default() });
    m.publish(&volt_console_proto::Snapshot::default());
    assert!(m.render().contains("volt_tasks_lost_waker 2"), "the last count stands");
}

/// The task groups' families: each group's series by label `group`.
const GROUP_COUNTERS: &[&str] = &[
    "volt_task_group_spawned_total",
    "volt_task_group_completed_total",
    "volt_task_group_cancelled_total",
    "volt_task_group_panicked_total",
    "volt_task_group_polls_total",
    "volt_task_group_busy_seconds_total",
    "volt_task_group_slow_polls_total",
    "volt_task_group_slow_poll_seconds_total",
    "volt_task_group_first_polls_total",
    "volt_task_group_first_poll_delay_seconds_total",
    "volt_task_group_scheduled_polls_total",
    "volt_task_group_schedule_delay_seconds_total",
];
const GROUP_GAUGES: &[&str] =
    &["volt_task_group_alive", "volt_task_group_poll_p50_seconds", "volt_task_group_poll_p99_seconds"];

/// `name`'s value for group `group`, if the scrape has it.
fn group_value(s: &Scrape, name: &str, group: &str) -> Option<f64> {
    samples(s, name).into_iter().find(|x| x.labels.get("group") == Some(group)).map(value)
}

/// Each group family typed and described, with one series per group of `groups`.
fn check_group_families(s: &Scrape, groups: &[&str]) {
    for name in GROUP_COUNTERS.iter().chain(GROUP_GAUGES) {
        assert!(s.docs.get(*name).is_some_and(|d| !d.is_empty()), "{name} has no help text");
        for g in groups {
            let x = samples(s, name).into_iter().find(|x| x.labels.get("group") == Some(*g));
            let x = x.unwrap_or_else(|| panic!("{name} has no series for group {g:?}"));
            let typed = if GROUP_COUNTERS.contains(name) {
                matches!(x.value, Value::Counter(_))
            } else {
                matches!(x.value, Value::Gauge(_))
            };
            assert!(typed, "{name}: {:?}", x.value);
        }
    }
}

/// Spawn `n` tasks named `name` that yield once, and wait for them.
fn named_work(rt: &volt::Runtime, name: &str, n: usize) {
    let hs: Vec<_> = (0..n)
        .map(|_| volt::task::Builder::new().name(name).spawn_on(async { volt::task::yield_now().await }, rt.handle()))
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

/// In-process: every group the runtime counts has its series, with the counts of its
/// tasks; a name that needs escaping in a label still makes a scrape promtool passes;
/// the workers' busy time is there too.
#[test]
fn in_process_scrape_has_the_task_groups() {
    let rt = busy_runtime(2);
    named_work(&rt, "svc", 40);
    let odd = "a \"quoted\" \\ name";
    named_work(&rt, odd, 3);
    let live = volt::task::Builder::new().name("svc").spawn_on(std::future::pending::<()>(), rt.handle());
    let exporter = fast_exporter(&rt);
    let addr = exporter.local_addr();
    let mut s = scrape(addr);
    wait_until("the groups' series", Duration::from_secs(30), || {
        s = scrape(addr);
        group_value(&s, "volt_task_group_alive", "svc") == Some(1.0)
    });
    check_group_families(&s, &["svc"]);
    assert_eq!(group_value(&s, "volt_task_group_spawned_total", "svc"), Some(41.0));
    assert_eq!(group_value(&s, "volt_task_group_completed_total", "svc"), Some(40.0));
    assert!(group_value(&s, "volt_task_group_polls_total", "svc").unwrap() >= 80.0);
    assert!(group_value(&s, "volt_task_group_busy_seconds_total", "svc").unwrap() > 0.0);
    let text = scrape_text(addr).unwrap();
    assert!(text.contains(r#"volt_task_group_spawned_total{group="a \"quoted\" \\ name"} 3"#), "{text}");
    assert!(per_worker(&s, "volt_worker_busy_seconds_total").iter().map(|w| w.1).sum::<f64>() > 0.0);
    promtool_check(&text);
    drop(live);
    drop(exporter);
}

/// 150 names: the scrape has 101 groups (100 and `other`), every task counted once.
#[test]
fn the_group_series_are_bounded() {
    let rt = busy_runtime(2);
    for i in 0..150 {
        named_work(&rt, &format!("n{i}"), 1);
    }
    let exporter = fast_exporter(&rt);
    let addr = exporter.local_addr();
    let mut s = scrape(addr);
    wait_until("the groups' series", Duration::from_secs(30), || {
        s = scrape(addr);
        !samples(&s, "volt_task_group_spawned_total").is_empty()
    });
    let spawned = samples(&s, "volt_task_group_spawned_total");
    let groups: BTreeSet<&str> = spawned.iter().filter_map(|x| x.labels.get("group")).collect();
    assert_eq!(groups.len(), 101, "{groups:?}");
    assert_eq!(group_value(&s, "volt_task_group_spawned_total", "other"), Some(50.0));
    assert_eq!(spawned.iter().map(|x| value(x)).sum::<f64>(), 150.0);
    promtool_check(&scrape_text(addr).unwrap());
}

/// Without task statistics there are no groups, and no group family.
#[test]
fn no_group_series_without_the_event_ring() {
    let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    work(&rt, 10);
    let exporter = fast_exporter(&rt);
    let addr = exporter.local_addr();
    wait_until("a first sample", Duration::from_secs(30), || !samples(&scrape(addr), "volt_workers").is_empty());
    let text = scrape_text(addr).unwrap();
    assert!(!text.contains("volt_task_group_"), "{text}");
}

/// The sidecar serves the groups from the console's updates.
#[test]
fn the_sidecar_serves_the_task_groups() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .event_ring(4096)
        .console_bind("127.0.0.1:0")
        .console_publish_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    named_work(&rt, "svc", 25);
    let side = sidecar(&format!("http://{}", rt.console_addr().unwrap()));
    let mut s = scrape(side.addr);
    wait_until("the sidecar to show the groups", Duration::from_secs(30), || {
        s = scrape(side.addr);
        group_value(&s, "volt_task_group_completed_total", "svc") == Some(25.0)
    });
    check_group_families(&s, &["svc"]);
    assert!(per_worker(&s, "volt_worker_busy_seconds_total").iter().map(|w| w.1).sum::<f64>() > 0.0);
    promtool_check(&scrape_text(side.addr).unwrap());
    drop(rt);
}
