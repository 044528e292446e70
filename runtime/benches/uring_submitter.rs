//! Which thread pays for an io_uring readiness event: a question that decides how an
//! io_uring driver can sit under a work-stealing scheduler (see `docs/io-uring.md`).
//!
//! ```text
//! cargo bench -p volt --bench uring_submitter
//! ```
//!
//! One thread waits for completions on a ring (`io_uring_enter` with a wait for one); an
//! eventfd is watched by a multishot `POLL_ADD` on that ring; the main thread writes the
//! eventfd 1,000 times, 200 µs apart, and the waiter reads it back after each wake. Four
//! ways to arm the watch:
//! * `epoll`: the baseline. The eventfd is in an epoll set, registered by another
//!   thread that then parks on a channel; the waiter sits in `epoll_wait`.
//! * `waiter`: the waiting thread armed the poll itself.
//! * `parked`: another thread armed it and then parked on a channel, as an idle worker
//!   of a shared ring would.
//! * `exited`: another thread armed it and exited.
//!
//! It prints, per case, the events the waiter saw, the wake latency (from the write to
//! the waiter's return from the kernel; p50, p90, p99) and the context switches the
//! arming thread made meanwhile. These are timings and counts of one machine's kernel,
//! not a test: it asserts nothing.

#[cfg(target_os = "linux")]
mod probe {
    use io_uring::{cqueue, opcode, types, IoUring};
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    const EVENTS: usize = 1_000;
    const TOKEN: u64 = 7;

    fn mono_ns() -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    fn gettid() -> i32 {
        // SAFETY: gettid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    /// A thread's (voluntary, involuntary) context switches so far.
    fn switches(tid: i32) -> (u64, u64) {
        let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap_or_default();
        let get = |k: &str| {
            s.lines().find(|l| l.starts_with(k)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
        };
        (get("voluntary_ctxt_switches"), get("nonvoluntary_ctxt_switches"))
    }

    fn arm(ring: &IoUring, fd: i32) {
        let poll = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32).multi(true).build().user_data(TOKEN);
        // SAFETY: only this thread touches the submission queue now, and a poll entry
        // points at no memory of ours.
        unsafe { ring.submission_shared().push(&poll).expect("a free submission slot") };
        ring.submit().expect("io_uring_enter");
    }

    fn drain(fd: i32) {
        let mut buf = 0u64;
        // SAFETY: `buf` is 8 writable bytes, what an eventfd read needs.
        unsafe { libc::read(fd, (&mut buf as *mut u64).cast(), 8) };
    }

    /// One case: returns (events seen, sorted wake latencies in ns, the arming thread's
    /// context switches while the events came).
    fn run(case: &str) -> (usize, Vec<u64>, (u64, u64)) {
        // SAFETY: plain system call; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(efd >= 0, "eventfd");
        let ring = Arc::new(IoUring::new(64).expect("an io_uring"));
        // SAFETY: plain system call; the result is checked.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(epfd >= 0, "epoll_create1");
        let (armed_tx, armed_rx) = mpsc::channel::<i32>();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let armer = match case {
            "waiter" => None,
            _ => {
                let ring = Arc::clone(&ring);
                let case = case.to_string();
                Some(std::thread::spawn(move || {
                    if case == "epoll" {
                        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLET) as u32, u64: TOKEN };
                        // SAFETY: valid descriptors and a valid event.
                        unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, efd, &mut ev) };
                    } else {
                        arm(&ring, efd);
                    }
                    armed_tx.send(gettid()).unwrap();
                    if case != "exited" {
                        let _ = stop_rx.recv();
                    }
                }))
            }
        };
        let armer_tid = if armer.is_some() { armed_rx.recv().unwrap() } else { 0 };
        if case == "exited" {
            // Let the armer's exit cancel its requests first.
            std::thread::sleep(Duration::from_millis(20));
        }
        let sent = Arc::new(AtomicU64::new(0));
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let waiter = {
            let ring = Arc::clone(&ring);
            let sent = Arc::clone(&sent);
            let case = case.to_string();
            std::thread::spawn(move || {
                if case == "waiter" {
                    arm(&ring, efd);
                }
                ready_tx.send(()).unwrap();
                let mut lat = Vec::with_capacity(EVENTS);
                let deadline = mono_ns() + 5_000_000_000;
                while lat.len() < EVENTS && mono_ns() < deadline {
                    if case == "epoll" {
                        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
                        // SAFETY: `evs` has room for the 4 events asked for.
                        let n = unsafe { libc::epoll_wait(epfd, evs.as_mut_ptr(), 4, 100) };
                        let now = mono_ns();
                        for _ in 0..n.max(0) {
                            lat.push(now.saturating_sub(sent.load(SeqCst)));
                        }
                    } else {
                        let ts = types::Timespec::new().nsec(100_000_000);
                        let args = types::SubmitArgs::new().timespec(&ts);
                        let _ = ring.submitter().submit_with_args(1, &args);
                        let now = mono_ns();
                        // SAFETY: only this thread reads the completion queue.
                        for cqe in unsafe { ring.completion_shared() } {
                            if cqe.result() < 0 || !cqueue::more(cqe.flags()) {
                                // The poll ended (cancelled with its submitter): no more come.
                                return lat;
                            }
                            lat.push(now.saturating_sub(sent.load(SeqCst)));
                        }
                    }
                    drain(efd);
                }
                lat
            })
        };
        ready_rx.recv().unwrap();
        let before = if armer_tid != 0 { switches(armer_tid) } else { (0, 0) };
        for _ in 0..EVENTS {
            std::thread::sleep(Duration::from_micros(200));
            sent.store(mono_ns(), SeqCst);
            let one = 1u64;
            // SAFETY: 8 readable bytes, what an eventfd write needs.
            unsafe { libc::write(efd, (&one as *const u64).cast(), 8) };
            if waiter.is_finished() {
                break;
            }
        }
        let after = if armer_tid != 0 && case != "exited" { switches(armer_tid) } else { before };
        let mut lat = waiter.join().unwrap();
        drop(stop_tx);
        if let Some(a) = armer {
            a.join().unwrap();
        }
        // SAFETY: descriptors this function opened, closed once.
        unsafe {
            libc::close(efd);
            libc::close(epfd);
        }
        lat.sort_unstable();
        (lat.len(), lat, (after.0 - before.0, after.1 - before.1))
    }

    pub fn main() {
        println!("| armed by | events seen | wake p50 | p90 | p99 | arming thread's context switches (voluntary, involuntary) |");
        println!("|---|---:|---:|---:|---:|---|");
        for case in ["epoll", "waiter", "parked", "exited"] {
            let (seen, lat, sw) = run(case);
            let q = |f: f64| {
                lat.get(((lat.len() as f64 * f) as usize).min(lat.len().saturating_sub(1)))
                    .map_or("-".to_string(), |ns| format!("{} µs", ns / 1000))
            };
            let who = match case {
                "epoll" => "another thread (epoll, baseline)",
                "waiter" => "the waiting thread",
                "parked" => "another thread, parked",
                _ => "another thread, exited",
            };
            let sw = if case == "exited" || case == "waiter" { "-".to_string() } else { format!("{}, {}", sw.0, sw.1) };
            println!("| {who} | {seen} of {EVENTS} | {} | {} | {} | {sw} |", q(0.5), q(0.9), q(0.99));
        }
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    probe::main();
    #[cfg(not(target_os = "linux"))]
    println!("io_uring is Linux's");
}
