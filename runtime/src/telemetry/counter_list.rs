//! The per-worker counters by name: [`WORKER_COUNTERS`] and [`WorkerSnapshot::counters`],
//! made from the one list of them (`counters.rs`), for readers that handle every counter
//! alike (a metrics exporter, a wire format) and so learn of a new one without a change of
//! their own.

use super::counters::for_each_worker_counter;
use super::WorkerSnapshot;

/// One per-worker counter of [`WorkerSnapshot`]: the field that holds it, and the
/// Prometheus counter family it is published as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerCounter {
    /// Its field of [`WorkerSnapshot`] (`tasks_polled`).
    pub name: &'static str,
    /// The family's name and help text (`volt_worker_polls_total`, "Task polls the worker
    /// made."); `None` for a counter published in another form (`parked_ns`, in seconds).
    pub family: Option<(&'static str, &'static str)>,
}

/// Builds [`WORKER_COUNTERS`] and [`WorkerSnapshot::counters`] from the list.
macro_rules! counter_list {
    (@family) => { None };
    (@family $family:literal, $help:literal) => { Some(($family, $help)) };
    (
        []
        per_worker { $( $(#[doc = $doc:literal])* $name:ident [$($family:tt)*]; )* }
        totals { $( $total:ident; )* }
    ) => {
        /// Every per-worker counter of [`WorkerSnapshot`], in the order of its fields.
        pub const WORKER_COUNTERS: &[WorkerCounter] = &[
            $( WorkerCounter { name: stringify!($name), family: counter_list!(@family $($family)*) }, )*
        ];

        impl WorkerSnapshot {
            /// Its counters, each with its entry of [`WORKER_COUNTERS`], in that order.
            ///
            /// ```
            /// let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
            /// let w = &rt.handle().telemetry().snapshot().workers[0];
            /// let polls = w.counters().find(|(c, _)| c.name == "tasks_polled").unwrap().1;
            /// assert_eq!(polls, w.tasks_polled);
            /// ```
            pub fn counters(&self) -> impl Iterator<Item = (&'static WorkerCounter, u64)> {
                WORKER_COUNTERS.iter().zip([$( self.$name, )*])
            }
        }
    };
}

for_each_worker_counter!(counter_list);
