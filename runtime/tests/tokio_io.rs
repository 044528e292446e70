//! Volt's `TcpStream` under Tokio's I/O traits (feature `tokio-io`): tokio-util codecs,
//! `tokio::io::copy`, split halves, `peek`, `try_read` and many short reads, over real
//! loopback sockets. Every test is bounded by a generous timeout so a lost wake fails it
//! instead of hanging it; none asserts how long anything took.

mod common;

use common::rt;
use futures::{SinkExt, StreamExt};
use std::future::Future;
use std::io::ErrorKind;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::codec::{Framed, LinesCodec};
use volt::net::{TcpListener, TcpStream};

const MIB: usize = 1 << 20;

/// Fail (rather than hang) if `f` does not finish within a minute.
async fn bounded<F: Future>(f: F) -> F::Output {
    volt::time::timeout(Duration::from_secs(60), f).await.expect("the test did not finish within its bound")
}

/// `len` bytes that differ from their neighbours, so a lost or reordered chunk shows.
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A connected pair: (client, server).
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
    (client.unwrap(), accepted.unwrap().0)
}

/// Echo every line back, upper-cased, until the peer closes.
async fn lines_echo_server(stream: TcpStream) {
    let mut framed = Framed::new(stream, LinesCodec::new());
    while let Some(line) = framed.next().await {
        framed.send(line.unwrap().to_uppercase()).await.unwrap();
    }
}

/// Send 200 lines and check each echo.
async fn lines_client<S>(stream: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut framed = Framed::new(stream, LinesCodec::new());
    for i in 0..200 {
        framed.send(format!("line {i} of the lines test")).await.unwrap();
        let back = framed.next().await.expect("echo").unwrap();
        assert_eq!(back, format!("LINE {i} OF THE LINES TEST"));
    }
}

#[test]
fn framed_lines_codec_echoes_between_volt_streams() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = volt::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            lines_echo_server(s).await;
        });
        lines_client(TcpStream::connect(addr).await.unwrap()).await;
        server.abort();
    }));
}

#[test]
fn framed_lines_codec_talks_to_a_tokio_peer_both_ways() {
    let tokio_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let rt = rt(2);

    // A Tokio server, a Volt client.
    let tokio_addr = tokio_rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let mut framed = Framed::new(s, LinesCodec::new());
            while let Some(line) = framed.next().await {
                framed.send(line.unwrap().to_uppercase()).await.unwrap();
            }
        });
        addr
    });
    rt.block_on(bounded(async move { lines_client(TcpStream::connect(tokio_addr).await.unwrap()).await }));

    // A Volt server, a Tokio client.
    let volt_addr = rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        volt::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            lines_echo_server(s).await;
        });
        addr
    });
    tokio_rt.block_on(async move {
        tokio::time::timeout(Duration::from_secs(60), async {
            lines_client(tokio::net::TcpStream::connect(volt_addr).await.unwrap()).await
        })
        .await
        .expect("the Tokio client did not finish within its bound")
    });
}

#[test]
fn copy_and_read_to_end_of_one_mib_are_byte_exact() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (mut client, mut server) = pair().await;
        let sent = pattern(MIB, 1);
        let echo = volt::spawn(async move {
            // Echo everything back with `tokio::io::copy`, then end the stream.
            let (mut r, mut w) = server.split();
            let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
            n
        });
        let (mut rd, mut wr) = client.split();
        let reader = async {
            let mut got = Vec::new();
            rd.read_to_end(&mut got).await.unwrap();
            got
        };
        let writer = async {
            let mut src = &sent[..];
            tokio::io::copy(&mut src, &mut wr).await.unwrap();
            wr.shutdown().await.unwrap();
        };
        let (got, ()) = futures::join!(reader, writer);
        assert_eq!(echo.await.unwrap(), MIB as u64);
        assert_eq!(got.len(), MIB);
        assert!(got == sent, "the echoed MiB differs from what was sent");
    }));
}

#[test]
fn vectored_writes_arrive_whole_and_in_order() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (mut client, mut server) = pair().await;
        assert!(tokio::io::AsyncWrite::is_write_vectored(&client));
        let parts: [&[u8]; 3] = [b"head|", b"body|", b"tail"];
        let mut sent = 0;
        let total: usize = parts.iter().map(|p| p.len()).sum();
        while sent < total {
            // Skip what was written already.
            let mut skip = sent;
            let slices: Vec<std::io::IoSlice<'_>> = parts
                .iter()
                .filter_map(|p| {
                    if skip >= p.len() {
                        skip -= p.len();
                        None
                    } else {
                        let s = std::io::IoSlice::new(&p[skip..]);
                        skip = 0;
                        Some(s)
                    }
                })
                .collect();
            sent += client.write_vectored(&slices).await.unwrap();
        }
        AsyncWriteExt::shutdown(&mut client).await.unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"head|body|tail");
    }));
}

/// Read all of `r` into a vector.
async fn read_all(mut r: impl tokio::io::AsyncRead + Unpin) -> Vec<u8> {
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    got
}

/// Write `data` in uneven pieces, then shut the writing side down.
async fn write_all_then_shutdown(mut w: impl tokio::io::AsyncWrite + Unpin, data: Vec<u8>) {
    for chunk in data.chunks(12_345) {
        w.write_all(chunk).await.unwrap();
    }
    w.shutdown().await.unwrap();
}

#[test]
fn into_split_halves_carry_one_mib_each_way_from_separate_tasks() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (client, server) = pair().await;
        let (c_read, c_write) = client.into_split();
        let (s_read, s_write) = server.into_split();
        let (up, down) = (pattern(MIB, 2), pattern(MIB, 3));
        // Four tasks, free to run on either worker: each half is driven by its own task.
        let tasks = [
            volt::spawn(write_all_then_shutdown(c_write, up.clone())),
            volt::spawn(write_all_then_shutdown(s_write, down.clone())),
        ];
        let c_got = volt::spawn(read_all(c_read));
        let s_got = volt::spawn(read_all(s_read));
        for t in tasks {
            t.await.unwrap();
        }
        assert!(s_got.await.unwrap() == up, "client to server: bytes differ");
        assert!(c_got.await.unwrap() == down, "server to client: bytes differ");
    }));
}

#[test]
fn borrowed_split_halves_carry_one_mib_each_way_concurrently() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (client, server) = pair().await;
        let (up, down) = (pattern(MIB, 4), pattern(MIB, 5));
        let side = |mut s: TcpStream, out: Vec<u8>| async move {
            let (r, w) = s.split();
            let (got, ()) = futures::join!(read_all(r), write_all_then_shutdown(w, out));
            got
        };
        // One side in a spawned task, the other here, so the two run on separate workers
        // whenever the scheduler lets them.
        let server_side = volt::spawn(side(server, down.clone()));
        let c_got = side(client, up.clone()).await;
        assert!(server_side.await.unwrap() == up, "client to server: bytes differ");
        assert!(c_got == down, "server to client: bytes differ");
    }));
}

#[test]
fn reunite_takes_only_halves_of_the_same_stream() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (a, mut a_peer) = pair().await;
        let (b, _b_peer) = pair().await;
        let (a_read, a_write) = a.into_split();
        let (b_read, b_write) = b.into_split();
        let err = a_read.reunite(b_write).unwrap_err();
        assert!(err.to_string().contains("not from the same socket"), "{err}");
        let volt::net::ReuniteError(a_read, b_write) = err;
        let mut a = a_read.reunite(a_write).expect("halves of the same stream");
        let _b = b_write.reunite(b_read).expect("halves of the same stream, either way round");
        // Reuniting did not shut the writing side down: the stream still works both ways.
        a.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        a_peer.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        a_peer.write_all(b"pong").await.unwrap();
        a.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }));
}

#[test]
fn dropping_the_owned_write_half_sends_a_fin() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (client, mut server) = pair().await;
        let (mut read, write) = client.into_split();
        drop(write);
        // The peer reads end of stream ...
        let mut got = Vec::new();
        assert_eq!(server.read_to_end(&mut got).await.unwrap(), 0);
        // ... while the read half still receives.
        server.write_all(b"after the FIN").await.unwrap();
        let mut buf = [0u8; 13];
        read.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"after the FIN");
        // `forget` drops a write half without the shutdown.
        let (client, mut server) = pair().await;
        let (read, write) = client.into_split();
        write.forget();
        server.write_all(b"x").await.unwrap();
        let mut one = [0u8; 1];
        read.peek(&mut one).await.unwrap();
        assert_eq!(server.try_read(&mut one).unwrap_err().kind(), ErrorKind::WouldBlock, "no FIN arrived");
    }));
}

/// `AsyncWriteExt::shutdown` sends a FIN after what was written, keeps the read side
/// open, and a later write is an error rather than a hang.
#[test]
fn shutdown_of_the_write_side_ends_the_peers_reads_and_keeps_the_other_way_open() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (mut client, mut server) = pair().await;
        client.write_all(b"last words").await.unwrap();
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"last words");
        server.write_all(b"reply").await.unwrap();
        let mut reply = [0u8; 5];
        client.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"reply");
        assert!(client.write_all(b"more").await.is_err(), "a write after shutting writes down");
    }));
}

#[test]
fn peek_does_not_consume() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (mut client, mut server) = pair().await;
        client.write_all(b"hello, peek").await.unwrap();
        let mut peeked = [0u8; 64];
        let n = server.peek(&mut peeked).await.unwrap();
        assert!(n > 0);
        // Peeking again sees the same bytes (at least as many).
        let n2 = server.peek(&mut peeked).await.unwrap();
        assert!(n2 >= n);
        let mut read = [0u8; 11];
        server.read_exact(&mut read).await.unwrap();
        assert_eq!(&read, b"hello, peek");
        assert_eq!(&peeked[..n2], &read[..n2], "the read returned what peek showed");
    }));
}

#[test]
fn try_read_is_would_block_until_readable_says_data_came() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (client, server) = pair().await;
        let mut buf = [0u8; 32];
        assert_eq!(server.try_read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
        client.writable().await.unwrap();
        assert_eq!(client.try_write(b"ready now").unwrap(), 9);
        // `readable` may wake spuriously; `try_read` then says so again.
        let n = loop {
            server.readable().await.unwrap();
            match server.try_read(&mut buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(&buf[..n], &b"ready now"[..n]);
        // Vectored forms too.
        let (a, b) = (b"abc".as_slice(), b"def".as_slice());
        client.try_write_vectored(&[std::io::IoSlice::new(a), std::io::IoSlice::new(b)]).unwrap();
        let mut got = Vec::from(&buf[..n]);
        while got.len() < 15 {
            server.readable().await.unwrap();
            let (mut x, mut y) = ([0u8; 4], [0u8; 16]);
            match server.try_read_vectored(&mut [std::io::IoSliceMut::new(&mut x), std::io::IoSliceMut::new(&mut y)]) {
                Ok(k) => got.extend(x.iter().chain(y.iter()).take(k)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, b"ready nowabcdef");
    }));
}

/// A read shorter than its buffer clears the read readiness, so the next read waits for
/// the reactor instead of trying a `recv` that would most likely say `EAGAIN`. Seen
/// from a task on the only worker, which does not yield between its steps, so no reactor
/// pass runs among them: after a short read, bytes that arrive are not taken for ready
/// (a stream that kept its readiness would answer `Ready`), and the reactor's next pass
/// wakes the read that waits for them: nothing is lost.
#[test]
fn a_short_read_clears_the_read_readiness_until_the_reactor_sees_more() {
    let rt = rt(1);
    let checked = rt.block_on(rt.spawn(bounded(async {
        let (mut client, mut server) = pair().await;
        client.write_all(b"0123456789").await.unwrap();
        let mut buf = [0u8; 100];
        let mut got = 0;
        while got < 10 {
            got += server.read(&mut buf[got..]).await.unwrap();
        }
        assert_eq!(&buf[..10], b"0123456789");
        // The last read was short (at most 10 of 90+ bytes). Loopback delivers at once.
        assert_eq!(client.try_write(b"abcdefghij").unwrap(), 10);
        let ready = std::future::poll_fn(|cx| std::task::Poll::Ready(server.poll_read_ready(cx).is_ready())).await;
        assert!(!ready, "a short read left the stream marked readable");
        let mut more = [0u8; 100];
        let n = server.read(&mut more).await.unwrap();
        assert_eq!(&more[..n], &b"abcdefghij"[..n]);
        n
    })));
    assert!(checked.unwrap() > 0);
}

/// A read shorter than its buffer clears the read readiness. A regression check that this
/// never drops a wake: 10,000 small writes in bursts of 20, each write followed by a yield
/// so they arrive spread out (some while the reader is between its read and the clear),
/// read by a large buffer, so nearly every read is short. The writer waits for the
/// reader's count after each burst before it goes on: a wake lost at the end of a burst
/// leaves the reader waiting for bytes that are already there, and the test fails on its
/// bound instead of being rescued by the next burst. Every byte must arrive, in order.
#[test]
fn many_small_messages_in_a_row_all_arrive() {
    const BURSTS: usize = 500;
    const PER_BURST: usize = 20;
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (client, mut server) = pair().await;
        client.set_nodelay(true).unwrap();
        let expected: Vec<u8> = (0..BURSTS * PER_BURST).flat_map(|i| message(i).into_bytes()).collect();
        let writer = volt::spawn(async move {
            let mut client = client;
            let mut sent = 0u64;
            for burst in 0..BURSTS {
                for k in 0..PER_BURST {
                    let m = message(burst * PER_BURST + k);
                    client.write_all(m.as_bytes()).await.unwrap();
                    sent += m.len() as u64;
                    volt::task::yield_now().await;
                }
                let mut ack = [0u8; 8];
                client.read_exact(&mut ack).await.unwrap();
                assert_eq!(u64::from_le_bytes(ack), sent, "the reader's count after burst {burst}");
            }
            AsyncWriteExt::shutdown(&mut client).await.unwrap();
        });
        let mut got = Vec::with_capacity(expected.len());
        let mut buf = vec![0u8; 64 * 1024];
        let mut round = 0usize;
        let mut burst_end = 0;
        for burst in 0..BURSTS {
            burst_end += (0..PER_BURST).map(|k| message(burst * PER_BURST + k).len()).sum::<usize>();
            while got.len() < burst_end {
                // Tokio's trait (the uninitialized-buffer path) on even rounds,
                // futures-io's on odd ones: both go through the short-read clear.
                let n = if round % 2 == 0 {
                    AsyncReadExt::read(&mut server, &mut buf).await.unwrap()
                } else {
                    futures::AsyncReadExt::read(&mut server, &mut buf).await.unwrap()
                };
                round += 1;
                assert_ne!(n, 0, "end of stream in burst {burst}");
                got.extend_from_slice(&buf[..n]);
            }
            server.write_all(&(got.len() as u64).to_le_bytes()).await.unwrap();
        }
        assert_eq!(AsyncReadExt::read(&mut server, &mut buf).await.unwrap(), 0, "end of stream after the last burst");
        writer.await.unwrap();
        assert_eq!(got.len(), expected.len(), "bytes lost or duplicated");
        assert!(got == expected, "bytes reordered");
        assert!(round >= BURSTS, "{round} reads");
    }));
}

fn message(i: usize) -> String {
    format!("m{i};")
}

#[test]
fn read_buf_fills_uninitialized_capacity() {
    let rt = rt(2);
    rt.block_on(bounded(async {
        let (mut client, mut server) = pair().await;
        let sent = pattern(100_000, 6);
        let w = {
            let sent = sent.clone();
            volt::spawn(async move {
                client.write_all(&sent).await.unwrap();
                AsyncWriteExt::shutdown(&mut client).await.unwrap();
            })
        };
        // `read_buf` into a Vec's spare capacity: memory that was never initialized.
        let mut got: Vec<u8> = Vec::with_capacity(1024);
        loop {
            if got.capacity() == got.len() {
                got.reserve(4096);
            }
            if server.read_buf(&mut got).await.unwrap() == 0 {
                break;
            }
        }
        w.await.unwrap();
        assert!(got == sent, "bytes differ");
    }));
}

/// The UDP and Unix datagram poll functions have Tokio's signatures (a `ReadBuf` filled,
/// the sender returned), so code written against Tokio's compiles and gets every byte.
#[test]
fn datagram_poll_functions_fill_a_read_buf_as_tokio_does() {
    use std::future::poll_fn;
    use tokio::io::ReadBuf;
    let rt = rt(2);
    rt.block_on(async {
        let a = volt::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = volt::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.send_to(b"peeked", b.local_addr().unwrap()).await.unwrap();
        let mut storage = [0u8; 64];
        let mut buf = ReadBuf::new(&mut storage);
        let from = poll_fn(|cx| b.poll_peek_from(cx, &mut buf)).await.unwrap();
        assert_eq!((buf.filled(), from), (&b"peeked"[..], a.local_addr().unwrap()));
        let mut buf = ReadBuf::new(&mut storage);
        let from = poll_fn(|cx| b.poll_recv_from(cx, &mut buf)).await.unwrap();
        assert_eq!((buf.filled(), from), (&b"peeked"[..], a.local_addr().unwrap()));
        b.connect(a.local_addr().unwrap()).await.unwrap();
        a.send_to(b"connected", b.local_addr().unwrap()).await.unwrap();
        let mut buf = ReadBuf::new(&mut storage);
        poll_fn(|cx| b.poll_recv(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"connected");

        let (x, y) = volt::net::UnixDatagram::pair().unwrap();
        x.send(b"unix").await.unwrap();
        let mut buf = ReadBuf::new(&mut storage);
        poll_fn(|cx| y.poll_recv(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"unix");
        x.send(b"again").await.unwrap();
        let mut buf = ReadBuf::new(&mut storage);
        poll_fn(|cx| y.poll_recv_from(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"again");
    });
}

/// Runs `f` in a task on a two-worker runtime and waits up to 10 s for it to finish: a
/// task that never yields fails the test instead of hanging it (the stuck runtime is
/// leaked, as dropping it would wait for that worker).
fn finishes<F: Future<Output = ()> + Send + 'static>(what: &str, f: F) {
    let rt = volt::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        f.await;
        let _ = tx.send(());
    });
    if rx.recv_timeout(Duration::from_secs(10)).is_err() {
        std::mem::forget(rt);
        panic!("{what}: the task never yielded");
    }
}

/// Tokio's own cases (`duplex_is_cooperative`, `copy_is_cooperative`,
/// `copy_buf_is_cooperative`): a loop on an in-memory pipe, or of copies out of a byte
/// slice, beside a branch that only needs the task to yield once. With Tokio's pipes and
/// copies, which spend Tokio's budget, the loop never yielded on Volt and held its worker
/// for good; Volt's spend Volt's, so the loop is refused once the budget is spent, the
/// other branch runs, and the task ends.
#[test]
fn a_loop_on_a_duplex_yields() {
    use volt::io::{AsyncReadExt, AsyncWriteExt};
    finishes("duplex", async {
        let (mut a, mut b) = volt::io::duplex(8 * 1024);
        tokio::select! {
            biased;
            _ = async {
                loop {
                    a.write_all(&[3u8; 4096]).await.unwrap();
                    let mut buf = [0u8; 4096];
                    let n = b.read(&mut buf).await.unwrap();
                    assert!(n > 0 && buf[..n].iter().all(|&x| x == 3));
                }
            } => {}
            _ = volt::task::yield_now() => {}
        }
    });
}

#[test]
fn a_loop_on_a_simplex_yields() {
    use volt::io::{AsyncReadExt, AsyncWriteExt};
    finishes("simplex", async {
        let (mut r, mut w) = volt::io::simplex(1024);
        tokio::select! {
            biased;
            _ = async {
                loop {
                    w.write_all(b"ping").await.unwrap();
                    let mut buf = [0u8; 4];
                    r.read_exact(&mut buf).await.unwrap();
                    assert_eq!(&buf, b"ping");
                }
            } => {}
            _ = volt::task::yield_now() => {}
        }
    });
}

#[test]
fn a_loop_of_copies_yields() {
    finishes("copy", async {
        tokio::select! {
            biased;
            _ = async {
                loop {
                    let (mut from, mut to): (&[u8], Vec<u8>) = (b"hello", Vec::new());
                    assert_eq!(volt::io::copy(&mut from, &mut to).await.unwrap(), 5);
                    assert_eq!(to, b"hello");
                }
            } => {}
            _ = volt::task::yield_now() => {}
        }
    });
}

#[test]
fn a_loop_of_buffered_copies_yields() {
    finishes("copy_buf", async {
        tokio::select! {
            biased;
            _ = async {
                loop {
                    let (mut from, mut to): (&[u8], Vec<u8>) = (b"hello", Vec::new());
                    assert_eq!(volt::io::copy_buf(&mut from, &mut to).await.unwrap(), 5);
                }
            } => {}
            _ = volt::task::yield_now() => {}
        }
    });
}

#[test]
fn a_loop_of_two_way_copies_yields() {
    use volt::io::AsyncWriteExt;
    finishes("copy_bidirectional", async {
        tokio::select! {
            biased;
            _ = async {
                loop {
                    // Each pair's far ends have written what they will and shut down, so
                    // each copy ends at once; over and over, the loop is all ready work.
                    let (mut a, mut a_far) = volt::io::duplex(64);
                    let (mut b, mut b_far) = volt::io::duplex(64);
                    a_far.write_all(b"to b").await.unwrap();
                    a_far.shutdown().await.unwrap();
                    b_far.write_all(b"to a").await.unwrap();
                    b_far.shutdown().await.unwrap();
                    assert_eq!(volt::io::copy_bidirectional(&mut a, &mut b).await.unwrap(), (4, 4));
                }
            } => {}
            _ = volt::task::yield_now() => {}
        }
    });
}

/// The copies count each read once: over Volt's sockets, which spend the budget
/// themselves, a copy still moves all its bytes, and over a pipe whose reader is refused
/// for a spent budget mid-copy nothing is lost.
#[test]
fn copies_move_every_byte_through_refusals() {
    use volt::io::{AsyncReadExt, AsyncWriteExt};
    finishes("copy of 4 MiB through a duplex", async {
        let (mut w, mut r) = volt::io::duplex(1024);
        let writer = volt::spawn(async move {
            let chunk: Vec<u8> = (0..=255u8).collect();
            for _ in 0..(4 * MIB / 256) {
                w.write_all(&chunk).await.unwrap();
            }
        });
        let mut out = Vec::new();
        let n = volt::io::copy(&mut r, &mut out).await.unwrap();
        writer.await.unwrap();
        assert_eq!(n as usize, 4 * MIB);
        assert!(out.chunks(256).all(|c| c.iter().enumerate().all(|(i, &x)| x == i as u8)));
    });
    finishes("copy_bidirectional over TCP", async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = volt::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&vec![7u8; MIB]).await.unwrap();
            s.shutdown().await.unwrap();
            let mut back = Vec::new();
            s.read_to_end(&mut back).await.unwrap();
            back
        });
        let (mut tcp, _) = listener.accept().await.unwrap();
        let (mut near, mut far) = volt::io::duplex(4096);
        let echo = volt::spawn(async move {
            let (mut r, mut w) = volt::io::split(&mut far);
            volt::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let (up, down) = volt::io::copy_bidirectional(&mut tcp, &mut near).await.unwrap();
        echo.await.unwrap();
        let back = client.await.unwrap();
        assert_eq!((up as usize, down as usize, back.len()), (MIB, MIB, MIB));
        assert!(back.iter().all(|&x| x == 7));
    });
}

/// A task looping on an always-ready reader or writer (`empty`, `repeat`, `sink`) yields
/// when its budget is spent, so a `timeout` around the loop fires: Tokio's own versions
/// spend Tokio's budget, which never runs out on Volt, and such a task held its worker
/// for good. Bounded: a task that never yields fails the test in 10 s rather than hang it.
#[test]
fn a_timeout_fires_around_a_loop_on_an_always_ready_reader_or_writer() {
    use volt::io::{AsyncReadExt, AsyncWriteExt};
    let rt = volt::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let ms = Duration::from_millis(1);
        let mut b = [0u8; 16];
        let empty = volt::time::timeout(ms, async {
            let mut r = volt::io::empty();
            loop {
                let _ = r.read(&mut b).await;
            }
        });
        let _ = tx.send(("empty", empty.await.is_err()));
        let repeat = volt::time::timeout(ms, async {
            let mut r = volt::io::repeat(7);
            loop {
                let _ = r.read(&mut b).await;
            }
        });
        let _ = tx.send(("repeat", repeat.await.is_err()));
        let sink = volt::time::timeout(ms, async {
            let mut w = volt::io::sink();
            loop {
                let _ = w.write(b"x").await;
            }
        });
        let _ = tx.send(("sink", sink.await.is_err()));
    });
    for want in ["empty", "repeat", "sink"] {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok((name, elapsed)) => assert!(name == want && elapsed, "{name}: the timeout did not fire"),
            Err(_) => {
                // A worker is stuck in the loop: dropping the runtime would wait for it.
                std::mem::forget(rt);
                panic!("the loop on {want} never yielded");
            }
        }
    }
}
