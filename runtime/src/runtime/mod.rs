//! [`Runtime`], [`Builder`] and [`Handle`]: starting, entering and stopping a runtime.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = volt::runtime::Builder::new_multi_thread()
//!     .worker_threads(2)
//!     .thread_name("app-worker")
//!     .build()?;
//! // A Handle spawns from any thread, whether it is in the runtime or not.
//! let handle = rt.handle().clone();
//! let from_thread = std::thread::spawn(move || handle.spawn(async { 1 })).join().unwrap();
//! let sum = rt.block_on(async move {
//!     let here = volt::spawn(async { 2 });
//!     from_thread.await.unwrap() + here.await.unwrap()
//! });
//! assert_eq!(sum, 3);
//! // Every task still there is dropped and every thread joined, waiting a second at most.
//! rt.shutdown_timeout(Duration::from_secs(1));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! [`Builder::new_current_thread`] builds a runtime with no worker threads, whose tasks
//! run on the thread inside `block_on`.
//!
//! # Shutdown
//! Dropping a `Runtime` (or `shutdown_timeout`) does, in order:
//! 1. set the shutdown flag and unpark every worker;
//! 2. each worker finishes the poll it is in, leaves its loop, releases the queue entries
//!    it holds and exits; the caller joins the worker threads (or waits up to the timeout);
//! 3. close the global queue and the owned-task list, and cancel every task that is left:
//!    each future is dropped on the calling thread, and each `JoinHandle` then reports
//!    `is_cancelled()`. Shields do not defer this.
//! 4. release the global queue's entries;
//! 5. shut the reactor down: every socket's pending and later operations fail with an
//!    `io::Error`;
//! 6. shut the blocking pool down: queued `spawn_blocking` calls are cancelled, running
//!    ones finish, and its threads are joined;
//! 7. (feature `tokio-bridge`) shut the Tokio bridge down, if it started: waiting for its
//!    threads within what is left of the timeout on a plain thread, without waiting on a
//!    runtime or async thread (see `volt::bridge`);
//! 8. wait up to a second (or what is left of the timeout) for the stall monitor's
//!    thread to leave (it holds no lock and does no long work, so it leaves at its next
//!    look).
//!
//! Steps 3 to 6 run after the workers have left their loops, and the worker threads are
//! joined after step 6 (a thread that handed its worker off in a blocking join may be
//! waiting for a task that step 3 cancels).
//!
//! Dropped (or shut down) on one of the runtime's own threads (inside a task, a
//! `spawn_blocking` call, or a task whose worker a blocking join handed off), the runtime
//! can't wait for its workers: one of them may be the caller. Then `drop` does step 1 and
//! returns, and the last worker to leave its loop does steps 3 to 7 (the shutdown
//! hand-off), without joining any thread: each exits on its own once its poll or blocking
//! call returns. Every pending future is still dropped and nothing is leaked; a spawn
//! through a `Handle` after step 1 is cancelled at once.
//!
//! A current-thread runtime has no worker thread to join: its worker's exit (step 2) is
//! counted by the thread that shuts down, or, when a thread is inside `block_on` then, by
//! that thread as it leaves its loop (see `current`). The other steps are the same.
//!
//! Task memory is freed when the last reference goes: the runtime's, or a `JoinHandle`
//! or waker the program still holds.

pub(crate) mod context;
pub(crate) mod current;
pub(crate) mod handle;
mod metrics;

pub use metrics::RuntimeMetrics;

use crate::scheduler::idle::MAX_WORKERS;
use crate::task::JoinHandle;
use crate::telemetry::Telemetry;
use handle::Shared;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// [`Builder::stall_threshold`]'s default.
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(10);

/// Configures and builds a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    flavor: RuntimeFlavor,
    start_paused: bool,
    thread_name_fn: Option<ThreadNameFn>,
    worker_threads: Option<usize>,
    thread_name: String,
    thread_stack_size: usize,
    max_blocking_threads: usize,
    thread_keep_alive: Duration,
    event_ring: Option<usize>,
    poll_time_histogram: bool,
    stall_threshold: Option<Duration>,
    stall_stacks: bool,
    thread_hooks: crate::blocking::ThreadHooks,
    #[cfg(feature = "console")]
    console: Option<crate::console::ConsoleConfig>,
    /// The console was turned on by `#[volt::main]` rather than asked for: a console that
    /// cannot start (its port taken by another process) is a warning, not a failure.
    #[cfg(feature = "console")]
    console_optional: bool,
    #[cfg(feature = "tokio-bridge")]
    tokio_bridge_threads: usize,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// Defaults: one worker per available core, threads named `volt-worker-N`, 4 MiB stacks,
    /// up to 512 blocking-pool threads that exit after 10 s idle.
    pub fn new() -> Builder {
        Builder {
            flavor: RuntimeFlavor::MultiThread,
            start_paused: false,
            thread_name_fn: None,
            worker_threads: None,
            thread_name: "volt-worker".into(),
            thread_stack_size: 4 << 20,
            max_blocking_threads: 512,
            thread_keep_alive: Duration::from_secs(10),
            event_ring: None,
            poll_time_histogram: true,
            stall_threshold: Some(DEFAULT_STALL_THRESHOLD),
            stall_stacks: true,
            thread_hooks: Default::default(),
            #[cfg(feature = "console")]
            console: None,
            #[cfg(feature = "console")]
            console_optional: false,
            #[cfg(feature = "tokio-bridge")]
            tokio_bridge_threads: crate::bridge::DEFAULT_THREADS,
        }
    }

    /// A multi-thread work-stealing runtime, as [`Builder::new`] (Tokio's name for it).
    pub fn new_multi_thread() -> Builder {
        Builder::new()
    }

    /// A current-thread runtime: no worker threads. Every task runs on the thread that
    /// calls [`Runtime::block_on`] (or [`Handle::block_on`]), and only while some thread
    /// is inside `block_on`; timers, sockets and `spawn_blocking` work as on the
    /// multi-thread runtime, and telemetry shows its one worker. `worker_threads` has no
    /// effect on it. A blocking `JoinHandle::join` inside one of its tasks never hands the
    /// worker to another thread: it runs the target inline when it can, else it waits.
    pub fn new_current_thread() -> Builder {
        let mut b = Builder::new();
        b.flavor = RuntimeFlavor::CurrentThread;
        b
    }

    /// Accepted for Tokio's sake: a Volt runtime always has its reactor and timers.
    pub fn enable_all(&mut self) -> &mut Builder {
        self
    }

    /// Accepted for Tokio's sake: a Volt runtime always has its reactor.
    pub fn enable_io(&mut self) -> &mut Builder {
        self
    }

    /// Accepted for Tokio's sake: a Volt runtime always has its timers.
    pub fn enable_time(&mut self) -> &mut Builder {
        self
    }

    /// Start the runtime's clock paused (Tokio's `start_paused`): time only moves when
    /// every task waits on a timer, or through `volt::time::advance`. Needs the
    /// `test-util` feature to take effect; the `#[volt::test(start_paused = true)]`
    /// attribute calls it.
    pub fn start_paused(&mut self, start_paused: bool) -> &mut Builder {
        self.start_paused = start_paused;
        self
    }

    /// Name each worker thread with what `f` returns, called once per thread as it is
    /// started (instead of [`Builder::thread_name`]'s `NAME-N`). The blocking pool's
    /// threads keep the name `thread_name` gives them (`NAME-blocking`).
    pub fn thread_name_fn<F>(&mut self, f: F) -> &mut Builder
    where
        F: Fn() -> String + Send + Sync + 'static,
    {
        self.thread_name_fn = Some(ThreadNameFn(Arc::new(f)));
        self
    }

    /// Accepted for Tokio's sake, with no effect: a Volt worker sets its global-queue
    /// interval itself from its measured task times (1 ms of work between checks).
    ///
    /// # Panics
    /// When `val` is 0, as Tokio's.
    pub fn global_queue_interval(&mut self, val: u32) -> &mut Builder {
        assert!(val > 0, "global_queue_interval must be greater than 0");
        self
    }

    /// Accepted for Tokio's sake, with no effect: a Volt worker fires due timers at every
    /// budget tick (128 polls) and polls the reactor every 64 polls.
    ///
    /// # Panics
    /// When `val` is 0, as Tokio's.
    pub fn event_interval(&mut self, val: u32) -> &mut Builder {
        assert!(val > 0, "event_interval must be greater than 0");
        self
    }

    /// Accepted for Tokio's sake, with no effect: Volt's reactor sizes its own event
    /// buffer.
    pub fn max_io_events_per_tick(&mut self, _capacity: usize) -> &mut Builder {
        self
    }

    /// What `#[volt::main]` sets beyond Tokio's defaults: with the `console` feature, the
    /// console (and the event ring it reads tasks from, 1,024 events per worker, unless
    /// set), so that an application that names Volt as `tokio` is watched without a
    /// change to its source. `VOLT_CONSOLE=0` turns it off. A console that cannot start
    /// (its address in use) is reported on stderr and the program runs without it.
    #[doc(hidden)]
    pub fn __main_defaults(&mut self) -> &mut Builder {
        #[cfg(feature = "console")]
        {
            let off = std::env::var("VOLT_CONSOLE").is_ok_and(|v| matches!(v.trim(), "0" | "off" | "false" | "no"));
            if !off && self.console.is_none() {
                self.enable_console();
                self.console_optional = true;
                if self.event_ring.is_none() {
                    self.event_ring(1024);
                }
            }
        }
        self
    }

    /// Serve the console (gRPC, `volt.console.v1.Console`) on `VOLT_CONSOLE_BIND`, or
    /// `127.0.0.1:6670` when it is not set, from a thread of its own. `build()` fails if
    /// the address cannot be bound, or if it is not a loopback address and no token is set
    /// (`VOLT_CONSOLE_TOKEN` or [`Builder::console_token`]). Watch it with `volt-console`.
    #[cfg(feature = "console")]
    pub fn enable_console(&mut self) -> &mut Builder {
        self.console.get_or_insert_with(Default::default);
        self
    }

    /// Serve the console on `addr` (`host:port`; port 0 picks a free one, see
    /// [`Runtime::console_addr`]). Implies [`Builder::enable_console`].
    #[cfg(feature = "console")]
    pub fn console_bind(&mut self, addr: impl ToString) -> &mut Builder {
        self.console.get_or_insert_with(Default::default).bind = Some(addr.to_string());
        self
    }

    /// The token every console call must present (`authorization: Bearer <token>`);
    /// overrides `VOLT_CONSOLE_TOKEN`. Required for a non-loopback bind.
    #[cfg(feature = "console")]
    pub fn console_token(&mut self, token: impl Into<String>) -> &mut Builder {
        self.console.get_or_insert_with(Default::default).token = Some(token.into());
        self
    }

    /// The console server's connection cap and handshake timeout (default: 256
    /// connections, 10 s to send the HTTP/2 preface). See `volt::console::limits`.
    #[cfg(feature = "console")]
    pub fn console_connection_limits(&mut self, limits: crate::console::ConnectionLimits) -> &mut Builder {
        self.console.get_or_insert_with(Default::default).limits = Some(limits);
        self
    }

    /// How often the console publishes an update to its watchers (default 250 ms).
    #[cfg(feature = "console")]
    pub fn console_publish_interval(&mut self, every: Duration) -> &mut Builder {
        self.console.get_or_insert_with(Default::default).publish_interval = Some(every);
        self
    }

    /// Turn on the event ring (the flight recorder), keeping the last `capacity` events of
    /// each worker (rounded up to a power of two); as many again for each of two threads
    /// outside the runtime that record (a spawn from `main`, a wake from a thread of your
    /// own), which lease a ring each until they exit, go idle in the blocking pool, or
    /// record into another runtime; and as many for all other threads together. Memory:
    /// `workers + 2` rings of 32 bytes an event and one of 40. Off by default. Read it
    /// with [`Telemetry::events`](crate::telemetry::Telemetry::events). More than
    /// [`MAX_EVENT_RING`] is an error from `build`.
    ///
    /// It also gives every task statistics, read with
    /// [`Telemetry::tasks`](crate::telemetry::Telemetry::tasks): its name, polls and
    /// times, two histograms, and what it waits on (the waits its latest poll recorded, or
    /// `unknown`; see [`TaskInfo::waits`](crate::telemetry::TaskInfo::waits)). 248 bytes in
    /// each task's allocation, 80 of them written at its spawn. Without the ring no task
    /// keeps statistics, and `Telemetry::tasks()` is empty.
    pub fn event_ring(&mut self, capacity: usize) -> &mut Builder {
        self.event_ring = Some(capacity);
        self
    }

    /// Whether every worker times its polls for its poll-time histogram
    /// (`WorkerSnapshot::poll_time_histogram`; on by default). Timing costs one read of
    /// the CPU's time-stamp counter per poll, shared with the event ring when that is on:
    /// about 10 ns, which shows on workloads of tiny tasks (the `overhead` benchmark,
    /// `runtime/benches/README.md`). With `false`, no event ring and no stall threshold
    /// (`stall_threshold(None)`), polls are not timed and the histogram stays empty. The
    /// event ring and the stall threshold time every poll anyway, so with either the
    /// histogram is kept.
    pub fn poll_time_histogram(&mut self, enabled: bool) -> &mut Builder {
        self.poll_time_histogram = enabled;
        self
    }

    /// A poll that runs longer than this is a stall (default 10 ms; `None` turns stalls
    /// off). The worker measures each poll's length at its end (the threshold turns the
    /// poll timing on, see [`Builder::poll_time_histogram`]) and reports a longer one
    /// itself, once, with that length: nothing has to catch it while it runs, however
    /// busy the machine. A poll still running past the threshold counts as a stall
    /// already (`Stall::ongoing`). Reports: `Telemetry::stalls`,
    /// `Snapshot::stalls_total`, the console and `volt_worker_stalls_total`. It costs the
    /// workers four stores and a compare per poll, and a report per stall; see
    /// [`Builder::stall_stacks`] for the stack. Thresholds under 1 ms count as 1 ms.
    pub fn stall_threshold(&mut self, threshold: Option<Duration>) -> &mut Builder {
        self.stall_threshold = threshold;
        self
    }

    /// Whether a stall's report carries the stack the poll was stuck in (default `true`;
    /// Linux with glibc 2.35 or later only, where a thread can walk its own stack in a
    /// signal handler without a lock; elsewhere stalls come without a stack and say why,
    /// `Stall::missing_stack`).
    ///
    /// The stuck thread takes its own stack, in a `SIGURG` handler: each worker thread
    /// has a CPU-time timer that interrupts it every quarter threshold of CPU time it
    /// uses (never while it sleeps), which catches a poll that computes however busy the
    /// machine is; and a poll blocked in a system call is sent the signal by another
    /// worker or by a monitor thread (`<thread_name>-stall-monitor`, which samples every
    /// 250 ms, or the threshold if longer, while the workers sample, every half threshold
    /// while none does, and sleeps while every worker is parked). A system call
    /// interrupted by the signal restarts,
    /// except those the kernel never restarts after a handled signal (socket reads and
    /// writes with a timeout set, `poll`, `epoll_wait`, `nanosleep`), which fail with
    /// `EINTR` (`ErrorKind::Interrupted`; std's `read_exact`, `write_all` and
    /// `thread::sleep` retry it); the CPU-time timer only fires while the thread runs.
    /// Stacks are named (functions, `file:line` where the debug info says) when read,
    /// on the reader's thread: the first read loads the binary's debug info, once.
    /// With `false`, stalls are still found and reported, without a stack; no signal
    /// handler is installed, no timer made, no signal sent and no monitor thread started.
    pub fn stall_stacks(&mut self, enabled: bool) -> &mut Builder {
        self.stall_stacks = enabled;
        self
    }

    /// Worker threads of the Tokio bridge (`volt::bridge`; at least 1, default 1), named
    /// `<thread_name>-bridge-N`. The bridge starts on first use, so an unused one costs
    /// no threads.
    #[cfg(feature = "tokio-bridge")]
    pub fn tokio_bridge_threads(&mut self, n: usize) -> &mut Builder {
        self.tokio_bridge_threads = n.max(1);
        self
    }

    /// Run `f` on every worker thread and every blocking-pool thread when it starts, in
    /// the runtime's context (`Handle::current` works), before it runs any task. A panic
    /// in `f` is caught and ignored. Calling this again replaces the hook. With the
    /// `tokio-bridge` feature the bridge's threads run it too, in Tokio's context and not
    /// Volt's: there `tokio::runtime::Handle::current` works and Volt's `Handle::current`
    /// panics (use `Handle::try_current` in a hook that runs on both).
    pub fn on_thread_start<F: Fn() + Send + Sync + 'static>(&mut self, f: F) -> &mut Builder {
        self.thread_hooks.start = Some(Arc::new(f));
        self
    }

    /// Run `f` on every worker thread and every blocking-pool thread just before it exits
    /// (a worker at shutdown, a pool thread at shutdown or after its keep-alive), in the
    /// runtime's context (Tokio's on the bridge's threads, as for `on_thread_start`). Each
    /// thread that ran the start hook runs this once. A panic in `f` is caught and
    /// ignored. Calling this again replaces the hook.
    pub fn on_thread_stop<F: Fn() + Send + Sync + 'static>(&mut self, f: F) -> &mut Builder {
        self.thread_hooks.stop = Some(Arc::new(f));
        self
    }

    /// The most threads that run blocking calls at once (at least 1). Calls beyond that
    /// wait in the pool's queue. A thread that carries a worker handed off by a blocking
    /// join comes on top of these (and shows in the `blocking_threads` gauge).
    pub fn max_blocking_threads(&mut self, n: usize) -> &mut Builder {
        self.max_blocking_threads = n.max(1);
        self
    }

    /// How long an idle blocking-pool thread waits for work before it exits.
    pub fn thread_keep_alive(&mut self, d: Duration) -> &mut Builder {
        self.thread_keep_alive = d;
        self
    }

    /// The number of worker threads (1..=64).
    pub fn worker_threads(&mut self, n: usize) -> &mut Builder {
        self.worker_threads = Some(n);
        self
    }

    /// The name prefix of worker threads; the index is appended.
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Builder {
        self.thread_name = name.into();
        self
    }

    /// Stack size of worker threads (and of blocking-pool threads). A blocking
    /// `JoinHandle::join` runs its target on the joining worker's stack only while less
    /// than half of it is used, so join chains of any depth fit; a larger stack only
    /// means fewer hand-offs to other threads in very deep chains.
    pub fn thread_stack_size(&mut self, bytes: usize) -> &mut Builder {
        self.thread_stack_size = bytes;
        self
    }

    /// Start the worker threads.
    pub fn build(&mut self) -> io::Result<Runtime> {
        let current_thread = self.flavor == RuntimeFlavor::CurrentThread;
        let n = match self.worker_threads {
            // The current-thread runtime's one worker runs on the `block_on` thread.
            _ if current_thread => 1,
            Some(n) => n,
            None => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(MAX_WORKERS),
        };
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "volt: worker_threads must be at least 1"));
        }
        if n > MAX_WORKERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("volt: at most {MAX_WORKERS} worker threads are supported (one bit each in the parked bitmap); {n} were requested"),
            ));
        }
        if self.thread_name.contains('\0') {
            // std panics on such a name when it starts the thread.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("volt: the thread name {:?} holds a NUL byte", self.thread_name),
            ));
        }
        if let Some(cap) = self.event_ring.filter(|&c| c > MAX_EVENT_RING) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("volt: event_ring({cap}) is more than the most, {MAX_EVENT_RING} events per worker"),
            ));
        }
        let shared = Shared::new(
            n,
            crate::blocking::PoolConfig {
                max_threads: self.max_blocking_threads,
                keep_alive: self.thread_keep_alive,
                thread_name: format!("{}-blocking", self.thread_name),
                stack_size: self.thread_stack_size,
                hooks: self.thread_hooks.clone(),
            },
            self.event_ring,
            self.poll_time_histogram,
            (self.stall_threshold, self.stall_stacks),
            current_thread,
        )?;
        // Paused before any task runs, so the first `Instant::now()` is already virtual.
        if self.start_paused {
            crate::time::clock::pause_at_start(&shared);
        }
        #[cfg(feature = "tokio-bridge")]
        shared.bridge.configure(
            self.tokio_bridge_threads,
            format!("{}-bridge", self.thread_name),
            self.thread_hooks.clone(),
        );
        let mut rt = Runtime {
            handle: Handle { shared: Arc::clone(&shared) },
            threads: Vec::with_capacity(n),
            monitor: None,
            shut_down: false,
            #[cfg(feature = "console")]
            console: None,
        };
        // Workers not started count as exited, so the drop of `rt` (on an error, or a panic
        // from `spawn`) does not wait for them.
        if current_thread {
            // Its worker counts as parked while no thread is inside `block_on` (see
            // "Idle between calls" in `current`).
            let _ = shared.idle.transition_worker_to_parked(0, false);
            shared.on_state(&shared.workers[0], crate::telemetry::WorkerState::Parked);
        }
        // A current-thread runtime starts no worker thread: its worker runs inside
        // `block_on`, and its exit is counted by `current::exit_core`.
        let started = if current_thread { 0 } else { n };
        let mut unstarted = Unstarted { shared: Arc::clone(&shared), left: started };
        for index in 0..started {
            let shared = Arc::clone(&shared);
            let hooks = self.thread_hooks.clone();
            let name = match &self.thread_name_fn {
                Some(f) => (f.0)(),
                None => format!("{}-{index}", self.thread_name),
            };
            if name.contains('\0') {
                // std panics on such a name when it starts the thread; `rt`'s drop stops
                // the workers already started.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("volt: thread_name_fn returned {name:?}, which holds a NUL byte"),
                ));
            }
            let spawned = std::thread::Builder::new().name(name).stack_size(self.thread_stack_size).spawn(move || {
                // The hooks run in the runtime's context, outside any scheduler lock.
                let _enter = context::enter(&shared);
                hooks.run_thread(|| Shared::run_worker(Arc::clone(&shared), index));
            });
            match spawned {
                Ok(t) => {
                    rt.threads.push(t);
                    unstarted.left -= 1;
                }
                // `unstarted` counts the rest as exited, and `rt`'s drop stops the workers
                // already started.
                Err(e) => return Err(e),
            }
        }
        drop(unstarted);
        // Dropping `rt` on error shuts the workers down again.
        rt.monitor = crate::telemetry::stall::start(&shared, format!("{}-stall-monitor", self.thread_name))?;
        #[cfg(feature = "console")]
        if let Some(config) = &self.console {
            match crate::console::start(config, rt.handle.telemetry()) {
                Ok(console) => rt.console = Some(console),
                Err(e) if self.console_optional => {
                    eprintln!(
                        "volt console: not started ({e}); set VOLT_CONSOLE_BIND to another address, or VOLT_CONSOLE=0"
                    )
                }
                Err(e) => return Err(e),
            }
        }
        Ok(rt)
    }
}

/// `Builder::thread_name_fn`'s function.
#[derive(Clone)]
struct ThreadNameFn(Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Debug for ThreadNameFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ThreadNameFn(..)")
    }
}

/// The most events [`Builder::event_ring`] keeps per worker (16 Mi, 512 MiB a ring).
pub const MAX_EVENT_RING: usize = 1 << 24;

/// Worker threads `build` has not started: counted as exited when dropped.
struct Unstarted {
    shared: Arc<Shared>,
    left: usize,
}

impl Drop for Unstarted {
    fn drop(&mut self) {
        if self.left > 0 {
            self.shared.exited.lock().unwrap_or_else(|e| e.into_inner()).count += self.left;
        }
    }
}

/// A Volt runtime: multi-thread with work stealing ([`Builder::new_multi_thread`], the
/// default), or current-thread, whose tasks run on the thread inside `block_on`
/// ([`Builder::new_current_thread`]).
pub struct Runtime {
    handle: Handle,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The stall monitor's thread, waited for only a moment at shutdown (see
    /// `telemetry::stall`, "At shutdown").
    monitor: Option<std::thread::JoinHandle<()>>,
    shut_down: bool,
    #[cfg(feature = "console")]
    console: Option<crate::console::ServerHandle>,
}

impl Runtime {
    /// A runtime with one worker per available core.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// The address the console server listens on, when it is enabled.
    #[cfg(feature = "console")]
    pub fn console_addr(&self) -> Option<std::net::SocketAddr> {
        self.console.as_ref().map(|c| c.local_addr())
    }

    /// The handle: spawn from anywhere, read telemetry.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Spawn a task; same as `self.handle().spawn(future)`.
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Run `future` to completion on the calling thread, with this runtime as the context
    /// for `volt::spawn`. On a current-thread runtime the calling thread also runs the
    /// runtime's tasks, timers and I/O while it waits (see [`Builder::new_current_thread`]).
    ///
    /// # Panics
    /// When called on a worker thread (inside a task): that would block the worker. Use
    /// `.await`, or `JoinHandle::join`, which keeps the worker busy with other tasks.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.handle.block_on(future)
    }

    /// Run a blocking function on the runtime's blocking pool; same as
    /// `self.handle().spawn_blocking(f)`.
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.spawn_blocking(f)
    }

    /// Make this runtime the calling thread's current one until the guard drops, so that
    /// `volt::spawn`, `Handle::current` and the leaf futures' constructors find it.
    pub fn enter(&self) -> EnterGuard<'_> {
        self.handle.enter()
    }

    /// Tokio's runtime metrics; same as `self.handle().metrics()`.
    pub fn metrics(&self) -> RuntimeMetrics {
        self.handle.metrics()
    }

    /// Shut down without waiting for anything: as [`Runtime::shutdown_timeout`] with a
    /// zero timeout. Tasks the workers are not polling are still cancelled and their
    /// futures dropped; threads still busy exit on their own.
    pub fn shutdown_background(self) {
        self.shutdown_timeout(Duration::ZERO);
    }

    /// Shut down, waiting at most `timeout` for the workers to finish the polls they are in
    /// and for the runtime's threads (workers and blocking pool) to finish exiting (their
    /// stop hooks, their thread-locals' destructors). Threads still busy after that are
    /// left to exit on their own; every task the workers are not polling is still
    /// cancelled and its future dropped.
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        self.shutdown(Some(timeout));
    }

    fn shutdown(&mut self, timeout: Option<Duration>) {
        if std::mem::replace(&mut self.shut_down, true) {
            return;
        }
        #[cfg(feature = "console")]
        if let Some(mut c) = self.console.take() {
            c.stop();
        }
        let shared = &self.handle.shared;
        shared.shutdown.store(true, std::sync::atomic::Ordering::SeqCst);
        for i in 0..shared.workers.len() {
            shared.unpark_worker(i);
        }
        // The stall monitor sees the flag when it wakes, and leaves.
        shared.stall.unpark();
        if shared.current_thread {
            // Its worker has no thread: count its exit here, unless a thread inside
            // `block_on` has it (that thread does it as it leaves; see `current`).
            current::exit_core(shared);
        }
        let n = shared.workers.len();
        if context::current_handle().is_some_and(|s| Arc::ptr_eq(&s, shared)) {
            // On one of this runtime's own threads (inside a task, a blocking call, or a
            // task that lost its worker to a blocking join): waiting for the workers would
            // wait on ourselves. Leave the rest to the last worker to exit its loop, or do
            // it now if they all have; the threads exit on their own.
            self.threads.clear();
            self.monitor = None;
            let finish_now = shared.exited.lock().unwrap_or_else(|e| e.into_inner()).shut_down_inside(n);
            if finish_now {
                Shared::finish_shutdown_here(shared);
            }
            return;
        }
        let deadline = timeout.map(|t| crate::time::deadline_after(Instant::now(), t));
        let exits = shared.exited.lock().unwrap_or_else(|e| e.into_inner());
        drop(wait_until_deadline(&shared.exited_cv, exits, deadline, |exits| exits.count >= n));
        // Cancel first, then join: a thread that handed its worker off inside a blocking
        // join waits for that join's target, which this cancels if nothing else ends it.
        Shared::close_and_cancel_all(shared);
        // Pending I/O now fails instead of waiting; then the blocking pool winds down
        // within what is left of the timeout.
        shared.shut_down_driver();
        shared.blocking.shutdown(deadline.map(|d| d.saturating_duration_since(Instant::now())));
        // A worker counts as exited once it leaves its loop; its thread still runs the
        // stop hook and its thread-locals' destructors after that, within the timeout.
        join_until(self.threads.drain(..), deadline);
        #[cfg(feature = "tokio-bridge")]
        shared.bridge.shutdown(deadline);
        // Woken above, the monitor leaves at its next look.
        let monitor_by = Instant::now() + crate::telemetry::stall::EXIT_WAIT;
        join_until(self.monitor.take(), Some(deadline.map_or(monitor_by, |d| d.min(monitor_by))));
    }
}

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

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown(None);
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("workers", &self.handle.shared.workers.len()).finish()
    }
}

/// A cheap, cloneable reference to a runtime: spawn onto it from any thread.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl Handle {
    /// The handle of the runtime this thread is in (a worker, or inside `block_on`).
    ///
    /// # Panics
    /// Outside a runtime.
    pub fn current() -> Handle {
        Handle::try_current().expect("volt: `Handle::current` called outside a Volt runtime")
    }

    /// The handle of the runtime this thread is in, or an error saying why there is none.
    pub fn try_current() -> Result<Handle, TryCurrentError> {
        context::current_handle().map(|shared| Handle { shared }).ok_or(TryCurrentError { _private: () })
    }

    /// Make this runtime the calling thread's current one until the guard drops (guards
    /// nest: dropping one restores what was current before it). Drop guards in the reverse
    /// order of their creation.
    pub fn enter(&self) -> EnterGuard<'_> {
        EnterGuard { _guard: context::enter(&self.shared), _handle: std::marker::PhantomData }
    }

    /// Run `future` to completion on the calling thread, with this runtime as the context.
    ///
    /// From a thread outside the runtime: on a multi-thread runtime the workers run the
    /// timers and the reactor that wake the future; on a current-thread runtime this call
    /// runs the runtime's worker (its tasks, timers and I/O) while it waits, unless
    /// another thread inside `block_on` has it (then this thread takes the worker over
    /// when that one leaves).
    ///
    /// # Panics
    /// When called on a worker thread (inside a task): that would block the worker.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        assert!(
            !context::on_worker_thread(),
            "volt: `block_on` called on a runtime worker thread (inside a task), where it would block the worker; \
             `.await` the future or use `JoinHandle::join` instead"
        );
        if self.shared.current_thread {
            return current::block_on(&self.shared, future);
        }
        let _enter = context::enter(&self.shared);
        // Its own polls never yield to a scheduler: no cooperative budget (see
        // `task::coop`), even when called from inside a task's poll on a thread that
        // handed its worker away, or from a blocking closure.
        let _budget = crate::task::coop::Budget::unlimited();
        // The park counts this thread as busy while it polls, for a paused clock's
        // auto-advance (`time::clock`).
        let park = crate::time::clock::BlockOnPark::new(&self.shared);
        let waker = park.waker();
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
                return v;
            }
            park.park();
        }
    }

    /// Tokio's runtime metrics, read from this runtime's telemetry (see
    /// [`Handle::telemetry`] for all of it).
    pub fn metrics(&self) -> RuntimeMetrics {
        RuntimeMetrics::new(self.clone())
    }

    /// Which kind of runtime this is.
    pub fn runtime_flavor(&self) -> RuntimeFlavor {
        if self.shared.current_thread {
            RuntimeFlavor::CurrentThread
        } else {
            RuntimeFlavor::MultiThread
        }
    }

    /// Spawn a task. From a worker of this runtime it goes into that worker's LIFO slot;
    /// from any other thread into the global queue, waking a parked worker. After
    /// shutdown, the task is cancelled at once (its handle reports `is_cancelled()`). The
    /// caller's location is the task's spawn location (`TaskInfo::spawned_at`).
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Shared::spawn(&self.shared, future, std::panic::Location::caller())
    }

    /// Run a blocking function on this runtime's blocking pool, from any thread. Same as
    /// [`volt::task::spawn_blocking`](crate::task::spawn_blocking) inside the runtime.
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.shared.blocking.spawn(f)
    }

    /// The runtime's counters and gauges.
    pub fn telemetry(&self) -> Telemetry {
        Telemetry::new(Arc::clone(&self.shared))
    }

    /// The number of worker threads.
    pub fn num_workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// The Tokio runtime handle of this runtime's Tokio bridge, starting the bridge if it
    /// has not started yet (see `volt::bridge`). Spawn on it, or enter it, from any thread.
    ///
    /// # Panics
    /// After this runtime has shut down, or if the bridge's threads cannot be started; see
    /// [`Handle::try_tokio_bridge`].
    #[cfg(feature = "tokio-bridge")]
    pub fn tokio_bridge(&self) -> tokio::runtime::Handle {
        self.try_tokio_bridge().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Handle::tokio_bridge`], with an error instead of a panic after shutdown or when
    /// the bridge's threads cannot be started.
    #[cfg(feature = "tokio-bridge")]
    pub fn try_tokio_bridge(&self) -> io::Result<tokio::runtime::Handle> {
        self.shared.bridge.handle()
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("workers", &self.shared.workers.len()).finish()
    }
}

/// The kind of a runtime: [`Builder::new_current_thread`] or
/// [`Builder::new_multi_thread`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeFlavor {
    /// One worker, run by the thread inside `block_on`.
    CurrentThread,
    /// Worker threads of their own, with work stealing.
    MultiThread,
}

/// Keeps a runtime the thread's current one ([`Handle::enter`], [`Runtime::enter`]) until
/// dropped, then restores the one before.
#[must_use = "the runtime is current only while the guard lives"]
pub struct EnterGuard<'a> {
    _guard: context::EnterGuard,
    _handle: std::marker::PhantomData<&'a Handle>,
}

impl std::fmt::Debug for EnterGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

/// [`Handle::try_current`] found no runtime: the thread is not inside one.
#[derive(Debug)]
pub struct TryCurrentError {
    _private: (),
}

impl TryCurrentError {
    /// Whether the thread is simply outside any runtime (always so in Volt).
    pub fn is_missing_context(&self) -> bool {
        true
    }

    /// Whether the thread's runtime context was already destroyed (never so in Volt: the
    /// context is a plain pointer that needs no destructor).
    pub fn is_thread_local_destroyed(&self) -> bool {
        false
    }
}

impl std::fmt::Display for TryCurrentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("there is no reactor running, must be called from the context of a Volt runtime")
    }
}

impl std::error::Error for TryCurrentError {}
