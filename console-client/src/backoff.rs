//! The reconnection schedule: wait 100 ms after the first failure, double after each
//! further one up to 5 s, and start over once a stream has proved healthy.
//!
//! Every failure counts the same (a refused connection, a call that fails, a stream that
//! ends), and only a healthy stream resets: a port that accepts a call and then fails
//! (not gRPC, a proxy in front of a dead server) keeps backing off instead of being
//! hammered every 100 ms.

use std::time::Duration;

/// The first wait between reconnection attempts.
pub const BACKOFF_START: Duration = Duration::from_millis(100);
/// The largest wait between reconnection attempts.
pub const BACKOFF_CAP: Duration = Duration::from_secs(5);

/// Where a client is in the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new()
    }
}

impl Backoff {
    pub const fn new() -> Backoff {
        Backoff { next: BACKOFF_START }
    }

    /// The wait before the next attempt, without moving on.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// An attempt failed: the wait before the next one; the one after doubles, up to
    /// the cap.
    pub fn fail(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(BACKOFF_CAP);
        wait
    }

    /// The stream proved healthy: the next failure waits the shortest time again.
    pub fn reset(&mut self) {
        self.next = BACKOFF_START;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_the_start_to_the_cap_and_stays() {
        let mut b = Backoff::new();
        let waits: Vec<u128> = (0..10).map(|_| b.fail().as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]);
    }

    #[test]
    fn never_shrinks_without_a_reset_and_never_exceeds_the_cap() {
        let mut b = Backoff::new();
        let mut last = Duration::ZERO;
        for _ in 0..200 {
            let w = b.fail();
            assert!(w >= last && w <= BACKOFF_CAP && w >= BACKOFF_START, "{w:?} after {last:?}");
            last = w;
        }
    }

    #[test]
    fn a_reset_starts_over_from_anywhere() {
        for failures in 0..12 {
            let mut b = Backoff::new();
            for _ in 0..failures {
                b.fail();
            }
            b.reset();
            assert_eq!(b.peek(), BACKOFF_START);
            assert_eq!(b.fail(), BACKOFF_START);
            assert_eq!(b.peek(), BACKOFF_START * 2);
        }
    }
}
