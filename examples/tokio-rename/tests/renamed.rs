//! `#[tokio::test]` and `#[tokio::main]` with Volt named `tokio`.

use tokio::runtime::{Handle, RuntimeFlavor};

#[tokio::test]
async fn test_runs_on_a_current_thread_volt_runtime() {
    assert_eq!(Handle::current().runtime_flavor(), RuntimeFlavor::CurrentThread);
    assert_eq!(volt_tokio_rename::run(10).await, 45);
}

#[tokio::test(flavor = "local")]
async fn test_local_runs_not_send_tasks_without_a_local_set() {
    // Tokio 1.54's `LocalRuntime`: `spawn_local` with no `LocalSet`, on `Rc`s.
    let total = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut set = tokio::task::JoinSet::new();
    for i in 1..=4 {
        let t = std::rc::Rc::clone(&total);
        set.spawn_local(async move {
            tokio::task::yield_now().await;
            t.set(t.get() + i);
        });
    }
    set.join_all().await;
    assert_eq!(total.get(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_multi_thread() {
    assert_eq!(Handle::current().num_workers(), 2);
    let (a, b) = tokio::join!(volt_tokio_rename::run(4), async { 1 });
    assert_eq!(a + b, 7);
}

#[test]
fn main_runs_on_a_multi_thread_runtime() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volt-tokio-rename")).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "sum=45 flavor=MultiThread");
}

#[tokio::test(crate = "tokio")]
async fn test_with_an_explicit_crate_path() {
    assert_eq!(tokio::spawn(async { 3 }).await.unwrap(), 3);
}

/// tokio-stream renamed to volt-stream: its wrappers take the Volt types that the
/// application's `tokio::` paths now name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_stream_wrappers_over_volt_types() {
    let squares = tokio::time::timeout(std::time::Duration::from_secs(10), volt_tokio_rename::squares(100))
        .await
        .expect("the stream ended");
    assert_eq!(squares, (0..100u64).map(|i| i * i).collect::<Vec<_>>());
    let replies = tokio::time::timeout(std::time::Duration::from_secs(10), volt_tokio_rename::greet_connections(5))
        .await
        .expect("every connection answered");
    assert_eq!(replies, vec!["hello\n".to_string(); 5]);
}

/// tokio-stream's timed combinators through the rename wait on Volt's timer (the real
/// crate's would wait on Tokio's, which nothing drives here).
#[tokio::test]
async fn tokio_stream_timeout_on_volts_timer() {
    use tokio_stream::StreamExt;
    let mut quiet = std::pin::pin!(tokio_stream::pending::<u32>().timeout(std::time::Duration::from_millis(10)));
    let err = quiet.next().await.expect("an item").expect_err("nothing comes, so the deadline passes");
    assert_eq!(std::io::Error::from(err).kind(), std::io::ErrorKind::TimedOut);
    let chunks: Vec<Vec<u32>> =
        tokio_stream::iter(0..7).chunks_timeout(3, std::time::Duration::from_secs(60)).collect().await;
    assert_eq!(chunks, [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
}

/// tokio-util renamed to volt-util: `TaskTracker::spawn` spawns on Volt (the real
/// crate's looks for a Tokio runtime and panics without one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_util_task_tracker_on_volt() {
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), volt_tokio_rename::graceful_shutdown(50))
        .await
        .expect("every worker stopped");
    assert_eq!(stopped, 50);
}
