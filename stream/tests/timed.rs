//! The timed combinators on Volt's paused clock: which items and errors come, and at what
//! time on that clock (exact, since the clock only moves when every task waits).

use std::time::Duration;
use volt::time::{sleep, Instant};
use volt_stream::wrappers::ReceiverStream;
use volt_stream::StreamExt;

fn paused<F: std::future::Future<Output = ()>>(f: F) {
    let rt = volt::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    rt.block_on(f);
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stream of `(at, value)` pairs: each value sent at `at` after the start, then the end.
fn scripted(script: Vec<(u64, u32)>) -> ReceiverStream<u32> {
    let (tx, rx) = volt::sync::mpsc::channel(64);
    volt::spawn(async move {
        let start = Instant::now();
        for (at, v) in script {
            volt::time::sleep_until(start + ms(at)).await;
            tx.send(v).await.unwrap();
        }
    });
    ReceiverStream::new(rx)
}

/// Every item of `s` with the time it came, in whole milliseconds since `start`.
async fn timed<S: volt_stream::Stream>(s: S, start: Instant) -> Vec<(u128, S::Item)> {
    // The timed streams hold a `Sleep`, which is not `Unpin` (as with tokio-stream).
    let mut s = std::pin::pin!(s);
    let mut out = Vec::new();
    while let Some(item) = s.next().await {
        out.push(((Instant::now() - start).as_millis(), item));
    }
    out
}

#[test]
fn timeout_reports_one_gap_once_and_goes_on() {
    paused(async {
        let start = Instant::now();
        let s = scripted(vec![(0, 1), (50, 2), (400, 3)]).timeout(ms(100));
        let got: Vec<_> = timed(s, start).await.into_iter().map(|(t, r)| (t, r.ok())).collect();
        assert_eq!(got, vec![(0, Some(1)), (50, Some(2)), (150, None), (400, Some(3))]);
    });
}

#[test]
fn timeout_repeating_reports_every_period_without_an_item() {
    paused(async {
        let start = Instant::now();
        let s = scripted(vec![(0, 1), (350, 2)]).timeout_repeating(volt::time::interval(ms(100)));
        let got: Vec<_> = timed(s, start).await.into_iter().map(|(t, r)| (t, r.ok())).collect();
        // A fresh interval's first tick is immediate, and the producer task has not run
        // yet at the first poll: an `Elapsed` at once, as with tokio-stream.
        assert_eq!(got, vec![(0, None), (0, Some(1)), (100, None), (200, None), (300, None), (350, Some(2))]);
    });
}

#[test]
fn throttle_spaces_ready_items() {
    paused(async {
        let start = Instant::now();
        let s = volt_stream::iter(0..5u32).throttle(ms(100));
        let got = timed(s, start).await;
        assert_eq!(got, vec![(0, 0), (100, 1), (200, 2), (300, 3), (400, 4)]);
        // A zero duration throttles nothing.
        let got = timed(volt_stream::iter(0..3u32).throttle(Duration::ZERO), Instant::now()).await;
        assert_eq!(got, vec![(0, 0), (0, 1), (0, 2)]);
    });
}

#[test]
fn chunks_timeout_gives_full_chunks_at_once_and_late_ones_on_time() {
    paused(async {
        let start = Instant::now();
        let s =
            scripted(vec![(0, 1), (0, 2), (150, 3), (160, 4), (160, 5), (160, 6), (170, 7)]).chunks_timeout(3, ms(100));
        let got = timed(s, start).await;
        // [1, 2]: 100 ms after its first item. [3, 4, 5]: full. [6, 7]: the stream ended.
        assert_eq!(got, vec![(100, vec![1, 2]), (160, vec![3, 4, 5]), (170, vec![6, 7])]);
    });
}

#[test]
fn huge_durations_wait_without_panicking() {
    paused(async {
        let mut s = std::pin::pin!(volt_stream::iter(0..2u32).timeout(Duration::MAX));
        assert_eq!(s.next().await, Some(Ok(0)));
        assert_eq!(s.next().await, Some(Ok(1)));
        assert_eq!(s.next().await, None);
        let got: Vec<_> = volt_stream::iter(0..2u32).throttle(Duration::MAX).take(1).collect().await;
        assert_eq!(got, [0]);
        let got: Vec<_> = volt_stream::iter(0..2u32).chunks_timeout(5, Duration::MAX).collect().await;
        assert_eq!(got, [vec![0, 1]]);
    });
}

#[test]
#[should_panic(expected = "max_size must be above zero")]
fn chunks_of_nothing_are_refused() {
    let _ = volt_stream::iter(0..1u32).chunks_timeout(0, ms(1));
}

#[test]
fn elapsed_is_a_timed_out_io_error() {
    paused(async {
        let mut s = std::pin::pin!(volt_stream::pending::<u32>().timeout(ms(10)));
        let err = s.next().await.unwrap().unwrap_err();
        assert_eq!(err.to_string(), "deadline has elapsed");
        assert_eq!(std::io::Error::from(err).kind(), std::io::ErrorKind::TimedOut);
        // Not again until an item comes (none will): the stream just waits.
        assert!(volt::time::timeout(ms(500), s.next()).await.is_err());
        sleep(ms(1)).await;
    });
}

/// Polled again after its end, a timed stream stays ended (it fuses the stream inside,
/// which may not be polled after its end).
#[test]
fn timed_streams_stay_ended() {
    paused(async {
        let once = futures::stream::unfold(0u8, |n| async move { (n == 0).then_some((n, 1)) });
        let mut s = std::pin::pin!(once.timeout(ms(10)));
        assert_eq!(s.next().await.map(|r| r.ok()), Some(Some(0)));
        assert!(s.next().await.is_none());
        assert!(s.next().await.is_none(), "polled after its end");
        let once = futures::stream::unfold(0u8, |n| async move { (n == 0).then_some((n, 1)) });
        let mut s = std::pin::pin!(once.timeout_repeating(volt::time::interval(ms(10))));
        assert_eq!(s.next().await.map(|r| r.ok()), Some(Some(0)));
        assert!(s.next().await.is_none());
        assert!(s.next().await.is_none(), "polled after its end");
    });
}
