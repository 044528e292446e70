//! volt-util's parts on a real Volt runtime: tracked tasks all counted and waited for,
//! aborts that drop their futures, joins in spawn order, permits and slots handed out and
//! given back, a blocking bridge on the blocking pool, and pipes and timeouts on Volt's
//! budget and timer. Every wait is bounded (10 s) so a lost wake fails a test instead of
//! hanging it; nothing is timed.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use volt_util::future::FutureExt;
use volt_util::sync::{PollSemaphore, PollSender};
use volt_util::task::{AbortOnDrop, AbortOnDropHandle, JoinQueue, TaskTracker};

fn run<F: Future<Output = ()> + Send + 'static>(f: F) {
    let rt = volt::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let task = rt.spawn(f);
    match rt.block_on(async { volt::time::timeout(Duration::from_secs(10), task).await }) {
        Ok(result) => result.unwrap(),
        Err(_) => {
            std::mem::forget(rt);
            panic!("the test's task did not finish in 10 s");
        }
    }
}

/// Drops of whatever holds it.
#[derive(Clone, Default)]
struct Drops(Arc<AtomicUsize>);

impl Drop for Drops {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn task_tracker_waits_for_every_task_it_spawned() {
    run(async {
        let tracker = TaskTracker::new();
        let done = Arc::new(AtomicUsize::new(0));
        for i in 0..200u64 {
            let done = done.clone();
            tracker.spawn(async move {
                volt::time::sleep(Duration::from_millis(i % 7)).await;
                done.fetch_add(1, SeqCst);
            });
        }
        let blocking_done = done.clone();
        tracker.spawn_blocking(move || {
            std::thread::sleep(Duration::from_millis(5));
            blocking_done.fetch_add(1, SeqCst);
        });
        tracker.spawn_on(async {}, &volt::runtime::Handle::current());
        assert!(!tracker.is_empty());
        // Open, `wait` does not finish even with every task done.
        let token: volt_util::task::task_tracker::TaskTrackerToken = tracker.token();
        assert!(TaskTracker::ptr_eq(token.task_tracker(), &tracker));
        tracker.close();
        assert!(tracker.is_closed());
        assert!(volt::time::timeout(Duration::from_millis(50), tracker.wait()).await.is_err(), "a token is still out");
        drop(token);
        tracker.wait().await;
        assert_eq!(done.load(SeqCst), 201, "wait returned before every task ended");
        assert!(tracker.is_empty());
    });
}

#[test]
fn a_tracked_local_task_is_counted() {
    let rt = volt::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let local = volt::task::LocalSet::new();
    let tracker = TaskTracker::new();
    let rc = std::rc::Rc::new(std::cell::Cell::new(0));
    let (t, r) = (tracker.clone(), rc.clone());
    local.block_on(&rt, async move {
        t.spawn_local(async move { r.set(r.get() + 1) });
        t.close();
        t.wait().await;
    });
    tracker.spawn_local_on(async {}, &local);
    assert_eq!((rc.get(), tracker.len()), (1, 1));
    local.block_on(&rt, tracker.wait());
    assert!(tracker.is_empty());
}

#[test]
fn abort_on_drop_handles_drop_their_futures() {
    run(async {
        let drops = Drops::default();
        let d = drops.clone();
        let handle = AbortOnDropHandle::new(volt::spawn(async move {
            let _d = d;
            std::future::pending::<()>().await
        }));
        assert!(!handle.is_finished());
        drop(handle);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while drops.0.load(SeqCst) < 1 {
            assert!(std::time::Instant::now() < deadline, "the aborted task's future was never dropped");
            volt::task::yield_now().await;
        }
        // Awaited, it gives the output; detached, it no longer aborts.
        assert_eq!(AbortOnDropHandle::new(volt::spawn(async { 7 })).await.unwrap(), 7);
        let (tx, rx) = volt::sync::oneshot::channel();
        let detached = AbortOnDropHandle::new(volt::spawn(async move { rx.await.unwrap() })).detach();
        tx.send(5).unwrap();
        assert_eq!(detached.await.unwrap(), 5);
        let guard = AbortOnDrop::new(volt::spawn(std::future::pending::<()>()).abort_handle());
        let handle = guard.detach();
        assert!(!handle.is_finished(), "detach aborted the task");
        handle.abort();
    });
}

#[test]
fn join_queue_joins_in_spawn_order() {
    run(async {
        let mut queue = JoinQueue::new();
        for i in 0..20u64 {
            // Later tasks finish first.
            queue.spawn(async move {
                volt::time::sleep(Duration::from_millis(20 - i)).await;
                i
            });
        }
        assert_eq!(queue.try_join_next().map(|r| r.is_ok()), None, "the first task is still asleep");
        let mut got = Vec::new();
        while let Some(r) = queue.join_next().await {
            got.push(r.unwrap());
        }
        assert_eq!(got, (0..20).collect::<Vec<_>>());

        let queue: JoinQueue<u32> = (0..10).map(|i| async move { i * 3 }).collect();
        assert_eq!(queue.join_all().await, (0..10).map(|i| i * 3).collect::<Vec<_>>());

        let drops = Drops::default();
        let mut queue = JoinQueue::new();
        for _ in 0..5 {
            let d = drops.clone();
            queue.spawn(async move {
                let _d = d;
                std::future::pending::<()>().await
            });
        }
        queue.shutdown().await;
        assert!(queue.is_empty());
        assert_eq!(drops.0.load(SeqCst), 5, "shutdown left a task's future alive");
    });
}

#[test]
fn poll_semaphore_hands_out_every_permit_and_reports_close() {
    run(async {
        let sem = Arc::new(volt::sync::Semaphore::new(2));
        let mut poll = PollSemaphore::new(sem.clone());
        let a = std::future::poll_fn(|cx| poll.poll_acquire(cx)).await.unwrap();
        let b = std::future::poll_fn(|cx| poll.poll_acquire(cx)).await.unwrap();
        assert_eq!(poll.available_permits(), 0);
        // A third waits until one comes back.
        let mut third = Box::pin(async move {
            let p = std::future::poll_fn(|cx| poll.poll_acquire(cx)).await;
            (p, poll)
        });
        assert!(futures::poll!(&mut third).is_pending());
        drop(a);
        let (c, poll) = third.await;
        assert!(c.is_some());
        drop((b, c));
        assert_eq!(poll.available_permits(), 2);
        let mut poll = poll;
        let two = std::future::poll_fn(|cx| poll.poll_acquire_many(cx, 2)).await.unwrap();
        assert_eq!(two.num_permits(), 2);
        drop(two);
        poll.close();
        assert!(sem.is_closed());
        assert!(std::future::poll_fn(|cx| poll.poll_acquire(cx)).await.is_none());
    });
}

#[test]
fn poll_sender_reserves_sends_and_closes() {
    use futures::SinkExt;
    run(async {
        let (tx, mut rx) = volt::sync::mpsc::channel::<u32>(1);
        let mut sender = PollSender::new(tx);
        std::future::poll_fn(|cx| sender.poll_reserve(cx)).await.unwrap();
        sender.send_item(1).unwrap();
        // The one slot is full: the next reserve waits until the receiver takes it.
        let mut waiting = Box::pin(async move {
            std::future::poll_fn(|cx| sender.poll_reserve(cx)).await.unwrap();
            sender
        });
        assert!(futures::poll!(&mut waiting).is_pending());
        assert_eq!(rx.recv().await, Some(1));
        let mut sender = waiting.await;
        sender.send_item(2).unwrap();
        assert_eq!(rx.recv().await, Some(2));
        // As a `Sink`.
        sender.send(3).await.unwrap();
        assert_eq!(rx.recv().await, Some(3));
        // Closed after a reserve: one last send goes through, then none.
        std::future::poll_fn(|cx| sender.poll_reserve(cx)).await.unwrap();
        sender.close();
        assert!(sender.is_closed());
        sender.send_item(4).unwrap();
        assert_eq!(rx.recv().await, Some(4));
        assert_eq!(sender.send_item(5).unwrap_err().into_inner(), Some(5));
        assert!(rx.recv().await.is_none(), "the only sender is closed");
    });
}

#[test]
fn sync_io_bridge_reads_and_writes_from_the_blocking_pool() {
    use std::io::{BufRead, Read, Write};
    run(async {
        let (a, b) = volt::io::duplex(64);
        let writer = volt::task::spawn_blocking(move || {
            let mut w = volt_util::io::SyncIoBridge::new(a);
            for i in 0..100 {
                writeln!(w, "line {i}").unwrap();
            }
            w.shutdown().unwrap();
        });
        let reader = volt::task::spawn_blocking(move || {
            let r = std::io::BufReader::new(volt_util::io::SyncIoBridge::new(b));
            r.lines().map(|l| l.unwrap()).collect::<Vec<_>>()
        });
        writer.await.unwrap();
        let lines = reader.await.unwrap();
        assert_eq!(lines, (0..100).map(|i| format!("line {i}")).collect::<Vec<_>>());
        let mut bridge = volt_util::io::SyncIoBridge::new(volt::io::BufReader::new(&b"abc\ndef"[..]));
        let mut s = String::new();
        volt::task::spawn_blocking(move || {
            bridge.read_line(&mut s).unwrap();
            let mut rest = String::new();
            bridge.read_to_string(&mut rest).unwrap();
            (s, rest)
        })
        .await
        .map(|(s, rest)| assert_eq!((s.as_str(), rest.as_str()), ("abc\n", "def")))
        .unwrap();
    });
}

#[test]
fn a_loop_on_a_simplex_pipe_yields() {
    use volt::io::{AsyncReadExt, AsyncWriteExt};
    run(async {
        let (mut tx, mut rx) = volt_util::io::simplex::new(1024);
        let mut yielded = std::pin::pin!(volt::task::yield_now());
        let mut looping = std::pin::pin!(async move {
            loop {
                tx.write_all(b"ping").await.unwrap();
                let mut buf = [0u8; 4];
                rx.read_exact(&mut buf).await.unwrap();
            }
        });
        std::future::poll_fn(|cx| {
            let _ = looping.as_mut().poll(cx);
            yielded.as_mut().poll(cx)
        })
        .await;
    });
}

#[test]
fn future_timeouts_run_on_volts_timer() {
    let rt = volt::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    rt.block_on(async {
        let start = volt::time::Instant::now();
        assert!(std::future::pending::<()>().timeout(Duration::from_secs(5)).await.is_err());
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(async { 3 }.timeout_at(start + Duration::from_secs(6)).await.unwrap(), 3);
        let token = volt_util::sync::CancellationToken::new();
        token.cancel();
        assert_eq!(std::future::pending::<()>().with_cancellation_token(&token).await, None);
        assert_eq!(async { 4 }.with_cancellation_token_owned(volt_util::sync::CancellationToken::new()).await, Some(4));
    });
}

fn paused<F: Future<Output = ()>>(f: F) {
    let rt = volt::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    rt.block_on(f);
}

#[test]
fn delay_queue_gives_values_back_at_their_deadlines_in_order() {
    use volt_util::time::DelayQueue;
    paused(async {
        let start = volt::time::Instant::now();
        let mut q = DelayQueue::new();
        for (v, ms) in [(3u32, 30u64), (1, 10), (2, 20), (4, 30)] {
            q.insert(v, Duration::from_millis(ms));
        }
        let early = q.insert(99, Duration::from_millis(5));
        let moved = q.insert(5, Duration::from_millis(1));
        assert_eq!(q.remove(&early).into_inner(), 99);
        q.reset(&moved, Duration::from_millis(50));
        assert_eq!(q.deadline(&moved), start + Duration::from_millis(50));
        let mut got = Vec::new();
        while let Some(e) = std::future::poll_fn(|cx| q.poll_expired(cx)).await {
            assert_eq!(e.deadline(), volt::time::Instant::now(), "given back at its deadline, not later");
            got.push((start.elapsed().as_millis(), e.into_inner()));
        }
        // Equal deadlines come out in insertion order.
        assert_eq!(got, vec![(10, 1), (20, 2), (30, 3), (30, 4), (50, 5)]);
        assert!(q.is_empty());
    });
}

#[test]
fn delay_queue_wakes_its_poller_when_a_value_comes_or_goes() {
    use volt_util::time::DelayQueue;
    paused(async {
        let mut q: DelayQueue<&str> = DelayQueue::new();
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        // Empty: the stream has ended for now.
        assert!(matches!(q.poll_expired(&mut cx), std::task::Poll::Ready(None)));
        // An insert into a queue that a task is waiting on wakes it (checked through a
        // real task: it must see the value come out).
        let (tx, rx) = volt::sync::oneshot::channel();
        let q = Arc::new(std::sync::Mutex::new(q));
        let q2 = q.clone();
        let waiter = volt::spawn(async move {
            // `Ready(None)` keeps this task's waker: it waits (no wake of its own) for
            // the queue to wake it.
            let first = std::future::poll_fn(|cx| match q2.lock().unwrap().poll_expired(cx) {
                std::task::Poll::Ready(None) => std::task::Poll::Pending,
                other => other,
            })
            .await;
            tx.send(first.map(|e| e.into_inner())).unwrap();
        });
        volt::task::yield_now().await;
        q.lock().unwrap().insert("late", Duration::from_secs(3600));
        q.lock().unwrap().insert("soon", Duration::from_millis(10));
        let first =
            volt::time::timeout(Duration::from_secs(10), rx).await.expect("the insert never woke the waiting task");
        assert_eq!(first.unwrap(), Some("soon"));
        waiter.await.unwrap();
        let mut q = Arc::try_unwrap(q).unwrap().into_inner().unwrap();
        // A deadline too far to add saturates instead of panicking.
        let key = q.insert("never", Duration::MAX);
        assert!(q.deadline(&key) > volt::time::Instant::now() + Duration::from_secs(86_400 * 365));
        q.clear();
        assert!(q.is_empty());
    });
}

#[test]
fn delay_queue_compact_gives_memory_back_and_keeps_keys() {
    use volt_util::time::DelayQueue;
    paused(async {
        let mut q = DelayQueue::with_capacity(100);
        let keys: Vec<_> = (0..100u32).map(|i| q.insert(i, Duration::from_secs(u64::from(i) + 1))).collect();
        for k in &keys[..90] {
            q.remove(k);
        }
        q.compact();
        assert_eq!((q.len(), q.capacity()), (10, 10));
        for (i, k) in keys[90..].iter().enumerate() {
            assert_eq!(*q.remove(k).get_ref(), 90 + i as u32, "a key kept its value through compact");
        }
        assert!(q.try_remove(&keys[0]).is_none());
    });
}

#[test]
fn udp_framed_sends_and_decodes_every_datagram() {
    use futures::{SinkExt, StreamExt};
    use volt_util::codec::LinesCodec;
    use volt_util::udp::UdpFramed;
    run(async {
        let a = volt::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = Arc::new(volt::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let mut tx = UdpFramed::new(a, LinesCodec::new());
        // Over an `Arc`, as a server shares its socket.
        let mut rx = UdpFramed::new(b.clone(), LinesCodec::new());
        let receiver = volt::spawn(async move {
            let mut got = Vec::new();
            while got.len() < 200 {
                let (line, from) = rx.next().await.unwrap().unwrap();
                got.push((line, from));
            }
            got
        });
        for i in 0..100 {
            // Two lines in one datagram: both come out, with its sender.
            tx.send((format!("{i}a\n{i}b"), b_addr)).await.unwrap();
        }
        let got = receiver.await.unwrap();
        assert!(got.iter().all(|(_, from)| *from == a_addr));
        let lines: Vec<String> = got.into_iter().map(|(l, _)| l).collect();
        let want: Vec<String> = (0..100).flat_map(|i| [format!("{i}a"), format!("{i}b")]).collect();
        assert_eq!(lines, want, "every line of every datagram, in order (loopback keeps order)");
    });
}

/// Each datagram spends the budget: with more datagrams queued than one poll's budget,
/// a poll of the stream takes exactly the budget's 128 and then yields.
#[test]
fn a_busy_udp_framed_yields_after_its_budget() {
    use futures::Stream;
    use volt_util::codec::BytesCodec;
    use volt_util::udp::UdpFramed;
    run(async {
        let socket = volt::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // 200 one-byte datagrams fit in a default receive buffer.
        for _ in 0..200 {
            sender.send_to(b"x", addr).unwrap();
        }
        let mut framed = UdpFramed::new(socket, BytesCodec::new());
        // Until all 200 are readable, then a fresh poll.
        while !std::future::poll_fn(|cx| Poll::Ready(framed.get_ref().poll_recv_ready(cx).is_ready())).await {
            volt::task::yield_now().await;
        }
        volt::task::yield_now().await;
        let in_one_poll = std::future::poll_fn(|cx| {
            let mut n = 0;
            while let Poll::Ready(Some(Ok(_))) = std::pin::Pin::new(&mut framed).poll_next(cx) {
                n += 1;
            }
            Poll::Ready(n)
        })
        .await;
        assert_eq!(in_one_poll, 128);
    });
}

#[test]
fn listeners_accept_through_the_trait() {
    use volt_util::either::Either;
    use volt_util::net::Listener;
    run(async {
        let tcp = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut listener: Either<volt::net::TcpListener, volt::net::UnixListener> = Either::Left(tcp);
        assert!(matches!(Listener::local_addr(&listener).unwrap(), Either::Left(a) if a == addr));
        let client = volt::spawn(async move { volt::net::TcpStream::connect(addr).await.unwrap() });
        let (_conn, peer) = listener.accept().await.unwrap();
        let client = client.await.unwrap();
        assert!(matches!(peer, Either::Left(p) if p == client.local_addr().unwrap()));
    });
}

#[test]
fn tokio_context_runs_a_future_in_another_runtime() {
    use volt_util::context::RuntimeExt;
    let timers = volt::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    // A future that needs a runtime (a sleep), polled by an executor that is not one.
    let fut = timers.wrap(async {
        volt::time::sleep(Duration::from_millis(5)).await;
        volt::runtime::Handle::current().metrics().num_workers()
    });
    assert_eq!(futures::executor::block_on(fut), 1);
}

#[test]
fn join_map_gives_each_result_with_its_key_and_replaces_by_key() {
    use volt_util::task::JoinMap;
    run(async {
        let mut map = JoinMap::new();
        for i in 0..50u32 {
            map.spawn(format!("k{i}"), async move { i * 2 });
        }
        // A spawn under a key in use aborts the task there; only the new one's result
        // comes back.
        let replaced = Drops::default();
        let r = replaced.clone();
        map.spawn("slow".to_string(), async move {
            let _r = r;
            std::future::pending::<u32>().await
        });
        map.spawn("slow".to_string(), async { 1000 });
        assert_eq!(map.len(), 51);
        assert!(map.contains_key("k7") && map.contains_key("slow"));
        let mut got = std::collections::HashMap::new();
        while let Some((key, result)) = map.join_next().await {
            assert!(got.insert(key, result.unwrap()).is_none(), "a key came back twice");
        }
        assert_eq!(got.len(), 51);
        assert_eq!(got["slow"], 1000);
        assert!((0..50).all(|i| got[&format!("k{i}")] == i * 2));
        assert_eq!(replaced.0.load(SeqCst), 1, "the replaced task's future was dropped");

        // Abort by key: its result is a cancellation, under its key.
        map.spawn("stuck".to_string(), std::future::pending::<u32>());
        map.spawn("quick".to_string(), async { 5 });
        assert!(map.abort("stuck"));
        assert!(!map.abort("absent"));
        let mut outcomes = Vec::new();
        while let Some((key, result)) = map.join_next().await {
            outcomes.push((key, result.map_err(|e| e.is_cancelled())));
        }
        outcomes.sort();
        assert_eq!(outcomes, vec![("quick".to_string(), Ok(5)), ("stuck".to_string(), Err(true))]);
        map.spawn("a".to_string(), std::future::pending::<u32>());
        map.shutdown().await;
        assert!(map.is_empty());
    });
}
