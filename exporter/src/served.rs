//! [`Metrics`]: what an exporter serves, whose series, and when.

use crate::families::CONSOLE_UP;
use crate::registry::Registry;
use crate::sample::{GroupSample, Sample};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What an exporter serves. `publish` a sample; `render` the exposition text.
///
/// # Whose series, and when
/// The watched runtime's series (every family but the exporter's own `volt_exporter_*`)
/// live in one registry: a private recorder, the last sample and what is rendered from
/// it. In-process the runtime is this process's own, and its series are always served.
/// The sidecar knows its runtime only through the console stream, so the registry follows
/// the stream ([`Metrics::set_console_up`]):
///
/// 1. Down (at start, and when the stream ends, fails or stalls): the registry is dropped,
///    and a scrape has `volt_exporter_*` only. A process that may be gone is not reported,
///    not even with its last values.
/// 2. Connected: updates are published into a fresh registry, not served yet.
/// 3. Up (set once the first update is published): served, so the first scrape that says
///    `volt_exporter_console_up 1` has the figures too.
///
/// So every connection starts from an empty registry: a restarted process's counters start
/// over instead of being held at the old process's values, and no series of the old
/// process comes back (a worker index the new one does not have). A new process seen
/// without the stream going down (the sidecar subscribing again) gets a fresh registry via
/// [`Metrics::reset`]. The state and the registry share one lock, so a scrape sees both
/// as they were at one moment.
pub struct Metrics {
    served: Mutex<Served>,
    /// When the last renders (scrapes) were: the figures that walk every task are wanted
    /// only while someone scrapes.
    scrapes: Mutex<Scrapes>,
}

/// The watched runtime's registry and whether it is served, under one lock.
struct Served {
    source: Source,
    runtime: Registry,
}

/// Where the runtime's figures come from, which decides whether they are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// This process's runtime (in-process): always served, no `volt_exporter_console_up`.
    InProcess,
    /// A console stream that is not delivering: nothing of the runtime is served.
    ConsoleDown,
    /// A console stream that delivers.
    ConsoleUp,
}

impl Source {
    /// Whether the runtime's series are served.
    fn serves_runtime(self) -> bool {
        self != Source::ConsoleDown
    }

    /// The value of `volt_exporter_console_up`, for a sidecar.
    fn console_up(self) -> Option<u8> {
        match self {
            Source::InProcess => None,
            Source::ConsoleDown => Some(0),
            Source::ConsoleUp => Some(1),
        }
    }
}

/// The last scrape, and the time between it and the one before.
#[derive(Clone, Copy, Debug, Default)]
struct Scrapes {
    last: Option<Instant>,
    gap: Option<Duration>,
}

impl Scrapes {
    fn scraped(&mut self, now: Instant) {
        if let Some(last) = self.last {
            self.gap = Some(now.saturating_duration_since(last));
        }
        self.last = Some(now);
    }

    /// Whether a scraper is still there at `now`: its last scrape is less than
    /// [`SCRAPER_GONE`] old, or less than three of its own intervals when it scrapes less
    /// often than that (up to [`SCRAPER_GONE_MAX`]).
    fn present_at(&self, now: Instant) -> bool {
        let window = self.gap.map_or(SCRAPER_GONE, |g| g.saturating_mul(3).clamp(SCRAPER_GONE, SCRAPER_GONE_MAX));
        self.last.is_some_and(|t| now.saturating_duration_since(t) < window)
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// How long after the last scrape the exporter keeps asking for the figures that walk
/// every task (the in-process sampler, and the sidecar of the console), unless the
/// scraper's own interval is longer (see [`Metrics::scraper_present`]).
pub const SCRAPER_GONE: Duration = Duration::from_secs(60);

/// The longest a scraper with a long interval counts as present after its last scrape.
pub const SCRAPER_GONE_MAX: Duration = Duration::from_secs(600);

impl Metrics {
    /// An empty registry, for a runtime whose series are always served (in-process). The
    /// sidecar makes it follow the console with [`Metrics::set_console_up`].
    pub fn new() -> Metrics {
        Metrics {
            served: Mutex::new(Served { source: Source::InProcess, runtime: Registry::new() }),
            scrapes: Default::default(),
        }
    }

    fn served(&self) -> std::sync::MutexGuard<'_, Served> {
        self.served.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Set every metric from `s` (served while the source is up; see the type's doc): a
    /// [`Sample`], a `&volt::telemetry::Snapshot`, or with the `sidecar` feature a
    /// `&volt_console_proto::Snapshot`.
    pub fn publish(&self, s: impl Into<Sample>) {
        let s = s.into();
        self.served().runtime.publish(s);
    }

    /// Set the task groups' series from `groups` (`Telemetry::task_groups`, or with the
    /// `sidecar` feature an update's `task_groups`): one series per group and family; a
    /// group no longer listed goes. A name listed twice (a console that is not Volt's)
    /// keeps its first entry, and past the runtime's bound of 101 the rest are left out.
    pub fn publish_groups<'a, G: 'a>(&self, groups: &'a [G])
    where
        &'a G: Into<GroupSample>,
    {
        let groups: Vec<GroupSample> = groups.iter().map(Into::into).collect();
        self.served().runtime.publish_groups(groups);
    }

    /// Drop every series (a different process is being watched now).
    pub fn reset(&self) {
        self.served().runtime = Registry::new();
    }

    /// Sidecar: whether the console stream is up (`volt_exporter_console_up`). Down drops
    /// every series of the watched runtime, so that nothing of a process that may be gone
    /// is served, now or after the stream comes back; up serves what was published since.
    pub fn set_console_up(&self, up: bool) {
        let mut served = self.served();
        if up {
            served.source = Source::ConsoleUp;
        } else {
            served.source = Source::ConsoleDown;
            served.runtime = Registry::new();
        }
    }

    /// Whether something rendered (scraped) these metrics within `d`.
    pub fn scraped_within(&self, d: Duration) -> bool {
        self.scrapes.lock().unwrap_or_else(|e| e.into_inner()).last.is_some_and(|t| t.elapsed() < d)
    }

    /// Whether a scraper is still there: the last scrape is less than [`SCRAPER_GONE`]
    /// old, or, for a scraper whose interval is longer than a third of that, less than
    /// three of its intervals (at most [`SCRAPER_GONE_MAX`]). So a Prometheus that scrapes
    /// every two minutes counts as present between its scrapes, not as gone and back each
    /// time.
    pub fn scraper_present(&self) -> bool {
        self.scrapes.lock().unwrap_or_else(|e| e.into_inner()).present_at(Instant::now())
    }

    /// The Prometheus text exposition: the runtime's series from the last published
    /// sample while they are served, then the sidecar's own.
    pub fn render(&self) -> String {
        self.scrapes.lock().unwrap_or_else(|e| e.into_inner()).scraped(Instant::now());
        let served = self.served();
        let mut out = if served.source.serves_runtime() { served.runtime.render() } else { String::new() };
        if let Some(up) = served.source.console_up() {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            let (name, help) = CONSOLE_UP;
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {up}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{Buckets, WorkerSample};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Histograms with more buckets than Volt sends (a console that is not Volt's): the
    /// scrape still renders, with bounds that only grow, and counts that add up (the
    /// first form panicked past 64 buckets and dropped a worker's poll buckets past 32
    /// while still adding their sum).
    #[test]
    fn wide_histograms_from_a_console_render_whole() {
        let wide = |n: usize| Some(Buckets { counts: vec![1; n], sum: 5 });
        let sample = Sample {
            park_duration: wide(70),
            workers: vec![WorkerSample { poll_time: wide(40), ..Default::default() }],
            ..Default::default()
        };
        let m = Metrics::new();
        m.publish(sample);
        let text = m.render();
        for (family, n) in [("volt_worker_park_duration_seconds", 70), ("volt_task_poll_duration_seconds", 40)] {
            let mut last_le = 0.0;
            let mut last_count = 0;
            for line in text.lines().filter(|l| l.starts_with(&format!("{family}_bucket{{"))) {
                let (labels, count) = line.rsplit_once(' ').unwrap();
                let count: u64 = count.parse().unwrap();
                assert!(count >= last_count, "{line}");
                last_count = count;
                let le = labels.split('"').nth(1).unwrap();
                if le != "+Inf" {
                    let le: f64 = le.parse().unwrap();
                    assert!(le > last_le, "{line}");
                    last_le = le;
                }
            }
            assert_eq!(last_count, n, "{family}: +Inf does not count every bucket");
            assert!(text.contains(&format!("{family}_count {n}\n")), "{family}");
        }
    }

    /// A scraper counts as present between its scrapes whatever its interval (up to ten
    /// minutes' worth), and as gone once it has missed about three; one with a short
    /// interval, or a single scrape, counts for a minute.
    #[test]
    fn a_scraper_with_a_long_interval_stays_present_between_its_scrapes() {
        let t0 = Instant::now();
        let mut s = Scrapes::default();
        assert!(!s.present_at(t0), "present before any scrape");
        s.scraped(t0);
        assert!(s.present_at(t0 + secs(59)));
        assert!(!s.present_at(t0 + secs(61)), "a single scrape counts for a minute");
        // Every two minutes: present until the next scrape and through two missed ones.
        s.scraped(t0 + secs(120));
        assert!(s.present_at(t0 + secs(120 + 119)), "gone between two scrapes of a 2-minute scraper");
        assert!(s.present_at(t0 + secs(120 + 359)));
        assert!(!s.present_at(t0 + secs(120 + 361)), "still present after three missed scrapes");
        // Every 15 s: a minute after the last.
        let mut f = Scrapes::default();
        f.scraped(t0);
        f.scraped(t0 + secs(15));
        assert!(f.present_at(t0 + secs(15 + 59)));
        assert!(!f.present_at(t0 + secs(15 + 61)));
        // Two scrapes an hour apart (someone's curl): ten minutes, not three hours.
        let mut c = Scrapes::default();
        c.scraped(t0);
        c.scraped(t0 + secs(3600));
        assert!(c.present_at(t0 + secs(3600 + 599)));
        assert!(!c.present_at(t0 + secs(3600 + 601)));
    }
}
