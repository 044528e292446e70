//! Loom models of the channel's hand-offs: a slot freed by the receiver reaches a
//! waiting sender, and a value or the end of the stream reaches a waiting receiver, in
//! every interleaving. Run with
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
