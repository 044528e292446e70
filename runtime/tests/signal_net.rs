#![cfg(all(feature = "signal", feature = "net", feature = "io-util"))]
//! `volt::signal` and the `volt::net` additions, as a Tokio application meets them: real
//! signals sent to this process with `kill(2)`, real sockets on loopback and in a
//! temporary directory. Every wait has a 10 s bound; nothing here asserts how fast
//! anything is.
//!
//! The tests run on threads of one process, and a signal goes to the whole process: each
//! test that sends one uses a signal no other test sends.

use std::future::Future;
use std::time::{Duration, Instant};
use volt::signal::unix::{signal, SignalKind};
use volt::telemetry::{TaskInfo, WaitReason};

const BOUND: Duration = Duration::from_secs(10);

fn runtime() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap()
}

fn kill_self(signum: libc::c_int) {
    // SAFETY: `kill(2)` on this process with a signal it has a handler for.
    let rc = unsafe { libc::kill(libc::getpid(), signum) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

/// Read the task list until `pred` holds for it, for at most 10 s.
fn wait_for(rt: &volt::Runtime, what: &str, pred: impl Fn(&[TaskInfo]) -> bool) -> Vec<TaskInfo> {
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

fn named<'a>(tasks: &'a [TaskInfo], name: &str) -> Option<&'a TaskInfo> {
    tasks.iter().find(|t| t.name.as_deref() == Some(name))
}

fn within<F: Future>(f: F) -> impl Future<Output = F::Output> {
    async move { volt::time::timeout(BOUND, f).await.expect("did not happen within 10 s") }
}

#[test]
fn ctrl_c_completes_on_sigint_and_the_process_survives() {
    let rt = runtime();
    rt.block_on(async {
        let mut ctrl_c = std::pin::pin!(volt::signal::ctrl_c());
        // The first poll makes the listener (and installs the handler): from then on
        // SIGINT is the listener's, not the default action that ends the process.
        assert!(futures::poll!(ctrl_c.as_mut()).is_pending());
        kill_self(libc::SIGINT);
        within(ctrl_c).await.expect("ctrl_c failed");
    });
}

#[test]
fn sigusr1_wakes_every_listener_and_the_wait_is_named() {
    let rt = runtime();
    let mut handles = Vec::new();
    for name in ["usr1-a", "usr1-b"] {
        handles.push(volt::task::Builder::new().name(name).spawn_on(
            async {
                let mut s = signal(SignalKind::user_defined1()).unwrap();
                s.recv().await
            },
            rt.handle(),
        ));
    }
    let label = Some(WaitReason::Label("signal SIGUSR1".into()));
    wait_for(&rt, "both listeners wait on SIGUSR1", |ts| {
        ["usr1-a", "usr1-b"].iter().all(|n| named(ts, n).is_some_and(|t| t.waiting_on == label))
    });
    kill_self(libc::SIGUSR1);
    rt.block_on(async {
        for h in handles {
            assert_eq!(within(h).await.unwrap(), Some(()), "a listener was not woken");
        }
    });
}

#[test]
fn a_signal_before_recv_is_not_lost() {
    let rt = runtime();
    rt.block_on(async {
        let mut s = signal(SignalKind::user_defined2()).unwrap();
        kill_self(libc::SIGUSR2);
        kill_self(libc::SIGUSR2);
        assert_eq!(within(s.recv()).await, Some(()));
        // A later delivery is seen by the next `recv` too.
        kill_self(libc::SIGUSR2);
        assert_eq!(within(s.recv()).await, Some(()));
    });
}

#[test]
fn a_listener_of_a_runtime_that_shut_down_answers_none() {
    let rt = runtime();
    // A task still waiting when the runtime is dropped must not hold the drop up.
    rt.spawn(async {
        let mut s = signal(SignalKind::window_change()).unwrap();
        s.recv().await
    });
    let mut kept = rt.block_on(async { signal(SignalKind::window_change()).unwrap() });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(BOUND).expect("dropping a runtime with a task waiting on a signal hung");
    let other = runtime();
    assert_eq!(other.block_on(within(kept.recv())), None);
}

#[test]
fn bad_signals_are_errors_not_panics() {
    let rt = runtime();
    rt.block_on(async {
        for bad in [libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV, 0, -1, 1000] {
            let e = signal(SignalKind::from_raw(bad)).expect_err("accepted a signal it cannot listen for");
            assert!(!e.to_string().is_empty());
        }
    });
    assert!(signal(SignalKind::hangup()).is_err(), "a listener outside a runtime");
    assert_eq!(SignalKind::from_raw(libc::SIGTERM), SignalKind::terminate());
    assert_eq!(SignalKind::interrupt().as_raw_value(), libc::SIGINT);
}
