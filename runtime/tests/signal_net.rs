#![cfg(all(feature = "signal", feature = "net", feature = "io-util"))]
//! `volt::signal` and the `volt::net` additions, as a Tokio application meets them: real
//! signals sent to this process with `kill(2)`, real sockets on loopback and in a
//! temporary directory. Every wait has a 10 s bound; nothing here asserts how fast
//! anything is.
//!
//! The tests run on threads of one process, and a signal goes to the whole process: each
//! test that sends one uses a signal no other test sends.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::signal::unix::{signal, SignalKind};
use volt::telemetry::{TaskInfo, WaitReason};

const BOUND: Duration = Duration::from_secs(10);

fn runtime() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap()
}

fn kill_self(signum: libc::c_int) {
    // SAFETY: `kill(2)` on this process with a signal it has a handler for.
    let rc = unsafe { libc::kill(libc::getpid(), signum) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

/// Read the task list until `pred` holds for it, for at most 10 s.
fn wait_for(rt: &volt::Runtime, what: &str, pred: impl Fn(&[TaskInfo]) -> bool) -> Vec<TaskInfo> {
    let deadline = Instant::now() + BOUND;
    loop {
        let tasks = rt.handle().telemetry().tasks();
        if pred(&tasks) {
            return tasks;
        }
        assert!(Instant::now() < deadline, "{what}: {tasks:#?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn named<'a>(tasks: &'a [TaskInfo], name: &str) -> Option<&'a TaskInfo> {
    tasks.iter().find(|t| t.name.as_deref() == Some(name))
}

async fn within<F: Future>(f: F) -> F::Output {
    volt::time::timeout(BOUND, f).await.expect("did not happen within 10 s")
}

#[test]
fn ctrl_c_completes_on_sigint_and_the_process_survives() {
    let rt = runtime();
    rt.block_on(async {
        let mut ctrl_c = std::pin::pin!(volt::signal::ctrl_c());
        // The first poll makes the listener (and installs the handler): from then on
        // SIGINT is the listener's, not the default action that ends the process.
        assert!(futures::poll!(ctrl_c.as_mut()).is_pending());
        kill_self(libc::SIGINT);
        within(ctrl_c).await.expect("ctrl_c failed");
    });
}

#[test]
fn sigusr1_wakes_every_listener_and_the_wait_is_named() {
    let rt = runtime();
    let mut handles = Vec::new();
    for name in ["usr1-a", "usr1-b"] {
        handles.push(volt::task::Builder::new().name(name).spawn_on(
            async {
                let mut s = signal(SignalKind::user_defined1()).unwrap();
                s.recv().await
            },
            rt.handle(),
        ));
    }
    let label = Some(WaitReason::Label("signal SIGUSR1".into()));
    wait_for(&rt, "both listeners wait on SIGUSR1", |ts| {
        ["usr1-a", "usr1-b"].iter().all(|n| named(ts, n).is_some_and(|t| t.waiting_on == label))
    });
    kill_self(libc::SIGUSR1);
    rt.block_on(async {
        for h in handles {
            assert_eq!(within(h).await.unwrap(), Some(()), "a listener was not woken");
        }
    });
}

#[test]
fn a_signal_before_recv_is_not_lost() {
    let rt = runtime();
    rt.block_on(async {
        let mut s = signal(SignalKind::user_defined2()).unwrap();
        kill_self(libc::SIGUSR2);
        kill_self(libc::SIGUSR2);
        assert_eq!(within(s.recv()).await, Some(()));
        // A later delivery is seen by the next `recv` too.
        kill_self(libc::SIGUSR2);
        assert_eq!(within(s.recv()).await, Some(()));
    });
}

/// A signal that lands after the last listener was dropped and before the next one is
/// made reaches the next one (Tokio's `drop_then_get_a_signal`): nothing had handed it
/// out. `raise` delivers it to this thread before it returns. On both flavors, the
/// multi-thread one with its workers busy.
#[test]
fn a_signal_between_two_listeners_reaches_the_second() {
    let multi = volt::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let current = volt::runtime::Builder::new_current_thread().build().unwrap();
    for rt in [multi, current] {
        rt.block_on(async {
            let spin = Arc::new(std::sync::atomic::AtomicBool::new(true));
            // Keep the workers polling (and their reactor turning) meanwhile.
            let busy: Vec<_> = (0..2)
                .map(|_| {
                    let spin = spin.clone();
                    volt::spawn(async move {
                        while spin.load(std::sync::atomic::Ordering::Relaxed) {
                            volt::task::yield_now().await;
                        }
                    })
                })
                .collect();
            // A real-time signal: nothing else in the process sends it (the stall monitor
            // uses `SIGURG`, the other tests the classic ones).
            let sig = libc::SIGRTMIN() + 3;
            let first = signal(SignalKind::from_raw(sig)).unwrap();
            drop(first);
            // SAFETY: `raise(3)` of a signal this process has a handler for (installed by
            // the first listener, kept for the process's life).
            assert_eq!(unsafe { libc::raise(sig) }, 0);
            let mut second = signal(SignalKind::from_raw(sig)).unwrap();
            assert_eq!(within(second.recv()).await, Some(()), "the delivery was lost");
            spin.store(false, std::sync::atomic::Ordering::Relaxed);
            for b in busy {
                b.await.unwrap();
            }
        });
    }
}

#[test]
fn one_delivery_reaches_listeners_in_two_runtimes() {
    let (rt1, rt2) = (runtime(), runtime());
    let mut s1 = rt1.block_on(async { signal(SignalKind::alarm()).unwrap() });
    let mut s2 = rt2.block_on(async { signal(SignalKind::alarm()).unwrap() });
    let h1 = rt1.spawn(async move { s1.recv().await });
    let h2 = rt2.spawn(async move { s2.recv().await });
    kill_self(libc::SIGALRM);
    assert_eq!(rt1.block_on(within(h1)).unwrap(), Some(()));
    assert_eq!(rt2.block_on(within(h2)).unwrap(), Some(()));
}

#[test]
fn a_listener_of_a_runtime_that_shut_down_answers_none() {
    let rt = runtime();
    // A task still waiting when the runtime is dropped must not hold the drop up.
    rt.spawn(async {
        let mut s = signal(SignalKind::window_change()).unwrap();
        s.recv().await
    });
    let mut kept = rt.block_on(async { signal(SignalKind::window_change()).unwrap() });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(BOUND).expect("dropping a runtime with a task waiting on a signal hung");
    let other = runtime();
    assert_eq!(other.block_on(within(kept.recv())), None);
}

#[test]
fn bad_signals_are_errors_not_panics() {
    let rt = runtime();
    rt.block_on(async {
        for bad in [libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV, 0, -1, 1000] {
            let e = signal(SignalKind::from_raw(bad)).expect_err("accepted a signal it cannot listen for");
            assert!(!e.to_string().is_empty());
        }
    });
    assert!(signal(SignalKind::hangup()).is_err(), "a listener outside a runtime");
    assert_eq!(SignalKind::from_raw(libc::SIGTERM), SignalKind::terminate());
    assert_eq!(SignalKind::interrupt().as_raw_value(), libc::SIGINT);
}

// ---- net ----

use std::net::SocketAddr;
use volt::io::{AsyncReadExt, AsyncWriteExt, Interest};
use volt::net::{lookup_host, TcpListener, TcpSocket, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};

/// A fresh directory for this test's socket files, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("volt-signal-net-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One echo exchange on an accepted connection: read until end of stream, write it back.
async fn echo_once(mut s: TcpStream) {
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    s.write_all(&buf).await.unwrap();
}

#[test]
fn connect_and_bind_take_every_address_form_tokio_takes() {
    let rt = runtime();
    rt.block_on(within(async {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = volt::spawn(async move {
            for _ in 0..4 {
                let (s, _) = listener.accept().await.unwrap();
                volt::spawn(echo_once(s));
            }
        });
        let port = addr.port();
        // A host name (resolved on the blocking pool; `localhost` may give `::1` first,
        // which is refused, then 127.0.0.1), a `String`, a `SocketAddr` and a slice.
        let streams = vec![
            TcpStream::connect(("localhost", port)).await.unwrap(),
            TcpStream::connect(format!("127.0.0.1:{port}")).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(&[addr][..]).await.unwrap(),
        ];
        for (i, mut s) in streams.into_iter().enumerate() {
            let msg = format!("hello {i}");
            s.write_all(msg.as_bytes()).await.unwrap();
            s.shutdown().await.unwrap();
            let mut back = String::new();
            s.read_to_string(&mut back).await.unwrap();
            assert_eq!(back, msg);
        }
        server.await.unwrap();

        // UDP: bind with a (host, port) pair, send to a `String`, connect to a slice.
        let a = UdpSocket::bind(("127.0.0.1", 0)).await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".to_string()).await.unwrap();
        let b_addr = b.local_addr().unwrap();
        assert_eq!(a.send_to(b"one", b_addr.to_string()).await.unwrap(), 3);
        let mut buf = [0u8; 16];
        let (n, from) = b.peek_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"one"[..], a.local_addr().unwrap()));
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"one"[..], a.local_addr().unwrap()));
        a.connect(&[b_addr][..]).await.unwrap();
        a.send(b"two").await.unwrap();
        assert_eq!(b.recv_from(&mut buf).await.unwrap().0, 3);
        assert!(a.try_recv(&mut buf).is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock));

        // Malformed input is an error, not a panic or a lookup.
        let e = TcpStream::connect("localhost").await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }));
}

#[test]
fn lookup_host_resolves_localhost_and_passes_numbers_through() {
    let rt = runtime();
    rt.block_on(within(async {
        let addrs: Vec<SocketAddr> = lookup_host("localhost:80").await.unwrap().collect();
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 80), "{addrs:?}");
        let addrs: Vec<SocketAddr> = lookup_host(("127.0.0.1", 5)).await.unwrap().collect();
        assert_eq!(addrs, ["127.0.0.1:5".parse::<SocketAddr>().unwrap()]);
        assert!(lookup_host("no-port-here").await.is_err());
    }));
}

#[test]
fn tcp_socket_binds_with_reuseaddr_listens_and_connects() {
    let rt = runtime();
    rt.block_on(within(async {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        assert!(socket.reuseaddr().unwrap());
        socket.set_recv_buffer_size(64 * 1024).unwrap();
        assert!(socket.recv_buffer_size().unwrap() > 0);
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = socket.local_addr().unwrap();
        assert_ne!(addr.port(), 0);
        let listener = socket.listen(16).unwrap();
        assert_eq!(listener.local_addr().unwrap(), addr);

        let client = TcpSocket::new_v4().unwrap();
        client.set_nodelay(true).unwrap();
        client.set_send_buffer_size(64 * 1024).unwrap();
        let (c, accepted) = futures::join!(client.connect(addr), listener.accept());
        let mut c = c.unwrap();
        let (mut s, peer) = accepted.unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert!(c.nodelay().unwrap());

        // `ready` sees a fresh connection writable, and readable once the peer writes.
        let r = c.ready(Interest::READABLE | Interest::WRITABLE).await.unwrap();
        assert!(r.is_writable());
        s.write_all(b"ping").await.unwrap();
        loop {
            let r = c.ready(Interest::READABLE).await.unwrap();
            assert!(r.is_readable());
            let mut buf = [0u8; 8];
            match c.try_read(&mut buf) {
                Ok(n) => {
                    assert_eq!(&buf[..n], b"ping");
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("try_read: {e}"),
            }
        }

        // The server side closes first, so its port is left in TIME_WAIT: binding it again
        // needs SO_REUSEADDR.
        drop(s);
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).await.unwrap();
        drop(c);
        drop(listener);
        let again = TcpSocket::new_v4().unwrap();
        again.set_reuseaddr(true).unwrap();
        again.bind(addr).expect("SO_REUSEADDR did not allow binding the port in TIME_WAIT again");
        let _listener = again.listen(16).unwrap();

        // Two sockets with SO_REUSEPORT listen on one port.
        let one = TcpSocket::new_v4().unwrap();
        one.set_reuseport(true).unwrap();
        one.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let shared = one.local_addr().unwrap();
        let two = TcpSocket::new_v4().unwrap();
        two.set_reuseport(true).unwrap();
        assert!(two.reuseport().unwrap());
        two.bind(shared).unwrap();
        let (_l1, _l2) = (one.listen(8).unwrap(), two.listen(8).unwrap());
        TcpStream::connect(shared).await.unwrap();
    }));
}

#[test]
fn unix_stream_echo_round_trip_with_split_halves() {
    let dir = TempDir::new("stream");
    let path = dir.0.join("echo.sock");
    let rt = runtime();
    let listener = rt.block_on(async { UnixListener::bind(&path).unwrap() });
    assert_eq!(listener.local_addr().unwrap().as_pathname(), Some(path.as_path()));
    let server = volt::task::Builder::new().name("unix-echo").spawn_on(
        async move {
            let (stream, peer) = listener.accept().await.unwrap();
            assert!(peer.is_unnamed());
            // SAFETY: `getuid` has no preconditions.
            assert_eq!(stream.peer_cred().unwrap().uid(), unsafe { libc::getuid() });
            let (mut r, mut w) = stream.into_split();
            let n = volt::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
            n
        },
        rt.handle(),
    );
    let client = volt::task::Builder::new().name("unix-client").spawn_on(
        {
            let path = path.clone();
            async move {
                let mut s = UnixStream::connect(&path).await.unwrap();
                assert_eq!(s.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
                // Wait (named) for the first byte before writing anything: nothing comes.
                let mut first = [0u8; 1];
                let (mut r, mut w) = s.split();
                let read = async { r.read(&mut first).await.unwrap() };
                let write = async {
                    volt::time::sleep(Duration::from_millis(50)).await;
                    w.write_all(b"hello over unix").await.unwrap();
                    w.shutdown().await.unwrap();
                };
                let (n, ()) = futures::join!(read, write);
                assert_eq!(n, 1);
                let mut rest = Vec::new();
                s.read_to_end(&mut rest).await.unwrap();
                [&first[..], &rest].concat()
            }
        },
        rt.handle(),
    );
    rt.block_on(async {
        assert_eq!(within(client).await.unwrap(), b"hello over unix");
        assert_eq!(within(server).await.unwrap(), 15);
    });

    // A reader waiting on a Unix stream shows as `read` with no address.
    let (a, b) = rt.block_on(async { UnixStream::pair().unwrap() });
    let waiter = volt::task::Builder::new().name("unix-reader").spawn_on(
        async move {
            let mut a = a;
            let mut buf = [0u8; 4];
            a.read_exact(&mut buf).await.unwrap();
            buf
        },
        rt.handle(),
    );
    wait_for(&rt, "the reader waits on its Unix stream", |ts| {
        named(ts, "unix-reader").is_some_and(|t| t.waiting_on == Some(WaitReason::Read { addr: None }))
    });
    rt.block_on(async {
        let mut b = b;
        b.write_all(b"pair").await.unwrap();
        assert_eq!(&within(waiter).await.unwrap(), b"pair");
    });
}

#[test]
fn unix_datagrams_reach_their_path_with_the_sender_address() {
    let dir = TempDir::new("dgram");
    let (a_path, b_path) = (dir.0.join("a.sock"), dir.0.join("b.sock"));
    let rt = runtime();
    rt.block_on(within(async {
        let a = UnixDatagram::bind(&a_path).unwrap();
        let b = UnixDatagram::bind(&b_path).unwrap();
        assert_eq!(a.send_to(b"ping", &b_path).await.unwrap(), 4);
        let mut buf = [0u8; 16];
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"ping");
        assert_eq!(from.as_pathname(), Some(a_path.as_path()));
        b.connect(&a_path).unwrap();
        b.send(b"pong").await.unwrap();
        assert_eq!(a.recv(&mut buf).await.unwrap(), 4);
        assert_eq!(&buf[..4], b"pong");
        assert!(a.try_recv(&mut buf).is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock));

        let (x, y) = UnixDatagram::pair().unwrap();
        let receiver = volt::spawn(async move {
            let mut buf = [0u8; 16];
            let mut got = Vec::new();
            for _ in 0..3 {
                let n = y.recv(&mut buf).await.unwrap();
                got.push(buf[..n].to_vec());
            }
            got
        });
        for m in [&b"1"[..], b"22", b"333"] {
            x.send(m).await.unwrap();
        }
        assert_eq!(receiver.await.unwrap(), [b"1".to_vec(), b"22".to_vec(), b"333".to_vec()]);
    }));
}

#[test]
fn refused_or_missing_peers_are_errors_not_hangs() {
    let dir = TempDir::new("errors");
    let rt = runtime();
    rt.block_on(within(async {
        // A port nobody listens on any more.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        let e = TcpSocket::new_v4().unwrap().connect(closed).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        // An IPv4 socket cannot bind an IPv6 address.
        assert!(TcpSocket::new_v4().unwrap().bind("[::1]:0".parse().unwrap()).is_err());

        let e = UnixStream::connect(dir.0.join("nobody.sock")).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        let path = dir.0.join("taken.sock");
        let _first = UnixListener::bind(&path).unwrap();
        let e = UnixListener::bind(&path).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    }));
    // Sockets belong to a runtime: outside one, making them is an error.
    assert!(UnixStream::pair().is_err());
    assert!(UnixDatagram::unbound().is_err());
}

#[test]
fn stream_halves_wait_for_readiness_and_read_into_buffers() {
    // Each half of a TCP and a Unix stream, borrowed and owned: `ready` on both, and
    // `try_read_buf` on the reading one, which takes every byte sent and then says
    // `WouldBlock`.
    async fn check<R, W>(ready_r: R, ready_w: W, read_buf: impl Fn(&mut Vec<u8>) -> std::io::Result<usize>)
    where
        R: Future<Output = std::io::Result<volt::io::Ready>>,
        W: Future<Output = std::io::Result<volt::io::Ready>>,
    {
        assert!(within(ready_w).await.unwrap().is_writable());
        assert!(within(ready_r).await.unwrap().is_readable());
        let mut got = Vec::with_capacity(4);
        loop {
            match read_buf(&mut got) {
                Ok(0) => panic!("end of stream before every byte came"),
                Ok(_) if got.len() == 11 => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => volt::task::yield_now().await,
                Err(e) => panic!("try_read_buf: {e}"),
            }
        }
        assert_eq!(got, b"hello halve");
        assert_eq!(read_buf(&mut got).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    }
    let rt = runtime();
    rt.block_on(within(async {
        let both = Interest::READABLE | Interest::WRITABLE;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut a = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut b, _) = listener.accept().await.unwrap();
        b.write_all(b"hello halve").await.unwrap();
        {
            let (r, w) = a.split();
            check(r.ready(Interest::READABLE), w.ready(Interest::WRITABLE), |buf| r.try_read_buf(buf)).await;
        }
        b.write_all(b"hello halve").await.unwrap();
        let (r, w) = a.into_split();
        assert!(!within(w.ready(both)).await.unwrap().is_empty());
        check(r.ready(Interest::READABLE), w.ready(Interest::WRITABLE), |buf| r.try_read_buf(buf)).await;

        let (mut u, mut v) = UnixStream::pair().unwrap();
        v.write_all(b"hello halve").await.unwrap();
        {
            let (r, w) = u.split();
            check(r.ready(Interest::READABLE), w.ready(Interest::WRITABLE), |buf| r.try_read_buf(buf)).await;
        }
        v.write_all(b"hello halve").await.unwrap();
        let cred = u.peer_cred().unwrap();
        let (r, w) = u.into_split();
        assert!(!within(w.ready(both)).await.unwrap().is_empty());
        check(r.ready(Interest::READABLE), w.ready(Interest::WRITABLE), |buf| r.try_read_buf(buf)).await;
        // Tokio's names for the credentials' types.
        let (_uid, _gid, _pid): (volt::net::unix::uid_t, volt::net::unix::gid_t, Option<volt::net::unix::pid_t>) =
            (cred.uid(), cred.gid(), cred.pid());
        assert_eq!(cred.pid(), Some(std::process::id() as volt::net::unix::pid_t));
    }));
}

#[test]
fn tcp_poll_peek_fills_a_read_buf_and_leaves_the_bytes() {
    let rt = runtime();
    rt.block_on(within(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut a = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut b, _) = listener.accept().await.unwrap();
        b.write_all(b"peekaboo").await.unwrap();
        // Tokio's signature: a `ReadBuf`, filled, and the count.
        let mut space = [0u8; 4];
        let mut rb = volt::io::ReadBuf::new(&mut space);
        let n = std::future::poll_fn(|cx| a.poll_peek(cx, &mut rb)).await.unwrap();
        assert_eq!((n, rb.filled()), (4, &b"peek"[..]));
        {
            let (r, _w) = a.split();
            let mut space = [0u8; 8];
            let mut rb = volt::io::ReadBuf::new(&mut space);
            // Bytes may come in more than one segment: peek until all are there.
            while rb.filled().len() < 8 {
                rb.clear();
                std::future::poll_fn(|cx| r.poll_peek(cx, &mut rb)).await.unwrap();
            }
            assert_eq!(rb.filled(), b"peekaboo");
        }
        // Nothing was taken: a read gets every byte.
        let mut all = [0u8; 8];
        a.read_exact(&mut all).await.unwrap();
        assert_eq!(&all, b"peekaboo");
    }));
}
