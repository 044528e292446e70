//! An armed timer costs no memory beyond its `Sleep`, and a dropped sleep gives all of it
//! back: the timing wheel keeps nothing per timer (its entries live inside the sleeps).
//!
//! A counting allocator measures what the process holds (bytes allocated and not freed),
//! so this file is its own test binary.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

#[path = "support/counting.rs"]
mod counting;
use counting::held;

const TIMERS: usize = 20_000;

/// Poll every sleep once with the current task's waker, so each is armed in the wheel.
async fn arm_all(sleeps: &mut [Option<Pin<Box<volt::time::Sleep>>>]) {
    std::future::poll_fn(|cx| {
        for s in sleeps.iter_mut().flatten() {
            assert!(s.as_mut().poll(cx).is_pending(), "an hour's sleep completed");
        }
        Poll::Ready(())
    })
    .await
}

#[test]
fn armed_sleeps_cost_their_own_size_and_dropped_ones_give_it_all_back() {
    let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    let report = rt
        .spawn(async {
            let mut sleeps: Vec<Option<Pin<Box<volt::time::Sleep>>>> = Vec::with_capacity(TIMERS);
            let base = held();
            for _ in 0..TIMERS {
                sleeps.push(Some(Box::pin(volt::time::sleep(Duration::from_secs(3600)))));
            }
            let unarmed = held() - base;
            arm_all(&mut sleeps).await;
            let armed = held() - base;
            // Half of them go, every other one, so no block of them is freed whole.
            for s in sleeps.iter_mut().step_by(2) {
                *s = None;
            }
            let half = held() - base;
            // Armed again after the drop: the wheel's lists are intact around the holes.
            for s in sleeps.iter_mut().skip(1).step_by(2) {
                let s = s.as_mut().expect("kept");
                s.as_mut().reset(volt::time::Instant::now() + Duration::from_secs(7200));
            }
            arm_all(&mut sleeps).await;
            let rearmed = held() - base;
            sleeps.clear();
            let none = held() - base;
            (unarmed, armed, half, rearmed, none)
        })
        .join()
        .unwrap();
    let (unarmed, armed, half, rearmed, none) = report;
    let per_sleep = std::mem::size_of::<volt::time::Sleep>() as isize;
    let n = TIMERS as isize;
    // The runtime's other threads may allocate a little meanwhile (a stall sample, a
    // pool thread): allow 64 KiB of that, far below what one byte per timer would add up
    // to over a second copy of each timer (an entry of 40 bytes or more: 800 KB here).
    let slack = 64 * 1024;
    assert!(unarmed <= n * per_sleep + slack, "unarmed: {unarmed} B for {TIMERS} sleeps of {per_sleep} B");
    assert!(
        armed - unarmed <= slack,
        "arming {TIMERS} sleeps allocated {} B beyond the sleeps themselves",
        armed - unarmed
    );
    assert!(half <= armed / 2 + slack, "after dropping half of {armed} B of armed sleeps, {half} B are still held");
    assert!(rearmed - half <= slack, "re-arming allocated {} B", rearmed - half);
    assert!(none <= slack, "every sleep dropped, and {none} B are still held");
}
