//! Each wrapper on a real Volt runtime: every item arrives once and in order, the streams
//! end when what they wrap ends, and dropping one stops what it owns. Every wait is
//! bounded (10 s) so a lost wake fails a test instead of hanging it; nothing is timed.

use std::future::Future;
use std::time::Duration;
use volt_stream::wrappers::errors::BroadcastStreamRecvError;
use volt_stream::wrappers::*;
use volt_stream::{Stream, StreamExt};

fn run<F: Future<Output = ()> + Send + 'static>(f: F) {
    let rt = volt::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let task = rt.spawn(f);
    match rt.block_on(async { volt::time::timeout(Duration::from_secs(10), task).await }) {
        Ok(result) => result.unwrap(),
        Err(_) => {
            // A task stuck in a poll would keep the runtime's drop waiting for it.
            std::mem::forget(rt);
            panic!("the test's task did not finish in 10 s");
        }
    }
}

#[test]
fn receiver_streams_give_every_message_in_order_then_end() {
    run(async {
        let (tx, rx) = volt::sync::mpsc::channel(4);
        let mut s = ReceiverStream::new(rx);
        let sender = volt::spawn(async move {
            for i in 0..1000u32 {
                tx.send(i).await.unwrap();
            }
        });
        let got: Vec<u32> = (&mut s).collect().await;
        sender.await.unwrap();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
        assert_eq!(s.size_hint(), (0, Some(0)), "a closed, empty channel");

        let (tx, rx) = volt::sync::mpsc::unbounded_channel();
        for i in 0..100u32 {
            tx.send(i).unwrap();
        }
        let mut s = UnboundedReceiverStream::from(rx);
        assert_eq!(s.size_hint(), (100, None));
        drop(tx);
        assert_eq!(s.size_hint(), (100, Some(100)));
        assert_eq!(s.next().await, Some(0));
        let rest: Vec<u32> = s.collect().await;
        assert_eq!(rest, (1..100).collect::<Vec<_>>());
    });
}

#[test]
fn close_keeps_what_was_sent_and_refuses_the_rest() {
    run(async {
        let (tx, rx) = volt::sync::mpsc::channel(8);
        tx.send(1).await.unwrap();
        tx.send(2).await.unwrap();
        let mut s = ReceiverStream::new(rx);
        s.close();
        assert!(tx.send(3).await.is_err(), "a send after close");
        assert_eq!(s.as_mut().recv().await, Some(1));
        assert_eq!(s.next().await, Some(2));
        assert_eq!(s.next().await, None);
        let _rx: volt::sync::mpsc::Receiver<i32> = s.into_inner();
    });
}

#[test]
fn broadcast_stream_reports_a_lag_then_goes_on() {
    run(async {
        let (tx, rx) = volt::sync::broadcast::channel(4);
        let mut s = BroadcastStream::new(rx);
        for i in 0..10u32 {
            tx.send(i).unwrap();
        }
        // Capacity 4: 0 to 5 were overwritten before the stream read any.
        assert_eq!(s.next().await, Some(Err(BroadcastStreamRecvError::Lagged(6))));
        for want in 6..10 {
            assert_eq!(s.next().await, Some(Ok(want)));
        }
        let sender = volt::spawn(async move {
            for i in 10..20u32 {
                tx.send(i).unwrap();
                volt::task::yield_now().await;
            }
        });
        let mut got = Vec::new();
        while let Some(v) = s.next().await {
            match v {
                Ok(v) => got.push(v),
                Err(BroadcastStreamRecvError::Lagged(n)) => got.extend(std::iter::repeat_n(u32::MAX, n as usize)),
            }
        }
        sender.await.unwrap();
        // Every value is there or counted as missed, and the stream ended with the sender.
        assert_eq!(got.len(), 10, "{got:?}");
        assert!(got.iter().filter(|&&v| v != u32::MAX).is_sorted());
    });
}

#[test]
fn watch_stream_starts_with_the_value_or_with_the_next_change() {
    run(async {
        let (tx, rx) = volt::sync::watch::channel("hello");
        let mut now = WatchStream::new(rx.clone());
        let mut later = WatchStream::from_changes(rx);
        assert_eq!(now.next().await, Some("hello"));
        // Nothing changed yet: the second stream has nothing to give.
        assert!(futures::FutureExt::now_or_never(later.next()).is_none());
        tx.send("goodbye").unwrap();
        assert_eq!(now.next().await, Some("goodbye"));
        assert_eq!(later.next().await, Some("goodbye"));
        // Two changes between reads give the latest once.
        tx.send("a").unwrap();
        tx.send("b").unwrap();
        assert_eq!(now.next().await, Some("b"));
        drop(tx);
        assert_eq!(now.next().await, None);
        assert_eq!(later.next().await, Some("b"));
        assert_eq!(later.next().await, None);
    });
}

#[test]
fn interval_stream_ticks_on_the_paused_clock() {
    let rt = volt::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    rt.block_on(async {
        let start = volt::time::Instant::now();
        let s = IntervalStream::new(volt::time::interval(Duration::from_millis(100)));
        let ticks: Vec<_> = s.take(5).collect().await;
        let offsets: Vec<u128> = ticks.iter().map(|t| (*t - start).as_millis()).collect();
        assert_eq!(offsets, [0, 100, 200, 300, 400]);
    });
}

#[test]
fn listener_streams_accept_every_connection() {
    run(async {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = TcpListenerStream::new(listener);
        let clients = volt::spawn(async move {
            let mut held = Vec::new();
            for _ in 0..20 {
                held.push(volt::net::TcpStream::connect(addr).await.unwrap());
            }
            held
        });
        let mut accepted = Vec::new();
        while accepted.len() < 20 {
            accepted.push(incoming.next().await.unwrap().unwrap());
        }
        let held = clients.await.unwrap();
        let mut peers: Vec<_> = accepted.iter().map(|s| s.peer_addr().unwrap()).collect();
        let mut locals: Vec<_> = held.iter().map(|s| s.local_addr().unwrap()).collect();
        peers.sort();
        locals.sort();
        assert_eq!(peers, locals, "every connection accepted once");
        assert_eq!(incoming.as_ref().local_addr().unwrap(), addr);

        let path = std::env::temp_dir().join(format!("volt-stream-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut incoming = UnixListenerStream::new(volt::net::UnixListener::bind(&path).unwrap());
        let client = volt::net::UnixStream::connect(&path).await.unwrap();
        let server = incoming.next().await.unwrap().unwrap();
        assert_eq!(server.peer_addr().unwrap().as_pathname(), None);
        drop(client);
        let _ = std::fs::remove_file(&path);
    });
}

#[test]
fn read_dir_stream_lists_every_entry_then_ends() {
    let dir = std::env::temp_dir().join(format!("volt-stream-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    for i in 0..50 {
        std::fs::write(dir.join(format!("f{i}")), b"x").unwrap();
    }
    let d = dir.clone();
    run(async move {
        let s = ReadDirStream::new(volt::fs::read_dir(&d).await.unwrap());
        let mut names: Vec<String> = s.map(|e| e.unwrap().file_name().into_string().unwrap()).collect().await;
        names.sort();
        let mut want: Vec<String> = (0..50).map(|i| format!("f{i}")).collect();
        want.sort();
        assert_eq!(names, want);
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn signal_stream_gets_a_raised_signal() {
    run(async {
        let kind = volt::signal::unix::SignalKind::user_defined2();
        let mut s = SignalStream::new(volt::signal::unix::signal(kind).unwrap());
        // SAFETY: `raise` has no memory-safety preconditions; the signal has a handler
        // (just installed), so it does not end the process.
        assert_eq!(unsafe { libc::raise(kind.as_raw_value()) }, 0);
        assert_eq!(s.next().await, Some(()));
    });
}

#[test]
fn join_set_stream_gives_each_result_and_aborts_the_rest_on_drop() {
    run(async {
        let mut set = volt::task::JoinSet::new();
        for i in 0..100u64 {
            set.spawn(async move { i * 2 });
        }
        let s = JoinSetStream::from(set);
        assert_eq!(s.size_hint(), (100, Some(100)));
        let mut got: Vec<u64> = s.map(|r| r.unwrap()).collect().await;
        got.sort();
        assert_eq!(got, (0..100).map(|i| i * 2).collect::<Vec<_>>());

        let (tx, rx) = volt::sync::oneshot::channel::<()>();
        let mut set = volt::task::JoinSet::new();
        set.spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await
        });
        drop(JoinSetStream::new(set));
        // The pending task was aborted, so its sender is dropped.
        assert!(rx.await.is_err());
    });
}

#[test]
fn lines_and_split_streams_read_volt_sockets() {
    use volt::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    run(async {
        let (a, mut b) = volt::net::UnixStream::pair().unwrap();
        let writer = volt::spawn(async move {
            b.write_all(b"one\ntwo\nthree").await.unwrap();
        });
        let lines = LinesStream::new(BufReader::new(a).lines());
        let got: Vec<String> = lines.map(|l| l.unwrap()).collect().await;
        writer.await.unwrap();
        assert_eq!(got, ["one", "two", "three"]);
        let split = SplitStream::new(BufReader::new(&b"a,b,c"[..]).split(b','));
        let parts: Vec<Vec<u8>> = split.map(|p| p.unwrap()).collect().await;
        assert_eq!(parts, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    });
}

/// `iter` spends Volt's budget: a loop over an endless iterator beside a branch that
/// only needs the task to yield once ends (tokio-stream's `iter` spends Tokio's budget,
/// which never runs out on Volt), and a fresh poll gets exactly the budget's 128 items.
#[test]
fn an_endless_iter_yields_to_its_neighbours() {
    run(async {
        let mut endless = volt_stream::iter(std::iter::repeat(1u8));
        let mut n = 0u64;
        tokio_select(async {
            while endless.next().await == Some(1) {
                n += 1;
            }
        })
        .await;
        assert!(n >= 128, "{n} items before the other branch ran");
        let mut fresh = volt_stream::iter(0..u32::MAX);
        volt::task::yield_now().await;
        let in_one_poll = std::future::poll_fn(|cx| {
            let mut k = 0;
            while let std::task::Poll::Ready(Some(_)) = std::pin::Pin::new(&mut fresh).poll_next(cx) {
                k += 1;
            }
            std::task::Poll::Ready(k)
        })
        .await;
        assert_eq!(in_one_poll, 128);
    });
}

/// Polls `f` and a `yield_now` together, `f` first, until the yield is done: `f` must
/// give the task up at some point for that to happen.
async fn tokio_select<F: Future<Output = ()>>(f: F) {
    let mut f = std::pin::pin!(f);
    let mut yielded = std::pin::pin!(volt::task::yield_now());
    std::future::poll_fn(|cx| {
        if f.as_mut().poll(cx).is_ready() {
            panic!("the endless loop ended");
        }
        yielded.as_mut().poll(cx)
    })
    .await
}
