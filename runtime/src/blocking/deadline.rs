//! Waiting with a deadline for the threads a shutdown stops: the pool's, the workers'
//! and the stall monitor's.

use std::time::{Duration, Instant};

/// Join `threads`: every one without a deadline; with one, each that finishes before it
/// (looked at every millisecond), leaving the rest to exit on their own.
pub(crate) fn join_until(threads: impl IntoIterator<Item = std::thread::JoinHandle<()>>, deadline: Option<Instant>) {
    for t in threads {
        if let Some(d) = deadline {
            while !t.is_finished() && Instant::now() < d {
                std::thread::sleep(Duration::from_millis(1));
            }
            if !t.is_finished() {
                continue;
            }
        }
        let _ = t.join();
    }
}

/// Wait on `cv` until `done(state)` holds or `deadline` (if any) passes.
pub(crate) fn wait_until_deadline<'a, T>(
    cv: &std::sync::Condvar,
    mut guard: std::sync::MutexGuard<'a, T>,
    deadline: Option<Instant>,
    mut done: impl FnMut(&T) -> bool,
) -> std::sync::MutexGuard<'a, T> {
    while !done(&guard) {
        guard = match deadline {
            None => cv.wait(guard).unwrap_or_else(|e| e.into_inner()),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break;
                }
                cv.wait_timeout(guard, d - now).unwrap_or_else(|e| e.into_inner()).0
            }
        };
    }
    guard
}
