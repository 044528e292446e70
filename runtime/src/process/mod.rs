//! Tokio's `process`: child processes with piped stdio, on Volt's reactor.
//!
//! ```
//! use volt::process::Command;
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     // `output` pipes the child's stdout and stderr, and collects both.
//!     let out = Command::new("echo").arg("hello").output().await?;
//!     assert!(out.status.success());
//!     assert_eq!(out.stdout, b"hello\n");
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! [`Command`] is std's builder with Tokio's async `spawn`/`status`/`output`. A piped
//! stdin, stdout or stderr is a non-blocking pipe registered with the reactor, so reading
//! a child's output holds no thread. A child's exit is awaited the same way: on Linux
//! 5.3 and later through a pidfd (`pidfd_open`) registered with the reactor, which
//! becomes readable when the child exits; elsewhere (or where the kernel refuses a
//! pidfd) a blocking-pool thread waits for the exit with `waitid(.., WNOWAIT)`, which
//! leaves the reaping to the `Child`, so a `kill` never signals a reused pid.
//!
//! A `Child` dropped before its exit was seen is reaped in the background (a task on the
//! runtime waits for it), unless no runtime is left to run that task; with
//! [`Command::kill_on_drop`] it is killed first. The waits are named for the console:
//! `wait process <pid>`, `read pipe`, `write pipe`.

mod pipe;

pub use pipe::{ChildStderr, ChildStdin, ChildStdout};

use crate::io::wait_label::{join_error, poll_labelled, StackLabel};
use crate::reactor::{Direction, Registration};
use crate::task::join::JoinHandle;
use std::ffi::OsStr;
use std::future::{poll_fn, Future};
use std::io;
use std::os::unix::io::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::pin::Pin;
use std::process::{ExitStatus, Output, Stdio};
use std::task::{ready, Context, Poll};

/// A builder for a child process, as Tokio's `Command`: std's `Command` inside, with an
/// async `spawn`/`status`/`output` and [`kill_on_drop`](Command::kill_on_drop).
#[derive(Debug)]
pub struct Command {
    std: std::process::Command,
    kill_on_drop: bool,
}

impl Command {
    /// A command to run `program` (looked up in `PATH` unless it is a path), inheriting
    /// this process's environment, directory and stdio.
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command::from(std::process::Command::new(program))
    }

    /// Add an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.std.arg(arg);
        self
    }

    /// Add arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Set an environment variable for the child.
    pub fn env(&mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> &mut Command {
        self.std.env(key, val);
        self
    }

    /// Set environment variables for the child.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Leave an environment variable out of the child's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.std.env_remove(key);
        self
    }

    /// Start the child with an empty environment (and only the variables set after).
    pub fn env_clear(&mut self) -> &mut Command {
        self.std.env_clear();
        self
    }

    /// The child's working directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.std.current_dir(dir);
        self
    }

    /// The child's stdin: `Stdio::piped()` gives [`Child::stdin`].
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stdin(cfg);
        self
    }

    /// The child's stdout: `Stdio::piped()` gives [`Child::stdout`].
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stdout(cfg);
        self
    }

    /// The child's stderr: `Stdio::piped()` gives [`Child::stderr`].
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stderr(cfg);
        self
    }

    /// Kill (`SIGKILL`) the child when its [`Child`] is dropped before the child exited.
    /// Off by default: a dropped child runs on (and is reaped in the background).
    pub fn kill_on_drop(&mut self, kill_on_drop: bool) -> &mut Command {
        self.kill_on_drop = kill_on_drop;
        self
    }

    /// Whether [`kill_on_drop`](Command::kill_on_drop) is set.
    pub fn get_kill_on_drop(&self) -> bool {
        self.kill_on_drop
    }

    /// The user id the child runs as (`setuid`).
    pub fn uid(&mut self, id: u32) -> &mut Command {
        self.std.uid(id);
        self
    }

    /// The group id the child runs as (`setgid`).
    pub fn gid(&mut self, id: u32) -> &mut Command {
        self.std.gid(id);
        self
    }

    /// The child's `argv[0]`, instead of the program's name.
    pub fn arg0(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.std.arg0(arg);
        self
    }

    /// Put the child in process group `pgroup` (0: a new group led by the child).
    pub fn process_group(&mut self, pgroup: i32) -> &mut Command {
        self.std.process_group(pgroup);
        self
    }

    /// Run `f` in the child after `fork` and before `exec`.
    ///
    /// # Safety
    /// As `std::os::unix::process::CommandExt::pre_exec`: `f` runs in a forked copy of a
    /// multi-threaded process and may only do what is async-signal-safe.
    pub unsafe fn pre_exec<F>(&mut self, f: F) -> &mut Command
    where
        F: FnMut() -> io::Result<()> + Send + Sync + 'static,
    {
        // SAFETY: the caller upholds `pre_exec`'s contract, passed on unchanged.
        unsafe { self.std.pre_exec(f) };
        self
    }

    /// The std `Command` inside.
    pub fn as_std(&self) -> &std::process::Command {
        &self.std
    }

    /// The std `Command` inside, to change.
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.std
    }

    /// The std `Command` inside (`kill_on_drop` is lost).
    pub fn into_std(self) -> std::process::Command {
        self.std
    }

    /// Start the child. Its piped stdio and its exit are registered with the current
    /// runtime's reactor, so this must run inside a Volt runtime (an error otherwise).
    pub fn spawn(&mut self) -> io::Result<Child> {
        let handle = crate::runtime::Handle::try_current()
            .ok()
            .ok_or_else(|| io::Error::other("volt::process::Command::spawn must be called inside a Volt runtime"))?;
        let mut std = self.std.spawn()?;
        let pipes = (|| -> io::Result<_> {
            Ok((
                std.stdin.take().map(ChildStdin::from_std).transpose()?,
                std.stdout.take().map(ChildStdout::from_std).transpose()?,
                std.stderr.take().map(ChildStderr::from_std).transpose()?,
            ))
        })();
        let watch = match &pipes {
            Ok(_) => ExitWatch::new(std.id()),
            Err(_) => Err(io::Error::other("unreached")),
        };
        match (pipes, watch) {
            (Ok((stdin, stdout, stderr)), Ok(watch)) => Ok(Child {
                stdin,
                stdout,
                stderr,
                inner: Some(ChildInner { std, status: None, watch, kill_on_drop: self.kill_on_drop, handle }),
            }),
            (Err(e), _) | (_, Err(e)) => {
                // A child nobody can wait for would be left running and unreaped.
                let _ = std.kill();
                let _ = std.wait();
                Err(e)
            }
        }
    }

    /// Run the child to its end, with this process's stdio unless set otherwise, and
    /// return its exit status. The child's piped handles, if any, are closed at once.
    pub fn status(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + use<> {
        let child = self.spawn();
        async move {
            let mut child = child?;
            drop((child.stdin.take(), child.stdout.take(), child.stderr.take()));
            child.wait().await
        }
    }

    /// Run the child to its end, capturing its stdout and stderr, and return them with
    /// its exit status. As Tokio's (and unlike std's), stdout and stderr are made pipes
    /// whatever they were set to, and the command keeps that setting; stdin is as set
    /// (inherited by default).
    pub fn output(&mut self) -> impl Future<Output = io::Result<Output>> + use<> {
        self.std.stdout(Stdio::piped());
        self.std.stderr(Stdio::piped());
        let child = self.spawn();
        async move { child?.wait_with_output().await }
    }
}

impl From<std::process::Command> for Command {
    fn from(std: std::process::Command) -> Command {
        Command { std, kill_on_drop: false }
    }
}

/// A running (or exited) child process, from [`Command::spawn`].
#[derive(Debug)]
pub struct Child {
    /// The child's stdin, if the command asked for `Stdio::piped()`.
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, if the command asked for `Stdio::piped()`.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, if the command asked for `Stdio::piped()`.
    pub stderr: Option<ChildStderr>,
    /// `None` only while a drop hands it to the background reaper.
    inner: Option<ChildInner>,
}

struct ChildInner {
    std: std::process::Child,
    /// The exit status, once reaped.
    status: Option<ExitStatus>,
    watch: ExitWatch,
    kill_on_drop: bool,
    /// The runtime the child was spawned on, or the one that waits for it after that
    /// one shut down: the pool fallback's jobs run there.
    handle: crate::runtime::Handle,
}

impl std::fmt::Debug for ChildInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child").field("pid", &self.std.id()).field("status", &self.status).finish_non_exhaustive()
    }
}

/// How the exit is awaited.
enum ExitWatch {
    /// A pidfd on the reactor: readable once the child has exited.
    Pidfd { fd: OwnedFd, reg: Registration },
    /// A blocking-pool job waiting (without reaping) for the exit; started by the first
    /// wait.
    Pool(Option<JoinHandle<()>>),
}

impl ExitWatch {
    fn new(pid: u32) -> io::Result<ExitWatch> {
        #[cfg(test)]
        if tests::FORCE_POOL.with(|f| f.get()) {
            return Ok(ExitWatch::Pool(None));
        }
        match pidfd_open(pid) {
            Some(fd) => {
                let raw = fd.as_raw_fd();
                let reg = Registration::new_fd(raw, mio::Interest::READABLE)?;
                Ok(ExitWatch::Pidfd { fd, reg })
            }
            None => Ok(ExitWatch::Pool(None)),
        }
    }
}

impl Drop for ExitWatch {
    fn drop(&mut self) {
        if let ExitWatch::Pidfd { fd, reg } = self {
            reg.deregister(&mut mio::unix::SourceFd(&fd.as_raw_fd()));
        }
    }
}

/// A pidfd for `pid`, or `None` where the kernel has none (before Linux 5.3, or a
/// sandbox that forbids the call).
#[cfg(target_os = "linux")]
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: `pidfd_open(2)` takes a pid and flags and returns a new descriptor or -1;
    // no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the call returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // Close-on-exec, so other children do not inherit it (pidfd_open sets it, but say
    // so rather than rely on it).
    // SAFETY: `fcntl` on the descriptor just made, integer arguments only.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    Some(fd)
}

#[cfg(not(target_os = "linux"))]
fn pidfd_open(_pid: u32) -> Option<OwnedFd> {
    None
}

/// Wait on a pool thread until `pid` has exited, leaving it unreaped (`WNOWAIT`).
fn wait_exit_unreaped(pid: u32) {
    loop {
        // SAFETY: `siginfo_t` is plain data; all zeros is a valid value for `waitid` to
        // overwrite.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a live `siginfo_t` the call writes into.
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

impl ChildInner {
    fn label(&self) -> StackLabel {
        let mut l = StackLabel::new(&[b"wait process "]);
        l.push_u64(self.std.id() as u64);
        l
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.std.try_wait()?;
        }
        Ok(self.status)
    }

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        loop {
            if let Some(s) = self.try_wait()? {
                return Poll::Ready(Ok(s));
            }
            let label = self.label();
            match &mut self.watch {
                ExitWatch::Pidfd { reg, .. } => {
                    let ev = match ready!(poll_labelled(&label, cx, |cx| reg.poll_ready(cx, Direction::Read))) {
                        Ok(ev) => ev,
                        // The runtime the child was spawned on has shut down, and a wait
                        // goes on in another one (Tokio allows it): wait through that
                        // runtime's blocking pool instead.
                        Err(e) => match crate::runtime::Handle::try_current().ok() {
                            Some(h) => {
                                self.handle = h;
                                self.watch = ExitWatch::Pool(None);
                                continue;
                            }
                            None => return Poll::Ready(Err(e)),
                        },
                    };
                    if let Some(s) = self.try_wait()? {
                        return Poll::Ready(Ok(s));
                    }
                    // Not exited after all (the readiness was a stale guess): wait for
                    // the next event.
                    if let ExitWatch::Pidfd { reg, .. } = &self.watch {
                        reg.clear_readiness(ev);
                    }
                }
                ExitWatch::Pool(job) => {
                    let pid = self.std.id();
                    let handle = &self.handle;
                    let h = job.get_or_insert_with(|| handle.spawn_blocking(move || wait_exit_unreaped(pid)));
                    let r = ready!(poll_labelled(&label, cx, |cx| Pin::new(&mut *h).poll(cx)));
                    *job = None;
                    r.map_err(join_error)?;
                }
            }
        }
    }

    fn start_kill(&mut self) -> io::Result<()> {
        // A child already reaped has nothing left to kill (and its pid may name another
        // process by now): nothing is sent, and that is no error.
        if self.try_wait()?.is_some() {
            return Ok(());
        }
        self.std.kill()
    }
}

impl Child {
    fn inner(&mut self) -> &mut ChildInner {
        self.inner.as_mut().expect("a Child keeps its process until it drops")
    }

    /// The child's pid, while its exit status has not been collected (`None` after).
    pub fn id(&self) -> Option<u32> {
        let inner = self.inner.as_ref()?;
        inner.status.is_none().then(|| inner.std.id())
    }

    /// Wait for the child to exit and return its status. Its piped stdin, if still here,
    /// is closed first, so a child reading it to the end can finish. Cancel safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        let inner = self.inner();
        poll_fn(|cx| inner.poll_wait(cx)).await
    }

    /// The exit status if the child has exited (reaping it), `None` if it still runs.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.inner().try_wait()
    }

    /// Send the child `SIGKILL` without waiting for its exit (nothing, and `Ok`, once its
    /// exit was collected). Until `wait` or `try_wait` collects the exit, the killed
    /// child stays a zombie.
    pub fn start_kill(&mut self) -> io::Result<()> {
        self.inner().start_kill()
    }

    /// Send the child `SIGKILL` and wait for its exit.
    pub async fn kill(&mut self) -> io::Result<()> {
        self.start_kill()?;
        self.wait().await?;
        Ok(())
    }

    /// Close stdin, read all of stdout and stderr (whichever are piped) while waiting
    /// for the exit, and return them with the status. Reading both at once is what keeps
    /// a child that fills one pipe from blocking while the other is read.
    pub async fn wait_with_output(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let (out_pipe, err_pipe) = (self.stdout.take(), self.stderr.take());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut out_done, mut err_done) = (out_pipe.is_none(), err_pipe.is_none());
        let mut status = None;
        let inner = self.inner();
        poll_fn(|cx| {
            if !out_done {
                if let Poll::Ready(r) =
                    out_pipe.as_ref().map_or(Poll::Ready(Ok(())), |p| p.pipe().poll_read_to_end(cx, &mut out))
                {
                    r?;
                    out_done = true;
                }
            }
            if !err_done {
                if let Poll::Ready(r) =
                    err_pipe.as_ref().map_or(Poll::Ready(Ok(())), |p| p.pipe().poll_read_to_end(cx, &mut err))
                {
                    r?;
                    err_done = true;
                }
            }
            if status.is_none() {
                if let Poll::Ready(r) = inner.poll_wait(cx) {
                    status = Some(r?);
                }
            }
            match status {
                Some(s) if out_done && err_done => Poll::Ready(Ok::<_, io::Error>(s)),
                _ => Poll::Pending,
            }
        })
        .await
        .map(|status| Output { status, stdout: out, stderr: err })
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let Some(mut inner) = self.inner.take() else { return };
        if inner.status.is_some() || matches!(inner.try_wait(), Ok(Some(_)) | Err(_)) {
            return;
        }
        if inner.kill_on_drop {
            let _ = inner.std.kill();
        }
        // Reap it in the background: a task on the child's runtime waits for the exit
        // (holding no thread with a pidfd). A runtime that has shut down cancels the
        // task, and the child is left to the OS.
        // The current runtime if there is one (the child's own may have shut down).
        let handle = crate::runtime::Handle::try_current().unwrap_or_else(|_| inner.handle.clone());
        drop(handle.spawn(async move {
            let _ = poll_fn(|cx| inner.poll_wait(cx)).await;
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Spawn with the blocking-pool exit watch, as where there is no pidfd.
        pub(super) static FORCE_POOL: Cell<bool> = const { Cell::new(false) };
    }

    fn runtime() -> crate::Runtime {
        crate::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap()
    }

    /// Without a pidfd, the exit is awaited on the pool: the status is right, the wait is
    /// named, and a killed or dropped child is reaped all the same.
    #[test]
    fn the_pool_fallback_waits_reaps_and_names_the_wait() {
        let rt = runtime();
        FORCE_POOL.with(|f| f.set(true));
        let (codes, pid) = rt.block_on(async {
            let mut codes = Vec::new();
            for i in 0..8 {
                let mut c = Command::new("sh").args(["-c", &format!("exit {i}")]).spawn().unwrap();
                assert!(matches!(c.inner().watch, ExitWatch::Pool(_)));
                codes.push(c.wait().await.unwrap().code().unwrap());
            }
            let out = Command::new("echo").arg("pool").output().await.unwrap();
            assert_eq!(out.stdout, b"pool\n");
            let dropped = Command::new("sleep").arg("30").kill_on_drop(true).spawn().unwrap();
            let pid = dropped.id().unwrap();
            drop(dropped);
            (codes, pid)
        });
        assert_eq!(codes, (0..8).collect::<Vec<_>>());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // SAFETY: signal 0 only checks whether the pid names a process (a zombie too).
        while unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 {
            assert!(std::time::Instant::now() < deadline, "the dropped child was not reaped");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }

        // A wait on the pool is named for the console.
        let mut child = rt.block_on(async { Command::new("sleep").arg("30").kill_on_drop(true).spawn() }).unwrap();
        FORCE_POOL.with(|f| f.set(false));
        let pid = child.id().unwrap();
        let waiter = crate::task::Builder::new()
            .name("pool-waiter")
            .spawn_on(async move { (child.wait().await, child) }, rt.handle());
        let want = format!("wait process {pid}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let tasks = rt.handle().telemetry().tasks();
            let t = tasks.iter().find(|t| t.name.as_deref() == Some("pool-waiter"));
            if t.and_then(|t| t.waiting_on.as_ref()).is_some_and(|w| w.to_string() == want) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "not named: {t:?}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: killing our own child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        let (status, _child) = rt.block_on(waiter).unwrap();
        assert!(!status.unwrap().success());
    }
}
