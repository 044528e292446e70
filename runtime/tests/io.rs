//! Network I/O and the blocking pool on a real runtime over loopback.

mod common;

use common::*;
use futures::{AsyncReadExt, AsyncWriteExt};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::net::{TcpListener, TcpStream, UdpSocket};

async fn echo_server(listener: TcpListener) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else { continue };
        volt::spawn(async move {
            let mut buf = [0u8; 1024];
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }
}

#[test]
fn tcp_echo_100_connections_by_100_messages() {
    let rt = rt(2);
    let total = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        volt::spawn(echo_server(listener));
        let clients: Vec<_> = (0..100u32)
            .map(|c| {
                volt::spawn(async move {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    assert_eq!(s.peer_addr().unwrap(), addr);
                    let mut got = 0;
                    for m in 0..100u32 {
                        let msg = format!("client {c} message {m:03}\n");
                        s.write_all(msg.as_bytes()).await.unwrap();
                        let mut back = vec![0u8; msg.len()];
                        s.read_exact(&mut back).await.unwrap();
                        assert_eq!(back, msg.as_bytes(), "echo mismatch");
                        got += 1;
                    }
                    got
                })
            })
            .collect();
        let mut total = 0;
        for c in clients {
            total += c.await.unwrap();
        }
        total
    });
    assert_eq!(total, 100 * 100);
    assert!(rt.handle().telemetry().snapshot().io_events > 0);
}

#[test]
fn udp_round_trip() {
    let rt = rt(2);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let echo = volt::spawn(async move {
            let mut buf = [0u8; 64];
            for _ in 0..10 {
                let (n, from) = b.recv_from(&mut buf).await.unwrap();
                assert_eq!(from, aa);
                b.send_to(&buf[..n], from).await.unwrap();
            }
        });
        let mut buf = [0u8; 64];
        for i in 0..10u8 {
            a.send_to(&[i, i, i], ba).await.unwrap();
            let (n, from) = a.recv_from(&mut buf).await.unwrap();
            assert_eq!((&buf[..n], from), (&[i, i, i][..], ba));
        }
        echo.await.unwrap();
        // Connected mode.
        let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        c.connect(aa).await.unwrap();
        assert_eq!(c.peer_addr().unwrap(), aa);
        c.send(b"hi").await.unwrap();
        let (n, from) = a.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"hi"[..], c.local_addr().unwrap()));
    });
}

#[test]
fn accept_loop_survives_a_client_resetting_its_connection() {
    let rt = rt(2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        volt::spawn(echo_server(listener));
        for _ in 0..5 {
            // A client that connects, sends, and aborts with an RST (SO_LINGER 0).
            let raw = std::net::TcpStream::connect(addr).unwrap();
            let linger = libc::linger { l_onoff: 1, l_linger: 0 };
            // SAFETY: a valid socket fd and a correctly sized linger struct.
            let rc = unsafe {
                use std::os::fd::AsRawFd;
                libc::setsockopt(
                    raw.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    &linger as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0);
            (&raw).write_all_std(b"partial");
            drop(raw);
        }
        // The server still accepts and echoes.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"still here").await.unwrap();
        let mut back = [0u8; 10];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"still here");
    });
}

trait WriteStd {
    fn write_all_std(self, b: &[u8]);
}

impl WriteStd for &std::net::TcpStream {
    fn write_all_std(mut self, b: &[u8]) {
        use std::io::Write;
        self.write_all(b).unwrap();
    }
}

#[test]
fn reactor_wakes_an_idle_runtime_in_under_5ms() {
    // Every worker parked (one blocked in the reactor); a datagram from a plain thread must
    // reach the waiting task in well under the 10 ms park timeout.
    let rt = rt(2);
    let sock = rt.block_on(async { UdpSocket::bind("127.0.0.1:0").await.unwrap() });
    let addr = sock.local_addr().unwrap();
    let sock = Arc::new(sock);
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut lat = vec![];
    for i in 0..21u8 {
        let s = sock.clone();
        let h = rt.spawn(async move {
            let mut buf = [0u8; 8];
            let (n, _) = s.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], &[i]);
            Instant::now()
        });
        assert!(wait_until(Duration::from_secs(5), || rt.handle().telemetry().snapshot().num_parked == 2));
        let sent = Instant::now();
        sender.send_to(&[i], addr).unwrap();
        lat.push(h.join().unwrap() - sent);
    }
    lat.sort();
    assert!(lat[10] < Duration::from_millis(5), "median reactor wake {:?}: {lat:?}", lat[10]);
}

#[test]
fn wake_while_parking_in_the_reactor_stress() {
    // Remote spawns and I/O timed to land while workers move between running and parking
    // (in the reactor or on the futex). A lost wake would leave a round hanging; each
    // round must finish within the bound.
    let rt = rt(2);
    let server = rt.block_on(async { UdpSocket::bind("127.0.0.1:0").await.unwrap() });
    let addr = server.local_addr().unwrap();
    let server = Arc::new(server);
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut rounds = 0;
    while Instant::now() < deadline && rounds < 2_000 {
        let s = server.clone();
        let io = rt.spawn(async move {
            let mut buf = [0u8; 4];
            s.recv_from(&mut buf).await.unwrap().0
        });
        let plain = rt.spawn(async { volt::task::yield_now().await });
        // Vary the gap so the sends hit every phase of the park sequence.
        for _ in 0..(rounds % 7) * 50 {
            std::hint::spin_loop();
        }
        sender.send_to(&[1, 2], addr).unwrap();
        let t = Instant::now();
        assert_eq!(io.join().unwrap(), 2);
        plain.join().unwrap();
        assert!(t.elapsed() < Duration::from_secs(1), "round {rounds} took {:?}", t.elapsed());
        rounds += 1;
    }
    assert!(rounds > 50, "only {rounds} rounds ran");
}

#[test]
fn spawn_blocking_returns_values_and_panics_as_join_errors() {
    let rt = rt(2);
    rt.block_on(async {
        assert_eq!(volt::task::spawn_blocking(|| 6 * 7).await.unwrap(), 42);
        let e = volt::task::spawn_blocking(|| -> u32 { panic!("blocking boom") }).await.unwrap_err();
        assert!(e.is_panic());
        assert!(e.to_string().contains("blocking boom"));
        // volt::spawn works on a blocking thread (it is inside the runtime).
        let inner = volt::task::spawn_blocking(|| volt::spawn(async { 5 }).join().unwrap()).await.unwrap();
        assert_eq!(inner, 5);
    });
}

#[test]
fn blocking_calls_do_not_delay_async_tasks() {
    let rt = volt::runtime::Builder::new().worker_threads(2).max_blocking_threads(64).build().unwrap();
    let worst = rt.block_on(async {
        let blockers: Vec<_> =
            (0..64).map(|_| volt::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(300)))).collect();
        // Meanwhile, async tasks keep running: measure how late 5 ms sleeps wake.
        let mut worst = Duration::ZERO;
        for _ in 0..20 {
            let t = Instant::now();
            volt::time::sleep(Duration::from_millis(5)).await;
            worst = worst.max(t.elapsed() - Duration::from_millis(5));
        }
        let s = volt::runtime::Handle::current().telemetry().snapshot();
        assert!(s.blocking_threads >= 32, "the pool grew for the blocking calls: {}", s.blocking_threads);
        for b in blockers {
            b.await.unwrap();
        }
        worst
    });
    // The target is a millisecond or two; generous for a shared machine.
    assert!(worst < Duration::from_millis(20), "an async sleep was {worst:?} late while the pool blocked");
}

#[test]
fn blocking_pool_caps_threads_and_queues_the_rest() {
    let rt = volt::runtime::Builder::new().worker_threads(1).max_blocking_threads(2).build().unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let (r, p) = (running.clone(), peak.clone());
                volt::task::spawn_blocking(move || {
                    let now = r.fetch_add(1, SeqCst) + 1;
                    p.fetch_max(now, SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    r.fetch_sub(1, SeqCst);
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    assert_eq!(peak.load(SeqCst), 2, "at most max_blocking_threads at once");
    assert!(rt.handle().telemetry().snapshot().blocking_threads <= 2);
}

#[test]
fn bad_input_gives_clear_errors() {
    let rt = rt(2);
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let e = TcpListener::bind(addr).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse);
        drop(l);
        // Nothing listens there now.
        let e = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        let u = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let e = UdpSocket::bind(u.local_addr().unwrap()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse);
    });
    // Outside a runtime: an error, not a panic.
    let e = futures::executor::block_on(TcpListener::bind("127.0.0.1:0")).unwrap_err();
    assert!(e.to_string().contains("inside a Volt runtime"), "{e}");
}

#[test]
fn a_stream_used_after_its_runtime_shut_down_returns_an_error() {
    let rt = rt(2);
    let (mut client, _server) = rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (c, s)
    });
    drop(rt);
    let t = Instant::now();
    let mut buf = [0u8; 4];
    let e = futures::executor::block_on(client.read(&mut buf)).unwrap_err();
    assert!(e.to_string().contains("shut down"), "{e}");
    let e = futures::executor::block_on(client.write_all(b"x")).unwrap_err();
    assert!(e.to_string().contains("shut down"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn shutdown_with_blocked_io_pending_timers_and_running_blocking_tasks() {
    let drops = DropCount::default();
    let rt = volt::runtime::Builder::new().worker_threads(2).thread_name("shutio").build().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let listener_addr = rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let g = drops.guard();
        // Blocked in accept forever.
        volt::spawn(async move {
            let _g = g;
            let _ = l.accept().await;
        });
        // Blocked reading a connection that never sends.
        let c = TcpStream::connect(addr).await.unwrap();
        let g = drops.guard();
        volt::spawn(async move {
            let _g = g;
            let mut c = c;
            let mut b = [0u8; 1];
            let _ = c.read(&mut b).await;
        });
        // Pending timers.
        for _ in 0..10 {
            let g = drops.guard();
            volt::spawn(async move {
                let _g = g;
                volt::time::sleep(Duration::from_secs(3600)).await;
            });
        }
        // Running blocking calls.
        for _ in 0..4 {
            let s = started.clone();
            drop(volt::task::spawn_blocking(move || {
                s.fetch_add(1, SeqCst);
                std::thread::sleep(Duration::from_millis(200));
            }));
        }
        addr
    });
    assert!(wait_until(Duration::from_secs(5), || started.load(SeqCst) == 4));
    assert!(threads_named("shutio") >= 6);
    let t = Instant::now();
    drop(rt);
    assert_eq!(drops.get(), 12, "every future was dropped");
    // See `dropping_a_runtime_joins_its_threads`: /proc lags `join` by a moment.
    assert!(
        wait_until(Duration::from_secs(2), || threads_named("shutio") == 0),
        "every worker and blocking thread was joined"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    let _ = listener_addr;
}

#[test]
fn idle_blocking_threads_exit_after_the_keep_alive() {
    let rt =
        volt::runtime::Builder::new().worker_threads(1).thread_keep_alive(Duration::from_millis(50)).build().unwrap();
    rt.block_on(async {
        let hs: Vec<_> =
            (0..4).map(|_| volt::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(20)))).collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    assert!(rt.handle().telemetry().snapshot().blocking_threads >= 1);
    assert!(
        wait_until(Duration::from_secs(5), || rt.handle().telemetry().snapshot().blocking_threads == 0),
        "idle blocking threads did not exit"
    );
    // And the pool starts threads again when needed.
    assert_eq!(rt.handle().spawn_blocking(|| 3).join().unwrap(), 3);
    assert_eq!(rt.block_on(async { volt::task::spawn_blocking(|| 4).await }).unwrap(), 4);
}
