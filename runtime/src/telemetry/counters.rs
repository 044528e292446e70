//! The worker counters, declared once.
//!
//! [`for_each_worker_counter!`] is the one list of them. Each entry gives the counter's
//! name (the field of [`WorkerCounters`] the scheduler writes, `w.counters.tasks_stolen`),
//! its doc, and for the counters a worker reports on its own, the Prometheus family the
//! exporter publishes it as. From that list come:
//! * the [`WorkerCounters`] fields and their `new` (the counters first and packed
//!   together, as the list orders them; the histograms boxed behind them);
//! * the [`WorkerSnapshot`] counter fields, with their docs, and the read that fills them
//!   ([`WorkerCounters::snapshot`]);
//! * the runtime-wide totals the snapshot sums over the workers ([`WorkerCounters::add_totals`]);
//! * the public list of them by name, with their Prometheus families
//!   ([`WORKER_COUNTERS`](super::WORKER_COUNTERS)), and [`WorkerSnapshot::counters`]
//!   (`counter_list.rs`), from which readers outside the runtime (the console's wire
//!   conversion, the exporter's `volt_worker_*_total` families) learn of every counter.
//!
//! Adding a per-worker counter: one line in the list, and one field of the same name in
//! `WorkerSnapshot` of `console-proto/proto/volt/console/v1/telemetry.proto` (prost
//! generates the wire type from that file, so its line cannot come from here; the
//! console's build fails until the wire carries every counter of the list). A
//! runtime-wide total also needs its `Snapshot` field (and `RemoteCounters`' if other
//! threads count it too).

use super::groups::{WorkerGroups, NO_GROUP};
use super::histogram::LogHistogram;
use super::{Histogram, Snapshot, WorkerState};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};

/// The worker counters: calls `$callback! { [extra tokens] per_worker { ... } totals { ... } }`.
///
/// `per_worker`: counters each worker reports as its own ([`WorkerSnapshot`] and the wire
/// carry them per worker): `doc name [Prometheus family, help];` (`[]`: no family from the
/// list; the exporter renders `parked_ns` by hand, in seconds). `totals`: counters summed
/// over the workers into [`Snapshot`]'s field of the same name.
macro_rules! for_each_worker_counter {
    ($callback:ident $(, $($extra:tt)*)?) => {
        $callback! {
            [$($($extra)*)?]
            per_worker {
                /// Polls it made.
                tasks_polled ["volt_worker_polls_total", "Task polls the worker made."];
                /// Tasks it took from other workers.
                tasks_stolen ["volt_worker_steals_total", "Tasks the worker stole from other workers."];
                /// Successful steals (each takes about half a victim's ring).
                steal_operations [
                    "volt_worker_steal_operations_total",
                    "Successful steal operations (each takes about half a queue)."
                ];
                /// Times it slept (on its futex or in the reactor). A sleep is counted as it ends,
                /// together with its time, so this always matches the park-duration histogram.
                times_parked ["volt_worker_parks_total", "Times the worker parked."];
                /// Nanoseconds it spent asleep, the sleep it may be in now included.
                parked_ns [];
                /// Polls served from the LIFO slot.
                lifo_hits ["volt_worker_lifo_hits_total", "Polls served from the worker's LIFO slot."];
                /// Batches fetched from the global queue.
                global_batch_fetches [
                    "volt_worker_global_batch_fetches_total",
                    "Batches the worker took from the global queue."
                ];
                /// Times its ring overflowed to the global queue.
                overflows [
                    "volt_worker_overflows_total",
                    "Times the worker's local queue overflowed to the global queue."
                ];
                /// Budget ticks that used the full 128 polls.
                budget_yields ["volt_worker_budget_yields_total", "Budget ticks that used the full 128 polls."];
                /// Polls that ran past `Builder::stall_threshold`, counted once each by whoever
                /// saw it first: the worker as the poll ended, or a reader or sampler while it
                /// still ran (several threads write it, with `fetch_add`).
                stalls ["volt_worker_stalls_total", "Polls that ran past the stall threshold."];
            }
            totals {
                tasks_spawned;
                tasks_completed;
                tasks_cancelled;
                tasks_panicked;
                timers_armed;
                timers_fired;
                timers_cancelled;
                io_events;
            }
        }
    };
}
pub(super) use for_each_worker_counter;

/// Nanoseconds from a process-wide base to `at`, plus one (0 stands for "not asleep").
fn park_clock_ns(at: std::time::Instant) -> u64 {
    static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(std::time::Instant::now);
    at.saturating_duration_since(base).as_nanos() as u64 + 1
}

/// A counter with a single writer (its worker). Readers on other threads see whole values.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Owner only: add one.
    #[inline(always)]
    pub(crate) fn inc(&self) {
        self.add(1);
    }

    /// Owner only: add `n` (a load and a store: there is no other writer).
    ///
    /// Under `--cfg volt_no_counters` this does nothing. That build exists only to measure
    /// what the always-on counters cost (`runtime/benches/counters.sh`); its telemetry
    /// reads zeros.
    #[inline(always)]
    pub(crate) fn add(&self, n: u64) {
        #[cfg(not(volt_no_counters))]
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
        #[cfg(volt_no_counters)]
        let _ = n;
    }

    /// Owner only: add one, in every build. For the one counter the scheduler itself
    /// reads (`tasks_polled`, which numbers the polls for the stall machinery, and which
    /// other workers watch to tell a worker stuck in one poll: see "Stealing from the
    /// LIFO slot" in `scheduler/run.rs`), which therefore stays under
    /// `--cfg volt_no_counters`.
    #[inline(always)]
    pub(crate) fn inc_always(&self) {
        self.0.store(self.0.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Add one from any thread (`fetch_add`): for the one counter several threads write,
    /// rarely (`stalls`: whoever first sees a poll run past the threshold counts it).
    #[inline]
    pub(crate) fn add_shared(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// The declarations the list produces in this module.
macro_rules! declare_worker_counters {
    (
        []
        per_worker { $( $(#[doc = $doc:literal])* $name:ident [$($family:tt)*]; )* }
        totals { $( $total:ident; )* }
    ) => {
        /// One worker's counters and gauges.
        pub(crate) struct WorkerCounters {
            $( $(#[doc = $doc])* pub(crate) $name: Counter, )*
            $(
                #[doc = concat!("Summed into `Snapshot::", stringify!($total), "`.")]
                pub(crate) $total: Counter,
            )*
            /// The histograms (1 KiB), in their own allocation so the counters the hot paths
            /// touch stay packed together.
            pub(crate) histograms: Box<WorkerHistograms>,
            /// Its share of the task groups' figures (`telemetry::groups`), while the
            /// runtime keeps task statistics.
            pub(crate) groups: Option<Box<WorkerGroups>>,
            /// Gauges, owner-written.
            pub(crate) ewma_task_ns: AtomicU64,
            pub(crate) global_queue_interval: AtomicU32,
            state: AtomicU8,
            /// When its current sleep began (`park_clock_ns`; 0: not asleep), so a reader
            /// counts a sleep still going on in `parked_ns`, which otherwise grows only
            /// when a sleep ends.
            park_started_ns: AtomicU64,
            /// A sequence lock over `park_started_ns` and `parked_ns`: odd while the owner
            /// changes them (see `park_window`).
            park_seq: AtomicU64,
            /// The largest `parked_ns_now` reading so far (written by readers only).
            park_read_max: AtomicU64,
        }

        impl WorkerCounters {
            /// `task_groups`: whether the runtime keeps task statistics, and so groups.
            pub(crate) fn new(interval: u32, ewma: u64, task_groups: bool) -> WorkerCounters {
                WorkerCounters {
                    $( $name: Counter::default(), )*
                    $( $total: Counter::default(), )*
                    histograms: Box::default(),
                    groups: task_groups.then(|| Box::new(WorkerGroups::new())),
                    ewma_task_ns: AtomicU64::new(ewma),
                    global_queue_interval: AtomicU32::new(interval),
                    state: AtomicU8::new(WorkerState::Running as u8),
                    park_started_ns: AtomicU64::new(0),
                    park_seq: AtomicU64::new(0),
                    park_read_max: AtomicU64::new(0),
                }
            }

            /// Owner only: run `f`, which changes the sleep's start and total, inside the
            /// sequence lock, so a reader sees both before or both after.
            fn park_window(&self, f: impl FnOnce()) {
                let s = self.park_seq.load(Relaxed);
                self.park_seq.store(s.wrapping_add(1), Relaxed);
                // Orders the odd number before the changes: a reader that sees any of
                // them, and then fences, sees the odd number (or a later one).
                std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                f();
                self.park_seq.store(s.wrapping_add(2), std::sync::atomic::Ordering::Release);
            }

            /// Owner only: a sleep begins at `at`.
            pub(crate) fn park_started(&self, at: std::time::Instant) {
                self.park_window(|| self.park_started_ns.store(park_clock_ns(at), Relaxed));
            }

            /// Owner only: the sleep that began at `park_started` ends now; its time, on
            /// the same clock and read inside the lock, goes into `parked_ns`, and is
            /// returned (for the park-duration histogram: one clock read serves both).
            pub(crate) fn park_ended(&self) -> u64 {
                let mut slept = 0;
                self.park_window(|| {
                    let start = self.park_started_ns.load(Relaxed);
                    if start != 0 {
                        slept = park_clock_ns(std::time::Instant::now()).saturating_sub(start);
                        self.parked_ns.add(slept);
                    }
                    self.park_started_ns.store(0, Relaxed);
                });
                slept
            }

            /// Sleeps begun plus sleeps ended: odd while the worker sleeps, and never
            /// lower than an earlier reading. Each begins and each end is one window of
            /// the sequence lock, which counts two a window, so it is half the sequence
            /// (an odd sequence, a window still open, counts as the one before it).
            pub(crate) fn park_unpark_count(&self) -> u64 {
                self.park_seq.load(std::sync::atomic::Ordering::Acquire) / 2
            }

            /// `parked_ns` with the sleep going on now counted up to now. The sequence lock
            /// gives a start and a total from the same moment, so a sleep is never counted
            /// twice (its time in the total and again from its start). A reader may still
            /// see that moment a little late: its "now" can then pass the end of a sleep
            /// the owner has just recorded, and the reading come out ahead by that much,
            /// which the next reading would take back. So a reading is never below the
            /// largest before it: readings never go down, and run ahead by at most that
            /// lateness until the real total passes them.
            pub(crate) fn parked_ns_now(&self) -> u64 {
                use std::sync::atomic::Ordering::Acquire;
                let mut tries = 0u32;
                loop {
                    let now = park_clock_ns(std::time::Instant::now());
                    let s1 = self.park_seq.load(Acquire);
                    if s1 & 1 == 0 {
                        let start = self.park_started_ns.load(Relaxed);
                        let total = self.parked_ns.get();
                        std::sync::atomic::fence(Acquire);
                        if self.park_seq.load(Relaxed) == s1 {
                            let v = total + if start != 0 { now.saturating_sub(start) } else { 0 };
                            return self.park_read_max.fetch_max(v, Relaxed).max(v);
                        }
                    }
                    // The owner is inside its (short) window: look again, and let it run if
                    // it was preempted there.
                    tries += 1;
                    if tries % 64 == 0 {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }

            /// This worker as [`Telemetry::snapshot`](super::Telemetry::snapshot) reads it;
            /// the queue and cache figures come from the worker's other parts.
            pub(crate) fn snapshot(
                &self,
                index: usize,
                local_queue_depth: u64,
                lifo_occupied: bool,
                cell_cache_bytes: u64,
            ) -> WorkerSnapshot {
                let mut w = WorkerSnapshot {
                    index,
                    state: self.state(),
                    local_queue_depth,
                    lifo_occupied,
                    $( $name: self.$name.get(), )*
                    ewma_task_ns: self.ewma_task_ns.load(Relaxed),
                    global_queue_interval: self.global_queue_interval.load(Relaxed),
                    cell_cache_bytes,
                    poll_time_histogram: {
                        let mut h = Histogram::default();
                        self.histograms.poll_time.add_to(&mut h);
                        h
                    },
                    busy_ns: 0,
                };
                // The poll-time histogram's sum is the time its polls took.
                w.busy_ns = w.poll_time_histogram.sum;
                // With the sleep going on now, read consistently with its start.
                w.parked_ns = self.parked_ns_now();
                w
            }

            /// Add this worker's share of the runtime-wide totals to `snap`.
            pub(crate) fn add_totals(&self, snap: &mut Snapshot) {
                $( snap.$total += self.$total.get(); )*
            }
        }

        /// One worker, as read by [`Telemetry::snapshot`](super::Telemetry::snapshot).
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct WorkerSnapshot {
            /// The worker's index (its bit in `parked_bitmap`).
            pub index: usize,
            /// Running, searching or parked.
            pub state: WorkerState,
            /// Tasks in its local ring.
            pub local_queue_depth: u64,
            /// Whether its LIFO slot holds a task.
            pub lifo_occupied: bool,
            $( $(#[doc = $doc])* pub $name: u64, )*
            /// EWMA of the time per task, in nanoseconds.
            pub ewma_task_ns: u64,
            /// Polls between global-queue checks, from the EWMA (8..=255).
            pub global_queue_interval: u32,
            /// Bytes of freed task cells its cell cache keeps for reuse (local lists and what
            /// other threads gave back), at most 512 KiB: the rest goes back to the allocator.
            pub cell_cache_bytes: u64,
            /// Poll durations in nanoseconds: one count per poll, by default. Empty when the
            /// runtime was built with `Builder::poll_time_histogram(false)` and no event ring
            /// (timing a poll costs one clock read).
            pub poll_time_histogram: Histogram,
            /// Nanoseconds it spent polling tasks: its timed polls' durations summed, the
            /// sum of `poll_time_histogram` (0 when the runtime does not time polls). A
            /// poll counts when it ends.
            pub busy_ns: u64,
        }
    };
}

for_each_worker_counter!(declare_worker_counters);

impl WorkerCounters {
    /// Owner only: a timed poll of `busy_ns` ended (the worker's own busy time is its
    /// poll-time histogram's sum). It counts in its task's group (`group_tag`:
    /// `groups::poll_tag`, or `NO_GROUP` for a poll whose task's statistics were not read)
    /// with the `waited_ns` it spent queued before.
    #[inline(always)]
    pub(crate) fn count_group_poll(&self, busy_ns: u64, group_tag: u32, waited_ns: u64) {
        if group_tag != NO_GROUP {
            if let Some(g) = &self.groups {
                g.on_poll(group_tag, busy_ns, waited_ns);
            }
        }
    }

    #[inline(always)]
    pub(crate) fn set_state(&self, s: WorkerState) {
        #[cfg(not(volt_no_counters))]
        self.state.store(s as u8, Relaxed);
        #[cfg(volt_no_counters)]
        let _ = s;
    }

    fn state(&self) -> WorkerState {
        match self.state.load(Relaxed) {
            1 => WorkerState::Searching,
            2 => WorkerState::Parked,
            _ => WorkerState::Running,
        }
    }
}

/// One worker's histograms (owner-written).
#[derive(Default)]
pub(crate) struct WorkerHistograms {
    /// Poll durations in ns (recorded while the runtime times polls: see
    /// `Builder::poll_time_histogram`).
    pub(crate) poll_time: LogHistogram,
    /// Wake-to-poll latency in ns (recorded when the event ring is on).
    pub(crate) schedule_latency: LogHistogram,
    /// How long each park lasted, in ns.
    pub(crate) park_duration: LogHistogram,
    /// Tasks taken per successful steal.
    pub(crate) steal_batch: LogHistogram,
}

#[cfg(all(test, not(loom)))]
mod park_time_tests {
    use super::WorkerCounters;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;

    /// A reader on another thread, reading while the owner sleeps and wakes over and
    /// over, never sees the parked time go down (a reading between the end of a sleep
    /// and the counter's update lost the whole sleep before the sequence lock), and a
    /// sleep that ended is counted once: the total is what the sleeps took.
    #[test]
    fn the_parked_time_never_goes_down_and_counts_each_sleep_once() {
        let c = Arc::new(WorkerCounters::new(61, 0, false));
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (c, done) = (Arc::clone(&c), Arc::clone(&done));
            std::thread::spawn(move || {
                let (mut last, mut reads) = (0, 0u64);
                while !done.load(Relaxed) || reads < 1000 {
                    let p = c.parked_ns_now();
                    assert!(p >= last, "the parked time went down: {last} then {p}");
                    last = p;
                    reads += 1;
                }
                last
            })
        };
        let rounds = if cfg!(miri) { 20 } else { 2_000 };
        let mut slept = std::time::Duration::ZERO;
        for i in 0..rounds {
            let t0 = std::time::Instant::now();
            c.park_started(t0);
            if i % 100 == 0 {
                std::thread::yield_now();
            }
            c.park_ended();
            slept += t0.elapsed();
        }
        done.store(true, Relaxed);
        let last_read = reader.join().expect("the reader saw the parked time go down");
        assert!(c.parked_ns_now() >= last_read, "went down after the reader's last reading");
        let total = c.parked_ns.get();
        // Each sleep counted once: no more than the time the loop spent in its sleeps
        // (give or take a nanosecond a sleep, for the rounding to whole nanoseconds).
        assert!(total <= slept.as_nanos() as u64 + rounds, "{total} ns counted, {slept:?} slept");
    }
}
