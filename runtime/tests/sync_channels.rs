#![cfg(feature = "sync")]
//! `volt::sync`'s channels against Tokio's documented behaviour: `mpsc` (back-pressure,
//! FIFO senders, permits, weak senders, `recv_many`, the end of the stream), `oneshot`,
//! `broadcast` (fan-out, lag, close) and `watch` (versions, `changed`, `wait_for`), and
//! the name of each wait as `Telemetry::tasks` shows it. Waits that must happen are
//! bounded by 10 s; nothing here asserts how fast anything is.

mod common;

use futures::FutureExt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::sync::{broadcast, mpsc, oneshot, watch};
use volt::telemetry::{TaskInfo, TaskState, WaitReason};

const BOUND: Duration = Duration::from_secs(10);

fn rt() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).build().unwrap()
}

/// `f` within the generous bound, or the test fails (a hang is a failure, not a stall).
async fn within<F: Future>(what: &str, f: F) -> F::Output {
    match volt::time::timeout(BOUND, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: did not happen within {BOUND:?}"),
    }
}

/// Whether `f` is still pending after one poll (then dropped).
fn pending_once<F: Future>(f: F) -> bool {
    f.now_or_never().is_none()
}

// ---------------------------------------------------------------------------------------
// mpsc

#[test]
fn mpsc_full_channel_makes_send_wait_until_a_value_is_received() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(2);
        tx.send(1).await.unwrap();
        tx.send(2).await.unwrap();
        assert_eq!(tx.capacity(), 0);
        assert_eq!(tx.max_capacity(), 2);
        assert!(matches!(tx.try_send(3), Err(mpsc::error::TrySendError::Full(3))));
        let tx2 = tx.clone();
        let h = volt::spawn(async move { tx2.send(3).await });
        // It cannot finish before a slot frees: yield a few times and check.
        for _ in 0..10 {
            volt::task::yield_now().await;
        }
        assert!(!h.is_finished(), "a send on a full channel completed");
        assert_eq!(rx.recv().await, Some(1));
        within("the waiting send", h).await.unwrap().unwrap();
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(rx.len(), 0);
        assert!(rx.is_empty());
    });
}

#[test]
fn mpsc_waiting_senders_are_served_in_order_and_try_send_does_not_jump_the_queue() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(1);
        tx.send(0).await.unwrap();
        let mut a = Box::pin(tx.send(1));
        let mut b = Box::pin(tx.send(2));
        let mut c = Box::pin(tx.send(3));
        assert!(futures::poll!(a.as_mut()).is_pending());
        assert!(futures::poll!(b.as_mut()).is_pending());
        assert!(futures::poll!(c.as_mut()).is_pending());
        assert_eq!(rx.recv().await, Some(0));
        // The freed slot is `a`'s: neither `c` nor a `try_send` can take it.
        assert!(futures::poll!(c.as_mut()).is_pending());
        assert!(matches!(tx.try_send(9), Err(mpsc::error::TrySendError::Full(9))));
        assert!(futures::poll!(a.as_mut()).is_ready());
        assert_eq!(rx.recv().await, Some(1));
        // A waiter that leaves gives its place (and any slot it was granted) to the next.
        drop(b);
        assert!(futures::poll!(c.as_mut()).is_ready());
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(tx.capacity(), 1);
    });
}

#[test]
fn mpsc_recv_returns_none_after_every_sender_dropped_and_the_buffer_drained() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(8);
        let tx2 = tx.clone();
        assert_eq!(tx.strong_count(), 2);
        tx.send(1).await.unwrap();
        tx2.send(2).await.unwrap();
        drop(tx);
        assert!(!rx.is_closed());
        drop(tx2);
        assert!(rx.is_closed());
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.recv().await, None);
        assert_eq!(rx.try_recv(), Err(mpsc::error::TryRecvError::Disconnected));
        assert_eq!(rx.recv().await, None, "None again, not a hang");
    });
}

#[test]
fn mpsc_a_waiting_recv_wakes_when_the_last_sender_drops() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(1);
        let h = volt::spawn(async move { rx.recv().await });
        volt::task::yield_now().await;
        drop(tx);
        assert_eq!(within("recv after the last sender dropped", h).await.unwrap(), None);
    });
}

#[test]
fn mpsc_send_fails_with_the_value_once_the_receiver_is_gone_and_closed_wakes() {
    rt().block_on(async {
        let (tx, rx) = mpsc::channel::<String>(1);
        let (utx, urx) = mpsc::unbounded_channel::<String>();
        tx.send("a".into()).await.unwrap();
        // A sender waiting on the full channel is released with its value.
        let tx2 = tx.clone();
        let waiting = volt::spawn(async move { tx2.send("b".into()).await });
        let tx3 = tx.clone();
        let closed = volt::spawn(async move { tx3.closed().await });
        let utx2 = utx.clone();
        let uclosed = volt::spawn(async move { utx2.closed().await });
        volt::task::yield_now().await;
        assert!(!tx.is_closed());
        drop(rx);
        drop(urx);
        let err = within("waiting send", waiting).await.unwrap().unwrap_err();
        assert_eq!(err.0, "b");
        within("closed", closed).await.unwrap();
        within("unbounded closed", uclosed).await.unwrap();
        assert!(tx.is_closed() && utx.is_closed());
        assert_eq!(tx.send("c".into()).await.unwrap_err().0, "c");
        assert!(matches!(tx.try_send("d".into()), Err(mpsc::error::TrySendError::Closed(s)) if s == "d"));
        assert_eq!(utx.send("e".into()).unwrap_err().0, "e");
        assert!(tx.reserve().await.is_err());
        assert_eq!(format!("{}", mpsc::error::SendError(())), "channel closed");
    });
}

#[test]
fn mpsc_values_left_in_the_channel_are_dropped_with_the_receiver() {
    let drops = common::DropCount::default();
    let (tx, rx) = mpsc::channel(4);
    let (utx, urx) = mpsc::unbounded_channel();
    for _ in 0..3 {
        tx.try_send(drops.guard()).unwrap();
        utx.send(drops.guard()).unwrap();
    }
    assert_eq!(drops.get(), 0);
    drop(rx);
    drop(urx);
    assert_eq!(drops.get(), 6, "every buffered value dropped once");
    assert!(tx.try_send(drops.guard()).is_err());
    assert_eq!(drops.get(), 7, "the refused value came back and was dropped");
}

#[test]
fn mpsc_close_refuses_new_sends_but_delivers_buffered_values_and_permits() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(4);
        tx.send(1).await.unwrap();
        let permit = tx.reserve().await.unwrap();
        rx.close();
        assert!(tx.is_closed());
        assert!(tx.send(2).await.is_err());
        assert!(matches!(tx.try_send(3), Err(mpsc::error::TrySendError::Closed(3))));
        assert_eq!(rx.recv().await, Some(1));
        // The permit taken before the close can still send; until it does, recv waits.
        let mut next = Box::pin(rx.recv());
        assert!(futures::poll!(next.as_mut()).is_pending());
        permit.send(4);
        assert_eq!(within("the permit's value", next).await, Some(4));
        assert_eq!(rx.recv().await, None);
    });
}

#[test]
fn mpsc_permits_hold_slots_until_they_send_or_drop() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(2);
        let p1 = tx.reserve().await.unwrap();
        assert_eq!(tx.capacity(), 1);
        let p2 = tx.try_reserve().unwrap();
        assert_eq!(tx.capacity(), 0);
        assert!(matches!(tx.try_reserve(), Err(mpsc::error::TrySendError::Full(()))));
        assert!(pending_once(tx.reserve()), "reserve waits while permits hold every slot");
        drop(p1);
        assert_eq!(tx.capacity(), 1, "a dropped permit gives its slot back");
        p2.send(7);
        assert_eq!(tx.capacity(), 1, "a used permit's slot holds the value");
        assert_eq!(rx.recv().await, Some(7));
        assert_eq!(tx.capacity(), 2);

        let owned = tx.clone().reserve_owned().await.unwrap();
        assert_eq!(tx.capacity(), 1);
        assert!(owned.same_channel_as_sender(&tx));
        let (other_tx, _other_rx) = mpsc::channel::<u32>(1);
        assert!(!owned.same_channel_as_sender(&other_tx));
        let other = other_tx.reserve_owned().await.unwrap();
        assert!(!owned.same_channel(&other), "permits of two channels");
        drop(other);
        let second = tx.clone().reserve_owned().await.unwrap();
        assert!(owned.same_channel(&second));
        drop(second);
        let back = owned.send(8);
        assert!(back.same_channel(&tx));
        let owned = back.try_reserve_owned().unwrap();
        let back = owned.release();
        assert_eq!(tx.capacity(), 1, "released: only the value 8 holds a slot");
        assert_eq!(rx.recv().await, Some(8));
        drop(back);
        // A full channel gives the sender back from `try_reserve_owned`.
        let _a = tx.try_reserve().unwrap();
        let _b = tx.try_reserve().unwrap();
        match tx.clone().try_reserve_owned() {
            Err(mpsc::error::TrySendError::Full(s)) => assert!(s.same_channel(&tx)),
            other => panic!("expected Full: {:?}", other.map(|_| ())),
        }
    });
}

#[test]
fn mpsc_a_dropped_reserve_passes_its_granted_slot_on() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(1);
        tx.send(0).await.unwrap();
        let mut first = Box::pin(tx.reserve());
        let mut second = Box::pin(tx.reserve());
        assert!(futures::poll!(first.as_mut()).is_pending());
        assert!(futures::poll!(second.as_mut()).is_pending());
        assert_eq!(rx.recv().await, Some(0));
        // `first` was granted the slot but is dropped before it saw it: the slot moves on.
        drop(first);
        let permit = match futures::poll!(second.as_mut()) {
            std::task::Poll::Ready(p) => p.unwrap(),
            std::task::Poll::Pending => panic!("the slot was lost with the dropped reserve"),
        };
        permit.send(5);
        assert_eq!(rx.recv().await, Some(5));
        assert_eq!(tx.capacity(), 1, "no slot lost");
    });
}

#[test]
fn mpsc_weak_senders_upgrade_only_while_a_sender_lives_and_do_not_keep_the_channel_open() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(4);
        let weak = tx.downgrade();
        let weak2 = weak.clone();
        assert_eq!(tx.weak_count(), 2);
        assert_eq!(rx.sender_weak_count(), 2);
        let up = weak.upgrade().expect("a sender lives");
        assert_eq!(tx.strong_count(), 2);
        up.send(1).await.unwrap();
        drop(up);
        drop(tx);
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, None, "weak senders do not keep the channel open");
        assert!(weak2.upgrade().is_none());
        assert_eq!(weak2.strong_count(), 0);

        let (utx, mut urx) = mpsc::unbounded_channel::<u32>();
        let uweak = utx.downgrade();
        uweak.upgrade().unwrap().send(2).unwrap();
        drop(utx);
        assert!(uweak.upgrade().is_none());
        assert_eq!(urx.recv().await, Some(2));
        assert_eq!(urx.recv().await, None);
    });
}

#[test]
fn mpsc_recv_many_takes_up_to_the_limit_and_zero_only_at_the_end() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(8);
        let mut buf = Vec::new();
        assert_eq!(rx.recv_many(&mut buf, 0).await, 0, "a limit of 0 returns at once");
        for i in 0..5 {
            tx.send(i).await.unwrap();
        }
        assert_eq!(rx.recv_many(&mut buf, 3).await, 3);
        assert_eq!(buf, [0, 1, 2]);
        assert_eq!(rx.recv_many(&mut buf, 10).await, 2);
        assert_eq!(buf, [0, 1, 2, 3, 4], "appended, in order");
        let h = volt::spawn(async move {
            let mut b = Vec::new();
            let n = rx.recv_many(&mut b, 4).await;
            (n, b, rx)
        });
        volt::task::yield_now().await;
        tx.send(9).await.unwrap();
        let (n, b, mut rx) = within("recv_many waiting for a value", h).await.unwrap();
        assert!(n >= 1 && b[0] == 9, "{n} {b:?}");
        drop(tx);
        let mut rest = Vec::new();
        assert_eq!(rx.recv_many(&mut rest, 4).await, 0, "closed and drained");

        let (utx, mut urx) = mpsc::unbounded_channel::<u32>();
        for i in 0..3 {
            utx.send(i).unwrap();
        }
        drop(utx);
        let mut ub = Vec::new();
        assert_eq!(urx.recv_many(&mut ub, 100).await, 3);
        assert_eq!(urx.recv_many(&mut ub, 100).await, 0);
    });
}

#[test]
fn mpsc_try_recv_tells_empty_from_disconnected() {
    let (tx, mut rx) = mpsc::channel::<u32>(1);
    assert_eq!(rx.try_recv(), Err(mpsc::error::TryRecvError::Empty));
    tx.try_send(1).unwrap();
    assert_eq!(rx.try_recv(), Ok(1));
    drop(tx);
    assert_eq!(rx.try_recv(), Err(mpsc::error::TryRecvError::Disconnected));
    let (utx, mut urx) = mpsc::unbounded_channel::<u32>();
    assert_eq!(urx.try_recv(), Err(mpsc::error::TryRecvError::Empty));
    urx.close();
    assert_eq!(urx.try_recv(), Err(mpsc::error::TryRecvError::Disconnected));
    assert!(utx.send(1).is_err());
}

#[test]
fn mpsc_many_producers_on_two_workers_lose_and_duplicate_nothing() {
    const PRODUCERS: u64 = 8;
    const EACH: u64 = 5_000;
    let rt = rt();
    rt.block_on(async {
        let (tx, mut rx) = mpsc::channel::<(u64, u64)>(64);
        let (utx, mut urx) = mpsc::unbounded_channel::<(u64, u64)>();
        for p in 0..PRODUCERS {
            let tx = tx.clone();
            let utx = utx.clone();
            volt::spawn(async move {
                for i in 0..EACH {
                    tx.send((p, i)).await.unwrap();
                    utx.send((p, i)).unwrap();
                    if i % 97 == 0 {
                        volt::task::yield_now().await;
                    }
                }
            });
        }
        drop(tx);
        drop(utx);
        for (name, rx) in [("bounded", &mut rx as &mut dyn Recv), ("unbounded", &mut urx as &mut dyn Recv)] {
            let mut next = vec![0u64; PRODUCERS as usize];
            let mut count = 0;
            while let Some((p, i)) = within(name, rx.next()).await {
                assert_eq!(i, next[p as usize], "{name}: producer {p}'s values out of order or duplicated");
                next[p as usize] += 1;
                count += 1;
            }
            assert_eq!(count, PRODUCERS * EACH, "{name}: every value received once");
        }
    });
}

/// The next value of either receiver.
type NextFut<'a> = std::pin::Pin<Box<dyn Future<Output = Option<(u64, u64)>> + 'a>>;

/// The two receivers behind one interface for the test above.
trait Recv {
    fn next(&mut self) -> NextFut<'_>;
}
impl Recv for mpsc::Receiver<(u64, u64)> {
    fn next(&mut self) -> NextFut<'_> {
        Box::pin(self.recv())
    }
}
impl Recv for mpsc::UnboundedReceiver<(u64, u64)> {
    fn next(&mut self) -> NextFut<'_> {
        Box::pin(self.recv())
    }
}

#[test]
fn mpsc_blocking_send_and_recv_work_from_plain_threads() {
    let rt = rt();
    let (tx, mut rx) = mpsc::channel::<u32>(1);
    let producer = std::thread::spawn(move || {
        for i in 0..100 {
            tx.blocking_send(i).unwrap();
        }
    });
    let (btx, mut brx) = mpsc::channel::<u32>(1);
    let forward = rt.spawn(async move {
        while let Some(v) = rx.recv().await {
            btx.send(v).await.unwrap();
        }
    });
    let mut got = Vec::new();
    while let Some(v) = brx.blocking_recv() {
        got.push(v);
    }
    producer.join().unwrap();
    rt.block_on(forward).unwrap();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

#[test]
fn mpsc_blocking_recv_on_a_worker_panics_in_that_task_with_a_clear_message() {
    let rt = rt();
    let (_tx, mut rx) = mpsc::channel::<u32>(1);
    let err = rt.block_on(rt.spawn(async move { rx.blocking_recv() })).unwrap_err();
    assert!(err.is_panic());
    let msg = err.into_panic();
    let msg = msg.downcast_ref::<String>().map(String::as_str).unwrap_or("");
    assert!(msg.contains("worker thread"), "{msg}");
}

#[test]
fn mpsc_send_timeout_gives_the_value_back_when_no_slot_frees() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(1);
        tx.send_timeout(1, Duration::from_millis(10)).await.unwrap();
        match tx.send_timeout(2, Duration::from_millis(20)).await {
            Err(mpsc::error::SendTimeoutError::Timeout(2)) => {}
            other => panic!("expected a timeout: {other:?}"),
        }
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(tx.capacity(), 1, "the timed-out wait left no slot behind");
        drop(rx);
        assert!(matches!(
            tx.send_timeout(3, Duration::from_secs(1)).await,
            Err(mpsc::error::SendTimeoutError::Closed(3))
        ));
    });
}

#[test]
#[should_panic(expected = "buffer > 0")]
fn mpsc_a_zero_buffer_is_refused() {
    let _ = mpsc::channel::<u32>(0);
}

#[test]
fn mpsc_unbounded_keeps_order_and_ends_with_none() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::unbounded_channel::<u32>();
        for i in 0..1000 {
            tx.send(i).unwrap();
        }
        assert_eq!(rx.len(), 1000);
        drop(tx);
        for i in 0..1000 {
            assert_eq!(rx.recv().await, Some(i));
        }
        assert_eq!(rx.recv().await, None);
    });
}

#[test]
fn mpsc_poll_recv_is_cancel_safe_in_select() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(16);
        let producer = volt::spawn(async move {
            for i in 0..200 {
                tx.send(i).await.unwrap();
                if i % 7 == 0 {
                    volt::task::yield_now().await;
                }
            }
        });
        let mut got = Vec::new();
        loop {
            // A recv that loses the race is dropped; it must not have taken a value.
            let r = futures::select_biased! {
                _ = volt::task::yield_now().fuse() => continue,
                v = rx.recv().fuse() => v,
            };
            match r {
                Some(v) => got.push(v),
                None => break,
            }
        }
        producer.await.unwrap();
        assert_eq!(got, (0..200).collect::<Vec<_>>());
    });
}

// ---------------------------------------------------------------------------------------
// oneshot

#[test]
fn oneshot_delivers_the_value_or_an_error_when_the_sender_drops() {
    rt().block_on(async {
        let (tx, rx) = oneshot::channel::<u32>();
        let h = volt::spawn(rx);
        volt::task::yield_now().await;
        tx.send(5).unwrap();
        assert_eq!(within("oneshot value", h).await.unwrap(), Ok(5));

        let (tx, rx) = oneshot::channel::<u32>();
        let h = volt::spawn(rx);
        volt::task::yield_now().await;
        drop(tx);
        assert!(within("oneshot error", h).await.unwrap().is_err());
    });
}

#[test]
fn oneshot_send_returns_the_value_when_the_receiver_is_gone_and_closed_wakes() {
    rt().block_on(async {
        let (mut tx, rx) = oneshot::channel::<String>();
        assert!(!tx.is_closed());
        let h = volt::spawn(async move {
            tx.closed().await;
            tx
        });
        volt::task::yield_now().await;
        drop(rx);
        let tx = within("oneshot closed", h).await.unwrap();
        assert!(tx.is_closed());
        assert_eq!(tx.send("v".into()), Err("v".to_string()));
    });
}

#[test]
fn oneshot_try_recv_close_and_drops() {
    let (tx, mut rx) = oneshot::channel::<u32>();
    assert_eq!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty));
    tx.send(1).unwrap();
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed), "already taken");

    let (tx, mut rx) = oneshot::channel::<u32>();
    drop(tx);
    assert_eq!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed));

    // A value sent before the close can still be received; one after is refused.
    let (tx, mut rx) = oneshot::channel::<u32>();
    tx.send(2).unwrap();
    rx.close();
    assert_eq!(rx.try_recv(), Ok(2));
    let (tx, mut rx) = oneshot::channel::<u32>();
    rx.close();
    assert!(tx.is_closed());
    assert_eq!(tx.send(3), Err(3));
    assert_eq!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed));

    // A value nobody receives is dropped once.
    let drops = common::DropCount::default();
    let (tx, rx) = oneshot::channel();
    assert!(tx.send(drops.guard()).is_ok());
    assert_eq!(drops.get(), 0);
    drop(rx);
    assert_eq!(drops.get(), 1);
}

#[test]
fn oneshot_blocking_recv_from_a_thread() {
    let rt = rt();
    let (tx, rx) = oneshot::channel::<u32>();
    let t = std::thread::spawn(move || rx.blocking_recv());
    rt.spawn(async move {
        volt::time::sleep(Duration::from_millis(5)).await;
        tx.send(11).unwrap();
    });
    assert_eq!(t.join().unwrap(), Ok(11));
}

#[test]
fn oneshot_poll_closed_is_pending_until_the_receiver_goes() {
    let (mut tx, rx) = oneshot::channel::<u32>();
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(tx.poll_closed(&mut cx).is_pending());
    drop(rx);
    assert!(tx.poll_closed(&mut cx).is_ready());
}

// ---------------------------------------------------------------------------------------
// broadcast

#[test]
fn broadcast_every_receiver_sees_every_value_in_order() {
    const RECEIVERS: usize = 16;
    const VALUES: u64 = 1000;
    rt().block_on(async {
        // Room for every value: no receiver can lag, however slow.
        let (tx, _) = broadcast::channel::<u64>(1024);
        let mut hs = Vec::new();
        for _ in 0..RECEIVERS {
            let mut rx = tx.subscribe();
            hs.push(volt::spawn(async move {
                let mut got = Vec::new();
                loop {
                    match rx.recv().await {
                        Ok(v) => got.push(v),
                        Err(broadcast::error::RecvError::Closed) => return got,
                        Err(e) => panic!("{e}"),
                    }
                }
            }));
        }
        assert_eq!(tx.receiver_count(), RECEIVERS);
        for v in 0..VALUES {
            assert_eq!(tx.send(v).unwrap(), RECEIVERS);
            if v % 50 == 0 {
                volt::task::yield_now().await;
            }
        }
        drop(tx);
        for h in hs {
            assert_eq!(within("a receiver", h).await.unwrap(), (0..VALUES).collect::<Vec<_>>());
        }
    });
}

#[test]
fn broadcast_a_lagging_receiver_gets_lagged_once_then_the_oldest_kept_value() {
    let (tx, mut rx) = broadcast::channel::<u32>(2);
    for v in 1..=5 {
        tx.send(v).unwrap();
    }
    assert_eq!(rx.len(), 5);
    assert_eq!(tx.len(), 2, "only the capacity is kept");
    assert_eq!(rx.try_recv(), Err(broadcast::error::TryRecvError::Lagged(3)));
    assert_eq!(rx.try_recv(), Ok(4));
    assert_eq!(rx.try_recv(), Ok(5));
    assert_eq!(rx.try_recv(), Err(broadcast::error::TryRecvError::Empty));
    assert!(tx.is_empty(), "seen by every receiver: nothing held");

    rt().block_on(async {
        let (tx, mut rx) = broadcast::channel::<u32>(4);
        for v in 0..10 {
            tx.send(v).unwrap();
        }
        assert_eq!(rx.recv().await, Err(broadcast::error::RecvError::Lagged(6)));
        for v in 6..10 {
            assert_eq!(rx.recv().await, Ok(v));
        }
        drop(tx);
        assert_eq!(rx.recv().await, Err(broadcast::error::RecvError::Closed));
    });
}

#[test]
fn broadcast_closed_after_the_senders_drop_and_the_values_are_received() {
    rt().block_on(async {
        let (tx, mut rx) = broadcast::channel::<u32>(8);
        let tx2 = tx.clone();
        tx.send(1).unwrap();
        drop(tx);
        let h = volt::spawn(async move {
            let a = rx.recv().await;
            let b = rx.recv().await;
            (a, b)
        });
        volt::task::yield_now().await;
        drop(tx2);
        let (a, b) = within("broadcast close", h).await.unwrap();
        assert_eq!(a, Ok(1));
        assert_eq!(b, Err(broadcast::error::RecvError::Closed));
    });
}

#[test]
fn broadcast_send_needs_a_receiver_and_subscribers_see_only_later_values() {
    let (tx, rx) = broadcast::channel::<u32>(4);
    drop(rx);
    assert_eq!(tx.receiver_count(), 0);
    assert_eq!(tx.send(1).unwrap_err().0, 1);
    assert!(tx.is_empty(), "a refused value is not kept");
    let mut a = tx.subscribe();
    tx.send(2).unwrap();
    let mut b = tx.subscribe();
    let mut c = a.resubscribe();
    tx.send(3).unwrap();
    assert_eq!(a.try_recv(), Ok(2));
    assert_eq!(a.try_recv(), Ok(3));
    assert_eq!(b.try_recv(), Ok(3));
    assert_eq!(c.try_recv(), Ok(3));
    assert!(a.same_channel(&b));
    assert!(tx.same_channel(&tx.clone()));
    assert!(b.is_empty());
}

#[test]
fn broadcast_values_are_dropped_once_every_receiver_saw_them() {
    let value = Arc::new(());
    let (tx, mut a) = broadcast::channel::<Arc<()>>(4);
    let mut b = tx.subscribe();
    tx.send(value.clone()).unwrap();
    assert_eq!(Arc::strong_count(&value), 2);
    drop(a.try_recv().unwrap());
    assert_eq!(Arc::strong_count(&value), 2, "b has yet to see it");
    drop(b.try_recv().unwrap());
    assert_eq!(Arc::strong_count(&value), 1, "dropped after the last receiver");
    tx.send(value.clone()).unwrap();
    drop(a);
    drop(b);
    assert_eq!(Arc::strong_count(&value), 1, "a receiver that drops lets its unseen values go");
    assert_eq!(tx.len(), 0);
}

#[test]
fn broadcast_sender_closed_waits_for_every_receiver() {
    rt().block_on(async {
        let (tx, rx) = broadcast::channel::<u32>(2);
        let rx2 = rx.resubscribe();
        let mut closed = Box::pin(tx.closed());
        assert!(futures::poll!(closed.as_mut()).is_pending());
        drop(rx);
        assert!(futures::poll!(closed.as_mut()).is_pending());
        drop(rx2);
        within("broadcast closed", closed).await;
    });
}

// ---------------------------------------------------------------------------------------
// watch

#[test]
fn watch_changed_after_send_not_after_borrow_and_update_and_err_when_the_sender_drops() {
    rt().block_on(async {
        let (tx, mut rx) = watch::channel("a");
        assert!(!rx.has_changed().unwrap(), "the initial value counts as seen");
        assert!(pending_once(rx.changed()));
        tx.send("b").unwrap();
        assert!(rx.has_changed().unwrap());
        assert!(rx.borrow().has_changed());
        assert_eq!(*rx.borrow(), "b");
        assert!(rx.has_changed().unwrap(), "borrow does not mark seen");
        {
            let r = rx.borrow_and_update();
            assert_eq!(*r, "b");
            assert!(r.has_changed());
        }
        assert!(!rx.has_changed().unwrap());
        assert!(pending_once(rx.changed()), "nothing new after borrow_and_update");

        let h = volt::spawn(async move {
            rx.changed().await.unwrap();
            let v = *rx.borrow_and_update();
            (v, rx.changed().await)
        });
        volt::task::yield_now().await;
        tx.send("c").unwrap();
        let mut r2 = tx.subscribe();
        drop(tx);
        let (v, end) = within("watch receiver", h).await.unwrap();
        assert_eq!(v, "c");
        assert!(end.is_err(), "Err once the sender is gone");
        assert!(r2.has_changed().is_err());
        assert!(r2.changed().await.is_err());
    });
}

#[test]
fn watch_an_unseen_value_is_reported_even_after_the_sender_dropped() {
    rt().block_on(async {
        let (tx, mut rx) = watch::channel(0);
        tx.send(1).unwrap();
        drop(tx);
        assert!(rx.changed().await.is_ok(), "the last value was not seen yet");
        assert_eq!(*rx.borrow(), 1);
        assert!(rx.changed().await.is_err());
    });
}

#[test]
fn a_permit_whose_send_meets_a_panicking_waker_keeps_its_slot_used() {
    struct PanickingWaker;
    impl std::task::Wake for PanickingWaker {
        fn wake(self: Arc<Self>) {
            panic!("waker panicked");
        }
    }
    let (tx, mut rx) = mpsc::channel(1);
    let waker = std::task::Waker::from(Arc::new(PanickingWaker));
    assert!(rx.poll_recv(&mut std::task::Context::from_waker(&waker)).is_pending());
    let permit = tx.try_reserve().unwrap();
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| permit.send(7))).is_err());
    // The value is in, and its slot is not handed out a second time (it was: capacity 1
    // with one value queued in a channel of one).
    assert_eq!((tx.capacity(), rx.len()), (0, 1));
    assert!(tx.try_send(8).is_err());
    assert_eq!(rx.try_recv(), Ok(7));
    assert_eq!(tx.capacity(), 1);
}

#[test]
fn watch_receiver_is_closed_once_every_sender_is_gone_and_a_default_sender_starts_at_default() {
    let (tx, rx) = watch::channel(1);
    let tx2 = tx.clone();
    assert!(!rx.is_closed());
    drop(tx);
    assert!(!rx.is_closed(), "one sender is left");
    tx2.send(2).unwrap();
    drop(tx2);
    assert!(rx.is_closed());
    assert_eq!(*rx.borrow(), 2, "the last value stays readable");
    assert!(rx.clone().is_closed(), "a clone is closed too");

    let tx = watch::Sender::<Vec<u8>>::default();
    assert!(tx.borrow().is_empty());
    assert!(tx.is_closed(), "no receiver yet");
    let rx = tx.subscribe();
    assert!(!rx.is_closed() && !tx.is_closed());
    tx.send(vec![7]).unwrap();
    assert_eq!(*rx.borrow(), [7]);
}

#[test]
fn watch_send_variants_and_their_notifications() {
    let (tx, mut rx) = watch::channel(vec![1]);
    assert_eq!(tx.send_replace(vec![2]), vec![1]);
    assert!(rx.has_changed().unwrap());
    rx.mark_unchanged();
    assert!(!rx.has_changed().unwrap());
    tx.send_modify(|v| v.push(3));
    assert!(rx.has_changed().unwrap());
    assert_eq!(*rx.borrow_and_update(), vec![2, 3]);
    assert!(!tx.send_if_modified(|_| false));
    assert!(!rx.has_changed().unwrap(), "an unmodified value notifies nobody");
    assert!(tx.send_if_modified(|v| {
        v.clear();
        true
    }));
    assert!(rx.has_changed().unwrap());
    rx.mark_unchanged();
    rx.mark_changed();
    assert!(rx.has_changed().unwrap());
    assert_eq!(*tx.borrow(), Vec::<i32>::new());
    assert!(!tx.borrow().has_changed());

    // With no receiver, `send` refuses and keeps the old value; `send_replace` stores.
    let (tx, rx) = watch::channel(0);
    assert_eq!(tx.receiver_count(), 1);
    drop(rx);
    assert!(tx.is_closed());
    assert_eq!(tx.send(5).unwrap_err().0, 5);
    assert_eq!(*tx.borrow(), 0);
    tx.send_replace(6);
    let rx = tx.subscribe();
    assert_eq!(*rx.borrow(), 6);
    assert!(!rx.has_changed().unwrap(), "a subscriber has seen the current value");
    let rx2 = rx.clone();
    assert!(rx.same_channel(&rx2));
    assert_eq!(tx.receiver_count(), 2);
    let tx2 = tx.clone();
    assert_eq!(tx.sender_count(), 2);
    assert!(tx.same_channel(&tx2));
}

#[test]
fn watch_wait_for_checks_the_current_value_then_each_new_one() {
    rt().block_on(async {
        let (tx, mut rx) = watch::channel(0u32);
        assert_eq!(*rx.wait_for(|v| *v == 0).await.unwrap(), 0, "the current value first");
        let h = volt::spawn(async move {
            let v = *rx.wait_for(|v| *v >= 3).await.unwrap();
            (v, rx)
        });
        for i in 1..=5 {
            tx.send(i).unwrap();
            volt::task::yield_now().await;
        }
        let (v, mut rx) = within("wait_for", h).await.unwrap();
        assert!((3..=5).contains(&v), "{v}");
        drop(tx);
        assert!(rx.wait_for(|v| *v == 100).await.is_err(), "closed and never satisfied");
        assert_eq!(*rx.wait_for(|v| *v == 5).await.unwrap(), 5, "satisfied even when closed");
    });
}

#[test]
fn watch_sender_closed_waits_for_every_receiver() {
    rt().block_on(async {
        let (tx, rx) = watch::channel(());
        let rx2 = rx.clone();
        let mut closed = Box::pin(tx.closed());
        assert!(futures::poll!(closed.as_mut()).is_pending());
        drop(rx);
        assert!(futures::poll!(closed.as_mut()).is_pending());
        drop(rx2);
        within("watch closed", closed).await;
        assert!(tx.is_closed());
    });
}

#[test]
fn watch_many_receivers_on_two_workers_all_see_the_last_value() {
    rt().block_on(async {
        let (tx, rx) = watch::channel(0u64);
        let mut hs = Vec::new();
        for _ in 0..8 {
            let mut rx = rx.clone();
            hs.push(volt::spawn(async move {
                let mut last = 0;
                while rx.changed().await.is_ok() {
                    let v = *rx.borrow_and_update();
                    assert!(v >= last, "versions go forward");
                    last = v;
                }
                last
            }));
        }
        drop(rx);
        for i in 1..=500 {
            tx.send(i).unwrap();
            if i % 25 == 0 {
                volt::task::yield_now().await;
            }
        }
        drop(tx);
        for h in hs {
            assert_eq!(within("watch receiver", h).await.unwrap(), 500, "the last value is never missed");
        }
    });
}

// ---------------------------------------------------------------------------------------
// Named waits

fn telemetry_rt() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap()
}

fn wait_for_tasks(rt: &volt::Runtime, what: &str, pred: impl Fn(&[TaskInfo]) -> bool) -> Vec<TaskInfo> {
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

fn spawn_named<F>(rt: &volt::Runtime, name: &str, f: F) -> volt::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    volt::task::Builder::new().name(name).spawn_on(f, rt.handle())
}

#[test]
fn each_channel_wait_is_named_in_the_task_list() {
    let rt = telemetry_rt();
    let (mtx, mut mrx) = mpsc::channel::<u32>(64);
    let (_utx, mut urx) = mpsc::unbounded_channel::<u32>();
    let (ftx, _frx) = mpsc::channel::<u32>(64);
    for i in 0..64 {
        ftx.try_send(i).unwrap();
    }
    let (otx, orx) = oneshot::channel::<u32>();
    let (mut otx2, _orx2) = oneshot::channel::<u32>();
    let (btx, mut brx) = broadcast::channel::<u32>(4);
    let (wtx, mut wrx) = watch::channel(0u32);
    let mut wrx2 = wrx.clone();
    let ftx2 = ftx.clone();
    let ftx3 = ftx.clone();
    let mtx2 = mtx.clone();

    let mut hs = Vec::new();
    hs.push(spawn_named(&rt, "mpsc-recv", async move { mrx.recv().await.map(|_| ()) }));
    hs.push(spawn_named(&rt, "mpsc-unbounded-recv", async move { urx.recv().await.map(|_| ()) }));
    hs.push(spawn_named(&rt, "mpsc-send", async move { ftx.send(1).await.ok() }));
    hs.push(spawn_named(&rt, "mpsc-reserve", async move { ftx2.reserve().await.map(|_| ()).ok() }));
    hs.push(spawn_named(&rt, "mpsc-closed", async move {
        mtx2.closed().await;
        Some(())
    }));
    hs.push(spawn_named(&rt, "oneshot-recv", async move { orx.await.ok().map(|_| ()) }));
    hs.push(spawn_named(&rt, "oneshot-closed", async move {
        otx2.closed().await;
        Some(())
    }));
    hs.push(spawn_named(&rt, "broadcast-recv", async move { brx.recv().await.ok().map(|_| ()) }));
    hs.push(spawn_named(&rt, "watch-changed", async move { wrx.changed().await.ok() }));
    hs.push(spawn_named(&rt, "watch-wait-for", async move { wrx2.wait_for(|v| *v == 99).await.ok().map(|_| ()) }));

    let expect = [
        ("mpsc-recv", "recv mpsc (empty)"),
        ("mpsc-unbounded-recv", "recv mpsc (empty)"),
        ("mpsc-send", "send mpsc (full, 64)"),
        ("mpsc-reserve", "reserve mpsc (full, 64)"),
        ("mpsc-closed", "closed mpsc"),
        ("oneshot-recv", "recv oneshot"),
        ("oneshot-closed", "closed oneshot"),
        ("broadcast-recv", "recv broadcast"),
        ("watch-changed", "changed watch"),
        ("watch-wait-for", "wait_for watch"),
    ];
    let named = |ts: &[TaskInfo], n: &str| ts.iter().find(|t| t.name.as_deref() == Some(n)).cloned();
    let tasks = wait_for_tasks(&rt, "every channel task idle with its wait named", |ts| {
        expect.iter().all(|(n, label)| {
            named(ts, n)
                .is_some_and(|t| t.state == TaskState::Idle && t.waiting_on == Some(WaitReason::Label((*label).into())))
        })
    });
    for (n, label) in expect {
        let t = named(&tasks, n).unwrap();
        assert_eq!(t.waiting_on.as_ref().unwrap().to_string(), label, "{n}");
    }

    // Release every wait; each task ends.
    mtx.try_send(1).unwrap();
    drop(mtx);
    drop(_utx);
    drop(ftx3);
    otx.send(1).unwrap();
    btx.send(1).unwrap();
    wtx.send(99).unwrap();
    drop(_orx2);
    // The full channel's receiver drops: the waiting send and reserve fail, closed() ends.
    drop(_frx);
    rt.block_on(async {
        for h in hs {
            within("a released channel task", h).await.unwrap();
        }
    });
}

// ---------------------------------------------------------------------------------------
// Added: permits in bulk, a closed oneshot, and cooperative receives.

#[test]
fn mpsc_reserve_many_waits_for_all_its_slots_in_order() {
    rt().block_on(async {
        let (tx, mut rx) = mpsc::channel::<u32>(3);
        assert!(tx.reserve_many(4).await.is_err(), "more than the capacity is refused");
        assert!(matches!(tx.try_reserve_many(4), Err(mpsc::error::TrySendError::Full(()))));
        tx.send(0).await.unwrap();
        tx.send(1).await.unwrap();
        // Needs 3 while 1 is free: it takes that one and waits for two more; a later
        // `try_send` cannot take a slot ahead of it.
        let mut many = Box::pin(tx.reserve_many(3));
        assert!(futures::poll!(many.as_mut()).is_pending());
        assert!(matches!(tx.try_send(9), Err(mpsc::error::TrySendError::Full(9))));
        assert_eq!(rx.recv().await, Some(0));
        assert!(futures::poll!(many.as_mut()).is_pending());
        assert_eq!(rx.recv().await, Some(1));
        let permits = match futures::poll!(many.as_mut()) {
            std::task::Poll::Ready(p) => p.unwrap(),
            std::task::Poll::Pending => panic!("three slots were free"),
        };
        assert_eq!(permits.len(), 3);
        let mut permits = permits;
        permits.next().unwrap().send(10);
        drop(permits);
        assert_eq!(tx.capacity(), 2, "the two permits not used came back");
        assert_eq!(rx.recv().await, Some(10));
        assert_eq!(tx.try_reserve_many(3).unwrap().count(), 3);
        assert_eq!(tx.capacity(), 3);
    });
}

#[test]
fn oneshot_a_closed_receiver_without_a_value_errs_at_once() {
    rt().block_on(async {
        let (tx, mut rx) = oneshot::channel::<u32>();
        rx.close();
        assert!(tx.is_closed());
        assert!(within("closed oneshot", rx).await.is_err());
        assert_eq!(tx.send(1), Err(1));
    });
}

/// Run `hog` (a loop whose receives are always ready) on a one-worker runtime beside a
/// task that tells it to stop: the stop can only run if the receives yield.
fn receives_yield<F>(hog: impl FnOnce(Arc<std::sync::atomic::AtomicBool>) -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let h = rt.spawn(hog(stop.clone()));
    let s = stop.clone();
    rt.spawn(async move { s.store(true, SeqCst) });
    rt.block_on(async { within("the hog to let the other task run", h).await.unwrap() });
    assert!(stop.load(SeqCst));
}

#[test]
fn always_ready_receives_yield_to_other_tasks() {
    use std::sync::atomic::Ordering::SeqCst;
    receives_yield(|stop| async move {
        let (tx, mut rx) = mpsc::unbounded_channel();
        while !stop.load(SeqCst) {
            tx.send(()).unwrap();
            rx.recv().await.unwrap();
        }
    });
    receives_yield(|stop| async move {
        let (tx, mut rx) = broadcast::channel(8);
        while !stop.load(SeqCst) {
            tx.send(()).unwrap();
            rx.recv().await.unwrap();
        }
    });
    receives_yield(|stop| async move {
        let (tx, mut rx) = watch::channel(());
        drop(tx);
        while !stop.load(SeqCst) {
            assert!(rx.changed().await.is_err());
        }
    });
}

/// Waits that end at once (a closed watch channel's `changed` and `wait_for`, a watch
/// sender's `closed` with no receiver) spend the budget of the poll, so a `yield_now`
/// raced against a loop of them in a biased `select!` gets its turn: in a task, and in
/// `block_on`, whose polls have a budget each, as Tokio's do. Each case runs on a thread
/// of its own and is given 10 s: one that never yields fails the test instead of hanging.
#[test]
fn loops_of_waits_that_end_at_once_yield_in_tasks_and_in_block_on() {
    fn case(name: &'static str, current_thread: bool, in_task: bool, which: u8) {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = if current_thread {
                volt::runtime::Builder::new_current_thread().build().unwrap()
            } else {
                volt::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap()
            };
            let work = async move {
                let (tx, mut rx) = volt::sync::watch::channel(0u8);
                match which {
                    0 => {
                        drop(tx);
                        volt::select! {
                            biased;
                            _ = async { loop { assert!(rx.changed().await.is_err()); } } => {}
                            _ = volt::task::yield_now() => {}
                        }
                    }
                    1 => {
                        drop(tx);
                        volt::select! {
                            biased;
                            _ = async { loop { assert!(rx.wait_for(|v| *v == 1).await.is_err()); } } => {}
                            _ = volt::task::yield_now() => {}
                        }
                    }
                    _ => {
                        drop(rx);
                        volt::select! {
                            biased;
                            _ = async { loop { tx.closed().await; } } => {}
                            _ = volt::task::yield_now() => {}
                        }
                    }
                }
            };
            if in_task {
                rt.block_on(rt.spawn(work)).unwrap();
            } else {
                rt.block_on(work);
            }
            let _ = done_tx.send(());
        });
        if done_rx.recv_timeout(std::time::Duration::from_secs(10)).is_err() {
            panic!("{name} (current thread: {current_thread}, in a task: {in_task}) never yielded");
        }
    }
    for current_thread in [false, true] {
        for in_task in [false, true] {
            case("changed on a closed channel", current_thread, in_task, 0);
            case("wait_for on a closed channel", current_thread, in_task, 1);
            case("closed with no receiver", current_thread, in_task, 2);
        }
    }
}
