//! One Volt runtime's bridge: its configuration and, once started, its Tokio runtime
//! (see the module doc of `bridge` for how it starts and shuts down).

use crate::telemetry::BridgeSnapshot;
use std::io;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Worker threads of the bridge's Tokio runtime unless
/// `Builder::tokio_bridge_threads` says otherwise.
pub(crate) const DEFAULT_THREADS: usize = 1;

pub(crate) const SHUT_DOWN: &str = "volt::bridge: the Volt runtime has shut down, and its Tokio bridge with it";

/// One Volt runtime's bridge: its configuration and, once started, its Tokio runtime.
/// Lives in the scheduler's `Handle`, so every runtime `Handle` reaches it.
pub(crate) struct Bridge {
    /// The Tokio handle, set once when the runtime starts: every poll of a [`WithTokio`]
    /// reads it without a lock.
    started: OnceLock<tokio::runtime::Handle>,
    /// Set (under `state`'s lock) when the Volt runtime shuts the bridge down; after
    /// that it never starts again.
    closed: AtomicBool,
    state: Mutex<State>,
}

/// What the lock guards: the configuration, and the runtime that owns the threads.
struct State {
    threads: usize,
    thread_name: String,
    /// `Builder::on_thread_start`/`on_thread_stop`, run on the bridge's threads too.
    hooks: crate::blocking::ThreadHooks,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Default for Bridge {
    fn default() -> Bridge {
        Bridge {
            started: OnceLock::new(),
            closed: AtomicBool::new(false),
            state: Mutex::new(State {
                threads: DEFAULT_THREADS,
                thread_name: "volt-worker-bridge".into(),
                hooks: Default::default(),
                runtime: None,
            }),
        }
    }
}

impl Bridge {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Set the worker count (at least 1) and the thread-name prefix (`-N` is appended).
    /// `Builder::build` calls it before the runtime is handed out.
    pub(crate) fn configure(&self, threads: usize, thread_name: String, hooks: crate::blocking::ThreadHooks) {
        let mut s = self.lock();
        s.threads = threads.max(1);
        s.thread_name = thread_name;
        s.hooks = hooks;
    }

    /// Whether the Volt runtime has shut the bridge down.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }

    /// The Tokio handle, starting the runtime on first use.
    pub(crate) fn handle(&self) -> io::Result<tokio::runtime::Handle> {
        if let Some(h) = self.started.get() {
            if !self.is_closed() {
                return Ok(h.clone());
            }
        }
        let mut s = self.lock();
        if self.is_closed() {
            return Err(io::Error::other(SHUT_DOWN));
        }
        if let Some(h) = self.started.get() {
            return Ok(h.clone());
        }
        let next = Arc::new(AtomicUsize::new(0));
        let prefix = s.thread_name.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(s.threads)
            .thread_name_fn(move || format!("{prefix}-{}", next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)))
            .on_thread_start({
                let hooks = s.hooks.clone();
                move || hooks.started()
            })
            .on_thread_stop({
                let hooks = s.hooks.clone();
                move || hooks.stopping()
            })
            .enable_all()
            .build()
            .map_err(|e| io::Error::new(e.kind(), format!("volt::bridge: cannot start the Tokio bridge: {e}")))?;
        let h = runtime.handle().clone();
        s.runtime = Some(runtime);
        // Only this thread sets it, under the lock, once.
        let _ = self.started.set(h.clone());
        Ok(h)
    }

    /// The bridge's figures from Tokio's stable runtime metrics; `None` before it started
    /// and after it shut down.
    pub(crate) fn snapshot(&self) -> Option<BridgeSnapshot> {
        let h = self.started.get()?;
        if self.is_closed() {
            return None;
        }
        let m = h.metrics();
        let workers = m.num_workers();
        Some(BridgeSnapshot {
            workers: workers as u64,
            alive_tasks: m.num_alive_tasks() as u64,
            global_queue_depth: m.global_queue_depth() as u64,
            busy: (0..workers).map(|w| m.worker_total_busy_duration(w)).sum(),
        })
    }

    /// Stop the bridge for good (`Runtime::shutdown`, last step). Waits for its threads
    /// (until `deadline`, if any) only where waiting is allowed; see the module doc.
    pub(crate) fn shutdown(&self, deadline: Option<Instant>) {
        let runtime = {
            let mut s = self.lock();
            self.closed.store(true, Release);
            s.runtime.take()
        };
        let Some(runtime) = runtime else { return };
        if !may_wait_here() {
            runtime.shutdown_background();
            return;
        }
        match deadline {
            Some(d) => runtime.shutdown_timeout(d.saturating_duration_since(Instant::now())),
            // Dropping waits for the workers and the blocking-pool threads.
            None => drop(runtime),
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // `Runtime::shutdown` has normally taken the runtime already. If not, never wait
        // here: the last reference to the Volt runtime may go on any thread.
        if let Some(runtime) = self.state.get_mut().unwrap_or_else(|e| e.into_inner()).runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Whether this thread may block until the bridge's threads exit: not inside a Volt
/// runtime (a worker, `block_on`, the blocking pool) nor inside any Tokio context, where
/// dropping a Tokio runtime panics.
fn may_wait_here() -> bool {
    crate::runtime::context::get().scheduler.is_null() && tokio::runtime::Handle::try_current().is_err()
}
