//! The sidecar's side of the library (feature `sidecar`): the console's wire types as
//! samples, field for field, and the address parsing of the `volt-exporter` binary. The
//! binary itself (`main.rs`) follows the console stream with `volt-console-client`.

use crate::sample::{BridgeSample, Buckets, GroupSample, Sample, WorkerSample};
use std::io;
use std::net::SocketAddr;
use volt_console_proto as proto;

/// Parse a user-given `host:port` or `http://host:port` to one socket address, with a
/// clear error (the console client library's address parser).
pub fn parse_addr(s: &str) -> io::Result<SocketAddr> {
    Ok(volt_console_client::resolve_addr(s)?)
}

/// Parse a user-given `host:port` or `http://host:port` to every address it names (at
/// least one), with a clear error; for [`bind_first`](crate::bind_first).
pub fn parse_addrs(s: &str) -> io::Result<Vec<SocketAddr>> {
    Ok(volt_console_client::resolve_addrs(s)?)
}

impl From<&proto::Histogram> for Buckets {
    fn from(h: &proto::Histogram) -> Buckets {
        Buckets { counts: h.buckets.clone(), sum: h.sum }
    }
}

impl From<&proto::WorkerSnapshot> for WorkerSample {
    fn from(w: &proto::WorkerSnapshot) -> WorkerSample {
        WorkerSample {
            index: w.index as usize,
            // The console's list of the worker counters' families: the families of
            // `volt::telemetry::WORKER_COUNTERS`, in the same order (one list in the
            // runtime makes both), read off the wire's worker.
            counters: volt::console::WORKER_COUNTER_FAMILIES.iter().map(|&(_, _, read)| read(w)).collect(),
            parked_ns: w.parked_ns,
            busy_ns: w.busy_ns,
            local_queue_depth: w.local_queue_depth,
            global_queue_interval: w.global_queue_interval,
            ewma_task_ns: w.ewma_task_ns,
            poll_time: w.poll_time_histogram.as_ref().map(Buckets::from),
        }
    }
}

impl From<&proto::Snapshot> for Sample {
    fn from(s: &proto::Snapshot) -> Sample {
        crate::sample::runtime_sample!(s, {
            workers: s.workers.iter().map(WorkerSample::from).collect(),
            park_duration: s.park_duration_histogram.as_ref().map(Buckets::from),
            schedule_latency: s.schedule_latency_histogram.as_ref().map(Buckets::from),
            lost_wakers: s.tasks_lost_waker,
            bridge: s.bridge.as_ref().map(|b| BridgeSample {
                workers: b.workers,
                alive_tasks: b.alive_tasks,
                global_queue_depth: b.global_queue_depth,
                busy_ns: b.busy_ns,
            }),
        })
    }
}

impl From<&proto::TaskGroup> for GroupSample {
    fn from(g: &proto::TaskGroup) -> GroupSample {
        GroupSample {
            name: g.name.clone(),
            spawned: g.spawned,
            alive: g.alive,
            completed: g.completed,
            cancelled: g.cancelled,
            panicked: g.panicked,
            polls: g.polls,
            busy_ns: g.busy_ns,
            slow_polls: g.slow_polls,
            slow_poll_busy_ns: g.slow_poll_busy_ns,
            first_polls: g.first_polls,
            first_poll_delay_ns: g.first_poll_delay_ns,
            scheduled: g.scheduled,
            schedule_delay_ns: g.schedule_delay_ns,
            poll_p50_ns: g.poll_p50_ns,
            poll_p99_ns: g.poll_p99_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metrics;

    /// The sidecar reads each worker's counters with the console's list of families and
    /// registers them with the runtime's: the two lists must name the same families, with
    /// the same help, in the same order.
    #[test]
    fn the_console_lists_the_worker_families_of_the_telemetry() {
        let wire: Vec<(&str, &str)> = volt::console::WORKER_COUNTER_FAMILIES.iter().map(|&(n, h, _)| (n, h)).collect();
        let direct: Vec<(&str, &str)> = volt::telemetry::WORKER_COUNTERS.iter().filter_map(|c| c.family).collect();
        assert_eq!(wire, direct);
        assert!(direct.iter().any(|&(n, _)| n == "volt_worker_polls_total"), "{direct:?}");
    }

    /// One reading of a runtime (workers with counts, the event ring's task groups, a running
    /// Tokio bridge) published straight from `volt::telemetry` and through the console's wire
    /// types: the same sample, and the same exposition, line for line (the recorder's
    /// families come in no fixed order, so the lines are compared sorted).
    #[test]
    fn the_direct_way_and_the_wire_render_the_same_exposition() {
        let rt =
            volt::runtime::Builder::new().worker_threads(2).event_ring(1024).tokio_bridge_threads(1).build().unwrap();
        let hs: Vec<_> = (0..50)
            .map(|i| {
                let name = if i % 2 == 0 { "even" } else { "a \"quoted\" name" };
                volt::task::Builder::new().name(name).spawn_on(async { volt::task::yield_now().await }, rt.handle())
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let bridged = rt.handle().tokio_bridge().spawn(async { 7 });
        assert_eq!(
            rt.block_on(async { volt::time::timeout(std::time::Duration::from_secs(10), bridged).await })
                .unwrap()
                .unwrap(),
            7
        );

        let telemetry = rt.handle().telemetry();
        let snapshot = telemetry.snapshot();
        let groups = telemetry.task_groups();
        assert!(snapshot.bridge.is_some(), "the bridge ran");
        assert!(groups.iter().any(|g| g.name == "even"), "{groups:?}");

        let direct = Sample::from(&snapshot).with_lost_wakers(Some(3));
        let mut wire = proto::Snapshot::from(&snapshot);
        wire.tasks_lost_waker = Some(3);
        assert_eq!(Sample::from(&wire), direct);
        let wire_groups: Vec<proto::TaskGroup> = groups.iter().map(proto::TaskGroup::from).collect();

        let (a, b) = (Metrics::new(), Metrics::new());
        a.publish(direct);
        a.publish_groups(&groups);
        b.publish(&wire);
        b.publish_groups(&wire_groups);
        let text = a.render();
        let sorted = |t: &str| {
            let mut lines: Vec<String> = t.lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
            lines.sort();
            lines
        };
        assert_eq!(sorted(&text), sorted(&b.render()));
        for family in [
            "volt_worker_polls_total{worker=\"1\"}",
            "volt_worker_busy_seconds_total{worker=\"0\"}",
            "volt_tasks_lost_waker 3",
            "volt_bridge_busy_seconds_total",
            "volt_task_group_spawned_total{group=\"even\"} 25",
            "volt_task_group_spawned_total{group=\"a \\\"quoted\\\" name\"} 25",
            "volt_task_poll_duration_seconds_count",
        ] {
            assert!(text.contains(family), "{family} is missing:\n{text}");
        }
    }
}
