//! The receiver's batch and the freed-slot count with plain threads (Miri runs these):
//! senders that wait on a small channel while the receiver takes values in batches.

use super::channel;

/// Two threads send through four slots to a receiver on a third; each value arrives
/// once, each sender's in the order it sent them, and every slot comes back.
#[test]
fn senders_that_wait_on_a_small_channel_lose_nothing_and_get_every_slot_back() {
    const EACH: u64 = if cfg!(miri) { 30 } else { 5_000 };
    let (tx, mut rx) = channel::<(u64, u64)>(4);
    let senders: Vec<_> = (0..2)
        .map(|who| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for n in 0..EACH {
                    tx.blocking_send((who, n)).unwrap();
                }
            })
        })
        .collect();
    let mut next = [0u64; 2];
    let mut got = 0;
    while got < 2 * EACH {
        let (who, n) = rx.blocking_recv().expect("a sender lives");
        assert_eq!(n, next[who as usize], "sender {who}'s values in order");
        next[who as usize] += 1;
        got += 1;
    }
    for s in senders {
        s.join().unwrap();
    }
    assert_eq!(tx.capacity(), 4, "every slot came back");
    drop(tx);
    assert_eq!(rx.blocking_recv(), None);
}

/// `recv_many` takes from the batch and the shared buffer alike, and `len` counts both.
#[test]
fn recv_many_and_len_see_the_batch_and_the_buffer() {
    let (tx, mut rx) = channel::<u64>(8);
    for n in 0..3 {
        tx.try_send(n).unwrap();
    }
    // The first receive makes all three the receiver's batch.
    assert_eq!(rx.try_recv(), Ok(0));
    tx.try_send(3).unwrap();
    assert_eq!(rx.len(), 3);
    assert_eq!(tx.capacity(), 5);
    let mut out = Vec::new();
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert_eq!(rx.poll_recv_many(&mut cx, &mut out, 2), std::task::Poll::Ready(2));
    assert_eq!(out, vec![1, 2]);
    assert_eq!(tx.capacity(), 7);
    tx.try_send(4).unwrap();
    // The batch is empty: the first value comes with the buffer swapped in.
    assert_eq!(rx.poll_recv_many(&mut cx, &mut out, 10), std::task::Poll::Ready(2));
    assert_eq!(out, vec![1, 2, 3, 4]);
    assert_eq!(tx.capacity(), 8);
    assert!(rx.is_empty());
    // One from the batch and the rest from the buffer, in one call.
    for n in 5..8 {
        tx.try_send(n).unwrap();
    }
    assert_eq!(rx.try_recv(), Ok(5));
    tx.try_send(8).unwrap();
    out.clear();
    assert_eq!(rx.poll_recv_many(&mut cx, &mut out, 10), std::task::Poll::Ready(3));
    assert_eq!(out, vec![6, 7, 8]);
    assert_eq!(tx.capacity(), 8);
}

/// A slot the receiver freed without the lock counts for `try_reserve`, and closing
/// ends the stream once the buffer is drained and no permit is out.
#[test]
fn freed_slots_count_for_try_reserve_and_close_ends_the_stream() {
    use super::error::TryRecvError;
    let (tx, mut rx) = channel::<u64>(1);
    tx.try_send(0).unwrap();
    assert_eq!(rx.try_recv(), Ok(0));
    let permit = tx.try_reserve().expect("the received value's slot is free");
    drop(permit);
    rx.close();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected), "closed, drained, no permit out");
}

/// More waiting senders than one round of wakes holds get their slots from one
/// `recv_many`, and no waker runs under the channel's lock: each of these wakers takes
/// it (through `capacity`), which would deadlock there.
#[test]
fn recv_many_frees_slots_to_many_waiters_and_wakes_them_without_the_lock() {
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    struct LocksOnWake {
        tx: super::Sender<u64>,
        woken: Arc<AtomicUsize>,
    }
    impl Wake for LocksOnWake {
        fn wake(self: Arc<Self>) {
            let _ = self.tx.capacity();
            self.woken.fetch_add(1, Ordering::Relaxed);
        }
    }

    const CAP: usize = 40;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (tx, mut rx) = channel::<u64>(CAP);
        for n in 0..CAP as u64 {
            tx.try_send(n).unwrap();
        }
        let woken = Arc::new(AtomicUsize::new(0));
        let waker = Waker::from(Arc::new(LocksOnWake { tx: tx.clone(), woken: woken.clone() }));
        let mut cx = Context::from_waker(&waker);
        let mut sends: Vec<_> = (0..CAP as u64).map(|n| Box::pin(tx.send(100 + n))).collect();
        for s in &mut sends {
            assert!(s.as_mut().poll(&mut cx).is_pending(), "the channel is full");
        }
        let mut out = Vec::new();
        let noop = Context::from_waker(Waker::noop());
        let mut noop = noop;
        assert_eq!(rx.poll_recv_many(&mut noop, &mut out, CAP), Poll::Ready(CAP));
        assert_eq!(woken.load(Ordering::Relaxed), CAP, "every waiting sender was woken");
        for s in &mut sends {
            assert!(matches!(s.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
        }
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("recv_many finished (a waker run under the channel's lock deadlocks it)");
}
