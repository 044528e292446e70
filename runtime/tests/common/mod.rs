//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

pub fn rt(workers: usize) -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(workers).build().expect("build runtime")
}

/// Counts drops of whatever holds it.
#[derive(Clone, Default)]
pub struct DropCount(pub Arc<AtomicUsize>);

impl DropCount {
    pub fn guard(&self) -> DropGuard {
        DropGuard(self.0.clone())
    }
    pub fn get(&self) -> usize {
        self.0.load(SeqCst)
    }
}

pub struct DropGuard(Arc<AtomicUsize>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A one-shot flag tasks can await and any thread can set: the wakers are taken and
/// woken from the setting thread, so each wake arrives whatever state its task is in.
/// Every task waiting is woken (two tasks may wait on one gate).
#[derive(Clone, Default)]
pub struct Flag(Arc<(AtomicBool, Mutex<Vec<Waker>>)>);

impl Flag {
    pub fn set(&self) {
        self.0 .0.store(true, SeqCst);
        let waiters = std::mem::take(&mut *self.0 .1.lock().unwrap());
        for w in waiters {
            w.wake();
        }
    }
    pub fn is_set(&self) -> bool {
        self.0 .0.load(SeqCst)
    }
    pub fn wait(&self) -> FlagWait {
        FlagWait(self.clone())
    }
}

pub struct FlagWait(Flag);

impl Future for FlagWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.is_set() {
            return Poll::Ready(());
        }
        {
            let mut waiters = self.0 .0 .1.lock().unwrap();
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
        }
        if self.0.is_set() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// A future that never completes (it drops its waker).
pub struct Never;

impl Future for Never {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

/// How many of this process's threads have a name starting with `prefix` (Linux).
pub fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.starts_with(prefix)))
                .count()
        })
        .unwrap_or(0)
}

/// Poll `cond` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// A TCP echo server: each accepted connection's bytes are written back until it ends.
pub async fn echo_server(listener: volt::net::TcpListener) {
    loop {
        let Ok((s, _)) = listener.accept().await else { continue };
        volt::spawn(echo_connection(s));
    }
}

/// Echo one connection's bytes back until it ends or fails.
pub async fn echo_connection(mut s: volt::net::TcpStream) {
    use futures::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if s.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// `conns` clients of an echo server at `addr`, each writing `msgs` lines and reading
/// each back (checked); how many lines came back in all.
pub async fn echo_clients(addr: std::net::SocketAddr, conns: u32, msgs: u32) -> u32 {
    use futures::{AsyncReadExt, AsyncWriteExt};
    let clients: Vec<_> = (0..conns)
        .map(|c| {
            volt::spawn(async move {
                let mut s = volt::net::TcpStream::connect(addr).await.unwrap();
                assert_eq!(s.peer_addr().unwrap(), addr);
                let mut got = 0;
                for m in 0..msgs {
                    let msg = format!("client {c} message {m:03}\n");
                    s.write_all(msg.as_bytes()).await.unwrap();
                    let mut back = vec![0u8; msg.len()];
                    s.read_exact(&mut back).await.unwrap();
                    assert_eq!(back, msg.as_bytes(), "echo mismatch");
                    got += 1;
                }
                got
            })
        })
        .collect();
    let mut total = 0;
    for c in clients {
        total += c.await.unwrap();
    }
    total
}
