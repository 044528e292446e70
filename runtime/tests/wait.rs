//! Where each task is stuck: wait reasons, lost wakers and wake sources, as
//! `Telemetry::tasks` reports them. Every wait here is on something that never comes,
//! so the figures are read while the tasks sit idle; the loops below wait for a state
//! with a bound, and assert nothing about how long anything took.

use futures::{AsyncReadExt, AsyncWriteExt};
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use volt::telemetry::{TaskInfo, TaskState, WaitReason, WakeSource};

fn runtime() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).event_ring(4096).build().unwrap()
}

/// Read the task list until `pred` holds for it, for at most 10 s.
fn wait_for(rt: &volt::Runtime, what: &str, pred: impl Fn(&[TaskInfo]) -> bool) -> Vec<TaskInfo> {
    let deadline = Instant::now() + Duration::from_secs(10);
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

fn spawn_named<F>(rt: &volt::Runtime, name: &str, f: F) -> volt::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    volt::task::Builder::new().name(name).spawn_on(f, rt.handle())
}

/// Pending forever, keeping its waker in `slot`, under a user's label.
struct Labelled {
    slot: Arc<Mutex<Option<Waker>>>,
    label: &'static str,
}

impl Future for Labelled {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        volt::task::waiting_on(self.label);
        Poll::Pending
    }
}

/// Pending under `label` until woken once, then done.
struct Gate {
    slot: Arc<Mutex<Option<Waker>>>,
    label: &'static str,
    polled: bool,
}

fn gate(slot: &Arc<Mutex<Option<Waker>>>, label: &'static str) -> Gate {
    Gate { slot: slot.clone(), label, polled: false }
}

impl Future for Gate {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.polled {
            return Poll::Ready(());
        }
        self.polled = true;
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        volt::task::waiting_on(self.label);
        Poll::Pending
    }
}

/// Pending forever with its waker dropped: nothing can wake the task again.
struct DropsItsWaker;

impl Future for DropsItsWaker {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        drop(cx.waker().clone());
        Poll::Pending
    }
}

#[test]
fn each_kind_of_leaf_future_names_its_wait() {
    let rt = runtime();
    let (addrs_tx, addrs) = std::sync::mpsc::channel();
    // Sockets: an accept, a read whose peer never writes, a write whose peer never
    // reads, and a UDP receive.
    let a = addrs_tx.clone();
    spawn_named(&rt, "acceptor", async move {
        let l = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        a.send(("acceptor", l.local_addr().unwrap())).unwrap();
        let _ = l.accept().await;
    });
    let a = addrs_tx.clone();
    spawn_named(&rt, "reader", async move {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut s = volt::net::TcpStream::connect(addr).await.unwrap();
        let (peer, _) = l.accept().unwrap();
        a.send(("reader", addr)).unwrap();
        let mut buf = [0u8; 16];
        let _ = s.read(&mut buf).await;
        drop(peer);
    });
    let a = addrs_tx.clone();
    spawn_named(&rt, "writer", async move {
        let l = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, from) = l.accept().await.unwrap();
        a.send(("writer", from)).unwrap();
        let chunk = vec![7u8; 1 << 20];
        loop {
            // The peer never reads: the socket buffers fill and the write waits.
            if s.write(&chunk).await.is_err() {
                break;
            }
        }
        drop(peer);
    });
    let a = addrs_tx.clone();
    spawn_named(&rt, "receiver", async move {
        let u = volt::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.send(("receiver", u.local_addr().unwrap())).unwrap();
        let mut buf = [0u8; 16];
        let _ = u.recv_from(&mut buf).await;
    });
    // Time: a sleep, a timeout around a future that says nothing, an interval.
    spawn_named(&rt, "sleeper", async { volt::time::sleep(Duration::from_secs(3600)).await });
    spawn_named(&rt, "forever", async { volt::time::sleep(Duration::MAX).await });
    spawn_named(&rt, "timeout", async {
        let _ = volt::time::timeout(Duration::from_secs(3600), std::future::pending::<()>()).await;
    });
    spawn_named(&rt, "interval", async {
        let mut i = volt::time::interval(Duration::from_secs(3600));
        i.tick().await;
        i.tick().await;
    });
    // Tasks: a join, a blocking closure, a user's label, a lost waker.
    let target = spawn_named(&rt, "target", async { volt::time::sleep(Duration::from_secs(3600)).await });
    let target_id = target.id().as_u64();
    spawn_named(&rt, "joiner", async move {
        let _ = target.await;
    });
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let blocking_id = Arc::new(Mutex::new(0));
    let b = blocking_id.clone();
    spawn_named(&rt, "blocker", async move {
        let h = volt::task::spawn_blocking(move || {
            let _ = release_rx.recv();
        });
        *b.lock().unwrap() = h.id().as_u64();
        let _ = h.await;
    });
    let slot = Arc::new(Mutex::new(None));
    spawn_named(&rt, "labelled", Labelled { slot: slot.clone(), label: "db pool permit" });
    spawn_named(&rt, "lost", DropsItsWaker);
    let mut addr_of = std::collections::HashMap::new();
    for _ in 0..4 {
        let (name, addr) = addrs.recv_timeout(Duration::from_secs(10)).expect("socket tasks started");
        addr_of.insert(name, addr);
    }
    let names = [
        "acceptor", "reader", "writer", "receiver", "sleeper", "forever", "timeout", "interval", "joiner", "blocker",
        "labelled", "lost",
    ];
    let tasks = wait_for(&rt, "every task idle with its wait", |ts| {
        names.iter().all(|n| {
            named(ts, n).is_some_and(|t| t.state == TaskState::Idle && (t.waiting_on.is_some() || *n == "lost"))
        }) && *blocking_id.lock().unwrap() != 0
    });
    let wait = |n: &str| named(&tasks, n).unwrap().waiting_on.clone().unwrap();
    assert_eq!(wait("acceptor"), WaitReason::Accept { addr: Some(addr_of["acceptor"]) });
    assert_eq!(wait("reader"), WaitReason::Read { addr: Some(addr_of["reader"]) });
    assert_eq!(wait("writer"), WaitReason::Write { addr: Some(addr_of["writer"]) });
    assert_eq!(wait("receiver"), WaitReason::Recv { addr: Some(addr_of["receiver"]) });
    match wait("sleeper") {
        WaitReason::Sleep { remaining: Some(d) } => assert!(d <= Duration::from_secs(3600), "{d:?}"),
        other => panic!("sleeper: {other:?}"),
    }
    assert_eq!(wait("forever"), WaitReason::Sleep { remaining: None }, "Duration::MAX has no deadline");
    assert!(matches!(wait("timeout"), WaitReason::Timeout { remaining: Some(_) }), "{:?}", wait("timeout"));
    assert!(matches!(wait("interval"), WaitReason::Interval { remaining: Some(_) }), "{:?}", wait("interval"));
    assert_eq!(wait("joiner"), WaitReason::Join { task_id: target_id });
    assert_eq!(wait("blocker"), WaitReason::Blocking { task_id: *blocking_id.lock().unwrap() });
    assert_eq!(wait("labelled"), WaitReason::Label("db pool permit".into()));
    assert_eq!(wait("labelled").to_string(), "db pool permit");
    assert_eq!(wait("lost"), WaitReason::Unknown, "its poll named no wait");
    assert_eq!(wait("joiner").to_string(), format!("join task {target_id}"));
    assert_eq!(wait("reader").to_string(), format!("read {}", addr_of["reader"]));
    assert!(wait("sleeper").to_string().starts_with("sleep until +"), "{}", wait("sleeper"));
    for n in names {
        let t = named(&tasks, n).unwrap();
        assert!(t.waiting_since.is_some(), "{n}: idle, so it has waited some time");
        assert_eq!(t.lost_waker, n == "lost", "{n}: {t:?}");
        assert!(t.poll_histogram.count() >= 1, "{n}: its polls are counted");
        assert_eq!(t.poll_histogram.count(), t.polls, "{n}: one bucket count per poll");
    }
    // A user's future that still holds its waker is not lost; wake it and it runs.
    drop(slot);
    release_tx.send(()).unwrap();
}

/// Pending once under a label, then done when woken: a task parked here after some
/// earlier wait shows who woke it from that earlier wait.
fn park_labelled(slot: Arc<Mutex<Option<Waker>>>) -> Labelled {
    Labelled { slot, label: "parked" }
}

#[test]
fn wake_sources_name_the_timer_the_reactor_a_task_and_an_outside_thread() {
    let rt = runtime();
    // Timer: a short sleep, then parked.
    let s1 = Arc::new(Mutex::new(None));
    let s = s1.clone();
    spawn_named(&rt, "timer", async move {
        volt::time::sleep(Duration::from_millis(1)).await;
        park_labelled(s).await;
    });
    // Socket: a read that a byte from this thread completes, then parked.
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let s2 = Arc::new(Mutex::new(None));
    let s = s2.clone();
    spawn_named(&rt, "socket", async move {
        let l = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addr_tx.send(l.local_addr().unwrap()).unwrap();
        let (mut c, _) = l.accept().await.unwrap();
        let mut b = [0u8; 1];
        let _ = c.read(&mut b).await;
        park_labelled(s).await;
    });
    let mut peer = std::net::TcpStream::connect(addr_rx.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    // Task: joins a task that finishes when this thread opens its gate, then parked.
    let s3 = Arc::new(Mutex::new(None));
    let s = s3.clone();
    let (id_tx, id_rx) = std::sync::mpsc::channel();
    let gate_slot = Arc::new(Mutex::new(None::<Waker>));
    let g = gate_slot.clone();
    spawn_named(&rt, "joiner", async move {
        let h = volt::spawn(async move {
            // Wait until the joiner is parked in its join, then finish.
            gate(&g, "gate").await;
        });
        id_tx.send(h.id().as_u64()).unwrap();
        let _ = h.await;
        park_labelled(s).await;
    });
    let joined_id = id_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    wait_for(&rt, "the tasks wait", |ts| {
        named(ts, "joiner").is_some_and(|t| matches!(t.waiting_on, Some(WaitReason::Join { .. })))
            && named(ts, "socket").is_some_and(|t| matches!(t.waiting_on, Some(WaitReason::Read { .. })))
    });
    peer.write_all(b"x").unwrap();
    gate_slot.lock().unwrap().take().expect("the joined task parked").wake();
    let tasks = wait_for(&rt, "woken, then parked", |ts| {
        ["timer", "socket", "joiner"]
            .iter()
            .all(|n| named(ts, n).is_some_and(|t| t.waiting_on == Some(WaitReason::Label("parked".into()))))
    });
    let by = |n: &str| named(&tasks, n).unwrap().last_woken_by;
    assert_eq!(by("timer"), Some(WakeSource::Timer));
    assert_eq!(by("socket"), Some(WakeSource::Io));
    assert_eq!(by("joiner"), Some(WakeSource::Task(joined_id)));
    for n in ["timer", "socket", "joiner"] {
        assert!(named(&tasks, n).unwrap().last_woken.is_some(), "{n}");
    }
    drop((s1, s2, s3));
}

#[test]
fn a_wake_from_an_outside_thread_says_so() {
    let rt = runtime();
    let first = Arc::new(Mutex::new(None));
    let parked = Arc::new(Mutex::new(None));
    let (f, p) = (first.clone(), parked.clone());
    spawn_named(&rt, "woken", async move {
        gate(&f, "first").await;
        park_labelled(p).await;
    });
    wait_for(&rt, "parked", |ts| {
        named(ts, "woken").is_some_and(|t| t.waiting_on == Some(WaitReason::Label("first".into())))
    });
    std::thread::spawn(move || first.lock().unwrap().take().unwrap().wake()).join().unwrap();
    let tasks = wait_for(&rt, "woken from outside", |ts| {
        named(ts, "woken").is_some_and(|t| t.waiting_on == Some(WaitReason::Label("parked".into())))
    });
    assert_eq!(named(&tasks, "woken").unwrap().last_woken_by, Some(WakeSource::Outside));
    drop(parked);
}

/// The event ring's `Schedule` records carry the wake source: a spawn, the timer that
/// ended a sleep, a task's own requeue, and the task whose completion woke its joiner.
#[test]
fn schedule_events_name_their_wake_source() {
    use volt::telemetry::EventDetail;
    let rt = runtime();
    let mut cursor = rt.handle().telemetry().events();
    let sleeper = rt.block_on(async {
        let sleeper = volt::spawn(async { volt::time::sleep(Duration::from_millis(2)).await });
        let id = sleeper.id().as_u64();
        sleeper.await.unwrap();
        id
    });
    // A child that finishes when this thread opens its gate, after its parent is seen
    // waiting in the join: so the completion must wake the parent.
    let slot = Arc::new(Mutex::new(None));
    let g = slot.clone();
    let (id_tx, id_rx) = std::sync::mpsc::channel();
    let parent = spawn_named(&rt, "parent", async move {
        let c = volt::spawn(async move {
            volt::task::yield_now().await;
            gate(&g, "gate").await;
        });
        id_tx.send(c.id().as_u64()).unwrap();
        c.await.unwrap();
    });
    let child = id_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    wait_for(&rt, "the parent waits on its child, the child on its gate", |ts| {
        named(ts, "parent").is_some_and(|t| t.waiting_on == Some(WaitReason::Join { task_id: child }))
            && ts.iter().any(|t| t.id == child && t.waiting_on == Some(WaitReason::Label("gate".into())))
    });
    slot.lock().unwrap().take().unwrap().wake();
    parent.join().unwrap();
    let events = cursor.read();
    let sources = |task: u64| -> Vec<WakeSource> {
        events
            .iter()
            .filter(|e| e.task_id == task)
            .filter_map(|e| match e.detail() {
                EventDetail::Schedule { source, .. } => Some(source),
                _ => None,
            })
            .collect()
    };
    let s = sources(sleeper);
    assert_eq!(s.first(), Some(&WakeSource::Spawn), "{s:?}");
    assert!(s.contains(&WakeSource::Timer), "the sleep's end: {s:?}");
    let s = sources(child);
    assert!(s.contains(&WakeSource::Task(child)), "its yield requeued it: {s:?}");
    assert!(s.contains(&WakeSource::Outside), "this thread opened its gate: {s:?}");
    let parent_id = events.iter().find(|e| e.task_id != child && sources(e.task_id).contains(&WakeSource::Task(child)));
    assert!(parent_id.is_some(), "the child's completion woke its parent");
}

/// A task queued again by its own poll (`yield_now`) reads as waiting on its yield while
/// it sits in the queue; nothing is recorded on the yield itself.
#[test]
fn a_yielding_task_reads_as_waiting_on_its_yield() {
    let rt = runtime();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let h = spawn_named(&rt, "yielder", async move {
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            volt::task::yield_now().await;
        }
    });
    let tasks = wait_for(&rt, "the yielder seen queued after a yield", |ts| {
        named(ts, "yielder").is_some_and(|t| t.state == TaskState::Scheduled && t.waiting_on == Some(WaitReason::Yield))
    });
    let t = named(&tasks, "yielder").unwrap();
    assert_eq!(t.waiting_on.as_ref().unwrap().to_string(), "yield");
    assert!(!t.lost_waker);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
}

/// Pending forever, keeping its waker, naming no wait: what a third-party future does.
struct Unnamed(Arc<Mutex<Option<Waker>>>);

impl Future for Unnamed {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.0.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A wrapper (a timeout) names the wait only when the future inside named none, and a
/// timeout that completed leaves nothing behind for the next, unnamed wait.
#[test]
fn a_timeout_names_the_wait_only_when_its_future_names_none() {
    let rt = runtime();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    spawn_named(&rt, "timed-read", async move {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut s = volt::net::TcpStream::connect(addr).await.unwrap();
        let (peer, _) = l.accept().unwrap();
        addr_tx.send(addr).unwrap();
        let mut buf = [0u8; 8];
        let _ = volt::time::timeout(Duration::from_secs(3600), s.read(&mut buf)).await;
        drop(peer);
    });
    let slot = Arc::new(Mutex::new(None));
    let s2 = slot.clone();
    spawn_named(&rt, "after-timeout", async move {
        // Completes in its first poll; then the task waits on something that names nothing.
        let _ = volt::time::timeout(Duration::from_secs(3600), async {}).await;
        Unnamed(s2).await;
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let tasks = wait_for(&rt, "both tasks idle", |ts| {
        named(ts, "timed-read").is_some_and(|t| t.state == TaskState::Idle && t.waiting_on.is_some())
            && named(ts, "after-timeout").is_some_and(|t| t.state == TaskState::Idle)
            && slot.lock().unwrap().is_some()
    });
    assert_eq!(named(&tasks, "timed-read").unwrap().waiting_on, Some(WaitReason::Read { addr: Some(addr) }));
    let after = named(&tasks, "after-timeout").unwrap();
    assert_eq!(after.waiting_on, Some(WaitReason::Unknown), "no timeout is pending any more: {after:?}");
    assert!(!after.lost_waker, "the unnamed future holds its waker");
}

/// A task's histograms count every poll and every wait in a queue, whether it was polled
/// once (its poller has not written them yet: they come from its totals), twice (the
/// second poll adds the first's times) or many times; and a single poll lands in the
/// bucket that holds its busy time.
#[test]
fn per_task_histograms_count_every_poll_however_many_there_were() {
    let rt = runtime();
    let spin = |d: Duration| {
        let t = Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    };
    spawn_named(&rt, "once", async move {
        spin(Duration::from_millis(3));
        volt::time::sleep(Duration::MAX).await;
    });
    for (name, yields) in [("twice", 1), ("many", 9)] {
        spawn_named(&rt, name, async move {
            for _ in 0..yields {
                volt::task::yield_now().await;
            }
            volt::time::sleep(Duration::MAX).await;
        });
    }
    let expected = [("once", 1), ("twice", 2), ("many", 10)];
    let tasks = wait_for(&rt, "every task asleep", |ts| {
        expected.iter().all(|(n, polls)| named(ts, n).is_some_and(|t| t.state == TaskState::Idle && t.polls == *polls))
    });
    for (n, polls) in expected {
        let t = named(&tasks, n).unwrap();
        assert_eq!(t.poll_histogram.count(), polls, "{n}: {t:?}");
        assert_eq!(t.schedule_histogram.count(), polls, "{n}: a wait in a queue before each poll: {t:?}");
        assert_eq!(t.poll_histogram.sum, t.busy.as_nanos() as u64, "{n}");
        assert_eq!(t.schedule_histogram.sum, t.scheduled.as_nanos() as u64, "{n}");
    }
    let once = named(&tasks, "once").unwrap();
    let busy = once.busy.as_nanos() as u64;
    // The poll spun 3 ms by `Instant`; its busy time is in clock ticks converted at a
    // rate measured once per process (over 200 µs, to within 1/256 of the span), so it
    // may read a fraction of a percent short: 2,999,206 ns in one CI run.
    assert!(busy >= 2_970_000, "{once:?}");
    // The log2 bucket of its busy time, where the per-task range (2^10 to 2^25 ns, the
    // outer buckets holding what lies beyond) puts it: a preempted spin may run long.
    let bucket = ((63 - busy.leading_zeros()) as usize).clamp(10, 25);
    assert_eq!(once.poll_histogram.buckets[bucket], 1, "{busy} ns: {once:?}");
    assert!(volt::telemetry::Histogram::bucket_range(bucket).contains(&busy) || bucket == 25, "{busy} ns");
}

/// A Volt stream on loopback, connected to a plain socket whose end is returned too.
async fn loopback() -> (volt::net::TcpStream, std::net::TcpStream, std::net::SocketAddr) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let s = volt::net::TcpStream::connect(addr).await.unwrap();
    let (peer, _) = l.accept().unwrap();
    (s, peer, addr)
}

/// A task that waited on a socket read, got its byte, and now waits on a foreign future
/// (a `futures` oneshot, which names nothing) shows `unknown`: not the read it finished,
/// and not nothing.
#[test]
fn a_task_that_read_a_socket_then_awaits_a_oneshot_shows_unknown() {
    let rt = runtime();
    let (peer_tx, peer_rx) = std::sync::mpsc::channel();
    let (_done_tx, done_rx) = futures::channel::oneshot::channel::<()>();
    spawn_named(&rt, "read-then-oneshot", async move {
        let (mut s, peer, addr) = loopback().await;
        peer_tx.send((peer, addr)).unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await.unwrap();
        let _ = done_rx.await;
    });
    let (mut peer, addr) = peer_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let tasks = wait_for(&rt, "waiting on the read", |ts| {
        named(ts, "read-then-oneshot").is_some_and(|t| t.waiting_on == Some(WaitReason::Read { addr: Some(addr) }))
    });
    let polls = named(&tasks, "read-then-oneshot").unwrap().polls;
    peer.write_all(b"x").unwrap();
    let tasks = wait_for(&rt, "idle again after the read", |ts| {
        named(ts, "read-then-oneshot").is_some_and(|t| t.state == TaskState::Idle && t.polls > polls)
    });
    let t = named(&tasks, "read-then-oneshot").unwrap();
    assert_eq!(t.waiting_on, Some(WaitReason::Unknown), "{t:?}");
    assert_eq!((t.waits.as_slice(), t.more_waits), ([WaitReason::Unknown].as_slice(), 0), "{t:?}");
    assert!(t.waiting_on.as_ref().unwrap().to_string().starts_with("unknown"));
    assert_eq!(t.waiting_on.as_ref().unwrap().kind(), "unknown");
    assert!(t.waiting_since.is_some() && !t.lost_waker, "{t:?}");
}

/// A leaf that waits on a Volt sleep until this thread releases it: a wait named in one
/// poll, gone by the next.
struct SleepUntilReleased {
    sleep: Pin<Box<volt::time::Sleep>>,
    released: Arc<std::sync::atomic::AtomicBool>,
    slot: Arc<Mutex<Option<Waker>>>,
}

impl Future for SleepUntilReleased {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.released.load(std::sync::atomic::Ordering::SeqCst) {
            return Poll::Ready(());
        }
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        let _ = self.sleep.as_mut().poll(cx);
        Poll::Pending
    }
}

/// A task that waited on a sleep in one poll and on a foreign future in the next never
/// shows the sleep again, however often it is read.
#[test]
fn a_sleep_from_an_earlier_poll_never_shows_again() {
    let rt = runtime();
    let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slot = Arc::new(Mutex::new(None));
    let (r, s) = (released.clone(), slot.clone());
    let (_done_tx, done_rx) = futures::channel::oneshot::channel::<()>();
    spawn_named(&rt, "sleep-then-foreign", async move {
        let sleep = Box::pin(volt::time::sleep(Duration::from_secs(3600)));
        SleepUntilReleased { sleep, released: r, slot: s }.await;
        let _ = done_rx.await;
    });
    let tasks = wait_for(&rt, "asleep", |ts| {
        named(ts, "sleep-then-foreign").is_some_and(|t| matches!(t.waiting_on, Some(WaitReason::Sleep { .. })))
    });
    let polls = named(&tasks, "sleep-then-foreign").unwrap().polls;
    released.store(true, std::sync::atomic::Ordering::SeqCst);
    slot.lock().unwrap().take().expect("the leaf kept its waker").wake();
    wait_for(&rt, "idle on the foreign future", |ts| {
        named(ts, "sleep-then-foreign").is_some_and(|t| t.state == TaskState::Idle && t.polls > polls)
    });
    for _ in 0..100 {
        let tasks = rt.handle().telemetry().tasks();
        let t = named(&tasks, "sleep-then-foreign").unwrap();
        assert_eq!(t.waits, [WaitReason::Unknown], "{t:?}");
    }
}

/// A `select!`-style poll over a Volt sleep and a Volt socket read lists both, in the
/// order they were polled; the first is `waiting_on`. A wait recorded twice in one poll
/// (a loop polling the same read) is listed once.
#[test]
fn a_select_over_a_sleep_and_a_read_lists_both() {
    let rt = runtime();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let peers = Arc::new(Mutex::new(Vec::new()));
    let p = peers.clone();
    let a = addr_tx.clone();
    spawn_named(&rt, "select", async move {
        let (mut s, peer, addr) = loopback().await;
        p.lock().unwrap().push(peer);
        a.send(("select", addr)).unwrap();
        let mut buf = [0u8; 8];
        let sleep = std::pin::pin!(volt::time::sleep(Duration::from_secs(3600)));
        let read = std::pin::pin!(s.read(&mut buf));
        let _ = futures::future::select(sleep, read).await;
    });
    let p = peers.clone();
    spawn_named(&rt, "twice", async move {
        let (mut s, peer, addr) = loopback().await;
        p.lock().unwrap().push(peer);
        addr_tx.send(("twice", addr)).unwrap();
        let mut buf = [0u8; 8];
        let mut read = std::pin::pin!(s.read(&mut buf));
        std::future::poll_fn(|cx| {
            let _ = read.as_mut().poll(cx);
            read.as_mut().poll(cx)
        })
        .await
    });
    let mut addr_of = std::collections::HashMap::new();
    for _ in 0..2 {
        let (name, addr) = addr_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        addr_of.insert(name, addr);
    }
    let tasks = wait_for(&rt, "both waiting", |ts| {
        ["select", "twice"].iter().all(|n| named(ts, n).is_some_and(|t| t.state == TaskState::Idle && t.polls >= 1))
            && named(ts, "select").is_some_and(|t| t.waits.len() == 2)
    });
    let t = named(&tasks, "select").unwrap();
    assert!(
        matches!(t.waits[0], WaitReason::Sleep { remaining: Some(_) }),
        "the sleep was polled first: {:?}",
        t.waits
    );
    assert_eq!(t.waits[1], WaitReason::Read { addr: Some(addr_of["select"]) });
    assert_eq!(t.waiting_on.as_ref(), t.waits.first(), "waiting_on is the first");
    assert_eq!(t.more_waits, 0);
    let t = named(&tasks, "twice").unwrap();
    assert_eq!(t.waits, [WaitReason::Read { addr: Some(addr_of["twice"]) }], "listed once: {t:?}");
    drop(peers);
}

/// `fut.waiting_on(String)` names a future that names nothing itself, and stands in front
/// of the waits Volt's leaves inside it record; the label is the task's own copy, so the
/// task reads right after the labelled future (and its `String`) are gone and the task
/// waits on something else.
#[test]
fn an_owned_label_names_a_foreign_future_and_goes_before_the_waits_inside() {
    use volt::task::WaitingOnExt;
    let rt = runtime();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let (_done_tx, done_rx) = futures::channel::oneshot::channel::<()>();
    let key = 17;
    spawn_named(&rt, "owned", async move {
        let got = rx.waiting_on(format!("cache fill for key {key}")).await;
        assert_eq!(got, Ok(7));
        // The labelled future and its String are dropped: the task moves on.
        let _ = done_rx.await;
    });
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    spawn_named(&rt, "wrapped-read", async move {
        let (mut s, peer, addr) = loopback().await;
        addr_tx.send((peer, addr)).unwrap();
        let mut buf = [0u8; 8];
        let n = 7;
        let _ = s.read(&mut buf).waiting_on(format!("GET /users/{n}")).await;
    });
    let (_peer, addr) = addr_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let tasks = wait_for(&rt, "both labelled", |ts| {
        named(ts, "owned").is_some_and(|t| t.state == TaskState::Idle && t.polls >= 1)
            && named(ts, "wrapped-read").is_some_and(|t| t.waits.len() == 2)
    });
    let t = named(&tasks, "owned").unwrap();
    assert_eq!(t.waits, [WaitReason::Label("cache fill for key 17".into())], "{t:?}");
    assert_eq!(t.waiting_on.as_ref().unwrap().to_string(), "cache fill for key 17");
    let t = named(&tasks, "wrapped-read").unwrap();
    assert_eq!(
        t.waits,
        [WaitReason::Label("GET /users/7".into()), WaitReason::Read { addr: Some(addr) }],
        "the label first, then what it waits on inside"
    );
    let polls = named(&tasks, "owned").unwrap().polls;
    tx.send(7).unwrap();
    let tasks = wait_for(&rt, "moved on", |ts| {
        named(ts, "owned").is_some_and(|t| t.state == TaskState::Idle && t.polls > polls)
    });
    assert_eq!(named(&tasks, "owned").unwrap().waits, [WaitReason::Unknown]);
}

/// A label longer than the task's record keeps is cut at a character boundary and marked
/// with `…`, not dropped; the free function takes `&'static str` as before.
#[test]
fn a_long_owned_label_is_cut_and_marked_not_lost() {
    use volt::task::WaitingOnExt;
    let rt = runtime();
    let url = format!("https://api.example.com/v1/{}", "é".repeat(40));
    let (_tx, rx) = futures::channel::oneshot::channel::<()>();
    let label = url.clone();
    spawn_named(&rt, "long", async move {
        let _ = rx.waiting_on(label).await;
    });
    let tasks = wait_for(&rt, "labelled", |ts| {
        named(ts, "long").is_some_and(|t| matches!(t.waiting_on, Some(WaitReason::Label(_))))
    });
    let shown = named(&tasks, "long").unwrap().waiting_on.as_ref().unwrap().to_string();
    let kept = shown.strip_suffix('…').unwrap_or_else(|| panic!("marked as cut: {shown:?}"));
    assert!(kept.len() >= 32 && kept.len() <= 40, "{} bytes kept: {shown:?}", kept.len());
    assert!(url.starts_with(kept), "a prefix of the label: {shown:?}");
    assert!(kept.starts_with("https://api.example.com/v1/é"), "{shown:?}");
}
