//! Loom models of the shutdown hand-off (`exits.rs`): exactly one thread finishes the
//! shutdown, and only after every worker has left its loop.

use crate::loom::{lock, thread, Arc, AtomicUsize, Mutex};
use crate::loom_tests::model;
use std::sync::atomic::Ordering::SeqCst;

/// The shutdown hand-off: worker 0 drops the runtime from one of its tasks (so it can't
/// wait for the workers) and then leaves its loop, while worker 1 leaves its own. Exactly
/// one of them finishes the shutdown, and only once both have left.
#[test]
fn loom_shutdown_begun_inside_is_finished_once_after_every_worker() {
    use crate::scheduler::exits::Exits;
    fn finish(exits: &Mutex<Exits>, finished: &AtomicUsize) {
        assert_eq!(lock(exits).count, 2, "finished before every worker left");
        finished.fetch_add(1, SeqCst);
    }
    model(|| {
        let exits = Arc::new(Mutex::new(Exits::default()));
        let finished = Arc::new(AtomicUsize::new(0));
        let other = {
            let (exits, finished) = (exits.clone(), finished.clone());
            thread::spawn(move || {
                let last = lock(&exits).worker_left(2);
                if last {
                    finish(&exits, &finished);
                }
            })
        };
        let now = lock(&exits).shut_down_inside(2);
        if now {
            finish(&exits, &finished);
        }
        let last = lock(&exits).worker_left(2);
        if last {
            finish(&exits, &finished);
        }
        other.join().unwrap();
        assert_eq!(finished.load(SeqCst), 1);
    });
}

/// The same begun on a thread that is no worker (a blocking-pool thread, or one that
/// handed its worker off), racing both workers' exits.
#[test]
fn loom_shutdown_begun_off_the_workers_is_finished_once_after_every_worker() {
    use crate::scheduler::exits::Exits;
    model(|| {
        let exits = Arc::new(Mutex::new(Exits::default()));
        let finished = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (exits, finished) = (exits.clone(), finished.clone());
                thread::spawn(move || {
                    let mut e = lock(&exits);
                    if e.worker_left(2) {
                        assert_eq!(e.count, 2);
                        finished.fetch_add(1, SeqCst);
                    }
                })
            })
            .collect();
        {
            let mut e = lock(&exits);
            if e.shut_down_inside(2) {
                assert_eq!(e.count, 2);
                finished.fetch_add(1, SeqCst);
            }
        }
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(finished.load(SeqCst), 1);
    });
}
