//! What task queries may cost the console's thread, and who pays.
//!
//! A window sorted by an order the index keeps (id, busy time) with no filter costs its
//! own length; any other (a name or state filter, another order) may visit every live
//! task (twice with a name filter: once for the window, once to count the matches), which
//! at a million tasks takes milliseconds. Left alone, a client could open many streams
//! with such windows, or call `ListTasks` in a loop, and take the console's thread from
//! every other client. So:
//!
//! * **Streams.** Each publish recomputes out-of-date windows within a budget of rows
//!   ([`publish_budget`]: at least two walks of the whole index). Connections take turns,
//!   the one served longest ago first, and within a connection its stream served longest
//!   ago; a stream left out keeps its window until its turn, and gets only the counts
//!   meanwhile. A client with many filtered streams then delays its own windows, not
//!   another connection's. (HTTP/2 lets a connection open at most
//!   [`MAX_STREAMS_PER_CONNECTION`] at once.)
//! * **One-off calls** (`ListTasks`, `GetSnapshot`, `SetTaskQuery`, a stream's first
//!   window, `GetTask`'s walk of one shard, and building the index when there is none)
//!   pay from their connection's bucket of rows and from one bucket all connections share
//!   ([`OneOffBuckets`]), refilled at [`one_off_rate`] and four times that: a call that
//!   finds either short waits for the rows it needs, and one that would wait longer than
//!   [`MAX_ONE_OFF_WAIT`] is refused with `RESOURCE_EXHAUSTED`. A connection may spend
//!   two seconds' worth at once (typing a filter), and all of them together bound what
//!   one-off calls take from the console's thread.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The least a publish may spend on windows, in rows: small runtimes are not held back.
pub(crate) const MIN_PUBLISH_BUDGET: u64 = 1 << 20;

/// Rows each publish may spend recomputing windows, for an index of `rows` live tasks:
/// two walks of all of them, or [`MIN_PUBLISH_BUDGET`].
pub(crate) fn publish_budget(rows: u64) -> u64 {
    rows.saturating_mul(2).max(MIN_PUBLISH_BUDGET)
}

/// Rows a second each connection's one-off calls may cost: four walks of an index of
/// `rows` tasks, or four times [`MIN_PUBLISH_BUDGET`].
pub(crate) fn one_off_rate(rows: u64) -> u64 {
    rows.saturating_mul(4).max(4 * MIN_PUBLISH_BUDGET)
}

/// The most HTTP/2 streams one console connection may have open at once (further calls
/// wait for one to end).
pub(crate) const MAX_STREAMS_PER_CONNECTION: u32 = 32;

/// How many seconds of its rate a bucket holds when full: what a burst may spend at once.
const BURST_SECONDS: f64 = 2.0;

/// The shared bucket's rate, in connections' worth.
const SHARED_RATE_FACTOR: u64 = 4;

/// The longest a one-off call waits for its connection's bucket; past it the call is
/// refused. Under `volt-console`'s call timeout (5 s).
pub(crate) const MAX_ONE_OFF_WAIT: Duration = Duration::from_secs(2);

/// A connection, as far as costs go: its peer's address (`None`: a caller without one,
/// such as a test's in-process channel; all of those share one account).
pub(crate) type Conn = Option<SocketAddr>;

/// One stream that wants a new window this publish.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Want {
    /// The stream's place in the publisher's list.
    pub(crate) stream: usize,
    pub(crate) conn: Conn,
    /// The publish its window was last computed at (0: never).
    pub(crate) window_at: u64,
    /// Rows the new window may cost (`TaskIndex::window_cost`).
    pub(crate) cost: u64,
}

/// Which of `wants` get their window this publish, within `budget` rows, and which
/// connections count as served: connections in turn, the one `served` longest ago first
/// (never served: first of all; a tie goes to the one whose oldest window is oldest),
/// each giving its stream served longest ago, round and round until every stream was
/// considered. A stream that does not fit is passed over, so cheaper ones behind it
/// still can. A connection counts as served only if its first stream in line was: one
/// whose first stream was passed over keeps its place at the front for the next publish,
/// however many of its cheaper streams got through, so no stream waits for good.
pub(crate) fn plan(wants: &[Want], served: &HashMap<Conn, u64>, budget: u64) -> (Vec<usize>, Vec<Conn>) {
    let mut by_conn: BTreeMap<Conn, Vec<Want>> = BTreeMap::new();
    for w in wants {
        by_conn.entry(w.conn).or_default().push(*w);
    }
    let mut turns: Vec<(u64, u64, Conn, VecDeque<Want>)> = by_conn
        .into_iter()
        .map(|(conn, mut ws)| {
            ws.sort_by_key(|w| (w.window_at, w.stream));
            (served.get(&conn).copied().unwrap_or(0), ws[0].window_at, conn, ws.into())
        })
        .collect();
    turns.sort_by_key(|(at, oldest, conn, _)| (*at, *oldest, *conn));
    let mut queue: VecDeque<(bool, Conn, VecDeque<Want>)> =
        turns.into_iter().map(|(_, _, conn, ws)| (true, conn, ws)).collect();
    let mut left = budget;
    let (mut chosen, mut served_now) = (Vec::new(), Vec::new());
    while let Some((head, conn, mut ws)) = queue.pop_front() {
        let Some(w) = ws.pop_front() else { continue };
        if w.cost <= left {
            left -= w.cost;
            chosen.push(w.stream);
            if head {
                served_now.push(conn);
            }
        }
        if !ws.is_empty() {
            queue.push_back((false, conn, ws));
        }
    }
    (chosen, served_now)
}

/// A bucket of rows: how many are left (negative: owed by calls waiting now) and when
/// that was worked out.
#[derive(Clone, Copy)]
struct Bucket {
    left: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: f64, now: Instant) -> Bucket {
        Bucket { left: rate * BURST_SECONDS, at: now }
    }

    /// What it holds at `now`, refilled at `rate` rows a second up to its size.
    fn at(self, rate: f64, now: Instant) -> f64 {
        (self.left + now.saturating_duration_since(self.at).as_secs_f64() * rate).min(rate * BURST_SECONDS)
    }
}

/// Each connection's bucket of rows for one-off calls, and the one they share (see the
/// module doc).
#[derive(Default)]
pub(crate) struct OneOffBuckets {
    buckets: HashMap<Conn, Bucket>,
    shared: Option<Bucket>,
}

impl OneOffBuckets {
    /// Take `cost` rows from `conn`'s bucket and the shared one at `now`, for a task list
    /// of `rows` tasks. `Ok(wait)`: the call may run after `wait` (zero when both held
    /// enough); `Err(wait)`: it would have to wait `wait`, longer than
    /// [`MAX_ONE_OFF_WAIT`], and takes nothing.
    pub(crate) fn take(&mut self, conn: Conn, cost: u64, rows: u64, now: Instant) -> Result<Duration, Duration> {
        let rate = one_off_rate(rows) as f64;
        let shared_rate = rate * SHARED_RATE_FACTOR as f64;
        // Connections whose buckets have filled up again are forgotten: a full bucket is
        // what a new one starts with.
        if self.buckets.len() > 64 {
            self.buckets.retain(|_, b| b.at(rate, now) < rate * BURST_SECONDS);
        }
        let mine = self.buckets.get(&conn).map_or(rate * BURST_SECONDS, |b| b.at(rate, now)) - cost as f64;
        let all = self.shared.unwrap_or_else(|| Bucket::full(shared_rate, now)).at(shared_rate, now) - cost as f64;
        let owed = |left: f64, rate: f64| if left >= 0.0 { 0.0 } else { -left / rate };
        let wait = Duration::from_secs_f64(owed(mine, rate).max(owed(all, shared_rate)));
        if wait > MAX_ONE_OFF_WAIT {
            return Err(wait);
        }
        self.buckets.insert(conn, Bucket { left: mine, at: now });
        self.shared = Some(Bucket { left: all, at: now });
        Ok(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(port: u16) -> Conn {
        Some(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    fn want(stream: usize, port: u16, window_at: u64, cost: u64) -> Want {
        Want { stream, conn: conn(port), window_at, cost }
    }

    /// A connection with fifty streams that each walk every task, against one with a
    /// single such stream: every publish spends at most its budget, the lone stream is
    /// served at every publish, and the fifty take their turns, none waiting more than
    /// fifty publishes.
    #[test]
    fn many_costly_streams_wait_their_own_turns() {
        let rows = 1_000_000;
        let budget = publish_budget(rows);
        let mut window_at: HashMap<usize, u64> = HashMap::new();
        let mut served = HashMap::new();
        let mut last_served: HashMap<usize, u64> = HashMap::new();
        let mut longest_wait = 0;
        for publish in 1..=200u64 {
            // Streams 0..50 on one connection, 50 on another: all stale at every publish.
            let wants: Vec<Want> = (0..51)
                .map(|s| want(s, if s < 50 { 1000 } else { 2000 }, window_at.get(&s).copied().unwrap_or(0), rows))
                .collect();
            let (chosen, served_now) = plan(&wants, &served, budget);
            let spent: u64 = chosen.iter().map(|&s| wants[s].cost).sum();
            assert!(spent <= budget, "publish {publish} spent {spent} of {budget}");
            assert!(chosen.contains(&50), "publish {publish}: the lone stream was left out ({chosen:?})");
            for &s in &chosen {
                window_at.insert(s, publish);
                longest_wait = longest_wait.max(publish - last_served.get(&s).copied().unwrap_or(0));
                last_served.insert(s, publish);
            }
            for c in served_now {
                served.insert(c, publish);
            }
        }
        for s in 0..50 {
            let since = 200 - last_served.get(&s).copied().unwrap_or(0);
            assert!(since < 50, "stream {s} last served {since} publishes ago");
        }
        assert!(longest_wait <= 50, "a stream waited {longest_wait} publishes");
    }

    /// Two connections with one walk each fill most of the budget, and a third has a walk
    /// and a cheap stream: the cheap one gets through every time, and the third's walk,
    /// passed over, goes first at the next publish instead of waiting for good.
    #[test]
    fn a_passed_over_stream_goes_first_next_time() {
        let rows = 400_000;
        let budget = publish_budget(rows);
        let mut window_at: HashMap<usize, u64> = HashMap::new();
        let mut served = HashMap::new();
        let mut walks_of_s = Vec::new();
        for publish in 1..=30u64 {
            let at = |s: usize| window_at.get(&s).copied().unwrap_or(0);
            let wants = [
                want(0, 1000, at(0), rows),
                want(1, 2000, at(1), rows),
                want(2, 3000, at(2), rows),
                want(3, 3000, at(3), 10),
            ];
            let (chosen, served_now) = plan(&wants, &served, budget);
            let spent: u64 = chosen.iter().map(|&s| wants[s].cost).sum();
            assert!(spent <= budget);
            for &s in &chosen {
                window_at.insert(s, publish);
            }
            if chosen.contains(&2) {
                walks_of_s.push(publish);
            }
            for c in served_now {
                served.insert(c, publish);
            }
        }
        // Two walks fit in a publish, three connections want one each: every walk is
        // done at least every other publish.
        assert!(walks_of_s.len() >= 14, "stream 2 recomputed at {walks_of_s:?}");
        assert!(walks_of_s.windows(2).all(|w| w[1] - w[0] <= 2), "{walks_of_s:?}");
    }

    /// Cheap windows (an indexed order with no filter) all fit beside a walk, and a
    /// stream too costly for what is left is passed over, not the ones behind it; its
    /// connection was not served, so it goes first next time.
    #[test]
    fn a_stream_that_does_not_fit_is_passed_over() {
        let served = HashMap::new();
        let wants = [want(0, 1, 0, 900), want(1, 2, 0, 900), want(2, 3, 0, 50), want(3, 3, 1, 50)];
        let (chosen, served_now) = plan(&wants, &served, 1000);
        assert_eq!(chosen, vec![0, 2, 3], "the second walk does not fit; the cheap ones do");
        assert_eq!(served_now, vec![conn(1), conn(3)]);
        let served: HashMap<Conn, u64> = served_now.into_iter().map(|c| (c, 1)).collect();
        let wants = [want(0, 1, 1, 900), want(1, 2, 0, 900)];
        assert_eq!(plan(&wants, &served, 1000).0, vec![1]);
    }

    /// A bucket pays for calls until it is empty, then makes them wait for the rows they
    /// need, refuses one that would wait too long (taking nothing), and refills with time;
    /// each connection has its own.
    #[test]
    fn one_off_calls_wait_for_their_connections_rows() {
        let rows = 2_000_000;
        let rate = one_off_rate(rows);
        assert_eq!(rate, 4 * rows);
        let t0 = Instant::now();
        let mut b = OneOffBuckets::default();
        // Two seconds' worth at once: eight walks.
        for _ in 0..8 {
            assert_eq!(b.take(conn(1), rows, rows, t0), Ok(Duration::ZERO));
        }
        // Empty now: the next walk waits a quarter of a second.
        let w = b.take(conn(1), rows, rows, t0).unwrap();
        assert!((w.as_secs_f64() - 0.25).abs() < 1e-6, "{w:?}");
        // Seven more owe two seconds in all; the next is refused.
        for _ in 0..7 {
            assert!(b.take(conn(1), rows, rows, t0).is_ok());
        }
        let refused = b.take(conn(1), rows, rows, t0).unwrap_err();
        assert!(refused > MAX_ONE_OFF_WAIT, "{refused:?}");
        // Another connection pays from its own bucket.
        assert_eq!(b.take(conn(2), rows, rows, t0), Ok(Duration::ZERO));
        // Five seconds later the first has paid its debt and holds a full bucket again.
        let later = t0 + Duration::from_secs(5);
        for _ in 0..8 {
            assert_eq!(b.take(conn(1), rows, rows, later), Ok(Duration::ZERO));
        }
    }

    /// All connections together spend at most the shared bucket: once many connections
    /// have used it up, a fresh connection with a full bucket of its own waits too, and
    /// past the longest wait it is refused.
    #[test]
    fn connections_together_share_one_bucket() {
        let rows = 2_000_000;
        let t0 = Instant::now();
        let mut b = OneOffBuckets::default();
        // Four connections spend their eight walks each: the shared bucket's 32.
        for c in 0..4 {
            for _ in 0..8 {
                assert_eq!(b.take(conn(100 + c), rows, rows, t0), Ok(Duration::ZERO));
            }
        }
        let w = b.take(conn(200), rows, rows, t0).unwrap();
        assert!(w > Duration::ZERO, "the shared bucket is empty");
        let mut port = 201;
        let refused = loop {
            match b.take(conn(port), rows, rows, t0) {
                Ok(w) => assert!(w <= MAX_ONE_OFF_WAIT),
                Err(w) => break w,
            }
            port += 1;
            assert!(port < 300, "never refused");
        };
        assert!(refused > MAX_ONE_OFF_WAIT);
    }
}
