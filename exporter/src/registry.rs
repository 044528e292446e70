//! The figures of one watched runtime: handles into a private Prometheus recorder, plus
//! what is rendered by hand beside its output (see the crate doc), from the samples
//! published into it.

use crate::families::{
    Family, Figure, BRIDGE, BUSY_SECONDS, GLOBAL, GROUP, GROUP_QUANTILES, LOST_WAKER, MAX_GROUPS, PARKED_SECONDS,
    PARK_HISTOGRAM, POLL_HISTOGRAM, SCHEDULE_HISTOGRAM, WORKER_GAUGES,
};
use crate::sample::{Buckets, GroupSample, Sample, WorkerSample};
use metrics::{Counter, Gauge};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use std::fmt::Write as _;
use volt::telemetry::WORKER_COUNTERS;

/// The buckets of Volt's log2 histograms: a worker's poll-time buckets past these (from a
/// console that is not Volt's) count in the last, open-ended one.
const POLL_BUCKETS: usize = 32;

/// A registered family: its handle, and how to read its figure off `T`.
enum Handle<T> {
    Total(Counter, fn(&T) -> u64),
    Level(Gauge, fn(&T) -> f64),
}

/// One worker's registered series: its counters, in the order of
/// the worker counters that have a family (`WORKER_COUNTERS`, as `WorkerSample::counters`), then its gauges.
struct WorkerHandles {
    counters: Vec<Counter>,
    gauges: Vec<Handle<WorkerSample>>,
}

/// Describe the per-worker and runtime-wide families to the current recorder (inside
/// `with_local_recorder`).
fn describe_all() {
    metrics::with_recorder(|r| {
        for (name, help) in WORKER_COUNTERS.iter().filter_map(|c| c.family) {
            r.describe_counter(name.into(), None, help.into());
        }
        describe(r, WORKER_GAUGES);
        describe(r, GLOBAL);
    });
}

fn describe<T>(r: &dyn metrics::Recorder, families: &[Family<T>]) {
    for f in families {
        let (name, help) = (f.name.into(), f.help.into());
        match f.figure {
            Figure::Total(_) => r.describe_counter(name, f.unit, help),
            Figure::Level(_) => r.describe_gauge(name, f.unit, help),
        }
    }
}

/// Register `families` with `labels` with the current recorder (inside
/// `with_local_recorder`).
fn register<T>(families: &[Family<T>], labels: &[(&'static str, String)]) -> Vec<Handle<T>> {
    families
        .iter()
        .map(|f| match f.figure {
            Figure::Total(read) => Handle::Total(metrics::counter!(f.name, labels), read),
            Figure::Level(read) => Handle::Level(metrics::gauge!(f.name, labels), read),
        })
        .collect()
}

/// Set every handle from `v`.
fn set<T>(handles: &[Handle<T>], v: &T) {
    for h in handles {
        match h {
            Handle::Total(c, read) => c.absolute(read(v)),
            Handle::Level(g, read) => g.set(read(v)),
        }
    }
}

/// The figures one runtime publishes (see the module doc).
pub(crate) struct Registry {
    recorder: PrometheusRecorder,
    /// Registered at the first sample: until then nothing is known, and a series served
    /// as 0 would read as a counter reset when the real total arrives.
    global: Option<Vec<Handle<Sample>>>,
    workers: Vec<WorkerHandles>,
    last: Option<Sample>,
    /// Each worker's largest `parked_ns` served. Volt's readings never go down; keeping
    /// the largest makes the counter's rendering (by hand, not through `metrics`, whose
    /// counters keep their largest value) keep that promise for any source.
    parked_ns: Vec<u64>,
    /// The same for each worker's busy time.
    busy_ns: Vec<u64>,
    /// The last lost-waker count (kept when a sample carries none).
    lost_waker: Option<u64>,
    /// The task groups last published, each name once, at most [`MAX_GROUPS`].
    groups: Vec<GroupSample>,
}

impl Registry {
    pub(crate) fn new() -> Registry {
        let recorder = PrometheusBuilder::new().build_recorder();
        metrics::with_local_recorder(&recorder, describe_all);
        Registry {
            recorder,
            global: None,
            workers: Vec::new(),
            last: None,
            parked_ns: Vec::new(),
            busy_ns: Vec::new(),
            lost_waker: None,
            groups: Vec::new(),
        }
    }

    fn worker(&mut self, i: usize) -> &WorkerHandles {
        while self.workers.len() <= i {
            let labels = [("worker", self.workers.len().to_string())];
            let w = metrics::with_local_recorder(&self.recorder, || WorkerHandles {
                counters: WORKER_COUNTERS
                    .iter()
                    .filter_map(|c| c.family)
                    .map(|(name, _)| metrics::counter!(name, &labels))
                    .collect(),
                gauges: register(WORKER_GAUGES, &labels),
            });
            self.workers.push(w);
        }
        &self.workers[i]
    }

    pub(crate) fn publish(&mut self, s: Sample) {
        // A worker's index is its place in the list. One past it (a console that is not
        // Volt's, or a broken one) would register series for workers that do not exist,
        // as many as the index says: such entries are left out.
        let workers = s.workers.len();
        for w in s.workers.iter().filter(|w| w.index < workers) {
            let handles = self.worker(w.index);
            for (c, v) in handles.counters.iter().zip(&w.counters) {
                c.absolute(*v);
            }
            set(&handles.gauges, w);
        }
        let recorder = &self.recorder;
        let global =
            self.global.get_or_insert_with(|| metrics::with_local_recorder(recorder, || register(GLOBAL, &[])));
        set(global, &s);
        for w in s.workers.iter().filter(|w| w.index < workers) {
            let i = w.index;
            for (kept, now) in [(&mut self.parked_ns, w.parked_ns), (&mut self.busy_ns, w.busy_ns)] {
                if kept.len() <= i {
                    kept.resize(i + 1, 0);
                }
                kept[i] = kept[i].max(now);
            }
        }
        if s.lost_wakers.is_some() {
            self.lost_waker = s.lost_wakers;
        }
        self.last = Some(s);
    }

    /// Keep `groups`, each name once (the first entry of a name listed twice, from a
    /// console that is not Volt's) and at most [`MAX_GROUPS`].
    pub(crate) fn publish_groups(&mut self, groups: impl IntoIterator<Item = GroupSample>) {
        let mut seen = std::collections::HashSet::new();
        self.groups.clear();
        for g in groups {
            if self.groups.len() == MAX_GROUPS {
                break;
            }
            if seen.insert(g.name.clone()) {
                self.groups.push(g);
            }
        }
    }

    pub(crate) fn render(&self) -> String {
        let mut out = self.recorder.handle().render();
        let Some(s) = &self.last else { return out };
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        for ((name, help), per_worker) in [(PARKED_SECONDS, &self.parked_ns), (BUSY_SECONDS, &self.busy_ns)] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (i, ns) in per_worker.iter().enumerate() {
                let _ = writeln!(out, "{name}{{worker=\"{i}\"}} {}", *ns as f64 / 1e9);
            }
        }
        if let Some(n) = self.lost_waker {
            let (name, help) = LOST_WAKER;
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {n}");
        }
        let mut poll = Buckets { counts: vec![0; POLL_BUCKETS], sum: 0 };
        for h in s.workers.iter().filter_map(|w| w.poll_time.as_ref()) {
            for (i, b) in h.counts.iter().enumerate() {
                let o = &mut poll.counts[i.min(POLL_BUCKETS - 1)];
                *o = o.saturating_add(*b);
            }
            poll.sum = poll.sum.saturating_add(h.sum);
        }
        render_histogram(&mut out, POLL_HISTOGRAM, &poll);
        if let Some(h) = &s.park_duration {
            render_histogram(&mut out, PARK_HISTOGRAM, h);
        }
        if let Some(h) = &s.schedule_latency {
            render_histogram(&mut out, SCHEDULE_HISTOGRAM, h);
        }
        if let Some(b) = &s.bridge {
            for f in BRIDGE {
                let name = f.name;
                let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {}\n{name} {}", f.help, f.kind, (f.read)(b));
            }
        }
        self.render_groups(&mut out);
        out
    }

    /// The task groups' families, each with one series per group (none without groups).
    fn render_groups(&self, out: &mut String) {
        if self.groups.is_empty() {
            return;
        }
        let labels: Vec<String> = self.groups.iter().map(|g| label_value(&g.name)).collect();
        for f in GROUP {
            let name = f.name;
            let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {}", f.help, f.kind);
            for (g, label) in self.groups.iter().zip(&labels) {
                let _ = writeln!(out, "{name}{{group=\"{label}\"}} {}", (f.read)(g));
            }
        }
        for (name, help, read) in GROUP_QUANTILES {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (g, label) in self.groups.iter().zip(&labels) {
                if let Some(ns) = read(g) {
                    let _ = writeln!(out, "{name}{{group=\"{label}\"}} {}", ns as f64 / 1e9);
                }
            }
        }
    }
}

/// A log2 histogram of nanoseconds as a Prometheus histogram in seconds: bucket `i` holds
/// values below `2^(i+1)` ns, so its cumulative count is exact at `le = 2^(i+1) ns`. The
/// last bucket is open-ended (`+Inf`), and so is every bucket from the 64th on (their
/// bound would pass `u64`), which only a console that is not Volt's would send.
fn render_histogram(out: &mut String, (name, help): (&str, &str), h: &Buckets) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0u64;
    let bounded = h.counts.len().saturating_sub(1).min(63);
    for (i, c) in h.counts.iter().enumerate() {
        cumulative = cumulative.saturating_add(*c);
        if i < bounded {
            let le = (1u64 << (i + 1)) as f64 / 1e9;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le:e}\"}} {cumulative}");
        }
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
    let _ = writeln!(out, "{name}_sum {}", h.sum as f64 / 1e9);
    let _ = writeln!(out, "{name}_count {cumulative}");
}

/// `v` as a label value: backslash, double quote and newline escaped.
fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}
