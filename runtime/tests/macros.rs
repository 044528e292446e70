#![cfg(all(feature = "macros", feature = "rt-multi-thread", feature = "time", feature = "sync"))]
//! `#[volt::main]`, `#[volt::test]`, and `select!`, `join!`, `try_join!`, `pin!` and
//! `task_local!` at the crate root, run on Volt runtimes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use volt::runtime::{Handle, RuntimeFlavor};

#[volt::test]
async fn test_defaults_to_current_thread() {
    assert_eq!(Handle::current().runtime_flavor(), RuntimeFlavor::CurrentThread);
    let me = std::thread::current().id();
    assert_eq!(volt::spawn(async { std::thread::current().id() }).await.unwrap(), me);
}

#[volt::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_multi_thread_with_workers() {
    assert_eq!(Handle::current().runtime_flavor(), RuntimeFlavor::MultiThread);
    assert_eq!(Handle::current().num_workers(), 2);
}

#[volt::test(flavor = "multi_thread")]
async fn test_multi_thread_default_workers() {
    assert!(Handle::current().num_workers() >= 1);
}

#[volt::test(flavor = "current_thread", start_paused = true)]
async fn test_start_paused_is_accepted() {
    // The paused clock itself is `time/`'s; here only that the argument builds a runtime.
    volt::time::sleep(Duration::from_millis(1)).await;
}

#[volt::test(crate = "volt")]
async fn test_crate_argument() {}

/// What `never_returns` panics with, to end it.
#[derive(Debug, PartialEq)]
struct Ended(u32);

#[volt::main(flavor = "current_thread")]
async fn never_returns() -> ! {
    volt::time::sleep(Duration::from_millis(1)).await;
    std::panic::panic_any(Ended(7))
}

#[volt::main(flavor = "current_thread")]
async fn returns_an_impl_trait() -> impl std::fmt::Display {
    volt::spawn(async { 5 }).await.unwrap()
}

/// `#[volt::main]` on an `async fn` that returns `!` (a server's main loop) or an
/// `impl Trait` compiles and runs, as with Tokio's.
#[test]
fn main_may_return_never_or_an_impl_trait() {
    let e = std::panic::catch_unwind(|| never_returns()).unwrap_err();
    assert_eq!(e.downcast_ref::<Ended>(), Some(&Ended(7)));
    assert_eq!(returns_an_impl_trait().to_string(), "5");
}

#[volt::test(name = "named-by-the-macro")]
async fn test_name_argument_names_the_runtime() {
    assert_eq!(Handle::current().name(), Some("named-by-the-macro"));
}

/// Each runtime has its own id, and its name if the builder gave one; an empty name is
/// refused as Tokio refuses it.
#[test]
fn runtimes_have_distinct_ids_and_their_builders_names() {
    let a = volt::runtime::Builder::new_multi_thread().worker_threads(1).name("edge").build().unwrap();
    let b = volt::runtime::Builder::new_current_thread().build().unwrap();
    assert_eq!(a.handle().name(), Some("edge"));
    assert_eq!(b.handle().name(), None);
    assert_ne!(a.handle().id(), b.handle().id());
    assert_eq!(a.handle().id(), a.handle().clone().id(), "a handle's clone names the same runtime");
    let inside = a.block_on(async { (Handle::current().id(), Handle::current().name().map(str::to_owned)) });
    assert_eq!(inside, (a.handle().id(), Some("edge".to_owned())));
    assert_eq!(a.handle().id().to_string().parse::<u64>().map(|n| n > 0), Ok(true), "shown as its number");
    let r = std::panic::catch_unwind(|| {
        volt::runtime::Builder::new_multi_thread().name(" ");
    });
    assert!(r.is_err(), "an empty name was accepted");
}

#[volt::test]
async fn test_returning_result() -> Result<(), std::io::Error> {
    volt::time::sleep(Duration::from_millis(1)).await;
    let v: u32 = "42".parse().map_err(std::io::Error::other)?;
    assert_eq!(v, 42);
    Ok(())
}

#[volt::test]
#[should_panic(expected = "boom")]
async fn test_should_panic_is_kept() {
    volt::task::yield_now().await;
    panic!("boom");
}

mod main_fns {
    // `#[volt::main]` on a function other than `main`: the program's `main` is the
    // harness's here, so the tests call these.
    #[volt::main]
    pub async fn multi() -> (volt::runtime::RuntimeFlavor, usize) {
        let h = volt::runtime::Handle::current();
        (h.runtime_flavor(), volt::spawn(async { 5 }).await.unwrap())
    }

    #[volt::main(flavor = "current_thread")]
    pub async fn current() -> volt::runtime::RuntimeFlavor {
        volt::runtime::Handle::current().runtime_flavor()
    }

    #[volt::main(worker_threads = 3)]
    pub async fn three() -> usize {
        volt::runtime::Handle::current().num_workers()
    }

    #[volt::main]
    pub async fn fallible(fail: bool) -> Result<u8, String> {
        if fail {
            return Err("failed".into());
        }
        Ok(1)
    }
}

#[test]
fn main_defaults_to_multi_thread() {
    assert_eq!(main_fns::multi(), (RuntimeFlavor::MultiThread, 5));
    assert_eq!(main_fns::current(), RuntimeFlavor::CurrentThread);
    assert_eq!(main_fns::three(), 3);
    assert_eq!(main_fns::fallible(false), Ok(1));
    assert_eq!(main_fns::fallible(true), Err("failed".to_string()));
}

/// A future that is ready after `n` polls, counting its drops.
struct ReadyAfter {
    polls: usize,
    value: u32,
    dropped: Arc<AtomicUsize>,
}

impl Future for ReadyAfter {
    type Output = u32;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        if self.polls == 0 {
            return Poll::Ready(self.value);
        }
        self.polls -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Drop for ReadyAfter {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
    }
}

#[volt::test]
async fn select_takes_the_first_ready_and_drops_the_rest() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let slow = ReadyAfter { polls: 1000, value: 1, dropped: Arc::clone(&dropped) };
    let fast = ReadyAfter { polls: 2, value: 2, dropped: Arc::clone(&dropped) };
    let out = volt::select! {
        v = slow => v,
        v = fast => v * 10,
    };
    assert_eq!(out, 20);
    assert_eq!(dropped.load(SeqCst), 2, "both branches' futures are dropped");
}

#[volt::test]
async fn select_is_random_by_default_and_ordered_when_biased() {
    let mut firsts = [0u32; 2];
    for _ in 0..200 {
        let i = volt::select! {
            _ = async {} => 0,
            _ = async {} => 1,
        };
        firsts[i] += 1;
    }
    // 200 fair coin flips all landing one way: probability 2^-199.
    assert!(firsts[0] > 0 && firsts[1] > 0, "{firsts:?}");
    for _ in 0..50 {
        let i = volt::select! {
            biased;
            _ = async {} => 0,
            _ = async {} => 1,
        };
        assert_eq!(i, 0);
    }
}

#[volt::test]
async fn select_patterns_preconditions_and_else() {
    // A queue of values read through a future, `None` once empty.
    let mut queue = vec![2u32, 1];
    let mut got = Vec::new();
    loop {
        let next = queue.pop();
        volt::select! {
            // `None` does not match: the branch is disabled, and `else` runs once every
            // branch is.
            Some(v) = async { next } => got.push(v),
            else => break,
        }
    }
    assert_eq!(got, vec![1, 2]);

    let out = volt::select! {
        v = async { 1 }, if false => v,
        v = async { 2 } => v,
    };
    assert_eq!(out, 2);

    let out = volt::select! {
        v = async { 1 }, if false => v,
        else => 3,
    };
    assert_eq!(out, 3);
}

#[volt::test(flavor = "multi_thread", worker_threads = 2)]
async fn select_with_a_timer_and_a_task() {
    let h = volt::spawn(async {
        volt::time::sleep(Duration::from_millis(10)).await;
        7
    });
    volt::pin!(h);
    let out = volt::select! {
        v = &mut h => v.unwrap(),
        _ = volt::time::sleep(Duration::from_secs(10)) => 0,
    };
    assert_eq!(out, 7);
}

#[volt::test]
async fn join_and_try_join() {
    let (a, b, c) = volt::join!(
        async {
            volt::time::sleep(Duration::from_millis(5)).await;
            1
        },
        volt::spawn(async { 2 }),
        async { "three" },
    );
    assert_eq!((a, b.unwrap(), c), (1, 2, "three"));

    let ok: Result<(u8, u16), &str> = volt::try_join!(async { Ok(1u8) }, async { Ok(2u16) });
    assert_eq!(ok, Ok((1, 2)));

    let dropped = Arc::new(AtomicUsize::new(0));
    let slow = ReadyAfter { polls: 1_000_000, value: 0, dropped: Arc::clone(&dropped) };
    let err: Result<(u32, ()), &str> = volt::try_join!(async { Ok(slow.await) }, async {
        volt::task::yield_now().await;
        Err("fail")
    });
    assert_eq!(err, Err("fail"));
    assert_eq!(dropped.load(SeqCst), 1, "the other future is dropped at the first error");
}

#[volt::test]
async fn pin_pins_in_place() {
    let f = async { 9 };
    volt::pin!(f);
    let f: Pin<&mut _> = f;
    assert_eq!(f.await, 9);
    volt::pin! {
        let g = async { 10 };
    }
    assert_eq!(g.await, 10);
}

volt::task_local! {
    static NUMBER: u32;
    /// A second key in the same block, with a doc comment.
    pub static NAME: String;
}

#[volt::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_local_scope_follows_the_future_across_threads() {
    let mut handles = Vec::new();
    for i in 0..50u32 {
        handles.push(volt::spawn(NUMBER.scope(i, async move {
            for _ in 0..10 {
                // Move between workers and interleave with the other tasks.
                volt::task::yield_now().await;
                volt::time::sleep(Duration::from_micros(100)).await;
                assert_eq!(NUMBER.get(), i);
            }
            NUMBER.with(|n| *n)
        })));
    }
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.await.unwrap(), i as u32);
    }
    // Not in any scope here.
    assert!(NUMBER.try_with(|_| ()).is_err());
    assert!(NUMBER.try_get().is_err());
    let f: volt::task::futures::TaskLocalFuture<u32, _> = NUMBER.scope(1, async { NUMBER.try_get() });
    assert_eq!(f.await, Ok(1));
}

#[volt::test]
async fn task_local_nesting_sync_scope_and_drop() {
    NAME.scope("outer".to_string(), async {
        assert_eq!(NAME.get(), "outer");
        NAME.scope("inner".to_string(), async {
            volt::task::yield_now().await;
            assert_eq!(NAME.get(), "inner");
        })
        .await;
        assert_eq!(NAME.get(), "outer");
        let r = NAME.sync_scope("sync".to_string(), || NAME.with(|n| n.len()));
        assert_eq!(r, 4);
        assert_eq!(NAME.get(), "outer");
    })
    .await;
    assert!(NAME.try_with(|_| ()).is_err());

    // The scoped future is dropped inside its scope: its destructor sees the value.
    struct SeesValue(Arc<AtomicUsize>);
    impl Drop for SeesValue {
        fn drop(&mut self) {
            if NUMBER.try_with(|n| *n) == Ok(77) {
                self.0.fetch_add(1, SeqCst);
            }
        }
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let s = SeesValue(Arc::clone(&seen));
    let scoped = NUMBER.scope(77, async move {
        let _s = s;
        std::future::pending::<()>().await;
    });
    let r = volt::time::timeout(Duration::from_millis(5), scoped).await;
    assert!(r.is_err());
    assert_eq!(seen.load(SeqCst), 1);
}

#[test]
#[should_panic(expected = "cannot access a task-local storage value without setting it first")]
fn task_local_with_outside_a_scope_panics() {
    NUMBER.with(|_| ());
}

#[test]
fn task_local_take_value() {
    let rt = volt::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let f = NUMBER.scope(3, async { NUMBER.get() });
        volt::pin!(f);
        assert_eq!(f.as_mut().await, 3);
        assert_eq!(f.as_mut().take_value(), Some(3));
        assert_eq!(f.as_mut().take_value(), None);
    });
}

/// A scope's future polled after `take_value` runs with the key unset, even where an
/// outer scope of the same key has it set, as with Tokio.
#[test]
fn task_local_future_runs_unset_after_take_value() {
    let rt = volt::runtime::Builder::new_current_thread().build().unwrap();
    let got = rt.block_on(NUMBER.scope(1, async {
        let f = NUMBER.scope(2, async {
            volt::task::yield_now().await;
            NUMBER.try_get().ok()
        });
        volt::pin!(f);
        assert_eq!(f.as_mut().take_value(), Some(2));
        let inner = f.await;
        (inner, NUMBER.get())
    }));
    assert_eq!(got, (None, 1), "inside: unset; outside: the outer scope's value");
}

#[volt::test]
async fn test_question_mark_converts_into_the_declared_error() -> Result<(), Box<dyn std::error::Error>> {
    // `?` converts `ParseIntError` into the boxed error of the signature.
    let n: u32 = "12".parse()?;
    volt::task::yield_now().await;
    assert_eq!(n, 12);
    Ok(())
}
