//! The ceiling an io_uring driver could reach on this machine, before one is built: two
//! minimal HTTP/1.1 keep-alive servers with no runtime, no hyper and no parsing beyond
//! finding each request's end, one with epoll readiness and one with io_uring
//! completions (in two forms), so that `runtime/benches/http.sh` can measure what the system calls
//! alone cost per request, next to Volt and Tokio (see `docs/io-uring.md`).
//!
//! ```text
//! VARIANTS="volt tokio ceiling-epoll ceiling-uring ceiling-uring-direct" bash runtime/benches/http.sh
//! cargo bench -p volt --bench io_ceiling -- --mode uring --workers 2 --addr 127.0.0.1:8080
//! ```
//!
//! Both are thread-per-core servers: each of `--workers` threads has a listener of its
//! own on the same port (`SO_REUSEPORT`, so the kernel spreads the connections over
//! them) and serves its connections alone, with no work stealing and nothing shared.
//! Every request gets the same 13-byte answer.
//!
//! * `epoll`: what a readiness runtime does at best. Edge-triggered `epoll_wait`; on a
//!   readable edge one `read` into a 4 KiB buffer (a second only if the first filled it),
//!   then one `write` of the answers; a write the socket does not take whole waits for
//!   the writable edge. Two system calls a request, and a share of an `epoll_wait`.
//! * `uring`: what a driver with a ring per worker could do. One ring per thread
//!   (`SINGLE_ISSUER | DEFER_TASKRUN`); a multishot `accept`; a multishot `recv` per
//!   connection into the thread's provided-buffer ring (512 buffers of 4 KiB, given back
//!   as soon as the request's end is found, so an idle connection holds none); a `send`
//!   per batch of answers from a buffer the connection owns until its completion. Every
//!   submission waits for the loop's one `io_uring_enter`, which also reaps whatever
//!   completed meanwhile.
//! * `uring-direct`: `uring` with direct descriptors. Accepted sockets live only in the
//!   ring's file table (never in the process's), so no operation looks a descriptor up;
//!   `TCP_NODELAY` and the close go through the ring too.
//!
//! It prints `listening on ADDR` once every thread has bound, and serves until killed.
//! Without `--mode` (as `cargo bench` runs every bench) it prints how to run it and exits.
//! These are measurements of the kernel's interfaces, not a server anyone should run:
//! there is no timeout, no limit and no error beyond closing the connection.

#[cfg(target_os = "linux")]
mod server {
    use std::io;
    use std::net::SocketAddrV4;

    /// The answer to every request.
    pub(crate) const ANSWER: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 13\r\n\r\nHello, world!";
    const READ_BUF: usize = 4096;

    /// Counts the ends of request heads (`\r\n\r\n`) in a byte stream cut anywhere. The
    /// load generator sends heads without bodies, one at a time or pipelined.
    #[derive(Default)]
    pub(crate) struct Heads {
        /// How many bytes of `\r\n\r\n` the stream ended with so far.
        matched: u8,
    }

    impl Heads {
        pub(crate) fn feed(&mut self, data: &[u8]) -> usize {
            const END: &[u8; 4] = b"\r\n\r\n";
            let mut done = 0;
            for &b in data {
                if b == END[self.matched as usize] {
                    self.matched += 1;
                    if self.matched == 4 {
                        done += 1;
                        self.matched = 0;
                    }
                } else {
                    self.matched = (b == b'\r') as u8;
                }
            }
            done
        }
    }

    fn check(r: libc::c_int, what: &str) -> io::Result<libc::c_int> {
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
        }
        Ok(r)
    }

    /// A non-blocking listener on `addr` that shares the port with the other threads'.
    fn listener(addr: SocketAddrV4) -> io::Result<libc::c_int> {
        // SAFETY: plain system calls on a descriptor this function owns; `sa` is a valid,
        // initialized `sockaddr_in` of the size passed, and `one` outlives each call.
        unsafe {
            let fd = check(
                libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0),
                "socket",
            )?;
            let one: libc::c_int = 1;
            let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
                check(libc::setsockopt(fd, libc::SOL_SOCKET, opt, (&raw const one).cast(), len), "setsockopt")?;
            }
            let sa = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: addr.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
                sin_zero: [0; 8],
            };
            let sa_len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            check(libc::bind(fd, (&raw const sa).cast(), sa_len), "bind")?;
            check(libc::listen(fd, 1024), "listen")?;
            Ok(fd)
        }
    }

    fn no_delay(fd: libc::c_int) {
        let one: libc::c_int = 1;
        // SAFETY: `fd` is an open socket and `one` outlives the call.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&raw const one).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }

    fn close(fd: libc::c_int) {
        // SAFETY: the caller owns `fd` and forgets it after this.
        unsafe { libc::close(fd) };
    }

    pub(crate) fn main() {
        let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
        let (mut mode, mut workers, mut addr) = (None, 2usize, "127.0.0.1:8080".to_string());
        while let Some(a) = args.next() {
            let v = args.next().unwrap_or_else(|| panic!("{a} needs a value"));
            match a.as_str() {
                "--mode" => mode = Some(v),
                "--workers" => workers = v.parse().expect("--workers N"),
                "--addr" => addr = v,
                other => {
                    panic!("unknown argument {other:?}: --mode epoll|uring|uring-direct, --workers N, --addr IP:PORT")
                }
            }
        }
        // A server runs until it is killed, so `cargo bench` running every bench must not
        // start one: without a mode, say how to run it and stop.
        let Some(mode) = mode else {
            eprintln!("io_ceiling serves HTTP until killed; run it through runtime/benches/http.sh, or with --mode epoll|uring|uring-direct");
            return;
        };
        let addr: SocketAddrV4 = addr.parse().expect("--addr takes an IPv4 address and a port");
        let run: fn(libc::c_int) -> io::Result<()> = match mode.as_str() {
            "epoll" => epoll::serve,
            "uring" => uring::serve,
            "uring-direct" => uring::serve_direct,
            other => panic!("unknown mode {other:?}: epoll, uring or uring-direct"),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..workers)
            .map(|_| {
                let (tx, mode) = (tx.clone(), mode.clone());
                std::thread::spawn(move || {
                    let fd = match listener(addr) {
                        Ok(fd) => fd,
                        Err(e) => return tx.send(Err(e)).unwrap(),
                    };
                    tx.send(Ok(())).unwrap();
                    if let Err(e) = run(fd) {
                        eprintln!("{mode} worker: {e}");
                        std::process::exit(1);
                    }
                })
            })
            .collect();
        for _ in 0..workers {
            if let Err(e) = rx.recv().unwrap() {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        println!("listening on {addr} ({mode}, {workers} threads)");
        for t in threads {
            let _ = t.join();
        }
    }

    mod epoll {
        use super::{check, close, no_delay, Heads, ANSWER, READ_BUF};
        use std::io;

        const LISTENER: u64 = u64::MAX;

        #[derive(Default)]
        struct Conn {
            heads: Heads,
            /// Answers the socket did not take yet.
            unsent: Vec<u8>,
        }

        fn errno() -> i32 {
            io::Error::last_os_error().raw_os_error().unwrap_or(0)
        }

        /// Write `out` (the connection's unsent bytes), keeping what the socket does not
        /// take. False: the peer is gone.
        fn flush(fd: libc::c_int, out: &mut Vec<u8>) -> bool {
            while !out.is_empty() {
                // SAFETY: `out` is valid for reads of its length.
                let n = unsafe { libc::write(fd, out.as_ptr().cast(), out.len()) };
                if n < 0 {
                    return errno() == libc::EAGAIN;
                }
                out.drain(..n as usize);
            }
            true
        }

        pub(crate) fn serve(lfd: libc::c_int) -> io::Result<()> {
            // SAFETY: a system call that takes no pointer.
            let ep = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1")?;
            let add = |fd: libc::c_int, events: u32, token: u64| {
                let mut ev = libc::epoll_event { events, u64: token };
                // SAFETY: `ev` is a valid event for the call; `ep` and `fd` are open.
                check(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) }, "epoll_ctl")
            };
            add(lfd, (libc::EPOLLIN | libc::EPOLLET) as u32, LISTENER)?;
            let mut conns: Vec<Option<Conn>> = Vec::new();
            let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
            let mut buf = vec![0u8; READ_BUF];
            let mut out = Vec::new();
            loop {
                // SAFETY: `events` is valid for writes of its length.
                let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
                if n < 0 {
                    if errno() == libc::EINTR {
                        continue;
                    }
                    return Err(io::Error::last_os_error());
                }
                for ev in &events[..n as usize] {
                    let token = ev.u64;
                    if token == LISTENER {
                        loop {
                            // SAFETY: a null address asks for none.
                            let fd = unsafe {
                                libc::accept4(
                                    lfd,
                                    std::ptr::null_mut(),
                                    std::ptr::null_mut(),
                                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                                )
                            };
                            if fd < 0 {
                                // A connection reset while queued is gone: take the next.
                                if errno() == libc::ECONNABORTED {
                                    continue;
                                }
                                break;
                            }
                            no_delay(fd);
                            let i = fd as usize;
                            if conns.len() <= i {
                                conns.resize_with(i + 1, || None);
                            }
                            conns[i] = Some(Conn::default());
                            let interest = libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET;
                            add(fd, interest as u32, fd as u64)?;
                        }
                        continue;
                    }
                    let fd = token as libc::c_int;
                    let Some(conn) = conns.get_mut(fd as usize).and_then(Option::as_mut) else { continue };
                    let mut alive = flush(fd, &mut conn.unsent);
                    while alive && ev.events & libc::EPOLLIN as u32 != 0 {
                        // SAFETY: `buf` is valid for writes of its length.
                        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                        if r <= 0 {
                            alive = r < 0 && errno() == libc::EAGAIN;
                            break;
                        }
                        let heads = conn.heads.feed(&buf[..r as usize]);
                        if heads > 0 {
                            out.clear();
                            for _ in 0..heads {
                                out.extend_from_slice(ANSWER);
                            }
                            if conn.unsent.is_empty() {
                                alive = flush(fd, &mut out);
                                conn.unsent.append(&mut out);
                            } else {
                                conn.unsent.append(&mut out);
                            }
                        }
                        // A short read took everything there was: the next edge says when
                        // more comes.
                        if (r as usize) < buf.len() {
                            break;
                        }
                    }
                    if !alive {
                        conns[fd as usize] = None;
                        // Closing the descriptor takes it out of the epoll set.
                        close(fd);
                    }
                }
            }
        }
    }

    mod uring {
        use super::{close, no_delay, Heads, ANSWER, READ_BUF};
        use io_uring::{cqueue, opcode, squeue, types, IoUring};
        use std::io;
        use std::sync::atomic::{AtomicU16, Ordering::Release};

        const BUFFERS: u16 = 512;
        const GROUP: u16 = 0;
        const ACCEPT: u64 = 1 << 32;
        const RECV: u64 = 2 << 32;
        const SEND: u64 = 3 << 32;
        const NODELAY: u64 = 4 << 32;
        const SHUTDOWN: u64 = 5 << 32;
        const CLOSE: u64 = 6 << 32;
        const KIND: u64 = 0xffff_ffff << 32;
        /// The ring's file table, with `--mode uring-direct`: one slot a connection.
        const FILES: u32 = 4096;

        #[derive(Default)]
        struct Conn {
            heads: Heads,
            /// The bytes of the send in flight; the kernel reads them until its completion,
            /// so nothing touches them meanwhile.
            sending: Vec<u8>,
            /// How much of `sending` the kernel has taken.
            sent: usize,
            in_flight: bool,
            /// Answers made while a send was in flight.
            queued: Vec<u8>,
            /// The multishot receive is armed.
            receiving: bool,
            /// The peer is gone or a send failed: nothing more is sent, and the connection
            /// is dropped once neither a receive nor a send is in flight.
            closing: bool,
        }

        impl Conn {
            /// Start sending what was queued, if nothing is in flight.
            fn start_send(&mut self, fd: libc::c_int, direct: bool) -> Option<squeue::Entry> {
                if self.in_flight || self.closing || self.queued.is_empty() {
                    return None;
                }
                std::mem::swap(&mut self.sending, &mut self.queued);
                self.queued.clear();
                self.sent = 0;
                self.in_flight = true;
                Some(send(fd, self, direct))
            }

            fn done(&self) -> bool {
                !self.receiving && !self.in_flight
            }
        }

        /// One entry of a provided-buffer ring, as the kernel reads it (`io_uring_buf`).
        /// The first entry's `resv` is the ring's tail, which the kernel reads at any time.
        #[repr(C)]
        struct BufEntry {
            addr: u64,
            len: u32,
            bid: u16,
            resv: u16,
        }

        /// The thread's provided buffers: a page-aligned ring of entries the kernel takes
        /// buffers from, and the buffers. Both are raw allocations the kernel reads and
        /// writes, so nothing here holds a reference over them but to bytes the kernel
        /// has handed back.
        struct Provided {
            entries: *mut BufEntry,
            entries_layout: std::alloc::Layout,
            bufs: *mut u8,
            bufs_layout: std::alloc::Layout,
            tail: u16,
        }

        impl Provided {
            fn new(ring: &IoUring) -> io::Result<Provided> {
                let entries_layout =
                    std::alloc::Layout::from_size_align(BUFFERS as usize * std::mem::size_of::<BufEntry>(), 4096)
                        .expect("a valid layout");
                let bufs_layout =
                    std::alloc::Layout::from_size_align(BUFFERS as usize * READ_BUF, 64).expect("a valid layout");
                // SAFETY: non-zero sizes.
                let (entries, bufs) =
                    unsafe { (std::alloc::alloc_zeroed(entries_layout), std::alloc::alloc_zeroed(bufs_layout)) };
                assert!(!entries.is_null() && !bufs.is_null(), "out of memory");
                let mut p = Provided { entries: entries.cast(), entries_layout, bufs, bufs_layout, tail: 0 };
                for bid in 0..BUFFERS {
                    p.give_back(bid);
                }
                p.publish();
                // SAFETY: the entries and buffers stay allocated, unmoved, while the ring
                // can use them: `serve_with` never returns once a receive is armed (an
                // error ends the process), and before that the ring, dropped first (see
                // `Thread`), takes no buffer.
                unsafe { ring.submitter().register_buf_ring_with_flags(p.entries as u64, BUFFERS, GROUP, 0)? };
                Ok(p)
            }

            /// Buffer `bid` is free again (seen by the kernel at the next `publish`).
            fn give_back(&mut self, bid: u16) {
                let i = (self.tail & (BUFFERS - 1)) as usize;
                // SAFETY: `i` is within the ring's `BUFFERS` entries, and the kernel reads
                // entry `i` only once the tail passes it, which `publish` does after this.
                // The fields are written through raw pointers, leaving `resv` alone: in
                // the first entry it is the tail, which the kernel may read meanwhile.
                unsafe {
                    let e = self.entries.add(i);
                    (&raw mut (*e).addr).write(self.bufs as u64 + bid as u64 * READ_BUF as u64);
                    (&raw mut (*e).len).write(READ_BUF as u32);
                    (&raw mut (*e).bid).write(bid);
                }
                self.tail = self.tail.wrapping_add(1);
            }

            fn publish(&self) {
                // SAFETY: the tail is the first entry's `resv`, shared with the kernel,
                // which reads it atomically; the release store publishes the entries
                // written before it.
                unsafe { (*(&raw mut (*self.entries).resv).cast::<AtomicU16>()).store(self.tail, Release) };
            }

            /// The first `len` bytes of buffer `bid`, which a receive's completion has just
            /// handed back.
            fn buf(&self, bid: u16, len: usize) -> &[u8] {
                assert!(bid < BUFFERS && len <= READ_BUF);
                // SAFETY: in bounds of the allocation (checked above); the kernel wrote
                // these bytes before posting the completion that named `bid`, and takes the
                // buffer again only after `give_back` and `publish`, which the caller does
                // once it is done with the slice.
                unsafe { std::slice::from_raw_parts(self.bufs.add(bid as usize * READ_BUF), len) }
            }
        }

        impl Drop for Provided {
            fn drop(&mut self) {
                // SAFETY: allocated in `new` with these layouts.
                unsafe {
                    std::alloc::dealloc(self.entries.cast(), self.entries_layout);
                    std::alloc::dealloc(self.bufs, self.bufs_layout);
                }
            }
        }

        fn push(ring: &mut IoUring, e: squeue::Entry) -> io::Result<()> {
            loop {
                // SAFETY: every entry pushed here points only at memory that outlives its
                // completion: a connection's `sending` buffer (not touched, nor the
                // connection dropped, until the send completes), the provided buffers (kept
                // for the process's life once a receive is armed), the static `ONE`, or
                // nothing at all.
                if unsafe { ring.submission().push(&e) }.is_ok() {
                    return Ok(());
                }
                ring.submit()?;
            }
        }

        /// An entry for socket `fd`: a descriptor, or with `direct` an index in the ring's
        /// file table. (The two target types share no type the builders can be given.)
        macro_rules! on_socket {
            ($fd:expr, $direct:expr, |$t:ident| $build:expr) => {
                if $direct {
                    let $t = types::Fixed($fd as u32);
                    $build
                } else {
                    let $t = types::Fd($fd);
                    $build
                }
            };
        }

        fn recv(fd: libc::c_int, direct: bool) -> squeue::Entry {
            on_socket!(fd, direct, |t| opcode::RecvMulti::new(t, GROUP).build()).user_data(RECV | fd as u64)
        }

        fn send(fd: libc::c_int, c: &Conn, direct: bool) -> squeue::Entry {
            let rest = &c.sending[c.sent..];
            let (p, n) = (rest.as_ptr(), rest.len() as u32);
            on_socket!(fd, direct, |t| opcode::Send::new(t, p, n).build()).user_data(SEND | fd as u64)
        }

        /// Shut both directions, which ends the armed receive.
        fn shutdown(fd: libc::c_int, direct: bool) -> squeue::Entry {
            on_socket!(fd, direct, |t| opcode::Shutdown::new(t, libc::SHUT_RDWR).build())
                .user_data(SHUTDOWN | fd as u64)
        }

        fn accept(lfd: libc::c_int, direct: bool) -> squeue::Entry {
            opcode::AcceptMulti::new(types::Fd(lfd)).allocate_file_index(direct).build().user_data(ACCEPT)
        }

        /// `TCP_NODELAY`'s value, read by the kernel when it runs a `SetSockOpt` entry.
        static ONE: libc::c_int = 1;

        /// The ring and the buffers it fills, dropped in that order (fields drop in
        /// declaration order).
        struct Thread {
            ring: IoUring,
            provided: Provided,
        }

        pub(crate) fn serve(lfd: libc::c_int) -> io::Result<()> {
            serve_with(lfd, false)
        }

        /// `serve` with direct descriptors: accepted sockets live only in the ring's file
        /// table, so no operation looks a descriptor up (`fdget`) or counts a reference.
        pub(crate) fn serve_direct(lfd: libc::c_int) -> io::Result<()> {
            serve_with(lfd, true)
        }

        fn serve_with(lfd: libc::c_int, direct: bool) -> io::Result<()> {
            let ring: IoUring =
                IoUring::builder().setup_single_issuer().setup_defer_taskrun().setup_coop_taskrun().build(1024)?;
            if direct {
                ring.submitter().register_files_sparse(FILES)?;
            }
            let provided = Provided::new(&ring)?;
            let mut t = Thread { ring, provided };
            let Err(e) = run(&mut t, lfd, direct);
            // Exit with the ring and every buffer it may still use alive: the kernel lets
            // go of them only when the ring's teardown has finished.
            eprintln!("io_uring worker: {e}");
            std::process::exit(1)
        }

        /// Serve until an error.
        fn run(t: &mut Thread, lfd: libc::c_int, direct: bool) -> io::Result<std::convert::Infallible> {
            let (ring, provided) = (&mut t.ring, &mut t.provided);
            let mut conns: Vec<Option<Box<Conn>>> = Vec::new();
            let mut cqes: Vec<cqueue::Entry> = Vec::with_capacity(1024);
            push(ring, accept(lfd, direct))?;
            loop {
                match ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EBUSY) => {}
                    Err(e) => return Err(e),
                }
                cqes.extend(ring.completion());
                let mut gave_back = false;
                for cqe in cqes.drain(..) {
                    let (kind, fd, res) = (cqe.user_data() & KIND, cqe.user_data() as u32 as libc::c_int, cqe.result());
                    match kind {
                        // Either would change what is measured (Nagle's delay) or leak a
                        // socket: stop the server.
                        NODELAY | CLOSE if res < 0 => {
                            let what = if kind == NODELAY { "TCP_NODELAY" } else { "close" };
                            return Err(io::Error::other(format!("{what}: {}", io::Error::from_raw_os_error(-res))));
                        }
                        // A peer already gone makes a shutdown fail; the receive ends anyway.
                        NODELAY | CLOSE | SHUTDOWN => continue,
                        _ => {}
                    }
                    if kind == ACCEPT {
                        if res >= 0 {
                            if direct {
                                let e = opcode::SetSockOpt::new(
                                    types::Fixed(res as u32),
                                    libc::IPPROTO_TCP as u32,
                                    libc::TCP_NODELAY as u32,
                                    (&raw const ONE).cast(),
                                    std::mem::size_of::<libc::c_int>() as u32,
                                )
                                .build()
                                .user_data(NODELAY | res as u64);
                                push(ring, e)?;
                            } else {
                                no_delay(res);
                            }
                            let i = res as usize;
                            if conns.len() <= i {
                                conns.resize_with(i + 1, || None);
                            }
                            conns[i] = Some(Box::new(Conn { receiving: true, ..Conn::default() }));
                            push(ring, recv(res, direct))?;
                        }
                        if !cqueue::more(cqe.flags()) {
                            push(ring, accept(lfd, direct))?;
                        }
                        continue;
                    }
                    let Some(c) = conns.get_mut(fd as usize).and_then(Option::as_mut) else { continue };
                    if kind == RECV {
                        if let Some(bid) = cqueue::buffer_select(cqe.flags()) {
                            if res > 0 && !c.closing {
                                for _ in 0..c.heads.feed(provided.buf(bid, res as usize)) {
                                    c.queued.extend_from_slice(ANSWER);
                                }
                            }
                            provided.give_back(bid);
                            gave_back = true;
                        }
                        if !cqueue::more(cqe.flags()) {
                            if res > 0 || res == -libc::ENOBUFS {
                                // The receive stopped but the stream goes on (with no free
                                // buffer: the ones given back above are there by the next
                                // submission).
                                push(ring, recv(fd, direct))?;
                            } else {
                                // The end of the stream, or an error.
                                c.receiving = false;
                                c.closing = true;
                            }
                        }
                    } else if kind == SEND {
                        if res < 0 {
                            // Answer nothing more, and end the receive, which would
                            // otherwise keep the connection for as long as the peer
                            // writes.
                            c.closing = true;
                            if c.receiving {
                                push(ring, shutdown(fd, direct))?;
                            }
                        } else {
                            c.sent += res as usize;
                        }
                        if !c.closing && c.sent < c.sending.len() {
                            let e = send(fd, c, direct);
                            push(ring, e)?;
                            continue;
                        }
                        c.in_flight = false;
                    }
                    if let Some(e) = c.start_send(fd, direct) {
                        push(ring, e)?;
                    }
                    if c.closing && c.done() {
                        conns[fd as usize] = None;
                        if direct {
                            push(
                                ring,
                                opcode::Close::new(types::Fixed(fd as u32)).build().user_data(CLOSE | fd as u64),
                            )?;
                        } else {
                            close(fd);
                        }
                    }
                }
                if gave_back {
                    provided.publish();
                }
            }
        }
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    server::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("io_ceiling measures Linux interfaces only");
}
