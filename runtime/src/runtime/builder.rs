//! [`Builder`]: a runtime's configuration, and `build`, which starts it.

use super::{Handle, IoDriver, Runtime, RuntimeFlavor};
use crate::scheduler::handle::Handle as Scheduler;
use crate::scheduler::idle::MAX_WORKERS;
use std::io;
use std::sync::Arc;
use std::time::Duration;

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
    name: Option<String>,
    thread_stack_size: usize,
    max_blocking_threads: usize,
    thread_keep_alive: Duration,
    event_ring: Option<usize>,
    task_statistics: TaskStatistics,
    io_driver: IoDriver,
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
            name: None,
            thread_stack_size: 4 << 20,
            max_blocking_threads: 512,
            thread_keep_alive: Duration::from_secs(10),
            event_ring: None,
            task_statistics: TaskStatistics::Always,
            io_driver: IoDriver::Auto,
            poll_time_histogram: true,
            stall_threshold: Some(DEFAULT_STALL_THRESHOLD),
            stall_stacks: true,
            thread_hooks: Default::default(),
            #[cfg(feature = "console")]
            console: None,
            #[cfg(feature = "console")]
            console_optional: false,
            #[cfg(feature = "tokio-bridge")]
            tokio_bridge_threads: crate::bridge::state::DEFAULT_THREADS,
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
    #[track_caller]
    pub fn global_queue_interval(&mut self, val: u32) -> &mut Builder {
        assert!(val > 0, "global_queue_interval must be greater than 0");
        self
    }

    /// Accepted for Tokio's sake, with no effect: a Volt worker fires due timers at every
    /// budget tick (128 polls) and polls the reactor every 64 polls.
    ///
    /// # Panics
    /// When `val` is 0, as Tokio's.
    #[track_caller]
    pub fn event_interval(&mut self, val: u32) -> &mut Builder {
        assert!(val > 0, "event_interval must be greater than 0");
        self
    }

    /// Accepted for Tokio's sake, with no effect: Volt's reactor sizes its own event
    /// buffer.
    ///
    /// # Panics
    /// If `capacity` is zero, as Tokio's.
    #[track_caller]
    pub fn max_io_events_per_tick(&mut self, capacity: usize) -> &mut Builder {
        assert!(capacity > 0, "max_io_events_per_tick must be non-zero");
        self
    }

    /// Accepted for Tokio's sake, with no effect, as
    /// [`max_io_events_per_tick`](Self::max_io_events_per_tick).
    ///
    /// # Panics
    /// If `capacity` is zero, as Tokio's.
    #[track_caller]
    pub fn max_io_events_per_busy_tick(&mut self, capacity: usize) -> &mut Builder {
        assert!(capacity > 0, "max_io_events_per_busy_tick must be non-zero");
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
    /// `unknown`; see [`TaskInfo::waits`](crate::telemetry::TaskInfo::waits)). 256 bytes in
    /// each task's allocation, 88 of them written at its spawn. Without the ring no task
    /// keeps statistics, and `Telemetry::tasks()` is empty.
    pub fn event_ring(&mut self, capacity: usize) -> &mut Builder {
        self.event_ring = Some(capacity);
        self
    }

    /// When tasks keep the statistics the event ring gives them (with the ring on; see
    /// [`TaskStatistics`]): [`Always`](TaskStatistics::Always), the default, or only
    /// [`WhileWatched`](TaskStatistics::WhileWatched), so that a runtime nobody is
    /// looking at pays for the ring's records alone.
    pub fn task_statistics(&mut self, when: TaskStatistics) -> &mut Builder {
        self.task_statistics = when;
        self
    }

    /// Which I/O driver the runtime's reactor uses: [`IoDriver::Auto`] (the default;
    /// epoll unless the `VOLT_IO_DRIVER` environment variable says `io_uring`),
    /// [`IoDriver::Epoll`] or [`IoDriver::IoUring`]. Both give the same readiness to the
    /// same socket types, so everything above them runs unchanged on either.
    /// `Handle::io_driver` says which one a runtime got. `build` fails with a clear error
    /// if `IoUring` is asked for (or named by `VOLT_IO_DRIVER`) where the kernel does not
    /// offer it.
    pub fn io_driver(&mut self, driver: IoDriver) -> &mut Builder {
        self.io_driver = driver;
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

    /// Run `f` on a worker thread just before it goes idle (parks, in the reactor or on
    /// its futex), inside the runtime's context, as Tokio's. A task `f` spawns there runs
    /// at once: the worker then does not park (it still runs [`Builder::on_thread_unpark`]).
    /// A panic in `f` is caught and ignored. Called on the thread driving a current-thread
    /// runtime too.
    pub fn on_thread_park<F: Fn() + Send + Sync + 'static>(&mut self, f: F) -> &mut Builder {
        self.thread_hooks.park = Some(Arc::new(f));
        self
    }

    /// Run `f` on a worker thread just after it leaves idle (each `on_thread_park` is
    /// followed by one), before it runs tasks again, as Tokio's.
    pub fn on_thread_unpark<F: Fn() + Send + Sync + 'static>(&mut self, f: F) -> &mut Builder {
        self.thread_hooks.unpark = Some(Arc::new(f));
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

    /// The runtime's name, which [`Handle::name`](crate::runtime::Handle::name) returns
    /// (none by default). It names no thread: see [`Builder::thread_name`] for those.
    ///
    /// # Panics
    /// If `name` is empty or only whitespace, as Tokio's does.
    #[track_caller]
    pub fn name(&mut self, name: impl Into<String>) -> &mut Builder {
        let name = name.into();
        assert!(!name.trim().is_empty(), "runtime name shouldn't be empty");
        self.name = Some(name);
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

    /// Build a [`LocalRuntime`](super::LocalRuntime): this current-thread runtime, with
    /// `spawn_local` working wherever it is current on this thread, for futures that are
    /// not `Send`.
    ///
    /// # Panics
    /// On a builder for the multi-thread runtime (`new_multi_thread`, `new`), as Tokio's.
    pub fn build_local(&mut self, _options: super::LocalOptions) -> io::Result<super::LocalRuntime> {
        if self.flavor != RuntimeFlavor::CurrentThread {
            panic!("multi_thread is not supported for LocalRuntime");
        }
        self.build().map(super::LocalRuntime::from_runtime)
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
        let shared = Scheduler::new(
            n,
            crate::blocking::PoolConfig {
                max_threads: self.max_blocking_threads,
                keep_alive: self.thread_keep_alive,
                thread_name: format!("{}-blocking", self.thread_name),
                stack_size: self.thread_stack_size,
                hooks: self.thread_hooks.clone(),
            },
            self.event_ring.map(|cap| (cap, self.task_statistics)),
            self.poll_time_histogram,
            (self.stall_threshold, self.stall_stacks),
            current_thread,
            self.io_driver,
        )?;
        if let Some(name) = &self.name {
            let _ = shared.name.set(name.as_str().into());
        }
        if self.thread_hooks.park.is_some() || self.thread_hooks.unpark.is_some() {
            let _ = shared.park_hooks.set(self.thread_hooks.clone());
        }
        // Paused before any task runs, so the first `Instant::now()` is already virtual.
        if self.start_paused {
            shared.driver.time.pause_at_start();
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
            shared.metrics.on_state(&shared.workers[0].rec, crate::telemetry::WorkerState::Parked);
        }
        // A current-thread runtime starts no worker thread: its worker runs inside
        // `block_on`, and its exit is counted by `current::exit_core`.
        let started = if current_thread { 0 } else { n };
        if started > 0 {
            // Until its thread runs it, a worker needs no watch (rule 7 in `idle`).
            shared.idle.expect_starts();
        }
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
                let _enter = crate::scheduler::handle::enter(&shared);
                hooks.run_thread(|| Scheduler::run_worker(Arc::clone(&shared), index));
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
        rt.monitor = crate::telemetry::stall::start(
            &shared.metrics,
            Arc::downgrade(&shared) as std::sync::Weak<dyn crate::telemetry::view::RuntimeView>,
            format!("{}-stall-monitor", self.thread_name),
        )?;
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

/// When tasks keep their statistics ([`Builder::task_statistics`]), with the event
/// ring on.
///
/// A task's statistics are its poll count, busy and queued times, two histograms, the
/// time its last poll ended and who woke it last. Keeping them costs every poll and
/// every wake a few stores into the task's memory: on a workload of tiny polls, most
/// of what the ring costs (`runtime/benches/README.md`). What a task keeps whatever this
/// says: its name, spawn location and group, its waits (the waits of its latest poll,
/// so [`TaskInfo::waits`](crate::telemetry::TaskInfo::waits) and the deadlock detector
/// work unwatched), the counts of its task group, and the ring's records of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskStatistics {
    /// Every task keeps them from its spawn, whoever watches.
    #[default]
    Always,
    /// Kept only while a reader watches the task list: a
    /// [`TaskWatch`](crate::telemetry::TaskWatch) (which the console server holds for
    /// each connected client) from its creation to its drop. A task's figures then add
    /// up what happened while someone watched; what it did unwatched is not in them,
    /// and figures that describe a moment (the time since its last poll, its last
    /// waker) show as unknown until they are written again while watched. The worker's
    /// schedule-latency histogram samples one wake in eight while nobody watches, as it
    /// does without the ring.
    WhileWatched,
}

/// The most events [`Builder::event_ring`] keeps per worker (16 Mi, 512 MiB a ring).
pub const MAX_EVENT_RING: usize = 1 << 24;

/// Worker threads `build` has not started: counted as exited when dropped.
struct Unstarted {
    shared: Arc<Scheduler>,
    left: usize,
}

impl Drop for Unstarted {
    fn drop(&mut self) {
        if self.left > 0 {
            self.shared.exited.lock().unwrap_or_else(|e| e.into_inner()).count += self.left;
        }
    }
}
