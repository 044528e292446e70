//! The demo workload: a long-lived mix of what a real service does, so the console has
//! something to show. `volt-console --demo` runs it in-process; the `demo` example of
//! `volt-examples` runs it in a process of its own. It is a crate of its own, with only
//! `volt` and `futures` beneath it, so the dashboard can run it without building the
//! examples' web stack.
//!
//! Every round (about 100 ms) it does some of:
//! * a burst of 500 to 2,000 tiny spawns, some of which yield;
//! * a fan-out of 64 tasks that each compute a little, joined (fan-in);
//! * 100 timers of 1 to 50 ms;
//! * TCP echo traffic: 4 named client tasks against a named echo server on loopback;
//! * a blocking call of 20 ms on the blocking pool;
//! * every 5 s, one slow task that holds its worker for 40 ms in `slow_checksum` (the
//!   console flags it, and its stalls view shows that function in the stuck stack).

use futures::{AsyncReadExt, AsyncWriteExt};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::net::{TcpListener, TcpStream};
use volt::runtime::Handle;
use volt::task::Builder as TaskBuilder;

/// A running demo workload; dropping it (or [`Demo::stop`]) stops it.
pub struct Demo {
    stop: Arc<AtomicBool>,
}

impl Demo {
    /// Start the workload on `handle`'s runtime.
    pub fn start(handle: &Handle) -> Demo {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        TaskBuilder::new().name("demo-driver").spawn_on(drive(s), handle);
        Demo { stop }
    }

    /// Ask every loop of the workload to finish.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A small xorshift, so the demo needs no `rand`.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn spin(d: Duration) -> u64 {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        std::hint::spin_loop();
    }
    x
}

/// CPU work that should have gone to `spawn_blocking`: the demo's stall. Not inlined, so
/// it keeps its own frame (and name) in the stack the stall monitor takes.
#[inline(never)]
pub fn slow_checksum() -> u64 {
    std::hint::black_box(spin(Duration::from_millis(40)))
}

async fn drive(stop: Arc<AtomicBool>) {
    let echo = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => {
            let addr = l.local_addr().ok();
            TaskBuilder::new().name("echo-server").spawn(echo_server(l, Arc::clone(&stop)));
            addr
        }
        Err(e) => {
            eprintln!("demo: no TCP echo traffic ({e})");
            None
        }
    };
    if let Some(addr) = echo {
        for i in 0..4 {
            TaskBuilder::new().name(format!("echo-client-{i}")).spawn(echo_client(addr, Arc::clone(&stop)));
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut round = 0u64;
    let mut last_slow = Instant::now();
    while !stop.load(Relaxed) {
        round += 1;
        // A burst of spawns.
        let burst = 500 + rng.below(1500);
        for i in 0..burst {
            volt::spawn(async move {
                if i % 4 == 0 {
                    volt::task::yield_now().await;
                }
            });
        }
        // Fan-out, fan-in.
        if round % 2 == 0 {
            let parts: Vec<_> =
                (0..64u64).map(|i| volt::spawn(async move { spin(Duration::from_micros(20 + i)) })).collect();
            for p in parts {
                let _ = p.await;
            }
        }
        // Timers.
        for _ in 0..100 {
            let d = Duration::from_millis(1 + rng.below(50));
            volt::spawn(async move { volt::time::sleep(d).await });
        }
        // Blocking work.
        if round % 3 == 0 {
            volt::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(20)));
        }
        // An occasional slow task: it holds its worker for 40 ms, a stall the monitor
        // catches with its stack (`slow_checksum` in the console's stalls view).
        if last_slow.elapsed() >= Duration::from_secs(5) {
            last_slow = Instant::now();
            TaskBuilder::new().name("slow-task").spawn(async {
                slow_checksum();
            });
        }
        volt::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn echo_server(listener: TcpListener, stop: Arc<AtomicBool>) {
    while !stop.load(Relaxed) {
        let accepted = volt::time::timeout(Duration::from_millis(200), listener.accept()).await;
        let mut s = match accepted {
            Ok(Ok((s, _))) => s,
            Err(_) => continue,
            // Out of file descriptors, say: the same error comes back at once while a
            // connection waits in the backlog, so wait a little rather than spin (the
            // dashboard owns the terminal, so there is nowhere to print it).
            Ok(Err(_)) => {
                volt::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let stop = Arc::clone(&stop);
        TaskBuilder::new().name("echo-conn").spawn(async move {
            let mut buf = [0u8; 1024];
            while !stop.load(Relaxed) {
                match volt::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
                    Err(_) => continue,
                    Ok(Ok(0)) | Ok(Err(_)) => return,
                    Ok(Ok(n)) => {
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }
}

async fn echo_client(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) {
    let Ok(mut s) = TcpStream::connect(addr).await else { return };
    let msg = [7u8; 64];
    let mut back = [0u8; 64];
    while !stop.load(Relaxed) {
        if s.write_all(&msg).await.is_err() || s.read_exact(&mut back).await.is_err() {
            return;
        }
        volt::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A runtime for the demo: the default worker count, the event ring on, the console on
/// `bind` (`None`: `VOLT_CONSOLE_BIND`, else `127.0.0.1:6670`).
pub fn runtime(bind: Option<&str>) -> std::io::Result<volt::Runtime> {
    let mut b = volt::runtime::Builder::new();
    b.event_ring(65_536).enable_console();
    if let Some(addr) = bind {
        b.console_bind(addr);
    }
    b.build()
}
