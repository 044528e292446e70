//! The io_uring I/O driver (`Builder::io_driver(IoDriver::IoUring)`), where it differs
//! from epoll: whose thread a poll belongs to, and a poll holding its socket open. The
//! rest of the I/O suite runs on it too, with `VOLT_IO_DRIVER=io_uring` (see `.ci/run`).
//!
//! Each test skips, saying so, where the kernel does not offer io_uring; CI's kernel does.

mod common;

use common::{echo_clients, echo_connection, echo_server};
use futures::{AsyncReadExt, AsyncWriteExt};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use volt::net::{TcpListener, TcpStream};
use volt::runtime::{Builder, IoDriver, Runtime};

/// A hang is reported as a failure after this long: a bound, not a timing.
const HANG: Duration = Duration::from_secs(60);

fn uring(workers: Option<usize>) -> Option<Runtime> {
    let mut b = match workers {
        Some(n) => {
            let mut b = Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
        None => Builder::new_current_thread(),
    };
    match b.io_driver(IoDriver::IoUring).build() {
        Ok(rt) => {
            assert_eq!(rt.handle().io_driver(), IoDriver::IoUring);
            Some(rt)
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

#[test]
fn the_driver_asked_for_is_the_one_used() {
    let epoll = Builder::new_multi_thread().worker_threads(1).io_driver(IoDriver::Epoll).build().unwrap();
    assert_eq!(epoll.handle().io_driver(), IoDriver::Epoll);
    let Some(rt) = uring(Some(2)) else { return };
    let served = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        volt::spawn(echo_server(listener));
        volt::time::timeout(HANG, echo_clients(addr, 64, 50)).await.expect("echo hung on io_uring")
    });
    assert_eq!(served, 64 * 50, "every line came back");
}

/// The kernel cancels a thread's io_uring requests when it exits. A listener and a
/// stream registered on threads that then exit must keep working: the driver arms their
/// polls again.
#[test]
fn sockets_registered_on_threads_that_exit_keep_working() {
    let Some(rt) = uring(Some(2)) else { return };
    let listener = std::thread::scope(|s| {
        s.spawn(|| {
            let _in_rt = rt.enter();
            let std = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            std.set_nonblocking(true).unwrap();
            TcpListener::from_std(std).unwrap()
        })
        .join()
        .unwrap()
    });
    let addr = listener.local_addr().unwrap();
    // A stream connected by a `block_on` on a thread that exits right after.
    let early = std::thread::scope(|s| s.spawn(|| rt.block_on(TcpStream::connect(addr)).unwrap()).join().unwrap());
    let served = rt.block_on(async move {
        volt::spawn(echo_server(listener));
        volt::time::timeout(HANG, async move {
            let mut early = early;
            let mut back = [0u8; 5];
            early.write_all(b"early").await.unwrap();
            early.read_exact(&mut back).await.unwrap();
            assert_eq!(&back, b"early");
            echo_clients(addr, 32, 20).await
        })
        .await
        .expect("a socket armed on an exited thread never saw its events")
    });
    assert_eq!(served, 32 * 20);
}

/// A current-thread runtime runs on whichever thread calls `block_on`: one call per
/// thread, each thread gone before the next starts.
#[test]
fn a_current_thread_runtime_driven_from_thread_after_thread() {
    let Some(rt) = uring(None) else { return };
    let listener = std::thread::scope(|s| {
        s.spawn(|| rt.block_on(async { TcpListener::bind("127.0.0.1:0").await.unwrap() })).join().unwrap()
    });
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(listener);
    for round in 0..4 {
        let listener = Arc::clone(&listener);
        let served = std::thread::scope(|s| {
            s.spawn(|| {
                rt.block_on(async move {
                    let server = volt::spawn(async move {
                        let (s, _) = listener.accept().await.unwrap();
                        echo_connection(s).await;
                    });
                    let n = volt::time::timeout(HANG, echo_clients(addr, 1, 10)).await.expect("round hung");
                    server.await.unwrap();
                    n
                })
            })
            .join()
            .unwrap()
        });
        assert_eq!(served, 10, "round {round}");
    }
}

/// A poll holds its socket's file open: dropping a stream, or handing it back with
/// `into_std` and closing that, must still close the connection (the peer reads its end).
#[test]
fn a_dropped_or_released_stream_closes_its_connection() {
    let Some(rt) = uring(Some(2)) else { return };
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        volt::time::timeout(HANG, async {
            for i in 0..100 {
                let client = TcpStream::connect(addr).await.unwrap();
                let (mut server, _) = listener.accept().await.unwrap();
                match i % 3 {
                    0 => drop(client),
                    1 => drop(client.into_std().unwrap()),
                    _ => {
                        // Closed by a task on another worker while this one reads.
                        volt::spawn(async move { drop(client) }).await.unwrap();
                    }
                }
                let mut buf = [0u8; 8];
                assert_eq!(server.read(&mut buf).await.unwrap(), 0, "connection {i}: no end of stream");
                // And the other way: the accepted side dropped, the client sees its end.
                let mut client = TcpStream::connect(addr).await.unwrap();
                let (server, _) = listener.accept().await.unwrap();
                drop(server);
                assert_eq!(client.read(&mut buf).await.unwrap(), 0, "connection {i}: client saw no end");
            }
        })
        .await
        .expect("a closed stream's peer never saw its end");
    });
}

/// Everything is served with both cores saturated by threads outside the runtime: the
/// workers that armed the polls are often descheduled when their events come.
#[test]
fn every_connection_is_served_with_both_cores_saturated() {
    let Some(rt) = uring(Some(2)) else { return };
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let served = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        volt::spawn(echo_server(listener));
        volt::time::timeout(HANG, echo_clients(addr, 50, 20)).await
    });
    stop.store(true, Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    assert_eq!(served.expect("echo hung with the cores saturated"), 50 * 20);
}

/// Shutting the runtime down while tasks wait on sockets ends those waits with an error,
/// and the sockets, still held, fail cleanly afterwards.
#[test]
fn shutdown_ends_waits_on_io_uring_sockets() {
    let Some(rt) = uring(Some(2)) else { return };
    let (client, waiter) = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let waiter = volt::spawn(async move {
            let mut server = server;
            let mut buf = [0u8; 4];
            server.read(&mut buf).await
        });
        volt::task::yield_now().await;
        (client, waiter)
    });
    rt.shutdown_timeout(HANG);
    drop(waiter);
    let mut client = client;
    let r = futures::executor::block_on(client.write_all(b"late"));
    assert!(r.is_err(), "a write after shutdown should fail, not wait: {r:?}");
}

/// An idle runtime whose only timer is far off (a `sleep(Duration::MAX)`) sleeps in the
/// ring: its workers do not spin on a wait the kernel refuses.
#[test]
fn a_far_timer_does_not_make_the_idle_runtime_spin() {
    let Some(rt) = uring(Some(2)) else { return };
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    rt.spawn(async move {
        let _listener = listener;
        volt::time::sleep(Duration::MAX).await;
    });
    let parks = || -> u64 { rt.handle().telemetry().snapshot().workers.iter().map(|w| w.times_parked).sum() };
    std::thread::sleep(Duration::from_millis(100));
    let before = parks();
    std::thread::sleep(Duration::from_millis(300));
    let made = parks() - before;
    assert!(made < 200, "{made} parks in 300 ms with nothing to do");
}

/// A listener dropped while connections keep arriving closes: later connects are
/// refused. (Removing its poll while an event of it was being delivered once left the
/// poll armed, and the listener open, for good.)
#[test]
fn a_listener_dropped_under_a_stream_of_connections_closes() {
    let Some(rt) = uring(Some(2)) else { return };
    for round in 0..30 {
        let listener = rt.block_on(async { volt::spawn(TcpListener::bind("127.0.0.1:0")).await.unwrap().unwrap() });
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flood = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut made = 0u32;
                while !stop.load(Relaxed) {
                    if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                        made += 1;
                    }
                }
                made
            })
        };
        // Take a few connections, then drop the listener on a worker while they keep coming.
        rt.block_on(async move {
            volt::spawn(async move {
                for _ in 0..20 {
                    let _ = listener.accept().await.unwrap();
                }
                drop(listener);
            })
            .await
            .unwrap()
        });
        let start = std::time::Instant::now();
        loop {
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
                _ => assert!(start.elapsed() < HANG, "round {round}: the dropped listener still takes connections"),
            }
        }
        stop.store(true, Relaxed);
        assert!(flood.join().unwrap() >= 20, "round {round}: the flood made its connections");
    }
}
