//! Network I/O on a real runtime over loopback.

mod common;

use common::*;
use futures::{AsyncReadExt, AsyncWriteExt};
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::net::{TcpListener, TcpStream, UdpSocket};

#[test]
fn tcp_echo_100_connections_by_100_messages() {
    let rt = rt(2);
    let total = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        volt::spawn(echo_server(listener));
        echo_clients(addr, 100, 100).await
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
fn reactor_wakes_an_idle_runtime() {
    // Every worker parked (one blocked in the reactor); a datagram from a plain thread must
    // reach the waiting task, each time. (How fast is a latency, measured by the
    // benchmarks; the bound below only turns a lost wake into a failure.)
    let rt = rt(2);
    let sock = rt.block_on(async { UdpSocket::bind("127.0.0.1:0").await.unwrap() });
    let addr = sock.local_addr().unwrap();
    let sock = Arc::new(sock);
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let events_before = rt.handle().telemetry().snapshot().io_events;
    for i in 0..21u8 {
        let s = sock.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let mut buf = [0u8; 8];
            let (n, _) = s.recv_from(&mut buf).await.unwrap();
            let _ = tx.send(buf[..n].to_vec());
        });
        assert!(wait_until(Duration::from_secs(30), || rt.handle().telemetry().snapshot().num_parked == 2));
        sender.send_to(&[i], addr).unwrap();
        let got = rx.recv_timeout(Duration::from_secs(30)).expect("the datagram never woke the idle runtime");
        assert_eq!(got, [i]);
    }
    assert!(rt.handle().telemetry().snapshot().io_events > events_before, "the reactor reported no events");
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
    // At least 50 rounds however slow the machine is; more while time allows.
    while rounds < 50 || (Instant::now() < deadline && rounds < 2_000) {
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
        // Only a lost wake (a round that never ends) fails this.
        assert!(t.elapsed() < Duration::from_secs(30), "round {rounds} took {:?}", t.elapsed());
        rounds += 1;
    }
    assert!(rounds > 50, "only {rounds} rounds ran");
}

/// A read into an empty buffer returns `Ok(0)` at once, from a peer that sends nothing,
/// through the stream and its split halves (it used to wait for the socket to become
/// readable: for good, from a silent peer). Bounded, so a wait fails the test.
#[test]
fn a_read_into_an_empty_buffer_returns_at_once() {
    let rt = rt(2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
        let (mut client, _silent_peer) = (client.unwrap(), accepted.unwrap().0);
        let bound = Duration::from_secs(60);
        let n = volt::time::timeout(bound, client.read(&mut [])).await.expect("no wait for the socket");
        assert_eq!(n.unwrap(), 0);
        let (mut r, _w) = TcpStream::split(&mut client);
        assert_eq!(volt::time::timeout(bound, r.read(&mut [])).await.expect("no wait").unwrap(), 0);
        let (mut r, _w) = client.into_split();
        assert_eq!(volt::time::timeout(bound, r.read(&mut [])).await.expect("no wait").unwrap(), 0);
    });
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
        // Several addresses, none free: the port in use is the error, before or after an
        // address this host does not have (TEST-NET-1: the bind fails, nothing is
        // contacted), as `localhost:P` on a host without IPv6 could give.
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let busy = taken.local_addr().unwrap();
        let absent: std::net::SocketAddr = "192.0.2.1:0".parse().unwrap();
        for addrs in [[busy, absent], [absent, busy]] {
            let e = TcpListener::bind(&addrs[..]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse, "{addrs:?}: {e}");
        }
        let busy = u.local_addr().unwrap();
        for addrs in [[busy, absent], [absent, busy]] {
            let e = UdpSocket::bind(&addrs[..]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse, "{addrs:?}: {e}");
        }
    });
    // Outside a runtime: an error, not a panic.
    let e = futures::executor::block_on(TcpListener::bind("127.0.0.1:0")).unwrap_err();
    assert!(e.to_string().contains("inside a Volt runtime"), "{e}");
}

#[test]
fn a_stream_used_after_its_runtime_shut_down_returns_an_error() {
    let rt = rt(2);
    let (mut client, server) = rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (c, s)
    });
    drop(rt);
    let t = Instant::now();
    let mut buf = [0u8; 4];
    // A non-blocking attempt still does what the kernel can do without a reactor (as
    // Tokio's): the peer's bytes are read, and one that would wait fails with the error.
    server.try_write(b"late").unwrap();
    let n = wait_for_bytes(&client, 4);
    assert_eq!(client.try_read(&mut buf[..n]).unwrap(), 4);
    assert_eq!(&buf, b"late");
    let e = client.try_read(&mut buf).unwrap_err();
    assert!(volt::runtime::is_rt_shutdown_err(&e), "{e:?}");
    let e = futures::executor::block_on(client.read(&mut buf)).unwrap_err();
    assert!(e.to_string().contains("shut down"), "{e}");
    assert!(volt::runtime::is_rt_shutdown_err(&e), "{e:?}");
    let e = futures::executor::block_on(client.write_all(b"x")).unwrap_err();
    assert!(e.to_string().contains("shut down"), "{e}");
    assert!(volt::runtime::is_rt_shutdown_err(&e), "{e:?}");
    // Returned, not hung (an error at once is the property; the bound is only a backstop).
    assert!(t.elapsed() < Duration::from_secs(30));
}

/// Waits (10 s at most) until `n` bytes are queued on `s`, with a peek that leaves the
/// stream's readiness alone; returns `n`.
fn wait_for_bytes(s: &TcpStream, n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; n];
    loop {
        // SAFETY: `recv(2)` with `MSG_PEEK` into a buffer of `n` bytes it owns.
        let got = unsafe {
            libc::recv(
                std::os::fd::AsRawFd::as_raw_fd(s),
                buf.as_mut_ptr().cast(),
                n,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if got >= n as isize {
            return n;
        }
        assert!(Instant::now() < deadline, "the peer's bytes never arrived");
        std::thread::yield_now();
    }
}

/// Tokio's example for `is_rt_shutdown_err`: a listener whose runtime was dropped,
/// used from another runtime, fails with the shutdown error; other errors are not it.
#[test]
fn a_listener_of_a_dropped_runtime_fails_with_the_shutdown_error() {
    let rt1 = rt(1);
    let rt2 = rt(1);
    let listener = rt1.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    drop(rt1);
    let e = rt2.block_on(listener.accept()).map(|_| ()).unwrap_err();
    assert!(volt::runtime::is_rt_shutdown_err(&e), "{e:?}");
    // A refused connection, an error with the same kind and text, and one with no inner
    // error are not shutdown errors.
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let refused = rt2.block_on(TcpStream::connect(addr)).map(|_| ()).unwrap_err();
    assert!(!volt::runtime::is_rt_shutdown_err(&refused), "{refused:?}");
    let lookalike = std::io::Error::other(e.to_string());
    assert!(!volt::runtime::is_rt_shutdown_err(&lookalike));
    assert!(!volt::runtime::is_rt_shutdown_err(&std::io::Error::from(ErrorKind::Other)));
}

/// The types Tokio's own tests hold unwind safe are, on Volt too: code that wraps a
/// runtime, a handle, a socket or a channel in `catch_unwind` compiles unchanged.
#[test]
fn runtime_handles_sockets_and_channels_are_unwind_safe_as_tokios() {
    fn unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
    unwind_safe::<volt::Runtime>();
    unwind_safe::<volt::runtime::Handle>();
    unwind_safe::<volt::task::JoinHandle<()>>();
    unwind_safe::<volt::task::AbortHandle>();
    unwind_safe::<volt::sync::Notify>();
    unwind_safe::<TcpListener>();
    unwind_safe::<TcpStream>();
    unwind_safe::<UdpSocket>();
    unwind_safe::<volt::net::TcpSocket>();
    unwind_safe::<volt::net::UnixListener>();
    unwind_safe::<volt::net::UnixStream>();
    unwind_safe::<volt::net::UnixDatagram>();
    // Whatever the message type is (a `Cell` is neither).
    type C = std::cell::Cell<u8>;
    unwind_safe::<volt::sync::mpsc::Sender<C>>();
    unwind_safe::<volt::sync::mpsc::Receiver<C>>();
    unwind_safe::<volt::sync::mpsc::UnboundedSender<C>>();
    unwind_safe::<volt::sync::mpsc::UnboundedReceiver<C>>();
    unwind_safe::<volt::sync::mpsc::WeakSender<C>>();
    // And so the pattern compiles and runs: a panic inside `block_on`, caught, leaves
    // the runtime usable.
    let rt = rt(1);
    let (tx, mut rx) = volt::sync::mpsc::unbounded_channel();
    let r = std::panic::catch_unwind(|| {
        rt.block_on(async {
            tx.send(1).unwrap();
            panic!("inside block_on");
        })
    });
    assert!(r.is_err());
    tx.send(2).unwrap();
    assert_eq!(rt.block_on(async { (rx.recv().await, rx.recv().await) }), (Some(1), Some(2)));
}

/// `IP_TOS`, `IPV6_TCLASS` and `SO_BINDTODEVICE` on TCP and UDP sockets, as Tokio's
/// `TcpSocket` and `UdpSocket` have them: each reads back what was set, a bound socket
/// still carries traffic over its interface, and bad values are errors.
#[test]
fn tos_traffic_class_and_device_options_round_trip() {
    let rt = rt(1);
    rt.block_on(async {
        let s = volt::net::TcpSocket::new_v4().unwrap();
        s.set_tos_v4(0x10).unwrap();
        assert_eq!(s.tos_v4().unwrap(), 0x10);
        #[allow(deprecated)]
        {
            s.set_tos(0x08).unwrap();
            assert_eq!(s.tos().unwrap(), 0x08);
        }
        assert_eq!(s.set_tos_v4(u32::MAX).unwrap_err().kind(), ErrorKind::InvalidInput);
        let s6 = volt::net::TcpSocket::new_v6().unwrap();
        s6.set_tclass_v6(0x20).unwrap();
        assert_eq!(s6.tclass_v6().unwrap(), 0x20);
        assert_eq!(s.device().unwrap(), None);
        assert_eq!(s.bind_device(Some(&[b'x'; 16])).unwrap_err().kind(), ErrorKind::InvalidInput);
        // Binding needs CAP_NET_RAW (these tests run as root; elsewhere it is refused).
        let bound = match s.bind_device(Some(b"lo")) {
            Ok(()) => true,
            Err(e) if e.kind() == ErrorKind::PermissionDenied => false,
            Err(e) => panic!("bind_device(lo): {e}"),
        };
        if bound {
            assert_eq!(s.device().unwrap().as_deref(), Some(&b"lo"[..]));
        }
        // Bound to the loopback interface, it still listens and talks on loopback.
        s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = s.listen(8).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        client.write_all(b"tos").await.unwrap();
        let mut buf = [0u8; 3];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"tos");

        let u = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        u.set_tos_v4(0x04).unwrap();
        assert_eq!(u.tos_v4().unwrap(), 0x04);
        if bound {
            u.bind_device(Some(b"lo")).unwrap();
            assert_eq!(u.device().unwrap().as_deref(), Some(&b"lo"[..]));
        }
        let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        u.send_to(b"dgram", peer.local_addr().unwrap()).await.unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = peer.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"dgram"[..], u.local_addr().unwrap()));
        u.bind_device(None).unwrap();
        assert_eq!(u.device().unwrap(), None, "unbound again");
        let u6 = UdpSocket::bind("[::1]:0").await;
        if let Ok(u6) = u6 {
            u6.set_tclass_v6(0x28).unwrap();
            assert_eq!(u6.tclass_v6().unwrap(), 0x28);
        }
    });
}

/// `fcntl(F_GETFL)` of `fd`: `Some(flags)` if it is an open descriptor.
fn fd_flags(fd: std::os::fd::RawFd) -> Option<libc::c_int> {
    // SAFETY: `F_GETFL` only reads the descriptor's flags; an invalid fd is an error, not UB.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    (flags != -1).then_some(flags)
}

#[test]
fn raw_fds_are_open_non_blocking_sockets() {
    use std::os::fd::{AsFd, AsRawFd};
    let rt = rt(2);
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        let u = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let fds = [l.as_raw_fd(), c.as_raw_fd(), s.as_raw_fd(), u.as_raw_fd()];
        for fd in fds {
            let flags = fd_flags(fd).unwrap_or_else(|| panic!("fd {fd} is not open"));
            assert_ne!(flags & libc::O_NONBLOCK, 0, "fd {fd} is in blocking mode");
        }
        let mut sorted = fds.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 4, "four sockets, four fds: {fds:?}");
        // `AsFd` borrows the same descriptor.
        assert_eq!(c.as_fd().as_raw_fd(), c.as_raw_fd());
        assert_eq!(u.as_fd().as_raw_fd(), u.as_raw_fd());
        // The fd is the socket itself: the kernel reports the same local port.
        let dup = c.as_fd().try_clone_to_owned().unwrap();
        let std_dup = std::net::TcpStream::from(dup);
        assert_eq!(std_dup.local_addr().unwrap(), c.local_addr().unwrap());
    });
}

#[test]
fn poll_accept_works_through_poll_fn() {
    let rt = rt(2);
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let client = volt::spawn(async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(b"via poll_accept").await.unwrap();
            c.local_addr().unwrap()
        });
        let (mut s, peer) = std::future::poll_fn(|cx| l.poll_accept(cx)).await.unwrap();
        let mut buf = [0u8; 15];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"via poll_accept");
        assert_eq!(peer, client.await.unwrap());
        assert_eq!(s.peer_addr().unwrap(), peer);
    });
}

#[test]
fn udp_poll_and_try_methods_round_trip_datagrams() {
    use std::future::poll_fn;
    let rt = rt(2);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let mut buf = [0u8; 64];
        // Nothing there yet.
        assert_eq!(b.try_recv_from(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
        for i in 0..20u8 {
            poll_fn(|cx| a.poll_send_ready(cx)).await.unwrap();
            let n = poll_fn(|cx| a.poll_send_to(cx, &[i; 5], ba)).await.unwrap();
            assert_eq!(n, 5);
            poll_fn(|cx| b.poll_recv_ready(cx)).await.unwrap();
            let (n, from) = poll_fn(|cx| b.poll_recv_from_into(cx, &mut buf)).await.unwrap();
            assert_eq!((&buf[..n], from), (&[i; 5][..], aa));
        }
        // peek_from leaves the datagram for the next receive.
        a.send_to(b"peeked", ba).await.unwrap();
        let (n, from) = b.peek_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"peeked"[..], aa));
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"peeked"[..], aa));
        // try_send_to, then readable + try_recv_from (readable may wake spuriously).
        b.writable().await.unwrap();
        assert_eq!(b.try_send_to(b"try", aa).unwrap(), 3);
        let (n, from) = loop {
            a.readable().await.unwrap();
            match a.try_recv_from(&mut buf) {
                Ok(r) => break r,
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!((&buf[..n], from), (&b"try"[..], ba));
        // Connected: poll_send / poll_recv, try_send / try_recv.
        a.connect(ba).await.unwrap();
        b.connect(aa).await.unwrap();
        assert_eq!(poll_fn(|cx| a.poll_send(cx, b"connected")).await.unwrap(), 9);
        let n = poll_fn(|cx| b.poll_recv_into(cx, &mut buf)).await.unwrap();
        assert_eq!(&buf[..n], b"connected");
        assert_eq!(b.try_send(b"back").unwrap(), 4);
        let n = loop {
            a.readable().await.unwrap();
            match a.try_recv(&mut buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(&buf[..n], b"back");
        a.set_ttl(33).unwrap();
        assert_eq!(a.ttl().unwrap(), 33);
        a.set_broadcast(true).unwrap();
        assert!(a.broadcast().unwrap());
    });
}

/// `SO_LINGER` counts whole seconds: a wait under a second is rounded up to one, not
/// down to zero, which would reset the connection on close and drop unsent data.
#[test]
#[allow(deprecated)] // `set_linger`, deprecated as Tokio's
fn tcp_linger_under_a_second_waits_instead_of_resetting() {
    let rt = rt(1);
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        c.set_linger(Some(Duration::from_millis(500))).unwrap();
        assert_eq!(c.linger().unwrap(), Some(Duration::from_secs(1)));
        c.set_linger(Some(Duration::from_millis(1500))).unwrap();
        assert_eq!(c.linger().unwrap(), Some(Duration::from_secs(2)));
        c.set_linger(Some(Duration::ZERO)).unwrap();
        assert_eq!(c.linger().unwrap(), Some(Duration::ZERO));
    });
}

#[test]
#[allow(deprecated)] // `set_linger`, deprecated as Tokio's
fn tcp_socket_options_round_trip() {
    let rt = rt(2);
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.set_ttl(42).unwrap();
        assert_eq!(l.ttl().unwrap(), 42);
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        c.set_nodelay(false).unwrap();
        assert!(!c.nodelay().unwrap());
        assert_eq!(c.linger().unwrap(), None);
        c.set_linger(Some(Duration::from_secs(3))).unwrap();
        assert_eq!(c.linger().unwrap(), Some(Duration::from_secs(3)));
        c.set_linger(None).unwrap();
        assert_eq!(c.linger().unwrap(), None);
        c.set_ttl(17).unwrap();
        assert_eq!(c.ttl().unwrap(), 17);
        // into_std hands over the same socket, out of the reactor.
        let mut std_c = c.into_std().unwrap();
        std_c.set_nonblocking(false).unwrap();
        std::io::Write::write_all(&mut std_c, b"from std").unwrap();
        let mut s = s;
        let mut buf = [0u8; 8];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"from std");
    });
}

/// A connected UDP socket whose peer is gone gets an ICMP "port unreachable", which the
/// reactor reports as an error on the socket. `recv` returns `ConnectionRefused` once;
/// after that the socket must wait for datagrams like any other. (The error bit used to
/// stay set after a read that found nothing, so the next `recv` looped on `WouldBlock`
/// inside one poll and held its worker for good.)
#[test]
fn a_udp_error_is_reported_once_and_the_socket_waits_again() {
    let rt = rt(1);
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let gone = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sock.connect(gone).await.unwrap();
        let mut buf = [0u8; 16];
        // Loopback answers at once; a few tries in case the first send's ICMP is late.
        let mut refused = false;
        for _ in 0..50 {
            sock.send(b"anyone?").await.unwrap();
            match volt::time::timeout(Duration::from_millis(100), sock.recv(&mut buf)).await {
                Ok(Err(e)) if e.kind() == ErrorKind::ConnectionRefused => {
                    refused = true;
                    break;
                }
                Ok(r) => panic!("nothing listens there, yet recv gave {r:?}"),
                Err(_) => {}
            }
        }
        // With nothing sent, the next recv waits (and so the timeout fires).
        let waited = volt::time::timeout(Duration::from_millis(50), sock.recv(&mut buf)).await.is_err();
        // And a datagram from a live peer still arrives.
        let live = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sock.connect(live.local_addr().unwrap()).await.unwrap();
        live.send_to(b"hello", sock.local_addr().unwrap()).await.unwrap();
        let n = volt::time::timeout(Duration::from_secs(10), sock.recv(&mut buf)).await;
        let _ = tx.send((refused, waited, n.map(|r| r.map(|n| buf[..n].to_vec()).ok())));
    });
    let Ok((refused, waited, got)) = rx.recv_timeout(Duration::from_secs(30)) else {
        // The worker is stuck in a poll: dropping the runtime would wait for it forever.
        std::mem::forget(rt);
        panic!("the socket's task never finished: its worker is stuck in one poll");
    };
    assert!(refused, "the peer's ICMP error never surfaced as ConnectionRefused");
    assert!(waited, "a recv with nothing sent returned instead of waiting");
    assert_eq!(got, Ok(Some(b"hello".to_vec())), "the live peer's datagram was not received");
}

/// A task looping on operations that are always ready (a UDP socket that can always
/// send, a sleep that has elapsed) still gives its only worker back: each poll may
/// complete a bounded number of them, then the task yields. Without that, the task
/// spawned later never runs, the loops never see its flag, and they run to their 30 s
/// cap.
#[test]
fn a_task_looping_on_ready_operations_lets_its_worker_run_others() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    let rt = rt(1);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    let cap = Duration::from_secs(30);
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = receiver.local_addr().unwrap();
    let sender = {
        let (stop, started) = (Arc::clone(&stop), Arc::clone(&started));
        rt.spawn(async move {
            let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let t0 = Instant::now();
            started.fetch_add(1, SeqCst);
            let mut sent = 0u64;
            while !stop.load(SeqCst) && t0.elapsed() < cap {
                // Loopback drops what a full receive buffer cannot hold; the send succeeds.
                let _ = sock.send_to(&[0u8; 64], target).await;
                sent += 1;
            }
            (sent, stop.load(SeqCst))
        })
    };
    let sleeper = {
        let (stop, started) = (Arc::clone(&stop), Arc::clone(&started));
        rt.spawn(async move {
            let t0 = Instant::now();
            started.fetch_add(1, SeqCst);
            let mut slept = 0u64;
            while !stop.load(SeqCst) && t0.elapsed() < cap {
                volt::time::sleep(Duration::ZERO).await;
                slept += 1;
            }
            (slept, stop.load(SeqCst))
        })
    };
    // Both loops are running (one of them holds the worker) before the task that needs it.
    assert!(wait_until(cap, || started.load(SeqCst) == 2), "the second loop never started");
    let flag = Arc::clone(&stop);
    rt.block_on(rt.spawn(async move { flag.store(true, SeqCst) })).unwrap();
    let (sent, sender_stopped) = rt.block_on(sender).unwrap();
    let (slept, sleeper_stopped) = rt.block_on(sleeper).unwrap();
    assert!(sender_stopped && sleeper_stopped, "the loops ran to their cap: the other task never got the worker");
    assert!(sent > 0 && slept > 0, "sent {sent}, slept {slept}");
    drop(rt);
}

/// Polls `fut` once (it must be waiting), says so on `polled`, then finishes it: so a
/// test knows every task's waker is registered before it makes the event.
async fn register_then_finish<F: std::future::Future>(
    fut: F,
    polled: volt::sync::mpsc::UnboundedSender<()>,
) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut first = true;
    std::future::poll_fn(|cx| {
        let r = fut.as_mut().poll(cx);
        if first {
            first = false;
            assert!(r.is_pending(), "nothing has happened yet");
            polled.send(()).unwrap();
        }
        r
    })
    .await
}

/// Tasks accepting on one shared listener all get a connection: an event wakes every
/// waiter, as Tokio's does, not only the last one to wait (which left the others asleep
/// for good). On both flavors.
#[test]
fn every_task_accepting_on_one_listener_is_woken() {
    const N: usize = 20;
    for rt in [rt(2), volt::runtime::Builder::new_current_thread().build().unwrap()] {
        rt.block_on(async {
            let listener = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
            let addr = listener.local_addr().unwrap();
            let (polled_tx, mut polled) = volt::sync::mpsc::unbounded_channel();
            let tasks: Vec<_> = (0..N)
                .map(|_| {
                    let (listener, polled_tx) = (listener.clone(), polled_tx.clone());
                    volt::spawn(async move { register_then_finish(listener.accept(), polled_tx).await.map(|(s, _)| s) })
                })
                .collect();
            for _ in 0..N {
                polled.recv().await.unwrap();
            }
            let mut clients = Vec::new();
            for _ in 0..N {
                clients.push(TcpStream::connect(addr).await.unwrap());
            }
            for t in tasks {
                let accepted = volt::time::timeout(Duration::from_secs(10), t).await;
                accepted.expect("a task accepting on the shared listener was never woken").unwrap().unwrap();
            }
        });
    }
}

/// The same for tasks receiving on one shared UDP socket, and for tasks waiting for a
/// stream to become readable: each is woken, and the datagrams are shared out whole.
#[test]
fn every_task_waiting_on_one_socket_is_woken() {
    const N: usize = 16;
    let rt = rt(2);
    rt.block_on(async {
        let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let addr = sock.local_addr().unwrap();
        let (polled_tx, mut polled) = volt::sync::mpsc::unbounded_channel();
        let tasks: Vec<_> = (0..N)
            .map(|_| {
                let (sock, polled_tx) = (sock.clone(), polled_tx.clone());
                volt::spawn(async move {
                    let mut buf = [0u8; 8];
                    let (n, _) = register_then_finish(sock.recv_from(&mut buf), polled_tx).await.unwrap();
                    buf[..n].to_vec()
                })
            })
            .collect();
        for _ in 0..N {
            polled.recv().await.unwrap();
        }
        let sender = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for i in 0..N as u8 {
            sender.send_to(&[i; 3], addr).await.unwrap();
        }
        let mut got = Vec::new();
        for t in tasks {
            let d = volt::time::timeout(Duration::from_secs(10), t).await;
            got.push(d.expect("a task receiving on the shared socket was never woken").unwrap());
        }
        got.sort();
        assert_eq!(got, (0..N as u8).map(|i| vec![i; 3]).collect::<Vec<_>>());

        // Two tasks waiting for one stream to be readable.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let server = Arc::new(server);
        // An accepted stream starts out assumed readable: find out it is not.
        let mut buf = [0u8; 4];
        assert_eq!(server.try_read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (server, polled_tx) = (server.clone(), polled_tx.clone());
                volt::spawn(async move { register_then_finish(server.readable(), polled_tx).await.unwrap() })
            })
            .collect();
        for _ in 0..2 {
            polled.recv().await.unwrap();
        }
        client.write_all(b"ping").await.unwrap();
        for w in waiters {
            volt::time::timeout(Duration::from_secs(10), w).await.expect("a reader was never woken").unwrap();
        }
    });
}

mod async_fd {
    use super::*;
    use std::io::{self, Read, Write};
    use std::os::unix::io::AsRawFd;
    use std::os::unix::net::UnixStream as StdUnix;
    use volt::io::unix::AsyncFd;
    use volt::io::{Interest, Ready};

    /// Whether `s` holds bytes to read, without taking them.
    fn has_bytes(s: &StdUnix) -> bool {
        let mut b = 0u8;
        // SAFETY: a one-byte peek into a live byte, on a descriptor `s` keeps open.
        let n =
            unsafe { libc::recv(s.as_raw_fd(), (&mut b as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        n > 0
    }

    fn pair() -> (StdUnix, StdUnix) {
        let (a, b) = StdUnix::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    /// A read that answers `WouldBlock` clears the readiness through the guard, and the
    /// next wait waits for the peer's next bytes; a task reading that way gets every
    /// byte, on both flavors.
    #[test]
    fn reads_wait_for_new_bytes_after_would_block() {
        for rt in [rt(2), volt::runtime::Builder::new_current_thread().build().unwrap()] {
            rt.block_on(async {
                let (a, mut b) = pair();
                // SAFETY: `a` owns its descriptor until the `AsyncFd` is dropped.
                let a = Arc::new(unsafe { AsyncFd::register(a) }.unwrap());
                let reader = {
                    let a = a.clone();
                    volt::spawn(async move {
                        let mut got = Vec::new();
                        let mut buf = [0u8; 64];
                        while got.len() < 300 {
                            let mut guard = a.readable().await.unwrap();
                            match guard.try_io(|fd| fd.get_ref().read(&mut buf)) {
                                Ok(n) => got.extend_from_slice(&buf[..n.unwrap()]),
                                Err(_would_block) => assert!(guard.ready().is_empty(), "cleared"),
                            }
                        }
                        got
                    })
                };
                for chunk in 0..3u8 {
                    b.write_all(&[chunk; 100]).unwrap();
                    volt::time::sleep(Duration::from_millis(5)).await;
                }
                let got = volt::time::timeout(Duration::from_secs(10), reader).await.expect("the reader hung").unwrap();
                let want: Vec<u8> = (0..3u8).flat_map(|c| [c; 100]).collect();
                assert_eq!(got, want);
                // Nothing more to read: a read answers `WouldBlock`, which clears the
                // readiness, and then `try_io` on the `AsyncFd` does not even try.
                let r = a.try_io(Interest::READABLE, |mut s| s.read(&mut [0u8; 8]));
                assert_eq!(r.unwrap_err().kind(), ErrorKind::WouldBlock);
                let mut called = false;
                let r = a.try_io(Interest::READABLE, |_| {
                    called = true;
                    Ok(())
                });
                assert_eq!(r.unwrap_err().kind(), ErrorKind::WouldBlock);
                assert!(!called);
            });
        }
    }

    /// A descriptor owner that may move between threads but not be shared (`Send`, not
    /// `Sync`): the waits that take `&mut self` are `Send` over it, so a spawned task can
    /// hold one across an await, as with Tokio.
    struct SendOnly {
        s: StdUnix,
        reads: std::cell::Cell<usize>,
    }

    impl std::os::unix::io::AsRawFd for SendOnly {
        fn as_raw_fd(&self) -> std::os::unix::io::RawFd {
            self.s.as_raw_fd()
        }
    }

    #[test]
    fn readable_mut_and_writable_mut_wait_in_a_spawned_task_over_a_type_that_is_not_sync() {
        let rt = rt(2);
        let (a, mut b) = pair();
        let got = rt.block_on(async move {
            let task = volt::spawn(async move {
                // SAFETY: `SendOnly` owns its descriptor until the `AsyncFd` is dropped.
                let mut fd = unsafe { AsyncFd::register(SendOnly { s: a, reads: std::cell::Cell::new(0) }) }.unwrap();
                let mut w = fd.writable_mut().await.unwrap();
                w.get_inner_mut().s.write_all(b"ping").unwrap();
                drop(w);
                let mut got = Vec::new();
                while got.len() < 4 {
                    let mut guard = fd.readable_mut().await.unwrap();
                    let mut buf = [0u8; 8];
                    match guard.get_inner_mut().s.read(&mut buf) {
                        Ok(n) => {
                            got.extend_from_slice(&buf[..n]);
                            let inner = guard.get_inner_mut();
                            inner.reads.set(inner.reads.get() + 1);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => guard.clear_ready(),
                        Err(e) => panic!("{e}"),
                    }
                }
                (got, fd.get_ref().reads.get())
            });
            // The peer answers what the task wrote.
            let mut four = [0u8; 4];
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut n = 0;
            while n < 4 {
                match b.read(&mut four[n..]) {
                    Ok(k) => n += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        assert!(Instant::now() < deadline, "the task's write never arrived");
                        volt::time::sleep(Duration::from_millis(1)).await;
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(&four, b"ping");
            b.write_all(b"pong").unwrap();
            volt::time::timeout(Duration::from_secs(10), task).await.expect("the task never read the answer").unwrap()
        });
        assert_eq!(got.0, b"pong");
        assert!(got.1 >= 1);
    }

    /// `ready` answers everything of the interest it found; `clear_ready_matching` clears
    /// only what it names; several tasks waiting on one `AsyncFd` are all woken; and
    /// `into_inner` takes the descriptor off the reactor (it can be registered again).
    #[test]
    fn ready_sets_clearing_waiters_and_into_inner() {
        let rt = rt(2);
        // Each wait on the reactor is bounded, and a stuck one names itself (this test
        // hung once in a CI run, at a step not known then).
        let step = Arc::new(std::sync::Mutex::new("start"));
        let at = |s: &'static str| *step.lock().unwrap() = s;
        let done = rt.block_on(async {
            volt::time::timeout(Duration::from_secs(30), async {
                let (a, mut b) = pair();
                // SAFETY: as above.
                let mut a = unsafe { AsyncFd::register(a) }.unwrap();
                b.write_all(b"x").unwrap();
                at("the first wait for readable and writable");
                let mut guard = a.ready_mut(Interest::READABLE | Interest::WRITABLE).await.unwrap();
                let deadline = Instant::now() + Duration::from_secs(10);
                while guard.ready() != Ready::READABLE | Ready::WRITABLE {
                    // The read and write events may come in two reactor turns.
                    guard.retain_ready();
                    drop(guard);
                    assert!(Instant::now() < deadline, "never both readable and writable");
                    volt::task::yield_now().await;
                    guard = a.ready_mut(Interest::READABLE | Interest::WRITABLE).await.unwrap();
                }
                guard.clear_ready_matching(Ready::READABLE);
                assert_eq!(guard.ready(), Ready::WRITABLE);
                guard.clear_ready_matching(Ready::WRITABLE);
                assert_eq!(guard.ready(), Ready::EMPTY);
                let mut one = [0u8; 1];
                assert_eq!(guard.get_inner_mut().read(&mut one).unwrap(), 1);
                drop(guard);

                let a = Arc::new(a);
                let (polled_tx, mut polled) = volt::sync::mpsc::unbounded_channel();
                // A waiter may find the source readable at once: epoll can report an edge
                // twice (a wake that lands while the kernel hands over the first report is
                // queued again), and the second report, dispatched after the read above
                // cleared the first, says readable with nothing to read. Readiness is a hint,
                // for Tokio as here; a waiter does what a user does, looks, clears it and
                // waits again, so its first poll still ends waiting.
                let waiters: Vec<_> = (0..4)
                    .map(|_| {
                        let (a, polled_tx) = (a.clone(), polled_tx.clone());
                        let readable = async move {
                            loop {
                                let mut guard = a.readable().await?;
                                if has_bytes(a.get_ref()) {
                                    return io::Result::Ok(guard.ready());
                                }
                                guard.clear_ready();
                            }
                        };
                        volt::spawn(register_then_finish(readable, polled_tx))
                    })
                    .collect();
                at("the four waiters' first polls");
                for _ in 0..4 {
                    polled.recv().await.unwrap();
                }
                at("the four waiters' wake");
                b.write_all(b"y").unwrap();
                for w in waiters {
                    let ready =
                        volt::time::timeout(Duration::from_secs(10), w).await.expect("a waiter was never woken");
                    assert!(ready.unwrap().unwrap().is_readable());
                }

                let a = Arc::try_unwrap(a).unwrap().into_inner();
                // SAFETY: as above.
                let mut again = unsafe { AsyncFd::register(a) }.expect("the descriptor was deregistered");
                let mut buf = [0u8; 1];
                at("the read after registering again");
                let n = again.async_io_mut(Interest::READABLE, |s| s.read(&mut buf)).await.unwrap();
                assert_eq!(&buf[..n], b"y");
            })
            .await
        });
        assert!(done.is_ok(), "stuck at {}", step.lock().unwrap());
    }

    /// `Interest::PRIORITY`: out-of-band TCP data is reported as priority readiness to
    /// a descriptor registered for it.
    #[test]
    fn priority_data_is_reported() {
        let rt = rt(2);
        rt.block_on(async {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (server, _) = listener.accept().unwrap();
            server.set_nonblocking(true).unwrap();
            // SAFETY: `server` owns its descriptor until the `AsyncFd` is dropped.
            let server =
                unsafe { AsyncFd::register_with_interest(server, Interest::READABLE | Interest::PRIORITY) }.unwrap();
            let urgent = 7u8;
            // SAFETY: `send(2)` of one byte from a live byte, on an open socket.
            let sent = unsafe {
                libc::send(std::os::fd::AsRawFd::as_raw_fd(&client), (&raw const urgent).cast(), 1, libc::MSG_OOB)
            };
            assert_eq!(sent, 1);
            let guard = volt::time::timeout(Duration::from_secs(10), server.ready(Interest::PRIORITY))
                .await
                .expect("priority data was never reported")
                .unwrap();
            assert!(guard.ready().is_priority(), "{:?}", guard.ready());
        });
    }

    /// Bad input: outside a runtime the registration fails and gives the value back; after
    /// the runtime shut down a wait fails with the shutdown error instead of hanging.
    #[test]
    fn registration_errors_give_the_value_back_and_shutdown_ends_waits() {
        let (a, _b) = pair();
        // SAFETY: as above.
        let err = unsafe { AsyncFd::register(a) }.unwrap_err();
        let (a, cause) = err.into_parts();
        assert!(cause.to_string().contains("inside a Volt runtime"), "{cause}");
        let rt = rt(1);
        // SAFETY: as above.
        let a = rt.block_on(async { unsafe { AsyncFd::register(a) } }).unwrap();
        drop(rt);
        let e = futures::executor::block_on(a.readable()).map(|_| ()).unwrap_err();
        assert!(volt::runtime::is_rt_shutdown_err(&e), "{e:?}");
    }
}

/// Tokio's socket methods Volt lacked, each used the way Tokio's tests use it.
mod tokio_api {
    use super::*;
    use futures::FutureExt;
    use volt::net::{UnixDatagram, UnixListener, UnixStream};

    /// `try_read_buf` and the `recv_buf` family fill a `BytesMut`'s or `Vec`'s spare room
    /// and grow it by what arrived, on every socket type that has them.
    #[test]
    #[cfg(feature = "io-util")]
    fn reads_into_a_buf_mut_grow_it_by_what_arrived() {
        let rt = rt(2);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            let payload: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            let writer = {
                let payload = payload.clone();
                volt::spawn(async move { client.write_all(&payload).await.unwrap() })
            };
            let mut got = bytes::BytesMut::with_capacity(1000);
            while got.len() < payload.len() {
                server.readable().await.unwrap();
                match server.try_read_buf(&mut got) {
                    Ok(n) => assert!(n > 0),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(&got[..], &payload[..]);
            writer.await.unwrap();

            let (a, b) = (UdpSocket::bind("127.0.0.1:0").await.unwrap(), UdpSocket::bind("127.0.0.1:0").await.unwrap());
            a.connect(b.local_addr().unwrap()).await.unwrap();
            b.connect(a.local_addr().unwrap()).await.unwrap();
            let mut v = Vec::with_capacity(64);
            a.send(b"one").await.unwrap();
            // Peeks leave the datagram where it is.
            let mut peeked = [0u8; 8];
            assert_eq!(b.peek(&mut peeked).await.unwrap(), 3);
            assert_eq!(b.try_peek(&mut peeked).unwrap(), 3);
            let mut rb = volt::io::ReadBuf::new(&mut peeked);
            std::future::poll_fn(|cx| b.poll_peek(cx, &mut rb)).await.unwrap();
            assert_eq!(rb.filled(), b"one");
            assert_eq!(b.recv_buf(&mut v).await.unwrap(), 3);
            a.send(b"two").await.unwrap();
            let (n, from) = b.recv_buf_from(&mut v).await.unwrap();
            assert_eq!((n, from), (3, a.local_addr().unwrap()));
            assert_eq!(v, b"onetwo");
            assert_eq!(b.try_recv_buf(&mut v).unwrap_err().kind(), ErrorKind::WouldBlock);
            assert_eq!(b.try_recv_buf_from(&mut v).unwrap_err().kind(), ErrorKind::WouldBlock);

            let (x, y) = UnixDatagram::pair().unwrap();
            let mut v = Vec::with_capacity(16);
            x.send(b"abc").await.unwrap();
            assert_eq!(y.recv_buf(&mut v).await.unwrap(), 3);
            x.send(b"de").await.unwrap();
            let (n, from) = y.recv_buf_from(&mut v).await.unwrap();
            assert!(from.is_unnamed());
            assert_eq!((n, &v[..]), (2, &b"abcde"[..]));

            let (mut s, t) = UnixStream::pair().unwrap();
            s.write_all(b"stream").await.unwrap();
            let mut v = Vec::new();
            t.readable().await.unwrap();
            assert_eq!(t.try_read_buf(&mut v).unwrap(), 6);
            assert_eq!(v, b"stream");
        });
    }

    /// A fresh Unix pair is writable at once and readable only once the peer writes
    /// (Tokio's `pair_starts_writable`); an abstract name (a path starting with a NUL
    /// byte, or `bind_addr`/`connect_addr`) binds and connects; `poll_send_to`; the
    /// `TryFrom` conversions from std; `worker_index`.
    #[test]
    fn unix_pairs_abstract_names_conversions_and_worker_index() {
        let rt = rt(2);
        rt.block_on(async {
            let (a, _b) = UnixStream::pair().unwrap();
            assert!(a.writable().now_or_never().is_some(), "a fresh pair is writable at once");
            assert!(a.readable().now_or_never().is_none(), "and not readable before the peer writes");
            let (c, _d) = UnixDatagram::pair().unwrap();
            assert!(c.writable().now_or_never().is_some());

            let name = format!("\0volt-test-{}", std::process::id());
            let listener = UnixListener::bind(&name).unwrap();
            let (accepted, client) = futures::join!(listener.accept(), UnixStream::connect(&name));
            let (_server, _) = accepted.unwrap();
            assert_eq!(listener.local_addr().unwrap().as_abstract_name(), Some(&name.as_bytes()[1..]));
            let local = client.unwrap().into_std().unwrap().peer_addr().unwrap();
            use std::os::linux::net::SocketAddrExt;
            assert_eq!(local.as_abstract_name(), Some(&name.as_bytes()[1..]));

            let addr = std::os::unix::net::SocketAddr::from_abstract_name(format!("volt-addr-{}", std::process::id()))
                .unwrap();
            let addr = volt::net::unix::SocketAddr::from(addr);
            let listener = UnixListener::bind_addr(&addr).unwrap();
            let (accepted, client) = futures::join!(listener.accept(), UnixStream::connect_addr(&addr));
            accepted.unwrap();
            client.unwrap();

            let dir = std::env::temp_dir().join(format!("volt-poll-send-to-{}", std::process::id()));
            let _ = std::fs::remove_file(&dir);
            let receiver = UnixDatagram::bind(&dir).unwrap();
            let sender = UnixDatagram::unbound().unwrap();
            let n = std::future::poll_fn(|cx| sender.poll_send_to(cx, b"hey", &dir)).await.unwrap();
            let mut buf = [0u8; 8];
            assert_eq!(receiver.recv(&mut buf).await.unwrap(), n);
            std::fs::remove_file(&dir).unwrap();

            let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = std_listener.local_addr().unwrap();
            let listener = TcpListener::try_from(std_listener).unwrap();
            let std_stream = std::net::TcpStream::connect(addr).unwrap();
            let stream = TcpStream::try_from(std_stream).unwrap();
            let (accepted, _) = listener.accept().await.unwrap();
            assert_eq!(accepted.peer_addr().unwrap(), stream.local_addr().unwrap());
            stream.set_zero_linger().unwrap();
            assert_eq!(stream.linger().unwrap(), Some(Duration::ZERO));
            stream.set_quickack(true).unwrap();
            assert!(stream.quickack().unwrap());
            UdpSocket::try_from(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();

            // `block_on`'s thread of a multi-thread runtime is no worker; a task's is.
            assert_eq!(volt::runtime::worker_index(), None);
            let index = volt::spawn(async { volt::runtime::worker_index() }).await.unwrap();
            assert!(matches!(index, Some(0 | 1)), "{index:?}");
            let blocking = volt::task::spawn_blocking(volt::runtime::worker_index).await.unwrap();
            assert_eq!(blocking, None);
        });
        assert_eq!(volt::runtime::worker_index(), None);
        let current = volt::runtime::Builder::new_current_thread().build().unwrap();
        assert_eq!(current.block_on(async { volt::runtime::worker_index() }), Some(0));
    }

    /// `UnixSocket`: a stream socket binds, listens and connects; a datagram socket binds
    /// and becomes a `UnixDatagram`; each refuses the other's calls with a clear error.
    #[test]
    fn unix_sockets_set_up_before_use() {
        let rt = rt(2);
        rt.block_on(async {
            let dir = std::env::temp_dir().join(format!("volt-unix-socket-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("s.sock");
            let _ = std::fs::remove_file(&path);
            let server = volt::net::UnixSocket::new_stream().unwrap();
            server.bind(&path).unwrap();
            let listener = server.listen(16).unwrap();
            let client = volt::net::UnixSocket::new_stream().unwrap();
            let (accepted, connected) = futures::join!(listener.accept(), client.connect(&path));
            let (mut a, _) = accepted.unwrap();
            let mut c = connected.unwrap();
            c.write_all(b"hi").await.unwrap();
            let mut buf = [0u8; 2];
            a.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"hi");

            let d1 = volt::net::UnixSocket::new_datagram().unwrap();
            let p1 = dir.join("d1.sock");
            let _ = std::fs::remove_file(&p1);
            d1.bind(&p1).unwrap();
            let d1 = d1.datagram().unwrap();
            let d2 = volt::net::UnixSocket::new_datagram().unwrap().datagram().unwrap();
            d2.send_to(b"dgram", &p1).await.unwrap();
            let mut buf = [0u8; 8];
            assert_eq!(d1.recv(&mut buf).await.unwrap(), 5);

            let e = volt::net::UnixSocket::new_datagram().unwrap().listen(1).unwrap_err();
            assert!(e.to_string().contains("listen cannot be called on a datagram socket"), "{e}");
            let e = volt::net::UnixSocket::new_stream().unwrap().datagram().unwrap_err();
            assert!(e.to_string().contains("datagram cannot be called on a stream socket"), "{e}");
            let e = volt::net::UnixSocket::new_stream().unwrap().bind("x".repeat(200)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            std::fs::remove_dir_all(&dir).unwrap();
        });
    }

    /// `net::unix::pipe`: an anonymous pipe carries bytes to end of file; a named FIFO
    /// opens as a receiver, refuses a sender with no reader (`ENXIO`) unless
    /// `read_write`, and a file that is no FIFO is refused.
    #[test]
    #[cfg(feature = "io-util")]
    fn pipes_and_fifos() {
        use volt::io::{AsyncReadExt as _, AsyncWriteExt as _};
        use volt::net::unix::pipe;
        let rt = rt(2);
        rt.block_on(async {
            let (mut tx, mut rx) = pipe::pipe().unwrap();
            let writer = volt::spawn(async move {
                // More than a pipe holds (64 KiB): the writer waits for the reader.
                for chunk in 0..32u8 {
                    tx.write_all(&[chunk; 8192]).await.unwrap();
                }
            });
            let mut got = Vec::new();
            rx.read_to_end(&mut got).await.unwrap();
            writer.await.unwrap();
            assert_eq!(got.len(), 32 * 8192);
            assert!(got.chunks(8192).enumerate().all(|(i, c)| c.iter().all(|&b| b == i as u8)));

            let dir = std::env::temp_dir().join(format!("volt-fifo-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let fifo = dir.join("f");
            let _ = std::fs::remove_file(&fifo);
            let cpath = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: `mkfifo(3)` with a NUL-terminated path that lives for the call.
            assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o644) }, 0);
            let e = pipe::OpenOptions::new().open_sender(&fifo).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENXIO), "{e}");
            let rx = pipe::OpenOptions::new().open_receiver(&fifo).unwrap();
            let tx = pipe::OpenOptions::new().open_sender(&fifo).unwrap();
            tx.writable().await.unwrap();
            assert_eq!(tx.try_write(b"fifo").unwrap(), 4);
            let mut buf = Vec::with_capacity(16);
            rx.readable().await.unwrap();
            assert_eq!(rx.try_read_buf(&mut buf).unwrap(), 4);
            assert_eq!(buf, b"fifo");
            drop((tx, rx));
            // Read and write: opens with no reader.
            pipe::OpenOptions::new().read_write(true).open_sender(&fifo).unwrap();

            let plain = dir.join("plain");
            std::fs::write(&plain, b"x").unwrap();
            let e = pipe::OpenOptions::new().open_receiver(&plain).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            let e = pipe::Receiver::from_file(std::fs::File::open(&plain).unwrap()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            // A FIFO end open for reading is no sender.
            let (_tx2, rx2) = pipe::pipe().unwrap();
            let fd = rx2.into_blocking_fd().unwrap();
            let e = pipe::Sender::from_owned_fd(fd).unwrap_err();
            assert!(e.to_string().contains("not open for writing"), "{e}");
            std::fs::remove_dir_all(&dir).unwrap();
        });
    }

    /// Tokio's builder checks: a zero event count panics with its message.
    #[test]
    #[should_panic(expected = "max_io_events_per_busy_tick must be non-zero")]
    fn a_zero_busy_tick_event_count_panics() {
        volt::runtime::Builder::new_multi_thread().max_io_events_per_busy_tick(0);
    }
}
