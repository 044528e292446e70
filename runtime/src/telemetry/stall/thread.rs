//! The monitor's thread: it asks stuck workers for their stacks when no worker is
//! awake to (see "Who samples" in the module above), and sleeps while every worker does.

#[cfg(target_os = "linux")]
use super::capture;
use super::Stacks;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::view::RuntimeView;
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How often the monitor's thread samples on its own while the workers sample: the net
/// under their samples (see "Who samples").
const NET_PERIOD: Duration = Duration::from_millis(250);

/// Start the monitor's thread for a runtime, if it takes stacks (the thread is there only
/// to ask for them: see "Who samples"). The thread holds the runtime's `Metrics` and
/// only a weak reference to the runtime itself, and leaves when the runtime is gone or
/// shutting down.
pub(crate) fn start(
    metrics: &Arc<Metrics>,
    runtime: Weak<dyn RuntimeView>,
    name: String,
) -> std::io::Result<Option<std::thread::JoinHandle<()>>> {
    let m = &metrics.stall;
    let Some(threshold) = m.threshold else { return Ok(None) };
    if m.stacks != Stacks::On {
        return Ok(None);
    }
    #[cfg(target_os = "linux")]
    capture::install();
    let metrics_for_thread = Arc::clone(metrics);
    let t = std::thread::Builder::new().name(name).spawn(move || monitor(metrics_for_thread, runtime, threshold))?;
    let _ = m.thread.set(t.thread().clone());
    // The workers sample from now on.
    m.next_sample.store(0, Release);
    Ok(Some(t))
}

fn monitor(metrics: Arc<Metrics>, weak: Weak<dyn RuntimeView>, threshold: Duration) {
    let fast = threshold / 2;
    let net = NET_PERIOD.max(threshold);
    let mut first = true;
    let m = &metrics.stall;
    // When it last woke from sleeping with no timeout (see "Sleeping while every worker
    // sleeps"): it sleeps that way at most once a net period.
    let mut woke_from_sleep: Option<Instant> = None;
    loop {
        let Some(runtime) = weak.upgrade() else { return };
        if runtime.is_shutdown() {
            return;
        }
        if std::mem::take(&mut first) {
            // Before any sleep below: a worker that wakes it must find its handle.
            let _ = m.thread.get_or_init(std::thread::current);
        }
        m.sample(&metrics, None, runtime.is_shutdown());
        let last = m.worker_sampled.load(Relaxed);
        let since_epoch = m.epoch.elapsed().as_nanos() as u64;
        let workers_sampling = last != 0 && since_epoch.saturating_sub(last - 1) < threshold.as_nanos() as u64;
        let all_parked = runtime.all_parked();
        if all_parked && woke_from_sleep.is_none_or(|t| t.elapsed() >= net) {
            m.sleeping.store(true, SeqCst);
            if runtime.all_parked() {
                drop(runtime);
                std::thread::park();
                woke_from_sleep = Some(Instant::now());
                continue;
            }
            m.sleeping.store(false, SeqCst);
        }
        // While the workers sample, this is only the net; while none does, it samples
        // every half threshold. Every worker parked: nothing to sample until it may
        // sleep again.
        let period = match woke_from_sleep {
            Some(t) if all_parked => net.saturating_sub(t.elapsed()).max(fast),
            _ if workers_sampling => net,
            _ => fast,
        };
        drop(runtime);
        std::thread::park_timeout(period);
    }
}
