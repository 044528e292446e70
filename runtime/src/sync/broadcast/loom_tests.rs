//! Loom models of the receive protocol: receivers reading slots side by side
//! while a sender writes the next one and takes the waiters under the tail lock. Every
//! receiver gets every value once, in order, then `Closed`, and every value is dropped.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p volt --lib --release sync::broadcast`.

use super::channel;
use super::error::RecvError;
use super::Receiver;
use crate::sync::loom_support::block_on;

fn recv_all(mut rx: Receiver<std::sync::Arc<u64>>) -> Vec<u64> {
    let mut got = Vec::new();
    loop {
        match block_on(rx.recv()) {
            Ok(v) => got.push(*v),
            Err(RecvError::Closed) => return got,
            Err(RecvError::Lagged(n)) => panic!("lagged by {n} with room for every value"),
        }
    }
}

/// Send the values 1 and 2 from a thread of their own; the caller keeps a clone of each
/// (to check that the channel let them go) and the thread's handle.
fn send_two_from_a_thread(
    tx: super::Sender<std::sync::Arc<u64>>,
) -> (std::sync::Arc<u64>, std::sync::Arc<u64>, loom::thread::JoinHandle<()>) {
    let v1 = std::sync::Arc::new(1);
    let v2 = std::sync::Arc::new(2);
    let (s1, s2) = (v1.clone(), v2.clone());
    let t = loom::thread::spawn(move || {
        tx.send(s1).unwrap();
        tx.send(s2).unwrap();
    });
    (v1, v2, t)
}

#[test]
fn loom_two_receivers_get_every_value_once_and_values_are_dropped() {
    crate::loom_tests::model_bounded(2, || {
        let (tx, a) = channel::<std::sync::Arc<u64>>(2);
        let b = tx.subscribe();
        let (v1, v2, t) = send_two_from_a_thread(tx);
        let rb = loom::thread::spawn(move || recv_all(b));
        assert_eq!(recv_all(a), vec![1, 2]);
        assert_eq!(rb.join().unwrap(), vec![1, 2]);
        t.join().unwrap();
        assert_eq!(std::sync::Arc::strong_count(&v1), 1, "the first value was dropped");
        assert_eq!(std::sync::Arc::strong_count(&v2), 1, "the second value was dropped");
    });
}

#[test]
fn loom_a_lagging_receiver_sees_lagged_or_every_value() {
    crate::loom_tests::model_bounded(2, || {
        let (tx, mut rx) = channel::<u64>(1);
        let t = loom::thread::spawn(move || {
            tx.send(1).unwrap();
            tx.send(2).unwrap();
        });
        let mut got = Vec::new();
        loop {
            match block_on(rx.recv()) {
                Ok(v) => got.push(v),
                Err(RecvError::Lagged(n)) => got.push(100 + n),
                Err(RecvError::Closed) => break,
            }
        }
        t.join().unwrap();
        // Either it read 1 before 2 overwrote it, or it lagged by one and read 2.
        assert!(got == vec![1, 2] || got == vec![101, 2], "{got:?}");
    });
}

#[test]
fn loom_values_are_dropped_once_whoever_sees_them_last() {
    // Capacity 1: the second send overwrites the first value while receiver `a` may be
    // reading it and receiver `b` is being dropped, so the last reader, the dropped
    // receiver and the sender race to let each value go.
    crate::loom_tests::model_bounded(2, || {
        let (tx, mut a) = channel::<std::sync::Arc<u64>>(1);
        let b = tx.subscribe();
        let (v1, v2, t) = send_two_from_a_thread(tx);
        let tb = loom::thread::spawn(move || drop(b));
        let mut got = Vec::new();
        loop {
            match block_on(a.recv()) {
                Ok(v) => got.push(*v),
                Err(RecvError::Lagged(n)) => got.push(100 + n),
                Err(RecvError::Closed) => break,
            }
        }
        t.join().unwrap();
        tb.join().unwrap();
        assert!(got == vec![1, 2] || got == vec![101, 2], "{got:?}");
        // `a` still holds the channel: each value went when the last of its receivers
        // saw it or left, or when the second send overwrote it.
        assert_eq!(std::sync::Arc::strong_count(&v1), 1, "the first value was dropped");
        assert_eq!(std::sync::Arc::strong_count(&v2), 1, "the second value was dropped");
        drop(a);
    });
}

#[test]
fn loom_len_never_drops_a_value_under_the_tail_lock() {
    // A value whose destructor takes the channel's tail lock (through a weak sender).
    // `len` runs under that lock; had it entered the slot, it could be the last to
    // leave it, drop the value there and deadlock on itself.
    struct D(Option<super::WeakSender<D>>);
    impl Clone for D {
        fn clone(&self) -> Self {
            D(None)
        }
    }
    impl Drop for D {
        fn drop(&mut self) {
            if let Some(w) = &self.0 {
                let _ = w.strong_count();
            }
        }
    }
    crate::loom_tests::model_bounded(3, || {
        let (tx, mut a) = channel::<D>(2);
        tx.send(D(Some(tx.downgrade()))).unwrap();
        let t = loom::thread::spawn(move || {
            assert!(a.try_recv().is_ok());
            a
        });
        assert!(tx.len() <= 1);
        let a = t.join().unwrap();
        // `a` saw the value, so it went, and with it the weak sender it held.
        assert_eq!(tx.weak_count(), 0);
        assert_eq!(tx.len(), 0);
        drop(a);
    });
}

/// Receive until `Closed`, checking that the values rise; returns the last value and how
/// many were received or counted in a lag.
fn recv_in_order(rx: &mut Receiver<std::sync::Arc<u64>>) -> (u64, u64) {
    let (mut last, mut accounted) = (0, 0);
    loop {
        match block_on(rx.recv()) {
            Ok(v) => {
                assert!(*v > last, "in order: {} after {last}", *v);
                last = *v;
                accounted += 1;
            }
            Err(RecvError::Lagged(n)) => accounted += n,
            Err(RecvError::Closed) => return (last, accounted),
        }
    }
}

#[test]
fn loom_a_channel_turns_careful_and_back_while_a_receiver_reads() {
    // Capacity 1 and three sends: a send that overwrites the value the receiver has yet
    // to read makes the channel careful (waiting out a read without entering), and a
    // send after it caught up lets it read without entering again (after one calm send
    // under loom). Whatever the interleaving, the receiver sees the values in order,
    // lags by the count it missed, and every value goes once.
    crate::loom_tests::model_bounded(2, || {
        let (tx, mut rx) = channel::<std::sync::Arc<u64>>(1);
        let vals: Vec<_> = (1..=3).map(std::sync::Arc::new).collect();
        let sent = vals.clone();
        let t = loom::thread::spawn(move || {
            for v in sent {
                tx.send(v).unwrap();
            }
        });
        let (last, seen) = recv_in_order(&mut rx);
        t.join().unwrap();
        assert_eq!(last, 3, "the last value is never overwritten");
        assert_eq!(seen, 3, "each value received or counted as missed");
        drop(rx);
        for v in &vals {
            assert_eq!(std::sync::Arc::strong_count(v), 1, "value {} was dropped", **v);
        }
    });
}

#[test]
fn loom_a_send_overwriting_a_lagging_receivers_value_while_another_reads() {
    // Capacity 2, three sends: the third overwrites the first value, which receiver `b`
    // (never reading) has yet to see, so the channel turns careful while receiver `a`,
    // on its own thread, may be reading another position without entering. The sender
    // waits only for reads of the position it overwrites; `a` still sees the values in
    // order, each received or counted in a lag, and every value goes once.
    crate::loom_tests::model_bounded(2, || {
        let (tx, mut a) = channel::<std::sync::Arc<u64>>(2);
        let b = tx.subscribe();
        let vals: Vec<_> = (1..=3).map(std::sync::Arc::new).collect();
        let sent = vals.clone();
        let reader = loom::thread::spawn(move || recv_in_order(&mut a));
        for v in sent {
            tx.send(v).unwrap();
        }
        drop(tx);
        let (last, accounted) = reader.join().unwrap();
        assert_eq!((last, accounted), (3, 3));
        drop(b);
        for v in &vals {
            assert_eq!(std::sync::Arc::strong_count(v), 1, "value {} was dropped", **v);
        }
    });
}
