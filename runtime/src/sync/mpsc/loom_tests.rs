//! Loom models of the channel's hand-offs: a slot freed by the receiver reaches a
//! waiting sender (whether the receiver counted it without the lock before the sender
//! began to wait, or brought it to the lock after), the receiver's batch keeps the
//! order and the count of free slots, and a value or the end of the stream reaches a
//! waiting receiver, in every interleaving. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p volt --lib --release sync::mpsc`.

use super::channel;
use crate::sync::loom_support::block_on;

#[test]
fn loom_two_senders_on_one_slot_lose_nothing() {
    // Three threads on one mutex: bounded preemptions keep it within CI's time.
    crate::loom_tests::model_bounded(2, || {
        let (tx, mut rx) = channel::<u64>(1);
        let tx2 = tx.clone();
        let a = loom::thread::spawn(move || block_on(tx.send(1)).unwrap());
        let b = loom::thread::spawn(move || block_on(tx2.send(2)).unwrap());
        let mut got = Vec::new();
        while let Some(v) = block_on(rx.recv()) {
            got.push(v);
        }
        a.join().unwrap();
        b.join().unwrap();
        crate::loom_tests::assert_each_once(got, vec![1, 2]);
    });
}

#[test]
fn loom_a_slot_freed_as_a_sender_begins_to_wait_reaches_it() {
    // The receiver frees the one slot, without the lock, while the sender finds the
    // channel full and queues: the slot must reach the sender either way (a lost slot
    // leaves the sender asleep, which loom reports as a deadlock).
    crate::loom_tests::model(|| {
        let (tx, mut rx) = channel::<u64>(1);
        tx.try_send(0).unwrap();
        let t = loom::thread::spawn(move || {
            block_on(tx.send(1)).unwrap();
            tx
        });
        assert_eq!(block_on(rx.recv()), Some(0));
        let tx = t.join().unwrap();
        assert_eq!(block_on(rx.recv()), Some(1));
        // Both slots came back, whoever counted them.
        assert_eq!(tx.capacity(), 1);
        drop(tx);
        assert_eq!(block_on(rx.recv()), None);
    });
}

#[test]
fn loom_the_receivers_batch_keeps_order_and_frees_each_slot_once() {
    // Two values become the receiver's batch at once; a sender waits for a slot of the
    // two meanwhile and sends a third.
    crate::loom_tests::model_bounded(2, || {
        let (tx, mut rx) = channel::<u64>(2);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        let t = loom::thread::spawn(move || {
            block_on(tx.send(3)).unwrap();
            assert!(tx.capacity() <= 2);
        });
        let mut got = Vec::new();
        while let Some(v) = block_on(rx.recv()) {
            got.push(v);
        }
        t.join().unwrap();
        assert_eq!(got, vec![1, 2, 3]);
    });
}

#[test]
fn loom_a_dropped_receiver_releases_a_waiting_sender() {
    crate::loom_tests::model(|| {
        let (tx, rx) = channel::<u64>(1);
        tx.try_send(0).unwrap();
        let t = loom::thread::spawn(move || block_on(tx.send(1)));
        drop(rx);
        assert_eq!(t.join().unwrap().unwrap_err().0, 1);
    });
}

#[test]
fn loom_oneshot_value_or_error_reaches_the_receiver() {
    use crate::sync::oneshot;
    crate::loom_tests::model(|| {
        let (tx, rx) = oneshot::channel::<u64>();
        let t = loom::thread::spawn(move || tx.send(7).is_ok());
        let got = block_on(rx);
        let sent = t.join().unwrap();
        assert!(sent);
        assert_eq!(got.unwrap(), 7);
    });
    crate::loom_tests::model(|| {
        let (tx, rx) = oneshot::channel::<u64>();
        let t = loom::thread::spawn(move || drop(tx));
        assert!(block_on(rx).is_err());
        t.join().unwrap();
    });
}
